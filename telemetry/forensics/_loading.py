"""Load trace files into a DuckDB connection as the ``spans`` relation the questions read.

JSON lines are parsed once, by the macros in ``queries/spans.sql``, into a temporary table; Parquet
parts written by ``ingest`` already hold those columns and are attached as a view. File lists are
always bound as parameters (or passed to DuckDB's Python relational API), never spliced into SQL.

Bad input: every plain file's tail is checked first (cheap); a partial last line is dropped and
counted. If DuckDB still refuses a file, :func:`~telemetry.forensics._validation.diagnose` names the
line and reason; the load fails unless ``skip_bad_lines``, which reads a repaired copy and records
what was skipped.
"""

from __future__ import annotations

import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from ..exceptions import ForensicsInputError
from ..runtime._resources import data_file
from . import _peers as peers
from ._dedup import Duplicates, deduplicate
from ._inputs import TraceInputs
from ._validation import (
    EXPECTED,
    Diagnosis,
    copy_prefix,
    describe,
    diagnose,
    out_of_memory,
    refusal_hint,
    truncated_tail,
    zstd_truncated,
)

__all__ = [
    "LINE_MEMORY_FACTOR", "MAX_LINE_BYTES", "MEMORY_LIMIT", "PARQUET_ROW_GROUP", "SPANS", "SPANS_BASE", "SPANS_LOADED",
    "LoadReport", "Progress", "SkippedRow", "finish_load", "install_macros", "limit_memory", "load", "load_to_parquet",
    "read_json_lines", "stderr_progress",
]

Progress = Callable[[str], None]
"""Receives one human-readable progress line (the CLI prints them to stderr)."""

SPANS = "spans"
SPANS_LOADED = "spans_loaded"
"""Every span read, copies included: a table from JSON lines (or from rows of a source other than
files, ClickHouse, before it calls :func:`finish_load`), or a view over Parquet parts."""
SPANS_BASE = "spans_base"
"""One row per (trace id, span id) (see :mod:`._dedup`); ``spans`` is a view over it."""
MAX_LINE_BYTES = 16 * 1024 * 1024
"""The default longest line read (``--max-line-bytes``); DuckDB refuses longer ones."""
MEMORY_LIMIT = "600MB"
"""DuckDB's memory limit for a report and for ``ingest``: what does not fit is spilled to a
temporary folder, so memory stays flat however many spans are read."""
PARQUET_ROW_GROUP = 16_384
"""Spans per Parquet row group written by ``ingest``: each thread buffers one row group, and at
DuckDB's default (122,880) the fat span rows do not fit :data:`MEMORY_LIMIT`."""
_FILE_IN_ERROR = re.compile(r'in file "([^"]+)"')


@dataclass(frozen=True)
class SkippedRow:
    """A row of a table source (ClickHouse) skipped as malformed: its ids as stored, and why."""

    trace_id: str
    span_id: str
    reason: str


@dataclass
class LoadReport:
    """What loading found besides spans: warnings to show and lines skipped."""

    files: int = 0
    spans: int = 0
    seconds: float = 0.0
    truncated: list[Path] = field(default_factory=list)
    """Files whose partial last line was dropped."""
    skipped: list[Diagnosis] = field(default_factory=list)
    """Files with bad lines skipped under ``skip_bad_lines``."""
    duplicates: Duplicates = field(default_factory=lambda: Duplicates())
    """Copies of one span (the same trace id and span id) found and dropped."""
    source: str | None = None
    """Where the spans came from when they are not files (e.g. a ClickHouse table and window)."""
    skipped_rows: list[SkippedRow] = field(default_factory=list)
    """Malformed rows of a table source skipped (the first few; ``skipped_row_count`` counts all)."""
    skipped_row_count: int = 0
    parent_spans: int | None = None
    """Spans read only because they parent a tool span, when the source reads no other non-tool
    spans (ClickHouse); None when every span of the input was read (files)."""
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    """(path, reason) of each folder or file skipped as unreadable under ``skip_unreadable``."""

    @property
    def skipped_lines(self) -> int:
        return sum(len(d.bad) for d in self.skipped)

    def warnings(self) -> list[str]:
        """One line per thing the user should know about the input."""
        out: list[str] = list(self.duplicates.warnings())
        if self.truncated:
            names = ", ".join(str(p) for p in self.truncated[:3])
            out.append(
                f"skipped a truncated last line in {len(self.truncated)} file(s) ({names}); "
                "a writer was probably stopped mid-write"
            )
        for diagnosis in self.skipped:
            where = ", ".join(str(b.number) for b in diagnosis.bad[:10])
            more = " ..." if len(diagnosis.bad) > 10 else ""
            out.append(f"skipped {len(diagnosis.bad)} bad line(s) in {diagnosis.path}: lines {where}{more}")
        if self.unreadable:
            named = "; ".join(f"{p} ({why})" for p, why in self.unreadable[:10])
            more = " ..." if len(self.unreadable) > 10 else ""
            out.append(f"skipped {len(self.unreadable)} unreadable folder(s) or file(s) (--skip-unreadable): "
                       f"{named}{more}; the spans in them are not in the answer")
        if self.skipped_row_count:
            named = ", ".join(f"trace {r.trace_id!r} span {r.span_id!r} ({r.reason})" for r in self.skipped_rows[:3])
            more = " ..." if self.skipped_row_count > 3 else ""
            out.append(f"skipped {self.skipped_row_count:,} malformed row(s) from {self.source}: {named}{more}")
        if self.source and not self.spans:
            out.append(f"no tool spans in {self.source}, so every question finds nothing; check the window, "
                       "the service name and that the Collector writes this table")
        if self.files and not self.spans:
            out.append(f"no spans in {self.files} file(s), so every question finds nothing; check that "
                       "these are the exporter's trace files and that it has flushed them")
        return out


