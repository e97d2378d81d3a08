"""OpenAI Agents SDK: instrument(agent) over whole Runner loops driven by a scripted Model (no network, tracing off)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import telemetry
from telemetry import conventions as c
from telemetry.exceptions import ConfigurationError
from telemetry.testing import Capture

from .integration_support import KEY, assert_stale_write_story, attrs, ours, tool_spans_by_name, write_traces
from optional import require


@pytest.fixture(autouse=True)
def _openai_agents() -> Iterator[None]:
    """The SDK is imported by the test that runs (each imports its parts from ``openai_agents_parts``)."""
    require("agents", "openai-agents")
    yield


def test_tools_shown_to_the_model_are_byte_identical(tmp_path: Path, telemetry_capture: Capture) -> None:
    """The Responses API tool payload (names, descriptions, schemas, strict) is the same after instrument()."""
    from .openai_agents_parts import NO_TRACING, Runner, ScriptedModel, agent_of, otel_agents, text

    model = ScriptedModel(lambda items: [text("ok")])
    agent, _store = agent_of(tmp_path, telemetry_capture, model)
    Runner.run_sync(agent, "hi", run_config=NO_TRACING)
    assert otel_agents.instrument(agent) is agent
    Runner.run_sync(agent, "hi", run_config=NO_TRACING)
    assert model.shown[0] == model.shown[1]
    assert '"strict": true' in model.shown[0] and '"strict": false' in model.shown[0]


def test_each_tool_is_wrapped_once(tmp_path: Path, telemetry_capture: Capture) -> None:
    """Decorated functions and guards are not wrapped again; a second instrument() changes nothing."""
    from .openai_agents_parts import ScriptedModel, agent_of, otel_agents, text

    agent, _store = agent_of(tmp_path, telemetry_capture, ScriptedModel(lambda items: [text("ok")]))
    otel_agents.instrument(agent, kinds={"lookup": "read"})
    invokers = [t.on_invoke_tool for t in agent.tools]
    otel_agents.instrument(agent)
    assert [t.on_invoke_tool for t in agent.tools] == invokers
    with pytest.raises(ConfigurationError, match="'lokup'"):
        otel_agents.instrument(agent, kinds={"lokup": "read"})


def test_run_records_call_ids_agent_and_one_id_per_run(tmp_path: Path, telemetry_capture: Capture) -> None:
    """Each span has the model's call id and the agent name; one run shares one conversation id, two runs two."""
    from .openai_agents_parts import (
        NO_TRACING,
        RunConfig,
        Runner,
        ScriptedModel,
        agent_of,
        call,
        otel_agents,
        returned,
        text,
    )


    def script(items: list[Any]) -> list[Any]:
        if returned(items):
            return [text("done")]
        return [call("lookup", {"query": "a"}, "call_1"), call("already", {"x": 3}, "call_2"), call("charge", {"amount": 5}, "call_3")]

    agent, _store = agent_of(tmp_path, telemetry_capture, ScriptedModel(script))
    otel_agents.instrument(agent)
    result = Runner.run_sync(agent, "go", run_config=NO_TRACING)
    assert result.final_output == "done"
    spans = {attrs(s)[c.GEN_AI_TOOL_NAME]: attrs(s) for s in ours(telemetry_capture.spans())}
    assert {n: a[c.GEN_AI_TOOL_CALL_ID] for n, a in spans.items()} == {"lookup": "call_1", "already": "call_2", "charge": "call_3"}
    assert {a[c.GEN_AI_AGENT_ID] for a in spans.values()} == {"planner"}
    assert len({a[c.GEN_AI_CONVERSATION_ID] for a in spans.values()}) == 1
    # The SDK turned charge's exception into a message for the model; our span kept the exception.
    assert (spans["charge"][c.TOOL_TRANSPORT], spans["charge"][c.ERROR_TYPE]) == (c.TRANSPORT_ERROR, "ValueError")
    first_run = spans["lookup"][c.GEN_AI_CONVERSATION_ID]
    telemetry_capture.clear()
    Runner.run_sync(agent, "again", run_config=NO_TRACING)
    again = {attrs(s)[c.GEN_AI_CONVERSATION_ID] for s in ours(telemetry_capture.spans())}
    assert len(again) == 1 and first_run not in again
    telemetry_capture.clear()
    Runner.run_sync(agent, "grouped", run_config=RunConfig(tracing_disabled=True, group_id="thread-9"))
    assert {attrs(s)[c.GEN_AI_CONVERSATION_ID] for s in ours(telemetry_capture.spans())} == {"thread-9"}


