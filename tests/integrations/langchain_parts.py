"""The LangChain side of ``test_langchain.py``: its tools, a scripted chat model and the scripts.

A module of its own so that LangChain is imported only by a test that runs (see ``tests/optional.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, StructuredTool, ToolException, tool
from langchain_core.utils.function_calling import convert_to_openai_tool

from telemetry import instrument_tool
from telemetry.integrations import langchain as otel_langchain
from telemetry.testing import Capture

from .integration_support import KEY, state_store

__all__ = [
    "AIMessage", "BaseMessage", "FakeMessagesListChatModel", "StructuredTool", "ToolException", "ToolMessage",
    "already", "convert_to_openai_tool", "lookup", "otel_langchain", "planner_script", "refund", "ScriptedChat", "shown", "tools_of",
]


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


@tool
async def refund(order_id: int, amount: float) -> str:
    """Refund part of an order; refuses amounts over the order total."""
    if amount > 100:
        raise ToolException(f"order {order_id} totals 100; {amount} is more than that")
    return "refunded"


refund.handle_tool_error = True  # LangChain turns the ToolException into an error ToolMessage


@instrument_tool(kind="read")
def already(x: int) -> int:
    """A function the user decorated themselves."""
    return x


class Unit(BaseTool):
    """A BaseTool subclass with its own _run."""

    name: str = "unit"
    description: str = "Convert a unit."

    def _run(self, value: str) -> str:
        return value.upper()


def tools_of(tmp_path: Path, capture: Capture) -> tuple[list[BaseTool], Any]:
    store = state_store(tmp_path, capture)
    read_state = StructuredTool.from_function(store.read_state, metadata={"readOnlyHint": True})
    write_state = StructuredTool.from_function(store.write_state)
    lookup_copy = StructuredTool.from_function(lookup.func, name="lookup", metadata={"readOnlyHint": True})
    return [lookup_copy, refund, StructuredTool.from_function(already), Unit(), read_state, write_state], store


def shown(tools: list[BaseTool]) -> str:
    return json.dumps([convert_to_openai_tool(t) for t in tools], sort_keys=True)


class ScriptedChat(BaseChatModel):
    """A chat model whose replies a test function computes from the conversation so far."""

    script: Any
    shown: list[Any] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.shown.append([convert_to_openai_tool(t) for t in tools])
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.script(messages))])


def _last_tool_result(messages: list[BaseMessage]) -> dict[str, Any]:
    found = [m for m in messages if isinstance(m, ToolMessage)]
    if not found:
        return {}
    content = found[-1].content
    return json.loads(content) if isinstance(content, str) else {}


def planner_script(store: Any) -> Any:
    turn = {"n": 0}

    def script(messages: list[BaseMessage]) -> AIMessage:
        turn["n"] += 1
        n, seen = turn["n"], _last_tool_result(messages)
        if n in (1, 3):
            return AIMessage(content="", tool_calls=[{"name": "read_state", "args": {"key": KEY, "agent_id": "planner"}, "id": f"read-{n}"}])
        if n == 2:
            store.write_state(KEY, {"steps": ["draft", "colleague"]}, seen["version"], agent_id="colleague")
        if n in (2, 4):
            args = {"key": KEY, "value": {"steps": seen["value"]["steps"] + ["planner"]}, "expected_version": seen["version"], "agent_id": "planner"}
            return AIMessage(content="", tool_calls=[{"name": "write_state", "args": args, "id": f"write-{n}"}])
        return AIMessage(content="done")

    return script
