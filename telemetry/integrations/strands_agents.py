"""Strands Agents: ``instrument(agent)`` records every ``@tool`` call of an agent, in place.

Install with ``pip install -e '/path/to/outcome-telemetry[strands-agents]'``. Example::

    from strands import Agent, tool
    from telemetry.integrations import strands_agents as otel_strands

    agent = Agent(name="planner", tools=[read_state, write_state, researcher.as_tool()])
    otel_strands.instrument(agent, kinds={"read_state": "read"})

What it does, per tool of the agent's registry (and of the agents behind its agent-tools):

- a ``@tool`` function (``DecoratedFunctionTool``) has its function instrumented with
  :func:`telemetry.instrument.instrument_with`, unless it already is; its tool spec (name,
  description, ``inputSchema``), its input validation and the injection of ``ToolContext`` and
  ``agent`` parameters are Strands' own, as they were;
- an agent used as a tool (``Agent.as_tool()``) is recorded as one call of kind ``delegate``
  whose span covers the inner agent's run; the inner agent's tools are instrumented too, and
  their calls carry the inner agent's name and their own call ids. An inner agent that fails
  (Strands answers an error result) is outcome ``tool_error``; one paused by an interrupt is
  ``approval_required``;
- each call runs with Strands' context: ``gen_ai.tool.call.id`` is the ``toolUseId``,
  ``gen_ai.conversation.id`` the agent's ``session_id`` (the session manager's, else the one
  Strands makes per agent), ``gen_ai.agent.id`` the agent's ``name``, unless the user set them
  with ``telemetry.agent()``/``telemetry.tool_call_id()``;
- a result ``{"status": "error", ...}`` (Strands' failure envelope) is outcome ``tool_error``
  by the built-in rules; an exception is transport ``error`` (Strands then turns it into an error
  result for the model, as it did); an ``InterruptException`` (``tool_context.interrupt(...)``,
  human-in-the-loop) is transport ``ok``, outcome ``approval_required``, and still pauses the agent;
- arguments Strands' validation refuses never reach the function: the call is recorded as
  transport ``ok``, outcome ``invalid_argument``, and Strands answers the model as it did.

Our span is opened inside Strands' ``execute_tool`` span (the tool runs with it current), so it
nests under it and forensics counts the call once. A call a ``BeforeToolCallEvent`` hook interrupts
(an approval asked before the tool runs) is recorded as ``approval_required`` too; one a hook
cancels never reaches the tool and is not recorded; a hook's ``retry`` runs the tool again,
recorded as one more call. MCP tools run on their server: instrument it there
(:mod:`telemetry.mcp`). :func:`uninstrument` puts every tool back.

The function is reached through ``DecoratedFunctionTool._tool_func`` and the ids through the
``tool_use`` and ``invocation_state`` Strands passes to ``stream``; the extra pins the versions
this was tested with.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from .._extras import require

require("strands", extra="strands-agents", needed_for="telemetry.integrations.strands_agents", name="strands-agents")

from strands import Agent
from strands.agent._agent_as_tool import _AgentAsTool
from strands.hooks import BeforeToolCallEvent
from strands.interrupt import InterruptException
from strands.tools.decorator import DecoratedFunctionTool
from strands.types._events import ToolInterruptEvent, ToolResultEvent
from typing_extensions import Unpack

from .. import conventions as c
from ..exceptions import ConfigurationError
from ..instrument import framework_context, instrument_with
from ..runtime import _containment as _safe
from ._common import Choices, Selection, is_instrumented
from ._plumbing import passed_through, record_refused, replace_attribute, restore_attributes, spec_of, was_replaced

__all__ = ["DEFAULT_EXCEPTIONS", "AgentToolFailed", "AgentToolInterrupted", "instrument", "uninstrument"]

T = TypeVar("T")

DEFAULT_EXCEPTIONS: Mapping[type[BaseException], str] = {InterruptException: c.OUTCOME_APPROVAL_REQUIRED}
"""Strands' interrupt (the tool waits for a human) is a pause, not a failure."""

_ERROR_STATUS = "error"  # a ToolResult's status when the call failed
_RECORDED = "__outcome_telemetry_delegate__"  # on an agent-as-tool: the function its span records


class AgentToolFailed(Exception):
    """The ``error.type`` of an agent-as-tool call whose inner agent Strands reported as failed.

    Never raised into Strands: the error result reaches the outer agent as it was.
    """


class AgentToolInterrupted(Exception):
    """The ``error.type`` of an agent-as-tool call whose inner agent paused for a human (an interrupt)."""


