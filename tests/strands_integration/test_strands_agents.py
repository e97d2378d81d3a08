"""Strands Agents: instrument(agent) over whole agent loops driven by a scripted Model provider (no network)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
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
from strands import tool
from strands.telemetry.tracer import get_tracer
from strands.tools.executors import ConcurrentToolExecutor, SequentialToolExecutor

import telemetry
from telemetry import conventions as c
from telemetry import instrument_tool
from telemetry.exceptions import ConfigurationError
from telemetry.integrations import strands_agents as otel_strands
from telemetry.testing import Capture, capture

from .strands_parts import (
    ScriptedModel,
    agent_of,
    explode,
    last_result,
    lookup,
    missing_order,
    refund,
    results,
    stock,
    tools,
)


@instrument_tool(kind="read")
def already(x: int) -> int:
    """A tool the user decorated themselves."""
    return x


def _agent(*turns: Any, **kwargs: Any) -> Any:
    inner = agent_of("researcher", ScriptedModel(), tools(lookup), description="Finds things.")
    return agent_of("planner", ScriptedModel(*turns), [*tools(lookup, stock, missing_order, refund), tool(already),
                                                       inner.as_tool()], **kwargs)


def test_tool_specs_shown_to_the_model_are_byte_identical(telemetry_capture: Capture) -> None:
    """The tool specs the model is given do not change, instrumented or put back."""
    agent = _agent()
    agent("hi")
    before = agent.model.shown[0]
    assert '"name": "lookup"' in before and '"name": "researcher"' in before and "tool_context" not in before
    otel_strands.instrument(agent)
    agent("hi")
    assert agent.model.shown[1] == before
    otel_strands.uninstrument(agent)
    agent("hi")
    assert agent.model.shown[2] == before


@pytest.mark.parametrize("executor", [ConcurrentToolExecutor, SequentialToolExecutor])
def test_run_records_call_ids_session_and_agent_and_answers_as_before(telemetry_capture: Capture, executor: Any) -> None:
    """Parallel tool uses, sync and async: each span has the toolUseId, the agent's session and name; the model is answered as before."""
    turns = [[("lookup", {"query": "a"}, "c-1"), ("stock", {"item": "tea"}, "c-2")], [("lookup", {"query": "b"}, "c-3")]]
    plain = agent_of("planner", ScriptedModel(*turns), tools(lookup, stock), tool_executor=executor())
    plain("go")
    agent = agent_of("planner", ScriptedModel(*turns), tools(lookup, stock), tool_executor=executor())
    assert otel_strands.instrument(agent) is agent
    agent("go")
    assert results(agent) == results(plain)
    spans = ours(telemetry_capture.spans())
    assert sorted((attrs(s)[c.GEN_AI_TOOL_NAME], attrs(s)[c.GEN_AI_TOOL_CALL_ID]) for s in spans) == [
        ("lookup", "c-1"), ("lookup", "c-3"), ("stock", "c-2")]
    for span in spans:
        a = attrs(span)
        assert (a[c.GEN_AI_CONVERSATION_ID], a[c.GEN_AI_AGENT_ID], a[c.TOOL_OUTCOME]) == (agent.session_id, "planner", c.OUTCOME_OK)
    assert telemetry.current_agent() is None and telemetry.current_tool_call_id() is None  # nothing left set


def test_failure_semantics_answers_unchanged(telemetry_capture: Capture) -> None:
    """Strands' error envelope, an exception, arguments its validation refuses: each its outcome; the model is told as before."""
    turns = [[("missing_order", {"order_id": "o-1"}, "f-1"), ("explode", {"order_id": "o-2"}, "f-2")],
             [("lookup", {"query": 3}, "f-3")], [("lookup", {"query": "ok"}, "f-4")]]
    plain = agent_of("clerk", ScriptedModel(*turns), tools(missing_order, explode, lookup))
    plain("go")
    agent = otel_strands.instrument(agent_of("clerk", ScriptedModel(*turns), tools(missing_order, explode, lookup)))
    agent("go")
    assert results(agent) == results(plain)
    found = {attrs(s)[c.GEN_AI_TOOL_CALL_ID]: attrs(s) for s in ours(telemetry_capture.spans())}
    assert {k: (a[c.TOOL_TRANSPORT], a[c.TOOL_OUTCOME], a[c.TOOL_SILENT_FAILURE]) for k, a in found.items()} == {
        "f-1": (c.TRANSPORT_OK, c.OUTCOME_TOOL_ERROR, False),
        "f-2": (c.TRANSPORT_ERROR, c.OUTCOME_ERROR, False),
        "f-3": (c.TRANSPORT_OK, c.OUTCOME_INVALID_ARGUMENT, False),
        "f-4": (c.TRANSPORT_OK, c.OUTCOME_OK, False),
    }
    assert found["f-2"][c.ERROR_TYPE] == "RuntimeError" and found["f-3"][c.ERROR_TYPE] == "ValueError"
    assert found["f-3"][c.GEN_AI_AGENT_ID] == "clerk"
    assert telemetry_capture.calls("lookup", transport=c.TRANSPORT_OK, outcome=c.OUTCOME_INVALID_ARGUMENT) == 1


