"""Turn what the user typed (files, directories, globs) into the trace files to read.

JSON-lines files and Parquet parts are told apart here, so the loader never guesses. A
directory written by ``ingest`` is recognised by its manifest and stands for its Parquet parts.
"""

from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Union

from ..exceptions import ForensicsInputError

__all__ = [
    "COMPRESSION_SUFFIXES", "JSON_SUFFIXES", "MANIFEST_NAME", "PARQUET_SUFFIX", "TRACE_SUFFIXES", "PathLike",
    "TraceInputs", "is_trace_file", "resolve_inputs", "walk",
]

PathLike = Union[str, Path]

MANIFEST_NAME = "forensics-manifest.json"
"""The file ``ingest`` keeps in its output directory (see :mod:`telemetry.forensics.ingest`)."""

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

    def add(self, path: Path) -> None:
        """Classify one existing file by its name (anything not Parquet is read as JSON lines)."""
        target = self.parquet_files if path.name.endswith(PARQUET_SUFFIX) else self.json_files
        if path not in target:
            target.append(path)

    @property
    def all_files(self) -> list[Path]:
        return self.json_files + self.parquet_files


def is_trace_file(path: Path) -> bool:
    """True for the names a directory scan picks up: ``*.jsonl``/``*.json``/``*.ndjson`` (plain,
    ``.gz`` or ``.zst``) and ``*.parquet``."""
    name = path.name.lower()
    return name.endswith(TRACE_SUFFIXES) or name.endswith(PARQUET_SUFFIX)


def _scan_directory(directory: Path) -> list[Path]:
    manifest = directory / MANIFEST_NAME
    if manifest.is_file():
        # An ingest directory: its parts, not the manifest or stray temporary files.
        return sorted(p for p in directory.glob("*" + PARQUET_SUFFIX) if p.is_file())
    return sorted(p for p in walk(directory) if is_trace_file(p))


def walk(directory: Path) -> list[Path]:
    """Every file under ``directory``, following symlinked folders; a folder reached twice (a
    symlink loop, or two links to one folder) is read once and the loop is reported on stderr."""
    seen: set[tuple[int, int]] = set()
    found: list[Path] = []
    for root, dirs, files in os.walk(directory, followlinks=True):
        info = os.stat(root)
        if (info.st_dev, info.st_ino) in seen:
            print(f"warning: {root} is a folder already read (a symlink loop or a second link); skipped",
                  file=sys.stderr)
            dirs[:] = []
            continue
        seen.add((info.st_dev, info.st_ino))
        found += [Path(root) / name for name in files if (Path(root) / name).is_file()]
    return found


def resolve_inputs(paths: Iterable[PathLike]) -> TraceInputs:
    """Resolve files, directories (recursively) and glob patterns into :class:`TraceInputs`.

    Raises :class:`ForensicsInputError` for a missing path, a glob that matches nothing, a
    directory holding no trace files, or an empty argument list.
    """
    inputs = TraceInputs()
    given = [Path(p) if not isinstance(p, Path) else p for p in paths]
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
        else:
            raise ForensicsInputError(
                f"the trace path {text!r} does not exist; pass a file, a directory or a glob of "
                "OTLP JSON-lines files"
            )
        for candidate in candidates:
            if candidate.is_dir():
                found = _scan_directory(candidate)
                if not found:
                    raise ForensicsInputError(
                        f"the directory {str(candidate)!r} holds no trace files (looked for "
                        f"{', '.join('*' + s for s in JSON_SUFFIXES)}, their .gz/.zst forms and "
                        "*.parquet, recursively); point at the exporter's output directory"
                    )
                for path in found:
                    inputs.add(path.resolve())
            elif candidate.is_file():
                inputs.add(candidate.resolve())
    inputs.json_files.sort()
    inputs.parquet_files.sort()
    return inputs
