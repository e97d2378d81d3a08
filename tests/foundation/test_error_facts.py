"""What an error result offers the model, read at the boundary: any result gives bounded facts or none.

The values come from tools and models: codes, messages, retry-afters and ids of any shape and
size. Whatever they are, the span gets a code that is a short token or nothing, a retry advice and
a recovery path from their small vocabularies, a retry-after that is a sane number of seconds or
nothing, and never the text itself; the tool's result goes back untouched.
"""

from __future__ import annotations

import math
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import telemetry
from telemetry import conventions as c
from telemetry.envelopes import error_facts, exception_text, result_class
from telemetry.guards import refusal, verification_required
from telemetry.testing import capture

CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                    st.text(max_size=300), st.sampled_from(["rate_limited", "RATE_LIMITED", "x'); DROP TABLE spans;--",
                                                            "\x1b[31mred", "\u202egnp.exe", "Traceback (most recent call last)",
                                                            "a" * 5000]))
KEYS = st.sampled_from([c.ENVELOPE_OK, c.ENVELOPE_ERROR, c.ENVELOPE_MESSAGE, c.ENVELOPE_RETRY, c.ENVELOPE_RETRYABLE,
                        c.ENVELOPE_RETRY_AFTER_SECONDS, c.ENVELOPE_RETRY_AFTER, c.ENVELOPE_RECOVERY_TOOL,
                        c.ENVELOPE_EXISTING_ID, "status_code", "success", "status", "code", "error_code", "errors",
                        "isError", "structuredContent", "content", "detail"])
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(KEYS, inner, max_size=4)), max_leaves=12)
RESULTS = st.one_of(VALUES, st.dictionaries(KEYS, VALUES, max_size=8))


def _check(facts: Any) -> None:
    assert facts.code is None or CODE.fullmatch(facts.code)
    assert facts.retry in c.RETRY_ADVICE and facts.recovery in c.RECOVERY_PATHS
    after = facts.retry_after_seconds
    assert after is None or (isinstance(after, float) and math.isfinite(after) and 0 <= after <= c.MAX_RETRY_AFTER_SECONDS)
    assert isinstance(facts.exception_text, bool)


@settings(max_examples=300, deadline=None)
@given(RESULTS)
def test_any_result_gives_bounded_facts(result: Any) -> None:
    """error_facts never raises on a value of any shape, and what it returns is bounded."""
    judged = result_class(result)
    _check(error_facts(result, judged.outcome))


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=6))
def test_the_span_keeps_only_the_bounded_facts_and_the_tool_its_result(result: dict[str, Any]) -> None:
    """Through the decorator: the tool's own value comes back as it was; the tool.error.* attributes
    are a token, two small vocabularies, a number and a flag, and none repeats the result's text."""
    failing = {**result, c.ENVELOPE_OK: False}

    @telemetry.instrument_tool(kind="read")
    def lookup() -> dict[str, Any]:
        return failing

    with capture() as cap:
        assert lookup() is failing
    attributes = cap.span("lookup").attributes or {}
    code = attributes.get(c.TOOL_ERROR_CODE)
    assert code is None or CODE.fullmatch(str(code))
    assert attributes[c.TOOL_ERROR_RETRY] in c.RETRY_ADVICE
    assert attributes[c.TOOL_ERROR_RECOVERY] in c.RECOVERY_PATHS
    assert set(k for k in attributes if k.startswith("tool.error.")) <= {
        c.TOOL_ERROR_CODE, c.TOOL_ERROR_RETRY, c.TOOL_ERROR_RETRY_AFTER_SECONDS, c.TOOL_ERROR_RECOVERY,
        c.TOOL_ERROR_EXCEPTION_TEXT}


def test_the_facts_of_common_envelopes() -> None:
    facts = error_facts(refusal(c.OUTCOME_RATE_LIMITED, "wait", retry=True, retry_after_seconds=3,
                                recovery_tool="get_status"), c.OUTCOME_RATE_LIMITED)
    assert facts == (c.OUTCOME_RATE_LIMITED, c.RETRY_ADVISED, 3.0, c.RECOVERY_TOOL, False)
    slack = {"ok": False, "error": "ratelimited", "retry_after": 30}
    assert error_facts(slack, result_class(slack).outcome) == ("ratelimited", c.RETRY_ADVISED, 30.0, c.RECOVERY_NONE, False)
    dup = {"ok": False, "error": "duplicate_request", "retry": False, "existing_id": "ch_1"}
    assert error_facts(dup, "duplicate_request")[1:4] == (c.RETRY_NOT_ADVISED, None, c.RECOVERY_EXISTING_ID)
    vague = {"success": False, "error": "Something broke"}
    assert error_facts(vague, result_class(vague).outcome).code is None  # tool_error names no condition
    for bad in (-1, math.inf, math.nan, 10**9, True, "30"):
        assert error_facts({"ok": False, c.ENVELOPE_RETRY_AFTER_SECONDS: bad}, "error").retry_after_seconds is None


def test_exception_text_is_recognised_and_plain_sentences_are_not() -> None:
    for leaked in ("Traceback (most recent call last):", 'File "/srv/app.py", line 12, in f', "KeyError: 'sku'",
                   "psycopg.errors.UniqueViolation: duplicate key", "ValueError(\"bad\")",
                   "at com.acme.Rates.fetch(Rates.java:88)"):
        assert exception_text(leaked), leaked
    for plain in ("The carrier's rate limit is in effect. Wait 2 s.", "Error: the card was declined",
                  "no profile for user 'u-1'", ""):
        assert not exception_text(plain), plain
    assert not exception_text("x" * 10_000 + "KeyError: 'late'")  # only the start of a long text is read


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=150), st.dictionaries(st.text(max_size=70), SCALARS, max_size=40))
def test_verification_required_works_exactly_or_names_the_bad_value(tool: str, compare: dict[str, Any]) -> None:
    try:
        made = verification_required(tool, arguments={"id": 1}, compare=compare)
    except ValueError as exc:
        assert "verification_required" in str(exc)
        return
    assert made == {c.VERIFY_TOOL: tool, c.VERIFY_ARGUMENTS: {"id": 1}, c.VERIFY_COMPARE: compare}
    assert 1 <= len(compare) <= 32 and re.fullmatch(r"[A-Za-z0-9_.:/-]{1,128}", tool)


def test_only_results_that_reported_a_failure_carry_error_facts() -> None:
    """A success, a silent failure (the result said ok) and an exception get no tool.error.* attribute:
    the facts describe what an error result told the model, and a call that succeeded pays nothing."""

    @telemetry.instrument_tool(kind="write", readback=lambda call, result: False)
    def write(fail: str) -> dict[str, Any]:
        if fail == "raise":
            raise KeyError("k")
        return {"ok": fail != "envelope", "error": "quota_exceeded"}

    with capture() as cap:
        write("no")
        write("envelope")
        try:
            write("raise")
        except KeyError:
            pass
    silent, refused, raised = (s.attributes or {} for s in cap.spans("write"))
    assert silent[c.TOOL_SILENT_FAILURE] is True and not [k for k in silent if k.startswith("tool.error.")]
    assert refused[c.TOOL_ERROR_CODE] == "quota_exceeded" and refused[c.TOOL_ERROR_RETRY] == c.RETRY_UNSAID
    assert not [k for k in raised if k.startswith("tool.error.")]
