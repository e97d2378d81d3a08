"""`outcome-telemetry demo` (what `make demo` runs): a readable summary and an honest exit code."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from telemetry.cli import main


def test_demo_help_explains_scenarios_and_output(capsys: pytest.CaptureFixture[str]) -> None:
    """--help names every scenario, the output folder and the exit status."""
    assert main(["demo", "--help"]) == 0
    text = capsys.readouterr().out
    for needle in ("split_brain", "wrong_collection", "--seed", "--agents", "--serve", "manifest.json", "exit status"):
        assert needle in text


@pytest.mark.slow
def test_demo_prints_stories_findings_and_alerts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo prints each story in both modes, what the agent was told, the findings and the alerts."""
    assert main(["demo", "--out", str(tmp_path / "out")]) == 0
    text = capsys.readouterr().out
    for needle in ("1. split brain", "guarded: stopped at call time", 'legacy: went through "green"',
                   "told builder-b", "precision 1.00, recall 1.00", "ToolSilentFailure", "next: outcome-telemetry forensics report",
                   "verdict: 9 incidents happened; 9 were prevented by guards; 0 could not be judged",
                   "stale_sends (1 row, prevented)", "unpersisted_writes (1 row, happened)"):
        assert needle in " ".join(text.split()), needle  # wrapped lines read as one
    assert (tmp_path / "out" / "manifest.json").exists() and list((tmp_path / "out" / "traces").glob("*.jsonl"))


def test_demo_json_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--format json gives a machine-readable summary of one scenario."""
    assert main(["demo", "--out", str(tmp_path), "--scenario", "retry_after_timeout", "--no-alerts", "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["precision"] == summary["recall"] == 1.0
    assert {(i["mode"], i["facts"]["times_charged"]) for i in summary["incidents"]} == {("guarded", 1), ("legacy", 2)}
    assert summary["verdicts"] == {"happened": 1, "prevented": 1, "unknown": 0}  # the double charge; the replay
    assert summary["headline"] == "1 incident happened; 1 was prevented by guards; 0 could not be judged"


def test_demo_without_promtool_says_what_to_install_and_which_option_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no promtool on PATH the alert step is skipped with advice a user can follow: the package and --promtool."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert main(["demo", "--out", str(tmp_path / "out"), "--scenario", "retry_after_timeout"]) == 0
    text = capsys.readouterr().out
    assert "alerts: skipped (promtool is not on PATH" in text
    assert "apt-get install prometheus" in text and "--promtool PATH" in text and "promtool=<path>" not in text


def test_demo_uses_the_promtool_it_is_given(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """--promtool PATH evaluates the alerts with that promtool even when none is on PATH."""
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI") == "true":
            pytest.fail("promtool is required when CI=true; install Debian's prometheus package")
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert main(["demo", "--out", str(tmp_path / "out"), "--scenario", "retry_after_timeout", "--promtool", promtool,
                 "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["alerts_skipped"] is None and isinstance(summary["alerts"], list), summary


def test_demo_refuses_a_promtool_that_is_not_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--promtool naming no executable file exits 2 before running anything, naming the path."""
    assert main(["demo", "--out", str(tmp_path / "out"), "--promtool", str(tmp_path / "nope")]) == 2
    assert str(tmp_path / "nope") in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_demo_bad_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Negative sizes are refused with exit status 2 and a message naming them."""
    assert main(["demo", "--agents", "-1", "--steps", "3", "--no-alerts"]) == 2
    assert "-1" in capsys.readouterr().err


@pytest.mark.slow
def test_demo_serve_keeps_metrics_up_until_interrupted(tmp_path: Path) -> None:
    """--serve keeps /metrics up on 127.0.0.1 with the run's counters, writes a scrape config, and stops on SIGINT."""
    import signal
    import subprocess
    import sys
    import time
    import urllib.request

    proc = subprocess.Popen(
        [sys.executable, "-m", "telemetry.cli", "demo", "--serve", "--metrics-port", "0", "--scenario", "split_brain",
         "--no-alerts", "--out", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        # A child inherits an ignored SIGINT (pytest started as a background job of a script gets
        # one from the shell), and Python then never turns SIGINT into KeyboardInterrupt.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline, url = time.monotonic() + 60, None
        assert proc.stdout is not None
        while time.monotonic() < deadline and url is None:
            line = proc.stdout.readline()
            if line.startswith("serving /metrics at "):
                url = line.split()[3]
        assert url is not None and url.startswith("http://127.0.0.1:")
        body = urllib.request.urlopen(url, timeout=10).read().decode()
        assert 'tool_calls_total{outcome="rejected_stale_version"' in body
        assert url.split("/")[2] in (tmp_path / "prometheus.yml").read_text()
        proc.send_signal(signal.SIGINT)
        # Shutting down fsyncs the trace file, which waits for the disk: under another process's
        # heavy writes that can take far longer than usual. The bound only keeps a hang from lasting.
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
