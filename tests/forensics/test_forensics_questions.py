"""Every forensics question finds exactly the planted incidents, on JSON lines and on Parquet."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from telemetry import conventions as c
from telemetry.forensics import QUESTION_NAMES, Forensics, ingest, open_traces
from telemetry.forensics._questions import CONTENT_COLUMNS

from forensics_builder import T0_S
from forensics_incidents import planted, span_id, trace_id

B = planted()


@pytest.fixture(scope="module", params=["jsonl", "parquet"])
def traces(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forensics]:
    base = tmp_path_factory.mktemp(f"planted-{request.param}")
    # Small lines so the incidents spread over several TracesData objects and two files.
    half = len(B.spans) // 2
    from forensics_builder import TraceBuilder
    TraceBuilder(B.spans[:half]).write(base / "json" / "a.jsonl", per_line=5)
    TraceBuilder(B.spans[half:]).write(base / "json" / "sub" / "b.jsonl", per_line=7)
    source: Path = base / "json"
    if request.param == "parquet":
        ingest([source], base / "parquet")
        source = base / "parquet"
    with open_traces([source]) as opened:
        assert opened.load_report.spans == len(B.spans)
        yield opened


def project(rows: list[dict[str, Any]], *columns: str) -> set[tuple[Any, ...]]:
    return {tuple(r[col] for col in columns) for r in rows}


def test_divergent_reads_finds_the_stale_writer_and_the_fresh_one(traces: Forensics) -> None:
    """divergent_reads: one row per write after a divergent read, with the stale side and outcome."""
    rows = traces.run("divergent_reads")
    assert len(rows) == 3
    assert project(rows, "run_id", "state_key", "writer_agent", "writer_version", "other_agent",
                   "other_version", "version_at_write", "stale_side", "write_outcome", "lost_update") == {
        ("r-div", "invoice/42", "planner", "v3", "billing", "v4", "v4", "writer", c.OUTCOME_REJECTED_STALE_VERSION, False),
        ("r-div", "invoice/42", "billing", "v4", "planner", "v3", "v4", "other", c.OUTCOME_OK, False),
        ("r-split", "acct/1", "planner", "v1", "billing", "v2", "v2", "writer", c.OUTCOME_OK, True),
    }
    assert rows[0]["lost_update"] is True  # worst first
    assert rows[0]["write_span_id"] == span_id(B, "r-split", 65)


def test_lost_updates_finds_same_baseline_and_stale_baseline_writes(traces: Forensics) -> None:
    """lost_updates: both unguarded stories show a same-baseline pair and a stale-baseline write."""
    rows = traces.run("lost_updates")
    assert project(rows, "kind", "state_key", "baseline_version", "newer_version", "agent_id", "span_id") == {
        ("same_baseline", "acct/1", "v1", "v2", "planner", span_id(B, "r-split", 65)),
        ("stale_baseline", "acct/1", "v1", "v2", "planner", span_id(B, "r-split", 65)),
        ("same_baseline", "cart/9", "v7", "v8", "planner", span_id(B, "r-legacy", 124)),
        ("stale_baseline", "cart/9", "v7", "v8", "planner", span_id(B, "r-legacy", 124)),
    }
    assert len(rows) == 4
    earlier = {r["earlier_span_id"] for r in rows if r["kind"] == "same_baseline"}
    assert earlier == {span_id(B, "r-split", 63), span_id(B, "r-legacy", 123)}


def test_constraint_loss_by_hop_names_the_hop_and_agent_that_dropped_each_constraint(traces: Forensics) -> None:
    """constraint_loss_by_hop: C3 last seen at hop 2, C1 at hop 3, legacy C9 at hop 0; refusals ignored."""
    rows = traces.run("constraint_loss_by_hop")
    assert len(rows) == 3
    assert project(rows, "run_id", "root_task_id", "constraint_id", "last_hop_carried", "dropped_at_hop",
                   "dropped_task_id", "dropped_by_agent", "parent_task_id") == {
        ("r-del", "T1", "C3", 2, 3, "T1.1.1.1", "writer", "T1.1.1"),
        ("r-del", "T1", "C1", 3, 4, "T1.1.1.1.1", "reviewer", "T1.1.1.1"),
        (trace_id(B, "r-del2"), "R2", "C9", 0, 1, "R2.1", "planner", "R2"),
    }


def test_waivers_by_hop_lists_each_waiver_with_its_reason(traces: Forensics) -> None:
    """waivers_by_hop: the one waiver, with reason, hop, task and agent."""
    rows = traces.run("waivers_by_hop")
    assert project(rows, "run_id", "root_task_id", "hop", "task_id", "origin_task_id", "agent_id",
                   "constraint_id", "reason") == {
        ("r-del", "T1", 2, "T1.1.1", "T1.1", "researcher", "C2", "customer approved by phone"),
    }
    assert len(rows) == 1


def test_silent_failures_lists_silent_failures_only(traces: Forensics) -> None:
    """silent_failures: only spans marked tool.silent_failure; refusals and told failures excluded."""
    rows = traces.run("silent_failures")
    assert project(rows, "tool_name", "outcome", "spans") == {
        ("reprice", c.OUTCOME_POSTCONDITION_FAILED, 2),
        ("update_price", c.OUTCOME_READBACK_MISMATCH, 1),
    }
    assert rows[0]["tool_name"] == "reprice" and rows[0]["runs"] == 1
    assert rows[0]["example_trace_ids"] == [trace_id(B, "r-silent")]


def test_guard_refusals_give_the_reason_and_whether_the_agent_recovered(traces: Forensics) -> None:
    """guard_refusals: every refusal with its subject; recovered only by the same agent's later accepted call."""
    rows = traces.run("guard_refusals")
    assert len(rows) == 12
    recovered = [r for r in rows if r["recovered"]]
    assert project(recovered, "run_id", "agent_id", "reason", "subject_kind", "subject", "recovery_span_id") == {
        ("r-rec", "lead", c.OUTCOME_CONSTRAINT_MISSING, "task", "R3", span_id(B, "r-rec", 282)),
    }
    by_reason = {(r["run_id"], r["reason"], r["subject_kind"]) for r in rows}
    assert ("r-del", c.OUTCOME_CONSTRAINT_MISSING, "task") in by_reason
    assert ("r-idem", c.OUTCOME_DUPLICATE_REQUEST, "idempotency_key") in by_reason
    assert ("r-plan", c.OUTCOME_PLAN_EXPIRED, "plan") in by_reason
    assert ("r-obj", c.OUTCOME_STALE_POLICY, "objective") in by_reason
    assert sum(1 for r in rows if r["reason"] == c.OUTCOME_REJECTED_STALE_VERSION) == 6
    assert rows[-1]["recovered"], "unrecovered refusals come first"


