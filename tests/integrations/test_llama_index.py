"""LlamaIndex: instrument(agent or AgentWorkflow) over whole agent runs on LlamaIndex's MockFunctionCallingLLM (no network)."""

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

# LlamaIndex's workflow runtime lists each agent's members (inspect.getmembers on a pydantic model),
# touching pydantic's deprecated attributes on every run, instrumented or not.
pytestmark = [pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20"),
              pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince211")]


@pytest.fixture(autouse=True)
def _llama_index() -> Iterator[None]:
    """LlamaIndex is imported by the test that runs (each imports its parts from ``llama_index_parts``)."""
    require("llama_index.core", "llama-index")
    yield


async def test_tools_shown_are_byte_identical_and_calls_carry_call_run_and_agent(telemetry_capture: Capture) -> None:
    """The model sees the same tool definitions; each span has the model's call id, the run id, the agent."""
    from .llama_index_parts import Script, agent, lookup, notify, otel_llama_index

    def script() -> Script:
        return Script([("c-1", "lookup", {"query": "bolts"}), ("c-2", "notify", {"message": "hi"})])

    plain, traced = script(), script()
    plain_agent, traced_agent = agent("planner", plain, [lookup, notify]), agent("planner", traced, [lookup, notify])
    assert otel_llama_index.instrument(traced_agent) is traced_agent
    plain_result = await plain_agent.run("go")
    telemetry_capture.clear()
    handler = traced_agent.run("go")
    result = await handler
    assert traced.shown == plain.shown and '"lookup"' in traced.shown[0]
    assert str(result) == str(plain_result) == "done"
    # What the model was told back (parallel calls finish in either order).
    assert [sorted(map(str, turn)) for turn in traced.seen] == [sorted(map(str, turn)) for turn in plain.seen]
    spans = {attrs(s)[c.GEN_AI_TOOL_NAME]: attrs(s) for s in ours(telemetry_capture.spans())}
    assert {n: a[c.GEN_AI_TOOL_CALL_ID] for n, a in spans.items()} == {"lookup": "c-1", "notify": "c-2"}
    assert {(a[c.GEN_AI_AGENT_ID], a[c.GEN_AI_CONVERSATION_ID], a[c.TOOL_OUTCOME]) for a in spans.values()} == {
        ("planner", handler.run_id, c.OUTCOME_OK)}


async def test_user_context_wins_and_instrument_wraps_once(telemetry_capture: Capture) -> None:
    """Inside telemetry.agent() the user's ids are kept; a second instrument() wraps nothing again."""
    from .llama_index_parts import Script, agent, lookup, otel_llama_index

    planner = agent("planner", Script([("c-1", "lookup", {"query": "x"})]), [lookup])
    otel_llama_index.instrument(planner, kinds={"lookup": "read"})
    tool = planner.tools[0]
    first = (tool._fn, tool._async_fn, vars(planner)["_call_tool"])
    otel_llama_index.instrument(planner)
    assert (tool._fn, tool._async_fn, vars(planner)["_call_tool"]) == first
    assert getattr(tool._fn, SPEC_ATTRIBUTE).kind == c.KIND_READ
    with telemetry.agent("crew-lead", conversation_id="crew-run-7"):
        await planner.run("go")
    a = attrs(telemetry_capture.span("lookup"))
    assert (a[c.GEN_AI_AGENT_ID], a[c.GEN_AI_CONVERSATION_ID], a[c.GEN_AI_TOOL_CALL_ID]) == ("crew-lead", "crew-run-7", "c-1")
    with pytest.raises(ConfigurationError, match="'lookpu'.*lookup"):
        otel_llama_index.instrument(planner, kinds={"lookpu": "read"})
    with pytest.raises(ConfigurationError, match="needs a LlamaIndex tool"):
        otel_llama_index.instrument(42)


async def test_guarded_recovery_in_one_run_and_forensics_finds_it(tmp_path: Path, telemetry_capture: Capture) -> None:
    """A stale write is refused and recovered in one run; forensics finds the refusal in that run."""
    from .llama_index_parts import Planner, agent, guard_tools, otel_llama_index

    store = state_store(tmp_path, telemetry_capture)
    planner = otel_llama_index.instrument(agent("planner", planner_script := Planner(store), guard_tools(store)))
    handler = planner.run("add your step to the plan")
    await handler
    spans = telemetry_capture.spans()
    assert planner_script.n == 5
    assert store.read_state(KEY)["value"] == {"steps": ["draft", "colleague", "planner"]}
    writes = [attrs(s) for s in telemetry_capture.spans("write_state") if attrs(s).get(c.GEN_AI_AGENT_ID) == "planner"]
    assert [(a[c.TOOL_OUTCOME], a[c.GEN_AI_TOOL_CALL_ID]) for a in writes] == [
        (c.OUTCOME_REJECTED_STALE_VERSION, "call-write-2"), (c.OUTCOME_OK, "call-write-4")]
    assert writes[1][c.TOOL_READBACK] == c.READBACK_MATCH
    assert_stale_write_story(write_traces(tmp_path / "run.jsonl", spans), handler.run_id)


async def test_exceptions_refused_arguments_and_the_models_retry(telemetry_capture: Capture) -> None:
    """A tool's exception is recorded as raised and told to the model; arguments its signature cannot take are invalid_argument."""
    from .llama_index_parts import Script, agent, otel_llama_index

    ran: list[int] = []

    def charge(amount: int) -> str:
        """Charge an amount in cents."""
        ran.append(amount)
        if amount > 1000:
            raise ValueError("over the limit")
        return "charged"

    script = Script([("v-1", "charge", {"amout": 250})], [("v-2", "charge", {"amount": 5000})], [("v-3", "charge", {"amount": 250})])
    till = otel_llama_index.instrument(agent("till", script, [charge]), kinds={"charge": "send"})
    assert str(await till.run("go")) == "done"
    assert ran == [5000, 250]
    refused, failed, charged = (attrs(s) for s in telemetry_capture.spans("charge"))
    assert (refused[c.TOOL_TRANSPORT], refused[c.TOOL_OUTCOME], refused[c.ERROR_TYPE], refused[c.GEN_AI_TOOL_CALL_ID]) == (
        c.TRANSPORT_OK, c.OUTCOME_INVALID_ARGUMENT, "TypeError", "v-1")
    assert (refused[c.TOOL_KIND], refused[c.GEN_AI_AGENT_ID]) == (c.KIND_SEND, "till")
    assert (failed[c.TOOL_TRANSPORT], failed[c.ERROR_TYPE], failed[c.GEN_AI_TOOL_CALL_ID]) == (c.TRANSPORT_ERROR, "ValueError", "v-2")
    assert (charged[c.TOOL_OUTCOME], charged[c.GEN_AI_TOOL_CALL_ID]) == (c.OUTCOME_OK, "v-3")
    told = [m.content for m in script.seen[1] + script.seen[2] if m.role == "tool"]
    assert any("amout" in (t or "") for t in told) and any("over the limit" in (t or "") for t in told)
    assert telemetry_capture.calls("charge", transport=c.TRANSPORT_OK, outcome=c.OUTCOME_INVALID_ARGUMENT) == 1


async def test_waiting_for_a_human_is_a_pause_then_the_call_runs(telemetry_capture: Capture) -> None:
    """A tool waiting on ctx.wait_for_event is recorded deferred (transport ok), then ok when the answer arrives."""
    from .llama_index_parts import HumanResponseEvent, InputRequiredEvent, Script, agent, otel_llama_index, pay

    clerk = otel_llama_index.instrument(agent("clerk", Script([("h-1", "pay", {"amount": 30})]), [pay]))
    handler = clerk.run("go")
    async for event in handler.stream_events():
        if isinstance(event, InputRequiredEvent):
            handler.ctx.send_event(HumanResponseEvent(response="yes"))
    assert str(await handler) == "done"
    paused, paid = (attrs(s) for s in telemetry_capture.spans("pay"))
    assert (paused[c.TOOL_TRANSPORT], paused[c.TOOL_OUTCOME], paused[c.GEN_AI_TOOL_CALL_ID]) == (c.TRANSPORT_OK, c.OUTCOME_DEFERRED, "h-1")
    assert (paid[c.TOOL_OUTCOME], paid[c.GEN_AI_TOOL_CALL_ID], paid[c.GEN_AI_AGENT_ID]) == (c.OUTCOME_OK, "h-1", "clerk")
    assert c.OUTCOME_DEFERRED in c.PAUSED_OUTCOMES


async def test_agent_workflow_handoff_is_a_delegate_call_and_each_agent_keeps_its_name(telemetry_capture: Capture) -> None:
    """In an AgentWorkflow the hand-off is a delegate call of the agent handing off; the next agent's calls carry its name."""
    from .llama_index_parts import AgentWorkflow, Script, agent, lookup, otel_llama_index

    lead = agent("lead", Script([("w-1", "handoff", {"to_agent": "researcher", "reason": "needs facts"})]), [], can_handoff_to=["researcher"])
    researcher = agent("researcher", Script([("w-2", "lookup", {"query": "stock"})]), [lookup])
    workflow = AgentWorkflow(agents=[lead, researcher], root_agent="lead")
    otel_llama_index.instrument(workflow)
    handler = workflow.run("go")
    await handler
    handoff, looked = attrs(telemetry_capture.span("handoff")), attrs(telemetry_capture.span("lookup"))
    assert (handoff[c.TOOL_KIND], handoff[c.GEN_AI_AGENT_ID], handoff[c.GEN_AI_TOOL_CALL_ID]) == (c.KIND_DELEGATE, "lead", "w-1")
    assert (looked[c.GEN_AI_AGENT_ID], looked[c.GEN_AI_TOOL_CALL_ID]) == ("researcher", "w-2")
    assert handoff[c.GEN_AI_CONVERSATION_ID] == looked[c.GEN_AI_CONVERSATION_ID] == handler.run_id
    otel_llama_index.uninstrument(workflow)
    assert not any("_call_tool" in vars(w) for w in (workflow, lead, researcher))
    assert getattr(researcher.tools[0]._fn, SPEC_ATTRIBUTE, None) is None


async def test_an_agent_run_inside_a_tool_keeps_its_own_ids(telemetry_capture: Capture) -> None:
    """A tool that runs another agent: the inner call records the inner agent, run and call id, under the outer span."""
    from .llama_index_parts import Script, agent, lookup, otel_llama_index

    inner = otel_llama_index.instrument(agent("researcher", Script([("inner-1", "lookup", {"query": "inner"})]), [lookup]))
    runs: list[str] = []

    async def ask_researcher(question: str) -> str:
        """Ask the research agent."""
        handler = inner.run(question)
        runs.append(handler.run_id)
        return str(await handler)

    outer = otel_llama_index.instrument(agent("lead", Script([("outer-1", "ask_researcher", {"question": "stock?"})]), [ask_researcher]))
    handler = outer.run("go")
    await handler
    outer_span, inner_span = telemetry_capture.span("ask_researcher"), telemetry_capture.span("lookup")
    o, i = attrs(outer_span), attrs(inner_span)
    assert (o[c.GEN_AI_AGENT_ID], o[c.GEN_AI_TOOL_CALL_ID], o[c.GEN_AI_CONVERSATION_ID]) == ("lead", "outer-1", handler.run_id)
    assert (i[c.GEN_AI_AGENT_ID], i[c.GEN_AI_TOOL_CALL_ID], i[c.GEN_AI_CONVERSATION_ID]) == ("researcher", "inner-1", runs[0])
    assert inner_span.parent is not None and inner_span.parent.span_id == outer_span.context.span_id


async def test_uninstrument_restores_tools_and_dispatch_exactly(telemetry_capture: Capture) -> None:
    """After uninstrument: the same functions and dispatch, the same definitions shown, no spans; again is harmless."""
    from .llama_index_parts import FunctionTool, Script, agent, lookup, notify, otel_llama_index

    tools = [FunctionTool.from_defaults(lookup), FunctionTool.from_defaults(async_fn=notify)]
    before = [(t._fn, t._async_fn, t.metadata) for t in tools]
    calls = [("u-1", "lookup", {"query": "x"}), ("u-2", "notify", {"message": "m"})]
    planner = agent("planner", first := Script(calls), tools)
    await planner.run("go")
    otel_llama_index.instrument(planner)
    assert getattr(tools[0]._fn, SPEC_ATTRIBUTE) and getattr(tools[1]._async_fn, SPEC_ATTRIBUTE)
    assert otel_llama_index.uninstrument(planner) is planner
    assert [(t._fn, t._async_fn, t.metadata) for t in tools] == before and "_call_tool" not in vars(planner)
    planner.llm = (second := Script(calls)).llm()
    telemetry_capture.clear()
    await planner.run("go")
    assert second.shown == first.shown and ours(telemetry_capture.spans()) == []
    otel_llama_index.uninstrument(planner)
    otel_llama_index.instrument(tools)  # a bare list, and back again
    planner.llm = Script(calls).llm()
    await planner.run("go")
    assert sorted(attrs(s)[c.GEN_AI_TOOL_NAME] for s in ours(telemetry_capture.spans())) == ["lookup", "notify"]
    otel_llama_index.uninstrument(tools)
    assert [(t._fn, t._async_fn, t.metadata) for t in tools] == before


async def test_our_span_nests_under_openinferences_llama_index_tool_span(telemetry_capture: Capture) -> None:
    """With OpenInference's LlamaIndex instrumentor on (LlamaIndex's OpenTelemetry tracing), each of our spans is the child of its TOOL span."""
    instrumentation = require("openinference.instrumentation.llama_index", "peers")
    from .llama_index_parts import Script, agent, lookup, otel_llama_index

    instrumentor = instrumentation.LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry_capture.runtime.provider)
    try:
        planner = otel_llama_index.instrument(agent("planner", Script([("n-1", "lookup", {"query": "x"})]), [lookup]))
        await planner.run("go")
    finally:
        instrumentor.uninstrument()
    mine = telemetry_capture.span("lookup")
    tools = [s for s in telemetry_capture.spans() if attrs(s).get("openinference.span.kind") == "TOOL"]
    assert len(tools) == 1 and mine.parent is not None and mine.parent.span_id == tools[0].context.span_id
    assert (attrs(mine)[c.GEN_AI_TOOL_CALL_ID], attrs(mine)[c.GEN_AI_AGENT_ID]) == ("n-1", "planner")


