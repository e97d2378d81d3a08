"""Turn what the user typed (files, directories, globs) into the trace files to read.

JSON-lines files and Parquet parts are told apart here, so the loader never guesses. A
directory written by ``ingest`` is recognised by its manifest and stands for its Parquet parts.

Nothing is left out silently: a sub-folder that cannot be listed, a trace file that cannot be
opened, and a trace path that is not a regular file (a FIFO, a socket, a device, a broken
symlink) are each refused by name, so a report never answers from part of the input as if it
were all of it. With ``skip_unreadable`` (``--skip-unreadable``), the user's explicit choice, a
folder that cannot be listed and a file that cannot be opened are skipped instead, and each is
kept in :attr:`TraceInputs.unreadable` with its reason, which the load report counts and names.
"""

from __future__ import annotations

import glob
import os
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

from ..exceptions import ForensicsInputError

__all__ = [
    "COMPRESSION_SUFFIXES", "JSON_SUFFIXES", "MANIFEST_NAME", "PARQUET_SUFFIX", "TRACE_SUFFIXES", "PathLike",
    "TraceInputs", "is_trace_file", "path_list", "resolve_inputs", "walk",
]

PathLike = Union[str, Path]

MANIFEST_NAME = "forensics-manifest.json"
"""The file ``ingest`` keeps in its output directory (see :func:`telemetry.forensics.ingest`)."""

JSON_SUFFIXES = (".jsonl", ".json", ".ndjson")
COMPRESSION_SUFFIXES = ("", ".gz", ".zst")
TRACE_SUFFIXES = tuple(j + c for j in JSON_SUFFIXES for c in COMPRESSION_SUFFIXES)
PARQUET_SUFFIX = ".parquet"

_GLOB_CHARS = frozenset("*?[")


@dataclass
class TraceInputs:
    """The resolved inputs: JSON-lines files and Parquet files, each sorted, without repeats."""

    json_files: list[Path] = field(default_factory=list)
    parquet_files: list[Path] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    """(path, reason) of each folder or file skipped under ``skip_unreadable``, in the order met."""
    _seen: set[Path] = field(default_factory=set, repr=False, compare=False)

    def add(self, path: Path) -> None:
        """Classify one existing file by its name (anything not Parquet is read as JSON lines)."""
        if path in self._seen:  # a set: one-file-per-process layouts hold tens of thousands
            return
        self._seen.add(path)
        (self.parquet_files if path.name.endswith(PARQUET_SUFFIX) else self.json_files).append(path)

    @property
    def all_files(self) -> list[Path]:
        return self.json_files + self.parquet_files


def is_trace_file(path: Path) -> bool:
    """True for the names a directory scan picks up: ``*.jsonl``/``*.json``/``*.ndjson`` (plain,
    ``.gz`` or ``.zst``) and ``*.parquet``."""
    return _is_trace_name(path.name)


def _is_trace_name(name: str) -> bool:
    name = name.lower()
    return name.endswith(TRACE_SUFFIXES) or name.endswith(PARQUET_SUFFIX)


def _unlisted(folder: object, error: OSError) -> ForensicsInputError:
    reason = error.strerror or type(error).__name__
    return ForensicsInputError(
        f"the folder {str(folder)!r} cannot be listed ({reason}), so the traces in it cannot be read; "
        "make it readable by this user (read and search permission), name the folders that are "
        "readable instead of their parent, or pass --skip-unreadable to read the rest (each skip is "
        "named in the evidence)"
    )


def _not_regular(path: Path) -> ForensicsInputError:
    try:
        mode = path.stat().st_mode
    except OSError:
        return ForensicsInputError(f"the trace path {str(path)!r} is a broken symlink (what it points at is "
                                   "gone); point it at a trace file or remove it")
    what = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
    return ForensicsInputError(
        f"the trace path {str(path)!r} is {what}, not a file that can be read twice (the loader reads "
        "a file more than once); copy what it carries into a file (e.g. `cat PIPE > traces.jsonl`) "
        "and name that file"
    )


def _unreadable(path: Path) -> str | None:
    """Why ``path`` cannot be opened (None when it can): opened once, without blocking, so a file
    this user cannot read is named before any work, not in a traceback halfway through the load."""
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)))
    except OSError as error:
        return error.strerror or type(error).__name__
    return None


