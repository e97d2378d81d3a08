"""Agno: instrument(agent or team) over whole runs on a scripted agno Model subclass (no network)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import telemetry
from telemetry import conventions as c
from telemetry.exceptions import ConfigurationError
from telemetry.instrument import SPEC_ATTRIBUTE
from telemetry.testing import Capture

from .integration_support import KEY, assert_stale_write_story, attrs, ours, state_store, write_traces
from optional import require


@pytest.fixture(autouse=True)
def _agno() -> Iterator[None]:
    """Agno is imported by the test that runs (each imports its parts from ``agno_parts``)."""
    require("agno.agent", "agno")
    yield


def test_tools_shown_are_byte_identical_and_calls_carry_call_run_and_agent(telemetry_capture: Capture) -> None:
    """Functions, @tool Functions and a Toolkit: the model sees the same definitions; spans carry call id, run, agent."""
    from .agno_parts import Agent, Inventory, Scripted, counter, lookup, otel_agno

    calls = [("c-1", "lookup", {"query": "bolts"}), ("c-2", "count", {"n": 2}), ("c-3", "stock", {"item": "nut"})]
    plain, traced = Scripted(turns=[calls]), Scripted(turns=[calls])
    plain_agent = Agent(name="planner", model=plain, tools=[lookup, counter(), Inventory()])
    traced_agent = Agent(name="planner", model=traced, tools=[lookup, counter(), Inventory()])
    assert otel_agno.instrument(traced_agent) is traced_agent
    plain_agent.run("go")
    telemetry_capture.clear()
    result = traced_agent.run("go")
    assert traced.shown == plain.shown and '"stock"' in traced.shown[0]
    assert traced.told == plain.told and result.content == "done"
    spans = {attrs(s)[c.GEN_AI_TOOL_NAME]: attrs(s) for s in ours(telemetry_capture.spans())}
    assert {n: a[c.GEN_AI_TOOL_CALL_ID] for n, a in spans.items()} == {"lookup": "c-1", "count": "c-2", "stock": "c-3"}
    assert {(a[c.GEN_AI_AGENT_ID], a[c.GEN_AI_CONVERSATION_ID], a[c.TOOL_OUTCOME]) for a in spans.values()} == {
        ("planner", result.run_id, c.OUTCOME_OK)}
    assert (spans["count"][c.TOOL_KIND], spans["lookup"][c.TOOL_KIND]) == (c.KIND_READ, c.KIND_WRITE)  # count's readOnlyHint


async def test_async_run_user_context_and_instrument_once(telemetry_capture: Capture) -> None:
    """arun records the same; inside telemetry.agent() the user's ids win; a second instrument() wraps nothing again."""
    from .agno_parts import Agent, Scripted, lookup, notify, otel_agno

    model = Scripted(turns=[[("a-1", "notify", {"message": "hi"}), ("a-2", "lookup", {"query": "x"})]])
    planner = otel_agno.instrument(Agent(name="planner", model=model, tools=[lookup, notify]))
    first = list(planner.tools)
    otel_agno.instrument(planner)
    assert planner.tools == first and getattr(first[0], SPEC_ATTRIBUTE).name == "lookup"
    with telemetry.agent("crew-lead", conversation_id="crew-run-7"):
        await planner.arun("go")
    for name, call_id in (("notify", "a-1"), ("lookup", "a-2")):
        a = attrs(telemetry_capture.span(name))
        assert (a[c.GEN_AI_AGENT_ID], a[c.GEN_AI_CONVERSATION_ID], a[c.GEN_AI_TOOL_CALL_ID]) == ("crew-lead", "crew-run-7", call_id)
    with pytest.raises(ConfigurationError, match="'lookpu'.*lookup"):
        otel_agno.instrument(planner, kinds={"lookpu": "read"})
    with pytest.raises(ConfigurationError, match="needs an agno Agent"):
        otel_agno.instrument(lookup)


def test_guarded_recovery_in_one_run_and_forensics_finds_it(tmp_path: Path, telemetry_capture: Capture) -> None:
    """A stale write is refused and recovered in one run; forensics finds the refusal in that run."""
    from .agno_parts import Agent, Scripted, otel_agno, planner_turns

    store = state_store(tmp_path, telemetry_capture)
    planner = otel_agno.instrument(Agent(name="planner", model=Scripted(next_turn=planner_turns(store)),
                                         tools=[store.read_state, store.write_state]))
    result = planner.run("add your step to the plan")
    spans = telemetry_capture.spans()
    assert result.content == "done" and store.read_state(KEY)["value"] == {"steps": ["draft", "colleague", "planner"]}
    writes = [attrs(s) for s in telemetry_capture.spans("write_state") if attrs(s).get(c.GEN_AI_AGENT_ID) == "planner"]
    assert [(a[c.TOOL_OUTCOME], a[c.GEN_AI_TOOL_CALL_ID]) for a in writes] == [
        (c.OUTCOME_REJECTED_STALE_VERSION, "call-write-2"), (c.OUTCOME_OK, "call-write-4")]
    assert writes[1][c.TOOL_READBACK] == c.READBACK_MATCH
    assert_stale_write_story(write_traces(tmp_path / "run.jsonl", spans), result.run_id)