@pytest.mark.filterwarnings("ignore:is_running called from within a step")  # LlamaIndex's ReActAgent's own
async def test_react_agent_calls_carry_the_ids_of_its_tool_call_events(telemetry_capture: Capture) -> None:
    """A ReActAgent (the model writes Action/Action Input as text) records each call with the id of its ToolCall event."""
    from llama_index.core.agent.workflow import ReActAgent, ToolCallResult
    from llama_index.core.base.llms.types import ChatMessage, MessageRole
    from llama_index.core.llms.mock import MockFunctionCallingLLM

    from .llama_index_parts import lookup, otel_llama_index

    replies = iter(['Thought: I need to look it up.\nAction: lookup\nAction Input: {"query": "bolts"}',
                    "Thought: I can answer without using any more tools.\nAnswer: done"])

    def react(messages: object, **kwargs: object) -> ChatMessage:
        return ChatMessage(role=MessageRole.ASSISTANT, content=next(replies))

    agent = ReActAgent(name="reasoner", tools=[lookup], llm=MockFunctionCallingLLM(response_generator=react), streaming=False)
    otel_llama_index.instrument(agent)
    handler = agent.run("go")
    results = [event async for event in handler.stream_events() if isinstance(event, ToolCallResult)]
    assert str(await handler) == "done"
    a = attrs(telemetry_capture.span("lookup"))
    assert (a[c.GEN_AI_TOOL_CALL_ID], a[c.GEN_AI_AGENT_ID], a[c.GEN_AI_CONVERSATION_ID]) == (
        results[0].tool_id, "reasoner", handler.run_id)


