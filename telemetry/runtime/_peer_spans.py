"""A span as it ends, read the way ``observe_tool_spans`` counts it: is it a peer's tool span, and what it says.

:func:`tool_format` runs on every span that ends on the provider, so it is a handful of dict
lookups on the SDK's own attribute dict: one per format's marker. :func:`read` runs on each peer
tool span and gives what the counters need (the tool's name, transport, outcome, whether the
tracer shows a failure green). Both are the long way's answers (:func:`telemetry._span_formats.span_format_of`,
:func:`~telemetry._span_formats.tool_call_of`, :func:`telemetry.envelopes.read_recorded`) taken
by a shorter road for the common case, a plain string attribute; anything else (MLflow's
JSON-encoded values, a non-string attribute) takes the long way itself.
tests/foundation/test_fast_paths.py holds the two to the same answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from .. import conventions as c
from .._span_formats import FORMATS, SpanFormat, span_format_of, tool_call_of
from ..envelopes import Recorded, RecordedVerdicts, Report

__all__ = ["UNREADABLE", "Reading", "read", "tool_format"]

UNREADABLE = "unreadable"
"""How a result whose judging raised was read (reported and counted; no verdict)."""
_UNREADABLE = Recorded(UNREADABLE, None)
_ERROR = StatusCode.ERROR
_EXCEPTION_EVENT = "exception"
_PREFIX = c.SPAN_NAME_PREFIX
# The conventions read on every peer tool span, bound once (a module attribute look-up each otherwise).
_TOOL_STATUS = c.GEN_AI_TOOL_STATUS
_ERROR_TYPE = c.ERROR_TYPE
_OK = c.OUTCOME_OK
_OUTCOME_ERROR = c.OUTCOME_ERROR
_TRANSPORT_OK = c.TRANSPORT_OK
_TRANSPORT_ERROR = c.TRANSPORT_ERROR
_NOT_MASKABLE = c.NOT_MASKABLE_OUTCOMES


Reading = tuple[str | None, str, str, bool, str, bool]
"""What one peer tool span says, as the counters take it (a plain tuple: one is made per tool span):
the tool's name, transport, outcome; whether the result reported a failure while the span's
status is OK or unset (masked); how the result was read (``judged``, ``text``, ``absent``,
``too_large``, :data:`UNREADABLE`); whether it was read to a verdict (a call without one is
counted by its transport alone)."""


def _tool_format_any(attributes: Mapping[str, Any]) -> SpanFormat | None:
    """The format that marks these attributes a tool span, or None; :func:`span_format_of`'s answer.

    The first marker present with its exact value decides (every format before it had no marker
    at all, so none of them could match); a marker whose value is JSON-encoded (MLflow's
    ``'"TOOL"'``) is left to :func:`span_format_of`.
    """
    get = attributes.get
    for fmt in FORMATS:
        found = get(fmt.marker)
        if found is not None:
            if found == fmt.marker_value:
                return fmt
            if type(found) is str and found[:1] == '"':
                return span_format_of(attributes)
    return None


def _tool_format_five(attributes: Mapping[str, Any]) -> SpanFormat | None:
    """:func:`_tool_format_any` unrolled for the five formats of today (no loop to run). Written
    with ``in`` and ``[]``, which cost less than a ``get`` method call: on a span with none of the
    markers (most spans) this is five containment checks."""
    if _M0 in attributes:
        found = attributes[_M0]
        if found == _V0:
            return _F0
        if type(found) is str and found[:1] == '"':
            return span_format_of(attributes)
    if _M1 in attributes:
        found = attributes[_M1]
        if found == _V1:
            return _F1
        if type(found) is str and found[:1] == '"':
            return span_format_of(attributes)
    if _M2 in attributes:
        found = attributes[_M2]
        if found == _V2:
            return _F2
        if type(found) is str and found[:1] == '"':
            return span_format_of(attributes)
    if _M3 in attributes:
        found = attributes[_M3]
        if found == _V3:
            return _F3
        if type(found) is str and found[:1] == '"':
            return span_format_of(attributes)
    if _M4 in attributes:
        found = attributes[_M4]
        if found == _V4:
            return _F4
        if type(found) is str and found[:1] == '"':
            return span_format_of(attributes)
    return None


if len(FORMATS) == 5:
    _F0, _F1, _F2, _F3, _F4 = FORMATS
    (_M0, _V0), (_M1, _V1), (_M2, _V2), (_M3, _V3), (_M4, _V4) = ((f.marker, f.marker_value) for f in FORMATS)
    tool_format = _tool_format_five
else:  # a format was added to telemetry._span_formats: the loop serves until this is unrolled again
    tool_format = _tool_format_any


def _says_error(tool_status: Any) -> bool:
    """Whether Strands' ``gen_ai.tool.status`` says the call failed."""
    return isinstance(tool_status, str) and tool_status.lower() == "error"


def _raised(span: ReadableSpan) -> bool:
    """Whether the span carries an ``exception`` event (the SDK's own list, not a copy, when it can)."""
    try:  # the deque inside the SDK's BoundedList: its length without a Python-level __len__
        events = span._events._dq  # type: ignore[attr-defined]
    except AttributeError:
        events = span.events
    return bool(events) and any(event.name == _EXCEPTION_EVENT for event in events)


def _name_and_result(span: ReadableSpan, attributes: Mapping[str, Any], fmt: SpanFormat) -> tuple[str | None, str | None]:
    """The tool's name and recorded result, as :func:`tool_call_of` reads them."""
    get = attributes.get
    name = result = None
    for key in fmt.tool_name:
        name = get(key)
        if name is not None:
            break
    for key in fmt.result:
        result = get(key)
        if result is not None:
            break
    if (name is None or (type(name) is str and name[:1] != '"')) and (
        result is None or (type(result) is str and result[:1] != '"')
    ):
        if name is None:
            span_name = span.name
            name = span_name.removeprefix(_PREFIX) if span_name else None
        return name, result
    call = tool_call_of(span.name, attributes, fmt)  # a JSON-encoded or non-string value: the long way
    assert call is not None
    return call.tool_name, call.result


def read(
    span: ReadableSpan,
    attributes: Mapping[str, Any],
    fmt: SpanFormat,
    verdicts: RecordedVerdicts,
    report: Report,
    unreadable: Report,
) -> Reading:
    """What the peer tool span ``span`` (of format ``fmt``) says.

    ``report`` is told of a registered shape that raised (the built-in rules then decide);
    ``unreadable`` of judging itself raising, after which the call has no verdict.
    """
    name, result = _name_and_result(span, attributes, fmt)
    try:
        status = span._status  # type: ignore[attr-defined]  # the SDK's field behind the property
    except AttributeError:
        status = span.status
    status_error = status is not None and status.status_code is _ERROR
    transport_error = (
        status_error
        or _ERROR_TYPE in attributes
        or (_TOOL_STATUS in attributes and _says_error(attributes[_TOOL_STATUS]))
        or _raised(span)
    )
    try:
        recorded = verdicts.read(result, report)
    except Exception as exc:
        unreadable(exc)
        recorded = _UNREADABLE
    verdict = recorded.verdict
    if verdict is not None:
        outcome = verdict.outcome
        if outcome != _OK:
            return (
                name,
                _TRANSPORT_ERROR if transport_error else verdict.transport,
                outcome,
                not status_error and outcome not in _NOT_MASKABLE,
                recorded.status,
                True,
            )
    if transport_error:
        return name, _TRANSPORT_ERROR, _OUTCOME_ERROR, False, recorded.status, verdict is not None
    return name, _TRANSPORT_OK, _OK, False, recorded.status, verdict is not None
