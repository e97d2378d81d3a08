"""``@instrument_tool``: the transport / read-back / outcome triad on an existing tool function.

The wrapper is chosen at decoration time (sync, async, generator, async generator) so the span
covers what the tool really does: the whole await, every iteration of a generator, and the
generator protocol (``send``/``throw``/``close``, ``asend``/``athrow``/``aclose``) passes through.
``functools.wraps`` keeps ``__wrapped__``, the name, the docstring and the annotations, so
``inspect.signature`` and schema-building frameworks see the original function.

When ``configure()`` has not been called (and no ``telemetry.testing`` capture is active) a call
costs one global read on top of the bare call.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from .. import conventions as c
from ..exceptions import ConfigurationError
from ..runtime import _active as _state
from ._call import Call
from ._recorder import Running, begin, enter, finish, leave, start
from ._spec import OutcomeFn, ReadbackFn, ToolOptions, ToolSpec, build_spec

if TYPE_CHECKING:
    from ..runtime import Runtime

P = ParamSpec("P")
R = TypeVar("R")

SPEC_ATTRIBUTE = "__outcome_telemetry__"
"""Set on every wrapper: the tool's :class:`ToolSpec`, for integrations (MCP) and for tests."""


def _wrap_sync(func: Callable[..., Any], spec: ToolSpec) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        runtime = _state.active
        if runtime is None:
            return func(*args, **kwargs)
        call = begin(spec, runtime, args, kwargs)
        tokens = enter(call)
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            try:
                finish(call, runtime, exc)
            finally:
                leave(tokens)
            raise
        try:  # finished while the call is still current: a read-back runs inside it
            return finish(call, runtime, None, result)
        finally:
            leave(tokens)

    return wrapper


def _wrap_async(func: Callable[..., Awaitable[Any]], spec: ToolSpec) -> Callable[..., Any]:
    @functools.wraps(func)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        runtime = _state.active
        if runtime is None:
            return await func(*args, **kwargs)
        call = begin(spec, runtime, args, kwargs)
        tokens = enter(call)
        try:
            result = await func(*args, **kwargs)
        except BaseException as exc:
            try:
                finish(call, runtime, exc)
            finally:
                leave(tokens)
            raise
        try:
            return finish(call, runtime, None, result)
        finally:
            leave(tokens)

    return wrapper


def _wrap_generator(func: Callable[..., Generator[Any, Any, Any]], spec: ToolSpec) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        runtime = _state.active
        if runtime is None:
            return (yield from func(*args, **kwargs))
        call, tokens = start(spec, runtime, args, kwargs)
        try:
            gen = func(*args, **kwargs)
        except BaseException as exc:
            finish(call, runtime, exc)
            raise
        finally:
            leave(tokens)
        to_send: Any = None
        to_throw: BaseException | None = None
        while True:
            tokens = enter(call)
            try:
                item = gen.throw(to_throw) if to_throw is not None else gen.send(to_send)
            except StopIteration as stop:
                finish(call, runtime, None, stop.value)
                return stop.value
            except BaseException as exc:
                finish(call, runtime, exc)
                raise
            finally:
                to_throw = None
                leave(tokens)
            try:
                to_send = yield item
            except GeneratorExit:
                _close(call, runtime, gen.close)
                raise
            except BaseException as exc:
                to_throw, to_send = exc, None

    return wrapper


def _close(call: Call, runtime: Runtime, close: Callable[[], Any]) -> None:
    """The consumer closed the generator early: close the tool's generator and end the span ok."""
    with Running(call, runtime):
        close()
    finish(call, runtime, None, None)


async def _aclose(call: Call, runtime: Runtime, agen: AsyncGenerator[Any, Any]) -> None:
    """:func:`_close` for an async generator (the ``aclose()`` needs awaiting)."""
    with Running(call, runtime):
        await agen.aclose()
    finish(call, runtime, None, None)


def _first_asend(agen: AsyncGenerator[Any, Any]) -> Awaitable[Any]:
    """``agen.asend(None)`` with the event loop's async-generator hooks off.

    The hooks (``sys.set_asyncgen_hooks``, installed by asyncio) register an async generator
    with the loop on its first step, so the loop can ``aclose()`` it when it is garbage
    collected or when ``asyncio.run()`` shuts down. The wrapper is registered that way and
    closes the tool's generator itself; if the tool's generator were registered too, loop
    shutdown would close both at once and the wrapper's ``aclose()`` would fail with
    "asynchronous generator is already running". The hooks run when the awaitable is created,
    so they are off only for this synchronous call.
    """
    hooks = sys.get_asyncgen_hooks()
    if hooks.firstiter is None and hooks.finalizer is None:
        return agen.asend(None)
    sys.set_asyncgen_hooks(firstiter=None, finalizer=None)
    try:
        return agen.asend(None)
    finally:
        sys.set_asyncgen_hooks(firstiter=hooks.firstiter, finalizer=hooks.finalizer)