_AFTER_BASE = "-- @after spans_base"


def _spans_sql() -> tuple[str, str]:
    """``spans.sql`` split at its marker: (macros, the view defined once ``spans_base`` exists)."""
    text = data_file("queries", "spans.sql").read_text(encoding="utf-8")
    macros, _, view = text.partition(_AFTER_BASE)
    return macros, view


LINE_MEMORY_FACTOR = 20
"""DuckDB's memory limit must be about this many times the longest line to parse it (the JSON
reader holds the line, its parse and the rows made from it at once); the advice for long lines says so."""


def memory_limit_bytes(value: object) -> int | None:
    """A ``memory_limit`` option checked: None (the default, :data:`MEMORY_LIMIT`) or bytes, at least 64 MiB."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 64 * 2**20:
        raise ForensicsInputError(f"the memory limit must be a number of bytes of at least 64M (K/M/G suffixes on "
                                  f"the command line), not {value!r}")
    return value


def limit_memory(con: duckdb.DuckDBPyConnection, spill: Path, memory_limit: int | None = None) -> None:
    """Hold ``con`` to ``memory_limit`` bytes (default :data:`MEMORY_LIMIT`), spilling to the folder
    ``spill`` (a private temporary one)."""
    limit = MEMORY_LIMIT if memory_limit is None else f"{int(memory_limit)}B"  # a constant or an int
    con.execute(f"SET memory_limit = '{limit}'").fetchall()
    con.execute("SET temp_directory = ?", [str(spill)]).fetchall()


def install_macros(con: duckdb.DuckDBPyConnection) -> None:
    """Define the ``otlp_spans`` macro (and its helpers) from the shipped ``spans.sql``."""
    con.execute("SET enable_progress_bar = false").fetchall()  # progress goes through Progress
    # Span order is irrelevant (every question sorts); without it DuckDB loads in parallel, much
    # faster on a large input.
    con.execute("SET preserve_insertion_order = false").fetchall()
    con.execute(_spans_sql()[0]).fetchall()
    peers.install(con)  # the span-format layer's functions, unless this load's options installed them


class _ProgressTicker:
    """Report DuckDB's progress on the running query every second, from a side thread."""

    def __init__(self, con: duckdb.DuckDBPyConnection, label: str, progress: Progress | None):
        self._con, self._label, self._progress = con, label, progress
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _ProgressTicker:
        if self._progress is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        assert self._progress is not None
        while not self._stop.wait(1.0):
            try:
                done = self._con.query_progress()
            except Exception:  # progress is a nicety; never let it break a load
                return
            if done >= 0:
                self._progress(f"{self._label}: {done:.0f}%")


