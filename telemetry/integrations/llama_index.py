"""LlamaIndex: ``instrument(agent)`` records every tool call of an agent, a multi-agent workflow or a tool list.

Install with ``pip install -e '/path/to/outcome-telemetry[llama-index]'`` (``llama-index-core``). Example::

    from llama_index.core.agent.workflow import FunctionAgent
    from telemetry.integrations import llama_index as otel_llama_index

    agent = FunctionAgent(name="planner", tools=[lookup, notify], llm=llm)
    otel_llama_index.instrument(agent)

What it does, per tool (``FunctionTool``, which ``tools=[function]`` makes, or any other
``AsyncBaseTool`` such as ``QueryEngineTool``) of a ``FunctionAgent``/``ReActAgent``, of every
agent of an ``AgentWorkflow``, or of a list:

- the function behind a ``FunctionTool`` (``fn``/``async_fn``; for another ``AsyncBaseTool`` its
  ``call``/``acall``) is instrumented with :func:`telemetry.instrument.instrument_with`, unless it
  already is, on the tool object itself: its ``metadata`` (name, description, ``fn_schema``,
  ``return_direct``), which is all the LLM is shown, does not change;
- the agent's (or workflow's) tool dispatch runs each call with the framework's context:
  ``gen_ai.tool.call.id`` is the ``ToolCall`` event's ``tool_id`` (the model's call id),
  ``gen_ai.conversation.id`` the workflow run's id (``handler.run_id``), ``gen_ai.agent.id`` the
  agent's ``name`` (in an ``AgentWorkflow``, the agent whose turn it is), unless the user set them
  with ``telemetry.agent()``/``telemetry.tool_call_id()``. A tool that runs another agent gives the
  inner agent's calls their own ids;
- a tool that a step of your own ``Workflow`` calls carries the workflow run's id;
- tools met only at run time are instrumented when first called: an ``AgentWorkflow``'s
  ``handoff`` tool (kind ``delegate``) and tools from a ``tool_retriever``;
- LlamaIndex does not validate a call's arguments: it calls the function with the model's
  keywords. A call the function's signature cannot take (a missing or unknown argument) never
  runs the tool body; it is recorded as transport ``ok``, outcome ``invalid_argument``
  (``error.type`` ``TypeError``), and LlamaIndex tells the model as it did;
- ``WaitingForEvent`` (a tool waiting for a human or another event with ``ctx.wait_for_event``,
  which pauses the step and runs the tool again when the event arrives) is a pause, not a
  failure: transport ``ok``, outcome ``deferred``. Any other exception is recorded as raised;
  LlamaIndex turns it into an error message for the model (``ToolOutput(is_error=True)``).

Read/write is ``write`` unless ``kinds=`` says (LlamaIndex tools carry no MCP-style hints).
:func:`uninstrument` puts every tool and dispatch back. The dispatch is reached through the
agent's ``_call_tool`` and the run's step context (``StepWorkerStateContextVar``), internals the
extra's version pin covers.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar

from .._extras import require

require("llama_index.core", extra="llama-index", needed_for="telemetry.integrations.llama_index")

from llama_index.core.agent.workflow import AgentWorkflow, BaseWorkflowAgent
from llama_index.core.agent.workflow.workflow_events import ToolCall
from llama_index.core.tools import AsyncBaseTool, BaseTool, FunctionTool
from llama_index.core.tools.function_tool import async_to_sync, sync_to_async
from llama_index_instrumentation.dispatcher import active_instrument_tags
from typing_extensions import Unpack
from workflows.runtime.types.results import StepWorkerStateContextVar, WaitingForEvent

from .. import conventions as c
from ..exceptions import ConfigurationError
from ..instrument import framework_context
from ..runtime import _containment as _safe
from ._common import Choices, Selection
from ._plumbing import record_refused, replace_attribute, restore_attributes, spec_of, was_replaced

__all__ = ["DEFAULT_EXCEPTIONS", "instrument", "uninstrument"]

T = TypeVar("T")

DEFAULT_EXCEPTIONS: Mapping[type[BaseException], str] = {WaitingForEvent: c.OUTCOME_DEFERRED}
"""LlamaIndex's pause: a tool waiting for an event (``ctx.wait_for_event``) runs again when it arrives."""

_RUN_ID_TAG = "llamaindex.run_id"  # the tag the workflow run puts on its instrumentation context
_HANDOFF = "handoff"  # AgentWorkflow's hand-off tool, made anew for every turn


async def _noop_async() -> None:
    """Stands in for a tool's function to learn the code of LlamaIndex's sync/async adapters."""


# The closures LlamaIndex builds around a tool's function: a tool whose ``_fn``/``_async_fn`` runs
# one of these was derived from the other, and is rebuilt from the instrumented one.
_SYNC_TO_ASYNC = sync_to_async(lambda: None).__code__
_ASYNC_TO_SYNC = async_to_sync(_noop_async).__code__


def _derived(func: Any, code: Any) -> bool:
    return getattr(func, "__code__", None) is code