def test_refused_arguments_retry_requests_and_exceptions(telemetry_capture: Capture) -> None:
    """Arguments Agno's validation refuses are invalid_argument; RetryAgentRun is retry_requested; errors as raised."""
    from .agno_parts import Agent, RetryAgentRun, Scripted, otel_agno

    ran: list[int] = []

    def charge(amount: int) -> str:
        """Charge an amount in cents."""
        ran.append(amount)
        if amount > 1000:
            raise RetryAgentRun("charges over 1000 need a smaller amount")
        if amount == 13:
            raise ValueError("unlucky")
        return "charged"

    turns = [[("v-1", "charge", {"amount": "lots"})], [("v-2", "charge", {"amount": 5000})],
             [("v-3", "charge", {"amount": 13})], [("v-4", "charge", {"amount": 250})]]
    model = Scripted(turns=turns)
    till = otel_agno.instrument(Agent(name="till", model=model, tools=[charge]), kinds={"charge": "send"})
    assert till.run("go").content == "done"
    assert ran == [5000, 13, 250]
    refused, retry, failed, charged = (attrs(s) for s in telemetry_capture.spans("charge"))
    assert (refused[c.TOOL_TRANSPORT], refused[c.TOOL_OUTCOME], refused[c.GEN_AI_TOOL_CALL_ID], refused[c.TOOL_KIND]) == (
        c.TRANSPORT_OK, c.OUTCOME_INVALID_ARGUMENT, "v-1", c.KIND_SEND)
    assert refused[c.ERROR_TYPE].endswith("ValidationError") and refused[c.GEN_AI_AGENT_ID] == "till"
    assert (retry[c.TOOL_TRANSPORT], retry[c.TOOL_OUTCOME], retry[c.ERROR_TYPE]) == (
        c.TRANSPORT_OK, c.OUTCOME_RETRY_REQUESTED, "agno.exceptions.RetryAgentRun")
    assert (failed[c.TOOL_TRANSPORT], failed[c.ERROR_TYPE]) == (c.TRANSPORT_ERROR, "ValueError")
    assert (charged[c.TOOL_OUTCOME], charged[c.GEN_AI_TOOL_CALL_ID]) == (c.OUTCOME_OK, "v-4")
    assert any("smaller amount" in t for t in model.told) and any("unlucky" in t for t in model.told)
    assert telemetry_capture.calls("charge", transport=c.TRANSPORT_OK, outcome=c.OUTCOME_INVALID_ARGUMENT) == 1


