"""LangChain and LangGraph, round two: nested agents, nesting under OpenInference, names, refused arguments, uninstrument."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from telemetry import conventions as c
from telemetry.testing import Capture

from .integration_support import attrs, ours
from optional import require


def look_up(query: str) -> str:
    """Look something up."""
    return f"found {query}"


def _lookup() -> Any:
    from .langchain_parts import StructuredTool

    return StructuredTool.from_function(look_up, name="lookup")


@pytest.fixture(autouse=True)
def _langchain() -> Iterator[None]:
    require("langchain_core", "langchain")
    require("langgraph.prebuilt", "langchain")
    yield


def _agent(script: Any, tools: list[Any], name: str) -> Any:
    from langgraph.prebuilt import create_react_agent

    from .langchain_parts import ScriptedChat

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return create_react_agent(ScriptedChat(script=script), tools, name=name)


def _calls(*calls: dict[str, Any]) -> Any:
    """A script: each call in turn (one per model turn), then done."""
    from .langchain_parts import AIMessage

    turn = {"n": 0}

    def script(messages: list[Any]) -> Any:
        n = turn["n"]
        turn["n"] += 1
        return AIMessage(content="", tool_calls=[calls[n]]) if n < len(calls) else AIMessage(content="done")

    return script


def test_a_tool_running_a_sub_agent_keeps_each_agents_identity(telemetry_capture: Capture) -> None:
    """A LangChain tool that invokes another LangGraph agent: the inner call has the inner agent and call id."""
    from .langchain_parts import StructuredTool, otel_langchain

    inner = otel_langchain.instrument(_agent(_calls({"name": "lookup", "args": {"query": "bolts"}, "id": "inner-1"}), [_lookup()], "researcher"))

    def ask_researcher(question: str) -> str:
        """Ask the research agent."""
        return str(inner.invoke({"messages": [("user", question)]})["messages"][-1].content)

    outer = _agent(_calls({"name": "ask_researcher", "args": {"question": "stock?"}, "id": "outer-1"}),
                   [StructuredTool.from_function(ask_researcher)], "lead")
    otel_langchain.instrument(outer)
    outer.invoke({"messages": [("user", "go")]}, config={"configurable": {"thread_id": "t-1"}})
    asked, looked = attrs(telemetry_capture.span("ask_researcher")), attrs(telemetry_capture.span("lookup"))
    assert (asked[c.GEN_AI_AGENT_ID], asked[c.GEN_AI_TOOL_CALL_ID]) == ("lead", "outer-1")
    assert (looked[c.GEN_AI_AGENT_ID], looked[c.GEN_AI_TOOL_CALL_ID]) == ("researcher", "inner-1")
    assert looked[c.GEN_AI_CONVERSATION_ID] == "t-1"  # the thread goes down with LangChain's config


def test_tools_instrumented_before_the_agent_learn_its_name(telemetry_capture: Capture) -> None:
    """instrument(tools), then create_react_agent(name=...), then instrument(agent): the spans name the agent."""
    from .langchain_parts import otel_langchain

    tools = otel_langchain.instrument([_lookup()])
    agent = _agent(_calls({"name": "lookup", "args": {"query": "a"}, "id": "n-1"}), tools, "planner")
    otel_langchain.instrument(agent)
    agent.invoke({"messages": [("user", "go")]})
    a = attrs(telemetry_capture.span("lookup"))
    assert (a[c.GEN_AI_AGENT_ID], a[c.GEN_AI_TOOL_CALL_ID]) == ("planner", "n-1")
    assert getattr(tools[0].func, "__wrapped__", None) is look_up  # still wrapped once


def test_our_span_nests_under_openinferences_tool_span(telemetry_capture: Capture) -> None:
    """With OpenInference's LangChain instrumentor on, our span is the child of its TOOL span, in its trace."""
    instrumentation = require("openinference.instrumentation.langchain", "langchain")
    from .langchain_parts import otel_langchain

    instrumentor = instrumentation.LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry_capture.runtime.provider)
    try:
        agent = otel_langchain.instrument(_agent(_calls({"name": "lookup", "args": {"query": "a"}, "id": "oi-1"}),
                                                 [_lookup()], "planner"))
        agent.invoke({"messages": [("user", "go")]})
    finally:
        instrumentor.uninstrument()
    spans = telemetry_capture.spans()
    (mine,) = ours(spans)
    theirs = [s for s in spans if attrs(s).get("openinference.span.kind") == "TOOL"]
    assert len(theirs) == 1
    assert mine.parent is not None and mine.parent.span_id == theirs[0].context.span_id
    assert mine.context.trace_id == theirs[0].context.trace_id


def test_arguments_the_schema_refuses_are_invalid_argument(telemetry_capture: Capture) -> None:
    """A call LangChain's validation refuses: ok/invalid_argument with the call id, and the agent goes on as before."""
    from .langchain_parts import otel_langchain

    def run(instrumented: bool) -> list[Any]:
        tool = _lookup()
        agent = _agent(_calls({"name": "lookup", "args": {"qurey": "a"}, "id": "bad-1"},
                              {"name": "lookup", "args": {"query": "a"}, "id": "good-1"}), [tool], "clerk")
        if instrumented:
            otel_langchain.instrument(agent, kinds={"lookup": "read"})
        return [(type(m).__name__, m.content, getattr(m, "status", None)) for m in agent.invoke({"messages": [("user", "go")]})["messages"]]

    assert run(True) == run(False)
    refused, ran = telemetry_capture.spans("lookup")
    a = attrs(refused)
    assert (a[c.TOOL_TRANSPORT], a[c.TOOL_OUTCOME], a[c.GEN_AI_TOOL_CALL_ID], a[c.GEN_AI_AGENT_ID], a[c.TOOL_KIND]) == (
        c.TRANSPORT_OK, c.OUTCOME_INVALID_ARGUMENT, "bad-1", "clerk", c.KIND_READ)
    assert (attrs(ran)[c.TOOL_OUTCOME], attrs(ran)[c.GEN_AI_TOOL_CALL_ID]) == (c.OUTCOME_OK, "good-1")


def test_uninstrument_restores_tools_exactly(tmp_path: Path, telemetry_capture: Capture) -> None:
    """After uninstrument: each tool's own attributes as before, the same schemas, no spans; then instrument again."""
    from .langchain_parts import otel_langchain, shown, tools_of

    tools, _store = tools_of(tmp_path, telemetry_capture)
    otel_langchain.uninstrument(tools)  # a module-level tool among them may be instrumented by another test
    before = [dict(vars(t)) for t in tools]
    schemas = shown(tools)
    otel_langchain.instrument(tools, kinds={"unit": "read"})
    assert otel_langchain.uninstrument(tools) is tools
    assert [dict(vars(t)) for t in tools] == before and shown(tools) == schemas
    by_name = {t.name: t for t in tools}
    by_name["lookup"].invoke({"query": "x"})
    by_name["unit"].invoke({"value": "kg"})
    assert [attrs(s)[c.GEN_AI_TOOL_NAME] for s in ours(telemetry_capture.spans())] == []
    otel_langchain.instrument(tools)
    by_name["lookup"].invoke({"name": "lookup", "args": {"query": "x"}, "id": "again", "type": "tool_call"})
    assert attrs(telemetry_capture.span("lookup"))[c.GEN_AI_TOOL_CALL_ID] == "again"
