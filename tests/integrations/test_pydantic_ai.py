"""pydantic-ai: instrument(agent) over whole agent loops run by TestModel and FunctionModel (no network)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="install outcome-telemetry[pydantic-ai]")

from pydantic_ai import Agent, ModelRetry, RunContext, Tool
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.test import TestModel
from pydantic_ai.toolsets import FunctionToolset

import telemetry
from telemetry import conventions as c
from telemetry import instrument_tool
from telemetry.exceptions import ConfigurationError
from telemetry.instrument import SPEC_ATTRIBUTE
from telemetry.integrations import pydantic_ai as otel_pydantic_ai
from telemetry.testing import Capture

from .integration_support import KEY, assert_stale_write_story, attrs, findings, ours, state_store, tool_spans_by_name, write_traces


def lookup(query: str) -> str:
    """Look something up (read-only, by its MCP-style hint)."""
    return f"found {query}"


async def notify(ctx: RunContext[None], message: str, urgent: bool = False) -> str:
    """Send a notification."""
    return "sent"


@instrument_tool(kind="read")
def already(x: int) -> int:
    """A tool the user decorated themselves."""
    return x


def _agent(tmp_path: Path, capture: Capture, model: Any, **kwargs: Any) -> tuple[Agent[None, str], Any]:
    store = state_store(tmp_path, capture)
    extra = FunctionToolset([notify])
    agent: Agent[None, str] = Agent(
        model,
        name="planner",
        tools=[Tool(lookup, metadata={"readOnlyHint": True}), already, store.read_state, store.write_state],
        toolsets=[extra],
        **kwargs,
    )
    return agent, store


def _shown(agent: Agent[None, str]) -> str:
    """The tool definitions the model is given, as JSON text."""
    seen: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(json.dumps([dataclasses.asdict(t) for t in info.function_tools], sort_keys=True, default=repr))
        return ModelResponse(parts=[TextPart("ok")])

    agent.run_sync("hi", model=FunctionModel(model))
    return seen[0]


def test_tool_definitions_shown_to_the_model_are_byte_identical(tmp_path: Path, telemetry_capture: Capture) -> None:
    """Names, descriptions, parameter schemas and strictness the model sees do not change."""
    agent, _store = _agent(tmp_path, telemetry_capture, TestModel())
    before = _shown(agent)
    otel_pydantic_ai.instrument(agent)
    assert _shown(agent) == before
    assert "lookup" in before and "write_state" in before and "notify" in before


def test_instrument_wraps_each_tool_once_and_in_place(tmp_path: Path, telemetry_capture: Capture) -> None:
    """Decorated tools keep their function; a second instrument() wraps nothing again; hints set the kind."""
    agent, _store = _agent(tmp_path, telemetry_capture, TestModel())
    assert otel_pydantic_ai.instrument(agent) is agent
    tools = agent._function_toolset.tools
    assert tools["already"].function is already
    first = {name: tool.function for name, tool in tools.items()}
    otel_pydantic_ai.instrument(agent)
    assert {name: tool.function for name, tool in tools.items()} == first
    assert getattr(tools["lookup"].function, SPEC_ATTRIBUTE).kind == c.KIND_READ
    assert getattr(tools["lookup"].function, "__wrapped__") is lookup


def test_test_model_run_records_call_ids_run_and_agent(tmp_path: Path, telemetry_capture: Capture) -> None:
    """TestModel calls every tool: each span has the model's call id, the run's conversation id and the agent name."""
    agent, _store = _agent(tmp_path, telemetry_capture, TestModel(call_tools=["lookup", "notify", "already"]))
    otel_pydantic_ai.instrument(agent)
    result = agent.run_sync("go")
    calls = {p.tool_name: p.tool_call_id for m in result.all_messages() for p in m.parts if isinstance(p, ToolCallPart)}
    spans = ours(telemetry_capture.spans())
    assert sorted(attrs(s)[c.GEN_AI_TOOL_NAME] for s in spans) == ["already", "lookup", "notify"]
    for span in spans:
        a = attrs(span)
        assert a[c.GEN_AI_TOOL_CALL_ID] == calls[a[c.GEN_AI_TOOL_NAME]]
        assert a[c.GEN_AI_CONVERSATION_ID] == result.conversation_id
        assert a[c.GEN_AI_AGENT_ID] == "planner"
        assert a[c.TOOL_OUTCOME] == c.OUTCOME_OK


def test_user_context_wins_over_the_frameworks(tmp_path: Path, telemetry_capture: Capture) -> None:
    """Inside telemetry.agent(), the user's agent id and conversation id are kept."""
    agent, _store = _agent(tmp_path, telemetry_capture, TestModel(call_tools=["lookup"]))
    otel_pydantic_ai.instrument(agent)
    with telemetry.agent("crew-lead", conversation_id="crew-run-7"):
        agent.run_sync("go")
    a = attrs(telemetry_capture.span("lookup"))
    assert (a[c.GEN_AI_AGENT_ID], a[c.GEN_AI_CONVERSATION_ID]) == ("crew-lead", "crew-run-7")
    assert a[c.GEN_AI_TOOL_CALL_ID]


