"""Which instrumentation wrote a span, and where that format keeps a tool call's facts.

Teams already trace their agents with OpenInference, OpenLLMetry (traceloop), logfire, Langfuse,
MLflow or the OpenTelemetry GenAI instrumentations. Each marks a tool span its own way and keeps
the tool's name, input and result under its own keys. This module is the one description of
those formats in Python: :func:`tool_call_of` reads a span's attributes into a
:class:`PeerToolCall` for ``observe_tool_spans`` and the audit, and the forensics SQL
(``queries/spans.sql``) reads the same keys, checked against this table by the tests.

Like :mod:`telemetry.envelopes` it sits below the decorator and forensics: it imports only
:mod:`telemetry.conventions`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from . import conventions as c

__all__ = ["FORMATS", "PeerToolCall", "SpanFormat", "format_named", "span_format_of", "tool_call_of"]


@dataclass(frozen=True)
class SpanFormat:
    """One instrumentation's way of recording a tool call.

    ``marker`` and ``marker_value``: the attribute that makes a span a tool span in this format.
    The key tuples are tried in order; the first present wins. ``content_setting`` says how to
    make the format record arguments and results (several keep them off by default);
    ``cannot_tell`` what a trace in this format can never show.
    """

    name: str
    marker: str
    marker_value: str
    tool_name: tuple[str, ...]
    arguments: tuple[str, ...]
    result: tuple[str, ...]
    call_id: tuple[str, ...] = ()
    run: tuple[str, ...] = ()
    agent: tuple[str, ...] = ()
    content_setting: str = ""
    cannot_tell: str = ""


class PeerToolCall(NamedTuple):
    """A tool call read from a span another instrumentation wrote (any field may be None)."""

    format: str
    tool_name: str | None
    call_id: str | None
    run_id: str | None
    agent_id: str | None
    arguments: str | None
    result: str | None
    status_error: bool
    """The format's own tool status said error (Strands' ``gen_ai.tool.status``)."""


_NO_READBACK = "a read-back (state success): nothing read the state back, so tool.readback is unknown"

FORMATS: tuple[SpanFormat, ...] = (
    SpanFormat(
        name=c.FORMAT_GENAI,
        marker=c.GEN_AI_OPERATION_NAME,
        marker_value=c.OPERATION_EXECUTE_TOOL,
        tool_name=(c.GEN_AI_TOOL_NAME,),
        arguments=(c.GEN_AI_TOOL_CALL_ARGUMENTS, c.PYDANTIC_AI_TOOL_ARGUMENTS),
        result=(c.GEN_AI_TOOL_CALL_RESULT, c.PYDANTIC_AI_TOOL_RESPONSE),
        call_id=(c.GEN_AI_TOOL_CALL_ID,),
        run=(c.GEN_AI_CONVERSATION_ID,),
        agent=(c.GEN_AI_AGENT_ID, c.GEN_AI_AGENT_NAME),
        content_setting="content is opt-in: pydantic-ai InstrumentationSettings(include_content=True); "
                        "the genai-* instrumentations OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true",
        cannot_tell=_NO_READBACK,
    ),
    SpanFormat(
        name=c.FORMAT_OPENINFERENCE,
        marker=c.OPENINFERENCE_SPAN_KIND,
        marker_value=c.OPENINFERENCE_KIND_TOOL,
        tool_name=(c.OI_TOOL_NAME,),
        arguments=(c.OI_INPUT_VALUE,),
        result=(c.OI_OUTPUT_VALUE,),
        call_id=(c.OI_TOOL_CALL_ID,),
        run=(c.OI_SESSION_ID,),
        content_setting="recorded by default; OPENINFERENCE_HIDE_INPUTS / OPENINFERENCE_HIDE_OUTPUTS turn it off",
        cannot_tell=_NO_READBACK + "; the tool span holds no call id (taken from the parent LLM span when there)",
    ),
    SpanFormat(
        name=c.FORMAT_TRACELOOP,
        marker=c.TRACELOOP_SPAN_KIND,
        marker_value=c.TRACELOOP_KIND_TOOL,
        tool_name=(c.TRACELOOP_ENTITY_NAME,),
        arguments=(c.TRACELOOP_ENTITY_INPUT,),
        result=(c.TRACELOOP_ENTITY_OUTPUT,),
        content_setting="recorded by default; TRACELOOP_TRACE_CONTENT=false turns it off",
        cannot_tell=_NO_READBACK + "; no call id and no agent id",
    ),
    SpanFormat(
        name=c.FORMAT_LANGFUSE,
        marker=c.LANGFUSE_OBSERVATION_TYPE,
        marker_value=c.LANGFUSE_KIND_TOOL,
        tool_name=(),
        arguments=(c.LANGFUSE_OBSERVATION_INPUT,),
        result=(c.LANGFUSE_OBSERVATION_OUTPUT,),
        run=(c.LANGFUSE_SESSION_ID,),
        content_setting="recorded by default by @observe (capture_input / capture_output)",
        cannot_tell=_NO_READBACK + "; no call id; the tool name is the span name",
    ),
    SpanFormat(
        name=c.FORMAT_MLFLOW,
        marker=c.MLFLOW_SPAN_TYPE,
        marker_value=c.MLFLOW_KIND_TOOL,
        tool_name=(),
        arguments=(c.MLFLOW_SPAN_INPUTS,),
        result=(c.MLFLOW_SPAN_OUTPUTS,),
        run=(c.MLFLOW_TRACE_REQUEST_ID,),
        content_setting="recorded by default (span inputs and outputs)",
        cannot_tell=_NO_READBACK + "; no call id; the tool name is the span name",
    ),
)
"""Every peer format, in the order a span is tested against them (ours is told apart first)."""


def format_named(name: str) -> SpanFormat:
    """The format called ``name`` (one of ``telemetry.conventions.SPAN_FORMATS`` but ours)."""
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    raise KeyError(name)


def _plain(value: Any) -> Any:
    """A value as the format meant it: MLflow stores every attribute JSON-encoded (``"\\"TOOL\\""``)."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        try:
            decoded = json.loads(value)
        except ValueError:
            return value
        return decoded if isinstance(decoded, str) else value
    return value


