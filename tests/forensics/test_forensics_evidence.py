"""Evidence integrity: copies, missing hops, unknown kinds and clock skew are counted and said, never silently answered."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from telemetry import conventions as c
from telemetry.forensics import open_traces
from telemetry.forensics._cli import main

from forensics_builder import TraceBuilder, attrs, hex_id, ns, otlp_span_json, service_line
from forensics_incidents import planted


def test_plain_and_gz_copies_count_once_and_are_reported_per_file(tmp_path: Path) -> None:
    """A .jsonl beside its gzip copy gives the same findings as the file alone; the drop is counted per file."""
    one = planted().write(tmp_path / "one" / "crew.jsonl")
    both = tmp_path / "both"
    both.mkdir()
    shutil.copy(one, both / "crew.jsonl")
    with gzip.open(both / "crew.jsonl.gz", "wb") as out:
        out.write(one.read_bytes())
    with open_traces([one.parent]) as alone, open_traces([both]) as doubled:
        alone_report, doubled_report = alone.report(), doubled.report()
        assert [(s.question.name, s.count, s.examples) for s in alone_report.sections] == \
               [(s.question.name, s.count, s.examples) for s in doubled_report.sections]
        duplicates = doubled.load_report.duplicates
        assert duplicates.dropped == len(planted().spans) and duplicates.conflicting == 0
        assert duplicates.dropped_by_file == {str((both / "crew.jsonl.gz").resolve()): len(planted().spans)}
        assert doubled.evidence.spans_kept == alone.evidence.spans_kept == len(planted().spans)
        assert any("duplicate span" in w for w in doubled.evidence.warnings())


def test_differing_copies_keep_the_fuller_one_and_are_listed(tmp_path: Path) -> None:
    """Two copies of one span that differ: the copy with more attributes is kept, and the span is listed as conflicting."""
    b = TraceBuilder()
    b.add("r", "read_state", c.KIND_READ, "a", 1, attrs=attrs(STATE_KEY="k", STATE_VERSION_READ="v1"))
    b.write(tmp_path / "a.jsonl")
    b.spans[0].attributes = {}  # the same ids, fewer attributes
    b.write(tmp_path / "b.jsonl")
    with open_traces([tmp_path]) as traces:
        duplicates = traces.load_report.duplicates
        assert duplicates.conflicting == 1 and duplicates.dropped == 1
        assert duplicates.conflicts[0]["kept_file"] == str((tmp_path / "a.jsonl").resolve())
        assert traces.connection.execute("SELECT state_key FROM spans").fetchall() == [("k",)]


def _chain(b: TraceBuilder, *, root: bool, middle: bool) -> None:
    if root:
        b.add("r", "register_task", c.KIND_DELEGATE, "p", 1, attrs=attrs(
            DELEGATION_TASK_ID="T", DELEGATION_ROOT_TASK_ID="T", DELEGATION_HOP=0,
            DELEGATION_CONSTRAINTS_CARRIED=["C1", "C2"]))
    if middle:
        b.add("r", "delegate", c.KIND_DELEGATE, "p", 2, attrs=attrs(
            DELEGATION_TASK_ID="T.1", DELEGATION_ORIGIN_TASK_ID="T", DELEGATION_ROOT_TASK_ID="T", DELEGATION_HOP=1,
            DELEGATION_CONSTRAINTS_CARRIED=["C1", "C2"]))
    b.add("r", "delegate", c.KIND_DELEGATE, "q", 3, attrs=attrs(
        DELEGATION_TASK_ID="T.1.1", DELEGATION_ORIGIN_TASK_ID="T.1", DELEGATION_ROOT_TASK_ID="T", DELEGATION_HOP=2,
        DELEGATION_CONSTRAINTS_CARRIED=["C1"]))


def test_a_missing_root_is_judged_from_the_earliest_hop_and_marked_inferred(tmp_path: Path) -> None:
    """Without the hop-0 registration, the drop of C2 at hop 2 is still found, with root_seen false and baseline_hop 1."""
    b = TraceBuilder()
    _chain(b, root=False, middle=True)
    with open_traces([b.write(tmp_path / "t.jsonl")]) as traces:
        rows = traces.run("constraint_loss_by_hop")
        assert [(r["finding"], r["constraint_id"], r["root_seen"], r["baseline_hop"], r["dropped_task_id"])
                for r in rows] == [("dropped", "C2", False, 1, "T.1.1")]
        assert traces.evidence.chains_without_root_count == 1


def test_a_missing_middle_hop_is_reported_as_a_gap_not_nothing(tmp_path: Path) -> None:
    """Root present, hop 1 absent: the hop-2 task's missing parent is a 'gap' row and in the evidence, never 'Nothing found'."""
    b = TraceBuilder()
    _chain(b, root=True, middle=False)
    path = b.write(tmp_path / "t.jsonl")
    with open_traces([path]) as traces:
        rows = traces.run("constraint_loss_by_hop")
        assert [(r["finding"], r["parent_task_id"], r["dropped_task_id"], r["root_seen"]) for r in rows] == \
               [("gap", "T.1", "T.1.1", True)]
        assert traces.evidence.gaps == [{"run_id": "r", "root_task_id": "T", "missing_task_id": "T.1",
                                         "task_id": "T.1.1", "hop": 2}]


