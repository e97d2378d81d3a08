"""Verdicts: every question's rows say whether the harm happened, was prevented, or cannot be told.

On the planted crew each row's verdict is stated by hand from its story; spans written without
``tool.silent_failure`` (older writers) are judged by the same rule from what they carry; the
severity, the headline, ``--fail-on`` and the text report follow the verdicts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from telemetry import conventions as c
from telemetry.forensics import QUESTION_NAMES, Forensics, headline, open_traces, question, row_severity, tally
from telemetry.forensics._cli import main
from telemetry.forensics._questions import CRITICAL, INFORMATIONAL, RECORD, SEVERITIES, WARNING

from forensics_builder import TraceBuilder, attrs
from forensics_incidents import planted, span_id

B = planted()
H, P, U = c.VERDICT_HAPPENED, c.VERDICT_PREVENTED, c.VERDICT_UNKNOWN


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with open_traces([B.write(tmp_path_factory.mktemp("planted") / "crew.jsonl")]) as opened:
        yield opened


def verdicts(rows: list[dict[str, Any]], *columns: str) -> set[tuple[Any, ...]]:
    return {(r["verdict"], *(r[col] for col in columns)) for r in rows}


def test_every_question_leads_with_a_valid_verdict_and_its_basis(traces: Forensics) -> None:
    """The convention a new question must follow: verdict and verdict_basis are its first two
    columns, every row's verdict is one of VERDICTS with a basis, and its SQL header says when."""
    for name in QUESTION_NAMES:
        assert traces.relation(name).columns[:2] == ["verdict", "verdict_basis"], name
        header = question(name).header
        assert "\nVerdict: " in header and "Columns: verdict, verdict_basis," in header, name
        for row in traces.run(name):
            assert row["verdict"] in c.VERDICTS and isinstance(row["verdict_basis"], str) and row["verdict_basis"], \
                (name, row)


def test_each_planted_row_has_the_verdict_of_its_story(traces: Forensics) -> None:
    """Refused, rolled back, deduplicated and expired rows are prevented; accepted ones happened."""
    assert verdicts(traces.run("silent_failures"), "tool_name") == {(H, "reprice"), (H, "update_price")}
    assert {r["verdict"] for r in traces.run("lost_updates")} == {H}
    assert {r["verdict"] for r in traces.run("constraint_loss_by_hop")} == {H}
    assert verdicts(traces.run("unpersisted_writes"), "span_id") == {(H, span_id(B, "r-lost", 602))}
    assert verdicts(traces.run("stale_sends"), "kind", "span_id") == {
        (P, "refused", span_id(B, "r-obj", 312)), (H, "sent_stale", span_id(B, "r-obj", 313))}
    assert verdicts(traces.run("idempotency_conflicts"), "kind") == {
        (P, "conflict_refused"), (P, "replay"), (H, "conflict_accepted"), (H, "repeated_execution")}
    assert verdicts(traces.run("divergent_reads"), "writer_agent", "write_outcome", "lost_update") == {
        (P, "planner", c.OUTCOME_REJECTED_STALE_VERSION, False),  # the guard refused the stale write
        (H, "billing", c.OUTCOME_OK, False),  # a current write while planner held v3
        (H, "planner", c.OUTCOME_OK, True)}  # the legacy stale write: a lost update
    assert verdicts(traces.run("readback_mismatches"), "tool_name") == {(H, "update_price")}  # told done
    assert verdicts(traces.run("stale_holders"), "agent_id") == {(H, "writer"), (P, "reviewer")}
    assert verdicts(traces.run("plan_violations"), "plan_id") == {
        (P, "p-1"), (P, "p-2"), (P, "p-3"), (H, "p-4")}  # p-1's postcondition was told and rolled back
    assert {r["verdict"] for r in traces.run("contention")} == {P}
    assert {r["verdict"] for r in traces.run("guard_refusals")} == {P}
    assert {r["verdict"] for r in traces.run("waivers_by_hop")} == {H}
    counts = tally(traces.answers())
    assert counts == {H: 18, P: 11, U: 0}
    assert traces.report().headline == headline(counts) == \
        "18 incidents happened; 11 were prevented by guards; 0 could not be judged"


