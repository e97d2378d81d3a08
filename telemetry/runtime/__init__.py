"""The runtime that exports: ``configure()``, the span file exporter, OTLP JSON, the metrics.

:func:`configure` checks its plan (:mod:`._plan`) and builds one :class:`Runtime` per process:
counting batch processors (:mod:`.batching`) for the JSON-lines file exporter of :mod:`.exporter`
(encoded by :mod:`.otlp_text`; :mod:`.otlp_json` is the reference encoding) and an optional OTLP
exporter, the Prometheus metrics of :mod:`.metrics` and an optional ``/metrics`` server. :mod:`.active` holds
the process's runtime for the per-call path to read; :mod:`.containment` keeps telemetry's own
failures out of tool calls; :mod:`.resources` finds the packaged queries, dashboards and alerts.
:func:`observe_tool_spans` (:mod:`.observe`) counts the tool spans other instrumentations end.
"""

from ._setup import Runtime, active_runtime, configure
from .observe import ToolSpanObserver, observe_tool_spans

__all__ = ["Runtime", "ToolSpanObserver", "active_runtime", "configure", "observe_tool_spans"]