def _checked(function: Any, instrumented: Any) -> Any:
    """``instrumented``, first checking the call binds to ``function``'s signature.

    LlamaIndex calls a tool's function with the model's keywords as they came. A call the
    signature cannot take never runs the body: it is recorded as ``invalid_argument`` and the
    original function is called instead, so LlamaIndex gets the very ``TypeError`` it would have.
    """
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check against
        return instrumented

    def refused(args: Any, kwargs: Any) -> TypeError | None:
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            spec = spec_of(instrumented)
            if spec is not None:
                record_refused(spec, exc, c.OUTCOME_INVALID_ARGUMENT)
            return exc
        return None

    if inspect.iscoroutinefunction(function):

        @functools.wraps(instrumented)
        async def acall(*args: Any, **kwargs: Any) -> Any:
            with _in_workflow_step():
                if refused(args, kwargs) is not None:
                    return await function(*args, **kwargs)
                return await instrumented(*args, **kwargs)

        return acall

    @functools.wraps(instrumented)
    def call(*args: Any, **kwargs: Any) -> Any:
        with _in_workflow_step():
            if refused(args, kwargs) is not None:
                return function(*args, **kwargs)
            return instrumented(*args, **kwargs)

    return call


def _in_workflow_step() -> AbstractContextManager[None]:
    """The workflow run as the run of a tool called by a step of your own (not an agent's dispatch).

    An agent's dispatch sets the call's whole context itself (its step handles a ``ToolCall``);
    a tool your own ``Workflow`` step calls gets the run's id, so its calls group by run.
    """
    try:
        if _call_id() is not None:
            return nullcontext()
        run_id = _run_id()
    except Exception as exc:  # another LlamaIndex version: the call runs all the same, without the run
        _safe.report(c.STAGE_SPAN, "reading a LlamaIndex workflow run's id", exc)
        return nullcontext()
    return framework_context(None, run_id, None) if run_id is not None else nullcontext()


def _instrument_function_tool(tool: FunctionTool, selection: Selection, kind: str | None = None) -> None:
    name = tool.metadata.get_name()
    fn, async_fn = tool._fn, tool._async_fn
    derived_async, derived_sync = _derived(async_fn, _SYNC_TO_ASYNC), _derived(fn, _ASYNC_TO_SYNC)
    if derived_async and derived_sync:  # pragma: no cover - LlamaIndex never builds both
        selection.seen.add(name)
        return
    new_fn = fn if derived_sync else _checked(fn, selection.instrument(name, fn, kind=kind))
    new_async = async_fn if derived_async else _checked(async_fn, selection.instrument(name, async_fn, kind=kind))
    if derived_async:
        new_async = sync_to_async(new_fn)
    if derived_sync:
        new_fn = async_to_sync(new_async)
    replace_attribute(tool, "_fn", new_fn)
    replace_attribute(tool, "_async_fn", new_async)


_recording: contextvars.ContextVar[Any] = contextvars.ContextVar("outcome_telemetry_llama_index_tool", default=None)


def _outermost(tool: BaseTool, method: Any, instrumented: Any) -> Any:
    """``instrumented``, unless ``tool`` is being recorded already: a tool's ``acall`` that calls its
    own ``call`` (a common way to write one) is one call, with one span."""
    if inspect.iscoroutinefunction(method):

        @functools.wraps(instrumented)
        async def acall(*args: Any, **kwargs: Any) -> Any:
            if _recording.get() is tool:
                return await method(*args, **kwargs)
            token = _recording.set(tool)
            try:
                return await instrumented(*args, **kwargs)
            finally:
                _recording.reset(token)

        return acall

    @functools.wraps(instrumented)
    def call(*args: Any, **kwargs: Any) -> Any:
        if _recording.get() is tool:
            return method(*args, **kwargs)
        token = _recording.set(tool)
        try:
            return instrumented(*args, **kwargs)
        finally:
            _recording.reset(token)

    return call


def _instrument_tool(tool: BaseTool, selection: Selection, kind: str | None = None) -> None:
    """Instrument ``tool`` in place (its function; its metadata, which the model sees, untouched)."""
    name = tool.metadata.get_name()
    if was_replaced(tool, "_fn") or was_replaced(tool, "acall"):
        selection.seen.add(name)
        return
    if isinstance(tool, FunctionTool):
        _instrument_function_tool(tool, selection, kind)
    elif isinstance(tool, AsyncBaseTool):
        call, acall = tool.call, tool.acall
        replace_attribute(tool, "call", _outermost(tool, call, selection.instrument(name, call, kind=kind)))
        replace_attribute(tool, "acall", _outermost(tool, acall, selection.instrument(name, acall, kind=kind)))
    else:  # a sync-only BaseTool is called through __call__, which cannot be replaced per object
        selection.seen.add(name)


def _call_id() -> str | None:
    state = StepWorkerStateContextVar.get(None)
    event = getattr(state, "event", None)
    return event.tool_id if isinstance(event, ToolCall) else None


