"""Terminal injection: values built to break out of the output (OSC 52 writing the clipboard, CSI
erasing the line, a carriage return, 8-bit CSI, a bidirectional override) planted in every free-text
field of a crew's traces reach no terminal raw, whatever prints them: the forensics report, every
question's table and CSV, the JSON, an error naming a hostile file, ``watch``'s finding lines and
the audit's text. Each is shown as a visible escape instead, so on-call still sees what was there.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from telemetry import conventions as c
from telemetry.forensics import QUESTION_NAMES
from telemetry.forensics._cli import main as forensics_main

from forensics_incidents import planted

REPO = Path(__file__).resolve().parents[2]
HOSTILE = "\x1b]52;c;aGFja2Vk\x07\x1b[2K\r\x9b2J\u202e\x08"
"""OSC 52 (set the clipboard to "hacked"), BEL, CSI erase line, CR, 8-bit CSI erase screen, RLO, BS."""
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]")
"""What must never reach a terminal (newline and tab are the layout)."""

FREE_TEXT = (c.STATE_KEY, c.DELEGATION_TASK_ID, c.DELEGATION_ROOT_TASK_ID, c.DELEGATION_ORIGIN_TASK_ID,
             c.DELEGATION_CONSTRAINTS_CARRIED, c.DELEGATION_CONSTRAINTS_WAIVED, c.DELEGATION_WAIVER_REASONS,
             c.OBJECTIVE_TASK_ID, c.PLAN_ID, c.IDEMPOTENCY_KEY_HASH, c.IDEMPOTENCY_PAYLOAD_HASH)


def _poisoned(value: object) -> object:
    if isinstance(value, str):
        return value + HOSTILE
    if isinstance(value, list):
        return [_poisoned(v) for v in value]
    return value


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The planted crew with HOSTILE appended to every tool name, agent, run and free-text value
    (consistently, so every incident is still found)."""
    builder = planted()
    for span in builder.spans:
        span.tool += HOSTILE
        span.agent = None if span.agent is None else span.agent + HOSTILE
        span.run += HOSTILE
        span.attributes = {k: _poisoned(v) if k in FREE_TEXT else v for k, v in span.attributes.items()}
    return builder.write(tmp_path_factory.mktemp("hostile") / "crew.jsonl")


def _clean(text: str, where: str) -> None:
    found = RAW.search(text)
    assert found is None, f"{where}: {found.group()!r} raw at {found.start()}: {text[max(found.start() - 60, 0):found.start() + 20]!r}"


def test_the_report_and_every_question_print_no_raw_control(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    streams = sys.stdout, sys.stderr
    assert forensics_main(["report", str(hostile)]) == 0
    assert (sys.stdout, sys.stderr) == streams  # the command's filter is gone once it ended
    out, err = capsys.readouterr()
    _clean(out + err, "report")
    assert "\\x1b]52" in out
    assert forensics_main(["report", str(hostile), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    _clean(out + err, "report --format json")
    assert json.loads(out)["questions"]  # the JSON still carries the values themselves, escaped by JSON
    shown = 0
    for question in QUESTION_NAMES:  # JSON rows of every question are in the report's JSON above
        for fmt in ("text", "csv"):
            assert forensics_main(["run", question, str(hostile), "--format", fmt]) == 0, question
            out, err = capsys.readouterr()
            _clean(out + err, f"run {question} --format {fmt}")
            shown += "\\x1b]52" in out
    assert shown >= 10  # most questions found their incident and printed its hostile values, escaped


def test_an_error_naming_a_hostile_file_is_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / f"spans{HOSTILE.replace(chr(0), '')}.jsonl"
    bad.write_text('{"not": "otlp"}\n')
    assert forensics_main(["report", str(bad)]) == 2
    out, err = capsys.readouterr()
    _clean(out + err, "error")
    assert "\\x1b]52" in err


def test_watch_prints_its_new_findings_escaped(hostile: Path, tmp_path: Path) -> None:
    """The real `watch` command over the hostile traces: its finding lines and progress, as a
    terminal would get them, hold no raw control character."""
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "crew.jsonl").write_bytes(hostile.read_bytes())
    log = tmp_path / "watch.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    with log.open("w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "telemetry.cli", "watch", str(tmp_path / "traces"),
                                 "--metrics-port", "0", "--interval", "0.2", "--settle", "0", "--last", "3650d"],
                                stdout=sink, stderr=sink, env=env)
    try:
        deadline = time.monotonic() + 60
        while log.read_text(errors="replace").count("new finding:") < 3:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    text = log.read_text()
    _clean(text, "watch")
    assert "\\x1b]52" in text


def test_the_audit_over_hostile_traces_prints_no_raw_control(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("telemetry.audit._cli")
    from telemetry.audit._cli import main as audit_main

    code = audit_main(["--traces", str(hostile)])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    _clean(out + err, "audit")
    assert "write_state" in out
