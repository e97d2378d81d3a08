"""telemetry.testing and the pytest plugin: cheap to install, strict when asked to assert."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib.metadata import entry_points

import pytest

import telemetry
from telemetry.testing import Capture, capture


def _python(*flags: str, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *flags, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)


def test_the_installed_pytest_plugin_does_not_load_the_sdk() -> None:
    """Loading our pytest11 entry point (what pytest does at start-up) imports no OpenTelemetry SDK."""
    (plugin,) = [ep for ep in entry_points(group="pytest11") if ep.name == "outcome_telemetry"]
    done = _python(code="""
        import sys
        from importlib.metadata import entry_points
        (plugin,) = [ep for ep in entry_points(group="pytest11") if ep.name == "outcome_telemetry"]
        module = plugin.load()
        assert hasattr(module, "telemetry_capture"), dir(module)
        loaded = sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk", "telemetry")))
        print(loaded)
        assert loaded == [], loaded
    """)
    assert done.returncode == 0, done.stdout + done.stderr
    assert plugin.value == "pytest_outcome_telemetry"


def test_the_fixture_records_like_capture(telemetry_capture: Capture) -> None:
    """The plugin's fixture is a real capture: a decorated call lands in it."""

    @telemetry.instrument_tool(kind="read")
    def lookup() -> int:
        return 1

    lookup()
    assert telemetry_capture.calls("lookup", outcome="ok") == 1


def test_span_raises_assertion_error_for_zero_or_two_spans() -> None:
    """Capture.span says how many it found when there is not exactly one."""

    @telemetry.instrument_tool(kind="read")
    def lookup() -> int:
        return 1

    with capture() as cap:
        with pytest.raises(AssertionError, match="found 0"):
            cap.span("lookup")
        lookup(), lookup()
        with pytest.raises(AssertionError, match="found 2"):
            cap.span("lookup")


def test_span_still_raises_under_python_dash_o() -> None:
    """``python -O`` strips ``assert``; Capture.span's check is an explicit raise, so it stays."""
    done = _python("-O", code="""
        import telemetry
        from telemetry.testing import capture
        assert False, "this line proves -O is on"
        with capture() as cap:
            try:
                cap.span("never_called")
            except AssertionError as exc:
                print("raised:", exc)
            else:
                raise SystemExit("Capture.span returned without a span")
    """)
    assert done.returncode == 0, done.stderr
    assert "raised: expected exactly one span of 'never_called', found 0" in done.stdout
