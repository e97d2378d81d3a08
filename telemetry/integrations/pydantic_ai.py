"""pydantic-ai: ``instrument(agent)`` records every function tool call of an agent, in place.

Install with ``pip install -e '/path/to/outcome-telemetry[pydantic-ai]'``. Example::

    from pydantic_ai import Agent
    from telemetry.integrations import pydantic_ai as otel_pydantic_ai

    agent = Agent("openai:gpt-5", name="planner", tools=[store.read_state, store.write_state])
    otel_pydantic_ai.instrument(agent, kinds={"lookup": "read"})

What it does:

- every function tool of the agent (``tools=``, ``@agent.tool``, the ``FunctionToolset``\\ s among
  its toolsets, wrapped, combined, prefixed or renamed ones included) has its function
  instrumented with :func:`telemetry.instrument.instrument_with` under the name the model calls
  it by (``inv_search`` for ``search`` in a toolset prefixed ``inv``), unless it already is; the
  schema, name, description and strictness the model is shown are not touched;
- a capability added to the agent sees every tool call of every run: function tools that
  appear only at run time (``run(toolsets=...)``, ``@agent.toolset``, ``agent.override(tools=...)``)
  are instrumented when first called, with the same options; and each call runs with the
  framework's context: ``gen_ai.tool.call.id`` is the model's tool call id,
  ``gen_ai.conversation.id`` the run's ``conversation_id``, ``gen_ai.agent.id`` the agent's
  ``name``, unless the user set them with ``telemetry.agent()``/``telemetry.tool_call_id()``. A
  tool that runs another agent gives the inner agent's calls their own ids;
- ``ModelRetry`` (the tool asking the model to try again) is transport ``ok`` with outcome
  ``retry_requested``, ``ToolFailed`` is ``tool_error``, ``CallDeferred`` ``deferred`` and
  ``ApprovalRequired`` ``approval_required``; all still propagate to pydantic-ai. A deferral raised
  before the tool runs (an ``approval_required()`` toolset) is recorded the same way;
- arguments that fail the tool's validation never reach the tool: the call is recorded as
  transport ``ok``, outcome ``invalid_argument``, and pydantic-ai asks the model again as usual.

Read/write is inferred from MCP-style hints (``readOnlyHint`` ...) in a tool's ``metadata``;
``kinds={"name": "read"}`` says it explicitly. Toolsets that are not function toolsets (MCP
servers, external tools) run their tools elsewhere: instrument those where they run (for an MCP
server, with :mod:`telemetry.mcp`). :func:`uninstrument` puts everything back.

The capability is added to the agent's root capability and the context read from pydantic-ai's
tool structures, internals that can move between releases: the extra pins the versions it was
tested with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from .._extras import require

require("pydantic_ai", extra="pydantic-ai", needed_for="telemetry.integrations.pydantic_ai")

from pydantic import ValidationError
from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability, CombinedCapability
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry, ToolFailed
from pydantic_ai.tools import Tool
from pydantic_ai.toolsets import (
    AbstractToolset,
    CombinedToolset,
    FunctionToolset,
    PrefixedToolset,
    RenamedToolset,
    WrapperToolset,
)
from typing_extensions import Unpack

from .. import conventions as c
from ..exceptions import ConfigurationError
from ..instrument import framework_context
from ..runtime import _containment as _safe
from ._common import Choices, Selection, hints_from
from ._plumbing import passed_through, record_refused, replace_attribute, restore_attributes, spec_of

__all__ = ["DEFAULT_EXCEPTIONS", "instrument", "uninstrument"]

A = TypeVar("A", bound="Agent[Any, Any] | AbstractToolset[Any]")

DEFAULT_EXCEPTIONS: Mapping[type[BaseException], str] = {
    ModelRetry: c.OUTCOME_RETRY_REQUESTED,
    ToolFailed: c.OUTCOME_TOOL_ERROR,
    CallDeferred: c.OUTCOME_DEFERRED,
    ApprovalRequired: c.OUTCOME_APPROVAL_REQUIRED,
}
"""pydantic-ai's exceptions that are a tool's answer (or a pause), not a failure to run."""

_PAUSES: Mapping[type[BaseException], str] = {
    ApprovalRequired: c.OUTCOME_APPROVAL_REQUIRED,
    CallDeferred: c.OUTCOME_DEFERRED,
}
_REFUSED_ARGUMENTS = (ValidationError, ModelRetry)


def _rename(prefix: Callable[[str], str], toolset: AbstractToolset[Any]) -> Callable[[str], str]:
    """How ``toolset`` changes the names of the tools below it, composed with what is above it."""
    if isinstance(toolset, PrefixedToolset):
        return lambda name: prefix(f"{toolset.prefix}_{name}")
    if isinstance(toolset, RenamedToolset):
        to_new = {old: new for new, old in toolset.name_map.items()}
        return lambda name: prefix(to_new.get(name, name))
    return prefix


def _function_tools(
    toolset: AbstractToolset[Any], named: Callable[[str], str], found: list[tuple[Tool[Any], str]]
) -> None:
    """Each function tool under ``toolset`` with the name the model calls it by."""
    if isinstance(toolset, FunctionToolset):
        for tool in toolset.tools.values():
            if not any(t is tool for t, _ in found):
                found.append((tool, named(tool.name)))
    elif isinstance(toolset, WrapperToolset):
        _function_tools(toolset.wrapped, _rename(named, toolset), found)
    elif isinstance(toolset, CombinedToolset):
        for inner in toolset.toolsets:
            _function_tools(inner, named, found)


def _instrument_tool(tool: Tool[Any], name: str, selection: Selection) -> None:
    """Instrument ``tool``'s function in place (the Tool and its schema, which pydantic-ai calls)."""
    schema = tool.function_schema
    function = selection.instrument(name, schema.function, hints_from(getattr(tool, "metadata", None)))
    if function is schema.function:
        return
    replace_attribute(tool, "function", function)
    replace_attribute(schema, "function", function)


