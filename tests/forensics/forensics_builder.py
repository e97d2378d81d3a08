"""Build OTLP JSON-lines trace files by hand for the forensics tests.

Small on purpose: each test states the spans it plants, and the builder writes them as real OTLP
JSON (``TracesData`` per line), with switches for the encoding quirks the spec allows, and
``no_silent_failure`` for spans as a writer from before ``tool.silent_failure`` wrote them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from telemetry import conventions as c

T0_S = 1_699_999_980
"""A minute boundary (divisible by 60), so contention buckets are predictable."""


def ns(seconds: float) -> int:
    """Nanoseconds since the epoch, ``seconds`` after T0."""
    return int((T0_S + seconds) * 1_000_000_000)


def hex_id(text: str, length: int) -> str:
    """A deterministic lower-case hex id of ``length`` characters derived from ``text``."""
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def any_value(value: Any, numbers_as_json: bool = False) -> dict[str, Any]:
    """Encode a Python value as an OTLP AnyValue."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": value if numbers_as_json else str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [any_value(v, numbers_as_json) for v in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": any_value(v)} for k, v in value.items()]}}
    return {"stringValue": str(value)}


@dataclass
class Span:
    run: str
    tool: str
    kind: str | None
    agent: str | None
    t: float
    attributes: dict[str, Any]
    outcome: str = c.OUTCOME_OK
    transport: str = c.TRANSPORT_OK
    conversation: bool = True
    serial: int = 0

    @property
    def trace_id(self) -> str:
        return hex_id("trace:" + self.run, 32)

    @property
    def span_id(self) -> str:
        return hex_id(f"span:{self.run}:{self.serial}", 16)


@dataclass
class TraceBuilder:
    """Collects spans and writes them as OTLP JSON lines."""

    spans: list[Span] = field(default_factory=list)

    def add(self, run: str, tool: str, kind: str | None, agent: str | None, t: float, *,
            outcome: str = c.OUTCOME_OK, transport: str = c.TRANSPORT_OK, conversation: bool = True,
            **attributes: Any) -> Span:
        """Plant one tool span; ``attributes`` use conventions constants via ``attrs()``."""
        span = Span(run, tool, kind, agent, t, dict(attributes.get("attrs", {})), outcome, transport,
                    conversation, len(self.spans))
        self.spans.append(span)
        return span

    def otlp_span(self, span: Span, quirks: frozenset[str]) -> dict[str, Any]:
        numbers = "numbers" in quirks
        attrs: dict[str, Any] = {c.GEN_AI_TOOL_NAME: span.tool, c.TOOL_KIND: span.kind,
                                 c.TOOL_TRANSPORT: span.transport, c.TOOL_OUTCOME: span.outcome,
                                 c.GEN_AI_OPERATION_NAME: c.OPERATION_EXECUTE_TOOL}
        if span.agent is not None:
            attrs[c.GEN_AI_AGENT_ID] = span.agent
        if span.conversation:
            attrs[c.GEN_AI_CONVERSATION_ID] = span.run
        if span.outcome != c.OUTCOME_OK:
            attrs[c.ERROR_TYPE] = span.outcome
        attrs[c.TOOL_SILENT_FAILURE] = False  # the decorator records it on every call, true or false
        attrs.update(span.attributes)
        if "no_silent_failure" in quirks:  # a writer from before the attribute, or another writer
            del attrs[c.TOOL_SILENT_FAILURE]
        if span.kind is None:  # another instrumentation's span: no tool.kind
            del attrs[c.TOOL_KIND]
        start, end = ns(span.t), ns(span.t) + 1_500_000
        trace_id, span_id = span.trace_id, span.span_id
        if "upper" in quirks:
            trace_id, span_id = trace_id.upper(), span_id.upper()
        out: dict[str, Any] = {
            "traceId": trace_id, "spanId": span_id, "name": c.SPAN_NAME_PREFIX + span.tool,
            "startTimeUnixNano": start if numbers else str(start),
            "endTimeUnixNano": end if numbers else str(end),
            "attributes": [{"key": k, "value": any_value(v, numbers)} for k, v in attrs.items()],
        }
        if "omit" not in quirks:
            out["parentSpanId"] = ""
            out["kind"] = "SPAN_KIND_INTERNAL" if "enum_names" in quirks else 1
            code = 2 if span.outcome != c.OUTCOME_OK else 0
            out["status"] = {"code": ("STATUS_CODE_ERROR" if code == 2 else "STATUS_CODE_UNSET")
                             if "enum_names" in quirks else code}
            if code == 2:
                out["status"]["message"] = span.outcome
        if "unknown" in quirks:
            out["flags"] = 257
            out["futureField"] = {"nested": [1, 2]}
        return out

    def lines(self, quirks: frozenset[str] = frozenset(), per_line: int = c.OTLP_SPANS_PER_LINE) -> list[str]:
        """The OTLP JSON lines, ``per_line`` spans each."""
        out = []
        for i in range(0, len(self.spans), per_line):
            chunk = self.spans[i:i + per_line]
            data: dict[str, Any] = {"resourceSpans": [{
                "resource": {"attributes": [{"key": c.SERVICE_NAME, "value": {"stringValue": "crew"}}]},
                "scopeSpans": [{"scope": {"name": c.INSTRUMENTATION_SCOPE, "version": "0.1.0"},
                                "spans": [self.otlp_span(s, quirks) for s in chunk]}],
            }]}
            if "unknown" in quirks:
                data["schemaUrl"] = "https://example.invalid/schema"
            out.append(json.dumps(data, separators=(",", ":")))
        return out

    def write(self, path: Path, quirks: frozenset[str] = frozenset(), per_line: int = c.OTLP_SPANS_PER_LINE) -> Path:
        """Write the spans to ``path`` and return it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line + "\n" for line in self.lines(quirks, per_line)), encoding="utf-8")
        return path


def attrs(**named: Any) -> dict[str, Any]:
    """Map conventions constant names (e.g. STATE_KEY) to values: attrs(STATE_KEY="k")."""
    return {getattr(c, name): value for name, value in named.items()}


def otlp_span_json(trace: str, span: str, parent: str, start: int, end: int, attributes: dict[str, Any]) -> dict[str, Any]:
    """One OTLP span with string attributes, as JSON-ready data."""
    return {"traceId": trace, "spanId": span, "parentSpanId": parent, "name": "x", "kind": 1,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(end),
            "attributes": [{"key": k, "value": {"stringValue": str(v)}} for k, v in attributes.items()]}


def service_line(service: str, spans: list[dict[str, Any]]) -> str:
    """One TracesData line holding ``spans`` of ``service``."""
    return json.dumps({"resourceSpans": [{"resource": {"attributes": [
        {"key": c.SERVICE_NAME, "value": {"stringValue": service}}]}, "scopeSpans": [{"spans": spans}]}]})
