"""Continuous forensics: ``outcome-telemetry watch`` follows trace files and counts new findings.

``Follower`` reads each new complete line once (rotation and new files included); ``WatchWindow``
keeps recent spans and judges them with the forensics loader and questions; ``Watcher`` counts
each finding that went through once, on /metrics, and persists offsets and counted findings in
``--state``. See docs/forensics.md ("Continuous forensics") and docs/alerts.md.
"""

from __future__ import annotations

from ._clickhouse import ClickHouseSource
from ._findings import watched_questions
from ._watcher import PassResult, Watcher, WatchFinding, WatchOptions

__all__ = ["ClickHouseSource", "PassResult", "WatchFinding", "WatchOptions", "Watcher", "watched_questions"]
