"""Failure envelopes as real tools and APIs write them, and the team's own registered shapes."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import telemetry
from telemetry import conventions as c
from telemetry.envelopes import OK, result_class
from telemetry.instrument import classify_result
from telemetry.testing import Capture


@dataclass
class FuncToolResult:
    """The object form of the success envelope, as some agent frameworks return it."""

    success: int
    error: str | None = None


@dataclass
class JobStatus:
    status: str
    code: str | None = None


ROWS: list[tuple[str, Any, str]] = [
    # shape, result, expected outcome (transport is always ok)
    ("success false, snake_case error", {"success": False, "error": "channel_not_found"}, "channel_not_found"),
    ("success 0, sentence error", {"success": 0, "error": "Channel not found."}, "tool_error"),
    ("success false, error object with code", {"success": False, "error": {"code": "quota_exceeded", "message": "x"}}, "quota_exceeded"),
    ("success false, HTTP code", {"success": False, "error_code": 429}, "rate_limited"),
    ("success false, nothing else", {"success": False}, "tool_error"),
    ("success 0 object", FuncToolResult(success=0, error="timeout"), "timeout"),
    ("success true", {"success": True, "data": 1}, "ok"),
    ("success 1", {"success": 1}, "ok"),
    ("success 1 object", FuncToolResult(success=1), "ok"),
    ("status error", {"status": "error", "message": "boom"}, "tool_error"),
    ("status failed with code", {"status": "failed", "code": "payment_declined"}, "payment_declined"),
    ("status FAILED upper case", {"status": "FAILED", "code": 503}, "error"),
    ("JSend fail", {"status": "fail", "data": {"title": "required"}}, "tool_error"),
    ("status failed object", JobStatus(status="failed", code="upstream_down"), "upstream_down"),
    ("status ok", {"status": "ok"}, "ok"),
    ("status success", {"status": "success", "data": {}}, "ok"),
    ("status object ok", JobStatus(status="done"), "ok"),
    ("GraphQL errors", {"data": None, "errors": [{"message": "Not authorised", "extensions": {"code": "UNAUTHENTICATED"}}]}, "unauthenticated"),
    ("GraphQL partial", {"data": {"a": 1}, "errors": [{"message": "b failed", "path": ["b"]}]}, "tool_error"),
    ("GraphQL errors of strings", {"errors": ["name is required"]}, "tool_error"),
    ("GraphQL no errors", {"data": {"a": 1}, "errors": []}, "ok"),
    ("GraphQL data only", {"data": {"a": 1}}, "ok"),
    ("JSON-RPC invalid params", {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad"}}, "invalid_argument"),
    ("JSON-RPC method not found", {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no"}}, "not_found"),
    ("JSON-RPC server code", {"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "x"}}, "tool_error"),
    ("JSON-RPC result", {"jsonrpc": "2.0", "id": 1, "result": {"ok": 1}}, "ok"),
    ("JSON-RPC null error", {"jsonrpc": "2.0", "id": 1, "result": 3, "error": None}, "ok"),
    ("Slack ok false (unchanged)", {"ok": False, "error": "channel_not_found"}, "channel_not_found"),
    ("MCP isError with success envelope", {"isError": True, "structuredContent": {"success": False, "error": "gone"}}, "gone"),
]


@pytest.mark.parametrize(("shape", "result", "outcome"), ROWS, ids=[r[0] for r in ROWS])
def test_envelope_table(shape: str, result: Any, outcome: str, telemetry_capture: Capture) -> None:
    """Each shape gives its outcome on the span, transport ok, span status ERROR only on failure."""

    @telemetry.instrument_tool(kind="write", outcomes=[outcome])
    def tool() -> Any:
        return result

    assert tool() is result
    span = telemetry_capture.span("tool")
    assert (span.attributes[c.TOOL_TRANSPORT], span.attributes[c.TOOL_OUTCOME]) == ("ok", outcome)
    assert (span.status.status_code.name == "ERROR") is (outcome != "ok")
    assert telemetry_capture.calls("tool", transport="ok", outcome=outcome) == 1
    assert classify_result(result).reported_failure is (outcome != "ok")


def test_long_or_odd_codes_fall_back_to_tool_error() -> None:
    """A code that is not a short snake_case token (too long, mixed case, spaces) is tool_error."""
    for code in ("x" * 65, "ChannelNotFound", "not found", "", "-1", "é_code"):
        assert classify_result({"success": False, "error": code}).outcome == "tool_error", code
    assert classify_result({"success": False, "error": "x" * 64}).outcome == "x" * 64


# JSON-like values; dictionaries never use a key that one of the recognisers reads.
_RECOGNISED_KEYS = {"status_code", "ok", "rejected", "isError", "success", "status", "errors", "jsonrpc"}
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=8).filter(lambda k: k not in _RECOGNISED_KEYS), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_a_result_of_no_recognised_shape_stays_ok(result: Any) -> None:
    """Any JSON-like result with none of the recognised keys is transport ok, outcome ok."""
    assert classify_result(result) == (c.TRANSPORT_OK, c.OUTCOME_OK, None)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=8), max_size=4), st.sampled_from(
    [("success", True), ("success", 1), ("status", "ok"), ("status", "done"), ("errors", []), ("ok", True)]))
def test_success_markers_stay_ok_whatever_else_is_there(extra: dict[str, Any], marker: tuple[str, Any]) -> None:
    """A success marker with any other non-envelope keys alongside stays ok."""
    result = {k: v for k, v in extra.items() if k not in _RECOGNISED_KEYS}
    result[marker[0]] = marker[1]
    assert classify_result(result).outcome == c.OUTCOME_OK


@pytest.fixture
def shapes() -> Any:
    """register_result_shape with every registration removed after the test."""
    removers: list[Any] = []

    def register(shape: Any, classify: Any) -> None:
        removers.append(telemetry.register_result_shape(shape, classify))

    yield register
    for remove in removers:
        remove()


@dataclass
class Outcome:
    """A team's own result type."""

    done: bool
    why: str = ""


