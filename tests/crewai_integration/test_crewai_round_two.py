"""CrewAI, round two: delegation recorded as delegate calls with each agent's identity, uninstrument."""

from __future__ import annotations

from crewai import Agent, Crew, Task

from telemetry import conventions as c
from telemetry.integrations import crewai as telemetry_crewai
from telemetry.testing import Capture

from .scripted import ScriptedLLM, react_call
from .test_crewai_integration import LookupOrder, _fresh_send_slack


def _delegating_crew() -> tuple[Crew, Agent, Agent]:
    researcher = Agent(role="researcher", goal="find orders", backstory="knows the order system", tools=[LookupOrder()],
                       llm=ScriptedLLM([react_call("Lookup Order", order_id="A-1"), "Thought: found\nFinal Answer: A-1 shipped"]))
    lead = Agent(role="lead", goal="answer the customer", backstory="runs the desk", allow_delegation=True,
                 llm=ScriptedLLM([react_call("Delegate work to coworker", task="look up order A-1",
                                             context="the customer is waiting; only read, never refund", coworker="researcher"),
                                  "Thought: done\nFinal Answer: A-1 shipped"]))
    task = Task(description="where is order A-1?", expected_output="its status", agent=lead)
    return Crew(agents=[lead, researcher], tasks=[task]), lead, researcher


def test_delegation_is_a_delegate_call_and_the_coworker_keeps_its_identity(telemetry_capture: Capture) -> None:
    """delegate_work_to_coworker, added at kickoff, is recorded (kind delegate, the coworker named); the coworker's call is its own."""
    crew, _lead, _researcher = _delegating_crew()
    telemetry_crewai.instrument(crew, kinds={"lookup_order": "read"})
    crew.kickoff()
    delegated = telemetry_capture.span("delegate_work_to_coworker").attributes
    looked = telemetry_capture.span("lookup_order").attributes
    assert (delegated[c.TOOL_KIND], delegated[c.GEN_AI_AGENT_ID], delegated["tool.argument.coworker"]) == (
        c.KIND_DELEGATE, "lead", "researcher")
    assert delegated[c.TOOL_OUTCOME] == c.OUTCOME_OK
    assert looked[c.GEN_AI_AGENT_ID] == "researcher" and looked[c.TOOL_KIND] == c.KIND_READ
    assert looked[c.GEN_AI_TOOL_CALL_ID] != delegated[c.GEN_AI_TOOL_CALL_ID]
    assert looked[c.GEN_AI_CONVERSATION_ID] == delegated[c.GEN_AI_CONVERSATION_ID]  # one kickoff, one run


def test_uninstrument_restores_tools_and_agents(telemetry_capture: Capture) -> None:
    """After uninstrument: the tools' and agents' own attributes as before, and a kickoff records nothing."""
    crew, lead, researcher = _delegating_crew()
    slack = _fresh_send_slack()
    lead.tools = [slack]
    state = [dict(vars(o)) for o in (slack, researcher.tools[0], lead, researcher)]
    telemetry_crewai.instrument(crew)
    assert telemetry_crewai.uninstrument(crew) is crew
    assert [dict(vars(o)) for o in (slack, researcher.tools[0], lead, researcher)] == state
    crew.kickoff()
    assert [s for s in telemetry_capture.spans() if (s.attributes or {}).get(c.TOOL_OUTCOME)] == []



def test_arguments_the_schema_refuses_are_invalid_argument(telemetry_capture: Capture) -> None:
    """A call whose arguments fail the tool's args_schema never reaches it: ok/invalid_argument, the crew goes on."""
    llm = ScriptedLLM([react_call("Lookup Order", order="A-1"), react_call("Lookup Order", order_id="A-1"),
                       "Thought: done\nFinal Answer: A-1 shipped"])
    agent = Agent(role="clerk", goal="find orders", backstory="careful", tools=[LookupOrder()], llm=llm)
    crew = Crew(agents=[agent], tasks=[Task(description="where is A-1?", expected_output="its status", agent=agent)])
    telemetry_crewai.instrument(crew, kinds={"lookup_order": "read"})
    crew.kickoff()
    *refused_attempts, ran = telemetry_capture.spans("lookup_order")  # CrewAI itself retries a refused call
    ids = [s.attributes[c.GEN_AI_TOOL_CALL_ID] for s in refused_attempts]
    assert refused_attempts and len(set(ids)) == len(ids), "each attempt once"
    refused = refused_attempts[0]
    a = refused.attributes
    assert (a[c.TOOL_TRANSPORT], a[c.TOOL_OUTCOME], a[c.GEN_AI_AGENT_ID], a[c.TOOL_KIND]) == (
        c.TRANSPORT_OK, c.OUTCOME_INVALID_ARGUMENT, "clerk", c.KIND_READ)
    assert ran.attributes[c.TOOL_OUTCOME] == c.OUTCOME_OK
    assert a[c.GEN_AI_TOOL_CALL_ID] != ran.attributes[c.GEN_AI_TOOL_CALL_ID]
