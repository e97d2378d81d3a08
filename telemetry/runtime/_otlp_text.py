"""Encode SDK spans straight to OTLP JSON text, for the file exporter's batch thread.

:mod:`._otlp_json` builds ``TracesData`` as dicts, which is easy to read but slow per span once
``json.dumps`` has walked them (``benchmarks/bench_encoder.py`` compares the two). This module writes the same document as text: each
span is one f-string, strings are escaped by the ``json`` module's C escaper, and the fragments
that repeat from span to span (an attribute whose key and value were seen before, a resource, a
scope) are encoded once and reused from bounded caches. The text parses to exactly what
``json.dumps(encode_traces_data(spans))`` parses to; a property test holds the two together.

Reading a span's attributes, events and links through the SDK's public properties copies each
(a ``MappingProxyType`` whose items are fetched one Python call at a time, a tuple of events, a
tuple of links), which is a third of the cost. When a probe finds the SDK's private fields as
expected (:data:`FAST_PATH`), they are read directly; otherwise the public properties are. The
probe runs once, at the first encoding (importing the module builds nothing); a test fails
loudly if a release renames the fields, so the fast path cannot vanish unnoticed.

What is written is always valid UTF-8 JSON that DuckDB reads: strings are escaped to ASCII, and a
lone surrogate (``"\\ud800"``, which Python strings may hold and a model's tool call can produce,
but which no UTF-8 text can) becomes U+FFFD, as a strict decoder would make it; a surrogate
pair stays the character it spells. :mod:`._otlp_json` does the same.

Not thread-safe by itself: the caches tolerate concurrent use (a race costs a recomputation,
never a wrong fragment), but one exporter calls :func:`encode_line` from one thread at a time.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from .. import conventions as c

__all__ = ["FAST_PATH", "FRAGMENT_CACHE_SIZE", "encode_attributes", "encode_line", "encode_span", "encode_value"]

_esc = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]  # C escaper; ASCII output
_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200
FRAGMENT_CACHE_SIZE = 8192
"""Encoded attribute fragments kept (about 1 MB at most); the cache is emptied when full, so
values that never repeat (call ids, argument text) cannot crowd out the ones that do for long."""
_fragments: dict[tuple[Any, type, Any], str] = {}
_KIND = {kind: str(kind.value + 1) for kind in SpanKind}
"""SDK INTERNAL=0 .. CONSUMER=4; OTLP INTERNAL=1 .. CONSUMER=5 (a dict: enum ``.value`` is slow)."""
_STATUS = {code: code.value for code in StatusCode}
_headers: dict[int, tuple[Any, str]] = {}
"""Encoded resource/scope headers by ``id()``, holding the object so its id is not reused."""


def _probe() -> bool:
    """True when an SDK span keeps its attributes in ``_attributes._dict`` (events' too) and its
    events and links in ``_events`` and ``_links``."""
    try:
        from opentelemetry.sdk.trace import TracerProvider

        provider = TracerProvider(shutdown_on_exit=False)  # no atexit hook for a probe
        span = provider.get_tracer("probe").start_span("probe", attributes={"k": "v"})
        span.add_event("e", {"a": 1})
        span.end()
        return (
            span._attributes._dict == {"k": "v"}  # type: ignore[attr-defined]
            and type(span._attributes._dict) is dict  # type: ignore[attr-defined]
            and len(span._events) == 1  # type: ignore[attr-defined]
            and span._events[0].attributes._dict == {"a": 1}  # type: ignore[attr-defined]
            and len(span._links) == 0  # type: ignore[attr-defined]
        )
    except Exception:
        return False


_fast: bool | None = None
"""The probe's answer, once it ran (see :func:`_fast_path`)."""


def _fast_path() -> bool:
    global _fast
    if _fast is None:
        _fast = _probe()
    return _fast


def __getattr__(name: str) -> Any:
    if name == "FAST_PATH":  # decided at first use, not at import
        return _fast_path()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


FAST_PATH: bool
"""Whether spans are read through the SDK's private fields (see the module docstring); reading
it runs the probe if no span was encoded yet."""

_ESCAPES = re.compile(r"\\u(?:d[89ab][0-9a-f]{2}\\ud[c-f][0-9a-f]{2}|(?P<lone>d[89a-f][0-9a-f]{2}))|\\.")
"""Every escape in ASCII JSON text, from the left: a surrogate pair (kept), a lone high or low
surrogate (``lone``, replaced), any other escape (kept). Consuming every escape whole keeps an
escaped backslash followed by ``ud800`` the text it is."""


def _replace_lone(match: re.Match[str]) -> str:
    return "\\ufffd" if match.group("lone") is not None else match.group(0)


def _valid_text(line: str) -> str:
    """``line`` (ASCII JSON from the json module's escaper) with each lone surrogate escape made
    ``\\ufffd``; the line itself, at the cost of one search, when it holds no surrogate escape."""
    if "\\ud" not in line:
        return line
    return _ESCAPES.sub(_replace_lone, line)


def _key(key: Any) -> str:
    return _esc(key) if isinstance(key, str) else json.dumps(key)


def _float(value: float) -> str:
    if math.isfinite(value):
        return '{"doubleValue":' + float.__repr__(value) + "}"
    return '{"doubleValue":"' + ("NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")) + '"}'


