"""The watch loop: read new lines, judge the window, count each new finding once, persist.

A pass: scan for new and rotated files, read their new complete lines into the window, drop what
left it, run the watched questions, and count the findings not counted before. With a ClickHouse
source (``WatchOptions.clickhouse``) the pass instead reads the window's runs from the table
again (:mod:`._clickhouse`); judging, counting and the state are the same. A finding counts
once it has been there for ``settle`` seconds: spans of one run arrive from several processes,
each flushing on its own schedule, and a hop whose parent is still in another exporter's buffer
looks like a gap for a moment. Then the state (offsets and counted keys) is written, after the
window database is checkpointed, so a restart neither re-reads a line nor recounts a finding.

A pass is all or nothing: the follower's offsets move, and new findings are counted, only once
the lines are in the window and the state is saved. A pass that fails anywhere (an unwritable
state folder, DuckDB out of memory) is counted and retried, and the retry reads the same lines
again (copies of a span are dropped before judging) and counts its findings once.

The window's end follows the newest span but never the future (see :mod:`._window`): spans that
end more than ``WatchOptions.future_seconds`` after the wall clock are counted in
``outcome_telemetry_watch_future_spans_total`` and named on stderr, what leaves the window in
``outcome_telemetry_watch_spans_evicted_total`` (``reason="window"``, or ``"future"`` for a span
dated more than a window past the clock), and the lag gauge is measured from the newest span the
clock allows, so one bad timestamp (or a ``newest_ns`` in the state file) cannot empty the window.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ... import conventions as c
from ...exceptions import ForensicsInputError, TelemetryError
from .._evidence import printable
from .._loading import MAX_LINE_BYTES
from .._peers import PeerOptions
from .._questions import question
from .._verdicts import row_severity
from ._clickhouse import ClickHouseSource, ClickHouseWindow
from ._findings import WATCHED, counted, watched_questions
from ._follow import Follower
from ._state import WatchState, load_state, save_state
from ._window import FUTURE_SECONDS, WatchWindow

__all__ = ["WatchFinding", "PassResult", "READ_BUDGET", "WatchMetrics", "WatchOptions", "Watcher"]

READ_BUDGET = 256 << 20
"""Bytes read into the window per pass at most; a backlog is worked off in back-to-back passes."""
_PASS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)


@dataclass(frozen=True)
class WatchOptions:
    """Everything ``outcome-telemetry watch`` is told (see its ``--help``)."""

    paths: tuple[str, ...] = ()
    interval: float = 15.0
    window: float = 3600.0
    settle: float = 10.0
    state: Path | None = None
    max_line_bytes: int = MAX_LINE_BYTES
    read_budget: int = READ_BUDGET
    clickhouse: ClickHouseSource | None = None
    """Read each pass's window from ClickHouse instead of following ``paths``."""
    future_seconds: float = FUTURE_SECONDS
    """How far past the wall clock a span may end and still be the window's end."""
    peer_options: PeerOptions | None = None
    """``--tool-spans`` and ``--result-shape``: the span-format layer as ``forensics report`` takes them."""


@dataclass
class WatchFinding:
    """A finding counted in this pass."""

    question: str
    severity: str
    key: str
    row: dict[str, Any]


@dataclass
class PassResult:
    lines: int = 0
    spans: int = 0
    bad_lines: int = 0
    evicted: int = 0
    evicted_future: int = 0
    """Of ``evicted``, the spans dated more than a window past the wall clock."""
    future: int = 0
    """Spans read that end more than ``future_seconds`` after the wall clock."""
    window_spans: int = 0
    seconds: float = 0.0
    new: list[WatchFinding] = field(default_factory=list)
    backlog: bool = False
    """The read budget was used up: more complete lines are waiting."""