def test_exceptions_option_maps_a_tool_exception(tmp_path: Path, telemetry_capture: Capture) -> None:
    """exceptions={ValueError: "tool_error"} makes the raised ValueError transport ok with that outcome."""
    from .openai_agents_parts import NO_TRACING, Runner, ScriptedModel, agent_of, call, otel_agents, returned, text

    agent, _store = agent_of(
        tmp_path, telemetry_capture,
        ScriptedModel(lambda items: [text("done")] if returned(items) else [call("charge", {"amount": 1}, "c1")]),
    )
    otel_agents.instrument(agent, exceptions={ValueError: c.OUTCOME_TOOL_ERROR})
    with telemetry.agent("billing"):
        Runner.run_sync(agent, "go", run_config=NO_TRACING)
    a = attrs(telemetry_capture.span("charge"))
    assert (a[c.TOOL_TRANSPORT], a[c.TOOL_OUTCOME], a[c.GEN_AI_AGENT_ID]) == (c.TRANSPORT_OK, c.OUTCOME_TOOL_ERROR, "billing")


def test_runner_loop_with_guards_recovers_and_forensics_sees_one_run(tmp_path: Path, telemetry_capture: Capture) -> None:
    """A stale write is refused and redone within one Runner run; forensics finds it in that run."""
    from .openai_agents_parts import NO_TRACING, Runner, ScriptedModel, agent_of, call, otel_agents, text, tool_outputs

    holder: dict[str, Any] = {}
    turn = {"n": 0}

    def script(items: list[Any]) -> list[Any]:
        turn["n"] += 1
        n = turn["n"]
        outputs = tool_outputs(items)
        seen = outputs[-1] if outputs else {}
        if n in (1, 3):
            return [call("read_state", {"key": KEY, "agent_id": "planner"}, f"read-{n}")]
        if n == 2:
            holder["store"].write_state(KEY, {"steps": ["draft", "colleague"]}, seen["version"], agent_id="colleague")
        if n in (2, 4):
            args = {"key": KEY, "value": {"steps": seen["value"]["steps"] + ["planner"]}, "expected_version": seen["version"], "agent_id": "planner"}
            return [call("write_state", args, f"write-{n}")]
        return [text("done")]

    agent, store = agent_of(tmp_path, telemetry_capture, ScriptedModel(script))
    holder["store"] = store
    otel_agents.instrument(agent)
    result = Runner.run_sync(agent, "add your step", run_config=NO_TRACING)
    assert result.final_output == "done"
    spans = telemetry_capture.spans()
    writes = [s for s in tool_spans_by_name(spans, "write_state") if attrs(s).get(c.GEN_AI_AGENT_ID) == "planner"]
    assert [(attrs(s)[c.TOOL_OUTCOME], attrs(s)[c.GEN_AI_TOOL_CALL_ID]) for s in writes] == [
        (c.OUTCOME_REJECTED_STALE_VERSION, "write-2"),
        (c.OUTCOME_OK, "write-4"),
    ]
    run_id = attrs(writes[0])[c.GEN_AI_CONVERSATION_ID]
    assert_stale_write_story(write_traces(tmp_path / "traces.jsonl", spans), run_id)
    assert store.read_state(KEY)["value"] == {"steps": ["draft", "colleague", "planner"]}
