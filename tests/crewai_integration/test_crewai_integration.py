"""telemetry.integrations.crewai against the real CrewAI: a crew run by a scripted LLM, no network."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from crewai import Agent, Crew, Task
from crewai.events.event_bus import crewai_event_bus
from crewai.events.types.crew_events import CrewKickoffStartedEvent
from crewai.events.types.tool_usage_events import ToolUsageFinishedEvent
from crewai.tools import BaseTool, ToolFailure, tool
from crewai.tools.tool_failure import failure_from_exception

import telemetry
from telemetry import conventions as c
from telemetry.instrument import classify_result
from telemetry.integrations import crewai as telemetry_crewai
from telemetry.testing import Capture

from .scripted import FINAL, ScriptedLLM, native_call, react_call

SENT: list[tuple[str, str]] = []


@tool("send_slack")
def send_slack(channel: str, text: str) -> Any:
    """Send a message to a Slack channel."""
    if channel == "#missing":
        return ToolFailure(message="channel not found", code="channel_not_found", retryable=False)
    SENT.append((channel, text))
    return {"ok": True, "channel": channel}


class LookupOrder(BaseTool):
    name: str = "Lookup Order"
    description: str = "Look an order up by id."

    def _run(self, order_id: str) -> Any:
        if order_id == "gone":
            return ToolFailure(message="no such order", code="order_not_found")
        return {"success": True, "order": order_id}


@pytest.fixture
def events() -> Iterator[dict[str, list[Any]]]:
    """CrewAI's own events of the test, to check our ids against."""
    seen: dict[str, list[Any]] = {"finished": [], "kickoff": []}
    with crewai_event_bus.scoped_handlers():

        @crewai_event_bus.on(ToolUsageFinishedEvent)
        def finished(source: Any, event: ToolUsageFinishedEvent) -> None:
            seen["finished"].append(event)

        @crewai_event_bus.on(CrewKickoffStartedEvent)
        def kickoff(source: Any, event: CrewKickoffStartedEvent) -> None:
            seen["kickoff"].append(event)

        yield seen


def _crew(llm: ScriptedLLM, tools: list[Any], role: str = "notifier") -> Crew:
    agent = Agent(role=role, goal="keep the team informed", backstory="a careful assistant", llm=llm, tools=tools)
    task = Task(description="tell the team the deploy is done", expected_output="a confirmation", agent=agent)
    return Crew(agents=[agent], tasks=[task])


def _fresh_send_slack() -> Any:
    """A new Tool around the same function, so each test instruments its own tool object."""
    return tool("send_slack")(send_slack.func)


def test_tool_failure_in_a_react_crew_is_a_reported_outcome(telemetry_capture: Capture, events: dict[str, list[Any]]) -> None:
    """A ToolFailure the crew saw as text is outcome channel_not_found; the retry is ok; ids are CrewAI's."""
    llm = ScriptedLLM([
        react_call("send_slack", channel="#missing", text="deployed"),
        react_call("send_slack", channel="#ops", text="deployed"),
        FINAL,
    ])
    crew = telemetry_crewai.instrument(_crew(llm, [_fresh_send_slack()]), kinds={"send_slack": "send"})
    SENT.clear()
    output = crew.kickoff()
    crewai_event_bus.flush()

    assert SENT == [("#ops", "deployed")]  # the tool itself ran unchanged
    assert [r.failure.code for r in output.tasks_output[0].tool_failures] == ["channel_not_found"]
    failed, sent = telemetry_capture.spans("send_slack")
    assert failed.attributes[c.TOOL_OUTCOME] == "channel_not_found"
    assert failed.attributes[c.TOOL_TRANSPORT] == c.TRANSPORT_OK
    assert failed.attributes[c.TOOL_KIND] == c.KIND_SEND
    assert sent.attributes[c.TOOL_OUTCOME] == c.OUTCOME_OK
    assert telemetry_capture.calls("send_slack", outcome="other") == 1  # an undeclared code, bounded label
    assert telemetry_capture.calls("send_slack", outcome="ok") == 1
    # CrewAI's ids: the tool-usage event of each call, the crew kickoff, the agent's role.
    started = sorted(e.started_event_id for e in events["finished"])
    assert sorted(s.attributes[c.GEN_AI_TOOL_CALL_ID] for s in (failed, sent)) == started
    (kickoff,) = events["kickoff"]
    assert {s.attributes[c.GEN_AI_CONVERSATION_ID] for s in (failed, sent)} == {kickoff.event_id}
    assert {s.attributes[c.GEN_AI_AGENT_ID] for s in (failed, sent)} == {"notifier"}


