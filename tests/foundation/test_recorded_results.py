"""Recorded results (the text another tracer stored for a tool's output) meet the live rules."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from telemetry import conventions as c
from telemetry.envelopes import (
    RECORDED_ABSENT,
    RECORDED_JUDGED,
    RECORDED_TEXT,
    RECORDED_TOO_LARGE,
    read_recorded,
    register_result_shape,
    result_class,
)

CHARGE = {"success": False, "error": "quota_exceeded"}
REFUND = {"status": "error", "code": "refund_window_closed"}


def _tool_message(content: Any, status: str = "success") -> dict[str, Any]:
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "ToolMessage"],
            "kwargs": {"content": content, "tool_call_id": "call_1", "status": status}}


def test_a_recorded_envelope_is_judged_as_the_live_value_is() -> None:
    """JSON of an envelope gives the outcome the live value gives."""
    for value in (CHARGE, REFUND, {"ok": False, "error": "stale_policy"}, {"order": 1}):
        recorded = read_recorded(json.dumps(value))
        assert recorded.status == RECORDED_JUDGED
        assert recorded.verdict == result_class(value)


def test_framework_wrappers_are_unwrapped() -> None:
    """LangChain ToolMessages (both serialisations), MCP results and double encoding are opened."""
    texts = [
        json.dumps(_tool_message(json.dumps(CHARGE))),
        json.dumps({"type": "tool", "data": {"content": json.dumps(CHARGE), "status": "success"}}),
        json.dumps({"content": [{"type": "text", "text": json.dumps(CHARGE)}], "isError": False}),
        json.dumps({"content": [], "structuredContent": CHARGE, "isError": False}),
        json.dumps(json.dumps(CHARGE)),
    ]
    assert [read_recorded(t).verdict.outcome for t in texts] == ["quota_exceeded"] * len(texts)  # type: ignore[union-attr]


def test_a_wrapper_that_says_error_is_a_reported_failure() -> None:
    """A ToolMessage with status error around plain text is tool_error; an MCP isError is tool_error."""
    assert read_recorded(json.dumps(_tool_message("boom", status="error"))).verdict.outcome == c.OUTCOME_TOOL_ERROR  # type: ignore[union-attr]
    mcp_error = {"content": [{"type": "text", "text": "no"}], "isError": True}
    assert read_recorded(json.dumps(mcp_error)).verdict.outcome == c.OUTCOME_TOOL_ERROR  # type: ignore[union-attr]


def test_absent_plain_and_oversized_texts_are_named_not_guessed() -> None:
    """No text is absent, a plain string is judged as a string (ok), an oversized one is skipped."""
    assert read_recorded(None).status == read_recorded("").status == RECORDED_ABSENT
    plain = read_recorded("Error: the card was declined")
    assert plain.status == RECORDED_TEXT and plain.verdict is not None and plain.verdict.outcome == c.OUTCOME_OK
    huge = read_recorded(json.dumps({"x": "y" * c.MAX_RECORDED_RESULT_CHARS}))
    assert huge == (RECORDED_TOO_LARGE, None)


def test_registered_shapes_apply_to_recorded_results() -> None:
    """A shape a team registered (a predicate over dicts) decides a recorded result too."""
    remove = register_result_shape(lambda r: isinstance(r, dict) and "fault" in r, lambda r: "card_fault")
    try:
        assert read_recorded(json.dumps({"fault": 1})).verdict.outcome == "card_fault"  # type: ignore[union-attr]
    finally:
        remove()
    assert read_recorded(json.dumps({"fault": 1})).verdict.outcome == c.OUTCOME_OK  # type: ignore[union-attr]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=200), _json.map(json.dumps), _json.map(lambda v: json.dumps(json.dumps(v)))))
def test_any_text_is_judged_or_named_never_raises(text: str) -> None:
    """Any text either gets a verdict from the rules or a named status: reading never raises."""
    recorded = read_recorded(text)
    assert recorded.status in (RECORDED_ABSENT, RECORDED_JUDGED, RECORDED_TEXT, RECORDED_TOO_LARGE)
    assert (recorded.verdict is None) == (recorded.status in (RECORDED_ABSENT, RECORDED_TOO_LARGE))
    if recorded.verdict is not None:
        assert recorded.verdict.transport in c.TRANSPORT_VALUES


@settings(max_examples=100, deadline=None)
@given(_json)
def test_a_json_value_reads_back_as_the_live_value(value: Any) -> None:
    """A JSON value that no wrapper rule opens is judged exactly as the live value is."""
    if isinstance(value, (dict, str)):
        return  # dicts may be wrappers and strings may hold JSON: covered by the tests above
    assert read_recorded(json.dumps(value)).verdict == result_class(value)


# --- the one parser every reader of recorded texts uses ---------------------------------------

_AROUND = st.text(alphabet=" \t\n\r\x0b\x0c\u00a0\u2028\ufeffx", max_size=3)
"""Around a value: what json.loads skips (space, tab, newline, carriage return) and what it does not."""


def _reference(text: str) -> Any:
    """What a reader answered before: json.loads when the text starts (after any whitespace) like
    a JSON object, array or string, else the text; a text json.loads refuses stays text."""
    if text.lstrip()[:1] not in ("{", "[", '"'):
        return text
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and json.dumps(a, allow_nan=True) == json.dumps(b, allow_nan=True)


@settings(max_examples=400)
@given(st.one_of(
    st.tuples(_AROUND, _json.map(json.dumps), _AROUND).map("".join),
    st.tuples(_AROUND, _json.map(lambda v: json.dumps(v, indent=1)), _AROUND, st.sampled_from(["", "}", "]", ",1", "x"]))
    .map("".join),
    st.text(alphabet='{}[]":,0123456789.eE+-tnrufalsNIfiy \\\t\n', max_size=40),
    st.text(max_size=60),
))
def test_json_or_text_answers_exactly_what_json_loads_answers(text: str) -> None:
    """Any text, well formed or not, with any whitespace around it: the shared parser gives the
    value json.loads gives (same types, same order, NaN and Infinity as json.loads reads them),
    or the text itself wherever json.loads refuses it or it is not an object, array or string."""
    from telemetry.envelopes._json_text import json_or_text

    got, want = json_or_text(text), _reference(text)
    assert _same(got, want), (text, got, want)
    if want is text:
        assert got is text


def test_json_or_text_gives_back_a_nesting_too_deep_to_parse() -> None:
    from telemetry.envelopes._json_text import json_or_text

    deep = "[" * 100_000 + "]" * 100_000
    assert json_or_text(deep) is deep
