"""One crew's traces with every kind of incident planted, and the rows each question must find.

Times are seconds after a minute boundary; each story uses its own keys so the stories do not
interfere. The EXPECTED sets are written by hand from the story, not computed.
"""

from __future__ import annotations

from telemetry import conventions as c

from forensics_builder import TraceBuilder, attrs

R, W, S, D = c.KIND_READ, c.KIND_WRITE, c.KIND_SEND, c.KIND_DELEGATE
OK = c.OUTCOME_OK


def planted() -> TraceBuilder:
    b = TraceBuilder()
    # -- divergent reads, guarded: planner's stale write refused, billing's fresh write accepted.
    b.add("r-div", "read_state", R, "planner", 1, attrs=attrs(STATE_KEY="invoice/42", STATE_VERSION_READ="v3"))
    b.add("r-div", "read_state", R, "billing", 2, attrs=attrs(STATE_KEY="invoice/42", STATE_VERSION_READ="v4"))
    b.add("r-div", "write_state", W, "planner", 3, outcome=c.OUTCOME_REJECTED_STALE_VERSION,
          attrs=attrs(STATE_KEY="invoice/42", STATE_VERSION_EXPECTED="v3", STATE_VERSION_CURRENT="v4"))
    b.add("r-div", "write_state", W, "billing", 4,
          attrs=attrs(STATE_KEY="invoice/42", STATE_VERSION_EXPECTED="v4", STATE_VERSION_CURRENT="v4",
                      STATE_VERSION_WRITTEN="v5"))
    # -- split brain, legacy: planner's unguarded write goes through on v1 after writer made v2.
    b.add("r-split", "read_state", R, "planner", 61, attrs=attrs(STATE_KEY="acct/1", STATE_VERSION_READ="v1"))
    b.add("r-split", "read_state", R, "writer", 62, attrs=attrs(STATE_KEY="acct/1", STATE_VERSION_READ="v1"))
    b.add("r-split", "write_state", W, "writer", 63,
          attrs=attrs(STATE_KEY="acct/1", STATE_VERSION_EXPECTED="v1", STATE_VERSION_CURRENT="v1",
                      STATE_VERSION_WRITTEN="v2"))
    b.add("r-split", "read_state", R, "billing", 64, attrs=attrs(STATE_KEY="acct/1", STATE_VERSION_READ="v2"))
    b.add("r-split", "legacy_write", W, "planner", 65, attrs=attrs(STATE_KEY="acct/1", STATE_VERSION_WRITTEN="v3"))
    # -- lost update without divergence: both read v7, both write unguarded.
    b.add("r-legacy", "read_state", R, "planner", 121, attrs=attrs(STATE_KEY="cart/9", STATE_VERSION_READ="v7"))
    b.add("r-legacy", "read_state", R, "writer", 122, attrs=attrs(STATE_KEY="cart/9", STATE_VERSION_READ="v7"))
    b.add("r-legacy", "legacy_write", W, "writer", 123, attrs=attrs(STATE_KEY="cart/9", STATE_VERSION_WRITTEN="v8"))
    b.add("r-legacy", "legacy_write", W, "planner", 124, attrs=attrs(STATE_KEY="cart/9", STATE_VERSION_WRITTEN="v9"))
    # -- delegation chain T1 with constraints C1..C3: a waiver at hop 2, drops at hops 3 and 4.
    b.add("r-del", "register_task", D, "planner", 181,
          attrs=attrs(DELEGATION_TASK_ID="T1", DELEGATION_ROOT_TASK_ID="T1", DELEGATION_HOP=0,
                      DELEGATION_CONSTRAINTS_CARRIED=["C1", "C2", "C3"]))
    b.add("r-del", "delegate", D, "planner", 182,
          attrs=attrs(DELEGATION_TASK_ID="T1.1", DELEGATION_ORIGIN_TASK_ID="T1", DELEGATION_ROOT_TASK_ID="T1",
                      DELEGATION_HOP=1, DELEGATION_CONSTRAINTS_CARRIED=["C1", "C2", "C3"],
                      DELEGATION_CONSTRAINTS_WAIVED=[], DELEGATION_WAIVER_REASONS=[]))
    b.add("r-del", "delegate", D, "researcher", 183,
          attrs=attrs(DELEGATION_TASK_ID="T1.1.1", DELEGATION_ORIGIN_TASK_ID="T1.1", DELEGATION_ROOT_TASK_ID="T1",
                      DELEGATION_HOP=2, DELEGATION_CONSTRAINTS_CARRIED=["C1", "C3"],
                      DELEGATION_CONSTRAINTS_WAIVED=["C2"], DELEGATION_WAIVER_REASONS=["customer approved by phone"]))
    b.add("r-del", "delegate", D, "writer", 184,
          attrs=attrs(DELEGATION_TASK_ID="T1.1.1.1", DELEGATION_ORIGIN_TASK_ID="T1.1.1", DELEGATION_ROOT_TASK_ID="T1",
                      DELEGATION_HOP=3, DELEGATION_CONSTRAINTS_CARRIED=["C1"],
                      DELEGATION_CONSTRAINTS_WAIVED=[], DELEGATION_WAIVER_REASONS=[]))
    b.add("r-del", "delegate", D, "reviewer", 185,
          attrs=attrs(DELEGATION_TASK_ID="T1.1.1.1.1", DELEGATION_ORIGIN_TASK_ID="T1.1.1.1",
                      DELEGATION_ROOT_TASK_ID="T1", DELEGATION_HOP=4, DELEGATION_CONSTRAINTS_CARRIED=[]))
    b.add("r-del", "delegate", D, "planner", 186, outcome=c.OUTCOME_CONSTRAINT_MISSING,
          attrs=attrs(DELEGATION_TASK_ID="T1.2", DELEGATION_ORIGIN_TASK_ID="T1", DELEGATION_ROOT_TASK_ID="T1",
                      DELEGATION_HOP=1, DELEGATION_CONSTRAINTS_CARRIED=["C1"]))
    # -- legacy free-text delegate, no conversation id: the run is the trace.
    b.add("r-del2", "register_task", D, "planner", 191, conversation=False,
          attrs=attrs(DELEGATION_TASK_ID="R2", DELEGATION_ROOT_TASK_ID="R2", DELEGATION_HOP=0,
                      DELEGATION_CONSTRAINTS_CARRIED=["C9"]))
    b.add("r-del2", "delegate_text", D, "planner", 192, conversation=False,
          attrs=attrs(DELEGATION_TASK_ID="R2.1", DELEGATION_ORIGIN_TASK_ID="R2", DELEGATION_ROOT_TASK_ID="R2",
                      DELEGATION_HOP=1, DELEGATION_CONSTRAINTS_CARRIED=[], DELEGATION_CONSTRAINTS_WAIVED=[]))
    # -- read-back: one mismatch (and one match, which is fine).
    b.add("r-rb", "update_price", W, "writer", 241, outcome=c.OUTCOME_READBACK_MISMATCH,
          attrs=attrs(STATE_KEY="price/sku-77", TOOL_READBACK=c.READBACK_MISMATCH, TOOL_SILENT_FAILURE=True))
    b.add("r-rb", "update_price", W, "writer", 242, attrs=attrs(STATE_KEY="price/sku-78", TOOL_READBACK=c.READBACK_MATCH))
    b.add("r-rb", "fetch_page", R, "researcher", 243, outcome=c.OUTCOME_ERROR, transport=c.TRANSPORT_ERROR)
    # -- a refusal the agent recovered from: the delegation is refused, then redone carrying C7.
    b.add("r-rec", "register_task", D, "lead", 280,
          attrs=attrs(DELEGATION_TASK_ID="R3", DELEGATION_ROOT_TASK_ID="R3", DELEGATION_HOP=0,
                      DELEGATION_CONSTRAINTS_CARRIED=["C7"]))
    b.add("r-rec", "delegate", D, "lead", 281, outcome=c.OUTCOME_CONSTRAINT_MISSING,
          attrs=attrs(DELEGATION_TASK_ID="R3.1", DELEGATION_ORIGIN_TASK_ID="R3", DELEGATION_ROOT_TASK_ID="R3",
                      DELEGATION_HOP=1, DELEGATION_CONSTRAINTS_CARRIED=[]))
    b.add("r-rec", "delegate", D, "lead", 282,
          attrs=attrs(DELEGATION_TASK_ID="R3.2", DELEGATION_ORIGIN_TASK_ID="R3", DELEGATION_ROOT_TASK_ID="R3",
                      DELEGATION_HOP=1, DELEGATION_CONSTRAINTS_CARRIED=["C7"]))
    # -- silent failures: an outcome check found the wrong collection repriced, twice (told "done").
    b.add("r-silent", "reprice", W, "merchandiser", 270, outcome=c.OUTCOME_POSTCONDITION_FAILED,
          attrs=attrs(TOOL_SILENT_FAILURE=True))
    b.add("r-silent", "reprice", W, "merchandiser", 271, outcome=c.OUTCOME_POSTCONDITION_FAILED,
          attrs=attrs(TOOL_SILENT_FAILURE=True))
    # -- objectives and sends: refunds-policy v1 published at 300, superseded by v2 at 310.
    pol = "refunds-policy"
    b.add("r-obj", "publish_objective", W, "operator", 300, attrs=attrs(OBJECTIVE_TASK_ID=pol, OBJECTIVE_VERSION="v1"))
    b.add("r-obj", "get_objective", R, "writer", 303, attrs=attrs(OBJECTIVE_TASK_ID=pol, OBJECTIVE_VERSION="v1"))
    b.add("r-obj", "get_objective", R, "reviewer", 304, attrs=attrs(OBJECTIVE_TASK_ID=pol, OBJECTIVE_VERSION="v1"))
    b.add("r-obj", "send_email", S, "writer", 305, attrs=attrs(OBJECTIVE_TASK_ID=pol, POLICY_VERSION="v1"))
    b.add("r-obj", "supersede_objective", W, "operator", 310, attrs=attrs(OBJECTIVE_TASK_ID=pol, OBJECTIVE_VERSION="v2"))
    b.add("r-obj", "get_objective", R, "billing", 311, attrs=attrs(OBJECTIVE_TASK_ID=pol, OBJECTIVE_VERSION="v2"))
    b.add("r-obj", "send_email", S, "reviewer", 312, outcome=c.OUTCOME_STALE_POLICY,
          attrs=attrs(OBJECTIVE_TASK_ID=pol, POLICY_VERSION="v1", POLICY_CURRENT_VERSION="v2"))
    b.add("r-obj", "send_email", S, "writer", 313, attrs=attrs(OBJECTIVE_TASK_ID=pol, POLICY_VERSION="v1"))
    b.add("r-obj", "send_email", S, "billing", 314, attrs=attrs(OBJECTIVE_TASK_ID=pol, POLICY_VERSION="v2"))
    b.add("r-obj", "write_note", W, "writer", 315, attrs=attrs(STATE_KEY="note/1", STATE_VERSION_WRITTEN="n1"))
    # -- idempotency: a replay, a refused reuse, and an accepted reuse with another payload.
    b.add("r-idem", "send_refund", S, "billing", 361, attrs=attrs(IDEMPOTENCY_KEY_HASH="k1", IDEMPOTENCY_PAYLOAD_HASH="p1"))
    b.add("r-idem", "send_refund", S, "billing", 362,
          attrs=attrs(IDEMPOTENCY_KEY_HASH="k1", IDEMPOTENCY_PAYLOAD_HASH="p1", TOOL_DEDUPLICATED=True,
                      IDEMPOTENCY_ORIGINAL_ID="call-1"))
    b.add("r-idem", "send_refund", S, "billing", 363, outcome=c.OUTCOME_DUPLICATE_REQUEST,
          attrs=attrs(IDEMPOTENCY_KEY_HASH="k1", IDEMPOTENCY_PAYLOAD_HASH="p2", IDEMPOTENCY_ORIGINAL_ID="call-1"))
    b.add("r-idem", "legacy_refund", S, "billing", 364, attrs=attrs(IDEMPOTENCY_KEY_HASH="k2", IDEMPOTENCY_PAYLOAD_HASH="p3"))
    b.add("r-idem", "legacy_refund", S, "billing", 365, attrs=attrs(IDEMPOTENCY_KEY_HASH="k2", IDEMPOTENCY_PAYLOAD_HASH="p4"))
    b.add("r-idem", "legacy_charge", S, "billing", 366, attrs=attrs(IDEMPOTENCY_KEY_HASH="k3", IDEMPOTENCY_PAYLOAD_HASH="p5"))
    b.add("r-idem", "legacy_charge", S, "billing", 367, attrs=attrs(IDEMPOTENCY_KEY_HASH="k3", IDEMPOTENCY_PAYLOAD_HASH="p5"))
    # -- plans: three refused commits, one accepted commit outside its target, two fine spans.
    b.add("r-plan", "create_plan", R, "writer", 421, attrs=attrs(PLAN_ID="p-1", PLAN_OBJECTS_MATCHED=3))
    b.add("r-plan", "commit_plan", W, "writer", 422, outcome=c.OUTCOME_POSTCONDITION_FAILED,
          attrs=attrs(PLAN_ID="p-1", PLAN_OBJECTS_MATCHED=3, PLAN_CHANGED_COUNT=5))
    b.add("r-plan", "commit_plan", W, "writer", 423, outcome=c.OUTCOME_PLAN_EXPIRED, attrs=attrs(PLAN_ID="p-2"))
    b.add("r-plan", "commit_plan", W, "writer", 424, outcome=c.OUTCOME_PLAN_BINDING_MOVED,
          attrs=attrs(PLAN_ID="p-3", PLAN_BINDING_MOVED="collection"))
    b.add("r-plan", "reprice", W, "writer", 425,
          attrs=attrs(PLAN_ID="p-4", PLAN_OBJECTS_MATCHED=40, PLAN_CHANGED_COUNT=1200, PLAN_OUTSIDE_TARGET_CHANGED_COUNT=1160))
    b.add("r-plan", "commit_plan", W, "writer", 426,
          attrs=attrs(PLAN_ID="p-5", PLAN_OBJECTS_MATCHED=2, PLAN_CHANGED_COUNT=2, PLAN_OUTSIDE_TARGET_CHANGED_COUNT=0))
    # -- contention on queue/head: minute 8 has 4 writes (2 refused), minute 9 has 3 (3 refused).
    for i, (t, refused) in enumerate([(481, False), (482, True), (483, False), (484, True),
                                      (541, True), (542, True), (543, True)]):
        agent = ("a", "b", "c")[i % 3]
        if refused:
            b.add("r-cont", "write_state", W, agent, t, outcome=c.OUTCOME_REJECTED_STALE_VERSION,
                  attrs=attrs(STATE_KEY="queue/head", STATE_VERSION_EXPECTED=f"q{i}", STATE_VERSION_CURRENT="qx"))
        else:
            b.add("r-cont", "write_state", W, agent, t,
                  attrs=attrs(STATE_KEY="queue/head", STATE_VERSION_EXPECTED=f"q{i}", STATE_VERSION_WRITTEN=f"q{i + 1}"))
    # -- a write lost behind a cache: its read-back matched, the next read shows the old version.
    b.add("r-lost", "update_email", W, "support", 601,
          attrs=attrs(STATE_KEY="profile/u1", STATE_VERSION_WRITTEN="rev1", TOOL_READBACK=c.READBACK_MATCH))
    b.add("r-lost", "update_email", W, "support", 602,
          attrs=attrs(STATE_KEY="profile/u1", STATE_VERSION_WRITTEN="rev2", TOOL_READBACK=c.READBACK_MATCH))
    b.add("r-lost", "get_profile", R, "auditor", 603, attrs=attrs(STATE_KEY="profile/u1", STATE_VERSION_READ="rev1"))
    b.add("r-lost", "update_email", W, "support", 604,
          attrs=attrs(STATE_KEY="profile/u1", STATE_VERSION_WRITTEN="rev3", TOOL_READBACK=c.READBACK_MATCH))
    b.add("r-lost", "get_profile", R, "auditor", 605, attrs=attrs(STATE_KEY="profile/u1", STATE_VERSION_READ="rev3"))
    # -- scheduled sends: a push fired with a 0 s window (happened), a message cancelled inside its
    #    600 s window (prevented), a message fired after its window (reviewable: not listed).
    for t, tool, kind, agent, sid, event, window in (
        (661, "push_now", S, "responder", "sch_1", c.SCHEDULE_SCHEDULED, 0.0),
        (662, "push_now", S, "responder", "sch_1", c.SCHEDULE_FIRED, 0.0),
        (663, "send_customer_message", S, "responder", "sch_2", c.SCHEDULE_SCHEDULED, 600.0),
        (664, c.TOOL_CANCEL_SCHEDULED_SEND, W, "lead", "sch_2", c.SCHEDULE_CANCELLED, 600.0),
        (665, "send_customer_message", S, "responder", "sch_3", c.SCHEDULE_SCHEDULED, 600.0),
        (666, "send_customer_message", S, "responder", "sch_3", c.SCHEDULE_FIRED, 600.0),
    ):
        named = dict(SCHEDULE_ID=sid, SCHEDULE_EVENT=event, SCHEDULE_WINDOW_SECONDS=window,
                     SCHEDULE_TOOL="push_now" if sid == "sch_1" else "send_customer_message")
        if kind == S:
            named["POLICY_VERSION"] = "n1"
        else:
            named["SCHEDULE_IN_WINDOW"] = True
        b.add("r-sched", tool, kind, agent, t, attrs=attrs(**named))
    return b


def span_id(b: TraceBuilder, run: str, t: float) -> str:
    """The span id of the span planted in ``run`` at ``t``."""
    (span,) = [s for s in b.spans if s.run == run and s.t == t]
    return span.span_id


def trace_id(b: TraceBuilder, run: str) -> str:
    return b.spans[[s.run for s in b.spans].index(run)].trace_id