def test_spans_without_tool_kind_are_inferred_where_attributes_decide_and_counted_otherwise(tmp_path: Path) -> None:
    """No tool.kind: read/write/delegate/send are inferred from their attributes; ambiguous and undecided spans are counted as ignored."""
    b = TraceBuilder()
    b.add("r", "fetch", None, "a", 1, attrs=attrs(STATE_KEY="k", STATE_VERSION_READ="v1"))
    b.add("r", "fetch", None, "b", 2, attrs=attrs(STATE_KEY="k", STATE_VERSION_READ="v2"))
    b.add("r", "store", None, "a", 3, attrs=attrs(STATE_KEY="k", STATE_VERSION_WRITTEN="v2"))
    b.add("r", "mail", None, "a", 4, attrs=attrs(OBJECTIVE_TASK_ID="P", POLICY_VERSION="1"))
    b.add("r", "odd", None, "a", 5, attrs=attrs(STATE_VERSION_READ="v1", POLICY_VERSION="1"))
    b.add("r", "other", None, "a", 6, attrs=attrs(STATE_KEY="k"))
    with open_traces([b.write(tmp_path / "t.jsonl")]) as traces:
        kinds = traces.connection.execute("SELECT tool_name, tool_kind, tool_kind_source FROM spans ORDER BY start_time").fetchall()
        assert kinds == [("fetch", "read", "inferred"), ("fetch", "read", "inferred"), ("store", "write", "inferred"),
                         ("mail", "send", "inferred"), ("odd", None, "ambiguous"), ("other", None, "undecided")]
        assert traces.evidence.kind_inferred == {"read": 2, "write": 1, "send": 1}
        assert sum(traces.evidence.ignored.values()) == 2
        assert traces.run("unpersisted_writes") == []  # an inferred write followed by no read: examined, nothing to find
        assert any("tool.kind" in caveat for caveat in traces.evidence.caveats("lost_updates"))


