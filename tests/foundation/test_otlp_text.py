"""The file exporter's text encoder parses to exactly what the reference dict encoder produces."""

from __future__ import annotations

import json
import math
from typing import Any

from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from telemetry.runtime import _otlp_text as otlp_text
from telemetry.runtime._otlp_json import encode_traces_data
from telemetry.runtime._otlp_text import encode_line


def _same(spans: list[ReadableSpan]) -> dict[str, Any]:
    """Encode both ways; assert the parsed documents are equal (NaN compared as NaN) and valid OTLP."""
    text = encode_line(spans)
    reference = json.dumps(encode_traces_data(spans))
    assert _canonical(json.loads(text)) == _canonical(json.loads(reference))
    json_format.Parse(text, ExportTraceServiceRequest())  # what the Collector's file format readers accept
    parsed: dict[str, Any] = json.loads(text)
    return parsed


def _canonical(value: Any) -> Any:
    """Parsed JSON with floats made comparable: NaN as a marker, -0.0 kept distinct from 0.0."""
    if isinstance(value, float):
        return ("float", "nan") if math.isnan(value) else ("float", value, math.copysign(1.0, value))
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def test_fast_path_reads_the_sdk_fields_it_expects() -> None:
    """The SDK still keeps spans' attributes, events and links where the fast path reads them.

    If this fails, an opentelemetry-sdk release renamed ``ReadableSpan._attributes._dict``,
    ``_events`` or ``_links``: the encoder has fallen back to the (slower) public properties;
    update ``otlp_text._span_parts`` and ``_probe``.
    """
    assert otlp_text.FAST_PATH


scalars = st.one_of(
    st.text(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
)
values = st.one_of(
    scalars,
    st.lists(st.text(), max_size=4).map(tuple),
    st.lists(st.booleans(), max_size=4).map(tuple),
    st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=4).map(tuple),
    st.lists(st.floats(allow_nan=True), max_size=4).map(tuple),
)
attribute_maps = st.dictionaries(st.text(min_size=1, max_size=12), values, max_size=8)

DETECTED = Resource.create()
"""What ``Resource.create`` detects (SDK and environment attributes), once: it runs the detectors
in a thread pool on every call, which cost each example more than the encoding it tests."""


@settings(max_examples=300, deadline=None)
@given(attributes=attribute_maps, event_attributes=attribute_maps, name=st.text(), message=st.text())
def test_any_attribute_values_encode_identically(
    attributes: dict[str, Any], event_attributes: dict[str, Any], name: str, message: str
) -> None:
    """Any attribute values the SDK accepts (text with escapes, huge ints, NaN, -0.0, arrays) match (lone surrogates: below)."""
    provider = TracerProvider(resource=DETECTED.merge(Resource({"service.name": name or "svc"})))  # = Resource.create(...)
    tracer = provider.get_tracer("scope")
    first = tracer.start_span(name, attributes=attributes)
    first.add_event(name, event_attributes)
    first.set_status(Status(StatusCode.ERROR, message))
    first.end()
    second = tracer.start_span("again", attributes=attributes)  # the same values again: from the cache
    second.end()
    _same([first, second])  # type: ignore[list-item]
    _same([second])  # type: ignore[list-item]


