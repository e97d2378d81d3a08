"""Google ADK: ``instrument(agent)`` records every tool call of an agent and its sub-agents, in place.

Install with ``pip install -e '/path/to/outcome-telemetry[google-adk]'``. Example::

    from google.adk.agents import LlmAgent
    from telemetry.integrations import google_adk as otel_adk

    agent = LlmAgent(name="planner", model="gemini-2.5-flash", tools=[store.read_state, store.write_state])
    otel_adk.instrument(agent, kinds={"read_state": "read"})

What it does, for the agent, its ``sub_agents`` and the agents behind its ``AgentTool``\\ s:

- a ``FunctionTool`` (and a plain function in ``tools=``, which ADK would wrap in one on every
  model call: it is wrapped once, here, the way ADK wraps it) has its ``func`` instrumented with
  :func:`telemetry.instrument.instrument_with`, unless it already is. ADK still validates the
  arguments, injects the ``ToolContext`` and runs sync functions where it runs them; the
  ``FunctionDeclaration`` the model is shown is the same, byte for byte;
- an ``AgentTool`` is recorded as one call of kind ``delegate`` whose span covers the inner
  agent's run, and the inner agent's tools are instrumented too; any other ``BaseTool`` with a
  ``run_async`` of its own is recorded around it;
- each call runs with ADK's context: ``gen_ai.tool.call.id`` is the function call's id,
  ``gen_ai.conversation.id`` the session's id, ``gen_ai.agent.id`` the name of the agent whose
  tool it is, unless the user set them with ``telemetry.agent()``/``telemetry.tool_call_id()``;
  an inner agent's calls carry their own;
- what ADK answers for a tool that did not run is recorded too, transport ``ok``: arguments its
  validation refuses (wrong types, a mandatory parameter missing) as ``invalid_argument``, a call
  held for a human's confirmation (``require_confirmation=``) as ``approval_required``;
- a result ADK's convention marks as failed (a dict with a truthy ``"error"``, which ADK's own
  span marks as an error too) is outcome ``tool_error``, the model having been told; a call of a
  tool that asked ``tool_context.request_confirmation()`` is ``approval_required``; a
  ``LongRunningFunctionTool``'s call is ``deferred`` (its result arrives later). An exception
  keeps its own outcome (transport ``error``) and reaches ADK unchanged (its
  ``on_tool_error_callback``\\ s still see it).

Our span is opened inside ADK's ``execute_tool`` span (ADK's before/after tool callbacks and its
own telemetry stay as they were), so it nests under it and forensics counts the call once.
``BaseToolset``\\ s (MCP, OpenAPI) make their tools at run time: instrument an MCP server where it
runs (:mod:`telemetry.mcp`). A ``transfer_to_agent`` hand-off between an agent and its sub-agents
(ADK's own tool, made for each model call) is recorded by an after-tool callback put first on the
agent, as a call of kind ``delegate`` with the target agent on the span
(``tool.argument.agent_name``); the sub-agent's own calls then carry its name.
:func:`uninstrument` puts every tool and agent back.

The tool's function is reached through ``FunctionTool.func`` and the call's context through the
``tool_context`` ADK passes to ``run_async``; the extra pins the ADK versions this was tested with.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from .._extras import require

require("google.adk", extra="google-adk", needed_for="telemetry.integrations.google_adk", name="google-adk")

from google.adk.agents import BaseAgent
from google.adk.tools.agent_tool import AgentTool
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.transfer_to_agent_tool import TransferToAgentTool
from typing_extensions import Unpack

from .. import conventions as c
from ..envelopes import ResultClass
from ..exceptions import ConfigurationError
from ..instrument import ToolSpec, framework_context, instrument_with
from ..runtime import _containment as _safe
from ._common import Choices, Selection, hints_from
from ._plumbing import record_refused, replace_attribute, restore_attributes, spec_of, was_replaced

__all__ = ["DEFAULT_EXCEPTIONS", "TRANSFER_TOOL", "ArgumentsRefused", "ConfirmationRequested", "instrument", "uninstrument"]

A = TypeVar("A", bound=BaseAgent)

DEFAULT_EXCEPTIONS: Mapping[type[BaseException], str] = {}
"""ADK has no exception meaning "the model should retry": a tool answers ``{"error": ...}`` instead."""


class ArgumentsRefused(ValueError):
    """The ``error.type`` of a call whose arguments ADK's validation refused (the tool never ran).

    Never raised into ADK: it only names, on the span, what ADK answered the model with.
    """


class ConfirmationRequested(Exception):
    """The ``error.type`` of a call ADK held for a human's confirmation (the tool has not run yet).

    Never raised into ADK: it only names, on the span, why the call paused.
    """


TRANSFER_TOOL = "transfer_to_agent"
"""The name of ADK's hand-off tool (recorded as kind ``delegate``, the target on the span)."""
_TARGET = "agent_name"

