"""Agno: ``instrument(agent)`` records every tool call of an agent, a team or a tool list, in place.

Install with ``pip install -e '/path/to/outcome-telemetry[agno]'``. Example::

    from agno.agent import Agent
    from telemetry.integrations import agno as otel_agno

    agent = Agent(name="planner", model=model, tools=[store.read_state, store.write_state])
    otel_agno.instrument(agent)

What it does, per tool of the agent (a function, a ``Function``/``@tool``, the functions of a
``Toolkit``), of a ``Team`` and of its members (agents and teams, recursively), or of a list:

- the tool's function is instrumented (:func:`telemetry.instrument.instrument_with`) and handed
  to Agno in its place (in ``agent.tools``, as a ``Function``'s ``entrypoint``); Agno derives the
  name, description and parameters from it as from the original, so the model sees the same;
- Agno's own argument validation (pydantic's ``validate_call``) runs outside our span: a call it
  refuses never reaches the tool and is recorded as transport ``ok``, ``invalid_argument``;
- each call carries the model's call id (``FunctionCall.call_id``), the run's ``run_id`` and the
  agent's ``name`` (else ``id``; a team's tools, the team's), unless the user set them; an agent
  run inside a tool, or a team's member, gives its calls its own ids;
- ``RetryAgentRun`` is transport ``ok``, ``retry_requested``; a pause before the tool runs
  (``requires_confirmation``/``requires_user_input``: ``approval_required``;
  ``external_execution``: ``deferred``) is recorded as such, and the call again when it runs
  after ``continue_run``. Other exceptions (``StopAgentRun`` too) are recorded as raised;
- a team's delegation (``delegate_task_to_member``/``_members``, made by Agno for each run) is a
  ``delegate`` call of the team, the member's calls nested under it. A generator tool's span
  covers its whole stream; async-generator tools (an ``arun``'s delegation too) are left alone.

Read/write comes from a ``Function``'s MCP-style ``annotations`` (``readOnlyHint`` ...), else
``write``; ``kinds=`` says it explicitly. :func:`uninstrument` puts every tool back.

The call's context is read where Agno runs a call (``FunctionCall.execute``/``aexecute``) and the
pauses where it reports them (``Model.run_function_calls``): both are wrapped once, on the class,
and do nothing for calls of tools that are not instrumented. The extra pins the versions tested.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from .._extras import require

require("agno", extra="agno", needed_for="telemetry.integrations.agno")

from agno.agent import Agent
from agno.exceptions import RetryAgentRun
from agno.models.base import Model
from agno.models.response import ModelResponseEvent
from agno.team import Team
from agno.tools.function import Function, FunctionCall
from agno.tools.toolkit import Toolkit
from pydantic import ValidationError
from typing_extensions import Unpack

from .. import conventions as c
from ..exceptions import ConfigurationError
from ..instrument import framework_context
from ..runtime import _containment as _safe
from ._common import Choices, Selection, hints_from
from ._plumbing import passed_through, record_refused, replace_attribute, restore_attributes, spec_of

__all__ = ["DEFAULT_EXCEPTIONS", "DELEGATION_TOOLS", "Paused", "instrument", "uninstrument"]

T = TypeVar("T")

DEFAULT_EXCEPTIONS: Mapping[type[BaseException], str] = {RetryAgentRun: c.OUTCOME_RETRY_REQUESTED}
"""Agno's exception for "call me again with better arguments"."""

DELEGATION_TOOLS = ("delegate_task_to_member", "delegate_task_to_members")
"""The tools a team's leader delegates with (made by Agno for each run): recorded as kind ``delegate``."""

_SELECTION = "__outcome_telemetry_agno_selection__"  # on an instrumented team: its options, for delegations
_ORIGINAL = "__outcome_telemetry_agno_original__"  # on our entrypoint: the function it stands for
_INSTRUMENTED = "__outcome_telemetry_agno_instrumented__"  # on our entrypoint: the instrumented one


class Paused(Exception):  # noqa: N818 - named for what it records, a pause, not an error
    """Stands for an Agno pause (which raises nothing) as the ``error.type`` of its span."""