def _unreadable_file(path: Path, reason: str) -> ForensicsInputError:
    return ForensicsInputError(
        f"the trace file {str(path)!r} cannot be read ({reason}); make it readable by this user, leave it "
        "out of the paths, or pass --skip-unreadable to read the rest (each skip is named in the evidence)"
    )


def _scan_directory(directory: Path, skipped: list[tuple[str, str]] | None = None) -> list[Path]:
    """The trace files under ``directory``, resolved (symlinks followed), in path order; with
    ``skipped``, folders that cannot be listed are added to it instead of refused."""
    manifest = directory / MANIFEST_NAME
    if manifest.is_file():
        # An ingest directory: its parts, not the manifest or stray temporary files.
        try:
            names = os.listdir(directory)
        except OSError as error:
            if skipped is None:
                raise _unlisted(directory, error) from None
            skipped.append((str(directory), error.strerror or type(error).__name__))
            return []
        parts = [directory / name for name in names if name.endswith(PARQUET_SUFFIX)]
        return sorted((p.resolve() for p in parts if p.is_file()), key=_order)
    found = _walk(directory, strict=True, resolved=True, skipped=skipped)
    return sorted((Path(p) for p in found if _is_trace_name(os.path.basename(p))), key=_order)


def _order(path: Path) -> tuple[str, ...]:
    """The order of :class:`~pathlib.Path` (by parts), as a key: sorting Paths themselves compares
    in Python, a tuple of strings in C."""
    return path.parts


def walk(directory: Path, *, strict: bool = False) -> list[Path]:
    """Every file under ``directory``, following symlinked folders; a folder reached twice (a
    symlink loop, or two links to one folder) is read once and the loop is reported on stderr.

    A folder that cannot be listed is never skipped silently: with ``strict`` it raises
    :class:`ForensicsInputError` naming it, and so does an entry with a trace file's name that is
    not a regular file (a FIFO, a socket, a broken symlink); otherwise each is a warning on
    stderr and the rest is returned.
    """
    return [Path(p) for p in _walk(directory, strict=strict, resolved=False)]


def _walk(directory: Path, *, strict: bool, resolved: bool, skipped: list[tuple[str, str]] | None = None) -> list[str]:
    """:func:`walk` as strings; with ``resolved``, each path with its symlinks resolved (a folder's
    real path is found once for all its files, not once per file); with ``skipped``, a folder that
    cannot be listed or examined is added to it (path, reason) instead of refused or warned about."""
    seen: set[tuple[int, int]] = set()
    found: list[str] = []
    pending = [os.fspath(directory)]
    while pending:
        root = pending.pop()
        try:
            info = os.stat(root)
            entries = list(os.scandir(root))
        except OSError as error:
            if skipped is not None:
                skipped.append((root, error.strerror or type(error).__name__))
                continue
            if strict:
                raise _unlisted(root, error) from None
            print(f"warning: {root} cannot be listed ({error.strerror}); the traces in it are not read",
                  file=sys.stderr)
            continue
        if (info.st_dev, info.st_ino) in seen:
            print(f"warning: {root} is a folder already read (a symlink loop or a second link); skipped",
                  file=sys.stderr)
            continue
        seen.add((info.st_dev, info.st_ino))
        real = os.path.realpath(root) if resolved else root
        folders = []
        for entry in entries:
            try:
                is_dir, is_file = entry.is_dir(), entry.is_file()  # both follow a symlink
            except OSError as error:  # e.g. a symlink into a folder this user cannot search
                if skipped is not None:
                    skipped.append((entry.path, error.strerror or type(error).__name__))
                    continue
                if strict:
                    raise _unlisted(entry.path, error) from None
                print(f"warning: {entry.path} cannot be examined ({error.strerror}); not read", file=sys.stderr)
                continue
            if is_dir:
                folders.append(entry.path)
            elif is_file:
                if not resolved:
                    found.append(entry.path)
                elif entry.is_symlink():
                    found.append(os.path.realpath(entry.path))
                else:
                    found.append(os.path.join(real, entry.name))
            elif _is_trace_name(entry.name):
                if strict:
                    raise _not_regular(Path(entry.path))
                print(f"warning: {entry.path} is not a regular file; not read", file=sys.stderr)
        pending.extend(sorted(folders, reverse=True))  # visited in name order, as os.walk does
    return found


