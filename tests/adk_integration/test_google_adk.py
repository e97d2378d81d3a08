"""Google ADK: instrument(agent) over whole runs of ADK's own Runner with a scripted BaseLlm (no network)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.features import FeatureName
from google.adk.features._feature_registry import temporary_feature_override
from google.adk.telemetry import tracing as adk_tracing
from google.adk.tools import AgentTool, FunctionTool, LongRunningFunctionTool
from hypothesis import given, settings
from hypothesis import strategies as st
from integrations.integration_support import (
    KEY,
    assert_stale_write_story,
    attrs,
    findings,
    ours,
    state_store,
    tool_spans_by_name,
    write_traces,
)

import telemetry
from telemetry import conventions as c
from telemetry import instrument_tool
from telemetry.exceptions import ConfigurationError
from telemetry.integrations import google_adk as otel_adk
from telemetry.testing import Capture, capture

from .adk_parts import (
    explode,
    last_response,
    lookup,
    missing_order,
    open_ticket,
    refund,
    responses,
    risky_transfer,
    run,
    scripted,
    stock,
)


@instrument_tool(kind="read")
def already(x: int) -> int:
    """A tool the user decorated themselves."""
    return x


def _tools() -> list[Any]:
    researcher = LlmAgent(name="researcher", description="Finds things.", model=scripted(), tools=[lookup])
    return [lookup, stock, FunctionTool(refund, require_confirmation=True), LongRunningFunctionTool(open_ticket),
            already, AgentTool(researcher), FunctionTool(risky_transfer)]


async def test_declarations_shown_to_the_model_are_byte_identical(telemetry_capture: Capture) -> None:
    """The FunctionDeclarations the model is given do not change, instrumented or put back."""
    agent = LlmAgent(name="planner", model=scripted(), tools=_tools())
    await run(agent)
    before = agent.model.shown(0)
    assert '"name": "lookup"' in before and '"name": "researcher"' in before and "tool_context" not in before
    otel_adk.instrument(agent)
    await run(agent)
    assert agent.model.shown(1) == before
    otel_adk.uninstrument(agent)
    await run(agent)
    assert agent.model.shown(2) == before


async def test_run_records_call_ids_session_and_agent_and_answers_as_before(telemetry_capture: Capture) -> None:
    """Parallel calls, sync and async, with ToolContext: each span has ADK's call id, the session, the agent; the model is answered as before."""
    turns = [[("lookup", {"query": "a"}, "c-1"), ("stock", {"item": "tea"}, "c-2")], [("lookup", {"query": "b"}, "c-3")]]
    plain = LlmAgent(name="planner", model=scripted(*turns), tools=[lookup, stock])
    _session, expected = await run(plain)
    agent = LlmAgent(name="planner", model=scripted(*turns), tools=[lookup, stock])
    assert otel_adk.instrument(agent) is agent
    session, events = await run(agent)
    assert responses(events) == responses(expected)
    spans = ours(telemetry_capture.spans())
    assert sorted((attrs(s)[c.GEN_AI_TOOL_NAME], attrs(s)[c.GEN_AI_TOOL_CALL_ID]) for s in spans) == [
        ("lookup", "c-1"), ("lookup", "c-3"), ("stock", "c-2")]
    for span in spans:
        a = attrs(span)
        assert (a[c.GEN_AI_CONVERSATION_ID], a[c.GEN_AI_AGENT_ID], a[c.TOOL_OUTCOME]) == (session, "planner", c.OUTCOME_OK)


