"""The SQLite store's compare-and-set, written out for speed, keeps every promise of the long way.

``SQLiteStore.conditional_write`` runs the guarded write's transaction statement by statement
instead of through the generic transaction context manager, and runs the change-log row as
``INSERT ... VALUES``. Each test gives it a failure the generic path survives: a lock held by
another writer, a COMMIT refused, a statement refused mid-way, a version that moved, a fork.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from telemetry.guards import ABSENT_VERSION, SQLiteStore, StateStore, StoreBusy
from telemetry.guards._store import StoreUnavailable
from telemetry.guards._validation import digest


def _state(tmp_path: Path) -> StateStore:
    return StateStore(SQLiteStore(tmp_path / "g.db"))


def test_an_accepted_write_logs_exactly_the_row_the_contract_names(tmp_path: Path) -> None:
    """key, the version written and the one replaced, the value's hash, the actor, no plan, not forced, now."""
    state = _state(tmp_path)
    first = state.write_state("plan", {"step": 1}, ABSENT_VERSION, agent_id="planner")
    before = time.time()
    second = state.write_state("plan", {"step": 2}, first["version"])
    rows = state.store.query_one("SELECT count(*) FROM guard_changes")[0]
    row = state.store.query_one(
        "SELECT key, version, previous_version, value_hash, actor, change_ref, forced, at FROM guard_changes "
        "ORDER BY seq DESC LIMIT 1"
    )
    assert rows == 2
    assert tuple(row)[:7] == ("plan", second["version"], first["version"], digest('{"step":2}'), None, None, 0)
    assert before - 1 <= row[7] <= time.time() + 1
    assert state.read_state("plan")["value"] == {"step": 2}


def test_a_moved_version_writes_nothing_and_leaves_no_transaction_open(tmp_path: Path) -> None:
    """A stale write is refused with nothing written or logged, and the connection's next write works."""
    state = _state(tmp_path)
    first = state.write_state("k", 1, ABSENT_VERSION)
    state.write_state("k", 2, first["version"])
    refused = state.write_state("k", 3, first["version"])
    assert refused["ok"] is False and refused["current_value"] == 2
    assert state.store.query_one("SELECT count(*) FROM guard_changes")[0] == 2
    with state.store.transaction() as conn:
        assert conn.execute("SELECT value FROM guard_state WHERE key = 'k'").fetchone()[0] == "2"
    assert state.write_state("k", 4, refused["current_version"])["ok"]


