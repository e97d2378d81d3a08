"""The guards' storage: one SQLite database file, safe across threads and processes.

SQLite is a real multi-process database in the standard library: WAL journaling lets readers
proceed while one writer commits, ``BEGIN IMMEDIATE`` takes the write lock up front so a
read-check-write sequence cannot interleave with another process's, and ``busy_timeout`` makes
contending writers wait instead of failing. Each thread gets its own connection (sqlite3
connections must not be shared across threads), opened lazily.

It implements :class:`~telemetry.guards._store.Store`, the whole interface the guards use, and
maps SQLite's failures by their result code, never by exception class: only SQLITE_BUSY and
SQLITE_LOCKED become :class:`StoreBusy` (wait and retry); a read-only, full, corrupt or
unopenable database becomes :class:`StoreUnavailable`, which names the file and what to fix.
"""

from __future__ import annotations

import os
import random
import re
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import lru_cache
from pathlib import Path

from ..exceptions import ConfigurationError
from ._store import StoreBusy, StoreUnavailable, ungated

__all__ = ["BUSY_TIMEOUT_MS", "SQLiteStore", "StoreBusy", "StoreUnavailable", "error_code", "map_error"]

BUSY_TIMEOUT_MS = 30_000

# SQLite's primary result codes (https://sqlite.org/rescode.html); an extended code carries its
# primary code in its low byte.
_BUSY, _LOCKED = 5, 6
_UNAVAILABLE = {
    3: ("permission", "denies this process access (SQLITE_PERM): give it read and write permission"),
    8: ("read_only", "is read-only (SQLITE_READONLY): make the file, its folder and its -wal/-shm files "
                     "writable by this process, or point the store at a writable copy"),
    10: ("io_error", "hit a disk I/O error (SQLITE_IOERR): check the disk and the file system, then restart"),
    11: ("corrupt", "is corrupt (SQLITE_CORRUPT): restore it from a backup, or move it aside and start afresh"),
    13: ("full", "is on a full disk (SQLITE_FULL): free space on that disk, then retry"),
    14: ("cannot_open", "cannot be opened (SQLITE_CANTOPEN): check that the path names a file in an existing, "
                        "writable folder"),
    23: ("permission", "refused the statement (SQLITE_AUTH)"),
    26: ("corrupt", "is not a SQLite database (SQLITE_NOTADB): point the store at a new path or at a guard store"),
}
_MESSAGE_CODES = (  # Python < 3.11 has no sqlite_errorcode: the message is all there is
    ("database is locked", _BUSY), ("database table is locked", _LOCKED), ("readonly database", 8),
    ("disk i/o error", 10), ("malformed", 11), ("database or disk is full", 13), ("unable to open", 14),
    ("not a database", 26), ("not authorized", 23),
)


def error_code(exc: sqlite3.Error) -> int | None:
    """SQLite's primary result code of ``exc`` (None when it has none)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF
    text = str(exc).lower()
    return next((known for needle, known in _MESSAGE_CODES if needle in text), None)


def _enter_wal(conn: sqlite3.Connection) -> None:
    """Put the database in WAL mode, waiting out the other processes doing the same.

    Switching a new file to WAL takes its exclusive lock from a shared one. When two processes
    open a fresh store at once, both hold the shared lock and want the exclusive one: SQLite
    answers one of them SQLITE_BUSY at once, without the busy handler, since waiting would
    deadlock. The other finishes the switch (WAL mode is kept in the file), so this one retries
    after a short random pause until the busy timeout, and then finds the file already in WAL.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if error_code(exc) not in (_BUSY, _LOCKED) or time.monotonic() >= deadline:
                raise
        time.sleep(random.uniform(0.001, 0.02))


def map_error(path: str, exc: BaseException) -> BaseException:
    """The guards' exception for a SQLite failure, chosen by result code; ``exc`` itself when
    it is not a store failure (a constraint violation or a programming error stays as it is)."""
    if not isinstance(exc, sqlite3.OperationalError) and type(exc) is not sqlite3.DatabaseError:
        return exc
    code = error_code(exc)
    if code in (_BUSY, _LOCKED):
        return StoreBusy(path, exc, waited_seconds=BUSY_TIMEOUT_MS / 1000)
    if code in _UNAVAILABLE:
        reason, what = _UNAVAILABLE[code]
        return StoreUnavailable(path, reason, f"the guard store {path} {what} ({exc}); nothing was written")
    return exc


