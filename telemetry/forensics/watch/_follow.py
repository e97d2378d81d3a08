"""Follow trace files as they grow, rotate and appear, handing out each complete line once.

A file is known by its identity (device and inode), not its name, so a rotation that renames
``traces.jsonl`` away and starts a new one is read as two files, and the renamed one is finished
from the descriptor held open on it even when its new name is not a trace file name. A file
that no longer holds what was read from it starts again from its beginning: shorter than the
offset read (a truncation seen before the writer passed the old offset), or with other bytes
where the first ones were (an inode reused) or just before the offset (a copy-truncate that the
writer has already written past: every file our exporter writes starts with the same bytes, so
the head alone cannot tell). Only bytes up to the last newline are taken: a partial last line
waits for its end. Compressed files and Parquet parts are finished artefacts, not followed.

Reading and moving on are two steps: :meth:`Follower.read` hands out lines without moving any
offset, and :meth:`Follower.commit` moves the offsets past them once the caller has stored them,
so a pass that fails after reading reads the same lines again.
"""

from __future__ import annotations

import glob
import hashlib
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ...exceptions import ForensicsInputError
from .._inputs import is_trace_file, path_list, walk

__all__ = ["Chunk", "Followed", "Follower", "HEAD_BYTES"]

HEAD_BYTES = 64
"""How many leading bytes fingerprint a file, so a reused inode is not mistaken for the old file."""
TAIL_BYTES = 4096
"""How many bytes before the offset fingerprint what was read, so a file truncated and written
past the old offset again (copy-truncate rotation) is read again from its start."""
_GLOB_CHARS = frozenset("*?[")


@dataclass
class Followed:
    """One followed file: where reading resumes, and what identifies the file."""

    path: str
    device: int
    inode: int
    offset: int = 0
    """Bytes consumed: always just after a newline."""
    lines: int = 0
    """Lines consumed (blank ones included), for naming a bad line by its number."""
    head: str = ""
    """SHA-256 of the first ``min(offset, HEAD_BYTES)`` bytes ("" before anything is read)."""
    tail: str = ""
    """SHA-256 of the ``min(offset, TAIL_BYTES)`` bytes before the offset ("" before anything is
    read, or from a state file written before it was kept: then only the head is compared)."""

    @property
    def identity(self) -> tuple[int, int]:
        return (self.device, self.inode)

    def as_dict(self) -> dict[str, object]:
        return {"path": self.path, "device": self.device, "inode": self.inode, "offset": self.offset,
                "lines": self.lines, "head": self.head, "tail": self.tail}


@dataclass(frozen=True)
class Chunk:
    """Complete lines read from one file in one pass."""

    path: str
    first_line: int
    """The 1-based number, in its file, of the chunk's first line."""
    data: bytes
    lines: int


def _fingerprint(handle: int, length: int) -> str:
    return hashlib.sha256(os.pread(handle, min(length, HEAD_BYTES), 0)).hexdigest() if length else ""


def _tail(handle: int, offset: int) -> str:
    length = min(offset, TAIL_BYTES)
    return hashlib.sha256(os.pread(handle, length, offset - length)).hexdigest() if length else ""


@dataclass(frozen=True)
class _Position:
    offset: int
    lines: int
    head: str
    tail: str