def _ids(invocation_state: Any, tool_use: Any) -> tuple[str | None, str | None, str | None]:
    """(agent name, session id, toolUseId) of a call, from what Strands hands ``stream``."""
    try:
        agent = invocation_state.get("agent") if isinstance(invocation_state, Mapping) else None
        call_id = tool_use.get("toolUseId") if isinstance(tool_use, Mapping) else None
        return getattr(agent, "name", None), getattr(agent, "session_id", None), call_id
    except Exception as exc:  # another Strands version: the call runs all the same, without the ids
        _safe.report(c.STAGE_SPAN, "reading Strands' tool call ids", exc)
        return None, None, None


class _Scope:
    """:func:`framework_context` held open across an async generator's iterations.

    Strands iterates a tool's ``stream`` in one task; should the generator be closed from another
    context (an abandoned stream finalised later), leaving the block is reported, never raised.
    """

    def __init__(self, invocation_state: Any, tool_use: Any) -> None:
        self._block = framework_context(*_ids(invocation_state, tool_use))

    def __enter__(self) -> None:
        self._block.__enter__()

    def __exit__(self, *exc: object) -> None:
        try:
            self._block.__exit__(None, None, None)
        except ValueError as problem:  # the context changed under the generator
            _safe.report(c.STAGE_SPAN, "leaving a Strands tool call's context", problem)


