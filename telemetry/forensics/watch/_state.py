"""The ``--state`` file: offsets of the followed files and the findings already counted.

Written after every pass to a temporary file beside it, flushed and renamed over it, so a crash
leaves the previous state or the new one, never half of each. A file that is not this format is
refused by name (:class:`~telemetry.exceptions.WatchStateError`), never silently replaced:
replacing it would count every finding again.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...exceptions import WatchStateError
from ._follow import Followed

__all__ = ["STATE_FORMAT", "WatchState", "load_state", "save_state"]

STATE_FORMAT = "outcome-telemetry-watch/1"


@dataclass
class WatchState:
    """What a restart needs: where each file was read to, and which findings were counted
    (finding key to the run it belongs to, or None)."""

    files: list[Followed] = field(default_factory=list)
    seen: dict[str, str | None] = field(default_factory=dict)
    newest_ns: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"format": STATE_FORMAT, "newest_ns": self.newest_ns,
                "files": [f.as_dict() for f in self.files], "seen": self.seen}


def _refuse(path: Path, why: str) -> WatchStateError:
    return WatchStateError(f"the watch state file {path} {why}; move it away to start afresh (every "
                           "file is then read again and its findings counted again), or pass another --state")


def load_state(path: Path) -> WatchState:
    """The state in ``path``; an empty state when the file does not exist yet."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return WatchState()
    except (OSError, UnicodeDecodeError) as exc:
        raise _refuse(path, f"cannot be read ({exc})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _refuse(path, f"is not valid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != STATE_FORMAT:
        raise _refuse(path, f"is not an {STATE_FORMAT} state file")
    try:
        files = [Followed(str(f["path"]), int(f["device"]), int(f["inode"]), int(f["offset"]), int(f["lines"]),
                          str(f["head"]), str(f.get("tail", ""))) for f in data["files"]]
        seen = {str(k): (None if v is None else str(v)) for k, v in dict(data["seen"]).items()}
        newest = int(data.get("newest_ns", 0))
    except (KeyError, TypeError, ValueError) as exc:
        raise _refuse(path, f"has a damaged entry ({exc!r})") from None
    if any(f.offset < 0 or f.lines < 0 for f in files):
        raise _refuse(path, "has a negative offset")
    return WatchState(files, seen, newest)


def save_state(path: Path, state: WatchState) -> None:
    """Write ``state`` to ``path`` atomically (temporary file, fsync, rename)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(state.as_dict(), handle, separators=(",", ":"))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
