"""A CrewAI LLM that answers from a script: no network, no model, the framework's real loop."""

from __future__ import annotations

import json
from typing import Any

from crewai.llms.base_llm import BaseLLM


class ScriptedLLM(BaseLLM):
    """Replies in order; ``native=True`` makes CrewAI use its function-calling path."""

    def __init__(self, replies: list[Any], *, native: bool = False) -> None:
        super().__init__(model="scripted")
        self._replies = list(replies)
        self._native = native

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, available_functions: Any = None,
             from_task: Any = None, from_agent: Any = None, response_model: Any = None) -> Any:
        if not self._replies:
            raise AssertionError("the crew asked the scripted LLM for more replies than the script has")
        return self._replies.pop(0)

    def supports_function_calling(self) -> bool:
        return self._native


def react_call(tool: str, **arguments: Any) -> str:
    """A ReAct-style reply asking for one tool call."""
    return f"Thought: I should use {tool}\nAction: {tool}\nAction Input: {json.dumps(arguments)}"


def native_call(call_id: str, tool: str, **arguments: Any) -> list[dict[str, Any]]:
    """An OpenAI-style tool-call reply."""
    return [{"id": call_id, "type": "function", "function": {"name": tool, "arguments": json.dumps(arguments)}}]


FINAL = "Thought: done\nFinal Answer: the team was notified"