class SQLiteStore:
    """A SQLite database shared by every guard of a crew.

    ``path`` is a file path, or ``":memory:"`` for a single-process store (then one connection
    is shared by all threads, serialised by a lock, because each in-memory connection would
    otherwise be a separate database).
    """

    dialect = "sqlite"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = resolve_path(path)
        self._memory = self.path == ":memory:"
        self._local = threading.local()
        self._shared: sqlite3.Connection | None = None
        self._shared_lock = threading.RLock()
        self._schemas: set[str] = set()
        _OPEN.add(self)

    def _connect(self) -> sqlite3.Connection:
        try:
            return self._open()
        except sqlite3.Error as exc:
            raise map_error(self.path, exc) from exc

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if not self._memory:
            _enter_wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        if self._memory:
            with self._shared_lock:
                if self._shared is None:
                    self._shared = self._connect()
                yield self._shared
            return
        yield self._own_connection()

    def _own_connection(self) -> sqlite3.Connection:
        """This thread's connection to a file store (opened on first use, and anew after a fork:
        :func:`_forget_after_fork` drops the parent's, so no call asks the OS for its pid)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            self._local.cursor = conn.cursor()  # conditional_write's, reused: no cursor object per statement
        return conn

    def _discard(self, conn: sqlite3.Connection) -> None:
        """Forget a connection left in an unknown state, so the thread's next call opens a fresh one."""
        try:
            conn.close()
        finally:
            if getattr(self._local, "conn", None) is conn:
                self._local.conn = self._local.cursor = None
            if self._shared is conn:
                self._shared = None

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``): commits on success, rolls back on error.

        Raises :class:`StoreBusy` when the write lock could not be had within the busy timeout.
        A failed ``COMMIT`` or ``ROLLBACK`` never leaves this thread's connection inside an open
        transaction: it is rolled back, or closed and replaced.
        """
        return self._transaction("BEGIN IMMEDIATE")

    def read(self) -> AbstractContextManager[sqlite3.Connection]:
        """A read transaction: every query inside sees one consistent snapshot."""
        return self._transaction("BEGIN")

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        """Run the body between ``begin`` and ``COMMIT``: a write and a read differ only in how
        they begin. Whatever the body raises rolls back; a SQLite failure leaves as the guards'
        exception for it (:func:`map_error`), anything else as it was raised."""
        with self._connection() as conn:
            try:
                conn.execute(begin)
            except sqlite3.Error as exc:
                raise map_error(self.path, exc) from exc
            try:
                yield conn
            except BaseException as exc:
                self._rollback(conn)
                mapped = map_error(self.path, exc)
                if mapped is exc:
                    raise
                raise mapped from exc
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback(conn)
                raise map_error(self.path, exc) from exc

    def _rollback(self, conn: sqlite3.Connection) -> None:
        """Roll back, or, when even that fails, close the connection (which rolls back) and let
        the thread's next call open a fresh one: never leave a transaction open on it."""
        if not conn.in_transaction:  # SQLite already rolled back (a full disk or an I/O error does)
            return
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            self._discard(conn)

    def query_one(self, sql: str, params: tuple[object, ...] = ()) -> sqlite3.Row | None:
        """One read statement outside any explicit transaction (SQLite runs it atomically).

        Cheaper than :meth:`read` for a single lookup, such as a read-back; use :meth:`read`
        when several statements must see the same snapshot.
        """
        if self._memory:
            with self._connection() as conn:
                return self._query_one(conn, sql, params)
        return self._query_one(self._own_connection(), sql, params)

    def _query_one(self, conn: sqlite3.Connection, sql: str, params: tuple[object, ...]) -> sqlite3.Row | None:
        try:
            row: sqlite3.Row | None = conn.execute(sql, params).fetchone()
        except sqlite3.Error as exc:
            mapped = map_error(self.path, exc)
            if mapped is exc:
                raise
            raise mapped from exc
        return row

    def conditional_write(self, write: str, params: tuple[object, ...], log: str, log_params: tuple[object, ...]) -> bool:
        """``write`` and, when it changed one row, ``log``, in one ``BEGIN IMMEDIATE`` transaction
        (SQLite cannot write inside a WITH clause); whether it wrote. See
        :meth:`telemetry.guards._store.Store.conditional_write`."""
        prepared = _PREPARED.get((write, log))
        if prepared is None:  # the statements as SQLite runs them, worked out once per pair
            prepared = _PREPARED[(write, log)] = (ungated(write), values_form(log))
        write, log = prepared
        if self._memory:  # the shared connection: its lock is held for the whole transaction
            with self._transaction("BEGIN IMMEDIATE") as conn:
                if conn.execute(write, params).rowcount != 1:
                    return False
                conn.execute(log, log_params)
            return True
        # The guards' hot path, so written out: what _transaction does, statement for statement,
        # without the generator-based context managers around it, on this thread's own cursor.
        cursor: sqlite3.Cursor | None = getattr(self._local, "cursor", None)
        if cursor is None:
            cursor = self._local.cursor = self._own_connection().cursor()
        conn = cursor.connection
        try:
            cursor.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise map_error(self.path, exc) from exc
        try:
            wrote = cursor.execute(write, params).rowcount == 1
            if wrote:
                cursor.execute(log, log_params)
        except BaseException as exc:
            self._rollback(conn)
            mapped = map_error(self.path, exc)
            if mapped is exc:
                raise
            raise mapped from exc
        try:
            cursor.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback(conn)
            raise map_error(self.path, exc) from exc
        return wrote

    def ensure_schema(self, name: str, ddl: str) -> None:
        """Create a guard's tables once per store (``ddl`` must be idempotent: IF NOT EXISTS)."""
        if name in self._schemas:
            return
        with self._connection() as conn:
            try:
                conn.executescript(ddl)
            except sqlite3.Error as exc:
                mapped = map_error(self.path, exc)
                if mapped is exc:
                    raise
                raise mapped from exc
        self._schemas.add(name)

    def close(self) -> None:
        """Close this thread's connection (and the shared in-memory one)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = self._local.cursor = None
        if self._shared is not None:
            self._shared.close()
            self._shared = None


_PREPARED: dict[tuple[str, str], tuple[str, str]] = {}
"""conditional_write's statements as given, and as SQLite runs them (a few pairs per process)."""

