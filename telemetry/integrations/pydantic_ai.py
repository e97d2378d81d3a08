"""pydantic-ai: ``instrument(agent)`` records every function tool of an agent, in place.

Install with ``pip install -e '/path/to/outcome-telemetry[pydantic-ai]'``. Example::

    from pydantic_ai import Agent
    from telemetry.integrations import pydantic_ai as otel_pydantic_ai

    agent = Agent("openai:gpt-5", name="planner", tools=[store.read_state, store.write_state])
    otel_pydantic_ai.instrument(agent, kinds={"lookup": "read"})

What it does, per function tool (the agent's own ``tools=``/``@agent.tool`` ones, and those of
every ``FunctionToolset`` among its toolsets, wrapped or combined ones included):

- the tool's function is instrumented with :func:`telemetry.instrument.instrument_with`, unless
  it already is (a function under ``@instrument_tool``, or the guards' tools); the schema,
  name, description and strictness the model is shown are not touched;
- each call runs with the framework's context: ``gen_ai.tool.call.id`` is the model's tool call
  id, ``gen_ai.conversation.id`` the run's ``conversation_id`` (pydantic-ai gives every run one),
  ``gen_ai.agent.id`` the agent's ``name``, unless the user set them with ``telemetry.agent()``
  or ``telemetry.tool_call_id()``;
- ``ModelRetry`` (the tool asking the model to try again) is transport ``ok`` with outcome
  ``retry_requested``, ``ToolFailed`` is ``tool_error``; both still propagate to pydantic-ai.

Read/write is inferred from MCP-style hints (``readOnlyHint`` ...) in a tool's ``metadata``;
``kinds={"name": "read"}`` says it explicitly. Toolsets that are not function toolsets (MCP
servers, external tools) run their tools elsewhere: instrument those where they run (for an MCP
server, with :mod:`telemetry.mcp`).

The per-call context goes in through the tool's function schema (pydantic-ai's internal
``FunctionSchema``), which is why the extra pins the versions it was tested with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from typing_extensions import Unpack

from pydantic_ai import Agent
from pydantic_ai._function_schema import FunctionSchema
from pydantic_ai.exceptions import ModelRetry, ToolFailed
from pydantic_ai.tools import RunContext, Tool
from pydantic_ai.toolsets import AbstractToolset, CombinedToolset, FunctionToolset, WrapperToolset

from .. import conventions as c
from ..exceptions import ConfigurationError
from ..instrument import framework_context
from ._common import Choices, Selection, hints_from

__all__ = ["DEFAULT_EXCEPTIONS", "instrument"]

A = TypeVar("A", bound=Agent[Any, Any])

DEFAULT_EXCEPTIONS: Mapping[type[BaseException], str] = {
    ModelRetry: c.OUTCOME_RETRY_REQUESTED,
    ToolFailed: c.OUTCOME_TOOL_ERROR,
}
"""pydantic-ai's exceptions that are a tool's answer to the model, not a failure to run."""


@dataclasses.dataclass(kw_only=True)
class _ContextSchema(FunctionSchema):
    """The tool's own function schema, calling with the run's context for the tool span."""

    async def call(self, args_dict: dict[str, Any], ctx: RunContext[Any]) -> Any:
        agent = getattr(ctx, "agent", None)
        with framework_context(
            getattr(agent, "name", None),
            getattr(ctx, "conversation_id", None) or getattr(ctx, "run_id", None),
            getattr(ctx, "tool_call_id", None),
        ):
            return await super().call(args_dict, ctx)


def _function_toolsets(toolset: AbstractToolset[Any], found: list[FunctionToolset[Any]]) -> None:
    if isinstance(toolset, FunctionToolset):
        if not any(t is toolset for t in found):
            found.append(toolset)
    elif isinstance(toolset, WrapperToolset):
        _function_toolsets(toolset.wrapped, found)
    elif isinstance(toolset, CombinedToolset):
        for inner in toolset.toolsets:
            _function_toolsets(inner, found)


def _instrument_tool(tool: Tool[Any], selection: Selection) -> None:
    schema = tool.function_schema
    function = selection.instrument(tool.name, schema.function, hints_from(getattr(tool, "metadata", None)))
    tool.function = function
    if isinstance(schema, _ContextSchema) and schema.function is function:
        return
    fields = {f.name: getattr(schema, f.name) for f in dataclasses.fields(schema) if f.init}
    fields["function"] = function
    tool.function_schema = _ContextSchema(**fields)


def instrument(
    agent: A,
    **choices: Unpack[Choices],
) -> A:
    """Instrument every function tool of ``agent`` in place and return ``agent``.

    Parameters:
        kinds: tool name to ``read``/``write``/``send``/``delegate`` (default: from the tool's
            MCP-style hints, else ``write``, as with ``@instrument_tool``).
        readbacks: tool name to a ``readback(call, result)`` callable for writes.
        exceptions: exception class to outcome code, on top of :data:`DEFAULT_EXCEPTIONS`.

    Safe to call again (after adding tools, say): nothing is instrumented twice. A name in
    ``kinds`` or ``readbacks`` that is no tool of the agent raises ``ConfigurationError``.
    """
    if not isinstance(agent, Agent):
        raise ConfigurationError(
            f"telemetry.integrations.pydantic_ai.instrument needs a pydantic_ai.Agent, got {agent!r}"
        )
    selection = Selection("pydantic_ai.instrument", choices, defaults=DEFAULT_EXCEPTIONS)
    toolsets: list[FunctionToolset[Any]] = []
    for toolset in agent.toolsets:
        _function_toolsets(toolset, toolsets)
    names: list[str] = []
    for toolset in toolsets:
        for tool in toolset.tools.values():
            _instrument_tool(tool, selection)
            names.append(tool.name)
    selection.check_all_named(names)
    return agent
