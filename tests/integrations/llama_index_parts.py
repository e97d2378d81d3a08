"""The LlamaIndex side of ``test_llama_index.py``: tools, agents on LlamaIndex's own offline model, a scripted planner.

A module of its own so that LlamaIndex is imported only by a test that runs (see ``tests/optional.py``),
and without postponed annotations: LlamaIndex reads a tool's ``Context`` parameter from its
annotation as written (``pay`` below).
The model is LlamaIndex's ``MockFunctionCallingLLM`` with a response generator: each turn is the
tool calls the model makes, and it records the tool definitions it was shown (``to_openai_tool``,
what a function-calling LLM sends).
"""

import ast
import json
from collections.abc import Sequence
from typing import Any

from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool
from llama_index.core.workflow import Context, HumanResponseEvent, InputRequiredEvent

from telemetry.guards import JSONValue
from telemetry.integrations import llama_index as otel_llama_index

from .integration_support import KEY

__all__ = ["AgentWorkflow", "FunctionAgent", "FunctionTool", "HumanResponseEvent", "InputRequiredEvent", "otel_llama_index"]

Call = tuple[str, str, dict[str, Any]]  # (call id, tool name, arguments)


class Script:
    """A model that answers turn i with ``turns[i]``'s tool calls, then ``done``; it keeps what it was shown."""

    def __init__(self, *turns: Sequence[Call]) -> None:
        self.turns = list(turns)
        self.shown: list[str] = []
        self.seen: list[Sequence[ChatMessage]] = []

    def __call__(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        tools = kwargs.get("tools") or []
        self.shown.append(json.dumps([t.metadata.to_openai_tool() for t in tools], sort_keys=True))
        self.seen.append(list(messages))
        if self.turns:
            blocks = [ToolCallBlock(tool_call_id=i, tool_name=n, tool_kwargs=a) for i, n, a in self.turns.pop(0)]
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks)
        return ChatMessage(role=MessageRole.ASSISTANT, content="done")

    def llm(self) -> MockFunctionCallingLLM:
        return MockFunctionCallingLLM(response_generator=self)


def agent(name: str, script: Script, tools: list[Any], **kwargs: Any) -> FunctionAgent:
    return FunctionAgent(name=name, description=f"the {name}", tools=tools, llm=script.llm(), streaming=False, **kwargs)


def guard_tools(store: Any) -> list[FunctionTool]:
    """The store's read_state and write_state as LlamaIndex tools.

    LlamaIndex builds a tool's schema from the annotations as written; the guards' module
    postpones its annotations, so the schema resolves ``JSONValue`` from that module (what a
    user of the guards with LlamaIndex does too, see docs/integrations.md).
    """
    tools = [FunctionTool.from_defaults(store.read_state), FunctionTool.from_defaults(store.write_state)]
    for tool in tools:
        schema = tool.metadata.fn_schema
        assert schema is not None
        schema.model_rebuild(_types_namespace={"JSONValue": JSONValue})
    return tools


def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


async def notify(message: str, urgent: bool = False) -> str:
    """Send a notification."""
    return "sent"


async def pay(ctx: Context, amount: int) -> str:
    """Pay an amount once a human approves (the tool waits for the answer, LlamaIndex's human in the loop)."""
    question = InputRequiredEvent(prefix=f"pay {amount}?")
    answer = await ctx.wait_for_event(HumanResponseEvent, waiter_id="pay", waiter_event=question)
    return "paid" if answer.response == "yes" else "refused"


def last_tool_result(messages: Sequence[ChatMessage]) -> Any:
    """The last tool message's content, read back from LlamaIndex's ``str(result)``."""
    content = next(m.content for m in reversed(messages) if m.role == MessageRole.TOOL)
    return ast.literal_eval(content or "None")


class Planner(Script):
    """Read, lose a race to a colleague, get refused, re-read, redo: the guarded recovery."""

    def __init__(self, store: Any) -> None:
        super().__init__()
        self.store = store
        self.n = 0

    def __call__(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.n += 1
        n = self.n
        if n in (1, 3):
            self.turns = [[(f"call-read-{n}", "read_state", {"key": KEY, "agent_id": "planner"})]]
        elif n in (2, 4):
            seen = last_tool_result(messages)
            if n == 2:  # a colleague writes between the planner's read and its write
                self.store.write_state(KEY, {"steps": ["draft", "colleague"]}, seen["version"], agent_id="colleague")
            args = {"key": KEY, "value": {"steps": [*seen["value"]["steps"], "planner"]},
                    "expected_version": seen["version"], "agent_id": "planner"}
            self.turns = [[(f"call-write-{n}", "write_state", args)]]
        return super().__call__(messages, **kwargs)
