"""OpenAI Agents SDK, round two: behaviour unchanged (output_type), Agent.as_tool, refused arguments, uninstrument."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from telemetry import conventions as c
from telemetry.testing import Capture

from .integration_support import attrs, ours
from optional import require


@pytest.fixture(autouse=True)
def _openai_agents() -> Iterator[None]:
    require("agents", "openai-agents")
    yield


def _outputs(items: list[Any]) -> list[str]:
    return [str(i["output"]) for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]


def test_output_type_and_failure_function_behave_as_without_instrumentation(telemetry_capture: Capture) -> None:
    """A tool whose output fails its output_type: the model is told the same thing, and the run goes on, instrumented or not."""
    from agents import Agent, Runner, function_tool
    from typing_extensions import TypedDict

    from .openai_agents_parts import NO_TRACING, ScriptedModel, call, otel_agents, text

    class Price(TypedDict):
        cents: int

    def quote(item: str) -> Any:
        """Quote a price in cents."""
        return {"cents": "about a tenner"} if item == "vague" else {"cents": 1000}

    def refuse(item: str) -> str:
        """Always fails."""
        raise RuntimeError("out of order")

    def run(instrumented: bool) -> tuple[Any, list[str]]:
        seen: list[str] = []

        def script(items: list[Any]) -> list[Any]:
            if any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items):
                seen.extend(_outputs(items))
                return [text("done")]
            return [call("quote", {"item": "vague"}, "q-1"), call("quote", {"item": "tea"}, "q-2"), call("refuse", {"item": "x"}, "q-3")]

        tools = [function_tool(quote, output_type=Price),
                 function_tool(refuse, failure_error_function=lambda ctx, exc: f"custom: {exc}")]
        agent = Agent(name="clerk", model=ScriptedModel(script), tools=tools)
        if instrumented:
            otel_agents.instrument(agent)
        return Runner.run_sync(agent, "go", run_config=NO_TRACING).final_output, seen

    plain = run(False)
    assert run(True) == plain and plain[0] == "done"
    assert any("custom: out of order" in o for o in plain[1]) and any("1000" in o for o in plain[1])
    spans = {attrs(s)[c.GEN_AI_TOOL_CALL_ID]: attrs(s) for s in ours(telemetry_capture.spans())}
    assert spans["q-2"][c.TOOL_OUTCOME] == c.OUTCOME_OK and spans["q-3"][c.TOOL_TRANSPORT] == c.TRANSPORT_ERROR


def test_agent_as_tool_is_a_delegate_call_and_the_inner_agent_keeps_its_identity(telemetry_capture: Capture) -> None:
    """Agent.as_tool: one delegate span for the hand-off, the inner agent's tool calls under it with their own ids."""
    from agents import Agent, Runner, function_tool

    from .openai_agents_parts import NO_TRACING, ScriptedModel, call, lookup, otel_agents, returned, text

    inner = Agent(name="researcher", model=ScriptedModel(
        lambda items: [text("3 in stock")] if returned(items) else [call("lookup", {"query": "bolts"}, "inner-1")]),
        tools=[function_tool(lookup)])
    outer = Agent(name="lead", model=ScriptedModel(
        lambda items: [text("done")] if returned(items) else [call("ask_researcher", {"input": "stock?"}, "outer-1")]),
        tools=[inner.as_tool(tool_name="ask_researcher", tool_description="Ask the researcher.")])
    otel_agents.instrument(outer)
    assert Runner.run_sync(outer, "go", run_config=NO_TRACING).final_output == "done"
    delegated, looked = telemetry_capture.span("ask_researcher"), telemetry_capture.span("lookup")
    a, b = attrs(delegated), attrs(looked)
    assert (a[c.TOOL_KIND], a[c.GEN_AI_AGENT_ID], a[c.GEN_AI_TOOL_CALL_ID], a[c.TOOL_OUTCOME]) == (
        c.KIND_DELEGATE, "lead", "outer-1", c.OUTCOME_OK)
    assert (b[c.GEN_AI_AGENT_ID], b[c.GEN_AI_TOOL_CALL_ID]) == ("researcher", "inner-1")
    assert looked.parent is not None and looked.parent.span_id == delegated.context.span_id