def test_repeated_values_of_equal_but_different_types_stay_apart() -> None:
    """True, 1 and 1.0 (equal in Python) and 0.0, -0.0 keep their own encodings when cached."""
    tracer = TracerProvider().get_tracer("t")
    spans = []
    for value in (True, 1, 1.0, 0.0, -0.0, False, 0, 1, True, -0.0):
        span = tracer.start_span("s", attributes={"k": value})
        span.end()
        spans.append(span)
    data = _same(spans)  # type: ignore[arg-type]
    encoded = [s["attributes"][0]["value"] for s in data["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    assert encoded[:3] == [{"boolValue": True}, {"intValue": "1"}, {"doubleValue": 1.0}]
    assert math.copysign(1.0, encoded[4]["doubleValue"]) == -1.0


def test_every_span_field_encodes_identically() -> None:
    """Parents (remote or not), trace state, kinds, links, dropped counts, statuses, scopes and resources."""
    provider_a = TracerProvider(
        resource=Resource.create({"service.name": "a"}, schema_url="https://opentelemetry.io/schemas/1.26.0"),
        span_limits=SpanLimits(max_attributes=3, max_events=1, max_links=1, max_event_attributes=1, max_link_attributes=1),
    )
    provider_b = TracerProvider(resource=Resource.create({"service.name": "b"}))
    scoped = provider_a.get_tracer("lib", "2.0", schema_url="https://example.com/s", attributes={"scope.k": 1})
    plain = provider_b.get_tracer("other")
    remote = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1), trace_state=TraceState([("k", "v")]))
    local = SpanContext(0x123, 0x456, is_remote=False, trace_flags=TraceFlags(1))
    from opentelemetry import trace

    spans = []
    for i, kind in enumerate(SpanKind):
        parent = trace.set_span_in_context(trace.NonRecordingSpan(remote if i % 2 else local))
        span = scoped.start_span(
            f"s{i}", context=parent, kind=kind, attributes={"a": 1, "b": 2, "c": 3, "d": 4},
            links=[Link(remote, {"x": 1, "y": 2}), Link(local)],
        )
        span.add_event("e1", {"p": 1, "q": 2})
        span.add_event("e2")
        span.set_status(Status(StatusCode.OK) if i % 2 else Status(StatusCode.ERROR, "bad \"quoted\" \n line"))
        span.end()
        spans.append(span)
        other = plain.start_span(f"o{i}")
        other.end()
        spans.append(other)
    _same(spans)  # type: ignore[arg-type]


def test_a_span_that_recorded_an_exception_encodes_identically() -> None:
    """The exception event (type, message, a multi-line stack trace) round-trips."""
    tracer = TracerProvider().get_tracer("t")
    span = tracer.start_span("boom")
    try:
        raise ValueError("naïve \u2028 \x00 value")
    except ValueError as exc:
        span.record_exception(exc)
    span.end()
    _same([span])  # type: ignore[list-item]


def test_the_fragment_cache_stays_bounded() -> None:
    """Values that never repeat cannot grow the cache beyond its limit."""
    tracer = TracerProvider().get_tracer("t")
    for i in range(otlp_text.FRAGMENT_CACHE_SIZE + 100):
        span = tracer.start_span("s", attributes={"id": f"call-{i}"})
        span.end()
        encode_line([span])  # type: ignore[list-item]
    assert len(otlp_text._fragments) <= otlp_text.FRAGMENT_CACHE_SIZE


LONE_SURROGATES = st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff"])
hostile_text = st.lists(st.one_of(st.characters(), LONE_SURROGATES, st.just("\\")), max_size=12).map("".join)
"""Text with lone surrogates and backslashes in it (``st.text`` never yields a surrogate)."""


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [*_strings(k), *_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@settings(max_examples=200, deadline=None)
@given(key=hostile_text.filter(bool), value=hostile_text)
def test_lone_surrogates_become_replacement_characters_in_both_encoders(key: str, value: str) -> None:
    """Lone surrogates anywhere (keys, values, arrays, names, status) are written as U+FFFD by both
    encoders, surrogate pairs stay their character, and the line is ASCII (valid UTF-8) text."""
    tracer = TracerProvider().get_tracer("t")
    span = tracer.start_span(value or "s", attributes={key: value, "list": (value, "x")})
    span.add_event(value or "e", {key: value})
    span.set_status(Status(StatusCode.ERROR, value))
    span.end()
    data = _same([span])  # type: ignore[list-item]
    assert encode_line([span]).isascii()  # type: ignore[list-item]
    assert not [s for s in _strings(data) if any(0xD800 <= ord(ch) <= 0xDFFF for ch in s)]
    expected = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    assert data["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["status"].get("message", "") == expected
