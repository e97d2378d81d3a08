"""Scheduled sends on SQLite and PostgreSQL: nothing is sent at call time, the window is honoured,
a reviewer cancels or approves, and a policy superseded inside the window refuses the fire."""

from __future__ import annotations

import inspect
import sys
import types
from datetime import datetime, timezone
from typing import Any

import pytest

from telemetry import agent, instrument_tool
from telemetry import conventions as c
from telemetry.exceptions import ConfigurationError
from telemetry.guards import SCHEDULE_ATTRIBUTE, Objectives, ScheduledSends, open_store
from telemetry.testing import Capture

POLICY = "refund-policy"


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).isoformat().replace("+00:00", "Z")

WINDOW = 600.0
T0 = 1_800_000_000.0


class Clock:
    """A clock the test moves (every process sharing a store must use one clock)."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class Crew:
    def __init__(self, store_url: str, window: float = WINDOW) -> None:
        store = open_store(store_url)
        self.clock = Clock()
        self.objectives = Objectives(store)
        self.sends = ScheduledSends(store, self.objectives, clock=self.clock)
        self.v1 = self.objectives.publish_objective(POLICY, "Credit up to $20")["version"]
        self.outbox: list[tuple[str, str]] = []
        outbox = self.outbox

        @instrument_tool(kind=c.KIND_SEND)
        @self.sends.schedule_send(policy_task_id=POLICY, review_seconds=window)
        def send_customer_message(ticket_id: str, body: str, policy_version: str, agent_id: str) -> dict[str, Any]:
            """Send a customer-facing message drafted against ``policy_version``."""
            outbox.append((ticket_id, body))
            return {"ok": True, "ticket_id": ticket_id}

        self.send = self.sends.register(send_customer_message)


@pytest.fixture
def crew(store_url: str) -> Crew:
    return Crew(store_url)


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def events(capture: Capture, tool: str = "send_customer_message") -> list[dict[str, Any]]:
    return [attrs(s) for s in capture.spans(tool)]


def test_calling_the_send_sends_nothing_and_answers_an_id_and_the_fire_time(crew: Crew, telemetry_capture: Capture) -> None:
    """The tool call stores the send (read back) and answers scheduled_id and fires_at; the body does not run."""
    with agent("responder", conversation_id="run-1"):
        got = crew.send("T-1", "We credited $20.", crew.v1, "responder")
    assert got["ok"] and got["status"] == "scheduled" and got["scheduled_id"].startswith("sch_")
    assert got["fires_at"] == iso(T0 + WINDOW) and got["review_window_seconds"] == WINDOW
    assert "Nothing was sent" in got["message"]
    assert crew.outbox == []
    span = events(telemetry_capture)[0]
    assert span[c.SCHEDULE_EVENT] == c.SCHEDULE_SCHEDULED and span[c.SCHEDULE_ID] == got["scheduled_id"]
    assert span[c.SCHEDULE_WINDOW_SECONDS] == WINDOW and span[c.SCHEDULE_FIRES_AT] == got["fires_at"]
    assert span[c.TOOL_READBACK] == c.READBACK_MATCH and span[c.TOOL_OUTCOME] == c.OUTCOME_OK
    assert span[c.POLICY_VERSION] == crew.v1 and span[c.POLICY_CURRENT_VERSION] == crew.v1
    seen = crew.sends.get_scheduled_send(got["scheduled_id"])
    assert seen["status"] == "scheduled" and seen["agent_id"] == "responder"
    assert seen["arguments"] == {"ticket_id": "T-1", "body": "We credited $20.", "policy_version": crew.v1,
                                 "agent_id": "responder"}


def test_it_fires_exactly_at_the_end_of_its_window_and_only_once(crew: Crew, telemetry_capture: Capture) -> None:
    """Before fires_at nothing fires; at fires_at the body runs once, on a span of the same tool."""
    with agent("responder", conversation_id="run-1"):
        sid = crew.send("T-1", "We credited $20.", crew.v1, "responder")["scheduled_id"]
    crew.clock.now = T0 + WINDOW - 0.001
    assert crew.sends.fire_due() == []
    crew.clock.now = T0 + WINDOW
    fired = crew.sends.fire_due(worker="w1")
    assert fired == [{"scheduled_id": sid, "tool": "send_customer_message", "status": "fired", "outcome": c.OUTCOME_OK}]
    assert crew.outbox == [("T-1", "We credited $20.")]
    assert crew.sends.fire_due() == [] and len(crew.outbox) == 1
    fire = events(telemetry_capture)[-1]
    assert fire[c.SCHEDULE_EVENT] == c.SCHEDULE_FIRED and fire[c.SCHEDULE_ID] == sid
    assert fire[c.GEN_AI_AGENT_ID] == "responder" and fire[c.GEN_AI_CONVERSATION_ID] == "run-1"
    assert fire[c.TOOL_KIND] == c.KIND_SEND and fire[c.POLICY_VERSION] == crew.v1
    seen = crew.sends.get_scheduled_send(sid)
    assert seen["status"] == "fired" and seen["outcome"] == c.OUTCOME_OK and seen["result"]["ticket_id"] == "T-1"
    assert [row["accepted"] for row in crew.objectives.sends(POLICY)] == [True]


def test_a_policy_superseded_inside_the_window_refuses_the_fire_and_is_counted(
    crew: Crew, telemetry_capture: Capture
) -> None:
    """Superseded during the window: the fire is a stale_policy refusal, the envelope stored for the agent."""
    sid = crew.send("T-1", "We credited $32.", crew.v1, "responder")["scheduled_id"]
    crew.clock.now = T0 + 60
    v2 = crew.objectives.supersede_objective(POLICY, "Credit up to $10", "finance review", crew.v1)["version"]
    crew.clock.now = T0 + WINDOW
    assert crew.sends.fire_due() == [{"scheduled_id": sid, "tool": "send_customer_message", "status": "refused",
                                      "outcome": c.OUTCOME_STALE_POLICY}]
    assert crew.outbox == []
    fire = events(telemetry_capture)[-1]
    assert fire[c.SCHEDULE_EVENT] == c.SCHEDULE_REFUSED_AT_FIRE and fire[c.TOOL_OUTCOME] == c.OUTCOME_STALE_POLICY
    assert telemetry_capture.sample(c.METRIC_GUARD_REFUSALS_TOTAL, {c.LABEL_TOOL: "send_customer_message",
                                                                    c.LABEL_REASON: c.OUTCOME_STALE_POLICY}) == 1.0
    assert telemetry_capture.sample(c.METRIC_STALE_SENDS_TOTAL, {c.LABEL_TOOL: "send_customer_message"}) == 1.0
    seen = crew.sends.get_scheduled_send(sid)
    assert seen["status"] == "refused" and seen["outcome"] == c.OUTCOME_STALE_POLICY
    envelope = seen["result"]
    assert envelope[c.ENVELOPE_RETRY] is True and envelope["current_version"] == v2
    assert envelope["current_policy"] == "Credit up to $10"
    assert crew.sends.fire_due() == []
    # redrafted against the current policy, it is scheduled again
    assert crew.send("T-1", "We credited $10.", v2, "responder")["ok"]


def test_a_stale_version_is_refused_at_schedule_time_and_nothing_is_stored(crew: Crew) -> None:
    """A send drafted against a superseded policy is refused at once; an unknown version is invalid."""
    v2 = crew.objectives.supersede_objective(POLICY, "Credit up to $10", "finance", crew.v1)["version"]
    stale = crew.send("T-1", "draft", crew.v1, "responder")
    assert stale["error"] == c.OUTCOME_STALE_POLICY and stale["current_version"] == v2
    made_up = crew.send("T-1", "draft", "latest", "responder")
    assert made_up["error"] == c.OUTCOME_INVALID_ARGUMENT and "never a version" in made_up["message"]
    assert crew.sends.pending() == [] and crew.objectives.sends(POLICY) == []


def test_a_reviewer_cancels_inside_the_window_and_it_never_fires(crew: Crew, telemetry_capture: Capture) -> None:
    """cancel: recorded with who and why; the fire finds nothing; cancelling again is a no-op."""
    sid = crew.send("T-1", "draft", crew.v1, "responder")["scheduled_id"]
    crew.clock.now = T0 + 30
    done = crew.sends.cancel_scheduled_send(sid, "wrong customer segment", "lead")
    assert done["ok"] and done["status"] == "cancelled"
    span = attrs(telemetry_capture.span(c.TOOL_CANCEL_SCHEDULED_SEND))
    assert span[c.SCHEDULE_EVENT] == c.SCHEDULE_CANCELLED and span[c.SCHEDULE_ID] == sid
    assert span[c.SCHEDULE_TOOL] == "send_customer_message" and span[c.TOOL_READBACK] == c.READBACK_MATCH
    assert crew.sends.cancel_scheduled_send(sid, "again", "lead")["already"] is True
    crew.clock.now = T0 + WINDOW
    assert crew.sends.fire_due() == [] and crew.outbox == []
    seen = crew.sends.get_scheduled_send(sid)
    assert (seen["status"], seen["reviewed_by"], seen["reason"]) == ("cancelled", "lead", "wrong customer segment")
    assert crew.sends.approve_scheduled_send(sid, "lead")["error"] == c.OUTCOME_INVALID_ARGUMENT


def test_a_fired_send_cannot_be_cancelled(crew: Crew) -> None:
    sid = crew.send("T-1", "draft", crew.v1, "responder")["scheduled_id"]
    crew.clock.now = T0 + WINDOW
    crew.sends.fire_due()
    late = crew.sends.cancel_scheduled_send(sid, "too late", "lead")
    assert late["error"] == c.OUTCOME_INVALID_ARGUMENT and late["status"] == "fired" and late["retry"] is False


def test_approval_by_another_agent_fires_at_the_next_pass_and_self_approval_is_refused(
    crew: Crew, telemetry_capture: Capture
) -> None:
    """The scheduling agent cannot approve its own send; a reviewer's approval makes it due now."""
    sid = crew.send("T-1", "draft", crew.v1, "responder")["scheduled_id"]
    own = crew.sends.approve_scheduled_send(sid, "responder")
    assert own["error"] == c.OUTCOME_INVALID_ARGUMENT and "cannot approve" in own["message"]
    crew.clock.now = T0 + 45
    approved = crew.sends.approve_scheduled_send(sid, "lead")
    assert approved["ok"] and approved["fires_at"] == iso(T0 + 45)
    assert [attrs(s).get(c.SCHEDULE_EVENT) for s in telemetry_capture.spans(c.TOOL_APPROVE_SCHEDULED_SEND)] == [
        None, c.SCHEDULE_APPROVED]
    assert [r["status"] for r in crew.sends.fire_due()] == ["fired"] and crew.outbox == [("T-1", "draft")]