def test_arguments_the_sdk_refuses_are_invalid_argument(telemetry_capture: Capture) -> None:
    """Arguments failing the tool's schema never reach it: ok/invalid_argument, and the model is told as before."""
    from agents import Agent, Runner, function_tool

    from .openai_agents_parts import NO_TRACING, ScriptedModel, call, lookup, otel_agents, text

    told: list[str] = []

    def script(items: list[Any]) -> list[Any]:
        outputs = _outputs(items)
        if not outputs:
            return [call("lookup", {"qurey": "bolts"}, "bad-1")]
        if len(outputs) == 1:
            told.extend(outputs)
            return [call("lookup", {"query": "bolts"}, "good-1")]
        return [text("done")]

    agent = Agent(name="clerk", model=ScriptedModel(script), tools=[function_tool(lookup)])
    otel_agents.instrument(agent, kinds={"lookup": "read"})
    Runner.run_sync(agent, "go", run_config=NO_TRACING)
    assert told and "error" in told[0]  # what the SDK tells the model, unchanged
    refused, ran = telemetry_capture.spans("lookup")
    assert (attrs(refused)[c.TOOL_TRANSPORT], attrs(refused)[c.TOOL_OUTCOME], attrs(refused)[c.GEN_AI_TOOL_CALL_ID]) == (
        c.TRANSPORT_OK, c.OUTCOME_INVALID_ARGUMENT, "bad-1")
    assert attrs(refused)[c.ERROR_TYPE].endswith("ModelBehaviorError") and attrs(refused)[c.TOOL_KIND] == c.KIND_READ
    assert (attrs(ran)[c.TOOL_OUTCOME], attrs(ran)[c.GEN_AI_TOOL_CALL_ID]) == (c.OUTCOME_OK, "good-1")


def test_uninstrument_restores_tools_exactly(tmp_path: Path, telemetry_capture: Capture) -> None:
    """After uninstrument the tools are the SDK's again: same invokers, same functions, same payload, no spans."""
    from agents import Agent, Runner

    from .openai_agents_parts import NO_TRACING, ScriptedModel, agent_of, call, otel_agents, returned, text

    model = ScriptedModel(lambda items: [text("ok")] if returned(items) else [call("lookup", {"query": "a"}, "u-1")])
    agent, _store = agent_of(tmp_path, telemetry_capture, model)
    inner = Agent(name="inner", model=model, tools=[])
    agent.tools.append(inner.as_tool(tool_name="ask_inner", tool_description="Ask."))
    state = [(t.on_invoke_tool, t.on_invoke_tool._invoke_tool_impl, t.__wrapped__ if t.name != "ask_inner" else None)
             for t in agent.tools]
    Runner.run_sync(agent, "hi", run_config=NO_TRACING)
    otel_agents.instrument(agent)
    assert otel_agents.uninstrument(agent) is agent
    assert [(t.on_invoke_tool, t.on_invoke_tool._invoke_tool_impl, t.__wrapped__ if t.name != "ask_inner" else None)
            for t in agent.tools] == state
    telemetry_capture.clear()
    Runner.run_sync(agent, "hi", run_config=NO_TRACING)
    assert model.shown[0] == model.shown[-1]
    assert ours(telemetry_capture.spans()) == []
    otel_agents.instrument(agent)  # and back again
    Runner.run_sync(agent, "hi", run_config=NO_TRACING)
    assert [attrs(s)[c.GEN_AI_TOOL_CALL_ID] for s in ours(telemetry_capture.spans())] == ["u-1"]
    assert json.loads(model.shown[-1]) == json.loads(model.shown[0])
