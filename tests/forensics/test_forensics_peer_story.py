"""Bring your own traces: the story (a failed charge, a refund that failed twice with identical
arguments, a lookup that worked, every span OK or unset) in every format other instrumentations
write, through every path that reads spans.

Two sets of files tell it: ``tests/peers/fixtures`` (written by the peers' real instrumentors:
OpenInference's LangChain and OpenAI Agents instrumentations, pydantic-ai, OpenLLMetry, logfire,
Langfuse, MLflow and MLflow's GenAI mode) and this folder's ``peer_fixtures`` (pydantic-ai real,
the others built by hand after each format's specification, small enough for the layer's unit
tests). For each file: ``masked_failures`` names both failures, ``repeated_executions`` names the
refund, the evidence names the format, ``audit --traces`` lists the three tools (in
tests/audit/test_audit_traces.py), and the same answers come from Parquet (``ingest``), from
``watch`` and from ClickHouse (test_forensics_peer_clickhouse.py).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from peer_story import FORMAT_NAMES, SELECTED_GLOB, fixture
from prometheus_client import CollectorRegistry

from telemetry import conventions as c
from telemetry.forensics import Forensics, ingest, open_traces
from telemetry.forensics._cli import main as forensics_main
from telemetry.forensics._peers import options_from
from telemetry.forensics.watch import Watcher, WatchOptions
from telemetry.forensics.watch._cli import build_parser as build_watch_parser

PEERS = Path(__file__).resolve().parents[1] / "peers" / "fixtures"
LOGFIRE_TOOLS = Path(__file__).resolve().parent / "peer_fixtures" / "logfire-tools.json"
REAL = {"openinference_langchain": c.FORMAT_OPENINFERENCE, "openinference_openai_agents": c.FORMAT_OPENINFERENCE,
        "pydantic_ai": c.FORMAT_GENAI, "mlflow_genai": c.FORMAT_GENAI, "openllmetry": c.FORMAT_TRACELOOP,
        "langfuse": c.FORMAT_LANGFUSE, "mlflow": c.FORMAT_MLFLOW, "logfire": c.FORMAT_SELECTED}
"""tests/peers' fixture files and the format each is read as."""
HAND = [pytest.param(fmt, fixture(fmt), id=f"hand-{fmt}") for fmt in FORMAT_NAMES]
STORIES = [pytest.param(fmt, PEERS / f"{name}.jsonl", id=name) for name, fmt in REAL.items()]
every_file = pytest.mark.parametrize("fmt, path", HAND + STORIES)
real_files = pytest.mark.parametrize("fmt, path", STORIES)


def tools_of(path: Path) -> tuple[str, str, str]:
    """(charge, refund, lookup): the story's tool names in that file (tests/peers names them longer)."""
    return ("charge_card", "refund_payment", "lookup_order") if path.parent == PEERS else ("charge", "refund", "lookup_order")


def selector(fmt: str, path: Path) -> str | None:
    """The ``--tool-spans`` a file needs: only logfire's plain function spans (format selected)."""
    if fmt != c.FORMAT_SELECTED:
        return None
    return str(LOGFIRE_TOOLS) if path.parent == PEERS else SELECTED_GLOB


def selector_args(fmt: str, path: Path) -> list[str]:
    chosen = selector(fmt, path)
    return ["--tool-spans", chosen] if chosen else []


def opened(fmt: str, path: Path, read: Path | None = None) -> Forensics:
    return open_traces([read or path], tool_spans=selector(fmt, path))


def check_story(traces: Forensics, fmt: str, names: tuple[str, str, str] = ("charge", "refund", "lookup_order")) -> None:
    """The story's findings: both failures masked, the refund repeated, the format named."""
    charge, refund, _ = names
    masked = {(r["tool_name"], r["outcome"]): r for r in traces.run("masked_failures")}
    assert set(masked) == {(charge, "quota_exceeded"), (refund, "refund_window_closed")}
    assert masked[(refund, "refund_window_closed")]["calls"] == 2
    assert {r["span_format"] for r in masked.values()} == {fmt}
    assert all(set(r["status_codes"]) <= {"ok", "unset"} for r in masked.values())
    repeated = traces.run("repeated_executions")
    assert [(r["tool_name"], r["calls"], r["span_format"]) for r in repeated] == [(refund, 2, fmt)]
    assert repeated[0]["outcomes"] == ["refund_window_closed"]
    assert traces.evidence.formats.names() == [fmt]
    counts = traces.evidence.formats.formats[fmt]
    assert counts.tool_calls == 4 and counts.results_judged == 4 and counts.without_result == 0