def test_registered_type_is_read_once_for_every_tool(shapes: Any, telemetry_capture: Capture) -> None:
    """A registered type's classify decides every tool's outcome; None means success."""
    shapes(Outcome, lambda r: None if r.done else r.why)

    @telemetry.instrument_tool
    def first() -> Outcome:
        return Outcome(False, "quota_exceeded")

    @telemetry.instrument_tool
    def second() -> Outcome:
        return Outcome(True)

    first(), second()
    assert telemetry_capture.span("first").attributes[c.TOOL_OUTCOME] == "quota_exceeded"
    assert telemetry_capture.span("second").attributes[c.TOOL_OUTCOME] == "ok"


def test_registered_shape_wins_over_built_ins_and_outcome_callable_has_the_last_word(
    shapes: Any, telemetry_capture: Capture
) -> None:
    """A predicate over dicts beats the built-in success rule; the tool's outcome= beats both."""
    shapes(lambda r: isinstance(r, dict) and "result_code" in r, lambda r: None if r["result_code"] == 0 else "vendor_error")

    @telemetry.instrument_tool
    def vendor() -> dict[str, Any]:
        return {"success": False, "result_code": 0}  # the vendor's own field is the truth

    @telemetry.instrument_tool(outcome=lambda call, result: "overridden")
    def overridden() -> dict[str, Any]:
        return {"result_code": 7}

    vendor(), overridden()
    assert telemetry_capture.span("vendor").attributes[c.TOOL_OUTCOME] == "ok"
    assert telemetry_capture.span("overridden").attributes[c.TOOL_OUTCOME] == "overridden"
    assert classify_result({"result_code": 7}).outcome == "vendor_error"


def test_newest_registration_wins_and_removal_restores(shapes: Any) -> None:
    """Two shapes matching the same result: the newer decides; removing it gives the older back."""
    shapes(Outcome, lambda r: "older")
    remove = telemetry.register_result_shape(Outcome, lambda r: "newer")
    assert classify_result(Outcome(False)).outcome == "newer"
    remove()
    assert classify_result(Outcome(False)).outcome == "older"


def test_registered_shapes_apply_to_scalar_annotated_tools(shapes: Any, telemetry_capture: Capture) -> None:
    """A `-> str` tool skips the built-in envelope checks, but a registered shape still reads it."""

    @telemetry.instrument_tool
    def lies() -> str:
        return {"success": False}  # type: ignore[return-value]  # the annotation is taken at its word

    @telemetry.instrument_tool
    def legacy() -> str:
        return "ERROR: disk full"

    lies()
    assert telemetry_capture.span("lies").attributes[c.TOOL_OUTCOME] == "ok"
    shapes(lambda r: isinstance(r, str) and r.startswith("ERROR:"), lambda r: "legacy_error")
    legacy()
    assert telemetry_capture.span("legacy").attributes[c.TOOL_OUTCOME] == "legacy_error"


def test_a_raising_shape_falls_back_to_the_built_ins(shapes: Any, telemetry_capture: Capture) -> None:
    """A predicate or classify that raises, or returns a non-code, leaves the built-in rules to decide."""
    shapes(lambda r: 1 / 0, lambda r: "never")

    @telemetry.instrument_tool
    def tool() -> dict[str, Any]:
        return {"success": False, "error": "channel_not_found"}

    assert tool() == {"success": False, "error": "channel_not_found"}
    assert telemetry_capture.span("tool").attributes[c.TOOL_OUTCOME] == "channel_not_found"
    shapes(dict, lambda r: 42)
    assert classify_result({"success": False}).outcome == "tool_error"


