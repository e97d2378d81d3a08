"""OpenAI Agents SDK: ``instrument(agent)`` records every function tool of an agent, in place.

Install with ``pip install -e '/path/to/outcome-telemetry[openai-agents]'``. Example::

    from agents import Agent, function_tool
    from telemetry.integrations import openai_agents as otel_agents

    agent = Agent(name="planner", tools=[function_tool(store.read_state), function_tool(store.write_state)])
    otel_agents.instrument(agent)

What it does, per ``FunctionTool`` of the agent (and of the agents it hands off to):

- the Python function behind the tool is instrumented with
  :func:`telemetry.instrument.instrument_with`, unless it already is, and the tool's invoker is
  rebuilt around it with ``function_tool`` (so argument validation, timeouts, approvals and the
  tool's ``failure_error_function`` behave as before). The tool object keeps its name,
  description, ``params_json_schema`` and ``strict_json_schema``: the model is shown the same;
- each call runs with the framework's context: ``gen_ai.tool.call.id`` is the model's call id,
  ``gen_ai.conversation.id`` the run's ``group_id`` (``RunConfig(group_id=...)``), else one id
  per run, and ``gen_ai.agent.id`` the agent's ``name``, unless the user set them with
  ``telemetry.agent()``/``telemetry.tool_call_id()``.

The SDK turns a tool's exception into a message for the model (its ``failure_error_function``);
our span, inside that, still records the exception as it was raised. MCP tools carry the
server's annotations (``mcp_annotations``): their read/write hints are used, though the call
itself runs on the MCP server (instrument it there with :mod:`telemetry.mcp`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from typing_extensions import Unpack

from agents import Agent, FunctionTool, function_tool
from agents.tracing import get_current_trace

from ..exceptions import ConfigurationError
from ..instrument import framework_context
from ._common import Choices, Selection, hints_from, is_instrumented, run_id_for

__all__ = ["DEFAULT_EXCEPTIONS", "instrument"]

A = TypeVar("A", bound=Agent[Any])

DEFAULT_EXCEPTIONS: Mapping[type[BaseException], str] = {}
"""The SDK has no exception meaning "the model should retry"; map your own with ``exceptions=``."""

_BIND = "__agents_bind_function_tool__"


def _conversation_of(ctx: Any) -> str | None:
    group = getattr(getattr(ctx, "run_config", None), "group_id", None)
    if isinstance(group, str) and group:
        return group
    trace = get_current_trace()
    trace_id = getattr(trace, "trace_id", None)
    if isinstance(trace_id, str) and trace_id.startswith("trace_") and trace_id != "trace_no_op":
        return trace_id
    # One run shares one Usage object across every tool call: one id per run.
    return run_id_for(getattr(ctx, "usage", None))


class _ContextInvoker:
    """The tool's own invoker, called with the run's context for the tool span."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def __call__(self, ctx: Any, input: str) -> Any:
        agent = getattr(ctx, "agent", None)
        with framework_context(getattr(agent, "name", None), _conversation_of(ctx), getattr(ctx, "tool_call_id", None)):
            return await self._inner(ctx, input)

    def __getattr__(self, name: str) -> Any:  # the SDK's markers and prepare_arguments
        return getattr(self._inner, name)

    def __agents_bind_function_tool__(self, tool: FunctionTool) -> _ContextInvoker:
        """Copies of the tool (``dataclasses.replace``, ``agent.clone``) keep the context."""
        bind = getattr(self._inner, _BIND, None)
        return _ContextInvoker(bind(tool)) if callable(bind) else self


def _original(tool: FunctionTool) -> Any:
    try:
        return tool.__wrapped__
    except AttributeError:
        return None


def _instrument_tool(tool: FunctionTool, selection: Selection) -> None:
    invoker = tool.on_invoke_tool
    if isinstance(invoker, _ContextInvoker):
        selection.seen.add(tool.name)
        return
    original = _original(tool)
    if original is not None and not is_instrumented(original):
        hints = hints_from(tool.mcp_annotations)
        rebuilt = function_tool(
            selection.instrument(tool.name, original, hints),
            name_override=tool.name,
            description_override=tool.description,
            strict_mode=tool.strict_json_schema,
        )
        invoker = rebuilt.on_invoke_tool
    else:
        selection.seen.add(tool.name)
    wrapped = _ContextInvoker(invoker)
    tool.on_invoke_tool = wrapped.__agents_bind_function_tool__(tool)


def _agents(agent: Agent[Any], found: list[Agent[Any]]) -> None:
    if any(a is agent for a in found):
        return
    found.append(agent)
    for handoff in agent.handoffs:
        if isinstance(handoff, Agent):
            _agents(handoff, found)


def instrument(
    agent: A,
    **choices: Unpack[Choices],
) -> A:
    """Instrument every ``FunctionTool`` of ``agent`` (and its hand-off agents) in place.

    Parameters:
        kinds: tool name to ``read``/``write``/``send``/``delegate`` (default: the tool's MCP
            annotations, else ``write``).
        readbacks: tool name to a ``readback(call, result)`` callable for writes.
        exceptions: exception class to outcome code (none by default).

    Returns ``agent``. Safe to call again: nothing is instrumented twice. Tools created from a
    callable ``function_tool`` cannot unwrap (no ``__wrapped__``) get the context but no new span.
    """
    if not isinstance(agent, Agent):
        raise ConfigurationError(
            f"telemetry.integrations.openai_agents.instrument needs an agents.Agent, got {agent!r}"
        )
    selection = Selection("openai_agents.instrument", choices, defaults=DEFAULT_EXCEPTIONS)
    names: list[str] = []
    agents: list[Agent[Any]] = []
    _agents(agent, agents)
    for each in agents:
        for tool in each.tools:
            if isinstance(tool, FunctionTool):
                _instrument_tool(tool, selection)
                names.append(tool.name)
    selection.check_all_named(names)
    return agent