async def test_failure_semantics_answers_unchanged(telemetry_capture: Capture) -> None:
    """ADK's error convention, refused arguments, a confirmation asked by the tool, a long-running call: each its outcome, transport ok."""
    turns = [[("missing_order", {"order_id": "o-1"}, "f-1")], [("lookup", {"q": 1}, "f-2")],
             [("open_ticket", {"subject": "refund"}, "f-3")], [("risky_transfer", {"amount": 500}, "f-4")]]

    def agent() -> LlmAgent:
        return LlmAgent(name="clerk", model=scripted(*turns),
                        tools=[missing_order, lookup, LongRunningFunctionTool(open_ticket), risky_transfer])

    _s, expected = await run(agent())
    instrumented = otel_adk.instrument(agent())
    _s, events = await run(instrumented)
    assert responses(events) == responses(expected)
    found = {attrs(s)[c.GEN_AI_TOOL_CALL_ID]: attrs(s) for s in ours(telemetry_capture.spans())}
    assert {k: (a[c.TOOL_TRANSPORT], a[c.TOOL_OUTCOME], a[c.TOOL_SILENT_FAILURE]) for k, a in found.items()} == {
        "f-1": (c.TRANSPORT_OK, c.OUTCOME_TOOL_ERROR, False),
        "f-2": (c.TRANSPORT_OK, c.OUTCOME_INVALID_ARGUMENT, False),
        "f-3": (c.TRANSPORT_OK, c.OUTCOME_DEFERRED, False),
        "f-4": (c.TRANSPORT_OK, c.OUTCOME_APPROVAL_REQUIRED, False),
    }
    assert found["f-2"][c.ERROR_TYPE] == "telemetry.integrations.google_adk.ArgumentsRefused"
    assert found["f-2"][c.GEN_AI_TOOL_NAME] == "lookup" and found["f-2"][c.GEN_AI_AGENT_ID] == "clerk"
    assert telemetry_capture.calls("lookup", transport=c.TRANSPORT_OK, outcome=c.OUTCOME_INVALID_ARGUMENT) == 1


async def test_type_validation_refusal_is_invalid_argument(telemetry_capture: Capture) -> None:
    """With ADK's argument validation on, a wrong type never reaches the tool: ok/invalid_argument, the model told as before."""
    ran: list[int] = []

    def count(n: int) -> int:
        """Count to n."""
        ran.append(n)
        return n

    turns = [[("count", {"n": "many"}, "v-1")], [("count", {"n": 2}, "v-2")]]
    with temporary_feature_override(FeatureName.FUNCTION_TOOL_ARG_VALIDATION, True):
        _s, expected = await run(LlmAgent(name="clerk", model=scripted(*turns), tools=[count]))
        _s, events = await run(otel_adk.instrument(LlmAgent(name="clerk", model=scripted(*turns), tools=[count])))
    assert responses(events) == responses(expected) and ran == [2, 2]
    refused, counted = telemetry_capture.spans("count")
    assert (attrs(refused)[c.GEN_AI_TOOL_CALL_ID], attrs(refused)[c.TOOL_OUTCOME]) == ("v-1", c.OUTCOME_INVALID_ARGUMENT)
    assert (attrs(counted)[c.GEN_AI_TOOL_CALL_ID], attrs(counted)[c.TOOL_OUTCOME]) == ("v-2", c.OUTCOME_OK)


async def test_require_confirmation_pauses_as_approval_required(telemetry_capture: Capture) -> None:
    """ADK's confirmation gate holds the call: approval_required (the tool has not run), the run pauses as it did."""
    turns = [[("refund", {"order_id": "o-1", "amount": 5}, "r-1")]]
    _s, expected = await run(LlmAgent(name="clerk", model=scripted(*turns), tools=[FunctionTool(refund, require_confirmation=True)]))
    agent = otel_adk.instrument(LlmAgent(name="clerk", model=scripted(*turns),
                                         tools=[FunctionTool(refund, require_confirmation=True)]))
    _s, events = await run(agent)
    assert responses(events) == responses(expected)
    (span,) = telemetry_capture.spans("refund")
    a = attrs(span)
    assert (a[c.TOOL_TRANSPORT], a[c.TOOL_OUTCOME], a[c.GEN_AI_TOOL_CALL_ID]) == (c.TRANSPORT_OK, c.OUTCOME_APPROVAL_REQUIRED, "r-1")
    assert a[c.ERROR_TYPE] == "telemetry.integrations.google_adk.ConfirmationRequested"


