"""Versioned objectives and guarded sends over a real SQLite file: holders, the correction
fan-out, stale sends refused and counted, and the one-line decorator on an existing send tool."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from telemetry import agent, instrument_tool
from telemetry import conventions as c
from telemetry.exceptions import ConfigurationError
from telemetry.guards import Objectives, guarded_send, open_store
from telemetry.testing import Capture

POLICY = "refund-policy"


@pytest.fixture
def objectives(store_url: str) -> Objectives:
    return Objectives(open_store(store_url))


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def make_sender(objectives: Objectives, outbox: list[tuple[str, str]]) -> Any:
    @instrument_tool(kind=c.KIND_SEND)
    @guarded_send(objectives, policy_task_id=POLICY)
    def send_customer_message(ticket_id: str, body: str, policy_version: str) -> dict[str, Any]:
        """Send a customer-facing message drafted against ``policy_version``."""
        outbox.append((ticket_id, body))
        return {"ok": True, "ticket_id": ticket_id}

    return send_customer_message


def test_publish_returns_an_opaque_version_and_refuses_a_second_publish(
    objectives: Objectives, telemetry_capture: Capture
) -> None:
    """publish_objective returns a non-numeric token; publishing again points at supersede."""
    first = objectives.publish_objective(POLICY, "Credit up to $20")
    assert first["ok"] and isinstance(first["version"], str) and not first["version"].isdigit()
    a = attrs(telemetry_capture.span(c.TOOL_PUBLISH_OBJECTIVE))
    assert a[c.OBJECTIVE_TASK_ID] == POLICY and a[c.OBJECTIVE_VERSION] == first["version"]
    assert a[c.TOOL_READBACK] == c.READBACK_MATCH
    again = objectives.publish_objective(POLICY, "Credit up to $50")
    assert again["error"] == c.OUTCOME_INVALID_ARGUMENT and c.TOOL_SUPERSEDE_OBJECTIVE in again["message"]


def test_get_objective_returns_the_envelope_and_registers_the_holder(
    objectives: Objectives, telemetry_capture: Capture
) -> None:
    """get_objective answers the five fields and records the reader as a holder."""
    version = objectives.publish_objective(POLICY, "Credit up to $20")["version"]
    got = objectives.get_objective(POLICY, "responder")
    assert {k: got[k] for k in ("objective", "version", "superseded", "refresh_required")} == {
        "objective": "Credit up to $20",
        "version": version,
        "superseded": False,
        "refresh_required": False,
    }
    assert got["as_of"].endswith("+00:00")
    assert [(h["agent_id"], h["version"]) for h in objectives.holders(POLICY)] == [("responder", version)]
    a = attrs(telemetry_capture.span(c.TOOL_GET_OBJECTIVE))
    assert a[c.OBJECTIVE_TASK_ID] == POLICY and a[c.OBJECTIVE_VERSION] == version
    assert a[c.GEN_AI_AGENT_ID] == "responder" and a[c.TOOL_KIND] == c.KIND_READ


def test_supersession_fans_out_to_exactly_the_three_holders_and_refuses_their_stale_send(
    objectives: Objectives, telemetry_capture: Capture
) -> None:
    """Three holders of v1 are the fan-out; one's v1 send is refused and counted, then goes through."""
    outbox: list[tuple[str, str]] = []
    send = make_sender(objectives, outbox)
    v1 = objectives.publish_objective(POLICY, "Credit up to $20")["version"]
    objectives.publish_objective("other-task", "unrelated")
    objectives.get_objective("other-task", "bystander")
    for name in ("billing", "responder", "triage"):
        assert objectives.get_objective(POLICY, name)["version"] == v1
    sup = objectives.supersede_objective(POLICY, "Credit up to $10, manager approval above", "finance review", v1)
    v2 = sup["version"]
    assert v2 != v1 and sup["previous_version"] == v1
    assert sup["holders"] == [{"agent_id": a, "version": v1} for a in ("billing", "responder", "triage")]
    s = attrs(telemetry_capture.span(c.TOOL_SUPERSEDE_OBJECTIVE))
    assert s[c.OBJECTIVE_VERSION] == v2 and s[c.OBJECTIVE_PREVIOUS_VERSION] == v1 and s[c.OBJECTIVE_STALE_HOLDERS] == 3

    with agent("responder"):
        refused = send("T-32", "We credited $32", policy_version=v1)
    assert refused["error"] == c.OUTCOME_STALE_POLICY and refused["retry"] is True
    assert refused["current_version"] == v2
    assert refused["current_policy"] == "Credit up to $10, manager approval above"
    assert v1 in refused["message"] and v2 in refused["message"]
    assert outbox == [], "a refused send never reaches the tool body"
    labels = {c.LABEL_TOOL: "send_customer_message"}
    assert telemetry_capture.sample(c.METRIC_STALE_SENDS_TOTAL, labels) == 1.0
    assert telemetry_capture.sample(
        c.METRIC_GUARD_REFUSALS_TOTAL, {**labels, c.LABEL_REASON: c.OUTCOME_STALE_POLICY}
    ) == 1.0
    span = attrs(telemetry_capture.spans("send_customer_message")[0])
    assert span[c.TOOL_KIND] == c.KIND_SEND and span[c.GEN_AI_AGENT_ID] == "responder"
    assert span[c.OBJECTIVE_TASK_ID] == POLICY
    assert span[c.POLICY_VERSION] == v1 and span[c.POLICY_CURRENT_VERSION] == v2
    assert span[c.TOOL_OUTCOME] == c.OUTCOME_STALE_POLICY

    reread = objectives.get_objective(POLICY, "responder")
    assert reread["version"] == v2 and reread["superseded"] and reread["refresh_required"]
    assert reread["previous_version"] == v1
    with agent("responder"):
        sent = send("T-32", "We credited $10", policy_version=reread["version"])
    assert sent == {"ok": True, "ticket_id": "T-32"} and outbox == [("T-32", "We credited $10")]
    assert telemetry_capture.sample(c.METRIC_STALE_SENDS_TOTAL, labels) == 1.0
    assert telemetry_capture.calls("send_customer_message", outcome=c.OUTCOME_OK) == 1.0
    assert [(r["agent_id"], r["version"], r["accepted"]) for r in objectives.sends(POLICY)] == [
        ("responder", v1, False),
        ("responder", v2, True),
    ]
    later = objectives.supersede_objective(POLICY, "Credit up to $5", "second review", v2)
    assert [h["agent_id"] for h in later["holders"]] == ["billing", "responder", "triage"]
    assert {h["agent_id"]: h["version"] for h in later["holders"]}["responder"] == v2


