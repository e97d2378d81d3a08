"""The OpenAI Agents SDK side of ``test_openai_agents.py``: a scripted Model, its replies and the tools.

A module of its own so that the SDK is imported only by a test that runs (see ``tests/optional.py``).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from agents import Agent, ModelResponse, RunConfig, Runner, Usage, function_tool
from agents.models.interface import Model
from agents.models.openai_responses import Converter
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from telemetry import instrument_tool
from telemetry.integrations import openai_agents as otel_agents
from telemetry.testing import Capture

from .integration_support import state_store

__all__ = ["NO_TRACING", "RunConfig", "Runner", "ScriptedModel", "agent_of", "call", "otel_agents", "tool_outputs", "returned", "text"]

NO_TRACING = RunConfig(tracing_disabled=True)


def call(name: str, args: dict[str, Any], call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", name=name, arguments=json.dumps(args), call_id=call_id, id=f"fc_{call_id}")


def text(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        type="message", id="msg_1", role="assistant", status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


class ScriptedModel(Model):
    """A Model whose replies a function computes from the input items; it records the tools it was shown."""

    def __init__(self, script: Any) -> None:
        self.script = script
        self.shown: list[str] = []

    async def get_response(self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, output_schema: Any,
                           handoffs: Any, tracing: Any, **kwargs: Any) -> ModelResponse:
        self.shown.append(json.dumps(Converter.convert_tools(tools, handoffs).tools, sort_keys=True, default=repr))
        items = input if isinstance(input, list) else []
        return ModelResponse(output=self.script(items), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - the tests run non-streamed
        raise NotImplementedError


def returned(items: list[Any]) -> bool:
    return any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items)


def tool_outputs(items: list[Any]) -> list[dict[str, Any]]:
    """The tool outputs so far (the SDK sends a returned dict as its str())."""
    return [ast.literal_eval(i["output"]) for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]


def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


@instrument_tool(kind="read")
def already(x: int) -> int:
    """A function the user decorated themselves."""
    return x


def charge(amount: float) -> str:
    """Charge a card."""
    raise ValueError("card declined")


def agent_of(tmp_path: Path, capture: Capture, model: Model) -> tuple[Agent[Any], Any]:
    store = state_store(tmp_path, capture)
    tools = [function_tool(f) for f in (lookup, already, charge, store.read_state)]
    tools.append(function_tool(store.write_state, strict_mode=False))  # its value is any JSON: not a strict schema
    return Agent(name="planner", instructions="plan", model=model, tools=tools), store