def test_confirmation_and_external_execution_are_pauses_then_the_confirmed_call_runs(telemetry_capture: Capture) -> None:
    """requires_confirmation pauses the run: approval_required, transport ok; external_execution: deferred; continue_run runs it."""
    from .agno_parts import Agent, Scripted, otel_agno, tool

    @tool(requires_confirmation=True)
    def delete(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    @tool(external_execution=True)
    def ship(order: int) -> str:
        """Ship an order (the warehouse does it)."""
        return "shipped"

    clerk = otel_agno.instrument(Agent(name="clerk", model=Scripted(turns=[[("p-1", "delete", {"path": "/tmp/x"})]]), tools=[delete, ship]))
    paused = clerk.run("go")
    assert paused.is_paused
    a = attrs(telemetry_capture.span("delete"))
    assert (a[c.TOOL_TRANSPORT], a[c.TOOL_OUTCOME], a[c.GEN_AI_TOOL_CALL_ID], a[c.GEN_AI_AGENT_ID]) == (
        c.TRANSPORT_OK, c.OUTCOME_APPROVAL_REQUIRED, "p-1", "clerk")
    assert a[c.ERROR_TYPE] == "telemetry.integrations.agno.Paused" and not a[c.TOOL_SILENT_FAILURE]
    telemetry_capture.clear()
    for requirement in paused.active_requirements:
        requirement.confirm()
    assert clerk.continue_run(run_response=paused).content == "done"
    a = attrs(telemetry_capture.span("delete"))  # the confirmed call runs, and is recorded as it ran
    assert (a[c.TOOL_OUTCOME], a[c.GEN_AI_TOOL_CALL_ID]) == (c.OUTCOME_OK, "p-1")
    telemetry_capture.clear()
    clerk.model = Scripted(turns=[[("e-1", "ship", {"order": 7})]])
    assert clerk.run("go").is_paused
    a = attrs(telemetry_capture.span("ship"))
    assert (a[c.TOOL_TRANSPORT], a[c.TOOL_OUTCOME], a[c.GEN_AI_TOOL_CALL_ID]) == (c.TRANSPORT_OK, c.OUTCOME_DEFERRED, "e-1")


def test_team_members_and_agents_inside_tools_keep_their_own_ids(telemetry_capture: Capture) -> None:
    """A team's member calls carry the member's name; an agent run inside a tool its own ids, under the outer span."""
    from .agno_parts import Agent, Scripted, Team, lookup, otel_agno

    researcher = Agent(name="researcher", model=Scripted(turns=[[("inner-1", "lookup", {"query": "inner"})]]), tools=[lookup])
    runs: list[str] = []

    def ask_researcher(question: str) -> str:
        """Ask the research agent."""
        result = researcher.run(question)
        runs.append(result.run_id)
        return str(result.content)

    lead = Agent(name="lead", model=Scripted(turns=[[("outer-1", "ask_researcher", {"question": "stock?"})]]), tools=[ask_researcher])
    otel_agno.instrument(Team(name="crew", members=[lead, researcher], model=Scripted()))
    result = lead.run("go")
    outer_span, inner_span = telemetry_capture.span("ask_researcher"), telemetry_capture.span("lookup")
    o, i = attrs(outer_span), attrs(inner_span)
    assert (o[c.GEN_AI_AGENT_ID], o[c.GEN_AI_TOOL_CALL_ID], o[c.GEN_AI_CONVERSATION_ID]) == ("lead", "outer-1", result.run_id)
    assert (i[c.GEN_AI_AGENT_ID], i[c.GEN_AI_TOOL_CALL_ID], i[c.GEN_AI_CONVERSATION_ID]) == ("researcher", "inner-1", runs[0])
    assert inner_span.parent is not None and inner_span.parent.span_id == outer_span.context.span_id


def test_a_team_delegation_is_a_delegate_call_with_the_members_calls_under_it(telemetry_capture: Capture) -> None:
    """The leader's delegate_task_to_member (Agno makes it per run) is a delegate call of the team; the member's calls nest under it with the member's ids."""
    from .agno_parts import Agent, Scripted, Team, otel_agno

    streamed: list[str] = []

    def lookup(query: str):  # type: ignore[no-untyped-def]
        """Look something up, streaming the result (a generator tool)."""
        streamed.append(query)
        yield f"found {query}"

    def crew() -> tuple[Team, Scripted]:
        researcher = Agent(name="researcher", model=Scripted(turns=[[("m-1", "lookup", {"query": "stock"})]]), tools=[lookup])
        leader = Scripted(turns=[[("d-1", "delegate_task_to_member", {"member_id": "researcher", "task": "look up stock"})]])
        return Team(name="crew", members=[researcher], model=leader), leader

    plain, plain_leader = crew()
    plain.run("go")
    team, leader = crew()
    otel_agno.instrument(team, kinds={"lookup": "read"})
    telemetry_capture.clear()
    result = team.run("go")
    assert result.content == "done" and streamed == ["stock", "stock"] and leader.told == plain_leader.told == ["done"]
    assert leader.shown == plain_leader.shown
    delegation, looked = telemetry_capture.span("delegate_task_to_member"), telemetry_capture.span("lookup")
    d, m = attrs(delegation), attrs(looked)
    assert (d[c.TOOL_KIND], d[c.GEN_AI_AGENT_ID], d[c.GEN_AI_TOOL_CALL_ID], d[c.GEN_AI_CONVERSATION_ID], d[c.TOOL_OUTCOME]) == (
        c.KIND_DELEGATE, "crew", "d-1", result.run_id, c.OUTCOME_OK)
    assert (m[c.TOOL_KIND], m[c.GEN_AI_AGENT_ID], m[c.GEN_AI_TOOL_CALL_ID]) == (c.KIND_READ, "researcher", "m-1")
    assert m[c.GEN_AI_CONVERSATION_ID] != result.run_id  # the member's run is a run of its own
    assert looked.parent is not None and looked.parent.span_id == delegation.context.span_id
    otel_agno.uninstrument(team)
    assert "__outcome_telemetry_agno_selection__" not in vars(team)


def test_uninstrument_restores_tools_exactly(telemetry_capture: Capture) -> None:
    """After uninstrument: the same tool list, functions and entrypoints, the same definitions shown, no spans."""
    from .agno_parts import Agent, Inventory, Scripted, counter, lookup, otel_agno

    inventory, count = Inventory(), counter()
    calls = [("u-1", "lookup", {"query": "x"}), ("u-2", "count", {"n": 1}), ("u-3", "stock", {"item": "bolt"})]
    planner = Agent(name="planner", model=(first := Scripted(turns=[calls])), tools=[lookup, count, inventory])
    tools, entrypoints = list(planner.tools), (count.entrypoint, inventory.functions["stock"].entrypoint)
    planner.run("go")
    otel_agno.instrument(planner)
    assert planner.tools[0] is not lookup and getattr(count.entrypoint, SPEC_ATTRIBUTE).name == "count"
    assert otel_agno.uninstrument(planner) is planner
    assert planner.tools == tools and (count.entrypoint, inventory.functions["stock"].entrypoint) == entrypoints
    planner.model = (second := Scripted(turns=[calls]))
    telemetry_capture.clear()
    planner.run("go")
    assert second.shown == first.shown and second.told == first.told and ours(telemetry_capture.spans()) == []
    otel_agno.uninstrument(planner)
    listed = [lookup, count]
    otel_agno.instrument(listed)  # a bare list, in place, and back again
    assert listed[0] is not lookup and getattr(listed[0], SPEC_ATTRIBUTE).name == "lookup"
    otel_agno.uninstrument(listed)
    assert listed == [lookup, count] and count.entrypoint is entrypoints[0]


def test_our_span_nests_under_agnos_openinference_tool_span(telemetry_capture: Capture) -> None:
    """With Agno's tracing on (OpenInference's AgnoInstrumentor, what agno.tracing sets up), each of our spans is the child of its TOOL span."""
    instrumentation = require("openinference.instrumentation.agno", "peers")
    from .agno_parts import Agent, Scripted, lookup, otel_agno

    instrumentor = instrumentation.AgnoInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry_capture.runtime.provider)
    try:
        planner = otel_agno.instrument(Agent(name="planner", model=Scripted(turns=[[("n-1", "lookup", {"query": "x"})]]), tools=[lookup]))
        assert planner.run("go").content == "done"
    finally:
        instrumentor.uninstrument()
    mine = telemetry_capture.span("lookup")
    tools = [s for s in telemetry_capture.spans() if attrs(s).get("openinference.span.kind") == "TOOL"]
    assert len(tools) == 1 and mine.parent is not None and mine.parent.span_id == tools[0].context.span_id
    assert (attrs(mine)[c.GEN_AI_TOOL_CALL_ID], attrs(mine)[c.GEN_AI_AGENT_ID]) == ("n-1", "planner")