class Follower:
    """The files under ``paths`` (files, directories searched recursively, globs re-expanded on
    every scan) and how far each has been read. Not thread-safe: one watcher drives it."""

    def __init__(self, paths: Iterable[str], known: list[Followed] | None = None):
        self.paths = [os.fspath(p) for p in path_list(paths)]  # one path is that path, not its characters
        if not self.paths:
            raise ForensicsInputError("no trace paths given; pass the exporter's files, directories or globs")
        for path in self.paths:
            if not Path(path).exists() and not (_GLOB_CHARS & set(path)):
                raise ForensicsInputError(f"the trace path {path!r} does not exist; pass a file, a directory "
                                          "or a glob (a directory may start empty)")
        self.files: dict[tuple[int, int], Followed] = {f.identity: f for f in known or []}
        self._handles: dict[tuple[int, int], int] = {}
        self._warned: set[str] = set()
        self._read: dict[tuple[int, int], _Position] = {}
        """Where each file's last :meth:`read` ended, until :meth:`commit` moves the offsets there."""
        self.backlog = False
        """True after a :meth:`read` that the budget cut short: more lines are waiting."""

    def _discover(self) -> list[Path]:
        found: list[Path] = []
        for given in self.paths:
            path = Path(given)
            candidates = [path] if path.exists() else [Path(m) for m in sorted(glob.glob(given, recursive=True))]
            for candidate in candidates:
                if candidate.is_dir():
                    found += [p for p in walk(candidate) if is_trace_file(p)]
                elif candidate.is_file():
                    found.append(candidate)
        out = []
        for path in found:
            name = path.name.lower()
            if name.endswith((".gz", ".zst", ".parquet")):
                if str(path) not in self._warned:
                    self._warned.add(str(path))
                    print(f"warning: {path} is compressed or Parquet: a finished file, not followed "
                          "(run `outcome-telemetry forensics` on it)", file=sys.stderr)
                continue
            out.append(path)
        return out

    def _open(self, path: Path) -> tuple[tuple[int, int], int] | None:
        try:
            handle = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        info = os.fstat(handle)
        identity = (info.st_dev, info.st_ino)
        if identity in self._handles:
            os.close(handle)
            return identity, self._handles[identity]
        self._handles[identity] = handle
        return identity, handle

    def scan(self) -> None:
        """Pick up new files, notice renamed and replaced ones, and forget files gone and finished."""
        self._read.clear()
        seen: set[tuple[int, int]] = set()
        for path in self._discover():
            opened = self._open(path)
            if opened is None:
                continue
            identity, handle = opened
            seen.add(identity)
            entry = self.files.get(identity)
            if entry is None:
                self.files[identity] = Followed(str(path), *identity)
                continue
            entry.path = str(path)
            if not self._holds_what_was_read(handle, entry):
                print(f"warning: {path} was truncated or replaced; reading it again from the start "
                      f"(lines written after line {entry.lines:,} and before the truncation are only in "
                      "the rotated copy, if there is one)", file=sys.stderr)
                entry.offset, entry.lines, entry.head, entry.tail = 0, 0, "", ""
        for identity in list(self.files):
            if identity not in seen and identity not in self._handles:
                del self.files[identity]  # gone before we ever held it open (state from a past run)

    @staticmethod
    def _holds_what_was_read(handle: int, entry: Followed) -> bool:
        if os.fstat(handle).st_size < entry.offset or _fingerprint(handle, entry.offset) != entry.head:
            return False
        return not entry.tail or _tail(handle, entry.offset) == entry.tail

    def read(self, budget: int) -> list[Chunk]:
        """The complete lines appended since the last commit, at most about ``budget`` bytes in
        all (what is left waits for the next call); no offset moves until :meth:`commit`. Files
        gone from the paths are read to their end through the descriptor still held, then
        forgotten."""
        chunks: list[Chunk] = []
        self._read.clear()
        self.backlog = False
        for identity, entry in sorted(self.files.items(), key=lambda item: item[1].path):
            handle = self._handles.get(identity)
            if handle is None:
                continue
            size = os.fstat(handle).st_size
            want = min(size - entry.offset, max(budget, 0))
            self.backlog = self.backlog or want < size - entry.offset
            data = os.pread(handle, want, entry.offset) if want > 0 else b""
            end = data.rfind(b"\n") + 1
            if end:
                complete = data[:end]
                lines = complete.count(b"\n")
                chunks.append(Chunk(entry.path, entry.lines + 1, complete, lines))
                offset = entry.offset + end
                self._read[identity] = _Position(offset, entry.lines + lines, _fingerprint(handle, offset),
                                                 _tail(handle, offset))
                budget -= end
            elif not self._still_named(entry) and entry.offset >= size:
                self._forget(identity)
        return chunks

    def after_read(self) -> list[Followed]:
        """The followed files as they will be once the last read is committed (for the state file)."""
        out = []
        for identity, entry in self.files.items():
            moved = self._read.get(identity)
            out.append(entry if moved is None else Followed(entry.path, entry.device, entry.inode, moved.offset,
                                                            moved.lines, moved.head, moved.tail))
        return out

    def commit(self) -> None:
        """Move every offset past the lines the last :meth:`read` handed out (they are stored)."""
        for identity, moved in self._read.items():
            entry = self.files.get(identity)
            if entry is not None:
                entry.offset, entry.lines, entry.head, entry.tail = moved.offset, moved.lines, moved.head, moved.tail
        self._read.clear()

    def _still_named(self, entry: Followed) -> bool:
        try:
            info = os.stat(entry.path)
        except OSError:
            return False
        return (info.st_dev, info.st_ino) == entry.identity

    def _forget(self, identity: tuple[int, int]) -> None:
        handle = self._handles.pop(identity, None)
        if handle is not None:
            os.close(handle)
        self.files.pop(identity, None)
        self._read.pop(identity, None)

    @property
    def pending_bytes(self) -> int:
        """Bytes written to followed files and not yet read (a partial last line included)."""
        total = 0
        for identity, entry in self.files.items():
            handle = self._handles.get(identity)
            if handle is not None:
                total += max(os.fstat(handle).st_size - entry.offset, 0)
        return total

    def close(self) -> None:
        for identity in list(self._handles):
            os.close(self._handles.pop(identity))