def test_native_function_calling_and_a_basetool_subclass(telemetry_capture: Capture, events: dict[str, list[Any]]) -> None:
    """On CrewAI's function-calling path a BaseTool subclass's ToolFailure is recorded with its code."""
    llm = ScriptedLLM([native_call("call_1", "lookup_order", order_id="gone"),
                       native_call("call_2", "lookup_order", order_id="A-7"), FINAL], native=True)
    crew = telemetry_crewai.instrument(_crew(llm, [LookupOrder()], role="support"), kinds={"lookup_order": "read"})
    crew.kickoff()
    crewai_event_bus.flush()

    gone, found = telemetry_capture.spans("lookup_order")
    assert (gone.attributes[c.TOOL_OUTCOME], found.attributes[c.TOOL_OUTCOME]) == ("order_not_found", "ok")
    assert gone.attributes[c.TOOL_READBACK] == c.READBACK_NOT_APPLICABLE  # kind read, from kinds=
    assert sorted(s.attributes[c.GEN_AI_TOOL_CALL_ID] for s in (gone, found)) == sorted(
        e.started_event_id for e in events["finished"]
    )
    assert {s.attributes[c.GEN_AI_AGENT_ID] for s in (gone, found)} == {"support"}


def test_instrument_twice_records_each_call_once(telemetry_capture: Capture) -> None:
    """Instrumenting a crew again (or an agent of it) leaves its tools wrapped once."""
    llm = ScriptedLLM([react_call("send_slack", channel="#ops", text="hi"), FINAL])
    crew = _crew(llm, [_fresh_send_slack()])
    telemetry_crewai.instrument(crew)
    telemetry_crewai.instrument(crew.agents[0])
    crew.kickoff()
    assert len(telemetry_capture.spans("send_slack")) == 1


def test_a_tool_already_under_instrument_tool_gets_the_ids_and_one_span(telemetry_capture: Capture) -> None:
    """@instrument_tool(outcomes=...) under @tool: one span, with CrewAI's ids and the declared label."""

    @tool("notify")
    @telemetry.instrument_tool(kind="send", outcomes=["channel_not_found"])
    def notify(channel: str) -> Any:
        """Notify a channel."""
        return ToolFailure(message="channel not found", code="channel_not_found")

    llm = ScriptedLLM([react_call("notify", channel="#missing"), FINAL])
    _crew_run = telemetry_crewai.instrument(_crew(llm, [notify]))
    _crew_run.kickoff()
    (span,) = telemetry_capture.spans("notify")
    assert span.attributes[c.GEN_AI_AGENT_ID] == "notifier" and c.GEN_AI_TOOL_CALL_ID in span.attributes
    assert telemetry_capture.calls("notify", outcome="channel_not_found") == 1


def test_a_list_of_tools_outside_a_crew(telemetry_capture: Capture) -> None:
    """Tools instrumented as a list and run directly: recorded, with no CrewAI ids to add."""
    slack, lookup = telemetry_crewai.instrument([_fresh_send_slack(), LookupOrder()])
    assert isinstance(slack.run(channel="#missing", text="x"), ToolFailure)
    lookup.run(order_id="A-1")
    span = telemetry_capture.span("send_slack")
    assert span.attributes[c.TOOL_OUTCOME] == "channel_not_found"
    assert c.GEN_AI_TOOL_CALL_ID not in span.attributes and c.GEN_AI_AGENT_ID not in span.attributes
    with telemetry.agent("caller", conversation_id="run-9"):
        lookup.run(order_id="gone")
    last = telemetry_capture.spans("lookup_order")[-1]
    assert (last.attributes[c.TOOL_OUTCOME], last.attributes[c.GEN_AI_AGENT_ID]) == ("order_not_found", "caller")


