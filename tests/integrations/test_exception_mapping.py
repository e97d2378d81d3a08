"""instrument_tool(exceptions=...): a declared exception is the tool's answer, recorded ok, raised unchanged."""

from __future__ import annotations

import subprocess
import sys

import pytest

from telemetry import conventions as c
from telemetry import instrument_tool
from telemetry.exceptions import ConfigurationError
from telemetry.testing import Capture


class Retry(Exception):
    pass


class SpecificRetry(Retry):
    pass


def test_mapped_exception_is_transport_ok_with_its_outcome_and_propagates(telemetry_capture: Capture) -> None:
    """The nearest mapped class wins; the same exception object reaches the caller; the label is kept."""

    @instrument_tool(exceptions={Retry: "retry_requested", SpecificRetry: "invalid_argument"})
    def fetch(order_id: int) -> str:
        raise SpecificRetry("ids start at 100") if order_id < 0 else Retry("try later")

    raised = SpecificRetry("x")
    for arg in (-1, 1):
        with pytest.raises(Retry) as info:
            fetch(arg)
        raised = info.value
    assert str(raised) == "try later"
    first, second = telemetry_capture.spans("fetch")
    assert [s.attributes[c.TOOL_OUTCOME] for s in (first, second)] == [c.OUTCOME_INVALID_ARGUMENT, c.OUTCOME_RETRY_REQUESTED]
    assert {s.attributes[c.TOOL_TRANSPORT] for s in (first, second)} == {c.TRANSPORT_OK}
    assert telemetry_capture.calls("fetch", transport=c.TRANSPORT_OK, outcome=c.OUTCOME_RETRY_REQUESTED) == 1


def test_custom_code_is_a_metric_label_and_unmapped_exceptions_stay_errors(telemetry_capture: Capture) -> None:
    """A code given in exceptions= is a declared outcome on labels; other exceptions are transport errors."""

    @instrument_tool(exceptions={KeyError: "no_such_order"})
    async def lookup(order_id: str) -> str:
        if order_id == "boom":
            raise RuntimeError("db down")
        raise KeyError(order_id)

    import asyncio

    for arg in ("7", "boom"):
        with pytest.raises((KeyError, RuntimeError)):
            asyncio.run(lookup(arg))
    assert telemetry_capture.calls("lookup", transport=c.TRANSPORT_OK, outcome="no_such_order") == 1
    assert telemetry_capture.calls("lookup", transport=c.TRANSPORT_ERROR, outcome=c.OUTCOME_ERROR) == 1


@pytest.mark.parametrize(
    ("exceptions", "needle"),
    [
        ({"ValueError": "x"}, "is not an exception class"),
        ({int: "x"}, "is not an exception class"),
        ({ValueError: ""}, "short non-empty outcome code"),
        ({ValueError: "ok"}, "other than 'ok'"),
        ({ValueError: "x" * 65}, "short non-empty"),
        ([ValueError], "takes a mapping"),
    ],
)
def test_bad_exceptions_option_is_refused_at_decoration(exceptions: object, needle: str) -> None:
    """A wrong key or code raises ConfigurationError when decorating, naming the value."""
    with pytest.raises(ConfigurationError, match=needle):
        instrument_tool(exceptions=exceptions)(lambda: None)  # type: ignore[call-overload]


def test_importing_telemetry_imports_no_framework() -> None:
    """`import telemetry` (and its integrations package) leaves every agent framework unimported."""
    code = (
        "import sys, telemetry, telemetry.integrations, telemetry.instrument; "
        "print([m for m in ('pydantic_ai', 'langchain_core', 'agents', 'langgraph') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