def test_bad_ids_and_reasons_get_envelopes(crew: Crew) -> None:
    """Unknown ids are not_found; blank or hostile texts are invalid_argument naming the argument."""
    assert crew.sends.get_scheduled_send("sch_nope")["error"] == c.OUTCOME_NOT_FOUND
    assert crew.sends.cancel_scheduled_send("sch_nope", "why", "lead")["error"] == c.OUTCOME_NOT_FOUND
    bad = crew.sends.cancel_scheduled_send("", " ", "lead")
    assert bad["error"] == c.OUTCOME_INVALID_ARGUMENT and "scheduled_id" in bad["message"] and "reason" in bad["message"]
    assert crew.sends.approve_scheduled_send("x" * 600, "lead")["error"] == c.OUTCOME_INVALID_ARGUMENT
    assert crew.send("T-1", object(), crew.v1, "responder")["error"] == c.OUTCOME_INVALID_ARGUMENT


def test_a_body_that_raises_is_recorded_as_failed_and_the_worker_goes_on(store_url: str) -> None:
    crew = Crew(store_url, window=0)

    @instrument_tool(kind=c.KIND_SEND)
    @crew.sends.schedule_send(policy_task_id=POLICY, review_seconds=0)
    def flaky_send(body: str, policy_version: str) -> dict[str, Any]:
        raise TimeoutError("the push service did not answer")

    crew.sends.register(flaky_send)
    flaky_send("x", crew.v1)
    crew.send("T-2", "fine", crew.v1, "responder")
    assert sorted((r["tool"], r["status"], r["outcome"]) for r in crew.sends.fire_due()) == [
        ("flaky_send", "failed", "TimeoutError"), ("send_customer_message", "fired", c.OUTCOME_OK)]


