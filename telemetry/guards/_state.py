"""Version-bound shared state: the split-brain fix.

Every key carries an opaque version token. ``read_state`` returns the value with its token;
``write_state`` must pass the token it read back as ``expected_version`` and is refused when the
key moved since (another agent wrote first). The comparison and the write are one conditional
``UPDATE ... WHERE version = ?``, committed with its change-log row or not at all (on
PostgreSQL both are one statement), so two writers that read the same version can never both
win, across threads, processes and (on PostgreSQL) hosts.

Tokens are random strings, never integers, so a model cannot guess the next one by arithmetic.
A missing key reads as :data:`ABSENT_VERSION`; a create passes that token, so
``expected_version`` never needs a default and "create" cannot silently overwrite.

Every accepted write also appends a row to the change log (``guard_changes``): which key, the
version written and the one it replaced, a hash of the value, who wrote it, and the plan that
caused it (see :mod:`telemetry.guards._plans`, whose set-level postconditions read this log).

There is no ``force`` parameter. :meth:`StateStore.force_write_state` is a separate tool for a
human operator; it needs the operator's identity and is recorded with outcome ``forced``.
"""

from __future__ import annotations

import json
import math
import threading
import time
from datetime import timedelta
from typing import Any, Final, Union

from .. import conventions as c
from ..exceptions import GuardError
from ..instrument import Call, current_call, instrument_tool
from . import _validation as validation
from ._envelope import busy_refusal, refusal, refuse_when_busy, success
from ._store import WRITE_GATE, Connection, Store, StoreBusy, require_store, ungated
from ._tokens import new_version
from ._validation import BadInput

__all__ = [
    "ABSENT_VERSION", "DEFAULT_CHANGE_RETENTION", "JSONValue", "StateStore", "current_row", "persisted", "put", "put_alone",
    "stored_row",
]

ABSENT_VERSION: Final = "absent"
"""The version token of a key that does not exist: ``read_state`` returns it for a missing key,
and ``write_state(..., expected_version=ABSENT_VERSION)`` creates the key (refused if it exists)."""

DEFAULT_CHANGE_RETENTION: Final = timedelta(days=30)
"""How long :meth:`StateStore.prune` keeps change-log rows by default."""

JSONValue = Union[str, int, float, bool, None, list[Any], dict[str, Any]]
"""What a state value may be: anything JSON can carry (objects need string keys)."""

SCHEMA_NAME: Final = "guards.state"
DDL: Final = """
CREATE TABLE IF NOT EXISTS guard_state (
    key        TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    version    TEXT NOT NULL,
    updated_at REAL NOT NULL,
    updated_by TEXT
);
CREATE TABLE IF NOT EXISTS guard_changes (
    seq              INTEGER PRIMARY KEY,
    key              TEXT NOT NULL,
    version          TEXT NOT NULL,
    previous_version TEXT NOT NULL,
    value_hash       TEXT NOT NULL,
    actor            TEXT,
    change_ref       TEXT,
    forced           INTEGER NOT NULL DEFAULT 0,
    at               REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS guard_changes_by_ref ON guard_changes (change_ref) WHERE change_ref IS NOT NULL;
CREATE INDEX IF NOT EXISTS guard_changes_by_time ON guard_changes (at);
"""


def ensure_state_schema(store: Store) -> None:
    """Create the state table and the change log in ``store`` (idempotent)."""
    store.ensure_schema(SCHEMA_NAME, DDL)


def current_row(conn: Connection, key: str) -> tuple[str, str] | None:
    """``(value_json, version)`` of ``key`` as this transaction sees it, or None when absent.

    With :func:`put`, the building blocks of every guarded write, public for code that runs its
    own transaction (``with store.transaction() as conn:``) over the state table: seeding a
    database, a migration, the demo's unguarded legacy tools. Neither is instrumented.
    """
    row = conn.execute(_CURRENT, (key,)).fetchone()
    return None if row is None else (row[0], row[1])