def test_model_retry_is_transport_ok_retry_requested_and_still_retries(tmp_path: Path, telemetry_capture: Capture) -> None:
    """ModelRetry is recorded as ok/retry_requested, reaches pydantic-ai unchanged, and the model retries."""
    attempts: list[int] = []

    def fetch(order_id: int) -> str:
        """Fetch an order."""
        attempts.append(order_id)
        if len(attempts) == 1:
            raise ModelRetry("order ids start at 100")
        return "order found"

    agent: Agent[None, str] = Agent(TestModel(call_tools=["fetch"]), name="clerk", tools=[fetch])
    otel_pydantic_ai.instrument(agent)
    result = agent.run_sync("go")
    parts = [p for m in result.all_messages() for p in m.parts]
    # pydantic-ai got the ModelRetry itself: its message went back to the model, which called again.
    assert any("order ids start at 100" in str(getattr(p, "content", "")) for p in parts)
    call_ids = [p.tool_call_id for p in parts if isinstance(p, ToolCallPart)]
    first, second = telemetry_capture.spans("fetch")
    assert [attrs(first)[c.GEN_AI_TOOL_CALL_ID], attrs(second)[c.GEN_AI_TOOL_CALL_ID]] == call_ids
    assert (attrs(first)[c.TOOL_TRANSPORT], attrs(first)[c.TOOL_OUTCOME]) == (c.TRANSPORT_OK, c.OUTCOME_RETRY_REQUESTED)
    assert attrs(first)[c.ERROR_TYPE] == "pydantic_ai.exceptions.ModelRetry"
    assert attrs(second)[c.TOOL_OUTCOME] == c.OUTCOME_OK
    assert telemetry_capture.calls("fetch", transport=c.TRANSPORT_OK, outcome=c.OUTCOME_RETRY_REQUESTED) == 1


def test_unknown_tool_name_in_kinds_is_refused(tmp_path: Path, telemetry_capture: Capture) -> None:
    """A typo in kinds names the tool and lists the real ones."""
    agent, _store = _agent(tmp_path, telemetry_capture, TestModel())
    with pytest.raises(ConfigurationError, match="'lookpu'.*lookup"):
        otel_pydantic_ai.instrument(agent, kinds={"lookpu": "read"})
    with pytest.raises(ConfigurationError, match="needs a pydantic_ai.Agent"):
        otel_pydantic_ai.instrument([lookup])  # type: ignore[type-var]


def _last_return(messages: list[ModelMessage]) -> dict[str, Any]:
    parts = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    return parts[-1].content if parts else {}


def _scripted_planner(store: Any) -> FunctionModel:
    """Read, lose a race to a colleague, get refused, re-read, redo: the guarded recovery."""
    turn = {"n": 0}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn["n"] += 1
        seen = _last_return(messages)
        n = turn["n"]
        if n in (1, 3):
            return ModelResponse(parts=[ToolCallPart("read_state", {"key": KEY, "agent_id": "planner"}, tool_call_id=f"call-read-{n}")])
        if n == 2:
            # A colleague writes between the planner's read and its write.
            store.write_state(KEY, {"steps": ["draft", "colleague"]}, seen["version"], agent_id="colleague")
        if n in (2, 4):
            steps = list(seen["value"]["steps"]) + ["planner"]
            args = {"key": KEY, "value": {"steps": steps}, "expected_version": seen["version"], "agent_id": "planner"}
            return ModelResponse(parts=[ToolCallPart("write_state", args, tool_call_id=f"call-write-{n}")])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(model)


@pytest.mark.parametrize("framework_spans", [False, True], ids=["ours-only", "with-pydantic-ai-spans"])
def test_function_model_run_with_guards_recovers_and_forensics_sees_one_run(
    tmp_path: Path, telemetry_capture: Capture, framework_spans: bool
) -> None:
    """A stale write is refused and recovered in one run; forensics finds it there, with or without pydantic-ai's spans."""
    store = state_store(tmp_path, telemetry_capture)
    settings = InstrumentationSettings(tracer_provider=telemetry_capture.runtime.provider)
    agent: Agent[None, str] = Agent(
        _scripted_planner(store),
        name="planner",
        tools=[store.read_state, store.write_state],
        capabilities=[Instrumentation(settings=settings)] if framework_spans else [],
    )
    otel_pydantic_ai.instrument(agent)
    result = agent.run_sync("add your step to the plan")
    assert result.output == "done"
    spans = telemetry_capture.spans()
    assert store.read_state(KEY)["value"] == {"steps": ["draft", "colleague", "planner"]}
    writes = [s for s in tool_spans_by_name(spans, "write_state") if attrs(s).get(c.GEN_AI_AGENT_ID) == "planner"]
    assert [attrs(s)[c.TOOL_OUTCOME] for s in writes] == [c.OUTCOME_REJECTED_STALE_VERSION, c.OUTCOME_OK]
    assert [attrs(s)[c.GEN_AI_TOOL_CALL_ID] for s in writes] == ["call-write-2", "call-write-4"]
    assert attrs(writes[1])[c.TOOL_READBACK] == c.READBACK_MATCH
    assert {attrs(s)[c.GEN_AI_CONVERSATION_ID] for s in writes} == {result.conversation_id}
    both = write_traces(tmp_path / "both.jsonl", spans)
    assert_stale_write_story(both, result.conversation_id)
    if framework_spans:
        theirs = [s for s in spans if s not in ours(spans) and s.name == c.SPAN_NAME_PREFIX + "write_state"]
        assert len(theirs) == 2 and all(c.TOOL_OUTCOME not in attrs(s) for s in theirs)
        # Ours nests under pydantic-ai's execute_tool span of the same call.
        parents = {s.context.span_id for s in theirs}
        assert all(w.parent is not None and w.parent.span_id in parents for w in writes)
        alone = write_traces(tmp_path / "ours.jsonl", ours(spans))
        assert findings(both) == findings(alone)