ARGUMENT_NAMES = st.sampled_from(["amount", "note", "amout", "ctx", "self", "__class__", "x\u202e"])
ARGUMENT_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                               lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                               max_leaves=6)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arguments=st.dictionaries(ARGUMENT_NAMES, ARGUMENT_VALUES, max_size=4))
def test_any_arguments_the_model_sends_behave_as_uninstrumented_and_are_ok_or_invalid_argument(
    telemetry_capture: Capture, arguments: dict[str, object]
) -> None:
    """Whatever keywords the model sends, the instrumented tool returns or raises what the plain one does; the span says ok or invalid_argument."""
    from .llama_index_parts import FunctionTool, otel_llama_index

    def charge(amount: int, note: str = "") -> str:
        """Charge an amount (the function trusts what it is given, as LlamaIndex does)."""
        return f"charged {amount!r} {note!r}"

    plain, traced = FunctionTool.from_defaults(charge), otel_llama_index.instrument(FunctionTool.from_defaults(charge))
    telemetry_capture.clear()

    def outcome(tool: object) -> object:
        try:
            return tool.call(**arguments).raw_output  # type: ignore[attr-defined]
        except TypeError as exc:
            return ("TypeError", str(exc))

    expected_result = outcome(plain)
    assert outcome(traced) == expected_result
    if "self" in arguments:  # LlamaIndex's own FunctionTool.call refuses it: no tool was reached, nothing to record
        assert ours(telemetry_capture.spans()) == []
        return
    (span,) = ours(telemetry_capture.spans())
    expected = c.OUTCOME_INVALID_ARGUMENT if isinstance(expected_result, tuple) else c.OUTCOME_OK
    assert (attrs(span)[c.TOOL_TRANSPORT], attrs(span)[c.TOOL_OUTCOME]) == (c.TRANSPORT_OK, expected)


