"""LangChain: instrument(tools) over a minimal tool-calling loop and LangGraph's prebuilt agent (fake chat models, no network)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import telemetry
from telemetry import conventions as c
from telemetry.exceptions import ConfigurationError
from telemetry.instrument import SPEC_ATTRIBUTE
from telemetry.testing import Capture

from .integration_support import (
    KEY,
    assert_stale_write_story,
    attrs,
    ours,
    state_store,
    tool_spans_by_name,
    write_traces,
)
from optional import require


@pytest.fixture(autouse=True)
def _langchain() -> Iterator[None]:
    """LangChain is imported by the test that runs (each imports its parts from ``langchain_parts``)."""
    require("langchain_core", "langchain")
    yield


def test_schemas_shown_to_the_model_are_byte_identical(tmp_path: Path, telemetry_capture: Capture) -> None:
    """convert_to_openai_tool (what bind_tools sends) gives the same JSON before and after."""
    from .langchain_parts import convert_to_openai_tool, otel_langchain, shown, tools_of

    tools, _store = tools_of(tmp_path, telemetry_capture)
    before = shown(tools)
    assert otel_langchain.instrument(tools) is tools
    assert shown(tools) == before
    strict = [convert_to_openai_tool(t, strict=True) for t in tools]
    otel_langchain.instrument(tools)
    assert [convert_to_openai_tool(t, strict=True) for t in tools] == strict


def test_each_tool_is_wrapped_once(tmp_path: Path, telemetry_capture: Capture) -> None:
    """A decorated function and the guards' tools keep their functions; a second call changes nothing."""
    from .langchain_parts import already, lookup, otel_langchain, tools_of

    tools, _store = tools_of(tmp_path, telemetry_capture)
    otel_langchain.instrument(tools, kinds={"unit": "read"})
    by_name = {t.name: t for t in tools}
    assert by_name["already"].func is already
    funcs = {t.name: getattr(t, "func", None) for t in tools}
    otel_langchain.instrument(tools)
    assert {t.name: getattr(t, "func", None) for t in tools} == funcs
    assert getattr(by_name["lookup"].func, SPEC_ATTRIBUTE).kind == c.KIND_READ  # from readOnlyHint
    assert getattr(by_name["unit"]._run, SPEC_ATTRIBUTE).kind == c.KIND_READ
    with pytest.raises(ConfigurationError, match="'lokup'"):
        otel_langchain.instrument(tools, kinds={"lokup": "read"})
    with pytest.raises(ConfigurationError, match="is not one"):
        otel_langchain.instrument([lookup, len])


def test_a_misspelled_choice_is_refused_like_any_unknown_keyword(tmp_path: Path, telemetry_capture: Capture) -> None:
    """The shared keywords arrive as ``**choices``: a typo is a TypeError naming it, never ignored."""
    from .langchain_parts import otel_langchain, tools_of

    tools, _store = tools_of(tmp_path, telemetry_capture)
    with pytest.raises(TypeError, match="unexpected keyword argument 'kind'"):
        otel_langchain.instrument(tools, kind={"unit": "read"})  # type: ignore[call-arg]


