"""Convert OTLP JSON lines to Parquet once, incrementally, so questions run fast at any size.

Each source file becomes one Parquet part (the normalized ``spans`` columns) in the output
directory, named from a hash of the source path. ``forensics-manifest.json`` records every
source's size and mtime; a later run skips sources that have not changed and rewrites the part
of one that has (an exporter still appending to its file). Parts and the manifest are written to
a temporary name and renamed, so an interrupted ingest leaves the directory consistent.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from ..exceptions import ForensicsInputError
from ._inputs import MANIFEST_NAME, PathLike, resolve_inputs
from ._loading import MAX_LINE_BYTES, LoadReport, Progress, limit_memory, load_to_parquet, memory_limit_bytes

MANIFEST_FORMAT = 1


@dataclass
class IngestResult:
    """What one ``ingest`` run did."""

    directory: Path
    ingested: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    spans: int = 0
    """Spans written by this run."""
    warnings: list[str] = field(default_factory=list)


def part_name(source: Path) -> str:
    """The Parquet part for one source file: stable across runs, unique per path."""
    return "part-" + hashlib.sha256(str(source).encode("utf-8")).hexdigest()[:20] + ".parquet"


def _read_manifest(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {"format": MANIFEST_FORMAT, "files": {}}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ForensicsInputError(
            f"the ingest manifest {path} is not valid JSON ({exc}); delete the directory's parts and "
            "manifest and ingest again"
        ) from None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT or not isinstance(data.get("files"), dict):
        raise ForensicsInputError(
            f"the ingest manifest {path} has an unknown format; ingest into a fresh directory"
        )
    return data


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def ingest(
    paths: Iterable[PathLike] | PathLike,
    to: PathLike,
    *,
    skip_bad_lines: bool = False,
    progress: Progress | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
    skip_unreadable: bool = False,
    memory_limit: int | None = None,
) -> IngestResult:
    """Ingest the JSON-lines files under ``paths`` into Parquet parts in ``to``.

    Files already ingested with the same size and mtime are skipped. Validation is the same as
    for a report (a truncated last line is dropped with a warning; other bad lines fail the file
    unless ``skip_bad_lines``). A folder or file that cannot be read is refused, or with
    ``skip_unreadable`` skipped and named in the result's warnings.
    """
    directory = Path(to).resolve()
    if directory.exists() and not directory.is_dir():
        raise ForensicsInputError(f"--to {str(directory)!r} is a file; name a directory for the Parquet parts")
    limit = memory_limit_bytes(memory_limit)
    inputs = resolve_inputs(paths, skip_unreadable=skip_unreadable)
    sources = [p for p in inputs.json_files if directory not in p.parents]
    if not sources:
        raise ForensicsInputError(
            "no JSON-lines trace files to ingest (Parquet inputs are already ingested); "
            "pass the exporter's files or directory"
        )
    directory.mkdir(parents=True, exist_ok=True)
    manifest_path = directory / MANIFEST_NAME
    manifest = _read_manifest(manifest_path)
    files: dict[str, Any] = manifest["files"]
    result = IngestResult(directory=directory)
    result.warnings += LoadReport(unreadable=list(inputs.unreadable)).warnings()
    with tempfile.TemporaryDirectory(prefix="outcome-telemetry-ingest-") as spill:
        for number, source in enumerate(sources, 1):
            stat = source.stat()
            entry = files.get(str(source))
            part = directory / part_name(source)
            if (entry and entry.get("size") == stat.st_size and entry.get("mtime_ns") == stat.st_mtime_ns
                    and part.is_file()):
                result.unchanged.append(source)
                continue
            if progress:
                progress(f"ingesting {number}/{len(sources)}: {source} ({stat.st_size / 1e6:,.1f} MB)")
            tmp = part.with_name(part.name + ".tmp")
            con = duckdb.connect(":memory:")
            try:
                # Held to the report's memory limit: without it a single large file took memory in
                # proportion to its size.
                limit_memory(con, Path(spill), limit)
                report = load_to_parquet(con, [source], tmp, skip_bad_lines=skip_bad_lines, progress=progress,
                                         max_line_bytes=max_line_bytes)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            finally:
                con.close()
            os.replace(tmp, part)
            files[str(source)] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "part": part.name,
                                  "spans": report.spans}
            _write_atomically(manifest_path, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
            result.ingested.append(source)
            result.spans += report.spans
            result.warnings += report.warnings()
    if not manifest_path.is_file():  # everything unchanged but the manifest was never written
        _write_atomically(manifest_path, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return result
