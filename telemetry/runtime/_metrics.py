"""The Prometheus side of a runtime: every metric the toolkit exposes, built from one table.

:data:`FAMILIES` is the table: one row per metric (its exposed name, kind, help text and which
series exist at zero from the start). Adding a counter is adding a row (its name and labels go
in ``conventions.py``); ``ToolMetrics[name]`` then gives the collector.

The per-call path is kept cheap the way prometheus-client itself does it: each label
combination's child is looked up once and cached in a plain dict, so a call costs a dict lookup
and one ``inc()``. Label values come only from bounded sets (tool names known at decoration,
outcome codes, the toolkit's own stage and drop-reason lists).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Union

from prometheus_client import CollectorRegistry, Counter, Histogram

from .. import conventions as c

__all__ = ["FAMILIES", "Family", "Metric", "ToolMetrics", "ToolSeries"]

_DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
Metric = Union[Counter, Histogram]


@dataclass(frozen=True)
class Family:
    """One metric of the table.

    ``zero_per_tool``: the series of each tool exist at zero from its first call (the metric's
    only label is the tool), because ``rate()`` needs a sample before the first increment.
    ``zero_values``: label-value lists whose every combination exists at zero from the start
    (bounded sets, so the toolkit's own health counters can alert on their first increment).
    """

    exposed: str
    kind: type[Counter] | type[Histogram]
    help: str
    zero_per_tool: bool = False
    zero_values: tuple[tuple[str, ...], ...] = ()

    @property
    def base_name(self) -> str:
        """The name prometheus-client takes: a counter's without ``_total``, which it appends."""
        if self.kind is Counter and self.exposed.endswith("_total"):
            return self.exposed[: -len("_total")]
        return self.exposed


FAMILIES: tuple[Family, ...] = (
    Family(
        c.METRIC_TOOL_CALLS_TOTAL,
        Counter,
        "Tool calls by transport, read-back and outcome: transport ok with outcome not ok "
        "is a call that returned but did the wrong thing.",
    ),
    Family(
        c.METRIC_TOOL_CALL_DURATION,
        Histogram,
        "Tool call duration, covering the await and every iteration of a generator.",
    ),
    Family(c.METRIC_GUARD_REFUSALS_TOTAL, Counter, "Calls a guard refused at call time, by refusal reason."),
    Family(
        c.METRIC_CONSTRAINT_WAIVERS_TOTAL,
        Counter,
        "Constraints waived (with a reason) at a delegation hop.",
        zero_per_tool=True,
    ),
    Family(
        c.METRIC_STALE_SENDS_TOTAL,
        Counter,
        "Outward sends refused because their policy version was superseded.",
        zero_per_tool=True,
    ),
    Family(
        c.METRIC_IDEMPOTENT_REPLAYS_TOTAL,
        Counter,
        "Calls answered from a stored outcome under their idempotency key, not run again.",
        zero_per_tool=True,
    ),
    Family(
        c.METRIC_SILENT_FAILURES_TOTAL,
        Counter,
        "Calls whose result claimed success while the outcome was decided not ok (by a read-back, "
        "an outcome callable or set_outcome): the caller was told done and it was not.",
    ),
    Family(
        c.METRIC_MASKED_FAILURES_TOTAL,
        Counter,
        "Tool calls another instrumentation traced whose recorded result reported a failure while "
        "the span's status said OK or unset: every tracer's error view shows them green "
        "(counted by observe_tool_spans).",
    ),
    Family(
        c.METRIC_SPANS_DROPPED_TOTAL,
        Counter,
        "Finished spans lost before an exporter delivered them, by exporter and reason: the "
        "trace files (exporter=file) forensics reads are missing this many.",
        zero_values=(c.EXPORTERS, c.DROP_REASONS),
    ),
    Family(
        c.METRIC_INTERNAL_ERRORS_TOTAL,
        Counter,
        "Failures inside outcome-telemetry's own work, by stage; each was contained and the "
        "tool call was unaffected, but what it recorded may be incomplete.",
        zero_values=(c.STAGES,),
    ),
)
"""Every metric, in exposition order."""


class ToolMetrics:
    """The toolkit's metrics (:data:`FAMILIES`), registered in ``registry``.

    Registration is all or nothing: if one name is already taken, the ones registered before
    it are removed again before the error propagates. ``unregister()`` removes them, so a
    process can configure, shut down and configure anew against the same registry.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._by_name: dict[str, Metric] = {}
        self._children: dict[tuple[Any, ...], Any] = {}
        self._tools: dict[str, ToolSeries] = {}
        self.known_tools: set[str] = set()
        try:
            for family in FAMILIES:
                self._by_name[family.exposed] = _build(family, registry)
        except Exception:
            self.unregister()
            raise
        self._per_tool = tuple(self._by_name[f.exposed] for f in FAMILIES if f.zero_per_tool)
        for family in FAMILIES:
            for labels in itertools.product(*family.zero_values) if family.zero_values else ():
                self.child(self._by_name[family.exposed], *labels)
        self.calls = self[c.METRIC_TOOL_CALLS_TOTAL]
        self.duration = self[c.METRIC_TOOL_CALL_DURATION]
        self.rejected = self[c.METRIC_GUARD_REFUSALS_TOTAL]
        self.waivers = self[c.METRIC_CONSTRAINT_WAIVERS_TOTAL]
        self.stale_sends = self[c.METRIC_STALE_SENDS_TOTAL]
        self.replays = self[c.METRIC_IDEMPOTENT_REPLAYS_TOTAL]
        self.silent = self[c.METRIC_SILENT_FAILURES_TOTAL]
        self.masked = self[c.METRIC_MASKED_FAILURES_TOTAL]
        self.spans_dropped = self[c.METRIC_SPANS_DROPPED_TOTAL]
        self.internal_errors = self[c.METRIC_INTERNAL_ERRORS_TOTAL]
        self._before_collect: tuple[Callable[[], None], ...] = ()
        self._hook_lock = threading.Lock()

    def __getitem__(self, exposed_name: str) -> Any:
        """The collector of the metric exposed as ``exposed_name`` (e.g. ``tool_calls_total``)."""
        return self._by_name[exposed_name]

    def ensure_tool(self, tool: str) -> None:
        """Create ``tool``'s single-label series at zero the first time the tool is called.

        Prometheus' ``rate()`` needs a sample before the first increment; without one, the
        first stale send or waiver of a tool would never show in a rate and never alert.
        """
        for metric in self._per_tool:
            self.child(metric, tool)
        self.known_tools.add(tool)

    def tool(self, tool: str) -> ToolSeries:
        """``tool``'s children of the per-call metrics, kept from its first call on (which also
        creates its single-label series at zero, as :meth:`ensure_tool` does)."""
        found = self._tools.get(tool)
        if found is None:
            found = self._tools[tool] = ToolSeries(self, tool)
        return found

    def child(self, metric: Metric, *labels: str) -> Any:
        """Return the cached child of ``metric`` for ``labels`` (creating it once)."""
        key = (id(metric),) + labels
        found = self._children.get(key)
        if found is None:
            found = metric.labels(*labels)
            self._children[key] = found
        return found

    def count_drop(self, exporter: str, reason: str, spans: int) -> None:
        """Count ``spans`` lost by ``exporter`` for ``reason`` (both from the bounded sets)."""
        self.child(self.spans_dropped, exporter, reason).inc(spans)

    def count_internal_error(self, stage: str) -> None:
        """Count one contained failure at ``stage``."""
        self.child(self.internal_errors, stage).inc()

    def before_collect(self, flush: Callable[[], None]) -> None:
        """Call ``flush`` whenever any of these metrics is collected, before it reports.

        For counts held between collections (``observe_tool_spans`` adds to them as spans end and
        hands them over here): every reader of a prometheus-client metric (a scrape, the
        exposition functions, ``registry.get_sample_value``, a registry restricted to some
        names) goes through the metric's ``collect``, so no reader sees a count still held.
        ``flush`` must not raise and must not collect. Safe to call twice with the same ``flush``.
        """
        with self._hook_lock:
            if flush in self._before_collect:
                return
            if not self._before_collect:
                for metric in self._by_name.values():
                    metric.collect = self._flushed_first(metric.collect)  # type: ignore[method-assign]
            self._before_collect = self._before_collect + (flush,)

    def forget_before_collect(self, flush: Callable[[], None]) -> None:
        """Stop calling ``flush`` before a collection (nothing when it was not given). Compared by
        equality: a bound method is a new object each time it is looked up."""
        with self._hook_lock:
            self._before_collect = tuple(f for f in self._before_collect if f != flush)

    def _flushed_first(self, collect: Callable[[], Iterable[Any]]) -> Callable[[], Iterable[Any]]:
        def flushed_then_collect() -> Iterable[Any]:
            for flush in self._before_collect:
                flush()
            return collect()
        return flushed_then_collect

    def unregister(self) -> None:
        """Remove every metric from the registry; safe to call twice."""
        for collector in self._by_name.values():
            try:
                self.registry.unregister(collector)
            except KeyError:
                pass


class ToolSeries:
    """One tool's children of the per-call metrics, each looked up once and kept.

    A call finds its tool's series with one dict lookup (:meth:`ToolMetrics.tool`); the tool
    label is fixed, so the single-label children are plain attributes and the others are kept
    by their remaining labels. Two threads that create the same child at once both get
    prometheus-client's one child for those labels.
    """

    __slots__ = ("_calls", "_metrics", "_refused", "_silent", "duration", "replays", "stale_sends", "tool", "waivers")

    def __init__(self, metrics: ToolMetrics, tool: str) -> None:
        if tool not in metrics.known_tools:
            metrics.ensure_tool(tool)
        self._metrics = metrics
        self.tool = tool
        self.duration = metrics.child(metrics.duration, tool)
        self.waivers = metrics.child(metrics.waivers, tool)
        self.stale_sends = metrics.child(metrics.stale_sends, tool)
        self.replays = metrics.child(metrics.replays, tool)
        self._calls: dict[tuple[str, str, str], Any] = {}
        self._silent: dict[str, Any] = {}
        self._refused: dict[str, Any] = {}

    def calls(self, transport: str, readback: str, outcome: str) -> Any:
        """The ``tool_calls_total`` child of this tool for the other three labels."""
        key = (transport, readback, outcome)
        found = self._calls.get(key)
        if found is None:
            found = self._calls[key] = self._metrics.child(self._metrics.calls, self.tool, transport, readback, outcome)
        return found

    def silent(self, outcome: str) -> Any:
        """The silent-failure child of this tool for ``outcome`` (a label value)."""
        found = self._silent.get(outcome)
        if found is None:
            found = self._silent[outcome] = self._metrics.child(self._metrics.silent, self.tool, outcome)
        return found

    def refused(self, reason: str) -> Any:
        """The guard-refusal child of this tool for ``reason``."""
        found = self._refused.get(reason)
        if found is None:
            found = self._refused[reason] = self._metrics.child(self._metrics.rejected, self.tool, reason)
        return found


def _build(family: Family, registry: CollectorRegistry) -> Metric:
    labels = c.METRIC_LABELS[family.exposed]
    if family.kind is Histogram:
        return Histogram(family.base_name, family.help, labels, buckets=_DURATION_BUCKETS, registry=registry)
    return Counter(family.base_name, family.help, labels, registry=registry)
