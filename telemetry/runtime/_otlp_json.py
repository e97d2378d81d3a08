"""Encode SDK spans as OTLP JSON ``TracesData`` objects, as the OTLP file format specifies.

The rules (OTLP/JSON encoding, and what the Collector's ``file`` exporter writes): field names in
lowerCamelCase, trace and span ids as lower-case hex (not protobuf-JSON's base64), 64-bit integers
as decimal strings, enums as integers, default values omitted. Writing this directly from
``ReadableSpan`` is both simpler and several times faster than building protobuf messages and
re-encoding them with ``json_format`` (which would also need its base64 ids rewritten).

Every string is made valid Unicode text on the way in: a lone surrogate (which a Python string
may hold and UTF-8 cannot) becomes U+FFFD, a surrogate pair the character it spells, so
``json.dumps`` of the result is JSON that every reader, DuckDB included, accepts.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from .. import conventions as c

__all__ = ["encode_attributes", "encode_traces_data", "encode_value"]

_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200


def _valid_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (and a surrogate pair joined)."""
    if text.isascii():
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def encode_value(value: Any) -> dict[str, Any]:
    """Encode one attribute value as an OTLP ``AnyValue``."""
    if isinstance(value, str):
        return {"stringValue": _valid_text(value)}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        if c.INT64_MIN <= value <= c.INT64_MAX:
            return {"intValue": str(int(value))}
        return {"stringValue": str(value)}  # intValue is an int64; keep the number as text
    if isinstance(value, float):
        if math.isfinite(value):
            return {"doubleValue": value}
        return {"doubleValue": "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}
    if isinstance(value, (bytes, bytearray)):
        return {"bytesValue": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, Mapping):
        return {"kvlistValue": {"values": encode_attributes(value)}}
    if isinstance(value, Sequence):
        return {"arrayValue": {"values": [encode_value(v) for v in value]}}
    if value is None:
        return {}
    return {"stringValue": _valid_text(str(value))}


def encode_attributes(attributes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Encode a mapping as a list of OTLP ``KeyValue`` objects."""
    if not attributes:
        return []
    return [{"key": _valid_text(key) if isinstance(key, str) else key, "value": encode_value(value)}
            for key, value in attributes.items()]


def _flags(ctx: Any) -> int:
    """W3C trace flags plus the OTLP is-remote bits (HAS_IS_REMOTE, and IS_REMOTE when true)."""
    return int(ctx.trace_flags) | _HAS_IS_REMOTE | (_IS_REMOTE if ctx.is_remote else 0)


def _link(link: Any) -> dict[str, Any]:
    ctx = link.context
    out: dict[str, Any] = {"traceId": format(ctx.trace_id, "032x"), "spanId": format(ctx.span_id, "016x")}
    trace_state = ctx.trace_state.to_header() if ctx.trace_state else ""
    if trace_state:
        out["traceState"] = trace_state
    if link.attributes:
        out["attributes"] = encode_attributes(link.attributes)
    dropped = getattr(link, "dropped_attributes", 0)
    if dropped:
        out["droppedAttributesCount"] = dropped
    out["flags"] = _flags(ctx)
    return out


def _event(event: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"timeUnixNano": str(event.timestamp), "name": _valid_text(event.name)}
    if event.attributes:
        out["attributes"] = encode_attributes(event.attributes)
    dropped = getattr(event, "dropped_attributes", 0)
    if dropped:
        out["droppedAttributesCount"] = dropped
    return out


def _span(span: ReadableSpan) -> dict[str, Any]:
    ctx = span.get_span_context()
    assert ctx is not None  # an SDK span always has one
    out: dict[str, Any] = {
        "traceId": format(ctx.trace_id, "032x"),
        "spanId": format(ctx.span_id, "016x"),
    }
    trace_state = ctx.trace_state.to_header() if ctx.trace_state else ""
    if trace_state:
        out["traceState"] = trace_state
    flags = int(ctx.trace_flags) | _HAS_IS_REMOTE
    if span.parent is not None:
        out["parentSpanId"] = format(span.parent.span_id, "016x")
        if span.parent.is_remote:
            flags |= _IS_REMOTE
    out["flags"] = flags
    out["name"] = _valid_text(span.name)
    out["kind"] = span.kind.value + 1  # SDK INTERNAL=0 .. CONSUMER=4; OTLP INTERNAL=1 .. CONSUMER=5
    out["startTimeUnixNano"] = str(span.start_time or 0)
    out["endTimeUnixNano"] = str(span.end_time or 0)
    attributes = encode_attributes(span.attributes)
    if attributes:
        out["attributes"] = attributes
    if span.dropped_attributes:
        out["droppedAttributesCount"] = span.dropped_attributes
    if span.events:
        out["events"] = [_event(event) for event in span.events]
    if span.dropped_events:
        out["droppedEventsCount"] = span.dropped_events
    if span.links:
        out["links"] = [_link(link) for link in span.links]
    if span.dropped_links:
        out["droppedLinksCount"] = span.dropped_links
    status: dict[str, Any] = {}
    if span.status.status_code.value:
        status["code"] = span.status.status_code.value  # UNSET=0, OK=1, ERROR=2 in both
    if span.status.description:
        status["message"] = _valid_text(span.status.description)
    if status:
        out["status"] = status
    return out


def encode_traces_data(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """Group ``spans`` by resource and instrumentation scope into one ``TracesData`` object."""
    by_resource: dict[int, tuple[Any, dict[Any, tuple[Any, list[ReadableSpan]]]]] = {}
    for span in spans:
        resource_key = id(span.resource)
        if resource_key not in by_resource:
            by_resource[resource_key] = (span.resource, {})
        scope = span.instrumentation_scope
        scope_key = (scope.name, scope.version, scope.schema_url, id(scope.attributes)) if scope else None
        by_resource[resource_key][1].setdefault(scope_key, (scope, []))[1].append(span)
    resource_spans = []
    for resource, scopes in by_resource.values():
        scope_spans = []
        for scope, scope_members in scopes.values():
            entry: dict[str, Any] = {}
            if scope is not None:
                encoded_scope: dict[str, Any] = {"name": _valid_text(scope.name)}
                if scope.version:
                    encoded_scope["version"] = _valid_text(scope.version)
                if scope.attributes:
                    encoded_scope["attributes"] = encode_attributes(scope.attributes)
                entry["scope"] = encoded_scope
                if scope.schema_url:
                    entry["schemaUrl"] = _valid_text(scope.schema_url)
            entry["spans"] = [_span(s) for s in scope_members]
            scope_spans.append(entry)
        rs: dict[str, Any] = {"resource": {"attributes": encode_attributes(resource.attributes)}}
        if resource.schema_url:
            rs["schemaUrl"] = _valid_text(resource.schema_url)
        rs["scopeSpans"] = scope_spans
        resource_spans.append(rs)
    return {"resourceSpans": resource_spans}