def test_a_tool_this_process_cannot_reach_stays_scheduled(store_url: str) -> None:
    """A worker that does not know the tool reports it unresolved and leaves it for one that does."""
    crew = Crew(store_url, window=0)
    sid = crew.send("T-1", "draft", crew.v1, "responder")["scheduled_id"]
    other = ScheduledSends(crew.objectives.store, crew.objectives, clock=crew.clock)
    assert other.fire_due() == [{"scheduled_id": sid, "tool": getattr(crew.send, SCHEDULE_ATTRIBUTE).scope,
                                 "status": "unresolved", "outcome": None}]
    assert crew.sends.get_scheduled_send(sid)["status"] == "scheduled"
    assert [r["status"] for r in crew.sends.fire_due()] == ["fired"]


def test_a_module_level_tool_is_fired_by_its_importable_name(store_url: str) -> None:
    """Another ScheduledSends on the same store fires a tool it finds as module:qualname."""
    crew = Crew(store_url, window=0)
    module = types.ModuleType("scheduled_sends_app")
    outbox: list[str] = []

    def broadcast_push(segment: str, policy_version: str) -> dict[str, Any]:
        outbox.append(segment)
        return {"ok": True}

    broadcast_push.__module__, broadcast_push.__qualname__ = module.__name__, "broadcast_push"
    module.broadcast_push = instrument_tool(kind=c.KIND_SEND)(  # type: ignore[attr-defined]
        crew.sends.schedule_send(policy_task_id=POLICY, review_seconds=0)(broadcast_push))
    sys.modules[module.__name__] = module
    try:
        module.broadcast_push("all-users", crew.v1)
        worker = ScheduledSends(crew.objectives.store, crew.objectives, clock=crew.clock)
        assert [r["status"] for r in worker.fire_due()] == ["fired"] and outbox == ["all-users"]
    finally:
        del sys.modules[module.__name__]