async def test_a_tool_a_workflow_step_of_your_own_calls_records_the_workflow_run(telemetry_capture: Capture) -> None:
    """A plain Workflow whose step calls an instrumented tool: the span carries the workflow run's id."""
    from llama_index.core.workflow import StartEvent, StopEvent, Workflow, step

    from .llama_index_parts import FunctionTool, lookup, otel_llama_index

    tool = otel_llama_index.instrument(FunctionTool.from_defaults(lookup))

    class Research(Workflow):
        @step
        async def look(self, ev: StartEvent) -> StopEvent:
            output = await tool.acall(query=ev.get("query"))
            return StopEvent(result=output.content)

    handler = Research().run(query="bolts")
    assert await handler == "found bolts"
    a = attrs(telemetry_capture.span("lookup"))
    assert (a[c.GEN_AI_CONVERSATION_ID], a[c.TOOL_OUTCOME]) == (handler.run_id, c.OUTCOME_OK)
    assert c.GEN_AI_TOOL_CALL_ID not in a


async def test_a_tool_of_its_own_class_reporting_is_error_is_a_tool_error(telemetry_capture: Capture) -> None:
    """An AsyncBaseTool of your own (call/acall instrumented) answering ToolOutput(is_error=True): ok/tool_error, the model told."""
    from llama_index.core.tools import AsyncBaseTool, ToolMetadata, ToolOutput

    from .llama_index_parts import Script, agent, otel_llama_index

    class Warehouse(AsyncBaseTool):
        @property
        def metadata(self) -> ToolMetadata:
            return ToolMetadata(name="reserve", description="Reserve stock.")

        def call(self, input: str = "") -> ToolOutput:
            return ToolOutput(content="out of stock", tool_name="reserve", raw_input={"input": input}, raw_output=None, is_error=True)

        async def acall(self, input: str = "") -> ToolOutput:
            return self.call(input)

    warehouse = Warehouse()
    script = Script([("e-1", "reserve", {"input": "bolts"})])
    clerk = otel_llama_index.instrument(agent("clerk", script, [warehouse]))
    assert str(await clerk.run("go")) == "done"
    a = attrs(telemetry_capture.span("reserve"))
    assert (a[c.TOOL_TRANSPORT], a[c.TOOL_OUTCOME], a[c.GEN_AI_TOOL_CALL_ID], a[c.GEN_AI_AGENT_ID]) == (
        c.TRANSPORT_OK, c.OUTCOME_TOOL_ERROR, "e-1", "clerk")
    assert any("out of stock" in str(m.content) for m in script.seen[1])
    otel_llama_index.uninstrument(clerk)
    assert "acall" not in vars(warehouse) and "call" not in vars(warehouse)