async def test_exception_reaches_adk_error_callbacks_unchanged(telemetry_capture: Capture) -> None:
    """A raising tool is transport error on our span; ADK's on_tool_error_callback still gets the exception and answers the model."""
    seen: list[BaseException] = []

    def on_error(tool: Any, args: dict[str, Any], tool_context: Any, error: Exception) -> dict[str, Any]:
        seen.append(error)
        return {"error": "try later"}

    turns = [[("explode", {"order_id": "o-9"}, "e-1")]]
    agent = otel_adk.instrument(LlmAgent(name="clerk", model=scripted(*turns), tools=[explode],
                                         on_tool_error_callback=on_error))
    _s, events = await run(agent)
    assert responses(events) == [("e-1", "explode", {"error": "try later"})]
    assert [type(e) for e in seen] == [RuntimeError]
    (span,) = telemetry_capture.spans("explode")
    assert (attrs(span)[c.TOOL_TRANSPORT], attrs(span)[c.ERROR_TYPE]) == (c.TRANSPORT_ERROR, "RuntimeError")


async def test_agent_tool_is_a_delegate_call_and_the_inner_agent_keeps_its_identity(telemetry_capture: Capture) -> None:
    """An AgentTool is one delegate call covering the inner run; the inner agent's call has its own agent and call id, nested under it."""
    researcher = LlmAgent(name="researcher", description="Finds things.",
                          model=scripted([("lookup", {"query": "tea"}, "in-1")]), tools=[lookup])
    lead = LlmAgent(name="lead", model=scripted([("researcher", {"request": "stock of tea?"}, "out-1")]),
                    tools=[AgentTool(researcher)])
    otel_adk.instrument(lead, kinds={"lookup": "read"})
    session, _events = await run(lead)
    delegated, looked = attrs(telemetry_capture.span("researcher")), attrs(telemetry_capture.span("lookup"))
    assert (delegated[c.TOOL_KIND], delegated[c.GEN_AI_AGENT_ID], delegated[c.GEN_AI_TOOL_CALL_ID]) == (c.KIND_DELEGATE, "lead", "out-1")
    assert (looked[c.TOOL_KIND], looked[c.GEN_AI_AGENT_ID], looked[c.GEN_AI_TOOL_CALL_ID]) == (c.KIND_READ, "researcher", "in-1")
    assert delegated[c.GEN_AI_CONVERSATION_ID] == session and looked[c.GEN_AI_CONVERSATION_ID] != session  # ADK's own inner session
    parent = telemetry_capture.span("lookup").parent
    assert parent is not None and parent.span_id == telemetry_capture.span("researcher").context.span_id


async def test_transfer_to_a_sub_agent_is_a_delegate_call_and_the_sub_agent_keeps_its_name(telemetry_capture: Capture) -> None:
    """transfer_to_agent (made by ADK per model call) is recorded as delegate with its target; the sub-agent's call is its own."""
    def agents() -> LlmAgent:
        clerk = LlmAgent(name="clerk", description="Looks things up.", model=scripted([("lookup", {"query": "x"}, "sub-1")]),
                         tools=[lookup])
        return LlmAgent(name="desk", model=scripted([("transfer_to_agent", {"agent_name": "clerk"}, "t-1")]),
                        sub_agents=[clerk])

    _s, expected = await run(agents())
    root = otel_adk.instrument(agents(), kinds={"lookup": "read"})
    session, events = await run(root)
    assert responses(events) == responses(expected)
    handed = attrs(telemetry_capture.span(otel_adk.TRANSFER_TOOL))
    assert (handed[c.TOOL_KIND], handed[c.GEN_AI_AGENT_ID], handed[c.GEN_AI_TOOL_CALL_ID], handed[c.TOOL_OUTCOME]) == (
        c.KIND_DELEGATE, "desk", "t-1", c.OUTCOME_OK)
    assert handed[c.TOOL_ARGUMENT_PREFIX + "agent_name"] == "clerk" and handed[c.GEN_AI_CONVERSATION_ID] == session
    a = attrs(telemetry_capture.span("lookup"))
    assert (a[c.GEN_AI_AGENT_ID], a[c.GEN_AI_CONVERSATION_ID], a[c.GEN_AI_TOOL_CALL_ID]) == ("clerk", session, "sub-1")
    otel_adk.uninstrument(root)
    assert root.after_tool_callback is None and root.sub_agents[0].after_tool_callback is None