def test_an_unknown_version_is_invalid_not_a_stale_send(objectives: Objectives, telemetry_capture: Capture) -> None:
    """A made-up or empty token is invalid_argument with the current policy, not a stale send;
    a policy nobody published is not_found."""
    outbox: list[tuple[str, str]] = []
    send = make_sender(objectives, outbox)
    version = objectives.publish_objective(POLICY, "Credit up to $20")["version"]
    for bad in ("latest", ""):
        result = send("T-1", "hello", bad)
        assert result["error"] == c.OUTCOME_INVALID_ARGUMENT and result["current_version"] == version
    assert outbox == []
    assert telemetry_capture.sample(c.METRIC_STALE_SENDS_TOTAL, {c.LABEL_TOOL: "send_customer_message"}) == 0.0  # the series exists from the first call, never incremented

    @instrument_tool(kind=c.KIND_SEND)
    @guarded_send(objectives, policy_task_id="unpublished")
    def send_other(ticket_id: str, policy_version: str) -> dict[str, Any]:
        return {"ok": True}

    assert send_other("T-2", version)["error"] == c.OUTCOME_NOT_FOUND


def test_supersede_needs_a_reason_and_a_published_task(objectives: Objectives) -> None:
    """supersede_objective refuses an empty reason and an unknown task, naming them."""
    v1 = objectives.publish_objective(POLICY, "Credit up to $20")["version"]
    no_reason = objectives.supersede_objective(POLICY, "Credit up to $10", " ", v1)
    assert no_reason["error"] == c.OUTCOME_INVALID_ARGUMENT and "reason" in no_reason["message"]
    unknown = objectives.supersede_objective("nope", "text", "why", v1)
    assert unknown["error"] == c.OUTCOME_NOT_FOUND and "'nope'" in unknown["message"]
    assert objectives.get_objective("nope", "a")["error"] == c.OUTCOME_NOT_FOUND


def test_guarded_send_keeps_the_signature_and_takes_agent_from_a_parameter(
    objectives: Objectives, telemetry_capture: Capture
) -> None:
    """The decorated tool keeps its signature; an agent_id parameter names the agent on the span."""

    def notify(ticket_id: str, body: str, policy_version: str, agent_id: str) -> dict[str, Any]:
        return {"ok": True}

    guarded = instrument_tool(name="notify_customer", kind=c.KIND_SEND)(guarded_send(objectives, policy_task_id=POLICY)(notify))
    assert inspect.signature(guarded) == inspect.signature(notify) and guarded.__wrapped__ is not None
    version = objectives.publish_objective(POLICY, "Credit up to $20")["version"]
    assert guarded("T-1", "hi", version, agent_id="billing")["ok"]
    span = attrs(telemetry_capture.span("notify_customer"))
    assert span[c.GEN_AI_AGENT_ID] == "billing" and span[c.POLICY_VERSION] == version
    assert objectives.sends(POLICY)[0]["agent_id"] == "billing"