@every_file
def test_the_story_is_found_in_every_format(fmt: str, path: Path) -> None:
    charge, refund, lookup = tools_of(path)
    with opened(fmt, path) as traces:
        check_story(traces, fmt, tools_of(path))
        tools = traces.connection.execute(
            "SELECT tool_name, transport, readback, tool_kind FROM spans WHERE span_format = ? "
            "ORDER BY start_time_unix_nano", [fmt]).fetchall()
        assert [t[0] for t in tools] == [charge, refund, refund, lookup]
        assert {t[1] for t in tools} == {c.TRANSPORT_OK} and {t[2] for t in tools} == {c.READBACK_UNKNOWN}
        assert [t[3] for t in tools] == [c.KIND_WRITE, None, None, c.KIND_READ]  # charge, refund (undecided), lookup


@real_files
def test_the_report_says_what_could_not_be_judged_and_never_nothing_found_for_it(
        fmt: str, path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Text, JSON and HTML: the findings, the format in the evidence, and the questions peers cannot
    feed (versions, read-backs, delegation) as not judged, each with its reason."""
    args = ["report", str(path), "-q"] + selector_args(fmt, path)
    forensics_main(args)
    text = capsys.readouterr().out
    assert "== masked_failures: 2 finding(s)" in text and "== repeated_executions: 1 finding(s)" in text
    assert f"    {fmt}: " in text  # the evidence's span-format line
    not_judged = text.split("Not judged")[1]
    for name in ("lost_updates", "silent_failures", "constraint_loss_by_hop", "readback_mismatches"):
        assert name in not_judged
    nothing = text.split("Nothing found: ")[1] if "Nothing found: " in text else ""
    assert "lost_updates" not in nothing and "silent_failures" not in nothing
    forensics_main(args + ["--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    questions = {q["question"]: q for q in doc["questions"]}
    assert questions["masked_failures"]["rows"] == 2 and questions["repeated_executions"]["rows"] == 1
    assert questions["lost_updates"]["not_judged"] and questions["masked_failures"]["not_judged"] is None
    assert doc["evidence"]["span_formats"]["formats"][fmt]["tool_calls"] == 4


@real_files
def test_parquet_from_ingest_gives_the_same_answers(fmt: str, path: Path, tmp_path: Path) -> None:
    ingest([path], tmp_path / "pq")
    with opened(fmt, path, tmp_path / "pq") as parts, opened(fmt, path) as lines:
        check_story(parts, fmt, tools_of(path))
        for name in ("masked_failures", "repeated_executions"):
            assert parts.run(name) == lines.run(name)


@real_files
def test_watch_counts_both_findings_once(fmt: str, path: Path, tmp_path: Path) -> None:
    """``watch`` reads through the loader, so the layer applies: the masked failures (one per tool
    and outcome) are counted, once however many passes. The repeated refund is not: both calls
    reported a failure, so whether either moved money is unknown (a report row, never a page)."""
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(path, folder / "peer.jsonl")
    args = build_watch_parser().parse_args([str(folder)] + selector_args(fmt, path))  # as `watch` is told
    assert (args.tool_spans or None) == ([selector(fmt, path)] if selector(fmt, path) else None)
    registry = CollectorRegistry()
    peer_options = options_from(args.tool_spans or None, args.result_shape or None)
    w = Watcher(WatchOptions(paths=(str(folder),), settle=0.0, peer_options=peer_options), registry=registry)
    try:
        first = w.run_pass()
        found = sorted((f.question, f.key) for f in first.new)
        assert [q for q, _ in found] == ["masked_failures", "masked_failures"]
        with opened(fmt, path) as traces:
            assert [r["verdict"] for r in traces.run("repeated_executions")] == [c.VERDICT_UNKNOWN]
        assert w.run_pass().new == []
        sample = registry.get_sample_value(c.METRIC_FORENSIC_FINDINGS_TOTAL, {c.LABEL_QUESTION: "masked_failures"})
        assert sample == 2
    finally:
        w.close()


def _content_free(value: Any, forbidden: tuple[str, ...]) -> None:
    text = json.dumps(value, default=str)
    for word in forbidden:
        assert word not in text, word


@real_files
def test_no_content_reaches_a_report_without_show_content(fmt: str, path: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Without --show-content, no argument or result value is in the text, JSON or HTML report
    (only tool names, outcome codes and hashes); with it, the repeated call's arguments are."""
    base = ["report", str(path), "-q"] + selector_args(fmt, path)
    secret = ("p-9", "c-1", "payment_id") if path.parent == PEERS else ("o-1", "amount_cents", "paid")
    page = tmp_path / "report.html"
    forensics_main(base + ["--html", str(page)])
    text = capsys.readouterr().out
    forensics_main(base + ["--format", "json"])
    doc = capsys.readouterr().out
    html = page.read_text()
    assert 'id="not-judged"' in html and 'id="formats"' in html and f"<td>{fmt}</td>" in html  # the HTML evidence
    for shown in (text, doc, html):
        for value in secret:
            assert value not in shown, value
        assert "quota_exceeded" in shown and "refund" in shown  # outcome codes and tool names are
    forensics_main(base + ["--format", "json", "--show-content"])
    shown = json.loads(capsys.readouterr().out)
    repeated = next(q for q in shown["questions"] if q["question"] == "repeated_executions")
    assert secret[0] in repeated["examples"][0]["arguments"]


@pytest.mark.parametrize("option, value, named", [
    ("--tool-spans", "missing-selector.json", "missing-selector.json"),
    ("--result-shape", "no_such_module_here:shape", "no_such_module_here"),
    ("--result-shape", "no colon", "module:function"),
])
def test_watch_refuses_a_bad_peer_option_before_it_serves(option: str, value: str, named: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """``watch`` takes the layer's options as ``forensics report`` does, and refuses a bad one with exit 2."""
    from telemetry.forensics.watch._cli import main as watch_main

    assert watch_main([str(tmp_path), option, value, "--metrics-port", "0"]) == 2
    err = capsys.readouterr().err
    assert option in err and named in err


def test_an_openllmetry_run_is_its_workflow_span(tmp_path: Path) -> None:
    """traceloop-sdk's tool spans sit under @agent under @workflow: the workflow span is their run
    (not the trace: one trace may hold several workflows); a tool span with no workflow above it
    keeps the conversation id traceloop-sdk copies its session id into (else the trace id)."""
    with open_traces([PEERS / "openllmetry.jsonl"]) as traces:
        con = traces.connection
        [(workflow,)] = con.execute("SELECT span_id FROM spans WHERE attr(attributes, 'traceloop.span.kind') = 'workflow'"
                                    ).fetchall()
        runs = con.execute("SELECT DISTINCT run_id FROM spans WHERE span_format = 'traceloop'").fetchall()
        assert runs == [(workflow,)]
        assert con.execute("SELECT DISTINCT run_source FROM peer_spans WHERE is_tool_call").fetchall() == [
            ("workflow span",)]
    # The same tool spans with the workflow (and agent) spans left out: the conversation is the run.
    kept = [line for line in (PEERS / "openllmetry.jsonl").read_text().splitlines()
            if '"workflow"' not in line and '"agent"' not in line]
    assert kept and len(kept) < len((PEERS / "openllmetry.jsonl").read_text().splitlines())
    orphaned = tmp_path / "no-workflow.jsonl"
    orphaned.write_text("\n".join(kept) + "\n")
    with open_traces([orphaned]) as traces:
        rows = traces.connection.execute(
            "SELECT DISTINCT s.run_id, p.run_source FROM spans s JOIN peer_spans p USING (trace_id, span_id) "
            "WHERE s.span_format = 'traceloop'").fetchall()
        assert rows == [("sess-story-1", "gen_ai.conversation.id")]
