"""A batching span processor that counts every span it loses.

It does what the SDK's ``BatchSpanProcessor`` does (a bounded queue, a worker thread exporting
batches every ``schedule_delay`` or as soon as a batch is full, ``OTEL_BSP_*`` settings) and
three things it cannot: every span it loses is counted, by reason, in
``outcome_telemetry_spans_dropped_total`` (the SDK logs "Queue full" once and counts nothing a
Prometheus scrape can see); a full queue can make the ending thread wait, bounded, instead of
dropping (back-pressure); and an optional filter keeps, say, only tool spans, so an
application's own spans need not land in the tool files.

The queue holds finished ``ReadableSpan`` objects, a few KB each for a tool span with a dozen
attributes (``tracemalloc`` shows how much), so the memory a full queue pins grows with its size:
the SDK's default is a few MB, a queue many times larger costs as many times more. A stalled exporter does not stall tools for long: once a wait for room
timed out, later spans are dropped (and counted) at once until the worker makes progress again.

What survives what: a fork (the child gets an empty queue, fresh locks and its own worker); an
exporter that hangs (``force_flush`` and ``shutdown`` give up after their timeout, and what they
give up on, the batch the exporter still holds included, is counted as ``shutdown_timeout``); an
interrupt (Ctrl-C) while ``force_flush`` exports from the calling thread (the batch goes back to
the head of the queue, so the worker or ``shutdown`` sends it; an exporter may then receive it
twice, which forensics reads as one span) or while ``shutdown`` waits (what is left is counted).
A batch counted as given up on may still reach an exporter that finishes late: the count is of
what the processor could no longer vouch for.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from opentelemetry.context import Context
from opentelemetry.sdk.environment_variables import (
    OTEL_BSP_EXPORT_TIMEOUT,
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
    OTEL_BSP_MAX_QUEUE_SIZE,
    OTEL_BSP_SCHEDULE_DELAY,
)
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .. import conventions as c
from ..exceptions import ConfigurationError
from . import _containment as _safe
from ._fork import renew_after_fork

if TYPE_CHECKING:
    from ._metrics import ToolMetrics

__all__ = ["BatchSettings", "CountingBatchProcessor"]

logger = logging.getLogger("telemetry")


@dataclass(frozen=True)
class BatchSettings:
    """How one processor batches. :meth:`resolve` fills what the caller left out from ``OTEL_BSP_*``."""

    max_queue_size: int
    schedule_delay_millis: int
    max_export_batch_size: int
    export_timeout_millis: int
    block_millis: int = 0
    """Back-pressure: how long a thread ending a span may wait for room in a full queue (0: drop at once)."""

    @classmethod
    def resolve(
        cls,
        *,
        defaults: BatchSettings,
        max_queue_size: int | None = None,
        schedule_delay_millis: int | None = None,
        max_export_batch_size: int | None = None,
        export_timeout_millis: int | None = None,
        block_millis: int | None = None,
    ) -> BatchSettings:
        """An argument given wins, then the ``OTEL_BSP_*`` variable, then ``defaults``.

        A bad argument raises :class:`ConfigurationError`; a bad variable warns and falls back,
        as the SDK does.
        """
        queue = _pick("max_queue_size", max_queue_size, OTEL_BSP_MAX_QUEUE_SIZE, defaults.max_queue_size, 1)
        delay = _pick("schedule_delay_millis", schedule_delay_millis, OTEL_BSP_SCHEDULE_DELAY, defaults.schedule_delay_millis, 1)
        batch = _pick("max_export_batch_size", max_export_batch_size, OTEL_BSP_MAX_EXPORT_BATCH_SIZE, defaults.max_export_batch_size, 1)
        timeout = _pick("export_timeout_millis", export_timeout_millis, OTEL_BSP_EXPORT_TIMEOUT, defaults.export_timeout_millis, 0)
        block = _pick("block_millis", block_millis, None, defaults.block_millis, 0)
        if batch > queue:
            if max_export_batch_size is not None:
                raise ConfigurationError(f"max_export_batch_size={batch} is larger than max_queue_size={queue}; make it at most that")
            batch = queue
        return cls(queue, delay, batch, timeout, block)


def _pick(name: str, given: int | None, variable: str | None, default: int, minimum: int) -> int:
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, int) or given < minimum:
            raise ConfigurationError(f"{name} must be an integer of at least {minimum}, got {given!r}")
        return given
    raw = os.environ.get(variable) if variable else None
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        logger.warning("%s=%r is not an integer of at least %d; using %d", variable, raw, minimum, default)
        return default
    return value


class CountingBatchProcessor(SpanProcessor):
    """Queue finished spans and export them in batches from a worker thread; count every loss.

    ``accept`` (optional) decides which spans are queued at all; a span it refuses is not a loss.
    Losses are counted in ``dropped`` and, labelled ``exporter_label``, in ``metrics`` (where the
    exporter's own contained failures are counted too): the queue was full (after ``block_millis`` of waiting, when
    back-pressure is on), the exporter failed or raised, or spans were still queued when
    ``shutdown()`` ran out of time. After ``shutdown()`` the processor ignores spans, so one left
    registered on a provider it no longer serves costs a flag check per span.
    """

    def __init__(
        self,
        exporter: SpanExporter,
        settings: BatchSettings,
        metrics: ToolMetrics | None,
        accept: Callable[[ReadableSpan], bool] | None = None,
        exporter_label: str = c.EXPORTER_OTHER,
    ) -> None:
        self.exporter = exporter
        self.settings = settings
        self.accept = accept
        self.metrics = metrics
        self.exporter_label = exporter_label
        self.dropped: collections.Counter[str] = collections.Counter()
        self._queue: collections.deque[ReadableSpan] = collections.deque()
        self._room = threading.Condition(threading.Lock())
        self._wake = threading.Event()
        self._export_lock = threading.Lock()
        self._claim = threading.Lock()
        """Guards ``_in_flight`` and the queue's head between the exporting thread and a giving-up ``shutdown``."""
        self._in_flight: list[ReadableSpan] | None = None
        """The batch being exported; ``shutdown`` takes it (and counts it) when it gives up."""
        self._closed = False
        self._abandon = False
        self._stalled = False
        self._start_worker()
        renew_after_fork(self)

    def _start_worker(self) -> None:
        self._worker = threading.Thread(target=self._run, name=f"outcome-telemetry-{self.exporter_label}-export", daemon=True)
        self._worker.start()

    def _after_fork(self) -> None:
        """A forked child starts with an empty queue and its own worker (the parent's spans are the parent's)."""
        self._queue.clear()
        self._room = threading.Condition(threading.Lock())
        self._wake = threading.Event()
        self._export_lock = threading.Lock()
        self._claim = threading.Lock()
        self._in_flight = None
        if not self._closed:
            self._start_worker()

    # --- the span side: cheap, never raises ------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        if self._closed:
            return
        accept = self.accept
        if accept is not None and not accept(span):
            return
        queue = self._queue
        settings = self.settings
        if len(queue) >= settings.max_queue_size and not self._wait_for_room():
            self._drop(c.DROP_QUEUE_FULL, 1)
            return
        queue.append(span)
        if len(queue) >= settings.max_export_batch_size and not self._wake.is_set():
            self._wake.set()

    def _wait_for_room(self) -> bool:
        """Back-pressure: wait up to ``block_millis`` for the worker to make room."""
        if self.settings.block_millis <= 0 or self._stalled:
            return False
        limit = self.settings.max_queue_size
        self._wake.set()
        with self._room:
            room = self._room.wait_for(lambda: len(self._queue) < limit or self._closed, self.settings.block_millis / 1000)
        if not room:
            self._stalled = True
        return room and not self._closed

    def _drop(self, reason: str, spans: int) -> None:
        self.dropped[reason] += spans
        if self.metrics is not None:
            try:
                self.metrics.count_drop(self.exporter_label, reason, spans)
            except Exception as exc:
                _safe.report(c.STAGE_METRICS, "counting dropped spans", exc, self.metrics)

    # --- the worker side -------------------------------------------------------------------

    def _run(self) -> None:
        delay = self.settings.schedule_delay_millis / 1000
        while not self._closed:
            self._wake.wait(delay)
            self._wake.clear()
            self._export_all(deadline=None)
        if not self._abandon:
            self._export_all(deadline=None)

    def _export_all(self, deadline: float | None) -> bool:
        """Export until the queue is empty (True) or ``deadline`` passed (False).

        Another thread exporting (the worker, inside an exporter that hangs) is waited for until
        ``deadline`` only. An interrupt in this thread puts the batch it held back at the head.
        """
        queue = self._queue
        size = self.settings.max_export_batch_size
        if deadline is None:
            self._export_lock.acquire()
        elif not self._export_lock.acquire(timeout=max(deadline - time.monotonic(), 0.0)):
            return False
        batch: list[ReadableSpan] = []
        try:
            while queue and not self._abandon:
                if deadline is not None and time.monotonic() > deadline:
                    return False
                with self._claim:
                    if self._abandon:
                        break
                    batch = self._in_flight = []
                    while queue and len(batch) < size:
                        batch.append(queue.popleft())
                self._stalled = False
                with self._room:
                    self._room.notify_all()
                self._export(batch)
        except BaseException:  # KeyboardInterrupt or SystemExit in a thread flushing by hand
            with self._claim:
                if self._in_flight is batch:
                    self._in_flight = None
                    queue.extendleft(reversed(batch))
            raise
        finally:
            self._export_lock.release()
        return True

    def _export(self, batch: list[ReadableSpan]) -> None:
        try:
            result = self.exporter.export(batch)
        except Exception as exc:  # the exporter boundary never raises into the application
            _safe.report(c.STAGE_EXPORTER, f"exporting spans to {type(self.exporter).__name__}", exc, self.metrics)
            result = SpanExportResult.FAILURE
        with self._claim:
            given_up = self._in_flight is not batch  # shutdown took it and counted it
            self._in_flight = None
        if result is not SpanExportResult.SUCCESS and not given_up:
            self._drop(c.DROP_EXPORT_FAILED, len(batch))

    def _give_up(self) -> None:
        """Stop exporting: count what is queued and the batch in flight as ``shutdown_timeout``."""
        with self._claim:
            self._abandon = True
            left = len(self._queue) + len(self._in_flight or ())
            self._queue.clear()
            self._in_flight = None
        if left:
            self._drop(c.DROP_SHUTDOWN_TIMEOUT, left)

    # --- lifecycle -------------------------------------------------------------------------

    @property
    def queued(self) -> int:
        """Spans waiting to be exported now."""
        return len(self._queue)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export everything queued, from the calling thread; False when ``timeout_millis`` ran out."""
        if self._closed:
            return False
        done = self._export_all(deadline=time.monotonic() + timeout_millis / 1000)
        try:
            return self.exporter.force_flush(timeout_millis) and done
        except Exception as exc:
            _safe.report(c.STAGE_EXPORTER, f"flushing {type(self.exporter).__name__}", exc, self.metrics)
            return False

    def shutdown(self, timeout_millis: int | None = None) -> None:
        """Export what is queued (up to the export timeout), then shut the exporter down; idempotent.

        What is still queued or being exported when the timeout runs out, or when the wait is
        interrupted, is counted as ``shutdown_timeout``. The exporter's own ``shutdown()`` gets
        what is left of the timeout (at least :data:`EXPORTER_SHUTDOWN_GRACE_S`); one that does
        not return by then is left running in a daemon thread and counted as an exporter failure.
        """
        if self._closed:
            return
        timeout = (self.settings.export_timeout_millis if timeout_millis is None else timeout_millis) / 1000
        self._close()
        self._finish(time.monotonic() + timeout)

    def _close(self) -> None:
        """Take no more spans and wake the worker for its last round."""
        self._closed = True
        self._wake.set()
        with self._room:
            self._room.notify_all()

    def _finish(self, deadline: float) -> None:
        """Wait for the worker's last round until ``deadline``, give up on what is left, shut the exporter down."""
        try:
            self._worker.join(max(deadline - time.monotonic(), 0.0))
        except BaseException:  # Ctrl-C while waiting: count what the worker had left, then go
            self._give_up()
            raise
        if self._worker.is_alive():
            self._give_up()
        self._shutdown_exporter(deadline)

    def _shutdown_exporter(self, deadline: float) -> None:
        """``exporter.shutdown()``, waited for until ``deadline`` (an exporter stuck in the export
        it was given may block its own shutdown on it, as the SDK's do)."""
        done = threading.Event()
        name = type(self.exporter).__name__

        def run() -> None:
            try:
                self.exporter.shutdown()
            except Exception as exc:
                _safe.report(c.STAGE_EXPORTER, f"shutting {name} down", exc, self.metrics)
            finally:
                done.set()

        threading.Thread(target=run, name=f"outcome-telemetry-{self.exporter_label}-shutdown", daemon=True).start()
        if not done.wait(max(deadline - time.monotonic(), EXPORTER_SHUTDOWN_GRACE_S)):
            _safe.report(c.STAGE_EXPORTER, f"shutting {name} down",
                         TimeoutError(f"{name}.shutdown() did not return within the export timeout; left running"),
                         self.metrics)


EXPORTER_SHUTDOWN_GRACE_S = 0.1
"""The least an exporter's own ``shutdown()`` is given when the export timeout is used up already."""


def shutdown_together(processors: list[CountingBatchProcessor]) -> None:
    """Shut ``processors`` down at once rather than one after another: each gets its own export
    timeout from the same moment, so a hung OTLP exporter and a hung extra one cost the longer
    of their timeouts, not the sum (the SDK's provider shuts its processors down in turn)."""
    started = time.monotonic()
    pending = [(p, started + p.settings.export_timeout_millis / 1000) for p in processors if not p._closed]
    for processor, _ in pending:
        processor._close()
    for processor, deadline in pending:
        processor._finish(deadline)
