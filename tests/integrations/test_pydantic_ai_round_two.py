"""pydantic-ai, round two: nested agents, pauses, every tool path, prefixed names, refused arguments, uninstrument."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from telemetry import conventions as c
from telemetry.instrument import SPEC_ATTRIBUTE
from telemetry.testing import Capture

from .integration_support import attrs, ours
from optional import require


@pytest.fixture(autouse=True)
def _pydantic_ai() -> Iterator[None]:
    require("pydantic_ai", "pydantic-ai")
    yield


def test_nested_agent_calls_keep_their_own_agent_and_call_ids(telemetry_capture: Capture) -> None:
    """A tool that runs another agent: the inner call records the inner agent and the inner call id."""
    from .pydantic_ai_parts import lead, otel_pydantic_ai, researcher

    inner = otel_pydantic_ai.instrument(researcher())
    outer = otel_pydantic_ai.instrument(lead(inner))
    assert outer.run_sync("go").output == "done"
    outer_span, inner_span = telemetry_capture.span("ask_researcher"), telemetry_capture.span("lookup")
    assert (attrs(outer_span)[c.GEN_AI_AGENT_ID], attrs(outer_span)[c.GEN_AI_TOOL_CALL_ID]) == ("lead", "outer-1")
    assert (attrs(inner_span)[c.GEN_AI_AGENT_ID], attrs(inner_span)[c.GEN_AI_TOOL_CALL_ID]) == ("researcher", "inner-1")
    assert inner_span.parent is not None and inner_span.parent.span_id == outer_span.context.span_id


def test_user_agent_block_still_wins_over_nested_frameworks(telemetry_capture: Capture) -> None:
    """What the user set with telemetry.agent() is kept by the outer and the inner agent alike."""
    import telemetry

    from .pydantic_ai_parts import lead, otel_pydantic_ai, researcher

    outer = otel_pydantic_ai.instrument(lead(otel_pydantic_ai.instrument(researcher())))
    with telemetry.agent("crew", conversation_id="crew-run"):
        outer.run_sync("go")
    for name in ("ask_researcher", "lookup"):
        a = attrs(telemetry_capture.span(name))
        assert (a[c.GEN_AI_AGENT_ID], a[c.GEN_AI_CONVERSATION_ID]) == ("crew", "crew-run")
    assert attrs(telemetry_capture.span("lookup"))[c.GEN_AI_TOOL_CALL_ID] == "inner-1"


def test_deferred_and_approval_required_are_pauses_not_failures(telemetry_capture: Capture) -> None:
    """CallDeferred and ApprovalRequired (raised by the tool or by an approval toolset) are transport ok, not failures."""
    from pydantic_ai import CallDeferred, DeferredToolRequests, DeferredToolResults
    from pydantic_ai.toolsets import FunctionToolset

    from .pydantic_ai_parts import Agent, ToolCallPart, count, otel_pydantic_ai, scripted

    def ship(order: int) -> str:
        """Ship an order (finished by the warehouse, later)."""
        raise CallDeferred()

    calls = [ToolCallPart("ship", {"order": 7}, tool_call_id="d-1"), ToolCallPart("count", {"n": 2}, tool_call_id="a-1")]
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        scripted(calls), name="clerk", tools=[ship], toolsets=[FunctionToolset([count]).approval_required()],
        output_type=[str, DeferredToolRequests],
    )
    otel_pydantic_ai.instrument(agent)
    paused = agent.run_sync("go")
    assert isinstance(paused.output, DeferredToolRequests)
    assert [p.tool_call_id for p in paused.output.approvals] == ["a-1"]
    shipped, approval = telemetry_capture.span("ship"), telemetry_capture.span("count")
    assert (attrs(shipped)[c.TOOL_TRANSPORT], attrs(shipped)[c.TOOL_OUTCOME]) == (c.TRANSPORT_OK, c.OUTCOME_DEFERRED)
    assert (attrs(approval)[c.TOOL_TRANSPORT], attrs(approval)[c.TOOL_OUTCOME]) == (c.TRANSPORT_OK, c.OUTCOME_APPROVAL_REQUIRED)
    assert attrs(approval)[c.GEN_AI_TOOL_CALL_ID] == "a-1" and attrs(approval)[c.GEN_AI_AGENT_ID] == "clerk"
    assert telemetry_capture.calls("count", transport=c.TRANSPORT_OK, outcome=c.OUTCOME_APPROVAL_REQUIRED) == 1
    assert not any(attrs(s).get(c.TOOL_SILENT_FAILURE) for s in ours(telemetry_capture.spans()))
    assert {c.OUTCOME_DEFERRED, c.OUTCOME_APPROVAL_REQUIRED} <= c.NOT_BAD_OUTCOMES
    telemetry_capture.clear()
    results = DeferredToolResults(approvals={"a-1": True}, calls={"d-1": "shipped"})
    agent.run_sync(message_history=paused.all_messages(), deferred_tool_results=results)
    a = attrs(telemetry_capture.span("count"))  # the approved call runs, and is recorded as it ran
    assert (a[c.TOOL_OUTCOME], a[c.GEN_AI_TOOL_CALL_ID]) == (c.OUTCOME_OK, "a-1")


def test_tools_given_at_run_time_dynamically_or_by_override_are_recorded(telemetry_capture: Capture) -> None:
    """run(toolsets=...), @agent.toolset and agent.override(tools=...) tools get spans, with the run's ids."""
    from pydantic_ai import RunContext
    from pydantic_ai.toolsets import FunctionToolset

    from .pydantic_ai_parts import Agent, ToolCallPart, count, lookup, otel_pydantic_ai, scripted, search

    calls = [ToolCallPart("search", {"query": "bolts"}, tool_call_id="r-1"), ToolCallPart("count", {"n": 1}, tool_call_id="r-2"),
             ToolCallPart("lookup", {"query": "x"}, tool_call_id="r-3")]
    agent: Agent[None, str] = Agent(scripted(calls), name="clerk")

    @agent.toolset
    def per_step(ctx: RunContext[None]) -> FunctionToolset[None]:
        return FunctionToolset([count])

    otel_pydantic_ai.instrument(agent)
    result = agent.run_sync("go", toolsets=[FunctionToolset([search]), FunctionToolset([lookup])])
    spans = {attrs(s)[c.GEN_AI_TOOL_NAME]: attrs(s) for s in ours(telemetry_capture.spans())}
    assert {n: a[c.GEN_AI_TOOL_CALL_ID] for n, a in spans.items()} == {"search": "r-1", "count": "r-2", "lookup": "r-3"}
    assert {a[c.GEN_AI_CONVERSATION_ID] for a in spans.values()} == {result.conversation_id}
    telemetry_capture.clear()
    agent2: Agent[None, str] = Agent(scripted([ToolCallPart("search", {"query": "nuts"}, tool_call_id="o-1")]), name="clerk")
    otel_pydantic_ai.instrument(agent2)
    with agent2.override(tools=[search]):
        agent2.run_sync("go")
    assert attrs(telemetry_capture.span("search"))[c.GEN_AI_TOOL_CALL_ID] == "o-1"


