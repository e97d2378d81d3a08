"""The watch loop: read new lines, judge the window, count each new finding once, persist.

A pass: scan for new and rotated files, read their new complete lines into the window, drop what
left it, run the watched questions, and count the findings not counted before. With a ClickHouse
source (``WatchOptions.clickhouse``) the pass instead reads the window's runs from the table
again (:mod:`.clickhouse`); judging, counting and the state are the same. A finding counts
once it has been there for ``settle`` seconds: spans of one run arrive from several processes,
each flushing on its own schedule, and a hop whose parent is still in another exporter's buffer
looks like a gap for a moment. Then the state (offsets and counted keys) is written, after the
window database is checkpointed, so a restart neither re-reads a line nor recounts a finding.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, TextIO

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ... import conventions as c
from ...exceptions import ForensicsInputError, TelemetryError
from ..loading import MAX_LINE_BYTES
from ..questions import question
from .clickhouse import ClickHouseSource, ClickHouseWindow
from .findings import WATCHED, counted, watched_questions
from .follow import Follower
from .state import WatchState, load_state, save_state
from .window import Window

__all__ = ["Finding", "PassResult", "READ_BUDGET", "WatchMetrics", "WatchOptions", "Watcher"]

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
    state: Optional[Path] = None
    max_line_bytes: int = MAX_LINE_BYTES
    read_budget: int = READ_BUDGET
    clickhouse: Optional[ClickHouseSource] = None
    """Read each pass's window from ClickHouse instead of following ``paths``."""


@dataclass
class Finding:
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
    window_spans: int = 0
    seconds: float = 0.0
    new: list[Finding] = field(default_factory=list)
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


class Watcher:
    """Continuous forensics over growing trace files; drive it with :meth:`run` or :meth:`run_pass`."""

    def __init__(self, options: WatchOptions, registry: Optional[CollectorRegistry] = None,
                 out: Optional[TextIO] = None, clock: Callable[[], float] = time.monotonic):
        self.options = options
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = WatchMetrics(self.registry, rows=options.clickhouse is not None)
        self.out = out
        self._clock = clock
        state = load_state(options.state) if options.state is not None else WatchState()
        self.follower: Optional[Follower] = None
        self.window: "Window | ClickHouseWindow"
        if options.clickhouse is not None:
            if options.paths:
                raise ForensicsInputError("give trace PATHS or --clickhouse, not both")
            self.window = ClickHouseWindow(options.clickhouse, options.window)
        else:
            self.follower = Follower(options.paths, state.files)
            database = options.state.with_name(options.state.name + ".window.duckdb") if options.state else None
            self.window = Window(options.window, database, options.max_line_bytes)
        self.window.newest_ns = max(self.window.newest_ns, state.newest_ns)
        self.seen: dict[str, Optional[str]] = dict(state.seen)
        self._pending: dict[str, float] = {}
        self.names = watched_questions()

    def run_pass(self) -> PassResult:
        """One pass (see the module docstring)."""
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
            result.evicted = self.window.evict()
        rows = self.window.evaluate(self.names)
        result.new = self._count(rows)
        result.window_spans = self.window.spans
        if self.options.state is not None:
            self.window.checkpoint()
            files = list(self.follower.files.values()) if self.follower is not None else []
            save_state(self.options.state, WatchState(files, self.seen, self.window.newest_ns))
        result.seconds = time.perf_counter() - started
        self._observe(result)
        return result

    def _count(self, rows: dict[str, list[dict[str, Any]]]) -> list[Finding]:
        now = self._clock()
        current: dict[str, tuple[str, dict[str, Any]]] = {}
        for name in self.names:
            for key, row in counted(name, rows.get(name, [])).items():
                current[key] = (name, dict(row))
        new: list[Finding] = []
        for key, (name, row) in current.items():
            if key in self.seen:
                continue
            first = self._pending.setdefault(key, now)
            if now - first >= self.options.settle:
                self._pending.pop(key)
                run = row.get("run_id")
                self.seen[key] = None if run is None else str(run)
                self.metrics.findings.labels(name).inc()
                new.append(Finding(name, question(name).severity, key, row))
        self._pending = {k: t for k, t in self._pending.items() if k in current}
        runs = self.window.runs()
        # A counted finding is forgotten once it can no longer be seen: its row is gone and its run
        # has left the window. So the set is bounded by the window, like the spans.
        self.seen = {k: r for k, r in self.seen.items() if k in current or (r is not None and r in runs)}
        return new

    def _observe(self, result: PassResult) -> None:
        m = self.metrics
        m.lines.inc(result.lines)
        m.bad_lines.inc(result.bad_lines)
        m.duration.observe(result.seconds)
        m.window_spans.set(result.window_spans)
        m.files.set(len(self.follower.files) if self.follower is not None else 0)
        if self.window.newest_ns:
            m.lag.set(max(time.time() - self.window.newest_ns / 1e9, 0.0))
        if self.out is not None:
            for finding in result.new:
                described = ", ".join(f"{k}={finding.row.get(k)}" for k in WATCHED[finding.question].key
                                      if finding.row.get(k) is not None)
                print(f"new finding: {finding.question} ({finding.severity}): {described}", file=self.out,
                      flush=True)

    def run(self, stop: threading.Event, progress: Optional[Callable[[PassResult], None]] = None) -> None:
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
