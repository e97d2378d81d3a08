"""The three aligned attribute lists the loader stores, and containers of the wrong JSON type.

The loader builds ``attribute_arrays`` (and checks array elements) only for a span that has an
attribute without a scalar value; a span of scalars only gets its list of NULLs without walking
its attributes again. Both ways must store the same thing, so these spans mix scalars, arrays
(empty, without ``values``, of mixed elements) and bad attributes in any order.

DuckDB's ``from_json`` reads a number or a string where an object is expected as an object with
nothing in it, so an element of ``resourceSpans`` or ``scopeSpans``, an ``arrayValue`` or an
array element that is not an object must be caught from the raw line, never loaded as empty.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from telemetry.exceptions import ForensicsInputError
from telemetry.forensics import open_traces
from telemetry.forensics._validation import line_problem

_scalar = st.one_of(
    st.text(max_size=4).map(lambda s: ({"stringValue": s}, s)),
    st.integers(-3, 3).map(lambda i: ({"intValue": str(i)}, str(i))),
    st.booleans().map(lambda b: ({"boolValue": b}, "true" if b else "false")),
)
"""(AnyValue, the text the loader stores for it)."""

_array = st.one_of(
    st.lists(_scalar, max_size=3).map(lambda items: ({"arrayValue": {"values": [v for v, _ in items]}},
                                                     [t for _, t in items])),
    st.just(({"arrayValue": {}}, [])),  # no "values": an empty array
)

_bad = st.sampled_from([{"value": {}}, {"value": {"arrayValue": {"values": [5]}}}, {"value": {"arrayValue": "x"}}])
"""Attributes (without their key) that the loader must refuse: no readable value, an array element
that is not an object, an arrayValue that is not an object."""


@st.composite
def _attributes(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[tuple[str, str | None, Any]] | None]:
    """A span's attributes and what the loader must store for them: (key, value, array) each, or
    None when one of them is bad."""
    attributes, expected = [], []
    bad = False
    for number in range(draw(st.integers(0, 5))):
        key = f"k{number}"
        kind = draw(st.sampled_from(["scalar", "scalar", "array", "bad"]))
        if kind == "scalar":
            value, text = draw(_scalar)
            attributes.append({"key": key, "value": value})
            expected.append((key, text, None))
        elif kind == "array":
            value, texts = draw(_array)
            attributes.append({"key": key, "value": value})
            expected.append((key, None, texts))
        else:
            attributes.append({"key": key, **draw(_bad)})
            bad = True
    return attributes, None if bad else expected


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spans=st.lists(_attributes(), min_size=1, max_size=4))
def test_attribute_lists_hold_every_attribute_or_the_line_is_refused(
        tmp_path: Path, load_file: Callable[[Path], duckdb.DuckDBPyConnection], spans: list[Any]) -> None:
    """Each span's keys, scalar texts and array elements come back aligned and exact, or line 1 is refused."""
    line = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "ab" * 16, "spanId": f"{number:016x}", "startTimeUnixNano": "1", "endTimeUnixNano": "2",
         "attributes": attributes} for number, (attributes, _) in enumerate(spans)]}]}]}
    path = tmp_path / "t.jsonl"
    text = json.dumps(line)
    path.write_text(text + "\n")
    refused = any(expected is None for _, expected in spans)
    assert (line_problem(text.encode()) is not None) == refused  # the line-by-line rules agree
    try:
        con = load_file(path)
    except ForensicsInputError as error:
        assert refused and f"{path.resolve()}: line 1: " in str(error), str(error)
        return
    assert not refused, "a span with a bad attribute was loaded"
    rows = con.execute(
        "SELECT span_id, attribute_keys, attribute_values, attribute_arrays FROM spans ORDER BY span_id").fetchall()
    assert [(keys, values, arrays) for _, keys, values, arrays in rows] == [
        ([k for k, _, _ in expected], [v for _, v, _ in expected], [a for _, _, a in expected])
        for _, expected in spans]


_not_object = st.sampled_from([5, "x", [], True])
_good_span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "startTimeUnixNano": "1", "endTimeUnixNano": "2"}


def _array_attribute(value: Any) -> dict[str, Any]:
    return {"key": "k", "value": {"arrayValue": value}}


_wrong_places = {
    "resourceSpans element": lambda bad: {"resourceSpans": [bad]},
    "scopeSpans element": lambda bad: {"resourceSpans": [{"scopeSpans": [bad]}]},
    "span arrayValue": lambda bad: {"resourceSpans": [{"scopeSpans": [{"spans": [
        {**_good_span, "attributes": [_array_attribute(bad)]}]}]}]},
    "span array element": lambda bad: {"resourceSpans": [{"scopeSpans": [{"spans": [
        {**_good_span, "attributes": [{"key": "s", "value": {"stringValue": "x"}},
                                      _array_attribute({"values": [{"stringValue": "y"}, bad]})]}]}]}]},
    "arrayValue beside a scalar": lambda bad: {"resourceSpans": [{"scopeSpans": [{"spans": [
        {**_good_span, "attributes": [{"key": "k", "value": {"stringValue": "x", "arrayValue": bad}}]}]}]}]},
    "resource arrayValue": lambda bad: {"resourceSpans": [{"resource": {"attributes": [_array_attribute(bad)]},
                                                           "scopeSpans": [{"spans": [_good_span]}]}]},
    "resource array element": lambda bad: {"resourceSpans": [{"resource": {"attributes": [
        _array_attribute({"values": [bad]})]}, "scopeSpans": [{"spans": [_good_span]}]}]},
}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(place=st.sampled_from(sorted(_wrong_places)), bad=_not_object, empty_too=st.booleans())
def test_a_container_that_is_not_an_object_is_refused_naming_the_line(
        tmp_path: Path, load_file: Callable[[Path], duckdb.DuckDBPyConnection], place: str, bad: Any,
        empty_too: bool) -> None:
    """A non-object where OTLP has an object is refused at its line, even beside the empty objects
    ({} and an arrayValue without values) that read the same and are allowed."""
    allowed = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {**_good_span, "spanId": "ef" * 8, "attributes": [_array_attribute({}), _array_attribute({"values": [{}]})]}]}]}]}
    data = _wrong_places[place](bad)
    if empty_too:
        data["resourceSpans"] += allowed["resourceSpans"]
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(allowed) + "\n" + json.dumps(data) + "\n")
    assert line_problem(json.dumps(data).encode()) is not None
    try:
        load_file(path)
        raise AssertionError(f"a {place} of {bad!r} was loaded")
    except ForensicsInputError as error:
        assert f"{path.resolve()}: line 2: " in str(error), str(error)


def test_empty_objects_where_arrays_may_be_empty_load_as_empty(tmp_path: Path) -> None:
    """An arrayValue without values, one whose values is not a list, and an element {} are allowed:
    empty arrays and an element without text, not refusals."""
    attributes = [_array_attribute({}), _array_attribute({"values": "x"}), _array_attribute({"values": [{}]})]
    for number, attribute in enumerate(attributes):
        attribute["key"] = f"k{number}"
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"resourceSpans": [{"resource": {"attributes": [_array_attribute({})]}, "scopeSpans": [
        {"spans": [{**_good_span, "attributes": attributes}]}]}]}) + "\n")
    with open_traces([path]) as traces:
        assert traces.connection.execute("SELECT attribute_keys, attribute_values, attribute_arrays FROM spans").fetchall() \
            == [(["k0", "k1", "k2"], [None, None, None], [[], [], [None]])]
