"""Version-bound state: tokens, stale refusals, forced writes, read-back, bad input."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

from telemetry import GuardError
from telemetry import conventions as c
from telemetry.guards import ABSENT_VERSION, SQLiteStore, StateStore, open_store
from telemetry.testing import Capture


@pytest.fixture
def state(store_url: str) -> StateStore:
    return StateStore(open_store(store_url))


def _rows(state: StateStore) -> list[tuple[Any, ...]]:
    """Every state row and every change-log row: what a refused call must leave untouched."""
    with state.store.read() as conn:
        rows = [tuple(r) for r in conn.execute("SELECT key, value, version FROM guard_state ORDER BY key")]
        return rows + [tuple(r) for r in conn.execute("SELECT seq, key, version FROM guard_changes ORDER BY seq")]


def test_missing_key_reads_as_the_absent_token(state: StateStore, telemetry_capture: Capture) -> None:
    """A missing key reads as value null and the documented absent token, on the span too."""
    result = state.read_state("plan", agent_id="planner")
    assert result == {"ok": True, "key": "plan", "value": None, "version": ABSENT_VERSION, "exists": False}
    attrs = telemetry_capture.span("read_state").attributes
    assert attrs[c.STATE_KEY] == "plan"
    assert attrs[c.STATE_VERSION_READ] == ABSENT_VERSION
    assert attrs[c.GEN_AI_AGENT_ID] == "planner"


def test_create_then_update_with_the_token_read(state: StateStore, telemetry_capture: Capture) -> None:
    """A create passes the absent token; an update passes the token it read; both land."""
    created = state.write_state("plan", {"step": 1}, ABSENT_VERSION, agent_id="a")
    assert created["ok"] and created["previous_version"] == ABSENT_VERSION
    read = state.read_state("plan")
    assert read["value"] == {"step": 1} and read["version"] == created["version"]
    updated = state.write_state("plan", {"step": 2}, read["version"], agent_id="a")
    assert updated["ok"]
    assert state.read_state("plan")["value"] == {"step": 2}
    span = telemetry_capture.spans("write_state")[-1].attributes
    assert span[c.STATE_VERSION_EXPECTED] == read["version"]
    assert span[c.STATE_VERSION_CURRENT] == read["version"]
    assert span[c.STATE_VERSION_WRITTEN] == updated["version"]
    assert span[c.TOOL_READBACK] == c.READBACK_MATCH
    assert span[c.TOOL_OUTCOME] == c.OUTCOME_OK


def test_tokens_are_opaque_strings_not_numbers(state: StateStore) -> None:
    """Version tokens are unguessable strings: no integer, no order, no reuse across writes."""
    versions = []
    expected = ABSENT_VERSION
    for _i in range(5):
        expected = state.write_state("k", "same value", expected)["version"]
        versions.append(expected)
    assert len(set(versions)) == 5
    for v in versions:
        assert isinstance(v, str) and not v.lstrip("-").isdigit()


def test_stale_write_is_refused_with_current_value_and_counted(state: StateStore, telemetry_capture: Capture) -> None:
    """Two agents read one version; the second write is refused with the current value and version."""
    base = state.write_state("budget", 100, ABSENT_VERSION)["version"]
    first = state.write_state("budget", 80, base, agent_id="a")
    second = state.write_state("budget", 90, base, agent_id="b")
    assert first["ok"]
    assert second["ok"] is False and second["error"] == c.OUTCOME_REJECTED_STALE_VERSION
    assert second["retry"] is True
    assert second["current_value"] == 80 and second["current_version"] == first["version"]
    assert "Re-read, redo, retry" in second["message"] and first["version"] in second["message"]
    assert state.read_state("budget")["value"] == 80
    span = telemetry_capture.spans("write_state")[-1].attributes
    assert span[c.TOOL_OUTCOME] == c.OUTCOME_REJECTED_STALE_VERSION
    assert span[c.STATE_VERSION_EXPECTED] == base
    assert span[c.STATE_VERSION_CURRENT] == first["version"]
    assert c.STATE_VERSION_WRITTEN not in span
    assert span[c.GEN_AI_AGENT_ID] == "b"
    labels = {c.LABEL_TOOL: "write_state", c.LABEL_REASON: c.OUTCOME_REJECTED_STALE_VERSION}
    assert telemetry_capture.sample(c.METRIC_GUARD_REFUSALS_TOTAL, labels) == 1


def test_create_over_an_existing_key_is_refused(state: StateStore) -> None:
    """Passing the absent token for a key that exists never overwrites it."""
    state.write_state("k", "first", ABSENT_VERSION)
    refused = state.write_state("k", "second", ABSENT_VERSION)
    assert refused["error"] == c.OUTCOME_REJECTED_STALE_VERSION and "already exists" in refused["message"]
    assert state.read_state("k")["value"] == "first"


def test_update_of_a_missing_key_is_refused(state: StateStore) -> None:
    """A made-up token for a key that does not exist is refused with the absent token to use."""
    refused = state.write_state("ghost", 1, "ver_made_up")
    assert refused["error"] == c.OUTCOME_REJECTED_STALE_VERSION
    assert refused["current_version"] == ABSENT_VERSION and refused["current_value"] is None
    assert _rows(state) == []


def test_write_has_no_force_or_default_version(state: StateStore) -> None:
    """write_state requires expected_version (no default) and no tool has a force/bypass parameter."""
    params = inspect.signature(state.write_state).parameters
    assert params["expected_version"].default is inspect.Parameter.empty
    for tool in (state.read_state, state.write_state, state.force_write_state):
        assert not {"force", "bypass", "skip_check"} & set(inspect.signature(tool).parameters)
    with pytest.raises(TypeError):
        state.write_state("k", 1)  # type: ignore[call-arg]


def test_forced_write_needs_an_operator_and_leaves_evidence(state: StateStore, telemetry_capture: Capture) -> None:
    """force_write_state refuses without an operator; with one it writes, outcome forced, forced_by set."""
    base = state.write_state("k", 1, ABSENT_VERSION)["version"]
    for nobody in ("", "   ", None, "x" * 300):
        with pytest.raises(GuardError, match="operator"):
            state.force_write_state("k", 2, nobody)  # type: ignore[arg-type]
    assert state.read_state("k")["value"] == 1
    forced = state.force_write_state("k", 3, "alice@ops")
    assert forced["ok"] and forced["forced_by"] == "alice@ops"
    assert state.read_state("k")["value"] == 3
    span = telemetry_capture.spans("force_write_state")[-1].attributes
    assert span[c.TOOL_OUTCOME] == c.OUTCOME_FORCED and span[c.ERROR_TYPE] == c.OUTCOME_FORCED
    assert span[c.TOOL_FORCED_BY] == "alice@ops"
    assert span[c.STATE_VERSION_CURRENT] == base and span[c.STATE_VERSION_WRITTEN] == forced["version"]
    assert span[c.TOOL_READBACK] == c.READBACK_MATCH
    assert telemetry_capture.calls("force_write_state", outcome=c.OUTCOME_FORCED) == 1
    with state.store.read() as conn:
        assert tuple(conn.execute("SELECT actor, forced FROM guard_changes ORDER BY seq DESC").fetchone()) == ("alice@ops", 1)


TRUNCATING_TRIGGER = {
    "sqlite": [
        "CREATE TRIGGER truncate AFTER UPDATE ON guard_state BEGIN "
        "UPDATE guard_state SET value = '\"cut\"' WHERE key = NEW.key; END"
    ],
    "postgresql": [
        "CREATE FUNCTION truncate_value() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN NEW.value := '\"cut\"'; RETURN NEW; END $$",
        "CREATE TRIGGER truncate BEFORE UPDATE ON guard_state FOR EACH ROW EXECUTE FUNCTION truncate_value()",
    ],
}


def test_readback_reads_the_database(state: StateStore, telemetry_capture: Capture) -> None:
    """When the database does not hold what was sent (a trigger rewrites it), the read-back says mismatch."""
    state.write_state("k", "v0", ABSENT_VERSION)
    with state.store.transaction() as conn:
        for statement in TRUNCATING_TRIGGER[state.store.dialect]:
            conn.execute(statement)
    result = state.write_state("k", "a long value", state.read_state("k")["version"])
    assert result["ok"]  # the store said yes...
    span = telemetry_capture.spans("write_state")[-1].attributes
    assert span[c.TOOL_READBACK] == c.READBACK_MISMATCH  # ...and the read-back caught it
    assert span[c.TOOL_OUTCOME] == c.OUTCOME_READBACK_MISMATCH


def test_readback_of_a_superseded_write_uses_the_change_log(state: StateStore) -> None:
    """A write replaced by a later one still reads back as match, from the change log."""
    from telemetry.guards._state import persisted

    first = state.write_state("k", {"a": 1}, ABSENT_VERSION)
    state.write_state("k", {"a": 2}, first["version"])
    assert persisted(state.store, "k", first["version"], '{"a":1}')
    assert not persisted(state.store, "k", first["version"], '{"a":9}')
    assert not persisted(state.store, "k", "ver_never_written", '{"a":1}')


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"key": 7}, "key must be a string, got int"),
        ({"key": ""}, "key must be a non-empty string"),
        ({"key": "x" * 600}, "the limit is 512"),
        ({"value": {1, 2}}, "must be a JSON value"),
        ({"value": float("nan")}, "must be a JSON value"),
        ({"value": "x" * 300_000}, "bytes as JSON; the limit is"),
        ({"expected_version": 3}, "expected_version must be a string"),
        ({"expected_version": ""}, "expected_version must be a non-empty string"),
        ({"agent_id": ""}, "agent_id must be a non-empty string"),
        ({"key": "k\ud800"}, "not valid Unicode text"),
        ({"value": "caf\udce9"}, "not valid Unicode text"),
        ({"value": 10**5000}, "must be a JSON value"),
    ],
)
def test_bad_input_is_a_clear_envelope_and_writes_nothing(
    state: StateStore, telemetry_capture: Capture, kwargs: dict[str, Any], needle: str
) -> None:
    """Wrong types, empty keys, oversized values: invalid_argument naming the value, database untouched."""
    base = state.write_state("k", "kept", ABSENT_VERSION)["version"]
    before = _rows(state)
    call = {"key": "k", "value": "new", "expected_version": base, "agent_id": "a", **kwargs}
    result = state.write_state(**call)
    assert result["ok"] is False and result["error"] == c.OUTCOME_INVALID_ARGUMENT and result["retry"] is True
    assert needle in result["message"]
    assert _rows(state) == before
    attrs = telemetry_capture.spans("write_state")[-1].attributes
    assert attrs[c.TOOL_OUTCOME] == c.OUTCOME_INVALID_ARGUMENT
    # What was valid still identifies the refused call on its span; what was not is left off.
    assert attrs.get(c.STATE_KEY) == (call["key"] if call["key"] == "k" else None)
    assert attrs.get(c.GEN_AI_AGENT_ID) == (call["agent_id"] or None)


def test_bad_read_input_is_an_envelope(state: StateStore) -> None:
    """read_state with a non-string key answers invalid_argument instead of raising."""
    result = state.read_state(None)  # type: ignore[arg-type]
    assert result["error"] == c.OUTCOME_INVALID_ARGUMENT and "key must be a string" in result["message"]


def test_memory_store_works_in_one_process() -> None:
    """A ':memory:' store serves a single process: write then read back."""
    state = StateStore(SQLiteStore(":memory:"))
    written = state.write_state("k", [1, 2], ABSENT_VERSION)
    assert state.read_state("k") == {"ok": True, "key": "k", "value": [1, 2], "version": written["version"], "exists": True}


def test_a_locked_store_is_a_retryable_refusal_and_the_thread_recovers(tmp_path: Path, telemetry_capture: Capture) -> None:
    """A write lock held past the busy timeout: the store raises StoreBusy naming the file, a guard tool
    answers rate_limited with retry (on its span too), nothing is written, and the next write works."""
    import sqlite3

    from telemetry.guards import _sqlite as guard_sqlite

    path = tmp_path / "busy.db"
    state = StateStore(SQLiteStore(path))
    first = state.write_state("k", 1, ABSENT_VERSION)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    original = guard_sqlite.BUSY_TIMEOUT_MS
    try:
        state.store.close()
        guard_sqlite.BUSY_TIMEOUT_MS = 100  # new connections wait 0.1 s, not 30 s
        with pytest.raises(guard_sqlite.StoreBusy, match="busy.db"):
            with state.store.transaction():
                pass
        refused = state.write_state("k", 2, first["version"], agent_id="a")
    finally:
        guard_sqlite.BUSY_TIMEOUT_MS = original
        holder.execute("ROLLBACK")
        holder.close()
    assert refused["error"] == c.OUTCOME_RATE_LIMITED and refused["retry"] is True
    assert refused["retry_after_seconds"] > 0 and "busy.db" in refused["message"]
    assert telemetry_capture.spans("write_state")[-1].attributes[c.TOOL_OUTCOME] == c.OUTCOME_RATE_LIMITED
    assert state.read_state("k")["value"] == 1
    assert state.write_state("k", 2, first["version"])["ok"] is True


def test_a_conditional_write_logs_exactly_when_it_writes(state: StateStore) -> None:
    """Store.conditional_write, on both stores: the log row is there when the write changed the row
    and absent when the condition failed (a stale update, a create of an existing key), and the
    guards' hostile-looking values stay bound parameters."""
    from telemetry.guards._state import put_alone

    hostile = "k'); DELETE FROM guard_changes; --%s?"
    first = put_alone(state.store, hostile, '"a"', ABSENT_VERSION, actor="x?%s")
    assert first is not None
    assert put_alone(state.store, hostile, '"b"', ABSENT_VERSION, actor="x") is None  # exists
    assert put_alone(state.store, hostile, '"b"', "ver_not_it", actor="x") is None  # stale
    second = put_alone(state.store, hostile, '"b"', first, actor="y")
    assert second is not None
    logged = state.store.query_one(
        "SELECT count(*), max(actor), min(actor) FROM guard_changes WHERE key = ?", (hostile,)
    )
    assert tuple(logged) == (2, "y", "x?%s")
    assert state.read_state(hostile) | {"version": None} == {
        "ok": True, "key": hostile, "value": "b", "version": None, "exists": True
    }
