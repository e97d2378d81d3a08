"""The values behind prometheus-client children, counted straight: ``observe_tool_spans``' hot path.

The counts of the peer tool spans ending on the application's provider become counter
increments and histogram observations (handed over per kind of call, before each collection).
prometheus-client's public methods check their arguments on every call; ours are always children
made by ``labels`` and counts and durations we added up, so the counting is done on the values
behind them, as the public methods do after their checks. Whenever a client release keeps its
values elsewhere, :func:`direct_values` answers None and the public methods serve
(tests/foundation/test_observe.py holds both paths to the same counts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from prometheus_client.samples import Exemplar

__all__ = ["DirectValues", "direct_values", "exemplar_keeper"]


class DirectValues(NamedTuple):
    """The values behind a count plan's children, added to straight (what ``inc`` and ``observe`` do after their checks).

    prometheus-client's ``Counter.inc`` checks that the child is observable and the amount not
    negative, and ``Histogram.observe`` walks its bucket bounds in a Python loop, on every call;
    ours are always children made by ``labels``, amounts of 1 and a duration, so the values' own
    ``inc`` is called and the bucket is found by bisecting the same bounds (the first bound not
    below the amount, the one ``observe``'s loop picks). ``keep_exemplars``: how the calls and
    masked children keep an exemplar: ``inc(1, exemplar)`` checks the exemplar's label name and
    length on every call; ours is always the same valid name and 32 hex digits, so it is made
    once per span and handed to the values, as ``inc`` itself does after its checks. None when
    a client release keeps values or exemplars some other way: then the public methods serve
    (tests/foundation/test_observe.py fails loudly if so).
    """

    calls: Callable[[float], None]
    masked: Callable[[float], None] | None
    duration_sum: Callable[[float], None]
    bounds: tuple[float, ...]
    buckets: tuple[Callable[[float], None], ...]
    keep_exemplars: tuple[Callable[[Exemplar], None], Callable[[Exemplar], None]]


def exemplar_keeper(child: Any) -> Callable[[Exemplar], None] | None:
    """How ``child`` keeps an exemplar without ``inc``'s checks, or None when the client keeps it elsewhere."""
    keep = getattr(getattr(child, "_value", None), "set_exemplar", None)
    return keep if callable(keep) else None


def value_inc(child: Any) -> Callable[[float], None] | None:
    inc = getattr(getattr(child, "_value", None), "inc", None)
    return inc if callable(inc) else None


def direct_values(calls: Any, masked: Any, duration: Any) -> DirectValues | None:
    """The values behind these children (see :class:`DirectValues`), or None when any is not where it was."""
    keep_calls = exemplar_keeper(calls)
    keep_masked = exemplar_keeper(masked) if masked is not None else keep_calls
    if keep_calls is None or keep_masked is None:
        return None
    calls_inc = value_inc(calls)
    masked_inc = value_inc(masked) if masked is not None else None
    sum_inc = getattr(getattr(duration, "_sum", None), "inc", None)
    bounds = getattr(duration, "_upper_bounds", None)
    buckets = getattr(duration, "_buckets", None)
    if calls_inc is None or (masked is not None and masked_inc is None) or not callable(sum_inc):
        return None
    if not isinstance(bounds, list) or not isinstance(buckets, list) or not bounds or len(bounds) != len(buckets):
        return None
    incs = tuple(getattr(bucket, "inc", None) for bucket in buckets)
    if bounds[-1] != float("inf") or not all(callable(inc) for inc in incs):
        return None
    return DirectValues(calls_inc, masked_inc, sum_inc, tuple(bounds), incs, (keep_calls, keep_masked))  # type: ignore[arg-type]