def _function_tool(tool: DecoratedFunctionTool[Any, Any], selection: Selection) -> None:
    """Instrument a ``@tool``'s function; run its ``stream`` with the ids; record refused input."""
    name = tool.tool_name
    function = selection.instrument(name, tool._tool_func)
    if function is not tool._tool_func:
        replace_attribute(tool, "_tool_func", function)
    stream = tool.stream

    @functools.wraps(stream)
    async def stream_with_context(tool_use: Any, invocation_state: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        scope = _Scope(invocation_state, tool_use)
        scope.__enter__()
        inside = True
        try:
            async for event in stream(tool_use, invocation_state, **kwargs):
                if inside and isinstance(event, (ToolResultEvent, ToolInterruptEvent)):
                    # Strands' last event: Strands may stop iterating once it has it, so the
                    # context is left here, in the context it was entered in.
                    if isinstance(event, ToolResultEvent) and event.exception is not None:
                        _refused(tool, event.exception)
                    inside = False
                    scope.__exit__()
                yield event
        finally:
            if inside:
                scope.__exit__()

    replace_attribute(tool, "stream", stream_with_context)


def _refused(tool: DecoratedFunctionTool[Any, Any], exc: BaseException) -> None:
    """A call whose arguments Strands refused before the function ran (its ``validate_input``)."""
    try:
        function = tool._tool_func
        spec = spec_of(function)
        if spec is not None and not passed_through(exc, function):
            record_refused(spec, exc, c.OUTCOME_INVALID_ARGUMENT)
    except Exception as problem:  # the error result reaches Strands all the same
        _safe.report(c.STAGE_SPAN, "recording a call Strands refused", problem)


def _agent_tool(tool: _AgentAsTool, selection: Selection) -> None:
    """Record an agent-as-tool call as a ``delegate`` call covering the inner agent's run.

    The recorded function passes the inner agent's events on, holding back Strands' last one (the
    result, or the interrupt): the span then ends when the inner run has, with that event's
    outcome, and the event is passed on after it.
    """
    name = tool.tool_name
    stream = tool.stream

    async def delegate(tool_use: Any, invocation_state: Any, last: list[Any], **kwargs: Any) -> AsyncGenerator[Any, None]:
        reason: Exception | None = None
        async for event in stream(tool_use, invocation_state, **kwargs):
            if isinstance(event, ToolInterruptEvent):
                last.append(event)
                reason = AgentToolInterrupted(name)
            elif isinstance(event, ToolResultEvent):
                last.append(event)
                reason = AgentToolFailed(name) if _failed(event) else None
            else:
                yield event
        if reason is not None:
            raise reason

    options = selection.options(name, kind=c.KIND_DELEGATE)
    exceptions = {**(options.exceptions or {}), AgentToolFailed: c.OUTCOME_TOOL_ERROR,
                  AgentToolInterrupted: c.OUTCOME_APPROVAL_REQUIRED}
    recorded = instrument_with(delegate, options.replace(exceptions=exceptions))

    async def stream_with_context(tool_use: Any, invocation_state: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        last: list[Any] = []
        with _Scope(invocation_state, tool_use):
            try:
                async for event in recorded(tool_use, invocation_state, last, **kwargs):
                    yield event
            except (AgentToolFailed, AgentToolInterrupted):
                pass  # recorded; Strands gets its own last event, below
        for event in last:
            yield event

    functools.update_wrapper(stream_with_context, stream)
    replace_attribute(tool, "stream", stream_with_context)
    replace_attribute(tool, _RECORDED, recorded)


def _spec_of_tool(tool: Any) -> Any:
    if isinstance(tool, DecoratedFunctionTool):
        return spec_of(tool._tool_func)
    return spec_of(vars(tool).get(_RECORDED)) if hasattr(tool, "__dict__") else None


def _record_hook_interrupts(agent: Agent) -> None:
    """A ``BeforeToolCallEvent`` hook that interrupts (an approval asked before the tool runs)
    pauses a call that never reaches the tool: record it as ``approval_required``."""
    hooks = agent.hooks
    if was_replaced(hooks, "invoke_callbacks_async"):
        return
    invoke = hooks.invoke_callbacks_async

    @functools.wraps(invoke)
    async def invoke_callbacks_async(event: Any) -> Any:
        found = await invoke(event)
        if isinstance(event, BeforeToolCallEvent) and found[1]:
            try:
                spec = _spec_of_tool(event.selected_tool)
                if spec is not None:
                    with framework_context(*_ids({"agent": event.agent}, event.tool_use)):
                        record_refused(spec, InterruptException(found[1][0]), c.OUTCOME_APPROVAL_REQUIRED)
            except Exception as problem:  # the pause reaches Strands all the same
                _safe.report(c.STAGE_SPAN, "recording a Strands tool call a hook paused", problem)
        return found

    replace_attribute(hooks, "invoke_callbacks_async", invoke_callbacks_async)


def _agents_of(target: Any, found: list[Agent]) -> list[Agent]:
    """``target`` when it is an agent, and the agents behind its agent-tools, each once."""
    if isinstance(target, Agent) and not any(a is target for a in found):
        found.append(target)
    for tool in _tools_of(target):
        if isinstance(tool, _AgentAsTool) and not any(a is tool.agent for a in found):
            _agents_of(tool.agent, found)
    return found


def _failed(event: Any) -> bool:
    result = event.tool_result
    return isinstance(result, Mapping) and result.get("status") == _ERROR_STATUS


def _tools_of(target: Any) -> Iterator[Any]:
    if isinstance(target, Agent):
        yield from list(target.tool_registry.registry.values())
    elif isinstance(target, (DecoratedFunctionTool, _AgentAsTool)):
        yield target
    elif isinstance(target, Iterable) and not isinstance(target, (str, bytes, Mapping)):
        for tool in target:
            if not isinstance(tool, (DecoratedFunctionTool, _AgentAsTool)):
                raise ConfigurationError(
                    f"strands_agents.instrument: {tool!r} is not a Strands @tool or agent-as-tool"
                )
            yield tool
    else:
        raise ConfigurationError(
            f"telemetry.integrations.strands_agents.instrument needs a strands Agent, a @tool or a list of them, "
            f"got {target!r}"
        )


def _walk(target: Any, found: list[Any]) -> Iterator[Any]:
    """Each tool under ``target`` once, the inner agents' of agent-tools included."""
    for tool in _tools_of(target):
        if any(t is tool for t in found):
            continue
        found.append(tool)
        yield tool
        if isinstance(tool, _AgentAsTool):
            yield from _walk(tool.agent, found)


def instrument(target: T, **choices: Unpack[Choices]) -> T:
    """Instrument the tools of ``target`` (an ``Agent``, a ``@tool``, or a list of them) in place.

    Parameters:
        kinds: tool name to ``read``/``write``/``send``/``delegate`` (default ``write``; an
            agent used as a tool is ``delegate``).
        readbacks: tool name to a ``readback(call, result)`` callable for writes.
        exceptions: exception class to outcome code, on top of :data:`DEFAULT_EXCEPTIONS`.

    Returns ``target``. Safe to call again: nothing is instrumented twice. Tools that are
    neither (a module tool with a ``TOOL_SPEC``, an MCP tool) are left as they are. A name in
    ``kinds``/``readbacks`` that is no tool is a ``ConfigurationError``.
    """
    selection = Selection("strands_agents.instrument", choices, defaults=DEFAULT_EXCEPTIONS)
    names: list[str] = []
    for tool in _walk(target, []):
        names.append(tool.tool_name)
        if was_replaced(tool, "stream"):  # instrumented before
            if isinstance(tool, DecoratedFunctionTool) and is_instrumented(tool._tool_func):
                selection.seen.add(tool.tool_name)
            continue
        if isinstance(tool, DecoratedFunctionTool):
            _function_tool(tool, selection)
        elif isinstance(tool, _AgentAsTool):
            _agent_tool(tool, selection)
    for agent in _agents_of(target, []):
        _record_hook_interrupts(agent)
    selection.check_all_named(names)
    return target


def uninstrument(target: T) -> T:
    """Undo :func:`instrument` on the same target: every tool as it was. Returns ``target``.

    Functions the user decorated with ``@instrument_tool`` themselves stay decorated.
    """
    for tool in _walk(target, []):
        restore_attributes(tool)
    for agent in _agents_of(target, []):
        restore_attributes(agent.hooks)
    return target
