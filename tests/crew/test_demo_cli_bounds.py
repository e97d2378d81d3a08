"""``outcome-telemetry demo`` refuses bad arguments up front (exit 2, nothing written) and treats a
closed stdout as a normal end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from telemetry.cli import main
from telemetry.demo._cli import MAX_AGENTS, MAX_BACKGROUND_STEPS, MAX_SEED, MAX_STEPS


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--agents", str(MAX_AGENTS + 1)], f"--agents {MAX_AGENTS + 1} is out of range"),
        (["--agents", "-1"], "--agents -1 is out of range"),
        (["--steps", str(MAX_STEPS + 1)], "--steps"),
        (["--agents", "100000", "--steps", "100000"], "out of range"),
        (["--agents", "1000", "--steps", "1000"], f"the limit is {MAX_BACKGROUND_STEPS:,}"),
        (["--seed", str(MAX_SEED + 1)], "--seed"),
        (["--seed", "-3"], "--seed -3 is out of range"),
        (["--seed", "9" * 5000], "--seed"),
        (["--metrics-port", "70000"], "--metrics-port 70000"),
        (["--port", "9464"], "unrecognized arguments: --port"),  # the old spelling is gone (CHANGELOG)
    ],
)
def test_out_of_bounds_numbers_exit_2_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    """Each bound is checked before the run: exit 2, the flag and the limit named, nothing written."""
    out = tmp_path / "out"
    assert main(["demo", "--out", str(out), *args]) == 2
    assert needle in capsys.readouterr().err
    assert not out.exists()


def test_out_under_a_regular_file_exits_2_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--out below a file (or naming a file) is refused with a message, not a traceback and exit 1."""
    blocker = tmp_path / "report.txt"
    blocker.write_text("not a folder")
    for out, needle in ((blocker / "demo", f"cannot be created: {blocker} is not a folder"), (blocker, "is a file")):
        assert main(["demo", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err


def test_help_documents_the_bounds(capsys: pytest.CaptureFixture[str]) -> None:
    """--help states every bound."""
    assert main(["demo", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"--agents 0..{MAX_AGENTS:,}" in text and f"at most {MAX_BACKGROUND_STEPS:,}" in text and "status 2" in text


@pytest.mark.slow
def test_a_closed_stdout_is_a_normal_exit(tmp_path: Path) -> None:
    """The reader closing the pipe first (``demo | head -0``) ends the demo with status 0, no traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "telemetry.cli", "demo", "--out", str(tmp_path / "out"), "--no-alerts",
         "--scenario", "split_brain"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert "Traceback" not in err and "BrokenPipeError" not in err