async def test_a_base_tool_of_your_own_is_recorded_around_its_run_async(telemetry_capture: Capture) -> None:
    """A BaseTool subclass with its own run_async: one span per call with ADK's ids, its declaration unchanged."""
    from google.adk.tools.base_tool import BaseTool
    from google.genai import types

    class Weather(BaseTool):
        def __init__(self) -> None:
            super().__init__(name="weather", description="The weather in a city.")

        def _get_declaration(self) -> types.FunctionDeclaration:
            return types.FunctionDeclaration(name=self.name, description=self.description, parameters_json_schema={
                "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})

        async def run_async(self, *, args: dict[str, Any], tool_context: Any) -> Any:
            return {"city": args["city"], "sky": "clear"}

    turns = [[("weather", {"city": "Oslo"}, "w-1")]]
    plain = LlmAgent(name="forecaster", model=scripted(*turns), tools=[Weather()])
    _s, expected = await run(plain)
    agent = otel_adk.instrument(LlmAgent(name="forecaster", model=scripted(*turns), tools=[Weather()]), kinds={"weather": "read"})
    session, events = await run(agent)
    assert responses(events) == responses(expected) and agent.model.shown(0) == plain.model.shown(0)
    a = attrs(telemetry_capture.span("weather"))
    assert (a[c.GEN_AI_TOOL_CALL_ID], a[c.GEN_AI_AGENT_ID], a[c.GEN_AI_CONVERSATION_ID], a[c.TOOL_KIND], a[c.TOOL_OUTCOME]) == (
        "w-1", "forecaster", session, c.KIND_READ, c.OUTCOME_OK)


async def test_user_context_wins(telemetry_capture: Capture) -> None:
    """Inside telemetry.agent(), the user's agent and conversation ids are kept; the call id is still ADK's."""
    agent = otel_adk.instrument(LlmAgent(name="planner", model=scripted([("lookup", {"query": "a"}, "u-1")]), tools=[lookup]))
    with telemetry.agent("crew-lead", conversation_id="crew-run-7"):
        await run(agent)
    a = attrs(telemetry_capture.span("lookup"))
    assert (a[c.GEN_AI_AGENT_ID], a[c.GEN_AI_CONVERSATION_ID], a[c.GEN_AI_TOOL_CALL_ID]) == ("crew-lead", "crew-run-7", "u-1")


def test_kinds_hints_and_bad_targets() -> None:
    """A typo in kinds names the tools; hints in custom_metadata set the kind; a non-agent is refused by name."""
    with pytest.raises(ConfigurationError, match="'lookpu'.*lookup"):
        otel_adk.instrument(LlmAgent(name="a", model=scripted(), tools=[lookup]), kinds={"lookpu": "read"})
    hinted = FunctionTool(lookup)
    hinted.custom_metadata = {"readOnlyHint": True}
    otel_adk.instrument(LlmAgent(name="a", model=scripted(), tools=[hinted]))
    assert otel_adk._spec(hinted) is not None and otel_adk._spec(hinted).kind == c.KIND_READ
    with pytest.raises(ConfigurationError, match="needs a google.adk agent"):
        otel_adk.instrument([lookup])  # type: ignore[type-var]


async def test_uninstrument_restores_tools_and_agents_exactly(telemetry_capture: Capture) -> None:
    """After uninstrument every tool's and agent's attributes are as before; a run records nothing; instrument works again."""
    tools = _tools()
    agent = LlmAgent(name="planner", model=scripted([("lookup", {"query": "a"}, "x-1")]), tools=tools)
    inner = tools[5].agent
    objects = [agent, inner, *[t for t in tools if not callable(t) or hasattr(t, "run_async")]]
    state = [dict(vars(o)) for o in objects]
    otel_adk.instrument(agent)
    assert otel_adk.uninstrument(agent) is agent
    assert [dict(vars(o)) for o in objects] == state
    await run(agent)
    assert ours(telemetry_capture.spans()) == []
    agent.model.turns[:] = [[("lookup", {"query": "b"}, "x-2")]]
    agent.model.requests.clear()
    otel_adk.instrument(agent)  # and back again
    await run(agent)
    assert [attrs(s)[c.GEN_AI_TOOL_CALL_ID] for s in ours(telemetry_capture.spans())] == ["x-2"]


def _planner_script(store: Any) -> Any:
    """Read, lose a race to a colleague, get refused, re-read, redo: the guarded recovery."""

    def script(turn: int, request: Any) -> list[tuple[str, dict[str, Any], str]]:
        n = turn + 1
        seen = last_response(request)
        if n in (1, 3):
            return [("read_state", {"key": KEY, "agent_id": "planner"}, f"call-read-{n}")]
        if n == 2:  # a colleague writes between the planner's read and its write
            store.write_state(KEY, {"steps": ["draft", "colleague"]}, seen["version"], agent_id="colleague")
        if n in (2, 4):
            args = {"key": KEY, "value": {"steps": [*seen["value"]["steps"], "planner"]},
                    "expected_version": seen["version"], "agent_id": "planner"}
            return [("write_state", args, f"call-write-{n}")]
        return []

    return script


@pytest.mark.parametrize("framework_spans", [False, True], ids=["ours-only", "with-adk-spans"])
async def test_guarded_run_recovers_nests_under_adk_and_forensics_counts_once(
    tmp_path: Path, telemetry_capture: Capture, monkeypatch: pytest.MonkeyPatch, framework_spans: bool
) -> None:
    """A stale write refused and recovered in one session; with ADK's spans ours nest under its execute_tool spans and forensics finds the same."""
    if framework_spans:
        monkeypatch.setattr(adk_tracing, "tracer", telemetry_capture.runtime.provider.get_tracer("gcp.vertex.agent"))
    store = state_store(tmp_path, telemetry_capture)
    agent = LlmAgent(name="planner", model=scripted(script=_planner_script(store)), tools=[store.read_state, store.write_state])
    otel_adk.instrument(agent)
    session, _events = await run(agent, "add your step to the plan")
    spans = telemetry_capture.spans()
    assert store.read_state(KEY)["value"] == {"steps": ["draft", "colleague", "planner"]}
    writes = [s for s in tool_spans_by_name(spans, "write_state") if attrs(s).get(c.GEN_AI_AGENT_ID) == "planner"]
    assert [attrs(s)[c.TOOL_OUTCOME] for s in writes] == [c.OUTCOME_REJECTED_STALE_VERSION, c.OUTCOME_OK]
    assert [attrs(s)[c.GEN_AI_TOOL_CALL_ID] for s in writes] == ["call-write-2", "call-write-4"]
    assert attrs(writes[1])[c.TOOL_READBACK] == c.READBACK_MATCH
    assert {attrs(s)[c.GEN_AI_CONVERSATION_ID] for s in writes} == {session}
    both = write_traces(tmp_path / "both.jsonl", spans)
    assert_stale_write_story(both, session)
    if framework_spans:
        theirs = [s for s in spans if s not in ours(spans) and s.name == c.SPAN_NAME_PREFIX + "write_state"]
        assert len(theirs) == 2 and all(c.TOOL_OUTCOME not in attrs(s) for s in theirs)
        parents = {s.context.span_id for s in theirs}
        assert all(w.parent is not None and w.parent.span_id in parents for w in writes)
        alone = write_traces(tmp_path / "ours.jsonl", ours(spans))
        assert findings(both) == findings(alone)


_ARGUMENTS = st.dictionaries(st.sampled_from(["query", "q", "tool_context"]),
                             st.one_of(st.none(), st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=2)),
                             max_size=3)


@settings(max_examples=25)
@given(arguments=_ARGUMENTS)
def test_any_arguments_get_the_same_answer_and_one_recorded_call(arguments: dict[str, Any]) -> None:
    """Whatever arguments the model sends, ADK answers exactly as without instrumentation, and the call is recorded once: ok, or ok/invalid_argument."""
    turns = [[("lookup", arguments, "p-1")]]

    async def both() -> tuple[Any, Any]:
        _s, plain = await run(LlmAgent(name="clerk", model=scripted(*turns), tools=[lookup]))
        _s, instrumented = await run(otel_adk.instrument(LlmAgent(name="clerk", model=scripted(*turns), tools=[lookup])))
        return plain, instrumented

    with capture() as cap:
        plain, instrumented = asyncio.run(both())
        assert responses(instrumented) == responses(plain)
        (span,) = ours(cap.spans())
        a = attrs(span)
        assert a[c.TOOL_TRANSPORT] == c.TRANSPORT_OK and a[c.GEN_AI_TOOL_CALL_ID] == "p-1"
        assert a[c.TOOL_OUTCOME] == (c.OUTCOME_OK if "query" in arguments else c.OUTCOME_INVALID_ARGUMENT)