def test_a_missing_hop_and_an_order_within_the_skew_are_unknown(tmp_path: Path) -> None:
    """'gap' rows (the parent hop is not in the evidence) cannot be judged; neither can a lost update
    whose write and read are closer than the clock skew (see test_forensics_evidence)."""
    b = TraceBuilder()
    b.add("r", "register_task", c.KIND_DELEGATE, "p", 1, attrs=attrs(
        DELEGATION_TASK_ID="T", DELEGATION_ROOT_TASK_ID="T", DELEGATION_HOP=0, DELEGATION_CONSTRAINTS_CARRIED=["C1"]))
    b.add("r", "delegate", c.KIND_DELEGATE, "p", 2, attrs=attrs(
        DELEGATION_TASK_ID="T.1.1", DELEGATION_ORIGIN_TASK_ID="T.1", DELEGATION_ROOT_TASK_ID="T", DELEGATION_HOP=2,
        DELEGATION_CONSTRAINTS_CARRIED=["C1"]))
    with open_traces([b.write(tmp_path / "t.jsonl")]) as traces:
        (row,) = traces.run("constraint_loss_by_hop")
        assert (row["finding"], row["verdict"]) == ("gap", U) and "not in the evidence" in row["verdict_basis"]
        assert traces.report().verdicts == {H: 0, P: 0, U: 1}


# --- spans without tool.silent_failure -------------------------------------------------------


def test_spans_without_the_attribute_are_judged_by_the_rule_and_counted(tmp_path: Path) -> None:
    """The planted crew with and without tool.silent_failure: every silent failure the attribute
    shows is still a row (same tool, outcome, spans, runs, agents, traces), judged unknown because
    only the attribute records whether the result itself reported the failure; the told failures
    the attributes decide (refusals, a transport error) stay out, and the one they cannot decide (a
    postcondition_failed envelope) is an unknown row too, never happened. The evidence counts them."""
    keyed = ("tool_name", "outcome", "spans", "runs", "agents", "first_seen", "last_seen", "example_trace_ids")
    with open_traces([B.write(tmp_path / "new" / "crew.jsonl")]) as new, \
            open_traces([B.write(tmp_path / "old" / "crew.jsonl", quirks=frozenset({"no_silent_failure"}))]) as old:
        recorded, judged = new.run("silent_failures"), old.run("silent_failures")
        assert {r["verdict"] for r in recorded} == {H}
        assert {json.dumps([r[k] for k in keyed], default=str) for r in recorded} <= \
            {json.dumps([r[k] for k in keyed], default=str) for r in judged}
        assert {(r["tool_name"], r["outcome"], r["verdict"]) for r in judged} == {
            ("reprice", c.OUTCOME_POSTCONDITION_FAILED, U), ("update_price", c.OUTCOME_READBACK_MISMATCH, U),
            ("commit_plan", c.OUTCOME_POSTCONDITION_FAILED, U)}
        assert all(c.TOOL_SILENT_FAILURE in r["verdict_basis"] for r in judged)
        assert {r["verdict"] for r in old.run("readback_mismatches")} == {U}
        assert verdicts(old.run("plan_violations"), "plan_id") == {(U, "p-1"), (P, "p-2"), (P, "p-3"), (H, "p-4")}
        assert (new.evidence.silent_unrecorded, new.evidence.silent_unconfirmed) == (0, 0)
        assert (old.evidence.silent_unrecorded, old.evidence.silent_unconfirmed) == (len(B.spans), 4)
        assert old.evidence.as_dict()["silent_failure_unrecorded"] == {"tool_spans": len(B.spans), "judged_unknown": 4}
        assert any(c.TOOL_SILENT_FAILURE in note for note in old.evidence.caveats("silent_failures"))
        assert any(c.TOOL_SILENT_FAILURE in w for w in old.evidence.warnings())
        assert not any(c.TOOL_SILENT_FAILURE in w for w in new.evidence.warnings())
        assert f"without {c.TOOL_SILENT_FAILURE}: {len(B.spans)}" in old.report().render()