async def test_minimal_loop_records_call_ids_and_tool_exception(tmp_path: Path, telemetry_capture: Capture) -> None:
    """A hand-written loop over a fake chat model: call ids reach the spans; ToolException is ok/tool_error."""
    from .langchain_parts import (
        AIMessage,
        BaseMessage,
        FakeMessagesListChatModel,
        ToolMessage,
        otel_langchain,
        tools_of,
    )

    tools, _store = tools_of(tmp_path, telemetry_capture)
    otel_langchain.instrument(tools)
    by_name = {t.name: t for t in tools}
    model = FakeMessagesListChatModel(
        responses=[
            AIMessage(
                content="",
                tool_calls=[
                    {"name": "lookup", "args": {"query": "order 7"}, "id": "call_a"},
                    {"name": "refund", "args": {"order_id": 7, "amount": 250.0}, "id": "call_b"},
                    {"name": "unit", "args": {"value": "kg"}, "id": "call_c"},
                ],
            ),
            AIMessage(content="done"),
        ]
    )
    messages: list[BaseMessage] = []
    with telemetry.agent("support", conversation_id="ticket-7"):
        while True:
            reply = await model.ainvoke(messages)
            messages.append(reply)
            if not reply.tool_calls:
                break
            for call in reply.tool_calls:
                messages.append(await by_name[call["name"]].ainvoke(call))
    refusal = next(m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == "call_b")
    assert refusal.status == "error" and "totals 100" in str(refusal.content)  # LangChain handled it as usual
    spans = {attrs(s)[c.GEN_AI_TOOL_NAME]: attrs(s) for s in ours(telemetry_capture.spans())}
    assert {n: a[c.GEN_AI_TOOL_CALL_ID] for n, a in spans.items()} == {"lookup": "call_a", "refund": "call_b", "unit": "call_c"}
    assert {a[c.GEN_AI_CONVERSATION_ID] for a in spans.values()} == {"ticket-7"}
    assert (spans["refund"][c.TOOL_TRANSPORT], spans["refund"][c.TOOL_OUTCOME]) == (c.TRANSPORT_OK, c.OUTCOME_TOOL_ERROR)
    assert spans["refund"][c.ERROR_TYPE] == "langchain_core.tools.base.ToolException"


def test_tool_exception_propagates_unchanged_when_not_handled(tmp_path: Path, telemetry_capture: Capture) -> None:
    """Without handle_tool_error the ToolException reaches the caller, still recorded as ok/tool_error."""
    from .langchain_parts import StructuredTool, ToolException, otel_langchain


    def charge(amount: float) -> str:
        """Charge a card."""
        raise ToolException("card declined")

    charge_tool = otel_langchain.instrument(StructuredTool.from_function(charge, handle_tool_error=False))
    with pytest.raises(ToolException, match="card declined"):
        charge_tool.invoke({"name": "charge", "args": {"amount": 5.0}, "id": "call_x", "type": "tool_call"})
    a = attrs(telemetry_capture.span("charge"))
    assert (a[c.TOOL_TRANSPORT], a[c.TOOL_OUTCOME], a[c.GEN_AI_TOOL_CALL_ID]) == (c.TRANSPORT_OK, c.OUTCOME_TOOL_ERROR, "call_x")


def test_langgraph_agent_with_guards_recovers_and_forensics_sees_one_run(tmp_path: Path, telemetry_capture: Capture) -> None:
    """LangGraph's prebuilt agent: a stale write is refused and redone; the thread is the run forensics sees."""
    from .langchain_parts import ScriptedChat, StructuredTool, otel_langchain, planner_script

    prebuilt = pytest.importorskip("langgraph.prebuilt", reason="install langgraph to run the prebuilt agent")
    store = state_store(tmp_path, telemetry_capture)
    tools = [StructuredTool.from_function(store.read_state), StructuredTool.from_function(store.write_state)]
    model = ScriptedChat(script=planner_script(store))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        agent = prebuilt.create_react_agent(model, tools, name="planner")
    otel_langchain.instrument(agent)
    result = agent.invoke({"messages": [("user", "add your step")]}, config={"configurable": {"thread_id": "thread-42"}})
    assert result["messages"][-1].content == "done"
    spans = telemetry_capture.spans()
    writes = [s for s in tool_spans_by_name(spans, "write_state") if attrs(s).get(c.GEN_AI_AGENT_ID) == "planner"]
    assert [(attrs(s)[c.TOOL_OUTCOME], attrs(s)[c.GEN_AI_TOOL_CALL_ID]) for s in writes] == [
        (c.OUTCOME_REJECTED_STALE_VERSION, "write-2"),
        (c.OUTCOME_OK, "write-4"),
    ]
    reads = tool_spans_by_name(spans, "read_state")
    assert {attrs(s)[c.GEN_AI_CONVERSATION_ID] for s in reads + writes} == {"thread-42"}
    assert_stale_write_story(write_traces(tmp_path / "traces.jsonl", spans), "thread-42")
    assert store.read_state(KEY)["value"] == {"steps": ["draft", "colleague", "planner"]}