class _JsonLoader:
    """One JSON-lines load: repaired copies live in a private temporary directory."""

    def __init__(self, con: duckdb.DuckDBPyConnection, skip_bad_lines: bool, progress: Progress | None,
                 max_line_bytes: int = MAX_LINE_BYTES, *, refuse_all_bad: bool = True):
        self.con = con
        self.skip_bad_lines = skip_bad_lines
        self.refuse_all_bad = refuse_all_bad
        self.max_line_bytes = max_line_bytes
        self._sizes: dict[Path, int] = {}  # one size per file for the whole load
        self.progress = progress
        self.report = LoadReport()
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._read: dict[Path, Path] = {}  # source file -> the file DuckDB reads
        self._cut: set[Path] = set()  # sources read through a copy without their partial last line
        self._copies = 0

    def _scratch(self, source: Path) -> Path:
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="outcome-telemetry-forensics-")
        # Repaired copies are plain JSON lines whatever the source's compression.
        self._copies += 1
        return Path(self._tmp.name) / f"{self._copies}-repaired.jsonl"

    def _repair(self, diagnosis: Diagnosis) -> None:
        target = self._scratch(diagnosis.path)
        diagnose(diagnosis.path, keep=target, max_line_bytes=self.max_line_bytes,
                 size=self._sizes.get(diagnosis.path))
        self._read[diagnosis.path] = target

    def snapshot(self, files: list[Path]) -> None:
        """Take the one size per file this load reads (appends after it are left for the next load)."""
        for source in files:
            self._sizes[source] = source.stat().st_size

    @property
    def sizes(self) -> dict[Path, int]:
        return dict(self._sizes)

    def _grew(self, source: Path) -> bool:
        """True when a plain file is longer now than when this load began (still being written)."""
        if source.name.lower().endswith((".gz", ".zst")):
            return False
        try:
            return source.stat().st_size != self._sizes[source]
        except OSError:
            return False

    def _read_snapshot(self, source: Path) -> None:
        """Read a growing file through a copy of what it held when the load began (complete lines)."""
        size = self._sizes[source]
        cut = truncated_tail(source, size)
        target = self._scratch(source)
        copy_prefix(source, target, size - cut)
        self._read[source] = target
        if cut:
            self._cut.add(source)
            if source not in self.report.truncated:
                self.report.truncated.append(source)

    def _handle_refusal(self, error: duckdb.Error, attempts: int) -> None:
        match = _FILE_IN_ERROR.search(str(error))
        by_read = {str(v): k for k, v in self._read.items()}
        source = by_read.get(match.group(1)) if match else None
        if source is None:  # e.g. "Unexpected end of GZIP stream: PATH": the longest path it names
            named = [read for read in by_read if read in str(error)]
            source = by_read[max(named, key=len)] if named else None
        if source is None:  # e.g. "Failed to decode gzip stream": find the file by walking the compressed ones
            source = next((src for src, read in self._read.items() if read == src
                           and src.name.lower().endswith((".gz", ".zst")) and diagnose(src).bad), None)
        if source is None or attempts > 2 * len(self._read) + 1:
            raise ForensicsInputError(f"DuckDB could not read the traces ({error}); {EXPECTED}") from None
        if self._read[source] == source and self._grew(source):  # written to while we read it
            self._read_snapshot(source)
            return
        if self._read[source] != source and source not in self._cut:  # a repaired copy was refused
            raise ForensicsInputError(f"{source}: still unreadable after repair ({error}); {EXPECTED}") from None
        diagnosis = diagnose(source, max_line_bytes=self.max_line_bytes, size=self._sizes.get(source))
        if not diagnosis.bad and "maximum_object_size" in str(error):
            raise ForensicsInputError(
                f"{source}: a line is longer than --max-line-bytes ({self.max_line_bytes:,} bytes); pass a "
                f"larger --max-line-bytes to read it, with a --memory-limit of {LINE_MEMORY_FACTOR} times it") from None
        if source in self._cut:  # its partial last line is already counted as truncated; judge the rest
            self._cut.discard(source)
            if diagnosis.truncated_last:
                diagnosis.bad.pop()
                diagnosis.truncated_last = False
        if not diagnosis.bad:
            raise ForensicsInputError(f"{source}: DuckDB refused it ({error}); {EXPECTED}") from None
        if diagnosis.only_truncated:
            self.report.truncated.append(source)
        elif not self.skip_bad_lines or (diagnosis.good_lines == 0 and self.refuse_all_bad):
            raise ForensicsInputError(describe(diagnosis) + refusal_hint(diagnosis, self.skip_bad_lines)) from None
        else:
            self.report.skipped.append(diagnosis)
        self._repair(diagnosis)

    def _cut_zstd(self, source: Path) -> None:
        """Read a zstd file that ends mid-frame through a copy of the lines it still holds."""
        target = self._scratch(source)
        try:
            diagnosis = diagnose(source, keep=target, max_line_bytes=self.max_line_bytes)
        except ForensicsInputError:  # no zstd command to recover the complete lines with
            raise ForensicsInputError(
                f"{source}: this zstd file ends mid-frame (it was cut short, for example copied while "
                "being written); install the zstd command, or run `zstd -dc FILE > FILE.jsonl` (it "
                "recovers what it can) and read that"
            ) from None
        if diagnosis.truncated_last:
            diagnosis.bad.pop()
            diagnosis.truncated_last = False
        if diagnosis.bad and not self.skip_bad_lines:
            raise ForensicsInputError(describe(diagnosis) + " (pass --skip-bad-lines to read the rest)")
        if diagnosis.bad:
            self.report.skipped.append(diagnosis)
        self.report.truncated.append(source)
        self._read[source] = target

    def _select(self) -> tuple[str, dict[str, object]]:
        """The span query with its bound parameters; repaired copies report their source's name."""
        fixed = [(str(src), str(read)) for src, read in self._read.items() if read != src]
        sql = (
            "SELECT * REPLACE (coalesce(list_extract(CAST($sources AS VARCHAR[]), "
            "list_position(CAST($fixed AS VARCHAR[]), source_file)), source_file) AS source_file) "
            "FROM otlp_spans($paths, max_line_bytes := $max_line_bytes)"
        )
        return sql, {"paths": [str(p) for p in self._read.values()], "max_line_bytes": self.max_line_bytes,
                     "sources": [src for src, _ in fixed], "fixed": [read for _, read in fixed]}

    def load(self, files: list[Path], parquet: Path | None = None, table: str = SPANS_LOADED) -> LoadReport:
        """Read ``files`` into ``table``, or stream them into the Parquet file ``parquet``."""
        started = time.perf_counter()
        self.report.files = len(files)
        for source in files:
            self._sizes.setdefault(source, source.stat().st_size)
            self._read[source] = source
            if truncated_tail(source, self._sizes[source]):
                self._read_snapshot(source)
            elif source.name.lower().endswith(".zst") and zstd_truncated(source):
                self._cut_zstd(source)
        attempts = 0
        try:
            while True:
                attempts += 1
                sql, params = self._select()
                try:
                    with _ProgressTicker(self.con, "reading traces", self.progress):
                        if parquet is None:
                            self.con.execute(f"CREATE OR REPLACE TABLE {table} AS {sql}", params).fetchall()
                        else:  # streamed: the spans never sit in memory all at once
                            self.con.sql(sql, params=params).write_parquet(
                                str(parquet), compression="zstd", row_group_size=PARQUET_ROW_GROUP)
                    grown = [src for src, read in self._read.items() if read == src and self._grew(src)]
                    if not grown:
                        break
                    for source in grown:  # read what they held when the load began, and again
                        self._read_snapshot(source)
                except (duckdb.InvalidInputException, duckdb.ConversionException, duckdb.IOException) as error:
                    self._handle_refusal(error, attempts)
                except duckdb.OutOfMemoryException as error:  # e.g. a --max-line-bytes too large to fit
                    limit = str(self.con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])
                    raise out_of_memory(error, self.max_line_bytes, limit, MAX_LINE_BYTES,
                                        LINE_MEMORY_FACTOR) from None
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()
        if parquet is None:
            row = self.con.execute(f"SELECT count(*) FROM {table}").fetchall()[0]
        else:
            row = self.con.execute("SELECT count(*) FROM read_parquet($p)", {"p": str(parquet)}).fetchall()[0]
        self.report.spans = int(row[0])
        self.report.seconds = time.perf_counter() - started
        return self.report