_ERROR_KEY = "error"  # ADK's convention for a tool's failure answer (FunctionTool, its own telemetry)


class _Running:
    """The ADK call in flight: its context, and whether the tool's own function was reached."""

    __slots__ = ("tool_context", "ran")

    def __init__(self, tool_context: Any) -> None:
        self.tool_context = tool_context
        self.ran = False


_running: contextvars.ContextVar[_Running | None] = contextvars.ContextVar("outcome_telemetry_adk_call", default=None)


def _ids(tool_context: Any) -> tuple[str | None, str | None, str | None]:
    """(agent name, session id, function call id) of a tool call, from ADK's ``ToolContext``."""
    try:
        session = getattr(tool_context, "session", None)
        return (getattr(tool_context, "agent_name", None), getattr(session, "id", None),
                getattr(tool_context, "function_call_id", None))
    except Exception as exc:  # another ADK version: the call runs all the same, without the ids
        _safe.report(c.STAGE_SPAN, "reading ADK's tool context", exc)
        return None, None, None


def _confirmation_requested(tool_context: Any) -> bool:
    """True when this call asked for a human's confirmation (ADK's gate, or the tool itself)."""
    call_id = getattr(tool_context, "function_call_id", None)
    requested = getattr(getattr(tool_context, "actions", None), "requested_tool_confirmations", None)
    return bool(call_id) and isinstance(requested, Mapping) and call_id in requested


def _adk_classify(spec: ToolSpec, tool: BaseTool) -> None:
    """Make ``spec`` (ours, made for ``tool``) read a result the way ADK does, after our own rules.

    The result told the model what happened, so these outcomes are reported failures and pauses,
    never silent ones: an outcome set after the fact (``set_outcome``) would count as silent.
    """
    judge = spec.classify

    def classify(result: Any) -> ResultClass:
        found = judge(result)
        if found.outcome != c.OUTCOME_OK:
            return found
        running = _running.get()
        if running is not None and _confirmation_requested(running.tool_context):
            return ResultClass(c.TRANSPORT_OK, c.OUTCOME_APPROVAL_REQUIRED, None)
        if isinstance(result, Mapping) and result.get(_ERROR_KEY):
            return ResultClass(c.TRANSPORT_OK, c.OUTCOME_TOOL_ERROR, None)
        if getattr(tool, "is_long_running", False):
            return ResultClass(c.TRANSPORT_OK, c.OUTCOME_DEFERRED, None)
        return found

    object.__setattr__(spec, "classify", classify)  # a per-tool classifier; the spec is this tool's alone


def _refused(tool: BaseTool, tool_context: Any, result: Any, running: _Running) -> None:
    """Record a call of a function tool that ADK answered without running it (validation)."""
    if running.ran or not isinstance(tool, FunctionTool):
        return
    if not (isinstance(result, Mapping) and result.get(_ERROR_KEY)):
        return
    confirmation = getattr(tool_context, "tool_confirmation", None)
    if _confirmation_requested(tool_context) or confirmation is not None:
        return  # a pause recorded when it was requested, or a call a human rejected
    spec = spec_of(tool.func)
    if spec is not None:
        record_refused(spec, ArgumentsRefused(str(result[_ERROR_KEY])), c.OUTCOME_INVALID_ARGUMENT)