# --- the entrypoint Agno calls: validation, then the instrumented function --------------------


def _in_context(context: contextvars.Context, gen: Generator[Any, Any, Any]) -> Generator[Any, Any, Any]:
    """``gen`` stepped inside ``context``: Agno consumes a generator tool after the call returned,
    outside the call's context; each step runs in the context the call was made in."""
    to_send: Any = None
    to_throw: BaseException | None = None
    while True:
        try:
            item = context.run(gen.throw, to_throw) if to_throw is not None else context.run(gen.send, to_send)
        except StopIteration as stop:
            return stop.value
        finally:
            to_throw = None
        try:
            to_send = yield item
        except GeneratorExit:
            context.run(gen.close)
            raise
        except BaseException as exc:
            to_throw, to_send = exc, None


def _entrypoint(function: Callable[..., Any], selection: Selection, name: str,
                hints: Mapping[str, bool], validate: bool, kind: str | None = None) -> Callable[..., Any]:
    """What Agno calls in place of ``function``: its own validation first, then our span.

    Agno wraps a tool's function in pydantic's ``validate_call`` when it prepares a run; it
    leaves a function alone that is wrapped already. Wrapping it here, with Agno's own rule
    (``Function._wrap_callable``), puts the validation outside our span, so a refused call is seen.
    """
    instrumented = selection.instrument(name, function, hints, kind=kind)
    validated = Function._wrap_callable(instrumented) if validate else instrumented

    def refused(exc: ValidationError) -> None:
        spec = spec_of(instrumented)
        if spec is not None and not passed_through(exc, function):
            record_refused(spec, exc, c.OUTCOME_INVALID_ARGUMENT)

    if inspect.isgeneratorfunction(function):

        @functools.wraps(instrumented)
        def stream(*args: Any, **kwargs: Any) -> Any:
            try:
                return _in_context(contextvars.copy_context(), validated(*args, **kwargs))
            except ValidationError as exc:
                refused(exc)
                raise

        entry: Callable[..., Any] = stream
    elif inspect.iscoroutinefunction(function):

        @functools.wraps(instrumented)
        async def acall(*args: Any, **kwargs: Any) -> Any:
            try:
                return await validated(*args, **kwargs)
            except ValidationError as exc:
                refused(exc)
                raise

        entry = acall
    else:

        @functools.wraps(instrumented)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return validated(*args, **kwargs)
            except ValidationError as exc:
                refused(exc)
                raise

        entry = call
    entry._wrapped_for_validation = True  # type: ignore[attr-defined]  # Agno's mark: wrap no further
    setattr(entry, _ORIGINAL, function)
    setattr(entry, _INSTRUMENTED, instrumented)
    return entry


def _ours(entrypoint: Any) -> bool:
    return getattr(entrypoint, _INSTRUMENTED, None) is not None


def _streams(function: Any) -> bool:
    """An async generator tool: stepped by Agno outside the call's context, which cannot follow it."""
    return inspect.isasyncgenfunction(function)


def _instrument_callable(function: Callable[..., Any], selection: Selection) -> Callable[..., Any]:
    name = getattr(function, "__name__", None)
    if not isinstance(name, str) or _ours(function) or _streams(function):
        if isinstance(name, str):
            selection.seen.add(name)
        return function
    return _entrypoint(function, selection, name, {}, validate=True)


def _instrument_function(tool: Function, selection: Selection) -> None:
    entry = tool.entrypoint
    if entry is None or _ours(entry) or _streams(entry):
        selection.seen.add(tool.name)
        return
    hints = hints_from(tool.annotations)
    replace_attribute(tool, "entrypoint", _entrypoint(
        entry, selection, tool.name, hints, validate=not tool.skip_entrypoint_processing))


# --- where Agno runs a call: the call's context; where it pauses one: the pause ----------------