def test_prefixed_and_renamed_tools_record_the_name_the_model_called(telemetry_capture: Capture) -> None:
    """The model calls inv_search and stock: the spans say so, and kinds= takes those names."""
    from pydantic_ai.toolsets import FunctionToolset

    from .pydantic_ai_parts import Agent, ToolCallPart, count, otel_pydantic_ai, scripted, search

    calls = [ToolCallPart("inv_search", {"query": "bolts"}, tool_call_id="p-1"), ToolCallPart("stock", {"n": 4}, tool_call_id="p-2")]
    agent: Agent[None, str] = Agent(scripted(calls), name="clerk", toolsets=[
        FunctionToolset([search]).prefixed("inv"), FunctionToolset([count]).renamed({"stock": "count"})])
    otel_pydantic_ai.instrument(agent, kinds={"inv_search": "read", "stock": "read"})
    agent.run_sync("go")
    a, b = attrs(telemetry_capture.span("inv_search")), attrs(telemetry_capture.span("stock"))
    assert (a[c.TOOL_KIND], a[c.GEN_AI_TOOL_CALL_ID], b[c.TOOL_KIND], b[c.GEN_AI_TOOL_CALL_ID]) == (
        c.KIND_READ, "p-1", c.KIND_READ, "p-2")
    assert telemetry_capture.spans("search") == [] and telemetry_capture.spans("count") == []