async def test_guarded_async_send_is_checked_too(objectives: Objectives, telemetry_capture: Capture) -> None:
    """An async send tool is guarded the same way and its span covers the await."""
    calls: list[str] = []

    @instrument_tool(kind=c.KIND_SEND)
    @guarded_send(objectives, policy_task_id=POLICY)
    async def send_async(ticket_id: str, policy_version: str) -> dict[str, Any]:
        await asyncio.sleep(0)
        calls.append(ticket_id)
        return {"ok": True}

    v1 = objectives.publish_objective(POLICY, "Credit up to $20")["version"]
    v2 = objectives.supersede_objective(POLICY, "Credit up to $10", "finance", v1)["version"]
    assert (await send_async("T-1", v1))["error"] == c.OUTCOME_STALE_POLICY
    assert (await send_async("T-2", v2))["ok"] and calls == ["T-2"]
    assert telemetry_capture.sample(c.METRIC_STALE_SENDS_TOTAL, {c.LABEL_TOOL: "send_async"}) == 1.0
    assert [attrs(s)[c.POLICY_CURRENT_VERSION] for s in telemetry_capture.spans("send_async")] == [v2, v2]


def test_guarded_send_refuses_tools_it_cannot_guard(objectives: Objectives) -> None:
    """No policy_version, a defaulted one, a generator or an already-instrumented tool is a ConfigurationError."""

    def no_version(ticket_id: str) -> None: ...

    def defaulted(ticket_id: str, policy_version: str = "latest") -> None: ...

    def gen(policy_version: str) -> Any:
        yield policy_version

    @instrument_tool(kind=c.KIND_SEND)
    def instrumented(policy_version: str) -> None: ...

    decorate = guarded_send(objectives, policy_task_id=POLICY)
    with pytest.raises(ConfigurationError, match="required 'policy_version'"):
        decorate(no_version)
    with pytest.raises(ConfigurationError, match="no default"):
        decorate(defaulted)
    with pytest.raises(ConfigurationError, match="generators"):
        decorate(gen)
    with pytest.raises(ConfigurationError, match="below @instrument_tool"):
        decorate(instrumented)
    with pytest.raises(ConfigurationError, match="policy_task_id"):
        guarded_send(objectives, policy_task_id="")


def test_a_send_missing_policy_version_raises_like_the_plain_function(objectives: Objectives) -> None:
    """Calling without policy_version raises the same TypeError the undecorated tool would."""
    send = make_sender(objectives, [])
    with pytest.raises(TypeError, match="policy_version"):
        send("T-1", "hi")


@pytest.mark.parametrize(
    ("text", "needle"),
    [("x" * 20_000, "the limit is 16384"), ("policy \ud800", "not valid Unicode text"), (10**5000, "an integer of 16610 bits")],
    ids=["too-long", "lone-surrogate", "huge-int"],
)
def test_oversized_or_unencodable_text_is_invalid_and_nothing_is_published(
    objectives: Objectives, text: Any, needle: str
) -> None:
    """An objective too long, with a lone surrogate or not a string is invalid_argument; nothing is stored."""
    refused = objectives.publish_objective("policy", text)
    assert refused["error"] == c.OUTCOME_INVALID_ARGUMENT and needle in refused["message"]
    assert objectives.get_objective("policy", "agent")["error"] == c.OUTCOME_NOT_FOUND


def test_two_corrections_from_one_version_cannot_both_win(objectives: Objectives, telemetry_capture: Capture) -> None:
    """Superseding from a version someone already superseded is refused with the current text; nothing changes."""
    v1 = objectives.publish_objective(POLICY, "Credit up to $20")["version"]
    first = objectives.supersede_objective(POLICY, "Credit up to $10", "finance review", v1)
    second = objectives.supersede_objective(POLICY, "Credit up to $15", "support review", v1)
    assert first["ok"] and second["error"] == c.OUTCOME_REJECTED_STALE_VERSION and second["retry"] is True
    assert second["current_version"] == first["version"] and second["current_text"] == "Credit up to $10"
    assert first["version"] in second["message"]
    assert objectives.get_objective(POLICY, "reader")["objective"] == "Credit up to $10"
    refused = telemetry_capture.spans(c.TOOL_SUPERSEDE_OBJECTIVE)[-1].attributes
    assert refused[c.OBJECTIVE_CURRENT_VERSION] == first["version"] and c.OBJECTIVE_VERSION not in refused
    assert telemetry_capture.sample(
        c.METRIC_GUARD_REFUSALS_TOTAL, {c.LABEL_TOOL: c.TOOL_SUPERSEDE_OBJECTIVE, c.LABEL_REASON: c.OUTCOME_REJECTED_STALE_VERSION}
    ) == 1.0


def test_a_guarded_send_without_the_decorator_still_refuses(objectives: Objectives, telemetry_capture: Capture) -> None:
    """The guard alone refuses a superseded policy; only the decorator above it records the call."""
    outbox: list[str] = []

    @guarded_send(objectives, policy_task_id=POLICY)
    def bare_send(ticket_id: str, policy_version: str) -> dict[str, Any]:
        outbox.append(ticket_id)
        return {"ok": True}

    old = objectives.publish_objective(POLICY, "Credit up to $20")["version"]
    objectives.supersede_objective(POLICY, "Credit up to $10", "finance review", old)
    assert bare_send("T-1", old)["error"] == c.OUTCOME_STALE_POLICY
    assert outbox == [] and [s.name for s in telemetry_capture.spans() if "bare_send" in s.name] == []
    assert objectives.sends(POLICY)[0]["tool"] == "bare_send"
