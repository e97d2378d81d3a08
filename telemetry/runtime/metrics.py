"""The Prometheus side of a runtime: the six metrics of DESIGN.md in one registry.

The per-call path is kept cheap the way prometheus-client itself does it: each label
combination's child is looked up once and cached in a plain dict, so a call costs a dict lookup
and one ``inc()``. Label values come only from bounded sets (tool names known at decoration,
outcome codes), which the decorator guarantees before calling in here.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from .. import conventions as c

_DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class ToolMetrics:
    """The toolkit's counters and histogram, registered in ``registry``.

    ``unregister()`` removes them again, so a process can configure, shut down and configure
    anew against the same registry (tests do, and so do long-lived apps that reconfigure).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.calls = Counter(
            c.METRIC_TOOL_CALLS,
            "Tool calls by transport, read-back and outcome: transport ok with outcome not ok "
            "is a call that returned but did the wrong thing.",
            c.METRIC_LABELS[c.METRIC_TOOL_CALLS_TOTAL],
            registry=registry,
        )
        self.duration = Histogram(
            c.METRIC_TOOL_CALL_DURATION,
            "Tool call duration, covering the await and every iteration of a generator.",
            c.METRIC_LABELS[c.METRIC_TOOL_CALL_DURATION],
            buckets=_DURATION_BUCKETS,
            registry=registry,
        )
        self.rejected = Counter(
            c.METRIC_REJECTED_WRITES,
            "Calls a guard refused at call time, by refusal reason.",
            c.METRIC_LABELS[c.METRIC_REJECTED_WRITES_TOTAL],
            registry=registry,
        )
        self.waivers = Counter(
            c.METRIC_CONSTRAINT_WAIVERS,
            "Constraints waived (with a reason) at a delegation hop.",
            c.METRIC_LABELS[c.METRIC_CONSTRAINT_WAIVERS_TOTAL],
            registry=registry,
        )
        self.stale_sends = Counter(
            c.METRIC_STALE_SENDS,
            "Outward sends refused because their policy version was superseded.",
            c.METRIC_LABELS[c.METRIC_STALE_SENDS_TOTAL],
            registry=registry,
        )
        self.replays = Counter(
            c.METRIC_IDEMPOTENT_REPLAYS,
            "Calls answered from a stored outcome under their idempotency key, not run again.",
            c.METRIC_LABELS[c.METRIC_IDEMPOTENT_REPLAYS_TOTAL],
            registry=registry,
        )
        self._collectors = (
            self.calls,
            self.duration,
            self.rejected,
            self.waivers,
            self.stale_sends,
            self.replays,
        )
        self._children: dict[tuple[Any, ...], Any] = {}
        self.known_tools: set[str] = set()

    def ensure_tool(self, tool: str) -> None:
        """Create ``tool``'s single-label series at zero the first time the tool is called.

        Prometheus' ``rate()`` needs a sample before the first increment; without one, the
        first stale send or waiver of a tool would never show in a rate and never alert.
        """
        for metric in (self.waivers, self.stale_sends, self.replays):
            self.child(metric, tool)
        self.known_tools.add(tool)

    def child(self, metric: Counter | Histogram, *labels: str) -> Any:
        """Return the cached child of ``metric`` for ``labels`` (creating it once)."""
        key = (id(metric),) + labels
        found = self._children.get(key)
        if found is None:
            found = metric.labels(*labels)
            self._children[key] = found
        return found

    def unregister(self) -> None:
        """Remove every metric from the registry; safe to call twice."""
        for collector in self._collectors:
            try:
                self.registry.unregister(collector)
            except KeyError:
                pass
