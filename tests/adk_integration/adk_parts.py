"""What the Google ADK tests share: a scripted ``BaseLlm`` (ADK's own model class, no network),
a runner over ``InMemoryRunner`` and the tools the agents use."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.adk.tools import ToolContext
from google.genai import types

Call = tuple[str, dict[str, Any], str]
"""One function call the model makes: (tool name, arguments, call id)."""


class ScriptedLlm(BaseLlm):
    """ADK's model interface, answered by a script: turn ``i`` makes ``turns[i]``'s calls, then text.

    ``script``, when given, decides instead: ``script(turn, request)`` returns the calls (an empty
    list ends the run with text). Every request is kept, so a test can read what the model was shown.
    """

    model: str = "scripted"
    turns: list[list[Call]] = []
    script: Any = None
    requests: list[LlmRequest] = []

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        turn = len(self.requests) - 1
        calls: Sequence[Call] = (self.script(turn, llm_request) if self.script is not None
                                 else self.turns[turn] if turn < len(self.turns) else [])
        parts = [types.Part(function_call=types.FunctionCall(id=call_id, name=name, args=args))
                 for name, args, call_id in calls] or [types.Part(text="done")]
        yield LlmResponse(content=types.Content(role="model", parts=parts))

    def shown(self, turn: int = 0) -> str:
        """The function declarations the model was shown at ``turn``, as JSON text."""
        config = self.requests[turn].config
        tools = config.tools if config is not None else None
        return json.dumps([t.model_dump(mode="json", exclude_none=True) for t in tools or []], sort_keys=True)


def scripted(*turns: list[Call], script: Callable[[int, LlmRequest], list[Call]] | None = None) -> ScriptedLlm:
    return ScriptedLlm(turns=list(turns), script=script, requests=[])


async def run(agent: LlmAgent, text: str = "go") -> tuple[str, list[Any]]:
    """Run ``agent`` once in a fresh in-memory session: (the session id, every event)."""
    runner = InMemoryRunner(agent=agent, app_name="tests")
    session = await runner.session_service.create_session(app_name="tests", user_id="u")
    events = [e async for e in runner.run_async(user_id="u", session_id=session.id,
                                                new_message=types.Content(role="user", parts=[types.Part(text=text)]))]
    return session.id, events


def responses(events: list[Any]) -> list[tuple[str | None, str | None, Any]]:
    """(call id, tool name, response) of every function response the model was given."""
    found = []
    for event in events:
        for part in (event.content.parts or []) if event.content is not None else []:
            if part.function_response is not None:
                r = part.function_response
                found.append((r.id, r.name, r.response))
    return found


def last_response(request: LlmRequest) -> dict[str, Any]:
    """The last function response in what the model is shown (the result of its last call)."""
    for content in reversed(request.contents):
        for part in reversed(content.parts or []):
            if part.function_response is not None:
                return dict(part.function_response.response or {})
    return {}


def lookup(query: str) -> dict[str, Any]:
    """Look something up."""
    return {"found": query}


async def stock(item: str, tool_context: ToolContext) -> dict[str, Any]:
    """Count an item in stock (async, with ADK's tool context)."""
    return {"item": item, "count": 3, "call": tool_context.function_call_id}


def missing_order(order_id: str) -> dict[str, Any]:
    """Fetch an order that does not exist (ADK's failure convention)."""
    return {"error": f"no order {order_id}"}


def explode(order_id: str) -> dict[str, Any]:
    """A tool that raises."""
    raise RuntimeError(f"database down for {order_id}")


def refund(order_id: str, amount: int) -> dict[str, Any]:
    """Refund an order."""
    return {"refunded": amount}


def open_ticket(subject: str) -> dict[str, Any]:
    """Open a ticket a human answers later."""
    return {"status": "pending", "ticket": "T-1"}


def risky_transfer(amount: int, tool_context: ToolContext) -> dict[str, Any]:
    """Transfer money; asks for a human's confirmation above 100."""
    if amount > 100 and tool_context.tool_confirmation is None:
        tool_context.request_confirmation(hint="large transfer")
        return {"status": "awaiting confirmation"}
    return {"transferred": amount}