def _run_id() -> str | None:
    run_id = active_instrument_tags.get().get(_RUN_ID_TAG)
    return run_id if isinstance(run_id, str) else None


class _Dispatch:
    """The workflow's ``_call_tool``, run with the call's context; tools met at run time instrumented."""

    def __init__(self, workflow: Any, original: Callable[..., Any], selection: Selection) -> None:
        self.workflow = workflow
        self.original = original
        self.selection = selection
        self.met: list[BaseTool] = []  # tools instrumented at run time, put back by uninstrument

    async def _agent_name(self, ctx: Any) -> str | None:
        if isinstance(self.workflow, AgentWorkflow):
            name = await ctx.store.get("current_agent_name", default=None)
            return name if isinstance(name, str) else None
        name = getattr(self.workflow, "name", None)
        return name if isinstance(name, str) else None

    def _meet(self, tool: Any) -> None:
        inner = getattr(tool, "base_tool", tool)  # a sync tool comes adapted to async
        if not isinstance(inner, BaseTool) or was_replaced(inner, "_fn") or was_replaced(inner, "acall"):
            return
        name = inner.metadata.get_name()
        _instrument_tool(inner, self.selection, c.KIND_DELEGATE if name == _HANDOFF else None)
        if name != _HANDOFF:  # the hand-off tool is made anew for every turn: nothing to put back
            self.met.append(inner)

    async def __call__(self, ctx: Any, tool: Any, tool_input: dict[str, Any]) -> Any:
        try:
            self._meet(tool)
            name = await self._agent_name(ctx)
            context = framework_context(name, _run_id(), _call_id())
        except Exception as exc:  # another LlamaIndex version: the call runs all the same, without context
            _safe.report(c.STAGE_SPAN, "reading a LlamaIndex tool call's context", exc)
            return await self.original(ctx, tool, tool_input)
        with context:
            return await self.original(ctx, tool, tool_input)


def _tools_of(target: Any) -> tuple[list[BaseTool], list[Any]]:
    """(the tools, the workflows whose dispatch to wrap) of a tool, a list, an agent or an AgentWorkflow."""
    if isinstance(target, BaseTool):
        return [target], []
    if isinstance(target, AgentWorkflow):
        tools: list[BaseTool] = []
        for agent in target.agents.values():
            tools.extend(t for t in agent.tools or [] if isinstance(t, BaseTool))
        return tools, [target, *target.agents.values()]
    if isinstance(target, BaseWorkflowAgent):
        return [t for t in target.tools or [] if isinstance(t, BaseTool)], [target]
    if isinstance(target, Iterable) and not isinstance(target, (str, bytes, Mapping)):
        items = list(target)
        bad = [t for t in items if not isinstance(t, BaseTool)]
        if not bad:
            return items, []
        raise ConfigurationError(
            f"telemetry.integrations.llama_index.instrument takes LlamaIndex tools; {bad[0]!r} is not one "
            f"(make it one with llama_index.core.tools.FunctionTool.from_defaults)"
        )
    raise ConfigurationError(
        "telemetry.integrations.llama_index.instrument needs a LlamaIndex tool, a list of them, an agent "
        f"(FunctionAgent, ReActAgent) or an AgentWorkflow, got {target!r}"
    )


def instrument(target: T, **choices: Unpack[Choices]) -> T:
    """Instrument the tools of ``target`` in place, and its tool dispatch when it is an agent; return it.

    ``target`` is a tool, a list of tools, an agent (``FunctionAgent``, ``ReActAgent``) or an
    ``AgentWorkflow`` (every agent's tools, and the hand-off).

    Parameters:
        kinds: tool name to ``read``/``write``/``send``/``delegate`` (default ``write``; the
            ``handoff`` tool is ``delegate``).
        readbacks: tool name to a ``readback(call, result)`` callable for writes.
        exceptions: exception class to outcome code, on top of :data:`DEFAULT_EXCEPTIONS`.

    Safe to call again: nothing is instrumented twice. A name in ``kinds`` or ``readbacks`` that
    is no tool raises ``ConfigurationError``.
    """
    tools, workflows = _tools_of(target)
    selection = Selection("llama_index.instrument", choices, defaults=DEFAULT_EXCEPTIONS)
    for tool in tools:
        _instrument_tool(tool, selection)
    selection.check_all_named([t.metadata.get_name() for t in tools] + [_HANDOFF] * bool(workflows))
    for workflow in workflows:
        if not isinstance(vars(workflow).get("_call_tool"), _Dispatch):
            replace_attribute(workflow, "_call_tool", _Dispatch(workflow, workflow._call_tool, selection))
    return target


def uninstrument(target: T) -> T:
    """Undo :func:`instrument` on the same target: every tool and dispatch as it was. Returns ``target``."""
    tools, workflows = _tools_of(target)
    for workflow in workflows:
        dispatch = vars(workflow).get("_call_tool")
        if isinstance(dispatch, _Dispatch):
            for tool in dispatch.met:
                restore_attributes(tool)
        restore_attributes(workflow)
    for tool in tools:
        restore_attributes(tool)
    return target