def test_readback_mismatches_finds_the_one_mismatch(traces: Forensics) -> None:
    """readback_mismatches: the mismatching write only, not the matching one."""
    rows = traces.run("readback_mismatches")
    assert project(rows, "run_id", "tool_name", "state_key", "transport", "span_id") == {
        ("r-rb", "update_price", "price/sku-77", c.TRANSPORT_OK, span_id(B, "r-rb", 241)),
    }


def test_stale_sends_finds_the_refused_and_the_accepted_stale_send(traces: Forensics) -> None:
    """stale_sends: refused against a checked current version, and sent on a superseded one."""
    rows = traces.run("stale_sends")
    assert project(rows, "kind", "agent_id", "policy_task_id", "used_version", "current_version", "span_id") == {
        ("refused", "reviewer", "refunds-policy", "v1", "v2", span_id(B, "r-obj", 312)),
        ("sent_stale", "writer", "refunds-policy", "v1", "v2", span_id(B, "r-obj", 313)),
    }
    assert len(rows) == 2


def test_stale_holders_finds_agents_acting_on_a_superseded_objective(traces: Forensics) -> None:
    """stale_holders: writer (two accepted stale actions) and reviewer (one, refused); billing refreshed, writer's early send was current."""
    rows = traces.run("stale_holders")
    assert project(rows, "run_id", "agent_id", "objective_task_id", "held_version", "current_version",
                   "stale_actions", "accepted_stale_actions", "first_stale_tool", "span_id") == {
        ("r-obj", "writer", "refunds-policy", "v1", "v2", 2, 2, "send_email", span_id(B, "r-obj", 313)),
        # the reviewer's one stale action was the send the guard refused: prevented, not acted on
        ("r-obj", "reviewer", "refunds-policy", "v1", "v2", 1, 0, "send_email", span_id(B, "r-obj", 312)),
    }
    assert len(rows) == 2