def _with_context(tool: BaseTool) -> None:
    """Run ``tool.run_async`` with ADK's ids, noting whether the function ran; record what ADK
    refused and the confirmations its gate requests (``check_require_confirmation``)."""
    run, check = tool.run_async, tool.check_require_confirmation

    @functools.wraps(run)
    async def run_async(*, args: dict[str, Any], tool_context: Any) -> Any:
        running = _Running(tool_context)
        token = _running.set(running)
        try:
            with framework_context(*_ids(tool_context)):
                result = await run(args=args, tool_context=tool_context)
                try:
                    _refused(tool, tool_context, result, running)
                except Exception as exc:  # the tool's answer reaches ADK all the same
                    _safe.report(c.STAGE_SPAN, "recording a call ADK refused", exc)
                return result
        finally:
            _running.reset(token)

    @functools.wraps(check)
    async def check_require_confirmation(args: dict[str, Any], tool_context: Any) -> Any:
        required = await check(args, tool_context)
        if required is True and getattr(tool_context, "tool_confirmation", None) is None:
            spec = _spec(tool)
            if spec is not None:
                with framework_context(*_ids(tool_context)):
                    record_refused(spec, ConfirmationRequested(tool.name), c.OUTCOME_APPROVAL_REQUIRED)
        return required

    replace_attribute(tool, "run_async", run_async)
    replace_attribute(tool, "check_require_confirmation", check_require_confirmation)
    if isinstance(tool, FunctionTool):
        _note_runs(tool)


def _note_runs(tool: FunctionTool) -> None:
    """Note, on the call in flight, when ADK reaches the tool's function (what tells a call ADK
    refused from one the tool answered): ``_invoke_callable`` with ``func``, or a generator run
    as a node."""
    invoke, as_node = tool._invoke_callable, tool._run_generator_as_node

    def ran() -> None:
        running = _running.get()
        if running is not None:
            running.ran = True

    @functools.wraps(invoke)
    async def invoke_callable(target: Any, args_to_call: dict[str, Any]) -> Any:
        if target is tool.func:
            ran()
        return await invoke(target, args_to_call)

    @functools.wraps(as_node)
    async def run_generator_as_node(**kwargs: Any) -> Any:
        ran()
        return await as_node(**kwargs)

    replace_attribute(tool, "_invoke_callable", invoke_callable)
    replace_attribute(tool, "_run_generator_as_node", run_generator_as_node)


def _spec(tool: BaseTool) -> ToolSpec | None:
    return spec_of(tool.func) if isinstance(tool, FunctionTool) else spec_of(vars(tool).get("_recorded_run"))


def _instrument_tool(tool: BaseTool, selection: Selection, found: list[BaseAgent]) -> None:
    if isinstance(tool, AgentTool):
        _agents(tool.agent, found)
    if was_replaced(tool, "run_async"):  # instrumented before (a tool shared by two agents)
        selection.seen.add(tool.name)
        return
    hints = hints_from(getattr(tool, "custom_metadata", None))
    if isinstance(tool, FunctionTool):
        function = selection.instrument(tool.name, tool.func, hints)
        if function is not tool.func:
            spec = spec_of(function)
            if spec is not None:
                _adk_classify(spec, tool)
            # The cache of the keyword-compatible function is keyed by func: put back as it was.
            replace_attribute(tool, "_compatible_func_cache", vars(tool).get("_compatible_func_cache"))
            replace_attribute(tool, "func", function)
        _with_context(tool)
        return
    kind = c.KIND_DELEGATE if isinstance(tool, AgentTool) else None
    recorded = selection.instrument(tool.name, tool.run_async, hints, kind=kind)
    spec = spec_of(recorded)
    if spec is not None and recorded is not tool.run_async:
        _adk_classify(spec, tool)
    replace_attribute(tool, "run_async", recorded)
    replace_attribute(tool, "_recorded_run", recorded)
    _with_context(tool)