def _leaf(ctx: Any, name: str) -> Any:
    """The function toolset's tool behind the call of ``name`` in this run step, or None."""
    manager = getattr(ctx, "tool_manager", None)
    tool = getattr(manager, "tools", {}).get(name) if manager is not None else None
    while tool is not None and hasattr(tool, "source_tool"):  # combined toolsets keep the tool they combine
        tool = tool.source_tool
    return tool if isinstance(getattr(tool, "toolset", None), FunctionToolset) else None


@dataclasses.dataclass
class _Telemetry(AbstractCapability[Any]):
    """Every tool call of the agent's runs: context, tools met at run time, refused calls."""

    selection: Selection = dataclasses.field(repr=False, compare=False)
    agent_name: str | None = None
    replaced_root: Any = dataclasses.field(default=None, repr=False, compare=False)
    instrumented: list[Any] = dataclasses.field(default_factory=list, repr=False, compare=False)

    def _context(self, ctx: Any, call: Any) -> Any:
        agent = getattr(ctx, "agent", None)
        return framework_context(
            getattr(agent, "name", None) or self.agent_name,
            getattr(ctx, "conversation_id", None) or getattr(ctx, "run_id", None),
            getattr(call, "tool_call_id", None) or getattr(ctx, "tool_call_id", None),
        )

    def _function(self, ctx: Any, call: Any) -> Any:
        """The instrumented function behind this call (instrumented now if met for the first time)."""
        try:
            leaf = _leaf(ctx, call.tool_name)
            if leaf is None:
                return None
            schema = leaf.call_func.__self__
            if spec_of(schema.function) is None:
                tool = leaf.toolset.tools.get(getattr(leaf, "original_name", None) or leaf.tool_def.name)
                if tool is None or tool.function_schema is not schema:
                    return None
                _instrument_tool(tool, call.tool_name, self.selection)
                self.instrumented.append(tool)
            return schema.function
        except Exception as exc:  # another pydantic-ai version: the call runs all the same, without a span
            _safe.report(c.STAGE_SPAN, "finding a pydantic-ai tool's function", exc)
            return None

    async def wrap_tool_validate(self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any) -> Any:
        try:
            return await handler(args)
        except _REFUSED_ARGUMENTS as exc:
            spec = spec_of(self._function(ctx, call))
            if spec is not None:
                with self._context(ctx, call):
                    record_refused(spec, exc, c.OUTCOME_INVALID_ARGUMENT)
            raise

    async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any) -> Any:
        function = self._function(ctx, call)
        with self._context(ctx, call):
            try:
                return await handler(args)
            except tuple(_PAUSES) as exc:
                spec = spec_of(function)
                if spec is not None and not passed_through(exc, function):
                    outcome = next(code for cls, code in _PAUSES.items() if isinstance(exc, cls))
                    record_refused(spec, exc, outcome)
                raise