class WatchMetrics:
    """The watcher's metrics, in their own registry (what ``--metrics-port`` serves)."""

    def __init__(self, registry: CollectorRegistry, rows: bool = False):
        self.findings = Counter(c.METRIC_FORENSIC_FINDINGS, "New forensics findings, each counted once",
                                [c.LABEL_QUESTION], registry=registry)
        for name in watched_questions():  # present at 0, so the first finding is an increase
            self.findings.labels(name)
        self.lines = Counter(c.METRIC_WATCH_LINES_READ_TOTAL.removesuffix("_total"),
                             "ClickHouse rows fetched (each pass fetches its window)" if rows
                             else "Complete trace lines read", registry=registry)
        self.bad_lines = Counter(c.METRIC_WATCH_BAD_LINES_TOTAL.removesuffix("_total"),
                                 "Malformed ClickHouse rows skipped, once each" if rows
                                 else "Lines skipped as not OTLP TracesData", registry=registry)
        self.failures = Counter(c.METRIC_WATCH_PASS_FAILURES_TOTAL.removesuffix("_total"),
                                "Passes that failed", registry=registry)
        self.lag = Gauge(c.METRIC_WATCH_LAG_SECONDS, "Now minus the end of the newest span read",
                         registry=registry)
        self.duration = Histogram(c.METRIC_WATCH_PASS_DURATION, "Pass duration", buckets=_PASS_BUCKETS,
                                  registry=registry)
        self.window_spans = Gauge(c.METRIC_WATCH_WINDOW_SPANS, "Spans in the window", registry=registry)
        self.files = Gauge(c.METRIC_WATCH_FILES, "Trace files followed", registry=registry)
        self.evicted = Counter(c.METRIC_WATCH_SPANS_EVICTED_TOTAL.removesuffix("_total"),
                               "Spans that left the window", [c.LABEL_REASON], registry=registry)
        for reason in (c.EVICTED_WINDOW, c.EVICTED_FUTURE):
            self.evicted.labels(reason)
        self.future = Counter(c.METRIC_WATCH_FUTURE_SPANS_TOTAL.removesuffix("_total"),
                              "Spans read dated past the wall clock (never the window's end)", registry=registry)


