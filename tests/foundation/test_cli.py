"""The top-level `outcome-telemetry` command: help, version, paths, quickstart, bad commands, and
a subcommand whose extra is missing (what every subcommand shares is walked in test_cli_walk.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import telemetry
from telemetry.cli import COMMANDS, command, main


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    """Bare `outcome-telemetry` prints help naming each command and the extra it needs."""
    assert main([]) == 0
    out = capsys.readouterr().out
    for row in COMMANDS:
        assert f"  {row.name}  " in out or f"  {row.name} " in out, row.name
    assert "[the forensics extra]" in out and "exit status" in out


def test_version_and_paths(capsys: pytest.CaptureFixture[str]) -> None:
    """--version prints the package version; paths names existing folders of shipped files."""
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == telemetry.__version__
    assert main(["paths"]) == 0
    lines = dict(line.split(": ", 1) for line in capsys.readouterr().out.splitlines())
    assert set(lines) == {"queries", "dashboards", "alerts"}
    assert (Path(lines["queries"]) / "spans.sql").is_file()
    assert (Path(lines["alerts"]) / "outcome-telemetry.rules.yml").is_file()


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown command or top-level flag exits 2 naming it (and the valid commands)."""
    assert main(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert "frobnicate" in err and "forensics" in err
    assert main(["--frobnicate"]) == 2
    assert "--frobnicate" in capsys.readouterr().err


@pytest.mark.parametrize("name", [c.name for c in COMMANDS if c.needs])
def test_a_missing_extra_is_one_line_naming_it(name: str, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """With the module an extra provides missing (None in sys.modules fails its import), the command
    exits 2 with one line naming the extra, and its --help still exits 0 saying what to install."""
    row = command(name)
    assert row.needs is not None
    monkeypatch.setitem(sys.modules, row.needs, None)
    assert main([name, "anything"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"[{row.extra}]" in err and err.startswith(f"outcome-telemetry {name}: error:")
    assert main([name, "--help"]) == 0
    assert f"[{row.extra}]" in capsys.readouterr().out


def test_quickstart_shows_the_three_successes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """quickstart writes a trace file and prints one ok call and two 200s with bad outcomes."""
    assert main(["quickstart", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert 'outcome="ok",readback="match",tool="save_note"' in out
    assert 'outcome="readback_mismatch",readback="mismatch",tool="save_note_lossy"' in out
    assert 'outcome="postcondition_failed"' in out and 'tool="reprice"' in out
    assert list((tmp_path / "traces").glob("quickstart-*.jsonl"))
    assert out.splitlines()[-1] == f"next: outcome-telemetry forensics report {tmp_path / 'traces'}"


def test_quickstart_next_step_runs_and_finds_both_bad_calls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command quickstart prints last works as printed and reports the two bad 200s."""
    assert main(["quickstart", "--out", str(tmp_path)]) == 0
    command = capsys.readouterr().out.splitlines()[-1].removeprefix("next: outcome-telemetry ").split()
    assert main(command) == 0
    report = capsys.readouterr().out
    silent = report.split("== silent_failures: 2 finding(s)")[1].split("\n== ")[0]
    for tool, outcome in (("save_note_lossy", "readback_mismatch"), ("reprice", "postcondition_failed")):
        assert re.search(rf"tool_name +{tool}\n +outcome +{outcome}\n", silent), silent


def test_quickstart_help_says_what_it_writes_where(capsys: pytest.CaptureFixture[str]) -> None:
    """quickstart --help names the folder it creates in the current folder and promises no wrong duration."""
    assert main(["quickstart", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "./quickstart-output" in text and "current folder" in text and "10-second" not in text
    assert main([]) == 0
    assert "10-second" not in capsys.readouterr().out