def test_interrupt_is_approval_required_and_the_agent_still_pauses(telemetry_capture: Capture) -> None:
    """A tool's interrupt pauses the agent as before (ok/approval_required); the resumed call is recorded ok."""
    agent = otel_strands.instrument(agent_of("clerk", ScriptedModel([("refund", {"order_id": "o-1", "amount": 5}, "i-1")]),
                                             tools(refund)))
    paused = agent("refund o-1")
    assert paused.stop_reason == "interrupt"
    (interrupt,) = paused.interrupts
    agent([{"interruptResponse": {"interruptId": interrupt.id, "response": "yes"}}])
    assert [r["content"][0]["text"] for r in results(agent)] == ["refunded 5"]
    asked, done = telemetry_capture.spans("refund")
    assert (attrs(asked)[c.TOOL_TRANSPORT], attrs(asked)[c.TOOL_OUTCOME]) == (c.TRANSPORT_OK, c.OUTCOME_APPROVAL_REQUIRED)
    assert attrs(asked)[c.ERROR_TYPE] == "strands.interrupt.InterruptException"
    assert (attrs(done)[c.TOOL_OUTCOME], attrs(done)[c.GEN_AI_TOOL_CALL_ID]) == (c.OUTCOME_OK, "i-1")


def test_a_hook_asking_approval_before_the_tool_runs_is_approval_required(telemetry_capture: Capture) -> None:
    """A BeforeToolCallEvent hook that interrupts pauses a call the tool never saw: ok/approval_required; approved, it runs and is recorded ok."""
    from strands.hooks import BeforeToolCallEvent

    def ask(event: BeforeToolCallEvent) -> None:
        if event.tool_use["name"] == "lookup":
            answer = event.interrupt("approve-lookup", reason="reads customer data")
            if answer != "yes":
                event.cancel_tool = "not approved"

    agent = agent_of("clerk", ScriptedModel([("lookup", {"query": "a"}, "h-1")]), tools(lookup))
    agent.hooks.add_callback(BeforeToolCallEvent, ask)
    otel_strands.instrument(agent, kinds={"lookup": "read"})
    paused = agent("go")
    assert paused.stop_reason == "interrupt"
    (asked,) = telemetry_capture.spans("lookup")
    a = attrs(asked)
    assert (a[c.TOOL_TRANSPORT], a[c.TOOL_OUTCOME], a[c.GEN_AI_TOOL_CALL_ID], a[c.GEN_AI_AGENT_ID], a[c.TOOL_KIND]) == (
        c.TRANSPORT_OK, c.OUTCOME_APPROVAL_REQUIRED, "h-1", "clerk", c.KIND_READ)
    agent([{"interruptResponse": {"interruptId": paused.interrupts[0].id, "response": "yes"}}])
    assert results(agent)[0]["status"] == "success"
    _asked, ran = telemetry_capture.spans("lookup")
    assert (attrs(ran)[c.TOOL_OUTCOME], attrs(ran)[c.GEN_AI_TOOL_CALL_ID]) == (c.OUTCOME_OK, "h-1")
    otel_strands.uninstrument(agent)
    assert "invoke_callbacks_async" not in vars(agent.hooks)


