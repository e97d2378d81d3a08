"""The PostgreSQL store's connection pool: at most ``max_size`` connections, the last one given
back handed out first, and nothing running in the background.

Checking a connection out and back in is every guarded write's path, so it is a semaphore, a
lock and a list: psycopg_pool's ``getconn``/``putconn`` cost more around a one-statement round
trip than this does (its worker and scheduler
threads are what a store does not need: connections open on demand, in the caller's thread,
within ``connect_timeout``). A connection that comes back closed, broken or inside a
transaction is closed rather than reused; the next checkout opens a fresh one.

An idle connection the server ended (a restart, ``pg_terminate_backend``, an idle timeout) is
found at checkout, not by the call that would fail on it: the server says so on the socket (its
last message, then the end of the stream), and an idle session in autocommit has nothing else to
read, so a socket with something to read is closed and the next idle one (or a new one) is used.
One ``poll`` with no wait, no round trip.
"""

from __future__ import annotations

import select
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Pool", "PoolExhausted", "ended"]


def ended(conn: Any) -> bool:
    """Whether the server has ended the idle connection ``conn`` (see the module docstring)."""
    if conn.closed or conn.broken:
        return True
    try:
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN | select.POLLPRI)
        return bool(poller.poll(0))  # readable, hung up or in error: ended
    except (OSError, ValueError):  # no socket any more
        return True


class PoolExhausted(Exception):
    """Every connection stayed checked out for the whole wait."""


class Pool:
    """Connections from ``connect()``, at most ``max_size`` out at once; ``timeout`` bounds the
    wait for a free one (then :class:`PoolExhausted`)."""

    def __init__(self, connect: Callable[[], Any], *, max_size: int, timeout: float) -> None:
        self._connect = connect
        self._timeout = timeout
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_size)
        self.closed = False

    def getconn(self) -> Any:
        """A connection: the most recently returned idle one, or a new one (``connect``'s
        errors pass through, and the slot is given back)."""
        if not self._slots.acquire(timeout=self._timeout):
            raise PoolExhausted(f"all connections stayed in use for {self._timeout:g} s")
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                break
            if not ended(conn):
                return conn
            conn.close()  # the server ended it while it was idle: never hand it out
        try:
            return self._connect()
        except BaseException:
            self._slots.release()
            raise

    def putconn(self, conn: Any) -> None:
        """Give ``conn`` back: kept for reuse when idle and healthy, else closed."""
        try:
            if self.closed or conn.closed or conn.broken or conn.info.transaction_status != 0:  # 0: idle
                conn.close()
                return
            with self._lock:
                self._idle.append(conn)
        finally:
            self._slots.release()

    def close(self) -> None:
        """Close the idle connections now; those checked out close when they come back."""
        self.closed = True
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