def _record_transfers(agent: BaseAgent, selection: Selection) -> None:
    """Record ADK's ``transfer_to_agent`` hand-offs (a tool ADK makes for each model call) as
    ``delegate`` calls, the target agent on the span: an after-tool callback, put first."""
    if not hasattr(agent, "after_tool_callback") or was_replaced(agent, "after_tool_callback"):
        return
    selection.seen.add(TRANSFER_TOOL)

    def transfer_to_agent(agent_name: Any = None, **_others: Any) -> None:
        """The hand-off ADK made (its own tool did the work; this records it)."""

    options = selection.options(TRANSFER_TOOL, kind=c.KIND_DELEGATE).replace(record_arguments=(_TARGET,))
    recorded = instrument_with(transfer_to_agent, options)

    def record_transfer(tool: Any, args: dict[str, Any], tool_context: Any, tool_response: Any) -> None:
        if isinstance(tool, TransferToAgentTool) and isinstance(args, Mapping):
            try:
                with framework_context(*_ids(tool_context)):
                    recorded(**{str(k): v for k, v in args.items()})
            except Exception as exc:  # the hand-off happens all the same, unrecorded
                _safe.report(c.STAGE_SPAN, "recording an ADK hand-off", exc)
        return None

    existing = agent.after_tool_callback
    callbacks = existing if isinstance(existing, list) else [existing] if existing is not None else []
    replace_attribute(agent, "after_tool_callback", [record_transfer, *callbacks])


def _tools_of(agent: BaseAgent) -> Iterator[BaseTool]:
    for tool in getattr(agent, "tools", None) or ():
        if isinstance(tool, BaseTool):
            yield tool


def _agents(agent: BaseAgent, found: list[BaseAgent]) -> None:
    """``agent``, its sub-agents and the agents behind its agent-tools, each once."""
    if any(a is agent for a in found):
        return
    found.append(agent)
    for sub in getattr(agent, "sub_agents", None) or ():
        if isinstance(sub, BaseAgent):
            _agents(sub, found)
    for tool in _tools_of(agent):
        if isinstance(tool, AgentTool):
            _agents(tool.agent, found)


def _wrap_functions(agent: BaseAgent) -> None:
    """Plain functions in ``tools=`` become the ``FunctionTool`` ADK would make of them each turn."""
    tools = getattr(agent, "tools", None)
    if not isinstance(tools, list) or not any(_plain(t) for t in tools):
        return
    replace_attribute(agent, "tools", [FunctionTool(t) if _plain(t) else t for t in tools])


def _plain(tool: Any) -> bool:
    return callable(tool) and not isinstance(tool, (BaseTool, BaseAgent)) and not hasattr(tool, "get_tools")


def _check(agent: Any, where: str) -> None:
    if not isinstance(agent, BaseAgent):
        raise ConfigurationError(
            f"telemetry.integrations.google_adk.{where} needs a google.adk agent (an LlmAgent or another "
            f"BaseAgent), got {agent!r}"
        )


def instrument(agent: A, **choices: Unpack[Choices]) -> A:
    """Instrument every tool of ``agent``, its sub-agents and its agent-tools' agents, in place.

    Parameters:
        kinds: tool name to ``read``/``write``/``send``/``delegate`` (default: MCP-style hints in
            the tool's ``custom_metadata``, else ``write``; an ``AgentTool`` is ``delegate``).
        readbacks: tool name to a ``readback(call, result)`` callable for writes.
        exceptions: exception class to outcome code (none by default).

    Call it before running the agent. Returns ``agent``. Safe to call again: nothing is
    instrumented twice. A name in ``kinds``/``readbacks`` that is no tool is a ``ConfigurationError``.
    """
    _check(agent, "instrument")
    selection = Selection("google_adk.instrument", choices, defaults=DEFAULT_EXCEPTIONS)
    agents: list[BaseAgent] = []
    _agents(agent, agents)
    names: list[str] = []
    for each in agents:  # grows while it runs: agent-tools add their agents
        _wrap_functions(each)
        if getattr(each, "sub_agents", None) or getattr(each, "parent_agent", None) is not None:
            _record_transfers(each, selection)
        for tool in _tools_of(each):
            _instrument_tool(tool, selection, agents)
            names.append(tool.name)
    selection.check_all_named(names)
    return agent


def uninstrument(agent: A) -> A:
    """Undo :func:`instrument`: every tool and agent as it was. Returns ``agent``.

    Functions the user decorated with ``@instrument_tool`` themselves stay decorated.
    """
    _check(agent, "uninstrument")
    agents: list[BaseAgent] = []
    _agents(agent, agents)
    for each in agents:
        for tool in _tools_of(each):
            restore_attributes(tool)
            if isinstance(tool, AgentTool):
                _agents(tool.agent, agents)
        restore_attributes(each)
    return agent
