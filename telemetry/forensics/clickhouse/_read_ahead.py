"""Read a stream of Arrow batches in a thread of its own, a few batches ahead of whoever consumes it.

chDB computes a streamed result's next block only when it is asked for it: a read that asks from
the thread DuckDB types in leaves the engine idle while DuckDB types a batch and DuckDB waiting while
the engine makes the next. A reader thread that asks as soon as there is room lets the two work at
once, on two cores. The engine's fetch releases the GIL, and DuckDB asks Python only for the next
batch, so the two threads rarely wait on each other.

What a serious reader keeps: at most ``depth`` batches held (the memory of a read stays bounded),
a failure raised where the consumer reads (never lost in the thread), and a consumer that stops
early (a span budget met, an error, an interrupt) stops the reader before the stream is closed, so
the engine's result is never used from two threads.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from types import TracebackType
from typing import Any

__all__ = ["READ_AHEAD_BATCHES", "ReadAhead"]

READ_AHEAD_BATCHES = 2
"""How many batches the reader may hold beyond the one DuckDB types: two keep the engine busy while
DuckDB works; more only hold memory (each batch is a few MB)."""

_DONE = object()
_WAIT_S = 0.05
"""How often a stopping consumer looks again for a reader blocked on a full queue."""


class ReadAhead:
    """``with ReadAhead(batches) as ahead: for batch in ahead: ...``: ``batches`` consumed in a
    thread of its own, at most ``depth`` batches ahead; leaving the block stops the thread and
    waits for it (a reader inside the engine's fetch finishes that fetch first)."""

    def __init__(self, batches: Iterator[Any], depth: int = READ_AHEAD_BATCHES):
        if depth < 1:
            raise ValueError(f"read-ahead depth must be at least 1, not {depth!r}")
        self._batches = batches
        self._slots: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="clickhouse-read-ahead", daemon=True)

    def __enter__(self) -> Iterator[Any]:
        self._thread.start()
        return self._consume()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        while self._thread.is_alive():
            self._drain()  # a reader blocked on a full queue gets its room, sees the stop and ends
            self._thread.join(_WAIT_S)
        self._drain()

    def _read(self) -> None:
        try:
            for batch in self._batches:
                self._slots.put(batch)  # a stopping consumer drains the queue, so this returns
                if self._stop.is_set():
                    return
        except BaseException as exc:  # raised again in the consumer's thread, never lost here
            self._slots.put(exc)
            return
        self._slots.put(_DONE)

    def _consume(self) -> Iterator[Any]:
        while True:
            item = self._slots.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def _drain(self) -> None:
        try:
            while True:
                self._slots.get_nowait()
        except queue.Empty:
            pass
