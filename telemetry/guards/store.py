"""What a guard needs from its store, and the two ways a store can fail.

Every guard talks to its store through :class:`Store` alone: ``transaction()`` for writes,
``read()`` for a consistent snapshot, ``query_one()`` for one lookup, ``ensure_schema()`` at
start-up. :class:`~telemetry.guards.SQLiteStore` implements it; another backend implements the
same methods and maps its own errors onto the same two exceptions:

- :class:`StoreBusy`: the store was locked by another writer past the wait; nothing was written
  and the same call can be retried (guard tools answer ``rate_limited`` with ``retry: true``);
- :class:`StoreUnavailable`: the store cannot do the work at all (read-only, full, corrupt,
  unopenable); no retry helps until an operator fixes what the message names.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from ..exceptions import ConfigurationError, GuardError

__all__ = ["Store", "StoreBusy", "StoreUnavailable", "require_store"]


class StoreBusy(GuardError):
    """The store's write lock could not be had within the busy timeout (another writer held it
    throughout). Nothing was written; the operation can be retried."""

    def __init__(self, path: str, cause: BaseException, *, waited_seconds: float) -> None:
        super().__init__(
            f"the guard store {path} stayed locked by another writer for {waited_seconds:g} s ({cause}); "
            f"nothing was written: retry, and look for a long transaction (a large plan commit) holding the lock"
        )
        self.path = path


class StoreUnavailable(GuardError):
    """The store cannot serve the call: ``reason`` is one of ``read_only``, ``full``,
    ``corrupt``, ``cannot_open``, ``io_error``, ``permission``. Retrying does not help; the
    message says what is wrong with which file and what to do."""

    def __init__(self, path: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.reason = reason


@runtime_checkable
class Store(Protocol):
    """The storage interface every guard uses (see the module docstring)."""

    path: str

    def transaction(self) -> AbstractContextManager[Any]:
        """A write transaction: commits on success, rolls back on error."""

    def read(self) -> AbstractContextManager[Any]:
        """A read transaction: every query inside sees one snapshot."""

    def query_one(self, sql: str, params: tuple[object, ...] = ()) -> Any:
        """One read statement, atomically; the row or None."""

    def ensure_schema(self, name: str, ddl: str) -> None:
        """Create a guard's tables once per store (idempotent DDL)."""


def require_store(store: Any, who: str) -> Store:
    """``store`` when it implements :class:`Store`; else a ConfigurationError naming ``who``."""
    if not isinstance(store, Store):
        raise ConfigurationError(
            f"{who} needs a guard store (telemetry.guards.SQLiteStore, or another Store), got {type(store).__name__}"
        )
    return store
