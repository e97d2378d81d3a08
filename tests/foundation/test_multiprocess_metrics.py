"""Metrics from many worker processes: a real gunicorn with 3 workers on loopback, an instrumented
WSGI app, prometheus-client's multiprocess mode. Every call is counted once in the one /metrics,
whichever worker serves the scrape, across a worker killed with SIGKILL and one with SIGTERM; and
``outcome-telemetry metrics-serve DIR`` serves the same sums."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from telemetry import ConfigurationError
from telemetry import conventions as c

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BOUND_SECONDS = 60.0


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return str(response.read().decode())


def _wait_for(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + BOUND_SECONDS
    while time.monotonic() < deadline:
        assert process.poll() is None, "gunicorn exited early"
        try:
            _get(url)
            return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"{url} did not answer within {BOUND_SECONDS:g} s")


def _calls(text: str, tool: str) -> tuple[float, float]:
    """The summed ``tool_calls_total`` and the duration histogram's count of ``tool``."""
    calls = count = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get(c.LABEL_TOOL) != tool:
                continue
            if sample.name == c.METRIC_TOOL_CALLS_TOTAL:
                calls += sample.value
            elif sample.name == c.METRIC_TOOL_CALL_DURATION + "_count":
                count += sample.value
    return calls, count


@pytest.fixture
def gunicorn(tmp_path: Path) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
    """gunicorn with 3 workers serving ``mp_app`` on a free loopback port; killed at the end."""
    folder = tmp_path / "metrics"
    folder.mkdir()
    (folder / "counter_999999.db").write_bytes(b"stale")  # a previous run's file: on_starting clears it
    base = f"http://127.0.0.1:{_free_port()}"
    env = {
        **os.environ,
        "PROMETHEUS_MULTIPROC_DIR": str(folder),
        "MP_TEST_BIND": base.removeprefix("http://"),
        "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", str(HERE / "mp_gunicorn.conf.py"), "mp_app:app"],
        env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=open(tmp_path / "gunicorn.log", "wb"),
        start_new_session=True,
    )
    try:
        _wait_for(base + "/metrics", process)
        yield base, folder, process
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(10)


def _burst(base: str, n: int) -> set[int]:
    """``n`` calls, 6 at a time so they spread over the workers; the pids that served them."""
    with ThreadPoolExecutor(6) as pool:
        return {int(pid) for pid in pool.map(lambda _: _get(base + "/call"), range(n))}


def _respawned(base: str, gone: int, workers: int = 3) -> int:
    """Call until ``workers`` live pids other than ``gone`` answered (gunicorn respawned it);
    returns how many calls that took (each counts)."""
    seen: set[int] = set()
    made = 0
    deadline = time.monotonic() + BOUND_SECONDS
    while len(seen - {gone}) < workers and time.monotonic() < deadline:
        seen |= _burst(base, 12)
        made += 12
    assert len(seen - {gone}) >= workers, f"gunicorn did not bring the worker count back to {workers}"
    return made


@pytest.mark.slow
def test_every_call_is_counted_once_across_workers_and_restarts(gunicorn: tuple[str, Path, subprocess.Popen[bytes]]) -> None:
    """3 workers, one SIGKILLed and one SIGTERMed mid-run: the one /metrics counts every call made."""
    base, folder, _ = gunicorn
    made = 60
    pids = _burst(base, made)
    assert len(pids) >= 2, "the calls did not spread over workers: the sum would prove nothing"
    assert not (folder / "counter_999999.db").exists()
    killed = sorted(pids)[0]
    os.kill(killed, signal.SIGKILL)
    made += _respawned(base, killed)
    stopped = sorted(pids - {killed})[0]
    os.kill(stopped, signal.SIGTERM)
    made += _respawned(base, stopped)
    _burst(base, 30)
    made += 30
    scrapes = [_calls(_get(base + "/metrics"), "lookup_order") for _ in range(6)]  # served by several workers
    assert set(scrapes) == {(float(made), float(made))}, (made, scrapes)
    assert len({p.name for p in folder.glob("counter_*.db")}) >= 4  # the dead workers' files are kept in the sums