def encode_value(value: Any) -> str:
    """One attribute value as OTLP ``AnyValue`` JSON text (the same cases as :mod:`._otlp_json`)."""
    if isinstance(value, str):
        return '{"stringValue":' + _esc(value) + "}"
    if isinstance(value, bool):
        return '{"boolValue":true}' if value else '{"boolValue":false}'
    if isinstance(value, int):
        if c.INT64_MIN <= value <= c.INT64_MAX:
            return '{"intValue":"' + str(int(value)) + '"}'
        return '{"stringValue":"' + str(value) + '"}'
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, (bytes, bytearray)):
        return '{"bytesValue":"' + base64.b64encode(bytes(value)).decode("ascii") + '"}'
    if isinstance(value, Mapping):
        return '{"kvlistValue":{"values":[' + ",".join(_pair(k, v) for k, v in value.items()) + "]}}"
    if isinstance(value, Sequence):
        return '{"arrayValue":{"values":[' + ",".join(encode_value(v) for v in value) + "]}}"
    if value is None:
        return "{}"
    return '{"stringValue":' + _esc(str(value)) + "}"


def _pair(key: Any, value: Any) -> str:
    return '{"key":' + _key(key) + ',"value":' + encode_value(value) + "}"


def _fragment(key: Any, value: Any) -> str:
    """Encode one attribute and remember it when its value can be told apart by equality."""
    text = _pair(key, value)
    kind = type(value)
    if kind is str or kind is int or kind is bool or (kind is float and value != 0.0 and value == value):
        # Not tuples ((1, True) == (1, 1)), zeros (-0.0 == 0.0) or NaN (never equal): their
        # cache key would match a different value, or nothing.
        if len(_fragments) >= FRAGMENT_CACHE_SIZE:
            _fragments.clear()
        _fragments[(key, kind, value)] = text
    return text


def encode_attributes(attributes: Mapping[str, Any] | None) -> str:
    """A mapping as the text of an OTLP ``KeyValue`` list, without the brackets."""
    if not attributes:
        return ""
    if type(attributes) is not dict and (_fast if _fast is not None else _fast_path()):  # an SDK BoundedAttributes: read its dict, not its slow items()
        inner = getattr(attributes, "_dict", None)
        if type(inner) is dict:
            attributes = inner
    get = _fragments.get
    try:
        return ",".join([get((k, type(v), v)) or _fragment(k, v) for k, v in attributes.items()])
    except TypeError:  # an unhashable value: encode without the cache
        return ",".join([_pair(k, v) for k, v in attributes.items()])


def _cached_header(obj: Any, build: Any) -> str:
    found = _headers.get(id(obj))
    if found is not None and found[0] is obj:
        return found[1]
    text: str = build(obj)
    if len(_headers) >= 256:
        _headers.clear()
    _headers[id(obj)] = (obj, text)
    return text


def _resource_header(resource: Any) -> str:
    head = '{"resource":{"attributes":[' + encode_attributes(resource.attributes) + "]}"
    if resource.schema_url:
        head += ',"schemaUrl":' + _esc(resource.schema_url)
    return head + ',"scopeSpans":['


def _scope_header(scope: Any) -> str:
    if scope is None:
        return '{"spans":['
    head = '{"scope":{"name":' + _esc(scope.name)
    if scope.version:
        head += ',"version":' + _esc(scope.version)
    if scope.attributes:
        head += ',"attributes":[' + encode_attributes(scope.attributes) + "]"
    head += "}"
    if scope.schema_url:
        head += ',"schemaUrl":' + _esc(scope.schema_url)
    return head + ',"spans":['


def _event(event: Any) -> str:
    text = '{"timeUnixNano":"' + str(event.timestamp) + '","name":' + _esc(event.name)
    if event.attributes:
        text += ',"attributes":[' + encode_attributes(event.attributes) + "]"
    dropped = getattr(event, "dropped_attributes", 0)
    if dropped:
        text += ',"droppedAttributesCount":' + str(dropped)
    return text + "}"