def test_bad_registrations_are_refused() -> None:
    """Neither a class nor a predicate, or a classify that is not callable: ConfigurationError naming it."""
    with pytest.raises(telemetry.ConfigurationError, match="'nope'"):
        telemetry.register_result_shape("nope", lambda r: None)  # type: ignore[arg-type]
    with pytest.raises(telemetry.ConfigurationError, match="classify"):
        telemetry.register_result_shape(Outcome, "tool_error")  # type: ignore[arg-type]


def test_registration_is_thread_safe(shapes: Any) -> None:
    """Registering and removing from many threads while others classify loses and breaks nothing."""
    kinds = [type(f"Shape{i}", (), {}) for i in range(16)]
    errors: list[BaseException] = []
    start = threading.Barrier(len(kinds) + 4)
    removers: list[Any] = [None] * len(kinds)

    def register(i: int) -> None:
        start.wait()
        removers[i] = telemetry.register_result_shape(kinds[i], lambda r, i=i: f"code_{i}")

    def classify() -> None:
        start.wait()
        try:
            for _ in range(2000):
                classify_result({"success": False})
        except BaseException as exc:  # pragma: no cover - the assertion below reports it
            errors.append(exc)

    threads = [threading.Thread(target=register, args=(i,)) for i in range(len(kinds))]
    threads += [threading.Thread(target=classify) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [classify_result(k()).outcome for k in kinds] == [f"code_{i}" for i in range(len(kinds))]
    for remove in removers:
        remove()
    assert all(classify_result(k()).outcome == "ok" for k in kinds)


def test_scalar_annotation_decided_at_decoration_time() -> None:
    """`-> str`/`-> int` tools get the registered-only classifier; dict, unions and none get every rule."""
    from telemetry.instrument import _classify as k

    def spec_of(fn: Any) -> Any:
        return telemetry.instrument_tool(fn).__outcome_telemetry__.classify

    def s() -> str: ...  # a string annotation here: this module uses `from __future__ import annotations`
    def i(): ...  # type: ignore[no-untyped-def]
    i.__annotations__ = {"return": int}  # the class itself, as without the __future__ import
    def d() -> dict[str, Any]: ...
    def u() -> int | dict[str, Any]: ...
    def n(): ...  # type: ignore[no-untyped-def]

    assert [spec_of(f) for f in (s, i, d, u, n)] == [k.classify_registered_only, k.classify_registered_only,
                                                     k.classify_result, k.classify_result, k.classify_result]


class _Column:
    """An ORM's column descriptor: reading it on a row fetches the value from the database."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, row: Any, owner: type) -> Any:
        if row is None:
            return self
        found = row.db.execute("SELECT value FROM fields WHERE id = ? AND name = ?", (row.key, self.name)).fetchone()
        return None if found is None else found[0]


class OrderRow:
    """A row whose ``status`` column is declared on its class (read through it, as the ORM means)."""

    status = _Column("status")

    def __init__(self, db: Any, key: str) -> None:
        self.db, self.key = db, key


class LazyRow:
    """A lazy object: any attribute it does not hold is fetched through ``__getattr__`` (a query)."""

    def __init__(self, db: Any, key: str) -> None:
        self.db, self.key = db, key

    def __getattr__(self, name: str) -> Any:
        found = self.db.execute("SELECT value FROM fields WHERE id = ? AND name = ?", (self.key, name)).fetchone()
        if found is None:
            raise AttributeError(name)
        return found[0]


def test_an_object_is_read_only_through_what_its_type_declares(tmp_path: Any) -> None:
    """A lazy object's ``__getattr__`` never runs (no query), a declared column is read once per call,
    and an instance's own attributes are still read: the decision is the type's, made once."""
    import sqlite3

    db = sqlite3.connect(tmp_path / "rows.db")
    db.execute("CREATE TABLE fields (id TEXT, name TEXT, value TEXT)")
    db.executemany("INSERT INTO fields VALUES (?, ?, ?)", [("o-1", "status", "failed"), ("o-1", "success", "0")])
    queries: list[str] = []
    db.set_trace_callback(queries.append)

    for _ in range(50):
        assert result_class(LazyRow(db, "o-1")) == OK
    assert queries == []  # five probes per result used to run five queries each

    for _ in range(50):
        verdict = result_class(OrderRow(db, "o-1"))
        assert (verdict.transport, verdict.outcome) == (c.TRANSPORT_OK, c.OUTCOME_TOOL_ERROR)
    assert len(queries) == 50 and all("SELECT value" in q for q in queries)

    own = LazyRow(db, "o-2")
    own.success, own.error = False, "quota_exceeded"  # instance attributes: read from its own __dict__
    queries.clear()
    assert result_class(own).outcome == "quota_exceeded"
    assert queries == []
    db.close()
