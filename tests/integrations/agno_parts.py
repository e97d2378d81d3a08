"""The Agno side of ``test_agno.py``: a scripted ``Model`` subclass (no network), tools, a planner over the guards.

A module of its own so that Agno is imported only by a test that runs (see ``tests/optional.py``).
The model is a custom ``agno.models.base.Model``: turn i answers with ``turns[i]``'s tool calls
(then ``done``), and it keeps the tool definitions Agno sent it and the messages it was given.
"""

from __future__ import annotations

import ast
import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from agno.agent import Agent
from agno.exceptions import RetryAgentRun
from agno.models.base import Model
from agno.models.message import Message
from agno.models.response import ModelResponse
from agno.team import Team
from agno.tools import tool
from agno.tools.toolkit import Toolkit

from telemetry.integrations import agno as otel_agno

from .integration_support import KEY

__all__ = ["Agent", "RetryAgentRun", "Team", "Toolkit", "otel_agno", "tool"]

Call = tuple[str, str, dict[str, Any]]  # (call id, tool name, arguments)


@dataclasses.dataclass
class Scripted(Model):
    """Agno's own Model interface, answered from a script: the offline model of these tests."""

    id: str = "scripted"
    name: str = "Scripted"
    provider: str = "outcome-telemetry-tests"
    turns: list[Sequence[Call]] = dataclasses.field(default_factory=list)
    next_turn: Callable[[list[Message]], Sequence[Call] | None] | None = None
    shown: list[str] = dataclasses.field(default_factory=list)
    told: list[str] = dataclasses.field(default_factory=list)

    def _answer(self, messages: list[Message], tools: Any) -> ModelResponse:
        self.shown.append(json.dumps(tools, sort_keys=True))
        self.told.extend(str(m.content) for m in messages if m.role == "tool")
        calls = self.next_turn(messages) if self.next_turn is not None else (self.turns.pop(0) if self.turns else None)
        if not calls:
            return ModelResponse(role="assistant", content="done")
        return ModelResponse(role="assistant", tool_calls=[
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in calls])

    def invoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return self._answer(kwargs["messages"], kwargs.get("tools"))

    async def ainvoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return self._answer(kwargs["messages"], kwargs.get("tools"))

    def invoke_stream(self, *args: Any, **kwargs: Any) -> Iterator[ModelResponse]:
        yield self._answer(kwargs["messages"], kwargs.get("tools"))

    async def ainvoke_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ModelResponse]:
        yield self._answer(kwargs["messages"], kwargs.get("tools"))

    def _parse_provider_response(self, response: Any, **kwargs: Any) -> ModelResponse:
        return response  # type: ignore[no-any-return]

    def _parse_provider_response_delta(self, response: Any) -> ModelResponse:
        return response  # type: ignore[no-any-return]


def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


async def notify(message: str, urgent: bool = False) -> str:
    """Send a notification."""
    return "sent"


class Inventory(Toolkit):
    """A toolkit: Agno's way of grouping tools (their functions become Functions at construction)."""

    def __init__(self) -> None:
        super().__init__(name="inventory", tools=[self.stock])

    def stock(self, item: str) -> int:
        """How many of an item are in stock."""
        return 3


def count(n: int) -> int:
    """Count to n."""
    return n


def counter() -> Any:
    """``count`` as a fresh ``@tool`` Function carrying an MCP-style read-only hint (one per agent)."""
    return tool(annotations={"readOnlyHint": True})(count)


def planner_turns(store: Any) -> Callable[[list[Message]], Sequence[Call] | None]:
    """Read, lose a race to a colleague, get refused, re-read, redo: the guarded recovery."""
    turn = {"n": 0}

    def next_turn(messages: list[Message]) -> Sequence[Call] | None:
        turn["n"] += 1
        n = turn["n"]
        if n in (1, 3):
            return [(f"call-read-{n}", "read_state", {"key": KEY, "agent_id": "planner"})]
        if n in (2, 4):
            seen = ast.literal_eval(str(next(m.content for m in reversed(messages) if m.role == "tool")))
            if n == 2:  # a colleague writes between the planner's read and its write
                store.write_state(KEY, {"steps": ["draft", "colleague"]}, seen["version"], agent_id="colleague")
            args = {"key": KEY, "value": {"steps": [*seen["value"]["steps"], "planner"]},
                    "expected_version": seen["version"], "agent_id": "planner"}
            return [(f"call-write-{n}", "write_state", args)]
        return None

    return next_turn
