"""A span exporter that writes what the OpenTelemetry Collector's ``file`` exporter writes.

Each ``export`` call appends one line: a ``TracesData`` JSON object (``{"resourceSpans": [...]}``)
in the OTLP/JSON encoding: lowerCamelCase field names, trace and span ids as lower-case hex (not
protobuf JSON's base64), 64-bit integers as decimal strings, enums as integers, the status as
``{"code": 1|2}`` or omitted, default values left out.

It is written here rather than imported from ``telemetry.runtime._otlp_json`` on purpose: the files
it writes are the input of the project's reader, so they should not share its encoder's mistakes,
and the peers' stories should not need the package under test to import.
"""

from __future__ import annotations

import base64
import json
import math
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = ["CollectorFileExporter", "encode_spans"]

_INT64 = (-(2**63), 2**63 - 1)
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200  # OTLP span flags bits 8 and 9


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)} if _INT64[0] <= value <= _INT64[1] else {"stringValue": str(value)}
    if isinstance(value, float):
        if math.isfinite(value):
            return {"doubleValue": value}
        return {"doubleValue": "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}
    if isinstance(value, (bytes, bytearray)):
        return {"bytesValue": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, Mapping):
        return {"kvlistValue": {"values": _attributes(value)}}
    if isinstance(value, Sequence):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {} if value is None else {"stringValue": str(value)}


def _attributes(attributes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in (attributes or {}).items()]


def _span(span: ReadableSpan) -> dict[str, Any]:
    ctx = span.get_span_context()
    assert ctx is not None
    out: dict[str, Any] = {"traceId": format(ctx.trace_id, "032x"), "spanId": format(ctx.span_id, "016x")}
    if ctx.trace_state:
        out["traceState"] = ctx.trace_state.to_header()
    flags = int(ctx.trace_flags) | _HAS_IS_REMOTE
    if span.parent is not None:
        out["parentSpanId"] = format(span.parent.span_id, "016x")
        flags |= _IS_REMOTE if span.parent.is_remote else 0
    out.update(flags=flags, name=span.name, kind=span.kind.value + 1,  # SDK INTERNAL=0..; OTLP INTERNAL=1..
               startTimeUnixNano=str(span.start_time or 0), endTimeUnixNano=str(span.end_time or 0))
    if span.attributes:
        out["attributes"] = _attributes(span.attributes)
    if span.dropped_attributes:
        out["droppedAttributesCount"] = span.dropped_attributes
    if span.events:
        out["events"] = [{"timeUnixNano": str(e.timestamp), "name": e.name,
                          **({"attributes": _attributes(e.attributes)} if e.attributes else {})} for e in span.events]
    if span.links:
        out["links"] = [{"traceId": format(link.context.trace_id, "032x"), "spanId": format(link.context.span_id, "016x"),
                         **({"attributes": _attributes(link.attributes)} if link.attributes else {}),
                         "flags": int(link.context.trace_flags) | _HAS_IS_REMOTE | (_IS_REMOTE if link.context.is_remote else 0)}
                        for link in span.links]
    status: dict[str, Any] = {}
    if span.status.status_code.value:  # UNSET=0 is the default: omitted
        status["code"] = span.status.status_code.value
    if span.status.description:
        status["message"] = span.status.description
    if status:
        out["status"] = status
    return out


def encode_spans(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """One ``TracesData`` object: ``spans`` grouped by resource, then by instrumentation scope."""
    resources: dict[int, tuple[Any, dict[Any, tuple[Any, list[ReadableSpan]]]]] = {}
    for span in spans:
        _, scopes = resources.setdefault(id(span.resource), (span.resource, {}))
        scope = span.instrumentation_scope
        key = (scope.name, scope.version, scope.schema_url, repr(scope.attributes)) if scope else None
        scopes.setdefault(key, (scope, []))[1].append(span)
    resource_spans = []
    for resource, scopes in resources.values():
        scope_spans = []
        for scope, members in scopes.values():
            entry: dict[str, Any] = {}
            if scope is not None:
                entry["scope"] = {"name": scope.name, **({"version": scope.version} if scope.version else {}),
                                  **({"attributes": _attributes(scope.attributes)} if scope.attributes else {})}
                if scope.schema_url:
                    entry["schemaUrl"] = scope.schema_url
            entry["spans"] = [_span(s) for s in members]
            scope_spans.append(entry)
        rs: dict[str, Any] = {"resource": {"attributes": _attributes(resource.attributes)}}
        if resource.schema_url:
            rs["schemaUrl"] = resource.schema_url
        rs["scopeSpans"] = scope_spans
        resource_spans.append(rs)
    return {"resourceSpans": resource_spans}


class CollectorFileExporter(SpanExporter):
    """Append each batch of spans to ``path`` as one OTLP JSON ``TracesData`` line (the file starts empty)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("")
        self._lock = threading.Lock()
        self._closed = False
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._closed:
            return SpanExportResult.FAILURE
        if not spans:
            return SpanExportResult.SUCCESS
        line = json.dumps(encode_spans(list(spans)), separators=(",", ":"))
        with self._lock, self.path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")
            self.exported += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._closed = True

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