def test_idempotency_conflicts_finds_refused_accepted_repeated_and_replayed_reuse(traces: Forensics) -> None:
    """idempotency_conflicts: one row of each kind, each against the original payload."""
    rows = traces.run("idempotency_conflicts")
    assert project(rows, "kind", "idempotency_key_hash", "payload_hash", "original_payload_hash", "span_id") == {
        ("conflict_refused", "k1", "p2", "p1", span_id(B, "r-idem", 363)),
        ("conflict_accepted", "k2", "p4", "p3", span_id(B, "r-idem", 365)),
        ("repeated_execution", "k3", "p5", "p5", span_id(B, "r-idem", 367)),
        ("replay", "k1", "p1", "p1", span_id(B, "r-idem", 362)),
    }
    assert len(rows) == 4


def test_unpersisted_writes_finds_the_write_the_next_read_contradicts(traces: Forensics) -> None:
    """unpersisted_writes: rev2's read-back matched, yet the next read showed rev1; rev1 and rev3 are fine."""
    rows = traces.run("unpersisted_writes")
    assert project(rows, "run_id", "state_key", "agent_id", "written_version", "readback", "read_version",
                   "reader_agent", "span_id", "read_span_id") == {
        ("r-lost", "profile/u1", "support", "rev2", c.READBACK_MATCH, "rev1", "auditor",
         span_id(B, "r-lost", 602), span_id(B, "r-lost", 603)),
    }


def test_plan_violations_finds_refused_commits_and_the_out_of_target_change(traces: Forensics) -> None:
    """plan_violations: the three refusals and the accepted commit that changed objects outside its target."""
    rows = traces.run("plan_violations")
    assert project(rows, "violation", "plan_id") == {
        (c.OUTCOME_POSTCONDITION_FAILED, "p-1"), (c.OUTCOME_PLAN_EXPIRED, "p-2"),
        (c.OUTCOME_PLAN_BINDING_MOVED, "p-3"), ("changed_outside_target", "p-4"),
    }
    assert len(rows) == 4
    moved = [r for r in rows if r["plan_id"] == "p-3"][0]
    assert moved["binding_moved"] == "collection"
    outside = [r for r in rows if r["plan_id"] == "p-4"][0]
    assert (outside["objects_matched"], outside["changed_count"], outside["outside_target_changed_count"]) == (40, 1200, 1160)


def test_contention_counts_rejections_per_key_and_minute(traces: Forensics) -> None:
    """contention: per-minute writes and rejections per key, with the change against the previous bucket."""
    rows = traces.run("contention")
    minute = lambda m: dt.datetime.fromtimestamp(T0_S + 60 * m, dt.timezone.utc).replace(tzinfo=None)  # noqa: E731
    assert project(rows, "state_key", "bucket_start", "writes", "rejected", "rejected_change") == {
        ("queue/head", minute(9), 3, 3, 1),
        ("queue/head", minute(8), 4, 2, None),
        ("invoice/42", minute(0), 2, 1, None),
    }
    assert rows[0]["state_key"] == "queue/head" and rows[0]["rejected"] == 3


def test_report_counts_every_question_and_points_to_the_detail_command(traces: Forensics) -> None:
    """report(): one section per question with its row count; text names the command for detail."""
    report = traces.report()
    counts = {s.question.name: s.count for s in report.sections}
    assert list(counts) == list(QUESTION_NAMES)
    assert counts == {"silent_failures": 2, "divergent_reads": 3, "lost_updates": 4,
                      "constraint_loss_by_hop": 3, "waivers_by_hop": 1, "readback_mismatches": 1,
                      "unpersisted_writes": 1, "stale_sends": 2, "stale_holders": 2, "idempotency_conflicts": 4,
                      "plan_violations": 4, "contention": 3, "guard_refusals": 12,
                      "masked_failures": 0, "repeated_executions": 0, "retry_tax": 0, "scheduled_sends": 2}
    records = counts["waivers_by_hop"] + counts["guard_refusals"] + counts["scheduled_sends"]
    assert report.findings == sum(counts.values()) - records
    assert report.records == records
    # each section's columns come from the question's run; they are the columns its SQL binds to
    # (recorded content aside: it is left out without show_content)
    assert {s.question.name: s.columns for s in report.sections} == {
        name: [col for col in traces.relation(name).columns if col not in CONTENT_COLUMNS] for name in QUESTION_NAMES}
    text = report.render("table")
    assert "outcome-telemetry forensics run constraint_loss_by_hop" in text
    assert "C3" in text