def test_async_tool_is_recorded_over_its_await(telemetry_capture: Capture) -> None:
    """An async @tool keeps working through arun and its span covers the await."""

    @tool("fetch_status")
    async def fetch_status(service: str) -> Any:
        """Fetch a service's status."""
        return {"status": "failed", "code": "upstream_down"}

    import asyncio

    (instrumented,) = telemetry_crewai.instrument([fetch_status])
    assert asyncio.run(instrumented.arun(service="billing")) == {"status": "failed", "code": "upstream_down"}
    assert telemetry_capture.span("fetch_status").attributes[c.TOOL_OUTCOME] == "upstream_down"


@pytest.mark.parametrize(
    ("failure", "outcome"),
    [
        (ToolFailure(message="channel not found", code="channel_not_found"), "channel_not_found"),
        (ToolFailure(message="nope"), c.OUTCOME_TOOL_ERROR),
        (ToolFailure(message="Rate limited", code="Rate limited!"), c.OUTCOME_TOOL_ERROR),
        (failure_from_exception(ValueError("bad")), c.OUTCOME_TOOL_ERROR),  # code is the class name
    ],
)
def test_tool_failure_recogniser_on_the_real_class(failure: ToolFailure, outcome: str) -> None:
    """The built-in classifier reads CrewAI's real ToolFailure: its snake_case code, else tool_error."""
    found = classify_result(failure)
    assert (found.transport, found.outcome, found.reported_failure) == (c.TRANSPORT_OK, outcome, True)


def test_bad_arguments_are_refused_by_name() -> None:
    """A kinds= name matching no tool, an unknown option, or a non-tool is refused, naming it."""
    with pytest.raises(telemetry.ConfigurationError, match="send_slak"):
        telemetry_crewai.instrument([_fresh_send_slack()], kinds={"send_slak": "send"})
    with pytest.raises(TypeError, match="kind"):
        telemetry_crewai.instrument([_fresh_send_slack()], kind="send")  # type: ignore[call-arg]
    with pytest.raises(telemetry.ConfigurationError, match="not a CrewAI tool"):
        telemetry_crewai.instrument([print])
    with pytest.raises(telemetry.ConfigurationError, match="takes a Crew"):
        telemetry_crewai.instrument(42)


def test_user_context_wins_and_agent_name_names_a_list(telemetry_capture: Capture) -> None:
    """agent_name= names the agent of a plain list; an enclosing telemetry.agent block wins over it."""
    (lookup,) = telemetry_crewai.instrument([LookupOrder()], agent_name="support-bot")
    lookup.run(order_id="A-1")
    assert telemetry_capture.spans("lookup_order")[-1].attributes[c.GEN_AI_AGENT_ID] == "support-bot"
    with telemetry.agent("caller"):
        lookup.run(order_id="A-2")
    assert telemetry_capture.spans("lookup_order")[-1].attributes[c.GEN_AI_AGENT_ID] == "caller"


def test_unreadable_crewai_scope_costs_the_ids_not_the_call(telemetry_capture: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
    """If CrewAI's event scope cannot be read (another version), the tool runs and is recorded, without ids."""

    class Broken:
        @property
        def _event_id_stack(self) -> Any:
            raise RuntimeError("moved in another CrewAI version")

    monkeypatch.setattr(telemetry_crewai, "_crewai_events", Broken())
    (slack,) = telemetry_crewai.instrument([_fresh_send_slack()])
    assert slack.run(channel="#ops", text="hi") == {"ok": True, "channel": "#ops"}
    span = telemetry_capture.span("send_slack")
    assert span.attributes[c.TOOL_OUTCOME] == "ok" and c.GEN_AI_TOOL_CALL_ID not in span.attributes
