"""scheduled_sends, on traces the guard really wrote: an unreviewed fire is 'happened', a reviewer's
cancel and a fire refused because the policy moved are 'prevented'; reviewed fires are not listed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from telemetry import agent, configure, instrument_tool
from telemetry import conventions as c
from telemetry.forensics import open_traces
from telemetry.guards import Objectives, ScheduledSends, SQLiteStore

POLICY = "refund-policy"


def test_the_question_finds_the_unreviewed_fire_the_cancel_and_the_refused_fire(tmp_path: Path) -> None:
    """Four sends: window 0 fired (happened), cancelled in window, refused at fire (prevented), reviewed fire (absent)."""
    now = [1_800_000_000.0]
    store = SQLiteStore(tmp_path / "guards.db")
    objectives = Objectives(store)
    sends = ScheduledSends(store, objectives, clock=lambda: now[0])
    v1 = objectives.publish_objective(POLICY, "Credit up to $20")["version"]

    @instrument_tool(kind=c.KIND_SEND)
    @sends.schedule_send(policy_task_id=POLICY, review_seconds=0)
    def push_now(segment: str, policy_version: str) -> dict[str, Any]:
        return {"ok": True}

    @instrument_tool(kind=c.KIND_SEND)
    @sends.schedule_send(policy_task_id=POLICY, review_seconds=600)
    def send_customer_message(ticket_id: str, body: str, policy_version: str) -> dict[str, Any]:
        return {"ok": True}

    sends.register(push_now)
    sends.register(send_customer_message)
    runtime = configure(service_name="scheduled", traces_dir=tmp_path / "traces", registry=CollectorRegistry(),
                        install_global=False)
    try:
        with agent("responder", conversation_id="run-s"):
            unreviewed = push_now("all-users", v1)["scheduled_id"]
            reviewed = send_customer_message("T-1", "We credited $20.", v1)["scheduled_id"]
            cancelled = send_customer_message("T-2", "We credited $20 (again).", v1)["scheduled_id"]
            refused = send_customer_message("T-3", "We credited $32.", v1)["scheduled_id"]
            sends.fire_due()                          # the window-0 push goes out at once
        now[0] += 40
        with agent("lead", conversation_id="run-s"):
            sends.cancel_scheduled_send(cancelled, "duplicate of T-1", "lead")
            sends.approve_scheduled_send(reviewed, "lead")
            sends.fire_due()                          # the approved one fires after a review
            objectives.supersede_objective(POLICY, "Credit up to $10", "finance review", v1)
        now[0] += 600
        sends.fire_due()                              # T-3 is due: refused, the policy moved
    finally:
        runtime.shutdown()
    with open_traces([tmp_path / "traces"]) as traces:
        rows = traces.run("scheduled_sends")
    got = {(r["schedule_id"], r["kind"], r["verdict"], r["send_tool"], r["agent_id"], r["in_window"]) for r in rows}
    assert got == {
        (unreviewed, "fired_unreviewed", c.VERDICT_HAPPENED, "push_now", "responder", None),
        (cancelled, "cancelled", c.VERDICT_PREVENTED, "send_customer_message", "lead", True),
        (refused, "refused_at_fire", c.VERDICT_PREVENTED, "send_customer_message", "responder", None),
    }
    assert reviewed not in {r["schedule_id"] for r in rows}
    assert rows[0]["verdict"] == c.VERDICT_HAPPENED and all(r["verdict_basis"] for r in rows)
    assert {r["verdict"] for r in rows} <= set(c.VERDICTS)
    assert next(r for r in rows if r["kind"] == "refused_at_fire")["outcome"] == c.OUTCOME_STALE_POLICY
    assert {r["run_id"] for r in rows} == {"run-s"}
