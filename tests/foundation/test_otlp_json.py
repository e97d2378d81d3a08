"""The OTLP JSON encoder against the parts of the OTLP/JSON spec a simple tool span does not reach."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.trace import Link, SpanContext, TraceFlags, TraceState

from telemetry.runtime._otlp_json import encode_traces_data


def _encode(**span_kwargs: Any) -> dict[str, Any]:
    provider = TracerProvider(span_limits=SpanLimits(max_event_attributes=1, max_link_attributes=1))
    tracer = provider.get_tracer("scope", "1.0", schema_url="https://opentelemetry.io/schemas/1.26.0", attributes={"scope.attr": "x"})
    span = tracer.start_span("s", **span_kwargs)
    span.add_event("e", {"a": 1, "b": 2})
    span.end()
    return encode_traces_data([span])  # type: ignore[list-item]


def test_links_carry_flags_trace_state_and_dropped_counts() -> None:
    """A link has its W3C flags with the is-remote bits, its tracestate, and its dropped attribute count."""
    linked = SpanContext(
        trace_id=0xABC, span_id=0xDEF, is_remote=True, trace_flags=TraceFlags(1), trace_state=TraceState([("k", "v")])
    )
    data = _encode(links=[Link(linked, {"x": 1, "y": 2})])
    scope_spans = data["resourceSpans"][0]["scopeSpans"][0]
    link = scope_spans["spans"][0]["links"][0]
    assert link["traceId"] == format(0xABC, "032x") and link["spanId"] == format(0xDEF, "016x")
    assert link["flags"] == 0x1 | 0x100 | 0x200
    assert link["traceState"] == "k=v"
    assert link["droppedAttributesCount"] == 1


def test_events_and_scope_are_complete() -> None:
    """An event reports attributes dropped by span limits; the scope keeps its attributes and schema URL."""
    data = _encode()
    scope_spans = data["resourceSpans"][0]["scopeSpans"][0]
    assert scope_spans["scope"] == {"name": "scope", "version": "1.0", "attributes": [{"key": "scope.attr", "value": {"stringValue": "x"}}]}
    assert scope_spans["schemaUrl"] == "https://opentelemetry.io/schemas/1.26.0"
    event = scope_spans["spans"][0]["events"][0]
    assert event["droppedAttributesCount"] == 1 and len(event["attributes"]) == 1


def test_int_beyond_int64_is_not_written_as_an_int_value() -> None:
    """intValue is an int64; a larger Python int is written as its decimal text, never an invalid intValue."""
    data = _encode(attributes={"big": 2**64, "edge": 2**63 - 1, "neg": -(2**63)})
    attrs = {a["key"]: a["value"] for a in data["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]}
    assert attrs["big"] == {"stringValue": str(2**64)}
    assert attrs["edge"] == {"intValue": str(2**63 - 1)} and attrs["neg"] == {"intValue": str(-(2**63))}