@pytest.mark.slow
def test_metrics_serve_sums_the_folder(gunicorn: tuple[str, Path, subprocess.Popen[bytes]]) -> None:
    """``outcome-telemetry metrics-serve DIR`` serves the same sums as the workers, and stops on SIGTERM."""
    base, folder, _ = gunicorn
    _burst(base, 24)
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "telemetry.cli", "metrics-serve", str(folder), "--metrics-port", str(port)],
        stdout=subprocess.PIPE, cwd=ROOT, start_new_session=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline().decode()
        assert f"127.0.0.1:{port}/metrics" in line and str(folder) in line
        assert _calls(_get(f"http://127.0.0.1:{port}/metrics"), "lookup_order") == (24.0, 24.0)
        server.send_signal(signal.SIGTERM)
        assert server.wait(BOUND_SECONDS) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(10)


def test_metrics_serve_refuses_a_missing_folder(tmp_path: Path) -> None:
    """A folder that does not exist is a usage error (exit 2) naming it."""
    done = subprocess.run(
        [sys.executable, "-m", "telemetry.cli", "metrics-serve", str(tmp_path / "nope")],
        capture_output=True, text=True, timeout=BOUND_SECONDS, cwd=ROOT,
    )
    assert done.returncode == 2 and "nope" in done.stderr


def test_an_explicit_folder_must_agree_with_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """configure(multiprocess_dir=...) refuses a folder that is missing, or that contradicts the variable."""
    import telemetry

    with pytest.raises(ConfigurationError, match="does not exist"):
        telemetry.configure(traces_dir=None, multiprocess_dir=tmp_path / "missing", install_global=False)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "a"))
    with pytest.raises(ConfigurationError, match="one folder"):
        telemetry.configure(traces_dir=None, multiprocess_dir=tmp_path / "b", install_global=False)


EXPLICIT = """
import sys, telemetry
runtime = telemetry.configure(traces_dir=None, multiprocess_dir=sys.argv[1], install_global=False)
tool = telemetry.instrument_tool(name="ping", kind="read")(lambda: {"ok": True})
for _ in range(int(sys.argv[2])):
    tool()
print(runtime.metrics_text(openmetrics=False))
"""


def test_the_explicit_option_sums_processes_without_the_variable(tmp_path: Path) -> None:
    """Without PROMETHEUS_MULTIPROC_DIR, configure(multiprocess_dir=...) alone sums two processes' calls."""
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env["PYTHONPATH"] = str(ROOT)
    outputs = [
        subprocess.run([sys.executable, "-c", EXPLICIT, str(tmp_path), str(n)], env=env, capture_output=True,
                       text=True, timeout=BOUND_SECONDS, check=True).stdout
        for n in (3, 4)
    ]
    assert _calls(outputs[0], "ping") == (3.0, 3.0)
    assert _calls(outputs[1], "ping") == (7.0, 7.0)  # the second process sees the first one's calls too


OBSERVED = """
import sys, telemetry
from telemetry import conventions as c
runtime = telemetry.configure(traces_dir=None, multiprocess_dir=sys.argv[1], install_global=False)
runtime.provider.add_span_processor(telemetry.observe_tool_spans())
tracer = runtime.provider.get_tracer("a-peer-instrumentation")
attributes = {c.GEN_AI_OPERATION_NAME: c.OPERATION_EXECUTE_TOOL, c.GEN_AI_TOOL_NAME: "charge",
              c.GEN_AI_TOOL_CALL_RESULT: '{"success": false, "error": "quota_exceeded"}'}
for _ in range(int(sys.argv[2])):
    tracer.start_span("execute_tool charge", attributes=attributes).end()
print(runtime.metrics_text(openmetrics=False))
"""


def test_peer_tool_spans_reach_the_folder_as_they_end(tmp_path: Path) -> None:
    """observe_tool_spans in multiprocess mode writes each count to the worker's file as the span
    ends (another process serves /metrics from the folder, so a count held until this process's
    own metrics are collected would never be seen)."""
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", OBSERVED, str(tmp_path), "5"], env=env, capture_output=True,
                         text=True, timeout=BOUND_SECONDS, check=True).stdout
    assert _calls(out, "charge") == (5.0, 5.0)
