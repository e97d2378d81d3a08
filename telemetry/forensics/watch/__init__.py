"""Continuous forensics: ``outcome-telemetry watch`` follows trace files and counts new findings.

``Follower`` reads each new complete line once (rotation and new files included); ``Window``
keeps recent spans and judges them with the forensics loader and questions; ``Watcher`` counts
each finding that went through once, on /metrics, and persists offsets and counted findings in
``--state``. See docs/forensics.md ("Continuous forensics") and docs/alerts.md.
"""

from __future__ import annotations

from .findings import WATCHED, Watched, finding_key, watched_questions
from .follow import Chunk, Followed, Follower
from .state import WatchState, load_state, save_state
from .watcher import Finding, PassResult, Watcher, WatchOptions
from .window import Window

__all__ = [
    "WATCHED",
    "Chunk",
    "Finding",
    "Followed",
    "Follower",
    "PassResult",
    "WatchOptions",
    "WatchState",
    "Watched",
    "Watcher",
    "Window",
    "finding_key",
    "load_state",
    "save_state",
    "watched_questions",
]
