"""OpenAI Agents SDK: ``instrument(agent)`` records every function tool of an agent, in place.

Install with ``pip install -e '/path/to/outcome-telemetry[openai-agents]'``. Example::

    from agents import Agent, function_tool
    from telemetry.integrations import openai_agents as otel_agents

    agent = Agent(name="planner", tools=[function_tool(store.read_state), function_tool(store.write_state)])
    otel_agents.instrument(agent)

What it does, per ``FunctionTool`` of the agent (and of the agents it hands off to, and of the
agents behind its ``Agent.as_tool()`` tools):

- the Python function behind a ``function_tool`` is instrumented with
  :func:`telemetry.instrument.instrument_with`, unless it already is, where the SDK's own invoker
  calls it. Nothing else of the tool changes: name, description, ``params_json_schema``,
  ``strict_json_schema``, ``output_type`` validation, timeouts, approvals, guardrails and the
  tool's ``failure_error_function`` are the SDK's, as they were;
- an ``Agent.as_tool()`` tool is recorded as one call of kind ``delegate`` (its span covers the
  inner agent's run), and the inner agent's tools are instrumented too; their calls carry the
  inner agent's name and their own call ids;
- each call runs with the framework's context: ``gen_ai.tool.call.id`` is the model's call id,
  ``gen_ai.conversation.id`` the run's ``group_id`` (``RunConfig(group_id=...)``), else the SDK
  trace id, else one id per run, and ``gen_ai.agent.id`` the agent's ``name``, unless the user set
  them with ``telemetry.agent()``/``telemetry.tool_call_id()``;
- arguments the SDK refuses (invalid JSON, a schema mismatch: ``ModelBehaviorError`` before the
  function runs) are recorded as transport ``ok``, outcome ``invalid_argument``; the SDK then tells
  the model, as it did.

The SDK turns a tool's exception into a message for the model (its ``failure_error_function``);
our span, inside that, still records the exception as it was raised. MCP tools carry the
server's annotations (``mcp_annotations``): their read/write hints are used, though the call
itself runs on the MCP server (instrument it there with :mod:`telemetry.mcp`).
:func:`uninstrument` puts every tool back.

The function is reached through the SDK's invoker (``_invoke_tool_impl`` and the ``the_func`` it
closes over), internals the extra's version pin covers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from .._extras import require

require("agents", extra="openai-agents", needed_for="telemetry.integrations.openai_agents")

from agents import Agent, FunctionTool
from agents.exceptions import ModelBehaviorError
from agents.tracing import get_current_trace
from typing_extensions import Unpack

from .. import conventions as c
from ..exceptions import ConfigurationError
from ..instrument import framework_context
from ._common import Choices, Selection, hints_from, run_id_for
from ._plumbing import passed_through, record_refused, replace_attribute, restore_attributes, spec_of

__all__ = ["DEFAULT_EXCEPTIONS", "instrument", "uninstrument"]

A = TypeVar("A", bound=Agent[Any])

DEFAULT_EXCEPTIONS: Mapping[type[BaseException], str] = {}
"""The SDK has no exception meaning "the model should retry"; map your own with ``exceptions=``."""

_FUNCTION = "the_func"  # what function_tool's invoker closes over: the user's function


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


def _cell(impl: Any) -> Any:
    """The closure cell holding the user's function in ``function_tool``'s invoker, or None."""
    code = getattr(impl, "__code__", None)
    closure = getattr(impl, "__closure__", None)
    if code is None or not closure or _FUNCTION not in code.co_freevars:
        return None
    return closure[code.co_freevars.index(_FUNCTION)]


class _Invoke:
    """The SDK's invocation of one tool, run with the call's context; refused arguments recorded.

    It takes the place of the invoker's ``_invoke_tool_impl`` (inside the SDK's failure handling,
    which still turns errors into messages), and answers for it otherwise: the SDK reads the
    prepared-arguments hook and the wrapped-callable marker from it.
    """

    def __init__(self, inner: Any, function: Any, cell: Any = None, original: Any = None) -> None:
        self._inner = inner
        self._function = function  # the instrumented callable whose span a call gets
        self._cell = cell
        self._original = original

    async def __call__(self, ctx: Any, input: str) -> Any:
        agent = getattr(ctx, "agent", None)
        with framework_context(getattr(agent, "name", None), _conversation_of(ctx), getattr(ctx, "tool_call_id", None)):
            try:
                return await self._inner(ctx, input)
            except ModelBehaviorError as exc:
                spec = spec_of(self._function)
                if spec is not None and not passed_through(exc, self._function):
                    record_refused(spec, exc, c.OUTCOME_INVALID_ARGUMENT)
                raise

    def __getattr__(self, name: str) -> Any:  # __agents_prepare_arguments__, the wrapped-callable marker
        if name.startswith("_") and name in ("_inner", "_function", "_cell", "_original"):
            raise AttributeError(name)
        return getattr(self._inner, name)

    def restore(self) -> None:
        if self._cell is not None:
            self._cell.cell_contents = self._original


def _instrument_tool(tool: FunctionTool, selection: Selection, agents: list[Agent[Any]]) -> None:
    invoker = tool.on_invoke_tool
    impl = getattr(invoker, "_invoke_tool_impl", None)
    if impl is None:  # not made by function_tool or as_tool: nothing to reach
        selection.seen.add(tool.name)
        return
    if isinstance(impl, _Invoke):
        selection.seen.add(tool.name)
    else:
        hints = hints_from(tool.mcp_annotations)
        cell = _cell(impl)
        if cell is not None:
            original = cell.cell_contents
            function = selection.instrument(tool.name, original, hints)
            cell.cell_contents = function
            wrapper = _Invoke(impl, function, cell, original)
        elif getattr(tool, "_is_agent_tool", False):
            function = selection.instrument(tool.name, impl, hints, kind=c.KIND_DELEGATE)
            wrapper = _Invoke(function, function)
        else:
            selection.seen.add(tool.name)
            wrapper = _Invoke(impl, None)
        replace_attribute(invoker, "_invoke_tool_impl", wrapper)
    inner = getattr(tool, "_agent_instance", None)
    if isinstance(inner, Agent):
        _agents(inner, agents)


def _agents(agent: Agent[Any], found: list[Agent[Any]]) -> None:
    if any(a is agent for a in found):
        return
    found.append(agent)
    for handoff in agent.handoffs:
        if isinstance(handoff, Agent):
            _agents(handoff, found)


def _function_tools(agent: Agent[Any]) -> Iterator[FunctionTool]:
    for tool in agent.tools:
        if isinstance(tool, FunctionTool):
            yield tool


def instrument(
    agent: A,
    **choices: Unpack[Choices],
) -> A:
    """Instrument every ``FunctionTool`` of ``agent`` (its hand-off and agent-tool agents too) in place.

    Parameters:
        kinds: tool name to ``read``/``write``/``send``/``delegate`` (default: the tool's MCP
            annotations, else ``write``; an ``Agent.as_tool()`` tool is ``delegate``).
        readbacks: tool name to a ``readback(call, result)`` callable for writes.
        exceptions: exception class to outcome code (none by default).

    Returns ``agent``. Safe to call again: nothing is instrumented twice. Tools built by hand
    (a ``FunctionTool`` with an invoker of your own) get the context but no new span.
    """
    if not isinstance(agent, Agent):
        raise ConfigurationError(
            f"telemetry.integrations.openai_agents.instrument needs an agents.Agent, got {agent!r}"
        )
    selection = Selection("openai_agents.instrument", choices, defaults=DEFAULT_EXCEPTIONS)
    names: list[str] = []
    agents: list[Agent[Any]] = []
    _agents(agent, agents)
    for each in agents:  # grows while it runs: agent-tools add their agents
        for tool in _function_tools(each):
            _instrument_tool(tool, selection, agents)
            names.append(tool.name)
    selection.check_all_named(names)
    return agent


def uninstrument(agent: A) -> A:
    """Undo :func:`instrument`: every tool's invoker and function back as they were. Returns ``agent``."""
    if not isinstance(agent, Agent):
        raise ConfigurationError(
            f"telemetry.integrations.openai_agents.uninstrument needs an agents.Agent, got {agent!r}"
        )
    agents: list[Agent[Any]] = []
    _agents(agent, agents)
    for each in agents:
        for tool in _function_tools(each):
            invoker = tool.on_invoke_tool
            wrapper = getattr(invoker, "_invoke_tool_impl", None)
            if isinstance(wrapper, _Invoke):
                wrapper.restore()
                restore_attributes(invoker)
            inner = getattr(tool, "_agent_instance", None)
            if isinstance(inner, Agent):
                _agents(inner, agents)
    return agent
