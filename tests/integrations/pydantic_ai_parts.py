"""The pydantic-ai side of ``test_pydantic_ai.py``: its tools, an agent over them and a scripted planner.

A module of its own so that pydantic-ai is imported only by a test that runs (see ``tests/optional.py``).
``notify`` lives here because pydantic-ai reads its ``RunContext`` annotation from this module.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, ModelRetry, RunContext, Tool
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.test import TestModel
from pydantic_ai.toolsets import FunctionToolset

from telemetry import instrument_tool
from telemetry.integrations import pydantic_ai as otel_pydantic_ai
from telemetry.testing import Capture

from .integration_support import KEY, state_store

__all__ = [
    "Agent", "Instrumentation", "InstrumentationSettings", "ModelRetry", "TestModel", "ToolCallPart",
    "agent_of", "already", "lookup", "otel_pydantic_ai", "scripted_planner", "shown",
]


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


def agent_of(tmp_path: Path, capture: Capture, model: Any, **kwargs: Any) -> tuple[Agent[None, str], Any]:
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


def shown(agent: Agent[None, str]) -> str:
    """The tool definitions the model is given, as JSON text."""
    seen: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(json.dumps([dataclasses.asdict(t) for t in info.function_tools], sort_keys=True, default=repr))
        return ModelResponse(parts=[TextPart("ok")])

    agent.run_sync("hi", model=FunctionModel(model))
    return seen[0]


def last_return(messages: list[ModelMessage]) -> dict[str, Any]:
    parts = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    return parts[-1].content if parts else {}


def scripted_planner(store: Any) -> FunctionModel:
    """Read, lose a race to a colleague, get refused, re-read, redo: the guarded recovery."""
    turn = {"n": 0}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn["n"] += 1
        seen = last_return(messages)
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


# --- round two: nested agents, pauses, run-time toolsets, prefixed names, refused arguments ---

def scripted(*turns: list[Any]) -> FunctionModel:
    """A model that answers turn i with ``turns[i]`` (parts), then ``done``."""
    seen = {"n": 0}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        n = seen["n"]
        seen["n"] += 1
        return ModelResponse(parts=list(turns[n]) if n < len(turns) else [TextPart("done")])

    return FunctionModel(model)


def search(query: str) -> str:
    """Search the inventory."""
    return f"{query}: 3 in stock"


def count(n: int) -> int:
    """Count to n."""
    return n


def researcher() -> Agent[None, str]:
    """The inner agent: looks something up once."""
    return Agent(scripted([ToolCallPart("lookup", {"query": "inner"}, tool_call_id="inner-1")]), name="researcher",
                 tools=[Tool(lookup, metadata={"readOnlyHint": True})])


INNER: dict[str, Agent[None, str]] = {}


async def ask_researcher(ctx: RunContext[None], question: str) -> str:
    """Ask the research agent (the agent-delegation pattern: a tool that runs another agent)."""
    result = await INNER["researcher"].run(question, usage=ctx.usage)
    return result.output


def lead(inner: Agent[None, str]) -> Agent[None, str]:
    INNER["researcher"] = inner
    return Agent(scripted([ToolCallPart("ask_researcher", {"question": "stock?"}, tool_call_id="outer-1")]),
                 name="lead", tools=[ask_researcher])
