"""Open and close the span of one call, classify it, and count it.

:func:`begin` and :func:`finish` are the only per-call telemetry work; the four wrappers in
``decorator.py`` call them around the tool. Neither ever raises: every failure (a span processor
that throws, a read-back that throws, a counter) is contained by ``_safe.report`` and the tool's
own result or exception goes back to the caller untouched.
"""

from __future__ import annotations

import json
import time
from contextvars import Token
from typing import TYPE_CHECKING, Any, Literal

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from .. import conventions as c
from ..envelopes import error_facts
from ..runtime import _containment as _safe
from ._bounded import MAX_THREADS, run_bounded
from ._call import Call, _current
from ._classify import OK, error_type_of, readback_value
from ._context import AgentContext, _current_agent, _current_call_id
from ._redact import is_secret_name, redact

if TYPE_CHECKING:
    from ..runtime import Runtime
    from ._spec import ToolSpec

_Tokens = tuple["Token[Any] | None", "Token[Call]"]
_perf = time.perf_counter
_ERROR = StatusCode.ERROR


def _cap(text: str) -> str:
    limit = c.MAX_ATTRIBUTE_LENGTH
    return text if len(text) <= limit else text[: limit - 1] + "…"


def recordable(name: str, value: Any) -> Any:
    """An argument value as it may appear on a span: redacted, JSON-ish, length-capped."""
    if is_secret_name(name):
        return c.REDACTED
    if isinstance(value, bool) or isinstance(value, float):
        return value
    if isinstance(value, int):
        # OTLP carries int64; a bigger int would make the OTLP exporter drop the attribute.
        if c.INT64_MIN <= value <= c.INT64_MAX:
            return int(value)
        try:
            return _cap(str(value))
        except ValueError:  # beyond sys.get_int_max_str_digits()
            return f"<int of {value.bit_length()} bits>"
    if isinstance(value, str):
        return _cap(value)
    try:
        return _cap(json.dumps(redact(value), default=repr, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError):  # non-string keys, cycles: fall back to repr
        try:
            return _cap(repr(redact(value)))
        except Exception:
            return f"<{type(value).__name__}>"


def begin(spec: ToolSpec, runtime: Runtime, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Call:
    """Start the call's span (if the tracer allows) and return the call record."""
    span = None
    try:
        agent = _current_agent.get()
        call_id = _current_call_id.get()
        if agent is None and call_id is None:
            attributes = spec.static_attributes
        else:
            attributes = _start_attributes(spec, agent, call_id)
        span = runtime.tracer.start_span(spec.span_name, attributes=attributes)
    except Exception as exc:
        _safe.report(c.STAGE_SPAN, "starting a tool span", exc)
    call = Call(spec, args, kwargs, span)
    if spec.record_arguments and span is not None:
        _record_arguments(spec, call)
    call.started = _perf()
    return call


def _start_attributes(spec: ToolSpec, agent: AgentContext | None, call_id: str | None) -> dict[str, Any]:
    """The span's start attributes inside an agent block or with a tool-call id.

    Without a call id (which changes with every call) the attributes depend only on the agent
    context, one object for a whole ``agent()`` block: the last one built is kept on the spec,
    as one (context, attributes) pair replaced whole, and used again while that same object is
    current. The dict is handed to the SDK, which copies it; nobody changes it afterwards.
    """
    if call_id is None:
        kept = spec.agent_attributes
        if kept[0] is agent:
            return kept[1]
    attributes = dict(spec.static_attributes)
    if agent is not None:
        if agent.agent_id:
            attributes[c.GEN_AI_AGENT_ID] = agent.agent_id
        if agent.conversation_id is not None:
            attributes[c.GEN_AI_CONVERSATION_ID] = agent.conversation_id
    if call_id is not None:
        attributes[c.GEN_AI_TOOL_CALL_ID] = call_id
    else:
        spec.keep_agent_attributes(agent, attributes)
    return attributes


def _record_arguments(spec: ToolSpec, call: Call) -> None:
    try:
        arguments = call.arguments
    except Exception as exc:  # the call does not bind to the signature: the tool will say so itself
        _safe.report(c.STAGE_ARGUMENTS, f"recording arguments of {spec.name}", exc)
        return
    for name in spec.record_arguments:
        if name in arguments:
            try:  # one odd value must not cost the others
                call.attributes[c.TOOL_ARGUMENT_PREFIX + name] = recordable(name, arguments[name])
            except Exception as exc:
                _safe.report(c.STAGE_ARGUMENTS, f"recording argument {name!r} of {spec.name}", exc)


def start(spec: ToolSpec, runtime: Runtime, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Call, _Tokens]:
    """:func:`begin` and :func:`enter`: what every wrapper does first."""
    call = begin(spec, runtime, args, kwargs)
    return call, enter(call)


class Running:
    """The tool's own code running as part of ``call``, as a ``with`` block the wrappers share.

    Inside, the call is current (for ``current_call()`` and as the parent of nested spans).
    Leaving by an exception finishes the call with it; the exception then propagates untouched
    (``__exit__`` never swallows it). A normal exit leaves finishing to the wrapper, which knows
    the result and hands it to :meth:`finish` inside the block; an exception :meth:`finish`
    itself re-raises (a BaseException from a read-back or classifier) leaves the block without
    finishing the call a second time.
    """

    __slots__ = ("_call", "_done", "_runtime", "_tokens")

    def __init__(self, call: Call, runtime: Runtime) -> None:
        self._call, self._runtime = call, runtime
        self._done = False

    def __enter__(self) -> Running:
        self._tokens = enter(self._call)
        return self

    def finish(self, result: Any) -> Any:
        """:func:`finish` the call with the tool's ``result`` (still current); return ``result``."""
        self._done = True
        return finish(self._call, self._runtime, None, result)

    def __exit__(self, exc_type: Any, exc: BaseException | None, traceback: Any) -> Literal[False]:
        if exc is not None and not self._done:
            finish(self._call, self._runtime, exc)
        leave(self._tokens)
        return False


def enter(call: Call) -> _Tokens:
    """Make the call current (for ``current_call()`` and as the parent of nested spans)."""
    otel_token = otel_context.attach(trace.set_span_in_context(call.span)) if call.span is not None else None
    return otel_token, _current.set(call)


def leave(tokens: _Tokens) -> None:
    """Undo :func:`enter`."""
    otel_token, call_token = tokens
    _current.reset(call_token)
    if otel_token is not None:
        otel_context.detach(otel_token)


class _Interrupted:
    """The first BaseException (KeyboardInterrupt, SystemExit, ...) raised by a user callback or
    a result's own code during :func:`finish`: kept until the span is ended and the call
    counted, then re-raised unchanged."""

    __slots__ = ("exc",)

    def __init__(self) -> None:
        self.exc: BaseException | None = None

    def keep(self, exc: BaseException) -> None:
        if self.exc is None:
            self.exc = exc


def _run_user(
    stage: str, what: str, fn: Any, call: Call, result: Any, interrupted: _Interrupted
) -> tuple[bool, Any]:
    """``fn(call, result)``, contained. A failure is reported as ``what`` + the tool's name, a
    string built only then: a call that succeeds formats nothing."""
    try:
        return True, fn(call, result)
    except Exception as exc:
        _safe.report(stage, f"{what} {call.spec.name}", exc)
        return False, None
    except BaseException as exc:
        interrupted.keep(exc)
        return False, None


def _outcome_text(what: str, call: Call, value: Any) -> str | None:
    """``value`` as an outcome code; None (keep the derived one) when it cannot be made a string.

    ``what`` + the tool's name says where the value came from, in a report made only on failure.
    """
    if isinstance(value, str):
        return value
    try:
        return str(value)
    except Exception as exc:
        _safe.report(c.STAGE_OUTCOME, f"{what} {call.spec.name}", exc)
        return None


def _describe(exc: BaseException, error_type: str) -> str:
    """The span status description of an exception, even when its ``__str__`` raises."""
    try:
        return _cap(f"{error_type}: {exc}")
    except Exception:
        return error_type


def finish(call: Call, runtime: Runtime, exc: BaseException | None, result: Any = None) -> Any:
    """Classify the call, end its span and count it; return ``result``. Never raises.

    Whatever fails along the way (an unreadable result, a raising callback, the span API), the
    span is still ended and the call still counted, with what could be decided. The one
    exception: a read-back, a classifier or a result that raises a BaseException (Ctrl-C during
    a read-back, ``sys.exit`` in a classifier) is re-raised unchanged, after the span is ended
    and the call counted, because the caller must get it.
    """
    interrupted = _finish(call, runtime, exc, result)  # contains its own failures
    if interrupted is not None and interrupted.exc is not None:
        raise interrupted.exc
    return result


def _finish(call: Call, runtime: Runtime, exc: BaseException | None, result: Any) -> _Interrupted | None:
    """:func:`finish`'s work; the BaseExceptions kept to re-raise (None when nothing could raise one).

    A call that returned pays only for what its tool can do: the user callbacks (and the
    keeper of what they raise) only where the tool declared them.
    """
    spec = call.spec
    elapsed = _perf() - call.started
    status_code: int | None = None
    error_type: str | None = None
    interrupted: _Interrupted | None = None
    told = True  # the caller was told of any failure (an exception, an envelope, a non-2xx)
    if exc is not None:
        mapped = spec.exception_outcome(exc)
        transport = c.TRANSPORT_ERROR if mapped is None else c.TRANSPORT_OK
        outcome = c.OUTCOME_ERROR if mapped is None else mapped
        readback = c.READBACK_NOT_APPLICABLE if spec.read_only else c.READBACK_SKIPPED
        error_type = error_type_of(exc)
    else:
        try:
            transport, outcome, status_code = spec.classify(result)
        except Exception as failure:  # a result whose .get, __getattr__ or properties raise
            _safe.report(c.STAGE_CLASSIFIER, f"classifying a result of {spec.name}", failure)
            transport, outcome, status_code = OK
        except BaseException as stop:
            interrupted = _Interrupted()
            interrupted.keep(stop)
            transport, outcome, status_code = OK
        told = outcome != c.OUTCOME_OK  # ResultClass.reported_failure
        if told and call.span is not None:  # an error result: what it offers the model (a success pays nothing)
            interrupted = _record_error_facts(call, result, outcome, interrupted)
        if call.outcome is not None:
            outcome = _outcome_text("the outcome set inside", call, call.outcome) or outcome
        if spec.outcome is not None:
            interrupted = interrupted or _Interrupted()
            ok, chosen = _run_user(
                c.STAGE_CLASSIFIER, "the outcome classifier of", spec.outcome, call, result, interrupted
            )
            if ok and chosen is not None:
                outcome = _outcome_text("the outcome classifier of", call, chosen) or outcome
        declared = call.readback  # set_readback() inside the tool wins
        if declared is not None:
            readback = declared
        elif spec.read_only:
            readback = c.READBACK_NOT_APPLICABLE
        elif spec.readback is None or transport != c.TRANSPORT_OK or outcome in c.REFUSAL_OUTCOMES:
            readback = c.READBACK_SKIPPED
        else:
            interrupted = interrupted or _Interrupted()
            readback = _readback(spec, call, result, interrupted)
        if readback == c.READBACK_MISMATCH and outcome == c.OUTCOME_OK:
            outcome = c.OUTCOME_READBACK_MISMATCH
    silent = not told and outcome not in _NOT_SILENT  # silent_failure(told, outcome), inline
    shown = outcome if len(outcome) <= c.MAX_ATTRIBUTE_LENGTH else _cap(outcome)  # the span keeps the real code
    if exc is None and outcome != c.OUTCOME_OK:
        error_type = str(status_code) if outcome == c.OUTCOME_ERROR and status_code else shown
    span = call.span
    if span is not None:
        try:
            attributes: dict[str, Any] = call.attributes
            attributes[c.TOOL_TRANSPORT] = transport
            attributes[c.TOOL_READBACK] = readback
            attributes[c.TOOL_OUTCOME] = shown
            attributes[c.TOOL_SILENT_FAILURE] = silent
            if status_code is not None:
                attributes[c.HTTP_RESPONSE_STATUS_CODE] = status_code
            if error_type is not None:
                attributes[c.ERROR_TYPE] = error_type
            if call.replayed:
                attributes[c.TOOL_DEDUPLICATED] = True
            span.set_attributes(attributes)
            if exc is not None:
                span.set_status(Status(_ERROR, _describe(exc, error_type or "")))
                span.record_exception(exc)
            elif outcome != c.OUTCOME_OK:
                span.set_status(Status(_ERROR, shown))
        except Exception as failure:
            _safe.report(c.STAGE_SPAN, "recording a tool span", failure)
        try:
            span.end()
        except Exception as failure:
            _safe.report(c.STAGE_SPAN, "ending a tool span", failure)
    try:
        _count(runtime, spec, call, transport, readback, outcome, elapsed, silent)
    except Exception as failure:
        _safe.report(c.STAGE_METRICS, "counting a tool call", failure)
    return interrupted


def _record_error_facts(call: Call, result: Any, outcome: str, interrupted: _Interrupted | None) -> _Interrupted | None:
    """Put what an error result offers the model on the call's span: its code, the retry advice,
    the recovery path, exception text (``telemetry.envelopes.error_facts``; no content is kept)."""
    try:
        facts = error_facts(result, outcome)
    except Exception as failure:  # a result whose properties raise: recorded without the facts
        _safe.report(c.STAGE_CLASSIFIER, f"reading the error result of {call.spec.name}", failure)
        return interrupted
    except BaseException as stop:
        interrupted = interrupted or _Interrupted()
        interrupted.keep(stop)
        return interrupted
    attributes = call.attributes
    if facts.code is not None:
        attributes[c.TOOL_ERROR_CODE] = facts.code
    attributes[c.TOOL_ERROR_RETRY] = facts.retry
    if facts.retry_after_seconds is not None:
        attributes[c.TOOL_ERROR_RETRY_AFTER_SECONDS] = facts.retry_after_seconds
    attributes[c.TOOL_ERROR_RECOVERY] = facts.recovery
    if facts.exception_text:
        attributes[c.TOOL_ERROR_EXCEPTION_TEXT] = True
    return interrupted


_NOT_SILENT = frozenset({c.OUTCOME_OK, c.OUTCOME_FORCED})


def silent_failure(told: bool, outcome: str) -> bool:
    """Whether a call is a silent failure: the caller was told "done" and the outcome is not ok.

    ``told`` is whether the result (or an exception) itself reported failure; the outcome is the
    final one, after read-back, an ``outcome=`` callable and ``set_outcome``. An operator's
    ``forced`` write is a deliberate, counted bypass, not a failure.
    """
    return not told and outcome not in _NOT_SILENT


def _readback(spec: ToolSpec, call: Call, result: Any, interrupted: _Interrupted) -> str:
    """The user's read-back of a write that returned ok (the caller checked that one applies):
    on a read-back thread, waited for up to the tool's ``readback_timeout`` (``_bounded``), or in
    this thread when the tool asked for no bound. Every ``error`` says why in ``tool.readback.error``."""
    answered: bool | None
    if spec.readback_timeout == _INF:
        answered, value = _run_user(c.STAGE_READBACK, "the read-back of", spec.readback, call, result, interrupted)
    else:
        answered, value = _bounded_readback(spec, call, result, interrupted)
        if answered is None:
            return c.READBACK_ERROR
    if not answered:
        call.attributes[c.TOOL_READBACK_ERROR] = c.READBACK_ERROR_RAISED
        return c.READBACK_ERROR
    try:
        return readback_value(value)
    except Exception as exc:  # ValueError for an unknown value; anything from an odd object
        _safe.report(c.STAGE_READBACK, f"the read-back of {spec.name}", exc)
        call.attributes[c.TOOL_READBACK_ERROR] = c.READBACK_ERROR_RAISED
        return c.READBACK_ERROR
    except BaseException as stop:
        interrupted.keep(stop)
        return c.READBACK_ERROR


_INF = float("inf")


def _bounded_readback(spec: ToolSpec, call: Call, result: Any, interrupted: _Interrupted) -> tuple[bool | None, Any]:
    """:func:`_run_user` of the read-back on a read-back thread: (True, value), (False, None) when
    it raised (reported), (None, None) when it timed out or found no thread (reported and recorded)."""
    try:
        ended, value = run_bounded(spec.readback, (call, result), spec.readback_timeout)  # type: ignore[arg-type]
    except BaseException as stop:  # Ctrl-C while waiting: the caller gets it once the call is counted
        interrupted.keep(stop)
        return None, None
    if ended == "returned":
        return True, value
    if ended == "raised":
        if isinstance(value, Exception):
            _safe.report(c.STAGE_READBACK, f"the read-back of {spec.name}", value)
        else:
            interrupted.keep(value)
        return False, None
    reason = c.READBACK_ERROR_TIMEOUT if ended == "timeout" else c.READBACK_ERROR_NO_THREAD
    call.attributes[c.TOOL_READBACK_ERROR] = reason
    why = (f"it did not answer within readback_timeout={spec.readback_timeout:g} s" if ended == "timeout"
           else f"all {MAX_THREADS} read-back threads are held by read-backs that never returned")
    _safe.report(c.STAGE_READBACK, f"the read-back of {spec.name}",
                 TimeoutError(f"read-back of {spec.name} not waited for: {why}; the tool's result went back as it was"))
    return None, None


def _count(
    runtime: Runtime, spec: ToolSpec, call: Call, transport: str, readback: str, outcome: str, elapsed: float, silent: bool
) -> None:
    series = runtime.metrics.tool(spec.name)
    exemplar = None
    span = call.span
    if span is not None:
        ctx = span.get_span_context()
        if ctx.trace_flags.sampled:
            exemplar = {c.EXEMPLAR_TRACE_ID: format(ctx.trace_id, "032x")}
    label = outcome if outcome in spec.label_outcomes else c.OUTCOME_OTHER  # spec.outcome_label(outcome)
    series.calls(transport, readback, label).inc(1, exemplar)
    series.duration.observe(elapsed)
    if silent:
        series.silent(label).inc(1, exemplar)
    if outcome in c.REFUSAL_OUTCOMES:
        series.refused(outcome).inc()
        if outcome == c.OUTCOME_STALE_POLICY:
            series.stale_sends.inc()
    if call.waivers:
        series.waivers.inc(call.waivers)
    if call.replayed:
        series.replays.inc()