def test_agent_as_tool_is_a_delegate_call_and_the_inner_agent_keeps_its_identity(telemetry_capture: Capture) -> None:
    """An agent used as a tool is one delegate call covering the inner run; the inner call has its own agent and call id, nested under it."""
    researcher = agent_of("researcher", ScriptedModel([("lookup", {"query": "tea"}, "in-1")]), tools(lookup),
                          description="Finds things.")
    lead = agent_of("lead", ScriptedModel([("researcher", {"input": "stock of tea?"}, "out-1")]), [researcher.as_tool()])
    otel_strands.instrument(lead, kinds={"lookup": "read"})
    lead("go")
    delegated, looked = attrs(telemetry_capture.span("researcher")), attrs(telemetry_capture.span("lookup"))
    assert (delegated[c.TOOL_KIND], delegated[c.GEN_AI_AGENT_ID], delegated[c.GEN_AI_TOOL_CALL_ID]) == (c.KIND_DELEGATE, "lead", "out-1")
    assert delegated[c.TOOL_OUTCOME] == c.OUTCOME_OK
    assert (looked[c.TOOL_KIND], looked[c.GEN_AI_AGENT_ID], looked[c.GEN_AI_TOOL_CALL_ID]) == (c.KIND_READ, "researcher", "in-1")
    assert looked[c.GEN_AI_CONVERSATION_ID] == researcher.session_id
    parent = telemetry_capture.span("lookup").parent
    assert parent is not None and parent.span_id == telemetry_capture.span("researcher").context.span_id