def load_to_parquet(
    con: duckdb.DuckDBPyConnection,
    files: list[Path],
    target: Path,
    *,
    skip_bad_lines: bool = False,
    progress: Progress | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> LoadReport:
    """Validate ``files`` like :func:`load` and stream their spans into the Parquet file ``target``."""
    install_macros(con)
    return _JsonLoader(con, skip_bad_lines, progress, max_line_bytes).load(files, parquet=target)


_PART_COLUMNS = frozenset({"run_id", "trace_id", "span_id", "start_time_unix_nano", "attribute_keys",
                           "attribute_values", "attribute_arrays", "tool_kind", "outcome"})
"""Columns every Parquet part written by ``ingest`` has (a sample of the ``spans`` columns)."""


def _check_parts(con: duckdb.DuckDBPyConnection, parquet: list[str]) -> None:
    """Refuse Parquet files that are not ``ingest`` parts (damaged, or another table) by name."""
    advice = ("Parquet inputs must be parts written by `outcome-telemetry forensics ingest`; leave the "
              "file out, or ingest the JSON lines again into a fresh directory")
    try:
        rows = con.execute("SELECT file_name, list(name) FROM parquet_schema($files) GROUP BY file_name",
                           {"files": parquet}).fetchall()
    except duckdb.Error as error:
        raise ForensicsInputError(f"a Parquet input could not be read ({error}); {advice}") from None
    for name, columns in sorted(rows):
        missing = sorted(_PART_COLUMNS - set(columns))
        if missing:
            raise ForensicsInputError(f"{name}: not a forensics Parquet part (no {', '.join(missing)} "
                                      f"column); {advice}")


def _parts(con: duckdb.DuckDBPyConnection, parquet: list[str]) -> duckdb.DuckDBPyRelation:
    """The Parquet parts as one relation with the loader's columns: parts ``ingest`` wrote before
    the ``raised`` column existed (exception events) read as having none."""
    parts = con.read_parquet(parquet, union_by_name=True)
    return parts if "raised" in parts.columns else parts.project("*, false AS raised")


def load(
    con: duckdb.DuckDBPyConnection,
    inputs: TraceInputs,
    *,
    skip_bad_lines: bool = False,
    progress: Progress | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> LoadReport:
    """Make ``spans`` in ``con`` from ``inputs`` and return what loading found.

    JSON lines become a table in ``con``'s database; Parquet parts alone become a view (nothing is
    copied); both together are combined into the table. Copies of one span are then counted and
    dropped (:func:`~telemetry.forensics._dedup.deduplicate`), whatever the source.
    """
    install_macros(con)
    report = LoadReport()
    parquet = [str(p) for p in inputs.parquet_files]
    if parquet:
        _check_parts(con, parquet)
    if inputs.json_files:
        loader = _JsonLoader(con, skip_bad_lines, progress, max_line_bytes)
        loader.snapshot(inputs.json_files)
        if progress:
            total = sum(loader.sizes.values())
            progress(f"reading {len(inputs.json_files)} JSON-lines file(s), {total / 1e6:,.1f} MB")
        report = loader.load(inputs.json_files)
        if parquet:
            _parts(con, parquet).insert_into(SPANS_LOADED)
    elif parquet:
        started = time.perf_counter()
        _parts(con, parquet).create_view(SPANS_LOADED, replace=True)
        report.files = len(parquet)
        report.seconds = time.perf_counter() - started
    else:
        raise ForensicsInputError("no trace files to read")
    if parquet:
        row = con.execute(f"SELECT count(*) FROM {SPANS_LOADED}").fetchall()[0]
        report.spans = int(row[0])
        report.files = len(inputs.json_files) + len(parquet)
    if progress:  # one line per step, so a slow step shows which one it is
        progress(f"read {report.spans:,} spans from {report.files} file(s) in {report.seconds:.1f} s; "
                 "looking for copies of one span")
    started = time.perf_counter()
    finish_load(con, report, is_table=bool(inputs.json_files))
    if progress:
        progress(f"loaded {report.spans:,} spans from {report.files} file(s) in "
                 f"{report.seconds + time.perf_counter() - started:.1f} s")
    report.unreadable = list(inputs.unreadable)
    return report


def read_json_lines(
    con: duckdb.DuckDBPyConnection,
    files: list[Path],
    table: str,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> LoadReport:
    """Validate ``files`` like :func:`load` with ``skip_bad_lines`` and read their spans into ``table``.

    For readers of complete lines taken from growing files (``watch``): a file of bad lines
    only is skipped like any bad line rather than refused, and ``table`` is a name the caller
    owns (never user input). ``install_macros`` must have run on ``con``.
    """
    loader = _JsonLoader(con, True, None, max_line_bytes, refuse_all_bad=False)
    loader.snapshot(files)
    return loader.load(files, table=table)


def finish_load(con: duckdb.DuckDBPyConnection, report: LoadReport, *, is_table: bool = True) -> LoadReport:
    """After ``spans_loaded`` holds the spans: drop copies (into ``report.duplicates``) and define
    ``spans`` and the relations built on it (``queries/spans.sql`` after its marker)."""
    report.duplicates = deduplicate(con, SPANS_LOADED, SPANS_BASE, is_table=is_table)
    con.execute(_spans_sql()[1]).fetchall()
    return report


def stderr_progress(message: str) -> None:
    """The CLI's progress sink: one line on stderr."""
    print(message, file=sys.stderr, flush=True)