def _delegation(function: Function) -> bool:
    """Instrument a team's delegation tool (made for this run) when its team is instrumented."""
    entry = function.entrypoint
    selection = getattr(getattr(function, "_team", None), _SELECTION, None)
    if entry is None or function.name not in DELEGATION_TOOLS or not isinstance(selection, Selection) or _streams(entry):
        return False
    if not inspect.isgeneratorfunction(entry) and inspect.isgeneratorfunction(inspect.unwrap(entry)):
        validated = entry  # Agno validated the generator function: a plain function returning a generator

        @functools.wraps(validated)
        def generator(*args: Any, **kwargs: Any) -> Any:
            return (yield from validated(*args, **kwargs))

        entry = generator
    try:
        object.__setattr__(function, "entrypoint", _entrypoint(  # this run's own Function: nothing to put back
            entry, selection, function.name, {}, validate=False, kind=c.KIND_DELEGATE))
    except Exception as exc:  # another Agno version: the delegation runs all the same, without a span
        _safe.report(c.STAGE_SPAN, "instrumenting an Agno delegation", exc)
        return False
    return True


def _context(call: FunctionCall) -> Any:
    function = call.function
    owner = getattr(function, "_agent", None) or getattr(function, "_team", None)
    name = getattr(owner, "name", None) or getattr(owner, "id", None)
    run = getattr(getattr(function, "_run_context", None), "run_id", None)
    return framework_context(name, run, call.call_id)


def _bound(original: Any, obj: Any) -> Any:
    """``original`` bound to ``obj`` as attribute lookup would (another instrumentation's wrapper too)."""
    return original.__get__(obj, type(obj))


def _execute(original: Callable[[FunctionCall], Any]) -> Callable[[FunctionCall], Any]:
    @functools.wraps(original)
    def execute(self: FunctionCall) -> Any:
        if not _ours(self.function.entrypoint) and not _delegation(self.function):
            return _bound(original, self)()
        with _context(self):
            return _bound(original, self)()

    execute.__outcome_telemetry_agno__ = original  # type: ignore[attr-defined]
    return execute


def _aexecute(original: Callable[[FunctionCall], Any]) -> Callable[[FunctionCall], Any]:
    @functools.wraps(original)
    async def aexecute(self: FunctionCall) -> Any:
        if not _ours(self.function.entrypoint) and not _delegation(self.function):
            return await _bound(original, self)()
        with _context(self):
            return await _bound(original, self)()

    aexecute.__outcome_telemetry_agno__ = original  # type: ignore[attr-defined]
    return aexecute


def _note_pauses(response: Any, calls: Iterable[FunctionCall]) -> None:
    """Record each paused call of an instrumented tool that ``response`` reports."""
    try:
        if getattr(response, "event", None) != ModelResponseEvent.tool_call_paused.value:
            return
        by_id = {call.call_id: call for call in calls}
        for execution in response.tool_executions or ():
            call = by_id.get(execution.tool_call_id)
            spec = spec_of(getattr(call.function.entrypoint, _INSTRUMENTED, None)) if call is not None else None
            if call is None or spec is None:
                continue
            outcome = c.OUTCOME_DEFERRED if execution.external_execution_required else c.OUTCOME_APPROVAL_REQUIRED
            with _context(call):
                record_refused(spec, Paused(f"{spec.name} paused for {outcome}"), outcome)
    except Exception as exc:  # another Agno version: the run goes on, the pause unrecorded
        _safe.report(c.STAGE_SPAN, "recording an Agno pause", exc)