def test_clock_skew_is_detected_per_service_and_marks_close_orders_uncertain(tmp_path: Path) -> None:
    """billing's clock runs 1 s behind: its child spans start before their parents; rows decided within that are order_uncertain."""
    skew = 1_000_000_000
    run = {c.GEN_AI_CONVERSATION_ID: "r", c.GEN_AI_TOOL_NAME: "t"}
    planner, billing = [], []
    for i in range(5):  # five planner spans, each calling billing, whose clock is 1 s behind
        trace, parent = hex_id(f"t{i}", 32), hex_id(f"p{i}", 16)
        planner.append(otlp_span_json(trace, parent, "", ns(10 * i), ns(10 * i + 1), run))
        billing.append(otlp_span_json(trace, hex_id(f"c{i}", 16), parent, ns(10 * i + 0.2) - skew, ns(10 * i + 0.5) - skew, run))
    trace = hex_id("story", 32)
    # planner reads k at v1 at t=100; billing reads v2 at t=100.3 (its clock); planner writes expecting v1 at t=100.5
    planner.append(otlp_span_json(trace, hex_id("r1", 16), "", ns(100), ns(100.01), {**run, c.GEN_AI_AGENT_ID: "planner",
                   c.TOOL_KIND: c.KIND_READ, c.STATE_KEY: "k", c.STATE_VERSION_READ: "v1"}))
    billing.append(otlp_span_json(trace, hex_id("r2", 16), "", ns(100.3), ns(100.31), {**run, c.GEN_AI_AGENT_ID: "billing",
                   c.TOOL_KIND: c.KIND_READ, c.STATE_KEY: "k", c.STATE_VERSION_READ: "v2"}))
    planner.append(otlp_span_json(trace, hex_id("w1", 16), "", ns(100.5), ns(100.51), {**run, c.GEN_AI_AGENT_ID: "planner",
                   c.TOOL_KIND: c.KIND_WRITE, c.STATE_KEY: "k", c.STATE_VERSION_EXPECTED: "v1",
                   c.TOOL_OUTCOME: c.OUTCOME_OK, c.STATE_VERSION_WRITTEN: "v3"}))
    path = tmp_path / "t.jsonl"
    path.write_text(service_line("planner", planner) + "\n" + service_line("billing", billing) + "\n")
    with open_traces([path]) as traces:
        skews = traces.evidence.clock_skew
        assert [(s["service_name"], s["relative_to"], s["violations"]) for s in skews] == [("billing", "planner", 5)]
        assert skews[0]["offset_ms"] == pytest.approx(-800, abs=1)  # at least 0.8 s behind (started 0.8 s early)
        rows = traces.run("divergent_reads")
        assert [(r["writer_agent"], r["other_agent"], r["order_uncertain"]) for r in rows] == [("planner", "billing", True)]
        assert rows[0]["verdict"] == c.VERDICT_UNKNOWN and "clock skew" in rows[0]["verdict_basis"]
        assert any("clock skew" in w for w in traces.evidence.warnings())


def test_without_skew_nothing_is_order_uncertain(tmp_path: Path) -> None:
    """The planted incidents come from one service: no skew is reported and no row is order_uncertain."""
    with open_traces([planted().write(tmp_path / "t.jsonl")]) as traces:
        assert traces.evidence.clock_skew == []
        for name in ("divergent_reads", "lost_updates", "stale_sends", "stale_holders", "unpersisted_writes"):
            assert all(r["order_uncertain"] is False for r in traces.run(name)), name


def test_tool_spans_without_conversation_id_are_warned_about(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Spans without gen_ai.conversation.id: counted, warned, and each question's JSON carries the caveat."""
    b = TraceBuilder()
    b.add("r1", "read_state", c.KIND_READ, "a", 1, conversation=False, attrs=attrs(STATE_KEY="k", STATE_VERSION_READ="v1"))
    b.add("r2", "read_state", c.KIND_READ, "b", 2, conversation=False, attrs=attrs(STATE_KEY="k", STATE_VERSION_READ="v2"))
    path = b.write(tmp_path / "t.jsonl")
    assert main(["run", "divergent_reads", str(path), "-q", "--format", "json"]) == 0
    captured = capsys.readouterr()
    answer = json.loads(captured.out)
    assert answer["rows"] == [] and answer["evidence"]["runs_without_conversation_id"] == {"spans": 2, "traces": 2}
    assert any("conversation.id" in caveat for caveat in answer["caveats"])
    assert "no gen_ai.conversation.id" in captured.err
    assert main(["run", "divergent_reads", str(path), "-q"]) == 0
    assert "note: 2 tool span(s) have no gen_ai.conversation.id" in capsys.readouterr().out


def test_report_json_and_text_carry_the_evidence_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """report --format json has an evidence object; the text report an Evidence: section."""
    path = planted().write(tmp_path / "t.jsonl")
    assert main(["report", str(path), "-q", "--format", "json"]) == 0
    evidence = json.loads(capsys.readouterr().out)["evidence"]
    assert evidence["spans_read"] == evidence["spans_kept"] == len(planted().spans)
    assert {"duplicates", "spans_ignored", "runs_without_conversation_id", "chains_with_gaps", "clock_skew"} <= set(evidence)
    assert main(["report", str(path), "-q"]) == 0
    assert "Evidence:\n  spans read" in capsys.readouterr().out
