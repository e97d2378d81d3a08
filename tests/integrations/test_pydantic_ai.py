"""pydantic-ai: instrument(agent) over whole agent loops run by TestModel and FunctionModel (no network)."""

from __future__ import annotations

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
    findings,
    ours,
    state_store,
    tool_spans_by_name,
    write_traces,
)
from optional import require


@pytest.fixture(autouse=True)
def _pydantic_ai() -> Iterator[None]:
    """pydantic-ai is imported by the test that runs (each imports its parts from ``pydantic_ai_parts``)."""
    require("pydantic_ai", "pydantic-ai")
    yield


def test_tool_definitions_shown_to_the_model_are_byte_identical(tmp_path: Path, telemetry_capture: Capture) -> None:
    """Names, descriptions, parameter schemas and strictness the model sees do not change."""
    from .pydantic_ai_parts import TestModel, agent_of, otel_pydantic_ai, shown

    agent, _store = agent_of(tmp_path, telemetry_capture, TestModel())
    before = shown(agent)
    otel_pydantic_ai.instrument(agent)
    assert shown(agent) == before
    assert "lookup" in before and "write_state" in before and "notify" in before


def test_instrument_wraps_each_tool_once_and_in_place(tmp_path: Path, telemetry_capture: Capture) -> None:
    """Decorated tools keep their function; a second instrument() wraps nothing again; hints set the kind."""
    from .pydantic_ai_parts import TestModel, agent_of, already, lookup, otel_pydantic_ai

    agent, _store = agent_of(tmp_path, telemetry_capture, TestModel())
    assert otel_pydantic_ai.instrument(agent) is agent
    tools = agent._function_toolset.tools
    assert tools["already"].function is already
    first = {name: tool.function for name, tool in tools.items()}
    otel_pydantic_ai.instrument(agent)
    assert {name: tool.function for name, tool in tools.items()} == first
    assert getattr(tools["lookup"].function, SPEC_ATTRIBUTE).kind == c.KIND_READ
    assert tools["lookup"].function.__wrapped__ is lookup


def test_test_model_run_records_call_ids_run_and_agent(tmp_path: Path, telemetry_capture: Capture) -> None:
    """TestModel calls every tool: each span has the model's call id, the run's conversation id and the agent name."""
    from .pydantic_ai_parts import TestModel, ToolCallPart, agent_of, otel_pydantic_ai

    agent, _store = agent_of(tmp_path, telemetry_capture, TestModel(call_tools=["lookup", "notify", "already"]))
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
    from .pydantic_ai_parts import TestModel, agent_of, otel_pydantic_ai

    agent, _store = agent_of(tmp_path, telemetry_capture, TestModel(call_tools=["lookup"]))
    otel_pydantic_ai.instrument(agent)
    with telemetry.agent("crew-lead", conversation_id="crew-run-7"):
        agent.run_sync("go")
    a = attrs(telemetry_capture.span("lookup"))
    assert (a[c.GEN_AI_AGENT_ID], a[c.GEN_AI_CONVERSATION_ID]) == ("crew-lead", "crew-run-7")
    assert a[c.GEN_AI_TOOL_CALL_ID]


def test_model_retry_is_transport_ok_retry_requested_and_still_retries(tmp_path: Path, telemetry_capture: Capture) -> None:
    """ModelRetry is recorded as ok/retry_requested, reaches pydantic-ai unchanged, and the model retries."""
    from .pydantic_ai_parts import Agent, ModelRetry, TestModel, ToolCallPart, otel_pydantic_ai

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
    from .pydantic_ai_parts import TestModel, agent_of, lookup, otel_pydantic_ai

    agent, _store = agent_of(tmp_path, telemetry_capture, TestModel())
    with pytest.raises(ConfigurationError, match="'lookpu'.*lookup"):
        otel_pydantic_ai.instrument(agent, kinds={"lookpu": "read"})
    with pytest.raises(ConfigurationError, match="needs a pydantic_ai.Agent"):
        otel_pydantic_ai.instrument([lookup])  # type: ignore[type-var]


@pytest.mark.parametrize("framework_spans", [False, True], ids=["ours-only", "with-pydantic-ai-spans"])
def test_function_model_run_with_guards_recovers_and_forensics_sees_one_run(
    tmp_path: Path, telemetry_capture: Capture, framework_spans: bool
) -> None:
    """A stale write is refused and recovered in one run; forensics finds it there, with or without pydantic-ai's spans."""
    from .pydantic_ai_parts import Agent, Instrumentation, InstrumentationSettings, otel_pydantic_ai, scripted_planner

    store = state_store(tmp_path, telemetry_capture)
    settings = InstrumentationSettings(tracer_provider=telemetry_capture.runtime.provider)
    agent: Agent[None, str] = Agent(
        scripted_planner(store),
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