def _first(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = attributes.get(key)
        if value is not None:
            value = _plain(value)
            return value if isinstance(value, str) else json.dumps(value, default=str)
    return None


def span_format_of(attributes: Mapping[str, Any]) -> SpanFormat | None:
    """The peer format that marks these attributes a tool span, or None (not a peer tool span).

    Spans our decorator wrote (they carry ``tool.transport``) are never a peer's, although they
    also carry the GenAI marker.
    """
    if c.TOOL_TRANSPORT in attributes:
        return None
    for fmt in FORMATS:
        value = attributes.get(fmt.marker)
        if value is not None and _plain(value) == fmt.marker_value:
            return fmt
    return None


def tool_call_of(span_name: str, attributes: Mapping[str, Any], fmt: SpanFormat | None = None) -> PeerToolCall | None:
    """The tool call a peer's span records, or None when no peer format marks it a tool span."""
    fmt = fmt or span_format_of(attributes)
    if fmt is None:
        return None
    name = _first(attributes, fmt.tool_name)
    if name is None:
        name = span_name.removeprefix(c.SPAN_NAME_PREFIX) if span_name else None
    status = attributes.get(c.GEN_AI_TOOL_STATUS)
    return PeerToolCall(
        format=fmt.name,
        tool_name=name,
        call_id=_first(attributes, fmt.call_id),
        run_id=_first(attributes, fmt.run),
        agent_id=_first(attributes, fmt.agent),
        arguments=_first(attributes, fmt.arguments),
        result=_first(attributes, fmt.result),
        status_error=isinstance(status, str) and status.lower() == "error",
    )