def _strip_silent_failure(path: Path) -> None:
    """Rewrite an exporter's file as a writer from before tool.silent_failure would have written it."""
    lines = []
    for line in path.read_text().splitlines():
        data = json.loads(line)
        for resource in data["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    span["attributes"] = [a for a in span["attributes"] if a["key"] != c.TOOL_SILENT_FAILURE]
        lines.append(json.dumps(data))
    path.write_text("\n".join(lines) + "\n")


def test_real_decorated_calls_without_the_attribute_keep_every_silent_failure(tmp_path: Path) -> None:
    """Real tool calls through our exporter: a read-back that failed an ok result (silent), an error
    envelope whose read-back failed too (told), a refusal and an exception (told). Without the
    attribute the silent one is still found, unknown; the told envelope looks the same and is
    unknown too; the refusal and the exception, which the attributes decide, are not rows."""
    from prometheus_client import CollectorRegistry

    from telemetry import agent, configure, instrument_tool

    @instrument_tool(kind=c.KIND_WRITE, readback=lambda call, result: False)
    def save_silent() -> dict[str, bool]:
        return {"ok": True}

    @instrument_tool(kind=c.KIND_WRITE, readback=lambda call, result: False)
    def save_told() -> dict[str, Any]:
        return {"ok": False, "error": c.OUTCOME_READBACK_MISMATCH, "message": "the write did not persist"}

    @instrument_tool(kind=c.KIND_SEND)
    def send_refused() -> dict[str, Any]:
        return {"ok": False, "error": c.OUTCOME_STALE_POLICY, "message": "re-read the policy"}

    @instrument_tool(kind=c.KIND_WRITE)
    def boom() -> None:
        raise RuntimeError("down")

    runtime = configure(service_name="verdicts", traces_dir=tmp_path / "traces", registry=CollectorRegistry(),
                        install_global=False)
    try:
        with agent("a", conversation_id="run-1"):
            save_silent(), save_told(), send_refused()
            with pytest.raises(RuntimeError):
                boom()
    finally:
        runtime.shutdown()
    with open_traces([tmp_path / "traces"]) as traces:
        assert verdicts(traces.run("silent_failures"), "tool_name") == {(H, "save_silent")}
        assert verdicts(traces.run("readback_mismatches"), "tool_name") == {(H, "save_silent"), (P, "save_told")}
    for path in (tmp_path / "traces").glob("*.jsonl"):
        _strip_silent_failure(path)
    with open_traces([tmp_path / "traces"]) as traces:
        assert verdicts(traces.run("silent_failures"), "tool_name") == {(U, "save_silent"), (U, "save_told")}
        assert verdicts(traces.run("readback_mismatches"), "tool_name") == {(U, "save_silent"), (U, "save_told")}
        assert (traces.evidence.silent_unrecorded, traces.evidence.silent_unconfirmed) == (4, 2)


def test_the_rule_on_unrecorded_spans_names_exactly_the_outcomes_that_told_their_caller() -> None:
    """silent_unconfirmed in spans.sql excludes ok, forced, every refusal and every pause: the same
    sets as conventions.py (a new refusal code must be added there too)."""
    from telemetry.runtime._resources import data_file

    sql = data_file("queries", "spans.sql").read_text()
    macro = sql.split("CREATE OR REPLACE TEMP MACRO silent_unconfirmed")[1].split(";")[0]
    listed = set(re.findall(r"'([a-z_]+)'", macro.split("outcome NOT IN")[1].split(")")[0]))
    assert listed == {c.OUTCOME_OK, c.OUTCOME_FORCED} | c.REFUSAL_OUTCOMES | c.PAUSED_OUTCOMES


# --- severity, headline, gates and the text report -------------------------------------------


def test_a_prevented_row_is_never_critical_and_the_report_says_so(traces: Forensics) -> None:
    """Under CRITICAL no prevented row; a question with both is listed under both levels."""
    assert row_severity(CRITICAL, P) == WARNING and row_severity(CRITICAL, H) == CRITICAL
    assert row_severity(CRITICAL, U) == CRITICAL and row_severity(RECORD, P) == RECORD
    text = traces.report().render("table")
    assert text.splitlines()[1] == "Verdict: 18 incidents happened; 11 were prevented by guards; 0 could not be judged"
    critical = text.split("\nCRITICAL\n")[1].split("\nWARNING\n")[0]
    assert "prevented" not in re.findall(r"verdict +(\w+)", critical) and "verdict" in critical
    assert "== stale_sends: 1 of 2 finding(s): 1 happened" in critical
    warning = text.split("\nWARNING\n")[1].split("\nRECORD\n")[0]
    assert "== stale_sends: 1 of 2 finding(s): 1 prevented" in warning
    data = traces.report().as_dict()
    assert data["verdicts"] == {H: 18, P: 11, U: 0} and data["headline"].startswith("18 incidents happened")
    sends = next(q for q in data["questions"] if q["question"] == "stale_sends")
    assert sends["verdicts"] == {H: 1, P: 1, U: 0} and sends["reported_severity"] == CRITICAL


def test_fail_on_counts_happened_and_unknown_rows_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A guarded crew whose every finding was prevented passes --fail-on warning; one row the
    evidence cannot judge fails it."""
    guarded = TraceBuilder()
    guarded.add("g", "send_email", c.KIND_SEND, "a", 1, outcome=c.OUTCOME_STALE_POLICY,
                attrs=attrs(OBJECTIVE_TASK_ID="P", POLICY_VERSION="v1", POLICY_CURRENT_VERSION="v2"))
    guarded.add("g", "charge", c.KIND_SEND, "a", 2, attrs=attrs(IDEMPOTENCY_KEY_HASH="k", IDEMPOTENCY_PAYLOAD_HASH="p"))
    guarded.add("g", "charge", c.KIND_SEND, "a", 3, attrs=attrs(IDEMPOTENCY_KEY_HASH="k", IDEMPOTENCY_PAYLOAD_HASH="p",
                                                                TOOL_DEDUPLICATED=True))
    path = guarded.write(tmp_path / "guarded" / "t.jsonl")
    for fail_on in ("critical", "warning"):
        assert main(["report", str(path), "-q", "--fail-on", fail_on]) == 0, fail_on
        assert main(["run", "stale_sends", str(path), "-q", "--fail-on", fail_on]) == 0, fail_on
    out = capsys.readouterr().out
    assert "0 incidents happened; 2 were prevented by guards" in out and "\nCRITICAL\n" not in out
    old = TraceBuilder(list(guarded.spans))
    old.add("g", "reprice", c.KIND_WRITE, "a", 4, outcome=c.OUTCOME_POSTCONDITION_FAILED)
    path = old.write(tmp_path / "old" / "t.jsonl", quirks=frozenset({"no_silent_failure"}))
    assert main(["report", str(path), "-q", "--fail-on", "critical"]) == 1
    assert "could not be judged" in capsys.readouterr().out


def test_tally_leaves_records_out_and_refuses_rows_without_a_verdict() -> None:
    """Waivers and refusals are not incidents; a row with no valid verdict is a named error."""
    answers = {"stale_sends": [{"verdict": P}], "guard_refusals": [{"verdict": P}] * 5,
               "waivers_by_hop": [{"verdict": H}], "lost_updates": [{"verdict": H}, {"verdict": U}]}
    assert {"guard_refusals", "waivers_by_hop"} <= set(INFORMATIONAL)
    assert tally(answers) == {H: 1, P: 1, U: 1}
    with pytest.raises(ValueError, match="'maybe' is not one of happened, prevented, unknown"):
        tally({"lost_updates": [{"verdict": "maybe"}]})
    with pytest.raises(ValueError, match="None is not one of"):
        tally({"lost_updates": [{"kind": "same_baseline"}]})
    assert headline({H: 1, P: 1, U: 1}) == "1 incident happened; 1 was prevented by guards; 1 could not be judged"
    assert headline({}) == "0 incidents happened; 0 were prevented by guards; 0 could not be judged"


@given(severity=st.one_of(st.sampled_from(SEVERITIES), st.text(max_size=12)),
       verdict=st.one_of(st.sampled_from(c.VERDICTS), st.text(max_size=12), st.none(), st.integers()))
def test_row_severity_is_exact_or_refuses_with_the_value(severity: str, verdict: Any) -> None:
    """Any pair gives the severity the rule defines or a ValueError naming the bad value."""
    try:
        got = row_severity(severity, verdict)
    except ValueError as error:
        assert severity not in SEVERITIES or verdict not in c.VERDICTS
        assert repr(severity if severity not in SEVERITIES else verdict) in str(error)
        return
    assert got == (WARNING if (severity, verdict) == (CRITICAL, P) else severity)


@given(counts=st.dictionaries(st.one_of(st.sampled_from(c.VERDICTS), st.text(max_size=8)),
                              st.one_of(st.integers(min_value=-3, max_value=10**6), st.floats(), st.booleans()),
                              max_size=4))
def test_headline_is_exact_or_refuses_with_the_value(counts: dict[Any, Any]) -> None:
    """Whole counts >= 0 of the three verdicts make the sentence; anything else is a named ValueError."""
    try:
        text = headline(counts)
    except ValueError as error:
        bad = [k for k in counts if k not in c.VERDICTS] + [
            v for k, v in counts.items() if k in c.VERDICTS
            and (not isinstance(v, int) or isinstance(v, bool) or v < 0)]
        assert bad and any(repr(b) in str(error) for b in bad)
        return
    numbers = [int(n) for n in re.findall(r"\d+", text)]
    assert numbers == [counts.get(v, 0) for v in c.VERDICTS]