def test_text_report_leads_with_critical_fits_100_columns_and_says_what_to_do(traces: Forensics) -> None:
    """render(): severity groups in order, no line over 100 columns, a next step and command per question."""
    text = traces.report().render("table")
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100
    headings = [line for line in lines if line in ("CRITICAL", "WARNING", "RECORD")]
    assert headings == ["CRITICAL", "WARNING", "RECORD"]
    order = [line.split(":")[0][3:] for line in lines if line.startswith("== ")]
    assert order[0] == "silent_failures" and order[-2:] == ["waivers_by_hop", "guard_refusals"]
    for name in order:
        block = text.split(f"== {name}:")[1].split("\n== ")[0]
        assert "   next: " in block
        assert f"rows: outcome-telemetry forensics run {name} " in block
    assert "2 finding(s)" in text.split("== silent_failures:")[1].splitlines()[0]
    assert "12 record(s)" in text.split("== guard_refusals:")[1].splitlines()[0]


def test_long_values_are_cut_in_the_table_and_full_in_json(traces: Forensics) -> None:
    """A value longer than a line is wrapped or cut in text, and whole in --format json."""
    from telemetry.forensics._report import format_rows

    long_key = "k/" + "x" * 300
    rows = [{"state_key": long_key, "agent_id": "a"}]
    table = format_rows(rows, ["state_key", "agent_id"], "table")
    assert max(len(line) for line in table.splitlines()) <= 100
    assert long_key not in table.replace("\n", "")
    assert json.loads(format_rows(rows, ["state_key", "agent_id"], "json"))[0]["state_key"] == long_key


def test_relation_returns_a_duckdb_relation_for_further_sql(traces: Forensics) -> None:
    """relation(): a lazy DuckDB relation that can be filtered further."""
    rel = traces.relation("constraint_loss_by_hop")
    assert rel.filter("constraint_id = 'C3'").aggregate("count(*)").fetchall() == [(1,)]


def test_the_mcp_sdks_tools_call_server_spans_change_no_question(tmp_path: Path) -> None:
    """SDK `tools/call X` SERVER spans (gen_ai.tool.name, error.type tool_error, status error) add no rows anywhere."""
    import json

    from forensics_builder import TraceBuilder, hex_id, ns
    base = tmp_path / "base.jsonl"
    TraceBuilder(B.spans).write(base)
    spans = [{"traceId": s.trace_id, "spanId": hex_id(f"mcp:{s.serial}", 16), "name": "tools/call " + s.tool,
              "kind": 2, "startTimeUnixNano": str(ns(s.t) - 1000), "endTimeUnixNano": str(ns(s.t) + 2_000_000),
              "status": {"code": 2},
              "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in (
                  ("mcp.method.name", "tools/call"), (c.GEN_AI_OPERATION_NAME, c.OPERATION_EXECUTE_TOOL),
                  (c.GEN_AI_TOOL_NAME, s.tool), (c.ERROR_TYPE, c.OUTCOME_TOOL_ERROR))]} for s in B.spans]
    with_mcp = tmp_path / "with_mcp.jsonl"
    with_mcp.write_text(base.read_text() + json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}) + "\n")
    with open_traces([base]) as plain, open_traces([with_mcp]) as mixed:
        assert mixed.load_report.spans == 2 * plain.load_report.spans
        for name in QUESTION_NAMES:
            assert mixed.run(name) == plain.run(name), name


def test_scheduled_sends_lists_the_unreviewed_fire_and_the_cancel_with_their_verdicts(traces: Forensics) -> None:
    """scheduled_sends: the 0 s push happened, the cancel prevented; the fire after a review window is absent."""
    rows = traces.run("scheduled_sends")
    assert project(rows, "verdict", "kind", "schedule_id", "send_tool", "agent_id", "in_window", "span_id") == {
        (c.VERDICT_HAPPENED, "fired_unreviewed", "sch_1", "push_now", "responder", None, span_id(B, "r-sched", 662)),
        (c.VERDICT_PREVENTED, "cancelled", "sch_2", "send_customer_message", "lead", True, span_id(B, "r-sched", 664)),
    }
    assert len(rows) == 2 and rows[0]["verdict"] == c.VERDICT_HAPPENED


def test_the_double_execution_kinds_are_kinds_the_question_produces() -> None:
    """watch and the audit count rows by these kinds: a kind renamed in the SQL must fail here,
    not silently stop both from counting double executions."""
    from telemetry.forensics._questions import DOUBLE_EXECUTIONS, question

    sql = question("idempotency_conflicts").sql
    assert DOUBLE_EXECUTIONS
    for kind in DOUBLE_EXECUTIONS:
        assert f"SELECT '{kind}'," in sql