class Watcher:
    """Continuous forensics over growing trace files; drive it with :meth:`run` or :meth:`run_pass`."""

    def __init__(self, options: WatchOptions, registry: CollectorRegistry | None = None,
                 out: TextIO | None = None, clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time):
        """``clock`` times the settling of findings; ``wall_clock`` (seconds since the epoch)
        bounds the window's end and measures the lag."""
        self.options = options
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = WatchMetrics(self.registry, rows=options.clickhouse is not None)
        self.out = out
        self._clock = clock
        self._wall = wall_clock
        state = load_state(options.state) if options.state is not None else WatchState()
        self.follower: Follower | None = None
        self.window: WatchWindow | ClickHouseWindow
        if options.clickhouse is not None:
            if options.paths:
                raise ForensicsInputError("give trace PATHS or --clickhouse, not both")
            self.window = ClickHouseWindow(options.clickhouse, options.window, peer_options=options.peer_options)
        else:
            self.follower = Follower(options.paths, state.files)
            database = options.state.with_name(options.state.name + ".window.duckdb") if options.state else None
            self.window = WatchWindow(options.window, database, options.max_line_bytes, clock=wall_clock,
                                 future_seconds=options.future_seconds, peer_options=options.peer_options)
        limit = int((wall_clock() + options.future_seconds) * 1e9)
        if state.newest_ns > limit:
            print(f"warning: {options.state}: its newest span time ({state.newest_ns} ns) is after the "
                  "clock; not trusted (the window ends at the newest span read instead)", file=sys.stderr)
        elif state.newest_ns > self.window.newest_ns:
            self.window.newest_ns = state.newest_ns
        self.seen: dict[str, str | None] = dict(state.seen)
        self._pending: dict[str, float] = {}
        self.names = watched_questions()

    def run_pass(self) -> PassResult:
        """One pass (see the module docstring): nothing moves on unless all of it succeeds."""
        started = time.perf_counter()
        result = PassResult()
        if isinstance(self.window, ClickHouseWindow):
            fetched = self.window.fetch()
            result.lines, result.spans = fetched.rows, fetched.spans
            result.bad_lines = len(fetched.new_bad) + fetched.new_bad_unnamed
        else:
            assert self.follower is not None
            self.follower.scan()
            chunks = self.follower.read(self.options.read_budget)
            result.backlog = self.follower.backlog
            added = self.window.add(chunks)
            for bad in added.bad:
                print(f"warning: {bad.path}: line {bad.line}: {bad.reason}; skipped", file=sys.stderr)
            result.lines, result.spans, result.bad_lines = added.lines, added.spans, len(added.bad)
            result.future = added.future
            result.evicted = self.window.evict()
            result.evicted_future = self.window.evicted_future
        rows = self.window.evaluate(self.names)
        new, seen = self._judge(rows)
        result.window_spans = self.window.spans
        if self.options.state is not None:
            self.window.checkpoint()
            files = self.follower.after_read() if self.follower is not None else []
            save_state(self.options.state, WatchState(files, seen, self.window.newest_ns))
        if self.follower is not None:
            self.follower.commit()
        result.new = self._count(new, seen)
        result.seconds = time.perf_counter() - started
        self._observe(result)
        return result

    def _judge(self, rows: dict[str, list[dict[str, Any]]]) -> tuple[list[WatchFinding], dict[str, str | None]]:
        """The findings this pass would count and the counted keys after it, changing neither."""
        now = self._clock()
        current: dict[str, tuple[str, dict[str, Any]]] = {}
        for name in self.names:
            for key, row in counted(name, rows.get(name, [])).items():
                current[key] = (name, dict(row))
        new: list[WatchFinding] = []
        seen = dict(self.seen)
        for key, (name, row) in current.items():
            if key in seen:
                continue
            first = self._pending.setdefault(key, now)
            if now - first >= self.options.settle:
                run = row.get("run_id")
                seen[key] = None if run is None else str(run)
                new.append(WatchFinding(name, row_severity(question(name).severity, str(row.get("verdict"))), key, row))
        self._pending = {k: t for k, t in self._pending.items() if k in current}
        runs = self.window.runs()
        # A counted finding is forgotten once it can no longer be seen: its row is gone and its run
        # has left the window. So the set is bounded by the window, like the spans.
        seen = {k: r for k, r in seen.items() if k in current or (r is not None and r in runs)}
        return new, seen

    def _count(self, new: list[WatchFinding], seen: dict[str, str | None]) -> list[WatchFinding]:
        """Count ``new`` (the pass went through) and remember ``seen``."""
        for finding in new:
            self._pending.pop(finding.key, None)
            self.metrics.findings.labels(finding.question).inc()
        self.seen = seen
        return new

    def _observe(self, result: PassResult) -> None:
        m = self.metrics
        m.lines.inc(result.lines)
        m.bad_lines.inc(result.bad_lines)
        m.duration.observe(result.seconds)
        m.window_spans.set(result.window_spans)
        m.files.set(len(self.follower.files) if self.follower is not None else 0)
        m.evicted.labels(c.EVICTED_WINDOW).inc(result.evicted - result.evicted_future)
        m.evicted.labels(c.EVICTED_FUTURE).inc(result.evicted_future)
        m.future.inc(result.future)
        if result.future:
            print(f"warning: {result.future:,} span(s) read end more than {self.options.future_seconds:g} s "
                  f"after the clock (counted in {c.METRIC_WATCH_FUTURE_SPANS_TOTAL}); judged, but the "
                  "window does not end at them", file=sys.stderr)
        if self.window.newest_ns:
            m.lag.set(max(self._wall() - self.window.newest_ns / 1e9, 0.0))
        if self.out is not None:
            for finding in result.new:
                described = printable(", ".join(f"{k}={finding.row.get(k)}" for k in WATCHED[finding.question].key
                                                if finding.row.get(k) is not None))
                print(f"new finding: {finding.question} ({finding.severity}): {described}", file=self.out,
                      flush=True)

    def run(self, stop: threading.Event, progress: Callable[[PassResult], None] | None = None) -> None:
        """Pass after pass until ``stop`` is set; a failing pass is logged, counted and retried."""
        while not stop.is_set():
            try:
                result = self.run_pass()
            except Exception as exc:  # keep watching: one bad pass must not end the pages
                self.metrics.failures.inc()
                if isinstance(exc, TelemetryError):  # a named failure (e.g. ClickHouse down): its message says it all
                    print(f"error: {exc}", file=sys.stderr)
                else:
                    traceback.print_exc()
                print("error: a watch pass failed (counted in "
                      f"{c.METRIC_WATCH_PASS_FAILURES_TOTAL}); retrying in {self.options.interval:g} s",
                      file=sys.stderr, flush=True)
                stop.wait(self.options.interval)
                continue
            if progress is not None:
                progress(result)
            if not result.backlog:
                stop.wait(max(self.options.interval - result.seconds, 0.0))

    def close(self) -> None:
        if self.follower is not None:
            self.follower.close()
        self.window.close()
