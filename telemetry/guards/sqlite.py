"""The guards' storage: one SQLite database file, safe across threads and processes.

SQLite is a real multi-process database in the standard library: WAL journaling lets readers
proceed while one writer commits, ``BEGIN IMMEDIATE`` takes the write lock up front so a
read-check-write sequence cannot interleave with another process's, and ``busy_timeout`` makes
contending writers wait instead of failing. Each thread gets its own connection (sqlite3
connections must not be shared across threads), opened lazily.

This module is the whole storage interface the guards use: ``transaction()`` for writes,
``read()`` for consistent reads, ``query_one()`` for a single lookup, ``ensure_schema()`` at
start-up. A PostgreSQL backend for crews that span hosts would implement the same four methods.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..exceptions import ConfigurationError, GuardError

__all__ = ["BUSY_TIMEOUT_MS", "SQLiteStore", "StoreBusy"]

BUSY_TIMEOUT_MS = 30_000


class StoreBusy(GuardError):
    """The database's write lock could not be had within the busy timeout (another writer held
    it throughout). Nothing was written; the operation can be retried."""

    def __init__(self, path: str, cause: BaseException) -> None:
        super().__init__(
            f"the guard store {path} stayed locked by another writer for {BUSY_TIMEOUT_MS / 1000:g} s ({cause}); "
            f"nothing was written: retry, and look for a long transaction (a large plan commit) holding the lock"
        )
        self.path = path


class SQLiteStore:
    """A SQLite database shared by every guard of a crew.

    ``path`` is a file path, or ``":memory:"`` for a single-process store (then one connection
    is shared by all threads, serialised by a lock, because each in-memory connection would
    otherwise be a separate database).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        text = os.fspath(path)
        if not isinstance(text, str) or not text:
            raise ConfigurationError(f"the store path must be a file path or ':memory:', got {path!r}")
        self.path = text
        self._memory = text == ":memory:"
        if not self._memory:
            parent = Path(text).expanduser().resolve().parent
            if not parent.is_dir():
                raise ConfigurationError(f"the store's folder {parent} does not exist; create it first")
        self._local = threading.local()
        self._shared: sqlite3.Connection | None = None
        self._shared_lock = threading.RLock()
        self._schemas: set[str] = set()
        self._pid = os.getpid()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if not self._memory:
            conn.execute("PRAGMA journal_mode = WAL")
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
        if os.getpid() != self._pid:  # forked: never reuse the parent's connections
            self._local = threading.local()
            self._pid = os.getpid()
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        yield conn

    def _discard(self, conn: sqlite3.Connection) -> None:
        """Forget a connection left in an unknown state, so the thread's next call opens a fresh one."""
        try:
            conn.close()
        finally:
            if getattr(self._local, "conn", None) is conn:
                self._local.conn = None
            if self._shared is conn:
                self._shared = None

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``): commits on success, rolls back on error.

        Raises :class:`StoreBusy` when the write lock could not be had within the busy timeout.
        A failed ``COMMIT`` or ``ROLLBACK`` never leaves this thread's connection inside an open
        transaction: it is rolled back, or closed and replaced.
        """
        with self._connection() as conn:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise StoreBusy(self.path, exc) from exc
            try:
                yield conn
            except BaseException:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    self._discard(conn)
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    self._discard(conn)
                raise

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every query inside sees one consistent snapshot."""
        with self._connection() as conn:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    def query_one(self, sql: str, params: tuple[object, ...] = ()) -> sqlite3.Row | None:
        """One read statement outside any explicit transaction (SQLite runs it atomically).

        Cheaper than :meth:`read` for a single lookup, such as a read-back; use :meth:`read`
        when several statements must see the same snapshot.
        """
        with self._connection() as conn:
            row: sqlite3.Row | None = conn.execute(sql, params).fetchone()
            return row

    def ensure_schema(self, name: str, ddl: str) -> None:
        """Create a guard's tables once per store (``ddl`` must be idempotent: IF NOT EXISTS)."""
        if name in self._schemas:
            return
        with self._connection() as conn:
            conn.executescript(ddl)
        self._schemas.add(name)

    def close(self) -> None:
        """Close this thread's connection (and the shared in-memory one)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
        if self._shared is not None:
            self._shared.close()
            self._shared = None