def _wrap_async_generator(func: Callable[..., AsyncGenerator[Any, Any]], spec: ToolSpec) -> Callable[..., Any]:
    @functools.wraps(func)
    async def wrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        runtime: Any = _state.active  # not None whenever call is not None
        call, tokens = start(spec, runtime, args, kwargs) if runtime is not None else (None, None)
        try:
            agen = func(*args, **kwargs)
        except BaseException as exc:
            if call is not None:
                finish(call, runtime, exc)
            raise
        finally:
            if tokens is not None:
                leave(tokens)
        to_send: Any = None
        to_throw: BaseException | None = None
        started = False
        while True:
            tokens = enter(call) if call is not None else None
            try:
                if to_throw is not None:
                    item = await agen.athrow(to_throw)
                elif not started:
                    started = True
                    item = await _first_asend(agen)
                else:
                    item = await agen.asend(to_send)
            except StopAsyncIteration:
                if call is not None:
                    finish(call, runtime, None, None)
                return
            except BaseException as exc:
                if call is not None:
                    finish(call, runtime, exc)
                raise
            finally:
                to_throw = None
                if tokens is not None:
                    leave(tokens)
            try:
                to_send = yield item
            except GeneratorExit:
                if call is None:
                    await agen.aclose()
                else:
                    await _aclose(call, runtime, agen)
                raise
            except BaseException as exc:
                to_throw, to_send = exc, None

    return wrapper


def _wrap(func: Callable[..., Any], spec: ToolSpec) -> Callable[..., Any]:
    if inspect.isasyncgenfunction(func):
        wrapper = _wrap_async_generator(func, spec)
    elif inspect.isgeneratorfunction(func):
        wrapper = _wrap_generator(func, spec)
    elif inspect.iscoroutinefunction(func):
        wrapper = _wrap_async(func, spec)
    else:
        wrapper = _wrap_sync(func, spec)
    setattr(wrapper, SPEC_ATTRIBUTE, spec)
    return wrapper


@overload
def instrument_tool(func: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def instrument_tool(
    *,
    name: str | None = None,
    kind: str | None = None,
    read_only: bool | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    readback: ReadbackFn | None = None,
    outcome: OutcomeFn | None = None,
    outcomes: Iterable[str] = (),
    record_arguments: Iterable[str] = (),
    exceptions: Mapping[type[BaseException], str] | None = None,
    readback_timeout: float | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def instrument_tool(func: Any = None, /, **options: Any) -> Any:
    """Record every call of a tool as an ``execute_tool {name}`` span and in the tool counters.

    Parameters:
        name: the tool name on spans and metric labels (default: the function's ``__name__``).
        kind: ``read``, ``write``, ``send`` or ``delegate``. Default ``write`` (or ``read`` when
            ``read_only=True``): an undeclared tool is assumed to change something, so its
            read-back shows ``skipped`` rather than a reassuring ``not_applicable``.
        read_only, destructive, idempotent: the MCP-style hints; defaults follow ``kind``.
        readback: ``readback(call, result)`` run after a write returned; True/False (or a
            :class:`Readback`) for match/mismatch. ``call.arguments`` holds the bound arguments.
            If it raises, the read-back is ``error`` and the tool's result is untouched.
        readback_timeout: seconds the call waits for its read-back (default ``math.inf``: unbounded,
            in the tool's own thread). With a bound the read-back runs on a telemetry thread, in the
            call's context; one that does not answer in time is ``error`` with
            ``tool.readback.error="timeout"`` (counted in
            ``outcome_telemetry_internal_errors_total{stage="readback"}``) and the result goes back
            unchanged. Not for a read-back bound to the tool's thread (a ``sqlite3`` connection made there).
        outcome: ``outcome(call, result)`` returning an outcome code (or None to keep the one
            derived from the result); it overrides everything else.
        outcomes: extra outcome codes this tool may report; others become ``other`` on labels.
        record_arguments: argument names whose values go on the span (``tool.argument.NAME``),
            redacted when they look secret and capped in length. Nothing is recorded by default.
        exceptions: ``{ExceptionClass: "outcome_code"}`` for exceptions that are the tool's
            answer rather than a failure to run (a framework's "ask the model to retry"): such an
            exception (or a subclass; the nearest class wins) is recorded as transport ``ok``
            with that outcome, and still propagates unchanged. The codes count as declared
            ``outcomes``. Checked at decoration time.

    The options are :class:`ToolOptions`' fields (the keyword overload above spells them out for
    type checkers and editors). Works bare (``@instrument_tool``) and called (``@instrument_tool(kind="read")``), on
    functions, methods, ``classmethod`` and ``staticmethod`` objects.
    """
    if isinstance(func, str):
        option = "kind" if func in c.KINDS else "name"
        raise ConfigurationError(
            f"instrument_tool got the string {func[:60]!r} as its first argument; options are keywords: "
            f"write @instrument_tool({option}={func[:60]!r})"
        )
    declared = ToolOptions.from_mapping(options, where="instrument_tool")
    if func is not None:
        return instrument_with(func, declared)
    return lambda target: instrument_with(target, declared)


def instrument_with(target: Any, options: ToolOptions) -> Any:
    """Instrument ``target`` with ``options`` already gathered: the one place that wraps.

    :func:`instrument_tool`, ``telemetry.mcp`` and the framework integrations all end here.
    """
    if isinstance(target, (classmethod, staticmethod)):
        inner = target.__func__
        return type(target)(_wrap(inner, build_spec(inner, options)))
    if hasattr(target, SPEC_ATTRIBUTE):
        raise ConfigurationError(
            f"{getattr(target, '__name__', target)!r} is already instrumented; apply @instrument_tool once"
        )
    if not callable(target):
        raise ConfigurationError(
            f"instrument_tool decorates functions, got {target!r}. If another decorator turned the "
            f"function into a registration object, put @instrument_tool below it (closest to def)."
        )
    return _wrap(target, build_spec(target, options))
