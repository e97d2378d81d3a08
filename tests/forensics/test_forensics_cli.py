"""The forensics CLI, Parquet ingest, the SQL files' contract, and a round trip from real instrumented calls."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from telemetry import conventions as c
from telemetry.forensics import QUESTION_NAMES, ingest, open_traces, question
from telemetry.forensics._cli import main
from telemetry.runtime._resources import data_dir

from forensics_incidents import planted


@pytest.fixture()
def planted_file(tmp_path: Path) -> Path:
    return planted().write(tmp_path / "traces" / "crew.jsonl")


def test_list_names_every_question_with_its_description(capsys: pytest.CaptureFixture[str]) -> None:
    """`list` prints one line per question: name and description; with a name, its whole header."""
    assert main(["list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == list(QUESTION_NAMES)
    assert "neither carried nor waived" in out[QUESTION_NAMES.index("constraint_loss_by_hop")]
    assert main(["list", "stale_sends"]) == 0
    assert capsys.readouterr().out.strip() == question("stale_sends").header


def test_old_spellings_are_usage_errors(planted_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before 1.0 the old spellings are gone, not aliased (CHANGELOG): a question name where the
    verb goes, `--list` and `--fail-on-findings` all exit 2."""
    for argv in (["stale_sends", str(planted_file)], ["--list"], ["report", str(planted_file), "--fail-on-findings"],
                 ["report", str(planted_file), "--format", "table"]):
        assert main(argv) == 2, argv
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("option", [["--since", "2026-01-01"], ["--until", "2026-01-02"], ["--last", "6h"],
                                    ["--service", "billing"], ["--table", "otel.spans"], ["--max-spans", "10"],
                                    ["--password-env", "CH_PASS"]], ids=lambda o: o[0])