def test_an_inner_agent_that_fails_is_a_told_tool_error(telemetry_capture: Capture) -> None:
    """The inner agent's model fails: Strands answers the lead an error result, as before; the delegate call is ok/tool_error."""

    class Broken(ScriptedModel):
        async def stream(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("model unavailable")
            yield

    def lead(instrumented: bool) -> Any:
        researcher = agent_of("researcher", Broken(), [], description="Finds things.")
        agent = agent_of("lead", ScriptedModel([("researcher", {"input": "x"}, "out-1")]), [researcher.as_tool()])
        return otel_strands.instrument(agent) if instrumented else agent

    plain, agent = lead(False), lead(True)
    plain("go")
    agent("go")
    assert results(agent) == results(plain) and results(agent)[0]["status"] == "error"
    a = attrs(telemetry_capture.span("researcher"))
    assert (a[c.TOOL_TRANSPORT], a[c.TOOL_OUTCOME], a[c.TOOL_SILENT_FAILURE]) == (c.TRANSPORT_OK, c.OUTCOME_TOOL_ERROR, False)
    assert a[c.ERROR_TYPE] == "telemetry.integrations.strands_agents.AgentToolFailed"


def test_user_context_wins(telemetry_capture: Capture) -> None:
    """Inside telemetry.agent(), the user's agent and conversation ids are kept; the call id is still Strands'."""
    agent = otel_strands.instrument(agent_of("planner", ScriptedModel([("lookup", {"query": "a"}, "u-1")]), tools(lookup)))
    with telemetry.agent("crew-lead", conversation_id="crew-run-7"):
        agent("go")
    a = attrs(telemetry_capture.span("lookup"))
    assert (a[c.GEN_AI_AGENT_ID], a[c.GEN_AI_CONVERSATION_ID], a[c.GEN_AI_TOOL_CALL_ID]) == ("crew-lead", "crew-run-7", "u-1")


def test_kinds_typo_and_bad_targets() -> None:
    """A typo in kinds names the tools; something that is no Strands tool is refused by name."""
    with pytest.raises(ConfigurationError, match="'lookpu'.*lookup"):
        otel_strands.instrument(agent_of("a", ScriptedModel(), tools(lookup)), kinds={"lookpu": "read"})
    with pytest.raises(ConfigurationError, match="is not a Strands @tool"):
        otel_strands.instrument([lookup])
    with pytest.raises(ConfigurationError, match="needs a strands Agent"):
        otel_strands.instrument(42)


def test_uninstrument_restores_tools_exactly(telemetry_capture: Capture) -> None:
    """After uninstrument every tool's attributes are as before; a run records nothing; instrument works again."""
    agent = _agent([("lookup", {"query": "a"}, "x-1")])
    registry = agent.tool_registry.registry
    inner = registry["researcher"].agent
    objects = [*registry.values(), *inner.tool_registry.registry.values(), agent.hooks, inner.hooks]
    state = [dict(vars(o)) for o in objects]
    otel_strands.instrument(agent)
    assert otel_strands.uninstrument(agent) is agent
    assert [dict(vars(o)) for o in objects] == state
    agent("go")
    assert ours(telemetry_capture.spans()) == []
    agent.model.turns[:] = [[("lookup", {"query": "b"}, "x-2")]]
    agent.model.shown.clear()
    otel_strands.instrument(agent)  # and back again
    agent("go")
    assert [attrs(s)[c.GEN_AI_TOOL_CALL_ID] for s in ours(telemetry_capture.spans())] == ["x-2"]


def _planner_script(store: Any) -> Any:
    """Read, lose a race to a colleague, get refused, re-read, redo: the guarded recovery."""

    def script(turn: int, messages: list[Any]) -> list[tuple[str, dict[str, Any], str]]:
        n = turn + 1
        seen = last_result(messages)
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


@pytest.mark.parametrize("framework_spans", [False, True], ids=["ours-only", "with-strands-spans"])
def test_guarded_run_recovers_nests_under_strands_and_forensics_counts_once(
    tmp_path: Path, telemetry_capture: Capture, monkeypatch: pytest.MonkeyPatch, framework_spans: bool
) -> None:
    """A stale write refused and recovered in one session; with Strands' spans ours nest under its execute_tool spans and forensics finds the same."""
    if framework_spans:
        monkeypatch.setattr(get_tracer(), "tracer", telemetry_capture.runtime.provider.get_tracer("strands.telemetry.tracer"))
    store = state_store(tmp_path, telemetry_capture)
    agent = agent_of("planner", ScriptedModel(script=_planner_script(store)), [tool(store.read_state), tool(store.write_state)])
    otel_strands.instrument(agent)
    agent("add your step to the plan")
    spans = telemetry_capture.spans()
    assert store.read_state(KEY)["value"] == {"steps": ["draft", "colleague", "planner"]}
    writes = [s for s in tool_spans_by_name(spans, "write_state") if attrs(s).get(c.GEN_AI_AGENT_ID) == "planner"]
    assert [attrs(s)[c.TOOL_OUTCOME] for s in writes] == [c.OUTCOME_REJECTED_STALE_VERSION, c.OUTCOME_OK]
    assert [attrs(s)[c.GEN_AI_TOOL_CALL_ID] for s in writes] == ["call-write-2", "call-write-4"]
    assert attrs(writes[1])[c.TOOL_READBACK] == c.READBACK_MATCH
    assert {attrs(s)[c.GEN_AI_CONVERSATION_ID] for s in writes} == {agent.session_id}
    both = write_traces(tmp_path / "both.jsonl", spans)
    assert_stale_write_story(both, agent.session_id)
    if framework_spans:
        theirs = [s for s in spans if s not in ours(spans) and s.name == c.SPAN_NAME_PREFIX + "write_state"]
        assert len(theirs) == 2 and all(c.TOOL_OUTCOME not in attrs(s) for s in theirs)
        parents = {s.context.span_id for s in theirs}
        assert all(w.parent is not None and w.parent.span_id in parents for w in writes)
        alone = write_traces(tmp_path / "ours.jsonl", ours(spans))
        assert findings(both) == findings(alone)


_INPUTS = st.dictionaries(st.sampled_from(["query", "q", "agent"]),
                          st.one_of(st.none(), st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=2)),
                          max_size=3)


@settings(max_examples=25)
@given(tool_input=_INPUTS)
def test_any_input_gets_the_same_answer_and_one_recorded_call(tool_input: dict[str, Any]) -> None:
    """Whatever input the model sends, Strands answers exactly as without instrumentation, and the call is recorded once: ok, or ok/invalid_argument."""
    turns = [[("lookup", tool_input, "p-1")]]
    plain = agent_of("clerk", ScriptedModel(*turns), tools(lookup))
    plain("go")
    with capture() as cap:
        agent = otel_strands.instrument(agent_of("clerk", ScriptedModel(*turns), tools(lookup)))
        agent("go")
        assert results(agent) == results(plain)
        (span,) = ours(cap.spans())
        a = attrs(span)
        assert a[c.TOOL_TRANSPORT] == c.TRANSPORT_OK and a[c.GEN_AI_TOOL_CALL_ID] == "p-1"
        ran = results(agent)[0]["status"] == "success"
        assert a[c.TOOL_OUTCOME] == (c.OUTCOME_OK if ran else c.OUTCOME_INVALID_ARGUMENT)