_OPEN: weakref.WeakSet[SQLiteStore] = weakref.WeakSet()
"""Every store of this process, so a forked child can drop the connections it inherited."""


def _forget_after_fork() -> None:
    """In a forked child: never reuse the parent's connections (SQLite forbids carrying one
    across a fork); each thread of the child opens its own on first use."""
    for store in list(_OPEN):
        store._local = threading.local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


_SELECT_ROW = re.compile(r"(INSERT INTO [A-Za-z_][A-Za-z0-9_]* \([A-Za-z0-9_, ]+\)) SELECT (\?(?:, \?)*)")


@lru_cache(maxsize=64)
def values_form(log: str) -> str:
    """A change-log statement as SQLite runs it fastest: ``INSERT ... SELECT ?, ?`` (the form
    :meth:`~telemetry.guards._store.Store.conditional_write` takes, which a server can append to
    its write) as the same one-row ``INSERT ... VALUES (?, ?)``; any other statement unchanged."""
    found = _SELECT_ROW.fullmatch(log)
    return f"{found.group(1)} VALUES ({found.group(2)})" if found else log


def resolve_path(path: str | os.PathLike[str]) -> str:
    """The path a store opens: ``~`` expanded once, here, so validation and opening agree.

    Raises :class:`ConfigurationError` for something that is not a path, a folder, or a file
    whose folder does not exist.
    """
    try:
        text = os.fspath(path)
    except TypeError:
        raise ConfigurationError(f"the store path must be a file path or ':memory:', got {type(path).__name__}") from None
    if not isinstance(text, str) or not text.strip() or "\0" in text:
        raise ConfigurationError(f"the store path must be a file path or ':memory:', got {text!r}")
    if text == ":memory:":
        return text
    expanded = Path(text).expanduser()
    if expanded.is_dir():
        raise ConfigurationError(f"the store path {expanded} is a folder; name a file inside it, e.g. {expanded / 'guards.db'}")
    parent = expanded.resolve().parent
    if not parent.is_dir():
        raise ConfigurationError(f"the store's folder {parent} does not exist; create it first")
    return str(expanded)