ARGUMENT_NAMES = st.sampled_from(["amount", "note", "amout", "agent", "x\u202e"])
ARGUMENT_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                               lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                               max_leaves=6)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arguments=st.dictionaries(ARGUMENT_NAMES, ARGUMENT_VALUES, max_size=4))
def test_any_arguments_the_model_sends_are_validated_as_agno_does_and_ok_or_invalid_argument(
    telemetry_capture: Capture, arguments: dict[str, object]
) -> None:
    """Whatever the model sends, our entrypoint returns or raises what Agno's own validated one does; the span says ok or invalid_argument."""
    from agno.tools.function import Function
    from pydantic import ValidationError

    from .agno_parts import otel_agno

    def charge(amount: int, note: str = "") -> str:
        """Charge an amount."""
        return f"charged {amount!r} {note!r}"

    listed = otel_agno.instrument([charge])
    telemetry_capture.clear()

    def outcome(entrypoint: object) -> object:
        try:
            return entrypoint(**arguments)  # type: ignore[operator]
        except ValidationError as exc:
            return ("ValidationError", [e["type"] for e in exc.errors()])

    traced = outcome(listed[0])
    assert traced == outcome(Function._wrap_callable(charge))
    (span,) = ours(telemetry_capture.spans())
    refused = isinstance(traced, tuple)
    assert (attrs(span)[c.TOOL_TRANSPORT], attrs(span)[c.TOOL_OUTCOME]) == (
        c.TRANSPORT_OK, c.OUTCOME_INVALID_ARGUMENT if refused else c.OUTCOME_OK)
