"""The command: --help says what a restart does, bad input exits 2, SIGINT and SIGTERM stop it cleanly."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from telemetry import conventions as c
from telemetry.forensics.watch._cli import duration, main


def test_help_says_a_restart_without_state_recounts(capsys: pytest.CaptureFixture[str]) -> None:
    """--help explains --state, including that without it a restart counts everything again."""
    assert main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Without --state" in text and "counts its findings again" in text
    assert c.METRIC_FORENSIC_FINDINGS_TOTAL in text


@pytest.mark.parametrize("argv", [["--interval", "soon", "x"], ["--metrics-port", "70000", "x"], []])
def test_bad_arguments_exit_2(argv: list[str], tmp_path: Path) -> None:
    """Unparseable durations and ports, and no PATHS, are usage errors."""
    assert main(argv) == 2


def test_a_missing_path_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A path that does not exist is named."""
    assert main([str(tmp_path / "missing"), "--metrics-port", "0"]) == 2
    assert "missing" in capsys.readouterr().err


def test_a_refused_start_leaves_the_signal_handlers_as_they_were(tmp_path: Path) -> None:
    """Exit 2 before the first pass must not leave SIGINT/SIGTERM pointing at a stopped watcher's
    handler (a program that calls main() in-process would then ignore Ctrl-C)."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    assert main([str(tmp_path / "missing"), "--metrics-port", "0"]) == 2
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_durations() -> None:
    """Durations take s, m, h, d or plain seconds."""
    assert [duration(t) for t in ("15", "90s", "15m", "1h", "2d", "0.5")] == [15, 90, 900, 3600, 172800, 0.5]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_it_cleanly(sig: signal.Signals, tmp_path: Path) -> None:
    """In a subprocess: /metrics is served, then SIGINT or SIGTERM ends it with status 0 and no traceback."""
    (tmp_path / "traces").mkdir()
    errors = tmp_path / "stderr"
    with errors.open("w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "telemetry.cli", "watch", str(tmp_path / "traces"),
                                 "--metrics-port", "0", "--interval", "0.2"], stdout=subprocess.DEVNULL, stderr=sink)
    try:
        deadline = time.monotonic() + 60
        url = None
        while url is None:
            assert proc.poll() is None, errors.read_text()
            assert time.monotonic() < deadline, errors.read_text()
            for word in errors.read_text().split():
                if word.startswith("http://127.0.0.1:"):
                    url = word.rstrip(",")
            time.sleep(0.1)
        with urllib.request.urlopen(url, timeout=10) as response:
            assert c.METRIC_FORENSIC_FINDINGS_TOTAL in response.read().decode()
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 0
        assert "Traceback" not in errors.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