def test_a_clickhouse_only_option_with_trace_paths_is_refused_not_ignored(
        planted_file: Path, option: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Trace files are read whole: a window, a service or a table given with PATHS would be ignored
    and the report would answer for spans the user meant to leave out, so it is refused by name
    (exit 2, nothing printed on stdout)."""
    for command in (["report"], ["run", "masked_failures"]):
        assert main([*command, str(planted_file), *option]) == 2
        out, err = capsys.readouterr()
        assert out == "" and f"error: {option[0]} applies to --clickhouse only" in err, err
    assert main(["report", str(planted_file), "-q", "--table", "otel_traces"]) == 0  # the default: nothing ignored


def test_watch_refuses_a_clickhouse_only_option_with_trace_paths(planted_file: Path) -> None:
    """`watch` takes its own --last for files too, and refuses --service (and the rest) with PATHS
    before it serves: run as a process, so a watch that did not refuse would be stopped by the
    timeout instead of serving on."""
    command = [sys.executable, "-m", "telemetry.cli", "watch", str(planted_file.parent), "--metrics-port", "0"]
    done = subprocess.run([*command, "--service", "billing"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.strip() == (
        "outcome-telemetry watch: error: --service applies to --clickhouse only: with trace PATHS it would be "
        "ignored; leave it out, or read the table with --clickhouse URL"), done.stderr


def test_report_exit_code_follows_fail_on(planted_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """report exits 0 normally (--fail-on never is the default) and 1 with --fail-on warning or
    critical when findings of that severity were found."""
    assert main(["report", str(planted_file), "-q"]) == 0
    text = capsys.readouterr().out
    assert "== constraint_loss_by_hop: 3 finding(s)" in text
    assert main(["report", str(planted_file), "-q", "--fail-on", "warning"]) == 1
    assert main(["report", str(planted_file), "-q", "--fail-on", "critical"]) == 1
    assert main(["report", str(planted_file), "-q", "--fail-on", "never"]) == 0


def test_fail_on_critical_ignores_warnings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`run` of a warning-level question with rows trips --fail-on warning, not --fail-on critical."""
    path = planted().write(tmp_path / "t.jsonl")
    assert main(["run", "divergent_reads", str(path), "-q"]) == 0
    assert "(no rows)" not in capsys.readouterr().out
    assert main(["run", "divergent_reads", str(path), "-q", "--fail-on", "warning"]) == 1
    assert main(["run", "divergent_reads", str(path), "-q", "--fail-on", "critical"]) == 0


def test_report_json_and_question_csv_formats(planted_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--format json gives parseable counts; a question with --format csv gives a header and one line per row."""
    assert main(["report", str(planted_file), "-q", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {q["question"]: q["rows"] for q in data["questions"]}["stale_sends"] == 2
    assert main(["run", "stale_sends", str(planted_file), "-q", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("verdict,verdict_basis,kind,run_id,agent_id") and len(lines) == 3
    assert {line.split(",")[0] for line in lines[1:]} == {c.VERDICT_HAPPENED, c.VERDICT_PREVENTED}


def test_clean_traces_do_not_fail_ci(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Only waivers (a record, not a finding) do not trip --fail-on warning."""
    from forensics_builder import TraceBuilder, attrs
    b = TraceBuilder()
    b.add("r", "register_task", c.KIND_DELEGATE, "p", 1, attrs=attrs(DELEGATION_TASK_ID="T", DELEGATION_ROOT_TASK_ID="T",
                                                                    DELEGATION_HOP=0, DELEGATION_CONSTRAINTS_CARRIED=["C1"]))
    b.add("r", "delegate", c.KIND_DELEGATE, "p", 2, attrs=attrs(
        DELEGATION_TASK_ID="T.1", DELEGATION_ORIGIN_TASK_ID="T", DELEGATION_ROOT_TASK_ID="T", DELEGATION_HOP=1,
        DELEGATION_CONSTRAINTS_CARRIED=[], DELEGATION_CONSTRAINTS_WAIVED=["C1"], DELEGATION_WAIVER_REASONS=["ok'd"]))
    path = b.write(tmp_path / "t.jsonl")
    assert main(["report", str(path), "-q", "--fail-on", "warning"]) == 0
    assert "waivers_by_hop: 1 record(s)" in capsys.readouterr().out


def test_bad_input_exits_2_with_the_reason_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing path exits 2 and says so on stderr; an unknown question is a usage error."""
    assert main(["report", str(tmp_path / "nope.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["run", "no_such_question", str(tmp_path)]) == 2


def test_ingest_is_incremental_and_questions_run_on_the_parquet(planted_file: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """ingest skips unchanged files, re-ingests a changed one, and the Parquet answers like the JSON."""
    out = tmp_path / "pq"
    first = ingest([planted_file.parent], out)
    assert first.ingested == [planted_file.resolve()] and first.spans == len(planted().spans)
    again = ingest([planted_file.parent], out)
    assert again.ingested == [] and again.unchanged == [planted_file.resolve()]
    with open(planted_file, "a") as handle:  # the exporter appended one more line
        handle.write(planted().lines(per_line=1000)[0] + "\n")
    os.utime(planted_file, ns=(planted_file.stat().st_atime_ns, planted_file.stat().st_mtime_ns + 1_000_000_000))
    third = ingest([planted_file.parent], out)
    assert third.ingested == [planted_file.resolve()] and third.spans == 2 * len(planted().spans)
    assert len(list(out.glob("*.parquet"))) == 1
    assert main(["ingest", str(planted_file), "--to", str(out), "-q"]) == 0
    assert "1 unchanged file(s) skipped" in capsys.readouterr().out
    assert main(["run", "waivers_by_hop", str(out), "-q", "--format", "json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert len(answer["rows"]) == 1  # the appended copy of every span counts once
    assert answer["evidence"]["duplicates"]["dropped"] == len(planted().spans)


def test_sql_files_have_headers_and_name_only_conventions(tmp_path: Path) -> None:
    """Each question file opens with question/columns/example; dotted names and outcomes exist in conventions."""
    names = {v for k, v in vars(c).items() if k.isupper() and isinstance(v, str)}
    folder = data_dir("queries")
    assert sorted(p.stem for p in folder.glob("*.sql")) == sorted([*QUESTION_NAMES, "spans"])
    for path in folder.glob("*.sql"):
        sql = path.read_text()
        code = "\n".join(line.split("--")[0] for line in sql.splitlines())
        for literal in re.findall(r"'([a-z_]+(?:\.[a-z_]+)+)'", code):
            assert literal in names, f"{path.name}: {literal!r} is not a name in conventions.py"
        for group in re.findall(r"outcome\s*(?:=|<>|IN)\s*\(?((?:'[a-z_]+'(?:,\s*)?)+)", code):
            for literal in re.findall(r"'([a-z_]+)'", group):
                assert literal in c.OUTCOMES, f"{path.name}: outcome {literal!r} is not in OUTCOMES"
        if path.stem != "spans":
            header = question(path.stem).header
            assert header.startswith(f"{path.stem}: ") and "Columns:" in header and "Example:" in header


def test_round_trip_from_real_instrumented_calls(tmp_path: Path) -> None:
    """Real decorated tool calls, written by our exporter, come back through the view and the questions."""
    from telemetry import agent, configure, current_call, instrument_tool

    store: dict[str, str] = {}

    @instrument_tool(kind=c.KIND_WRITE, readback=lambda call, result: store.get("k") == call.arguments["value"])
    def save(value: str) -> dict[str, bool]:
        call = current_call()
        assert call is not None
        call.set_attributes({c.STATE_KEY: "k", c.STATE_VERSION_EXPECTED: "v1"})
        store["k"] = value[:3]
        return {"ok": True}

    @instrument_tool(kind=c.KIND_DELEGATE)
    def delegate(task: str) -> dict[str, bool]:
        call = current_call()
        assert call is not None
        call.set_attributes({c.DELEGATION_TASK_ID: task, c.DELEGATION_ORIGIN_TASK_ID: "R",
                             c.DELEGATION_ROOT_TASK_ID: "R", c.DELEGATION_HOP: 1,
                             c.DELEGATION_CONSTRAINTS_CARRIED: ["C1"]})
        return {"ok": True}

    @instrument_tool(kind=c.KIND_DELEGATE)
    def register(task: str) -> dict[str, bool]:
        call = current_call()
        assert call is not None
        call.set_attributes({c.DELEGATION_TASK_ID: task, c.DELEGATION_ROOT_TASK_ID: task, c.DELEGATION_HOP: 0,
                             c.DELEGATION_CONSTRAINTS_CARRIED: ["C1", "C2"]})
        return {"ok": True}

    runtime = configure(service_name="forensics-rt", traces_dir=tmp_path / "traces", registry=CollectorRegistry(),
                        install_global=False)
    try:
        with agent("planner", conversation_id="rt-run"):
            save("a long value")
            register("R")
            delegate("R.1")
    finally:
        runtime.shutdown()
    with open_traces([tmp_path / "traces"]) as traces:
        rows = traces.connection.execute(
            "SELECT tool_name, agent_id, run_id, transport, readback, outcome, service_name, kind, state_key "
            "FROM spans ORDER BY start_time_unix_nano").fetchall()
        assert [r[0] for r in rows] == ["save", "register", "delegate"]
        assert rows[0][1:] == ("planner", "rt-run", c.TRANSPORT_OK, c.READBACK_MISMATCH, c.OUTCOME_READBACK_MISMATCH,
                               "forensics-rt", "internal", "k")
        assert [r["span_id"] for r in traces.run("readback_mismatches")] == \
            [traces.connection.execute("SELECT span_id FROM spans WHERE tool_name = 'save'").fetchall()[0][0]]
        assert {(r["constraint_id"], r["dropped_at_hop"]) for r in traces.run("constraint_loss_by_hop")} == {("C2", 1)}


def test_empty_trace_files_warn_that_nothing_was_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Empty files load, but the report says no spans were read rather than a bare 'Nothing found'."""
    (tmp_path / "a.jsonl").write_text("")
    (tmp_path / "b.jsonl").write_text("\n\n")
    assert main(["report", str(tmp_path), "-q"]) == 0
    captured = capsys.readouterr()
    assert "warning: no spans in 2 file(s)" in captured.err
    assert "warning: no spans in 2 file(s)" in captured.out  # the report itself carries it too
