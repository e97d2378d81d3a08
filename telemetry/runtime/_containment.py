"""Containment for failures inside telemetry: log once per place, count always, never raise.

A tool call must behave exactly as it would undecorated, so every piece of telemetry work that
could fail (a user's read-back or outcome callable, the span API, a counter, an exporter) runs
behind :func:`report`, which logs the first failure of each place with its traceback, counts
every failure in the internal-errors counter (by stage) of the runtime it belongs
to (the active one unless given), and swallows it. A log line is read once; the counter is what
an alert watches, so the hundredth failing read-back is as visible as the first.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import TYPE_CHECKING

from .. import conventions as c
from . import _active as _state

if TYPE_CHECKING:
    from ._metrics import ToolMetrics

logger = logging.getLogger("telemetry")

_lock = threading.Lock()
_seen: set[str] = set()
failures: Counter[str] = Counter()
"""How many times each place failed in this process, for tests and diagnostics."""


def report(stage: str, place: str, exc: BaseException, metrics: ToolMetrics | None = None) -> None:
    """Record that telemetry work at ``place`` (of ``stage``) failed with ``exc``; log only the first time.

    ``stage`` is one of ``conventions.STAGES``; ``metrics`` is the runtime's to count in
    (default: the active runtime's; nothing is counted when none is active).
    """
    with _lock:
        failures[place] += 1
        first = place not in _seen
        _seen.add(place)
    if metrics is None:
        runtime = _state.active
        metrics = runtime.metrics if runtime is not None else None
    if metrics is not None:
        try:
            metrics.count_internal_error(stage)
        except Exception:  # a counter that cannot count must not turn containment into a raise
            pass
    if first:
        logger.warning(
            "outcome-telemetry: %s failed and was ignored (the tool call is unaffected; further "
            "failures here are counted in %s{%s=%r}, not logged): %r",
            place,
            c.METRIC_INTERNAL_ERRORS_TOTAL,
            c.LABEL_STAGE,
            stage,
            exc,
            exc_info=exc,
        )