def test_decoration_refuses_what_cannot_be_scheduled(crew: Crew) -> None:
    """Windows out of range, methods, coroutines, a missing or defaulted policy_version, wrong order."""
    for window in (-1, float("nan"), float("inf"), True, "600", 10**9, None):
        with pytest.raises(ConfigurationError, match="review_seconds"):
            crew.sends.schedule_send(policy_task_id=POLICY, review_seconds=window)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="policy_task_id"):
        crew.sends.schedule_send(policy_task_id="", review_seconds=1)
    guard = crew.sends.schedule_send(policy_task_id=POLICY, review_seconds=1)

    async def coroutine(policy_version: str) -> None: ...

    def defaulted(policy_version: str = "latest") -> None: ...

    def no_version(body: str) -> None: ...

    class Tools:
        def send(self, policy_version: str) -> None: ...

    for bad, match in ((coroutine, "synchronous"), (defaulted, "required 'policy_version'"),
                       (no_version, "required 'policy_version'"), (Tools.send, "method"),
                       (instrument_tool(kind=c.KIND_SEND)(no_version), "already instrumented")):
        with pytest.raises(ConfigurationError, match=match):
            guard(bad)
    with pytest.raises(ConfigurationError, match="not guarded"):
        crew.sends.register(no_version)
    with pytest.raises(ConfigurationError, match="limit"):
        crew.sends.fire_due(limit=0)


def test_the_guarded_tool_keeps_its_signature(crew: Crew) -> None:
    assert list(inspect.signature(crew.send).parameters) == ["ticket_id", "body", "policy_version", "agent_id"]
