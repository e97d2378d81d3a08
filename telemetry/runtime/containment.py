"""Containment for failures inside telemetry: log once per place, never raise into a tool.

A tool call must behave exactly as it would undecorated, so every piece of telemetry work that
could fail (a user's read-back or outcome callable, the span API, a counter) runs behind
:func:`contained`, which logs the first failure of each place with its traceback, counts every
failure, and swallows it.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter

logger = logging.getLogger("telemetry")

_lock = threading.Lock()
_seen: set[str] = set()
failures: Counter[str] = Counter()
"""How many times each place failed, for tests and the ``diagnostics`` of a runtime."""


def report(place: str, exc: BaseException) -> None:
    """Record that telemetry work at ``place`` failed with ``exc``; log only the first time."""
    with _lock:
        failures[place] += 1
        first = place not in _seen
        _seen.add(place)
    if first:
        logger.warning(
            "outcome-telemetry: %s failed and was ignored (the tool call is unaffected; "
            "further failures here are counted, not logged): %r",
            place,
            exc,
            exc_info=exc,
        )
