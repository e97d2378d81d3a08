"""The time window a ClickHouse read covers: ``--since``/``--until`` times or ``--last`` a duration."""

from __future__ import annotations

import datetime as _dt
import re
import time

from ...exceptions import ClickHouseInputError
from ._select import ReadWindow, iso

__all__ = [
    "DEFAULT_LAST",
    "iso",
    "parse_duration",
    "parse_time",
    "window",
]

DEFAULT_LAST = "6h"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d|w)")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """Seconds in ``text``: a number and a unit (s, m, h, d, w), e.g. ``90m`` or ``6h``."""
    match = _DURATION.fullmatch(text.strip().lower())
    if not match or float(match.group(1)) <= 0:
        raise ClickHouseInputError(f"--last {text!r} is not a duration; write a number and s, m, h, d or w, e.g. 6h")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


def parse_time(text: str, flag: str) -> int:
    """Nanoseconds since the epoch for an ISO 8601 time (UTC unless it names an offset) or ``now``."""
    if text.strip().lower() == "now":
        return time.time_ns()
    try:
        moment = _dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ClickHouseInputError(
            f"{flag} {text!r} is not a time; write ISO 8601, e.g. 2025-03-01T14:00:00Z or 2025-03-01 14:00") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    delta = moment - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def window(since: str | None = None, until: str | None = None, last: str | None = None,
           service: str | None = None, now_ns: int | None = None) -> ReadWindow:
    """The window the options describe; ``--last 6h`` when none is given."""
    if last is not None and (since is not None or until is not None):
        raise ClickHouseInputError("give either --last or --since/--until, not both")
    now = time.time_ns() if now_ns is None else now_ns
    if since is None and until is None:
        return ReadWindow(now - int(parse_duration(last or DEFAULT_LAST) * 1e9), now + 1, service)
    if since is None:
        raise ClickHouseInputError("--until needs --since (or use --last)")
    start = parse_time(since, "--since")
    end = parse_time(until, "--until") if until is not None else now + 1
    return ReadWindow(start, end, service)