def test_a_lock_held_by_another_writer_is_busy_and_writes_nothing(tmp_path: Path) -> None:
    """BEGIN IMMEDIATE that cannot get the lock within the busy timeout: StoreBusy, then a retry works."""
    state = _state(tmp_path)
    first = state.write_state("k", 1, ABSENT_VERSION)
    with state.store.transaction() as conn:  # this thread's connection: wait 50 ms, not 30 s
        conn.execute("PRAGMA busy_timeout = 50")
    other = sqlite3.connect(tmp_path / "g.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        refused = state.write_state("k", 2, first["version"])  # refuse_when_busy: the envelope
        assert refused["ok"] is False and refused["error"] == "rate_limited" and refused["retry"] is True
        with pytest.raises(StoreBusy):
            state.store.conditional_write(
                "UPDATE guard_state SET value = ? WHERE key = ? AND {gate}", ("9", "k"),
                "INSERT INTO guard_changes (key, version, previous_version, value_hash, actor, change_ref, forced, at) "
                "SELECT ?, ?, ?, ?, ?, ?, ?, ?", ("k", "v", "p", "h", None, None, 0, 0.0),
            )
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert state.read_state("k")["value"] == 1
    assert state.write_state("k", 2, first["version"])["ok"]


def test_a_refused_commit_rolls_back_and_the_next_write_opens_afresh(tmp_path: Path) -> None:
    """COMMIT and ROLLBACK both denied (an authorizer): mapped, nothing written, the connection replaced."""
    state = _state(tmp_path)
    first = state.write_state("k", 1, ABSENT_VERSION)

    def deny_ending(action: int, arg1: Any, *rest: Any) -> int:
        ending = action == sqlite3.SQLITE_TRANSACTION and arg1 in ("COMMIT", "ROLLBACK")
        return sqlite3.SQLITE_DENY if ending else sqlite3.SQLITE_OK

    with state.store.transaction() as conn:
        stuck = conn
    stuck.set_authorizer(deny_ending)
    with pytest.raises(StoreUnavailable, match="not authorized"):
        state.write_state("k", 2, first["version"])
    assert SQLiteStore(tmp_path / "g.db").query_one("SELECT value FROM guard_state WHERE key = 'k'")[0] == "1"
    with state.store.transaction() as conn:
        assert conn is not stuck and conn.in_transaction
    assert state.write_state("k", 2, first["version"])["ok"]
    assert state.store.query_one("SELECT count(*) FROM guard_changes")[0] == 2


def test_a_statement_refused_mid_way_rolls_the_update_back(tmp_path: Path) -> None:
    """The UPDATE succeeds, the change-log INSERT is refused: neither is kept, the error is mapped."""
    state = _state(tmp_path)
    first = state.write_state("k", 1, ABSENT_VERSION)

    def deny_log(action: int, arg1: Any, *rest: Any) -> int:
        return sqlite3.SQLITE_DENY if action == sqlite3.SQLITE_INSERT and arg1 == "guard_changes" else sqlite3.SQLITE_OK

    with state.store.transaction() as conn:
        conn.set_authorizer(deny_log)  # expires the connection's prepared statements
        kept = conn
    with pytest.raises(StoreUnavailable, match="not authorized"):
        state.write_state("k", 2, first["version"])
    with state.store.transaction() as conn:
        assert conn is kept  # the rollback worked: the connection stays
        conn.set_authorizer(None)
    assert state.read_state("k")["value"] == 1
    assert state.store.query_one("SELECT count(*) FROM guard_changes")[0] == 1
    assert state.write_state("k", 2, first["version"])["ok"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_writes_on_its_own_connection(tmp_path: Path) -> None:
    """After a fork the child never touches the parent's connection, on the hot path or any other."""
    state = _state(tmp_path)
    first = state.write_state("k", 1, ABSENT_VERSION)
    with state.store.transaction() as conn:
        parents = conn
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only when every check held
        code = 1
        try:
            written = state.write_state("k", 2, first["version"])
            with state.store.transaction() as conn:
                code = 0 if written["ok"] and conn is not parents else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    with state.store.transaction() as conn:
        assert conn is parents
    current = state.read_state("k")
    assert current["value"] == 2 and state.write_state("k", 3, current["version"])["ok"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_never_hands_out_its_parents_version_tokens(tmp_path: Path) -> None:
    """Tokens come from a per-thread batch of random bytes: a child forked mid-batch must draw
    its own, or parent and child would write the same "new" version."""
    from telemetry.guards._tokens import new_version

    new_version()  # the parent's batch is loaded; the child inherits its memory
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write, " ".join(new_version() for _ in range(50)).encode())
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        childs = set(pipe.read().split())
    parents = {new_version() for _ in range(50)}
    assert os.waitstatus_to_exitcode(status) == 0 and len(childs) == 50
    assert not childs & parents


def test_version_tokens_are_unique_and_opaque_past_a_batch() -> None:
    """Across the refill of the per-thread batch, and from several threads at once."""
    import re
    import threading

    from telemetry.guards._tokens import new_version

    tokens: list[str] = []

    def draw() -> None:
        tokens.extend(new_version() for _ in range(1_000))

    threads = [threading.Thread(target=draw) for _ in range(4)]
    for thread in threads:
        thread.start()
    draw()
    for thread in threads:
        thread.join()
    assert len(set(tokens)) == 5_000
    assert all(re.fullmatch(r"ver_[0-9a-f]{24}", token) for token in tokens)


def test_a_closed_store_writes_again_on_a_fresh_connection(tmp_path: Path) -> None:
    """close() drops this thread's connection and the cursor the hot path reuses: the next write
    opens both anew instead of using a closed cursor."""
    state = _state(tmp_path)
    first = state.write_state("k", 1, ABSENT_VERSION)
    state.store.close()
    second = state.write_state("k", 2, first["version"])
    assert second["ok"] and state.read_state("k")["value"] == 2