def _run_calls(original: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    @functools.wraps(original)
    def run_function_calls(self: Model, function_calls: list[FunctionCall], *args: Any, **kwargs: Any) -> Iterator[Any]:
        for response in _bound(original, self)(function_calls, *args, **kwargs):
            _note_pauses(response, function_calls)
            yield response

    run_function_calls.__outcome_telemetry_agno__ = original  # type: ignore[attr-defined]
    return run_function_calls


def _arun_calls(original: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
    @functools.wraps(original)
    async def arun_function_calls(self: Model, function_calls: list[FunctionCall], *args: Any,
                                  **kwargs: Any) -> AsyncIterator[Any]:
        async for response in _bound(original, self)(function_calls, *args, **kwargs):
            _note_pauses(response, function_calls)
            yield response

    arun_function_calls.__outcome_telemetry_agno__ = original  # type: ignore[attr-defined]
    return arun_function_calls


def _hook_agno() -> None:
    """Wrap, once, where Agno runs and pauses calls (a no-op for tools not instrumented)."""
    for cls, attribute, wrap in ((FunctionCall, "execute", _execute), (FunctionCall, "aexecute", _aexecute),
                                 (Model, "run_function_calls", _run_calls), (Model, "arun_function_calls", _arun_calls)):
        current = vars(cls)[attribute]
        if not hasattr(current, "__outcome_telemetry_agno__"):
            setattr(cls, attribute, wrap(current))


# --- what instrument() is given ---------------------------------------------------------------


def _owners(target: Any, found: list[Any]) -> None:
    """``target`` and, for a team, its members, recursively (each once)."""
    if any(o is target for o in found):
        return
    found.append(target)
    if isinstance(target, Team) and isinstance(target.members, list):
        for member in target.members:
            if isinstance(member, (Agent, Team)):
                _owners(member, found)


def _tool_list(owner: Any) -> list[Any] | None:
    tools = owner.tools if isinstance(owner, (Agent, Team)) else owner
    return tools if isinstance(tools, list) else None


def _check(target: Any) -> None:
    if isinstance(target, (Agent, Team)):
        return
    if not isinstance(target, list):
        raise ConfigurationError(
            "telemetry.integrations.agno.instrument needs an agno Agent, a Team or a list of tools, "
            f"got {target!r}"
        )


def instrument(target: T, **choices: Unpack[Choices]) -> T:
    """Instrument the tools of ``target`` (an ``Agent``, a ``Team`` with its members, or a list) in place.

    Parameters:
        kinds: tool name to ``read``/``write``/``send``/``delegate`` (default: a ``Function``'s
            MCP-style ``annotations``, else ``write``).
        readbacks: tool name to a ``readback(call, result)`` callable for writes.
        exceptions: exception class to outcome code, on top of :data:`DEFAULT_EXCEPTIONS`.

    Returns ``target``. Safe to call again: nothing is instrumented twice. Tools an agent gets
    from a factory (``tools=callable``) are made per run and are not instrumented. A name in
    ``kinds`` or ``readbacks`` that is no tool raises ``ConfigurationError``.
    """
    _check(target)
    selection = Selection("agno.instrument", choices, defaults=DEFAULT_EXCEPTIONS)
    owners: list[Any] = []
    _owners(target, owners)
    names: list[str] = []
    for owner in owners:
        tools = _tool_list(owner)
        if tools is None:
            continue
        replaced = list(tools)
        for index, tool in enumerate(tools):
            if isinstance(tool, Toolkit):
                for function in {**tool.functions, **tool.async_functions}.values():
                    _instrument_function(function, selection)
                    names.append(function.name)
            elif isinstance(tool, Function):
                _instrument_function(tool, selection)
                names.append(tool.name)
            elif callable(tool) and not isinstance(tool, type):
                replaced[index] = _instrument_callable(tool, selection)
                names.append(getattr(tool, "__name__", ""))
        tools[:] = replaced  # in place: a tool added later (agent.add_tool) lands in the same list
    for owner in owners:
        if isinstance(owner, Team) and not isinstance(vars(owner).get(_SELECTION), Selection):
            replace_attribute(owner, _SELECTION, selection)
    selection.check_all_named(names + [n for n in DELEGATION_TOOLS if any(isinstance(o, Team) for o in owners)])
    _hook_agno()
    return target


def uninstrument(target: T) -> T:
    """Undo :func:`instrument`: every tool (and tool list) as it was. Returns ``target``."""
    _check(target)
    owners: list[Any] = []
    _owners(target, owners)
    for owner in owners:
        if isinstance(owner, (Agent, Team)):
            restore_attributes(owner)
        tools = _tool_list(owner)
        for tool in tools or ():
            if isinstance(tool, Toolkit):
                for function in {**tool.functions, **tool.async_functions}.values():
                    restore_attributes(function)
            elif isinstance(tool, Function):
                restore_attributes(tool)
        if tools is not None:
            tools[:] = [getattr(tool, _ORIGINAL, tool) for tool in tools]
    return target