def path_list(paths: object) -> list[str | os.PathLike[str]]:
    """``paths`` as a list: one path (text or a ``Path``) is that path, not its characters (the
    characters of "traces.jsonl" would start with a folder named "t", and of "/x" with the root);
    anything else that is not a list of paths is refused by name."""
    if isinstance(paths, (str, os.PathLike)):
        return [paths]
    if isinstance(paths, (bytes, bytearray)) or not isinstance(paths, Iterable):
        raise ForensicsInputError(f"trace paths must be a file, a directory, a glob or a list of them, not "
                                  f"{type(paths).__name__} {paths!r:.80}")
    out = list(paths)
    for item in out:
        if not isinstance(item, (str, os.PathLike)) or isinstance(os.fspath(item), bytes):
            raise ForensicsInputError(f"a trace path must be text or a path, not {type(item).__name__} {item!r:.80}")
    return out


def resolve_inputs(paths: Iterable[PathLike] | PathLike, *, skip_unreadable: bool = False) -> TraceInputs:
    """Resolve files, directories (recursively) and glob patterns into :class:`TraceInputs`.

    Raises :class:`ForensicsInputError` for a missing path, a glob that matches nothing, a
    directory holding no trace files, a folder that cannot be listed, a file that cannot be read,
    a path that is not a regular file (a FIFO, a socket), or an empty argument list. With
    ``skip_unreadable`` a folder that cannot be listed and a file that cannot be read are skipped
    and listed in ``unreadable`` instead; nothing readable left at all is still refused.
    """
    inputs = TraceInputs()
    skipped = inputs.unreadable if skip_unreadable else None
    given = [Path(p) for p in path_list(paths)]
    if not given:
        raise ForensicsInputError("no trace paths given; pass OTLP JSON-lines files, directories or globs")
    for raw in given:
        text = str(raw)
        if raw.exists():
            candidates = [raw]
        elif _GLOB_CHARS & set(text):
            candidates = [Path(m) for m in sorted(glob.glob(text, recursive=True))]
            if not candidates:
                raise ForensicsInputError(f"the pattern {text!r} matches no file; check the path and quoting")
        elif raw.is_symlink():
            raise _not_regular(raw)
        else:
            raise ForensicsInputError(
                f"the trace path {text!r} does not exist; pass a file, a directory or a glob of "
                "OTLP JSON-lines files"
            )
        for candidate in candidates:
            if candidate.is_dir():
                before = len(inputs.unreadable)
                found = _scan_directory(candidate, skipped)
                if not found and len(inputs.unreadable) > before:
                    continue  # nothing readable in it: named in unreadable, refused below if nothing else is
                if not found:
                    raise ForensicsInputError(
                        f"the directory {str(candidate)!r} holds no trace files (looked for "
                        f"{', '.join('*' + s for s in JSON_SUFFIXES)}, their .gz/.zst forms and "
                        "*.parquet, recursively); point at the exporter's output directory"
                    )
                for path in found:
                    inputs.add(path)
            elif candidate.is_file():
                inputs.add(candidate.resolve())
            elif raw.exists() or is_trace_file(candidate):  # named, or a glob's trace-named match
                raise _not_regular(candidate)
    for path in inputs.all_files:
        reason = _unreadable(path)
        if reason is None:
            continue
        if skipped is None:
            raise _unreadable_file(path, reason)
        skipped.append((str(path), reason))
        (inputs.json_files if path in inputs.json_files else inputs.parquet_files).remove(path)
    if skip_unreadable and not inputs.all_files:
        named = "; ".join(f"{p} ({why})" for p, why in inputs.unreadable[:5])
        raise ForensicsInputError(f"nothing readable among the trace paths: {len(inputs.unreadable)} skipped as "
                                  f"unreadable ({named}); make them readable by this user")
    inputs.json_files.sort(key=_order)
    inputs.parquet_files.sort(key=_order)
    return inputs