# A compare-and-set and its change-log row. WRITE_GATE is where a store running the write on
# its own takes its lock (see Store.conditional_write); inside a transaction it is plain truth.
_CREATE = (
    "INSERT INTO guard_state (key, value, version, updated_at, updated_by) SELECT ?, ?, ?, ?, ? "
    f"WHERE {WRITE_GATE} ON CONFLICT (key) DO NOTHING"
)
_UPDATE = (
    "UPDATE guard_state SET value = ?, version = ?, updated_at = ?, updated_by = ? "
    f"WHERE key = ? AND version = ? AND {WRITE_GATE}"
)
_LOG = (
    "INSERT INTO guard_changes (key, version, previous_version, value_hash, actor, change_ref, forced, at) "
    "SELECT ?, ?, ?, ?, ?, ?, ?, ?"
)
# The same row inside a transaction, where nothing is appended to it: VALUES is the cheaper form.
_LOG_ROW = (
    "INSERT INTO guard_changes (key, version, previous_version, value_hash, actor, change_ref, forced, at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_CURRENT = "SELECT value, version FROM guard_state WHERE key = ?"


def _change(
    key: str, value_json: str, previous_version: str, actor: str | None, change_ref: str | None, forced: bool
) -> tuple[str, str, tuple[object, ...], tuple[object, ...]]:
    """The new version, and the write and log statements' parameters, of one compare-and-set."""
    version = new_version()
    now = time.time()
    if previous_version == ABSENT_VERSION:
        write = _CREATE
        params: tuple[object, ...] = (key, value_json, version, now, actor)
    else:
        write = _UPDATE
        params = (value_json, version, now, actor, key, previous_version)
    log = (key, version, previous_version, validation.digest(value_json), actor, change_ref, int(forced), now)
    return version, write, params, log


def put(
    conn: Connection,
    key: str,
    value_json: str,
    previous_version: str,
    *,
    actor: str | None,
    change_ref: str | None = None,
    forced: bool = False,
) -> str | None:
    """Compare-and-set ``key`` from ``previous_version`` to a new version; log the change.

    Must run inside a write transaction. Returns the new version, or None when the key is not
    at ``previous_version`` (nothing is written then). The condition is part of the one
    statement that writes, so the guarantee holds even without the surrounding lock.
    """
    version, write, params, log = _change(key, value_json, previous_version, actor, change_ref, forced)
    if conn.execute(ungated(write), params).rowcount != 1:
        return None
    conn.execute(_LOG_ROW, log)
    return version


def put_alone(store: Store, key: str, value_json: str, previous_version: str, *, actor: str | None) -> str | None:
    """:func:`put` as a transaction of its own, in the fewest round trips ``store`` can make it
    (:meth:`~telemetry.guards._store.Store.conditional_write`): the new version, or None."""
    version, write, params, log = _change(key, value_json, previous_version, actor, None, False)
    return version if store.conditional_write(write, params, _LOG, log) else None


def stored_row(store: Store, key: str) -> tuple[str, str] | None:
    """``(value_json, version)`` of ``key`` now (one atomic read), or None when absent."""
    row = store.query_one(_CURRENT, (key,))
    return None if row is None else (row[0], row[1])


def persisted(store: Store, key: str, version: str, value_json: str) -> bool:
    """Read-back through the database (never a cache): did ``version`` of ``key`` persist as sent?

    When a later write already replaced it, the change log says what that version held.
    """
    row = stored_row(store, key)
    if row is not None and row[1] == version:
        return bool(row[0] == value_json)
    # The append-only change log says what a since-replaced version held. No index on version
    # (it would double the cost of every write): scan from the newest end, where it is.
    logged = store.query_one(
        "SELECT value_hash FROM guard_changes WHERE version = ? AND key = ? ORDER BY seq DESC LIMIT 1",
        (version, key),
    )
    return logged is not None and logged[0] == validation.digest(value_json)


def _readback(call: Call, result: Any) -> bool | None:
    """``write_state``/``force_write_state`` read-back: the row (or its log entry) holds what was sent."""
    if not isinstance(result, dict) or result.get(c.ENVELOPE_OK) is not True:
        return None
    owner = call.args[0] if call.args else None
    if not isinstance(owner, StateStore):  # pragma: no cover - the tools are methods
        return None
    key, version = result["key"], result["version"]
    sent = getattr(owner._sent, "last", None)
    if sent is not None and sent[0] == key and sent[1] == version:
        value_json = sent[2]  # what this thread just sent (saves binding and re-encoding)
    else:
        arguments = call.arguments
        value_json = validation.json_text("value", arguments["value"], max_bytes=owner.max_value_bytes)
    return persisted(owner.store, key, version, value_json)


class StateStore:
    """Version-bound key/value state shared by a crew, in a guard :class:`~telemetry.guards._store.Store`.

    Wire ``read_state`` and ``write_state`` into your agent framework as tools (they are bound
    methods with plain typed parameters); keep ``force_write_state`` for operators.
    """

    def __init__(self, store: Store, *, max_value_bytes: int = validation.DEFAULT_MAX_VALUE_BYTES) -> None:
        store = require_store(store, "StateStore")
        if isinstance(max_value_bytes, bool) or not isinstance(max_value_bytes, int) or max_value_bytes < 1:
            raise GuardError(f"max_value_bytes must be a positive integer, got {max_value_bytes!r}")
        self.store = store
        self.max_value_bytes = max_value_bytes
        self._sent = threading.local()  # (key, version, value JSON) of this thread's last write
        ensure_state_schema(store)

    def prune(self, older_than: timedelta | float = DEFAULT_CHANGE_RETENTION) -> int:
        """Delete change-log rows older than ``older_than`` (a timedelta, or seconds); returns how many.

        The log grows by one row per accepted write. What it is read for is recent: a read-back
        of a version replaced moments later, a plan's postcondition inside its own commit, a
        forensic look at the last days. Run this from a periodic job; the state itself (every
        key's current value and version) is never touched.
        """
        seconds = older_than.total_seconds() if isinstance(older_than, timedelta) else older_than
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds < float("inf"):
            raise GuardError(f"older_than must be a timedelta or a number of seconds, zero or more; got {validation.show(older_than)}")
        with self.store.transaction() as conn:
            cursor = conn.execute("DELETE FROM guard_changes WHERE at < ?", (time.time() - seconds,))
        return int(cursor.rowcount)

    @instrument_tool(name="read_state", kind=c.KIND_READ)
    @refuse_when_busy
    def read_state(self, key: str, agent_id: str | None = None) -> dict[str, Any]:
        """Read a shared value and its version token.

        Returns ``{"ok": true, "key", "value", "version", "exists"}``. Keep ``version``: it is an
        opaque token (not a number; do not change it) that you must pass as ``expected_version``
        when you write this key. A key that does not exist yet has value null and version
        ``"absent"``; pass ``"absent"`` to create it.
        """
        call = current_call()
        try:
            key = validation.text("key", key)
            agent_id = validation.optional_text("agent_id", agent_id)
        except BadInput as bad:
            _record_what_is_valid(call, {c.STATE_KEY: key, c.GEN_AI_AGENT_ID: agent_id})
            return bad.envelope
        row = stored_row(self.store, key)  # one statement: one snapshot
        value_json, version = row if row is not None else ("null", ABSENT_VERSION)
        call.set_attributes({c.STATE_KEY: key, c.STATE_VERSION_READ: version, c.GEN_AI_AGENT_ID: agent_id})
        return success(key=key, value=json.loads(value_json), version=version, exists=row is not None)

    @instrument_tool(name="write_state", kind=c.KIND_WRITE, readback=_readback,
                     readback_timeout=math.inf)  # in this thread: the store's own timeouts bound its read
    def write_state(self, key: str, value: JSONValue, expected_version: str, agent_id: str | None = None) -> dict[str, Any]:
        """Write a shared value, but only if nobody changed it since you read it.

        ``expected_version`` is the version token ``read_state`` gave you (``"absent"`` to create
        a new key). On success returns ``{"ok": true, "key", "version", "previous_version"}``
        with the new token. If the key changed since your read, nothing is written and the
        result is ``{"ok": false, "error": "rejected_stale_version", "current_value",
        "current_version", ...}``: re-read, redo your change against the current value, and retry
        with the current version. Never reuse an old token to get a write through.
        """
        # The guards' hot path, so written out: refuse_when_busy, put_alone and success inline
        # (frames fewer), the same checks, statements and envelopes.
        try:
            call = current_call()
            try:
                key = validation.text("key", key)
                expected_version = validation.text("expected_version", expected_version)
                if agent_id is not None:
                    agent_id = validation.text("agent_id", agent_id)
                value_json = validation.json_text("value", value, max_bytes=self.max_value_bytes)
            except BadInput as bad:
                _record_what_is_valid(
                    call, {c.STATE_KEY: key, c.STATE_VERSION_EXPECTED: expected_version, c.GEN_AI_AGENT_ID: agent_id}
                )
                return bad.envelope
            recording = call.is_recording()  # False outside telemetry: no span, no read-back to help
            written: str | None = None
            row: tuple[str, str] | None = None
            answered = False
            try:
                # The conditional write is the check: when it wrote, the version at check time was
                # expected_version; when it did not, read what the key is at now instead. It runs
                # beside other such writes (on a server, the row lock orders writers of one key).
                version, write, params, log = _change(key, value_json, expected_version, agent_id, None, False)
                if self.store.conditional_write(write, params, _LOG, log):
                    written = version
                else:
                    row = stored_row(self.store, key)
                answered = True
            finally:
                if recording:  # once, on every path: each span call costs
                    attributes = {c.STATE_KEY: key, c.STATE_VERSION_EXPECTED: expected_version, c.GEN_AI_AGENT_ID: agent_id}
                    if written is not None:
                        attributes[c.STATE_VERSION_CURRENT] = expected_version
                        attributes[c.STATE_VERSION_WRITTEN] = written
                    elif answered:
                        attributes[c.STATE_VERSION_CURRENT] = row[1] if row is not None else ABSENT_VERSION
                    call.set_attributes(attributes)
            if written is None:
                return _stale(key, expected_version, row)
            if recording:
                self._sent.last = (key, written, value_json)
            return {c.ENVELOPE_OK: True, "key": key, "version": written, "previous_version": expected_version}
        except StoreBusy as busy:
            return busy_refusal(busy)

    @instrument_tool(name="force_write_state", kind=c.KIND_WRITE, readback=_readback,
                     readback_timeout=math.inf)  # in this thread: the store's own timeouts bound its read
    @refuse_when_busy
    def force_write_state(self, key: str, value: JSONValue, operator: str) -> dict[str, Any]:
        """Operators only: overwrite ``key`` whatever its version, on the record.

        Not a tool for models. ``operator`` is the human's identity (raises
        :class:`telemetry.GuardError` when empty); the call's outcome is ``forced`` and the span
        carries ``tool.forced_by``, so every bypass is counted and attributable.
        """
        try:
            operator = validation.text("operator", operator, max_length=256)
        except BadInput as bad:
            raise GuardError(
                f"force_write_state needs the operator's identity (a non-empty string of at most 256 "
                f"characters): {bad.envelope[c.ENVELOPE_MESSAGE]}; models must use write_state with the version they read"
            ) from None
        call = current_call()
        try:
            key = validation.text("key", key)
            value_json = validation.json_text("value", value, max_bytes=self.max_value_bytes)
        except BadInput as bad:
            _record_what_is_valid(call, {c.STATE_KEY: key, c.TOOL_FORCED_BY: operator})
            return bad.envelope
        with self.store.transaction() as conn:
            row = current_row(conn, key)
            current_version = row[1] if row is not None else ABSENT_VERSION
            written = put(conn, key, value_json, current_version, actor=operator, forced=True)
        assert written is not None, "the write lock is held: the version cannot have moved"
        self._sent.last = (key, written, value_json)
        call.set_outcome(c.OUTCOME_FORCED)
        call.set_attributes(
            {
                c.TOOL_FORCED_BY: operator,
                c.STATE_KEY: key,
                c.STATE_VERSION_CURRENT: current_version,
                c.STATE_VERSION_WRITTEN: written,
            }
        )
        return success(key=key, version=written, previous_version=current_version, forced_by=operator)


def _record_what_is_valid(call: Call, candidates: dict[str, Any]) -> None:
    """On a bad-input refusal, still put on the span the identifying arguments that were valid
    (the key, the agent), so forensics can tell whose call and which key was refused."""
    valid = {}
    for name, value in candidates.items():
        try:
            valid[name] = validation.text(name, value)
        except BadInput:
            continue
    call.set_attributes(valid)


def _stale(key: str, expected_version: str, row: tuple[str, str] | None) -> dict[str, Any]:
    current_value = json.loads(row[0]) if row is not None else None
    current_version = row[1] if row is not None else ABSENT_VERSION
    if expected_version == ABSENT_VERSION:
        what = f"key {key!r} already exists, so it cannot be created"
    elif row is None:
        what = f"key {key!r} does not exist (its version is {ABSENT_VERSION!r}), not {expected_version!r}"
    else:
        what = f"key {key!r} changed since you read it: it is at version {current_version!r}, not {expected_version!r}"
    return refusal(
        c.OUTCOME_REJECTED_STALE_VERSION,
        f"{what}. Nothing was written. Re-read, redo, retry: redo your change against current_value "
        f"and call write_state again with expected_version={current_version!r}.",
        retry=True,
        key=key,
        expected_version=expected_version,
        current_value=current_value,
        current_version=current_version,
    )