def _link(link: Any) -> str:
    ctx = link.context
    text = f'{{"traceId":"{ctx.trace_id:032x}","spanId":"{ctx.span_id:016x}"'
    trace_state = ctx.trace_state.to_header() if ctx.trace_state else ""
    if trace_state:
        text += ',"traceState":' + _esc(trace_state)
    if link.attributes:
        text += ',"attributes":[' + encode_attributes(link.attributes) + "]"
    dropped = getattr(link, "dropped_attributes", 0)
    if dropped:
        text += ',"droppedAttributesCount":' + str(dropped)
    flags = int(ctx.trace_flags) | _HAS_IS_REMOTE | (_IS_REMOTE if ctx.is_remote else 0)
    return text + ',"flags":' + str(flags) + "}"


def _events_and_links(events: Any, dropped_events: int, links: Any, dropped_links: int) -> str:
    text = ""
    if events:
        text += ',"events":[' + ",".join([_event(event) for event in events]) + "]"
    if dropped_events:
        text += ',"droppedEventsCount":' + str(dropped_events)
    if links:
        text += ',"links":[' + ",".join([_link(link) for link in links]) + "]"
    if dropped_links:
        text += ',"droppedLinksCount":' + str(dropped_links)
    return text


def encode_span(span: ReadableSpan) -> str:
    """One span as OTLP JSON ``Span`` text."""
    ctx = span.get_span_context()
    assert ctx is not None  # an SDK span always has one
    # to_bytes().hex() is faster than format(..., "032x") and spells the same ids.
    text = '{"traceId":"' + ctx.trace_id.to_bytes(16, "big").hex() + '","spanId":"' + ctx.span_id.to_bytes(8, "big").hex() + '"'
    if ctx.trace_state:
        trace_state = ctx.trace_state.to_header()
        if trace_state:
            text += ',"traceState":' + _esc(trace_state)
    flags = int(ctx.trace_flags) | _HAS_IS_REMOTE
    parent = span.parent
    if parent is not None:
        text += ',"parentSpanId":"' + parent.span_id.to_bytes(8, "big").hex() + '"'
        if parent.is_remote:
            flags |= _IS_REMOTE
    text += (
        f',"flags":{flags},"name":{_esc(span.name)},"kind":{_KIND[span.kind]},'
        f'"startTimeUnixNano":"{span.start_time or 0}","endTimeUnixNano":"{span.end_time or 0}"'
    )
    if _fast if _fast is not None else _fast_path():
        attributes: Any = span._attributes  # type: ignore[attr-defined]
        attributes = attributes._dict if attributes is not None else None
        events: Any = span._events  # type: ignore[attr-defined]
        links: Any = span._links  # type: ignore[attr-defined]
    else:
        attributes, events, links = span.attributes, span.events, span.links
    if attributes:
        text += ',"attributes":[' + encode_attributes(attributes) + "]"
    dropped = span.dropped_attributes
    if dropped:
        text += ',"droppedAttributesCount":' + str(dropped)
    dropped_events, dropped_links = span.dropped_events, span.dropped_links
    if events or links or dropped_events or dropped_links:
        text += _events_and_links(events, dropped_events, links, dropped_links)
    status = span.status
    code = _STATUS[status.status_code]
    if code or status.description:
        inner = []
        if code:
            inner.append('"code":' + str(code))
        if status.description:
            inner.append('"message":' + _esc(status.description))
        text += ',"status":{' + ",".join(inner) + "}"
    return text + "}"


def encode_line(spans: Sequence[ReadableSpan]) -> str:
    """``spans`` as one OTLP JSON ``TracesData`` line (no newline), grouped by resource and scope;
    ASCII, with no lone surrogate (see the module docstring)."""
    by_resource: dict[int, tuple[Any, dict[Any, tuple[Any, list[str]]]]] = {}
    last_resource = last_scope = members = None
    for span in spans:
        resource = span.resource
        scope = span.instrumentation_scope
        if resource is not last_resource or scope is not last_scope or members is None:
            group = by_resource.get(id(resource))
            if group is None:
                group = by_resource[id(resource)] = (resource, {})
            scope_key = (scope.name, scope.version, scope.schema_url, id(scope.attributes)) if scope else None
            members = group[1].get(scope_key)
            if members is None:
                members = group[1][scope_key] = (scope, [])
            last_resource, last_scope = resource, scope
        members[1].append(encode_span(span))
    out = []
    for resource, scopes in by_resource.values():
        blocks = [
            (_cached_header(scope, _scope_header) if scope is not None else '{"spans":[') + ",".join(texts) + "]}"
            for scope, texts in scopes.values()
        ]
        out.append(_cached_header(resource, _resource_header) + ",".join(blocks) + "]}")
    return _valid_text('{"resourceSpans":[' + ",".join(out) + "]}")
