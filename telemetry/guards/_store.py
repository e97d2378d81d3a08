"""What a guard needs from its store, and the two ways a store can fail.

Every guard talks to its store through :class:`Store` alone: ``transaction()`` for writes,
``read()`` for a consistent snapshot, ``query_one()`` for one lookup, ``conditional_write()`` for
a compare-and-set with its change-log row (the hot path), ``ensure_schema()`` at start-up.
:class:`~telemetry.guards.SQLiteStore` and :class:`~telemetry.guards.PostgresStore` implement it; another backend implements the same methods and maps its own errors onto the same
exceptions. The connection a transaction yields takes ``execute(sql, params)`` (and
``executemany``) with ``?`` placeholders and returns a cursor whose rows read by position and by
column name; the guards write SQL both dialects accept (``INSERT ... ON CONFLICT``), and a store
translates what differs (placeholders, column types) itself:

- :class:`StoreBusy`: the store was locked by another writer past the wait (or, on a server, the
  transaction lost a serialization conflict); nothing was written and the same call can be
  retried (guard tools answer ``rate_limited`` with ``retry: true`` and ``retry_after_seconds``).
  Its subclass :class:`StoreDisconnected` says the connection to a database server was lost or
  could not be had in time: the server rolled the transaction back, and a retry can succeed;
- :class:`StoreUnavailable`: the store cannot do the work at all (read-only, full, corrupt,
  unopenable); no retry helps until an operator fixes what the message names.
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from functools import lru_cache
from typing import Any, Final, Protocol, runtime_checkable

from ..exceptions import ConfigurationError, GuardError

__all__ = [
    "SERVER_SCHEMES", "WRITE_GATE", "Connection", "Store", "StoreBusy", "StoreDisconnected", "StoreUnavailable",
    "open_store", "require_store", "ungated",
]

WRITE_GATE: Final = "{gate}"
"""Where a :meth:`Store.conditional_write` statement's condition lets the store take its lock.

Each store replaces it with a boolean expression that is true: SQLite with plain truth
(:func:`ungated`: its ``BEGIN IMMEDIATE`` already holds the lock), PostgreSQL with a call that
takes the shared write lock, so the lock is taken inside the one statement, before the row is
written. Inside an explicit transaction, which holds the lock already, it is plain truth too."""


@lru_cache(maxsize=64)
def ungated(sql: str) -> str:
    """``sql`` with :data:`WRITE_GATE` as plain truth: for a transaction that already holds the lock."""
    return sql.replace(WRITE_GATE, "1 = 1")


class StoreBusy(GuardError):
    """The store's write lock could not be had within the busy timeout (another writer held it
    throughout). Nothing was written; the operation can be retried."""

    def __init__(
        self,
        path: str,
        cause: BaseException,
        *,
        waited_seconds: float,
        message: str | None = None,
        retry_after_seconds: float = 1.0,
    ) -> None:
        super().__init__(
            message
            or f"the guard store {path} stayed locked by another writer for {waited_seconds:g} s ({cause}); "
            f"nothing was written: retry, and look for a long transaction (a large plan commit) holding the lock"
        )
        self.path = path
        self.retry_after_seconds = retry_after_seconds


class StoreDisconnected(StoreBusy):
    """The connection to the store's server was lost mid-call, or none could be had within the
    connect timeout. The server rolls back a transaction whose connection died, so nothing was
    half-applied; the same call can be retried once the server answers again."""


class StoreUnavailable(GuardError):
    """The store cannot serve the call: ``reason`` is one of ``read_only``, ``full``,
    ``corrupt``, ``cannot_open``, ``io_error``, ``permission``, ``cannot_connect``. Retrying does not help; the
    message says what is wrong with which file and what to do."""

    def __init__(self, path: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.reason = reason


class Connection(Protocol):
    """What ``transaction()`` and ``read()`` yield: statements with ``?`` placeholders."""

    def execute(self, sql: str, params: Any = ..., /) -> Any:
        """Run one statement with bound ``params``; a cursor (``fetchone``, ``fetchall``, iteration, ``rowcount``)."""

    def executemany(self, sql: str, rows: Any, /) -> Any:
        """Run one statement once per parameter row."""


@runtime_checkable
class Store(Protocol):
    """The storage interface every guard uses (see the module docstring)."""

    path: str
    """Where the store is, for messages (a file path, or a server URL without its password)."""
    dialect: str
    """The SQL dialect of the store's connection (``sqlite`` or ``postgresql``)."""

    def transaction(self) -> AbstractContextManager[Any]:
        """A write transaction: commits on success, rolls back on error.

        It runs alone among writers, as SQLite's ``BEGIN IMMEDIATE`` does, so a read-check-write
        inside it cannot interleave with another (a lone compare-and-set, which needs no such
        guarantee, is :meth:`conditional_write`).
        """

    def read(self) -> AbstractContextManager[Any]:
        """A read transaction: every query inside sees one snapshot."""

    def query_one(self, sql: str, params: tuple[object, ...] = ()) -> Any:
        """One read statement, atomically; the row or None."""

    def conditional_write(self, write: str, params: tuple[object, ...], log: str, log_params: tuple[object, ...]) -> bool:
        """``write`` and, only when it changed exactly one row, ``log``, atomically; whether it wrote.

        A compare-and-set and its change-log row in as few round trips as the store can make
        them (PostgreSQL: one statement; SQLite: one ``BEGIN IMMEDIATE`` transaction). ``write``
        is one conditional statement (``UPDATE ... WHERE ...``, or ``INSERT ... SELECT ... WHERE
        ... ON CONFLICT DO NOTHING``) whose condition includes :data:`WRITE_GATE`; ``log`` is an
        ``INSERT INTO table (columns) SELECT ?, ...`` without a FROM clause. A store may run it
        beside other such writes (row locks order them); it never overlaps a :meth:`transaction`.
        """

    def ensure_schema(self, name: str, ddl: str) -> None:
        """Create a guard's tables once per store (idempotent DDL)."""

    def close(self) -> None:
        """Release the store's connections (this thread's, or the pool's)."""


def require_store(store: Any, who: str) -> Store:
    """``store`` when it implements :class:`Store`; else a ConfigurationError naming ``who``."""
    if not isinstance(store, Store):
        raise ConfigurationError(
            f"{who} needs a guard store (telemetry.guards.SQLiteStore, PostgresStore, or another Store), "
            f"got {type(store).__name__}"
        )
    return store


SERVER_SCHEMES = ("postgresql://", "postgres://")
_OTHER_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+)://")
"""A URL of another scheme (two letters at least, so a Windows drive is never one)."""


def open_store(target: Any) -> Store:
    """The store ``target`` names: a ``postgresql://`` URL opens a
    :class:`~telemetry.guards.PostgresStore`, anything else is a SQLite file path (or
    ``":memory:"``). One string, so a CLI flag, a worker's argument or a setting can name either."""
    if isinstance(target, str) and target.startswith(SERVER_SCHEMES):
        from ._postgres import PostgresStore

        return PostgresStore(target)
    other = _OTHER_URL.match(target) if isinstance(target, str) else None
    if other:  # read as a path it would name a folder "sqlite:" (or the like) and fail there, unexplained
        raise ConfigurationError(  # the scheme alone: the rest may hold a password
            f"the store is a {other.group(1)}:// URL, which open_store does not open: pass a postgresql:// URL for "
            "PostgreSQL, or a SQLite file's path (for sqlite:///PATH, pass PATH)")
    from ._sqlite import SQLiteStore

    return SQLiteStore(target)
