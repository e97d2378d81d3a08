"""The SQLite store: failures mapped by result code, ``~`` paths, COMMIT/ROLLBACK recovery, pruning.

Every failure here is produced by SQLite itself (a page limit, a file of garbage, a damaged
page, an authorizer, a deferred foreign key), not by a stand-in that raises.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from telemetry import ConfigurationError
from telemetry import conventions as c
from telemetry.guards import ABSENT_VERSION, SQLiteStore, StateStore, StoreBusy, open_store
from telemetry.guards._sqlite import error_code, map_error
from telemetry.guards._store import StoreUnavailable
from telemetry.testing import Capture


def _write(state: StateStore, key: str = "k", value: Any = "v") -> dict[str, Any]:
    return state.write_state(key, value, state.read_state(key)["version"])


def test_only_busy_and_locked_are_retryable() -> None:
    """SQLITE_BUSY and SQLITE_LOCKED map to StoreBusy; the others to StoreUnavailable or themselves."""
    def failure(message: str, code: int) -> sqlite3.OperationalError:
        exc = sqlite3.OperationalError(message)
        exc.sqlite_errorcode = code  # type: ignore[attr-defined]
        return exc

    assert isinstance(map_error("g.db", failure("database is locked", 5)), StoreBusy)
    assert isinstance(map_error("g.db", failure("database table is locked", 262)), StoreBusy)  # LOCKED_SHAREDCACHE
    for code, reason in ((8, "read_only"), (13, "full"), (11, "corrupt"), (26, "corrupt"), (14, "cannot_open"), (10, "io_error")):
        mapped = map_error("g.db", failure("x", code))
        assert isinstance(mapped, StoreUnavailable) and mapped.reason == reason and "g.db" in str(mapped)
    syntax = failure("near SELEC: syntax error", 1)
    assert map_error("g.db", syntax) is syntax
    integrity = sqlite3.IntegrityError("UNIQUE constraint failed")
    assert map_error("g.db", integrity) is integrity
    assert error_code(sqlite3.OperationalError("database is locked")) == 5


def test_a_full_store_is_unavailable_not_rate_limited(tmp_path: Path, telemetry_capture: Capture) -> None:
    """A write that hits SQLITE_FULL raises StoreUnavailable (full), names the file, writes nothing."""
    state = StateStore(SQLiteStore(tmp_path / "guards.db"))
    assert _write(state, "small", "ok")["ok"]
    with state.store.transaction() as conn:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages + 1}")
    with pytest.raises(StoreUnavailable) as info:
        state.write_state("big", "x" * 200_000, ABSENT_VERSION)
    assert info.value.reason == "full" and str(tmp_path / "guards.db") in str(info.value) and "free space" in str(info.value)
    span = telemetry_capture.spans("write_state")[-1]
    assert span.attributes[c.TOOL_TRANSPORT] == c.TRANSPORT_ERROR
    assert span.attributes[c.ERROR_TYPE].endswith("StoreUnavailable")
    assert state.read_state("big")["exists"] is False and state.read_state("small")["value"] == "ok"


def test_a_read_only_store_is_unavailable(tmp_path: Path) -> None:
    """A store SQLite refuses to write (SQLITE_READONLY) is StoreUnavailable (read_only).

    Running as root, file permissions do not bind, so the connection is made read-only with
    ``PRAGMA query_only``, which fails writes with the same SQLITE_READONLY; as another user the
    file itself is made read-only.
    """
    path = tmp_path / "guards.db"
    state = StateStore(SQLiteStore(path))
    assert _write(state)["ok"]
    if os.geteuid() == 0:
        with state.store.read() as conn:
            conn.execute("PRAGMA query_only = ON")
    else:
        state.store.close()
        for name in os.listdir(tmp_path):
            os.chmod(tmp_path / name, 0o444)
        state = StateStore(SQLiteStore(path))
    with pytest.raises(StoreUnavailable) as info:
        _write(state, "k", "new")
    assert info.value.reason == "read_only" and "writable" in str(info.value)


def test_a_file_that_is_not_a_database_is_named(tmp_path: Path) -> None:
    """Garbage where the store should be: StoreUnavailable (corrupt) naming the file, at first use."""
    path = tmp_path / "guards.db"
    path.write_bytes(b"this is not a sqlite file at all " * 200)
    with pytest.raises(StoreUnavailable) as info:
        StateStore(SQLiteStore(path))
    assert info.value.reason == "corrupt" and str(path) in str(info.value) and "not a SQLite database" in str(info.value)


def test_a_damaged_page_is_corrupt(tmp_path: Path) -> None:
    """A database whose table pages were overwritten reads as StoreUnavailable (corrupt)."""
    path = tmp_path / "guards.db"
    state = StateStore(SQLiteStore(path))
    for i in range(200):
        state.write_state(f"k{i}", "v" * 500, ABSENT_VERSION)
    state.store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    page = 4096
    data[2 * page: len(data)] = b"\xff" * (len(data) - 2 * page)
    path.write_bytes(bytes(data))
    store = SQLiteStore(path)
    with pytest.raises(StoreUnavailable) as info:
        store.query_one("SELECT count(*), max(value) FROM guard_state")
    assert info.value.reason == "corrupt"


def test_a_store_whose_folder_vanished_cannot_open(tmp_path: Path) -> None:
    """The folder removed between construction and first use: StoreUnavailable (cannot_open)."""
    folder = tmp_path / "gone"
    folder.mkdir()
    store = SQLiteStore(folder / "guards.db")
    folder.rmdir()
    with pytest.raises(StoreUnavailable) as info:
        StateStore(store)
    assert info.value.reason == "cannot_open" and "gone" in str(info.value)


def test_opening_a_fresh_store_waits_for_a_writer_instead_of_failing(tmp_path: Path) -> None:
    """Another process mid-write on a store file not yet in WAL mode: opening waits and succeeds.

    Switching to WAL from a read lock while another connection holds the write lock is answered
    SQLITE_BUSY at once (SQLite's deadlock rule skips the busy handler); four processes opening
    one fresh store together met this in CI. Here the writer is held for a known time instead.
    """
    path = tmp_path / "guards.db"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE other (x)")
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO other VALUES (1)")
    release = threading.Timer(0.3, writer.execute, ("COMMIT",))
    release.start()
    try:
        state = StateStore(SQLiteStore(path))
        assert _write(state)["ok"]
    finally:
        release.join()
        writer.close()
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert check.execute("SELECT x FROM other").fetchall() == [(1,)], "the other writer's row was lost"


def test_a_home_relative_path_is_expanded_for_opening(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``~/x.sqlite`` is checked and opened as the same file under the home folder."""
    monkeypatch.setenv("HOME", str(tmp_path))
    state = StateStore(SQLiteStore("~/x.sqlite"))
    assert _write(state)["ok"]
    assert (tmp_path / "x.sqlite").exists() and not Path("~").exists()
    assert state.store.path == str(tmp_path / "x.sqlite")


@pytest.mark.parametrize(
    ("path", "needle"),
    [("", "file path"), ("{tmp}", "is a folder"), ("{tmp}/missing/g.db", "does not exist"), ("a\0b", "file path")],
)
def test_bad_store_paths_are_refused_up_front(tmp_path: Path, path: str, needle: str) -> None:
    """An empty path, a folder, a file in a missing folder, a NUL: ConfigurationError naming it."""
    with pytest.raises(ConfigurationError, match=needle):
        SQLiteStore(path.format(tmp=tmp_path))


@pytest.mark.parametrize("url", ["sqlite:///{tmp}/g.db", "mysql://u:hunter2@db/guards", "file://{tmp}/g.db"])
def test_open_store_refuses_a_url_it_does_not_open_by_its_scheme_alone(tmp_path: Path, url: str) -> None:
    """open_store takes a postgresql:// URL or a SQLite path: another URL (sqlite:///PATH, as other
    libraries spell it) is refused naming its scheme and what to pass instead, never read as a
    relative path "sqlite:/..." (a folder that does not exist), never echoing a password, and
    nothing is created."""
    target = url.format(tmp=tmp_path)
    scheme = target.split("://")[0]
    with pytest.raises(ConfigurationError) as caught:
        open_store(target)
    assert str(caught.value) == (f"the store is a {scheme}:// URL, which open_store does not open: pass a postgresql:// "
                                 "URL for PostgreSQL, or a SQLite file's path (for sqlite:///PATH, pass PATH)")
    assert not list(tmp_path.iterdir()) and not Path(scheme + ":").exists()


def test_a_failed_commit_is_rolled_back_and_the_connection_reused(tmp_path: Path) -> None:
    """COMMIT refused by a deferred foreign key leaves no transaction open: the rows are gone and
    the next transaction on the same connection works."""
    store = SQLiteStore(tmp_path / "g.db")
    store.ensure_schema("t", "CREATE TABLE IF NOT EXISTS parent (id INTEGER PRIMARY KEY);"
                             "CREATE TABLE IF NOT EXISTS child (id INTEGER PRIMARY KEY, parent INTEGER "
                             "REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);")
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
        with store.transaction() as conn:
            conn.execute("INSERT INTO child (id, parent) VALUES (1, 99)")
            first = conn
    assert not first.in_transaction
    with store.transaction() as conn:
        assert conn is first
        conn.execute("INSERT INTO parent (id) VALUES (99)")
    assert store.query_one("SELECT count(*) FROM child")[0] == 0
    assert store.query_one("SELECT count(*) FROM parent")[0] == 1


def test_a_connection_that_cannot_even_roll_back_is_replaced(tmp_path: Path) -> None:
    """When COMMIT and ROLLBACK both fail (an authorizer denies them), the connection is closed
    (which rolls back) and the thread's next call opens a fresh one; nothing was written."""
    store = SQLiteStore(tmp_path / "g.db")
    store.ensure_schema("t", "CREATE TABLE IF NOT EXISTS t (x INTEGER);")

    def deny_ending(action: int, arg1: Any, *rest: Any) -> int:
        ending = action == sqlite3.SQLITE_TRANSACTION and arg1 in ("COMMIT", "ROLLBACK")
        return sqlite3.SQLITE_DENY if ending else sqlite3.SQLITE_OK

    with pytest.raises(StoreUnavailable, match="not authorized"):
        with store.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (1)")
            conn.set_authorizer(deny_ending)
            stuck = conn
    with store.transaction() as conn:
        assert conn is not stuck
        conn.execute("INSERT INTO t VALUES (2)")
    assert SQLiteStore(tmp_path / "g.db").query_one("SELECT group_concat(x) FROM t")[0] == "2"


def test_prune_drops_old_change_log_rows_only(tmp_path: Path) -> None:
    """prune(older_than=...) deletes log rows older than the cut and never the state."""
    state = StateStore(SQLiteStore(tmp_path / "g.db"))
    for i in range(3):
        _write(state, "k", i)
    with state.store.transaction() as conn:
        conn.execute("UPDATE guard_changes SET at = at - 40 * 86400 WHERE seq < (SELECT max(seq) FROM guard_changes)")
    assert state.prune() == 2  # the default keeps 30 days
    assert state.prune(older_than=timedelta(days=1)) == 0
    assert state.read_state("k")["value"] == 2
    assert state.prune(older_than=0) == 1
    assert state.read_state("k")["value"] == 2
    for bad in (-1, float("nan"), "30d", True):
        with pytest.raises(Exception, match="older_than"):
            state.prune(older_than=bad)  # type: ignore[arg-type]