def test_arguments_the_tool_never_saw_are_invalid_argument(telemetry_capture: Capture) -> None:
    """A call whose arguments fail validation is recorded (ok/invalid_argument); the model's retry is recorded as it ran."""
    from .pydantic_ai_parts import Agent, ToolCallPart, count, otel_pydantic_ai, scripted

    ran: list[int] = []

    def charge(amount: int) -> str:
        """Charge an amount in cents."""
        ran.append(amount)
        return "charged"

    agent: Agent[None, str] = Agent(scripted([ToolCallPart("charge", {"amount": "lots"}, tool_call_id="v-1")],
                                             [ToolCallPart("charge", {"amount": 250}, tool_call_id="v-2")]),
                                    name="till", tools=[charge, count])
    otel_pydantic_ai.instrument(agent, kinds={"charge": "send"})
    agent.run_sync("go")
    assert ran == [250]
    refused, charged = telemetry_capture.spans("charge")
    a = attrs(refused)
    assert (a[c.TOOL_TRANSPORT], a[c.TOOL_OUTCOME], a[c.GEN_AI_TOOL_CALL_ID], a[c.TOOL_KIND]) == (
        c.TRANSPORT_OK, c.OUTCOME_INVALID_ARGUMENT, "v-1", c.KIND_SEND)
    assert a[c.ERROR_TYPE].endswith("ValidationError") and a[c.GEN_AI_AGENT_ID] == "till"
    assert attrs(charged)[c.TOOL_OUTCOME] == c.OUTCOME_OK
    assert telemetry_capture.calls("charge", transport=c.TRANSPORT_OK, outcome=c.OUTCOME_INVALID_ARGUMENT) == 1


def test_uninstrument_restores_tools_exactly(tmp_path: Path, telemetry_capture: Capture) -> None:
    """After uninstrument: the same functions and schemas, the same definitions shown, no spans; again is harmless."""
    from .pydantic_ai_parts import TestModel, agent_of, already, otel_pydantic_ai, shown

    agent, _store = agent_of(tmp_path, telemetry_capture, TestModel(call_tools=["lookup", "already"]))
    tools = agent._function_toolset.tools
    functions = {n: (t.function, t.function_schema, t.function_schema.function) for n, t in tools.items()}
    root = agent._root_capability
    before = shown(agent)
    otel_pydantic_ai.instrument(agent)
    assert getattr(tools["lookup"].function, SPEC_ATTRIBUTE)
    assert otel_pydantic_ai.uninstrument(agent) is agent
    assert {n: (t.function, t.function_schema, t.function_schema.function) for n, t in tools.items()} == functions
    assert agent._root_capability is root and tools["already"].function is already
    assert shown(agent) == before
    telemetry_capture.clear()
    agent.run_sync("go")
    assert [attrs(s)[c.GEN_AI_TOOL_NAME] for s in ours(telemetry_capture.spans())] == ["already"]  # the user's own
    otel_pydantic_ai.uninstrument(agent)
    otel_pydantic_ai.instrument(agent)  # and back again
    telemetry_capture.clear()
    agent.run_sync("go")
    assert sorted(attrs(s)[c.GEN_AI_TOOL_NAME] for s in ours(telemetry_capture.spans())) == ["already", "lookup"]


@pytest.mark.parametrize("wrapped", [False, True], ids=["processor-as-is", "skip_ours"])
def test_openinference_processor_counts_each_call_once_when_it_skips_ours(telemetry_capture: Capture, wrapped: bool) -> None:
    """OpenInference's real span processor turns every GenAI span into a TOOL span: skip_ours keeps it off ours."""
    processors = require("openinference.instrumentation.pydantic_ai", "pydantic-ai")
    from telemetry.integrations._spans import skip_ours

    from .pydantic_ai_parts import (
        Agent,
        Instrumentation,
        InstrumentationSettings,
        ToolCallPart,
        count,
        otel_pydantic_ai,
        scripted,
    )

    provider = telemetry_capture.runtime.provider
    processor = processors.OpenInferenceSpanProcessor()
    provider.add_span_processor(skip_ours(processor) if wrapped else processor)
    agent: Agent[None, str] = Agent(scripted([ToolCallPart("count", {"n": 3}, tool_call_id="oi-1")]), name="clerk", tools=[count],
                                    capabilities=[Instrumentation(settings=InstrumentationSettings(tracer_provider=provider))])
    otel_pydantic_ai.instrument(agent)
    agent.run_sync("go")
    tool_spans = [s for s in telemetry_capture.spans() if attrs(s).get("openinference.span.kind") == "TOOL"]
    (mine,) = ours(telemetry_capture.spans())
    assert attrs(mine)[c.TOOL_OUTCOME] == c.OUTCOME_OK
    if wrapped:
        assert len(tool_spans) == 1 and tool_spans[0] is not mine and "openinference.span.kind" not in attrs(mine)
    else:  # the double count the wrapper prevents
        assert len(tool_spans) == 2
