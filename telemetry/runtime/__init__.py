"""The runtime that exports: ``configure()``, the span file exporter, OTLP JSON, the metrics.

:func:`configure` checks its plan (:mod:`._plan`) and builds one :class:`Runtime` per process:
counting batch processors (:mod:`._batching`) for the JSON-lines file exporter of :mod:`._exporter`
(encoded by :mod:`._otlp_text`; :mod:`._otlp_json` is the reference encoding) and an optional OTLP
exporter, the Prometheus metrics of :mod:`._metrics` and an optional ``/metrics`` server. :mod:`._active` holds
the process's runtime for the per-call path to read; :mod:`._containment` keeps telemetry's own
failures out of tool calls; :mod:`._resources` finds the packaged queries, dashboards and alerts.
:func:`observe_tool_spans` (:mod:`._observe`) counts the tool spans other instrumentations end.
"""

from ._multiprocess import child_exit as multiprocess_child_exit
from ._multiprocess import clear as clear_multiprocess_dir
from ._observe import ToolSpanObserver, observe_tool_spans
from ._setup import Runtime, active_runtime, configure

__all__ = [
    "Runtime",
    "ToolSpanObserver",
    "active_runtime",
    "clear_multiprocess_dir",
    "configure",
    "multiprocess_child_exit",
    "observe_tool_spans",
]
