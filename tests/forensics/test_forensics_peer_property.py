"""Property: any span of a known format either maps to a tool call or is counted, with its reason.

Spans are drawn with a format's marker key (its value the tool value, another kind of span, the
value JSON-encoded as MLflow writes it, or not text at all), with or without a tool-name attribute,
with any span name and any recorded result. After the real loader (``load_file``: the macros, the
JSON-lines reader, deduplication, the span-format layer), every such span is in ``peer_spans``
exactly once and is one of: a tool call (with a tool name, its format the one span_formats'
:func:`~telemetry._span_formats.tool_call_of` reads it as), a span of its format that is no tool
call (its marker names another kind of span), or not understood with a reason the evidence
counts. Nothing raises, whatever the result text holds.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from telemetry import conventions as c
from telemetry._span_formats import FORMATS, tool_call_of

from forensics_builder import hex_id

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=24)
RESULTS = st.one_of(st.none(), TEXT, st.sampled_from([
    '{"success": false, "error": "quota_exceeded"}', '{"status": "error", "code": "x"}', '{"ok": true}',
    '{"type": "tool", "data": {"content": "{\\"success\\": false}", "status": "error"}}', "{", "[[", '""', "null",
]))


@st.composite
def peer_span(draw: Callable[..., Any], serial: int) -> dict[str, Any]:
    fmt = draw(st.sampled_from(FORMATS))
    marker = draw(st.sampled_from([fmt.marker_value, json.dumps(fmt.marker_value), "LLM", "chat", "workflow",
                                   fmt.marker_value.swapcase(), None]))
    attributes: list[dict[str, Any]] = [{"key": fmt.marker, "value": {"stringValue": marker} if marker is not None
                                         else {"arrayValue": {"values": [{"stringValue": fmt.marker_value}]}}}]
    if fmt.tool_name and draw(st.booleans()):
        attributes.append({"key": fmt.tool_name[0], "value": {"stringValue": draw(TEXT)}})
    result = draw(RESULTS)
    if result is not None:
        attributes.append({"key": fmt.result[0], "value": {"stringValue": result}})
    name = draw(st.one_of(st.just(""), st.just(c.SPAN_NAME_PREFIX), TEXT.map(lambda t: c.SPAN_NAME_PREFIX + t), TEXT))
    return {"traceId": hex_id("prop-trace", 32), "spanId": hex_id(f"prop-{serial}", 16), "name": name, "kind": 1,
            "startTimeUnixNano": str(1_700_000_000_000_000_000 + serial), "endTimeUnixNano": str(1_700_000_000_000_000_001 + serial),
            "attributes": attributes}


@st.composite
def spans(draw: Callable[..., Any]) -> list[dict[str, Any]]:
    return [draw(peer_span(n)) for n in range(draw(st.integers(1, 6)))]


def python_reading(s: dict[str, Any]) -> Any:
    attrs = {a["key"]: a["value"].get("stringValue", a["value"].get("arrayValue")) for a in s["attributes"]}
    return tool_call_of(s["name"], {k: v for k, v in attrs.items() if isinstance(v, str)})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=spans())
def test_every_span_of_a_known_format_is_a_tool_call_or_counted_with_its_reason(
        drawn: list[dict[str, Any]], load_file: Callable[[Path], duckdb.DuckDBPyConnection]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "spans.jsonl"
        path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": drawn}]}]}) + "\n", encoding="utf-8")
        con = load_file(path)
        got = {r[0]: r[1:] for r in con.execute(
            "SELECT span_id, span_format, is_tool_call, not_understood, tool_name FROM peer_spans").fetchall()}
    assert set(got) == {s["spanId"] for s in drawn}  # every span with a marker key is accounted for
    for s in drawn:
        fmt, is_call, reason, tool_name = got[s["spanId"]]
        expected = python_reading(s)
        marker_key = s["attributes"][0]["key"]
        assert fmt is not None
        if is_call:
            assert reason is None and tool_name and expected is not None and fmt == expected.format
            if expected.tool_name:
                assert tool_name == expected.tool_name
        elif reason is not None:
            assert reason in ("no tool name (no name attribute and an empty span name)",
                              "its format's marker attribute is not a text value")
        else:  # a span of its format that is no tool call: no format reads it as one
            assert expected is None, (s, marker_key)
        if expected is not None and (expected.tool_name or s["name"].removeprefix(c.SPAN_NAME_PREFIX)):
            assert is_call  # what span_formats reads as a named tool call, the SQL reads as one too