def _capability_of(agent: Agent[Any, Any]) -> _Telemetry | None:
    root = getattr(agent, "_root_capability", None)
    for each in getattr(root, "capabilities", ()):
        if isinstance(each, _Telemetry):
            return each
    return None


def _attach(agent: Agent[Any, Any], selection: Selection) -> None:
    """Add the capability to the agent once (a second instrument() keeps the first one's options)."""
    if _capability_of(agent) is not None:
        return
    root = getattr(agent, "_root_capability", None)
    if not isinstance(root, CombinedCapability):
        raise ConfigurationError(
            "telemetry.integrations.pydantic_ai.instrument: this pydantic-ai version keeps no root capability "
            "on Agent; install the versions the [pydantic-ai] extra names"
        )
    name = agent.name if isinstance(agent.name, str) else None
    capability = _Telemetry(selection=selection, agent_name=name, replaced_root=root)
    agent._root_capability = CombinedCapability([root, capability])


def instrument(
    target: A,
    **choices: Unpack[Choices],
) -> A:
    """Instrument every function tool of ``target`` (an ``Agent`` or a toolset) in place; return it.

    Parameters:
        kinds: tool name (the one the model calls) to ``read``/``write``/``send``/``delegate``
            (default: from the tool's MCP-style hints, else ``write``, as with ``@instrument_tool``).
        readbacks: tool name to a ``readback(call, result)`` callable for writes.
        exceptions: exception class to outcome code, on top of :data:`DEFAULT_EXCEPTIONS`.

    An agent also gets the capability that records the context, the tools met only at run time
    and the calls refused before the tool ran. Give a toolset you pass at run time to
    ``instrument`` first when its tools need ``kinds``/``readbacks``. Safe to call again: nothing
    is instrumented twice. A name in ``kinds`` or ``readbacks`` that is no tool raises
    ``ConfigurationError``.
    """
    if isinstance(target, Agent):
        toolsets: list[AbstractToolset[Any]] = list(target.toolsets)
    elif isinstance(target, AbstractToolset):
        toolsets = [target]
    else:
        raise ConfigurationError(
            f"telemetry.integrations.pydantic_ai.instrument needs a pydantic_ai.Agent or a toolset, got {target!r}"
        )
    selection = Selection("pydantic_ai.instrument", choices, defaults=DEFAULT_EXCEPTIONS)
    found: list[tuple[Tool[Any], str]] = []
    for toolset in toolsets:
        _function_tools(toolset, lambda name: name, found)
    for tool, name in found:
        _instrument_tool(tool, name, selection)
    selection.check_all_named(name for _tool, name in found)
    if isinstance(target, Agent):
        _attach(target, selection)
    return target


def uninstrument(target: A) -> A:
    """Undo :func:`instrument`: every tool's function back as it was, the capability removed.

    Functions the user decorated with ``@instrument_tool`` themselves stay decorated. Tools
    instrumented at run time through this agent are put back too. Returns ``target``.
    """
    if isinstance(target, Agent):
        toolsets: list[AbstractToolset[Any]] = list(target.toolsets)
        capability = _capability_of(target)
        if capability is not None:
            for tool in capability.instrumented:
                restore_attributes(tool.function_schema)
                restore_attributes(tool)
            root = target._root_capability
            if isinstance(root, CombinedCapability) and capability.replaced_root is not None:
                target._root_capability = capability.replaced_root
    elif isinstance(target, AbstractToolset):
        toolsets = [target]
    else:
        raise ConfigurationError(
            f"telemetry.integrations.pydantic_ai.uninstrument needs a pydantic_ai.Agent or a toolset, got {target!r}"
        )
    found: list[tuple[Tool[Any], str]] = []
    for toolset in toolsets:
        _function_tools(toolset, lambda name: name, found)
    for tool, _name in found:
        restore_attributes(tool.function_schema)
        restore_attributes(tool)
    return target
