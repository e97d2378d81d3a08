"""What the Strands tests share: a scripted ``Model`` (Strands' own provider interface, no network)
and the tools the agents use."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

from strands import Agent, ToolContext, tool
from strands.models.model import Model

Call = tuple[str, dict[str, Any], str]
"""One tool use the model makes: (tool name, input, toolUseId)."""


class ScriptedModel(Model):
    """Strands' model interface answered by a script: turn ``i`` makes ``turns[i]``'s tool uses, then text.

    ``script(turn, messages)``, when given, decides instead (an empty list ends with text). The
    tool specs of every request are kept as JSON text, so a test can read what the model was shown.
    """

    def __init__(self, *turns: list[Call], script: Callable[[int, list[Any]], list[Call]] | None = None) -> None:
        self.turns = list(turns)
        self.script = script
        self.shown: list[str] = []

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    async def structured_output(self, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        raise NotImplementedError("the scripted model makes no structured output")
        yield

    async def stream(self, messages: Any, tool_specs: Any = None, system_prompt: Any = None,
                     **kwargs: Any) -> AsyncGenerator[Any, None]:
        turn = len(self.shown)
        self.shown.append(json.dumps(tool_specs, sort_keys=True))
        calls: Sequence[Call] = (self.script(turn, list(messages)) if self.script is not None
                                 else self.turns[turn] if turn < len(self.turns) else [])
        yield {"messageStart": {"role": "assistant"}}
        for name, arguments, call_id in calls:
            yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": call_id, "name": name}}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(arguments)}}}}
            yield {"contentBlockStop": {}}
        if calls:
            yield {"messageStop": {"stopReason": "tool_use"}}
            return
        yield {"contentBlockDelta": {"delta": {"text": "done"}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}


def agent_of(name: str, model: ScriptedModel, tools: list[Any], **kwargs: Any) -> Agent:
    return Agent(name=name, model=model, tools=tools, callback_handler=None, **kwargs)


def results(agent: Agent) -> list[dict[str, Any]]:
    """Every tool result the model was given, in order (toolUseId, status, content)."""
    return [block["toolResult"] for message in agent.messages for block in message["content"] if "toolResult" in block]


def last_result(messages: list[Any]) -> dict[str, Any]:
    """The JSON the last tool result carries (the result of the model's last call)."""
    for message in reversed(messages):
        for block in reversed(message["content"]):
            if "toolResult" in block:
                return dict(json.loads(block["toolResult"]["content"][0]["text"]))
    return {}


def lookup(query: str) -> dict[str, Any]:
    """Look something up."""
    return {"found": query}


async def stock(item: str) -> dict[str, Any]:
    """Count an item in stock (async)."""
    return {"item": item, "count": 3}


def missing_order(order_id: str) -> dict[str, Any]:
    """Fetch an order that does not exist (Strands' failure envelope)."""
    return {"status": "error", "content": [{"text": f"no order {order_id}"}]}


def explode(order_id: str) -> str:
    """A tool that raises."""
    raise RuntimeError(f"database down for {order_id}")


def refund(order_id: str, amount: int, tool_context: ToolContext) -> str:
    """Refund an order, once a human approved it (an interrupt)."""
    answer = tool_context.interrupt("approve-refund", reason={"order_id": order_id, "amount": amount})
    return f"refunded {amount}" if answer == "yes" else "refund declined"


_CONTEXT = {refund}


def tools(*functions: Callable[..., Any]) -> list[Any]:
    """Fresh ``@tool``\\ s of ``functions`` (instrumenting changes a tool in place; each test gets its own)."""
    return [tool(context=True)(f) if f in _CONTEXT else tool(f) for f in functions]
