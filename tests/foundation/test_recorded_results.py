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
