"""The sliding window: recent spans in a DuckDB database, read and judged exactly as ``forensics`` does.

New lines go through the loader's own reader (``read_json_lines``: the ``otlp_spans`` macro and
its line-by-line diagnosis), then into ``spans_loaded``; every pass drops copies, rebuilds the
``spans`` view, the delegation tables and the clock-skew evidence (``finish_load`` and
``gather``), and runs the questions. There is no second parser.

What leaves the window: a run (``run_id``) once its newest span is older than the window, so a
question never sees half a run (which would invent dropped constraints and gaps at the edge);
and, in a run that stays busy, spans older than twice the window, which bounds the database by
the window, not the history.

A pass that adds no span and evicts none judges the same spans as the pass before, so it reuses
that pass's evidence and rows instead of computing them again: an idle watcher (on-call runs it
all day over files that are mostly quiet) costs a scan of the files per pass, not the questions.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import duckdb

from ...exceptions import ForensicsInputError
from ..evidence import Evidence, gather, rows
from ..loading import (MAX_LINE_BYTES, SPANS_LOADED, LoadReport, finish_load, install_macros, limit_memory,
                       read_json_lines)
from ..questions import question
from .follow import Chunk

__all__ = ["Added", "BadLine", "Window", "judge", "open_database"]

_STAGING = "watch_new_spans"


@dataclass(frozen=True)
class BadLine:
    """A line that is not OTLP TracesData: where it is and why (the loader's words)."""

    path: str
    line: int
    reason: str


@dataclass
class Added:
    """What one read into the window brought."""

    lines: int = 0
    spans: int = 0
    bad: list[BadLine] = field(default_factory=list)


def open_database(database: Optional[Path]) -> tuple[Path, duckdb.DuckDBPyConnection]:
    """A private temporary folder and a DuckDB connection to ``database`` (else one in the folder),
    under the forensics memory limit, spilling into the folder, with the span macros installed."""
    tmp = Path(tempfile.mkdtemp(prefix="outcome-telemetry-watch-"))
    path = database if database is not None else tmp / "window.duckdb"
    try:
        con = duckdb.connect(str(path))
    except duckdb.Error as error:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ForensicsInputError(f"the window database {path} cannot be opened ({error}); delete it "
                                  "(the next start rebuilds the window from new lines)") from None
    limit_memory(con, tmp / "spill")
    install_macros(con)
    return tmp, con


def judge(con: duckdb.DuckDBPyConnection, report: LoadReport, names: list[str]) -> tuple[Evidence, dict[str, list[dict[str, Any]]]]:
    """The evidence over the loaded spans in ``con`` and the rows of questions ``names``, exactly
    as a report computes them (``finish_load`` must have run)."""
    evidence = gather(con, report)
    return evidence, {name: rows(con, question(name).sql) for name in names}


class Window:
    """Spans of the last ``window_seconds`` (by span time) in a DuckDB database.

    ``database`` keeps the window across restarts (beside a ``--state`` file); without it the
    database lives in a private temporary folder removed by :meth:`close`.
    """

    def __init__(self, window_seconds: float, database: Optional[Path] = None,
                 max_line_bytes: int = MAX_LINE_BYTES):
        self.window_ns = int(window_seconds * 1e9)
        self.max_line_bytes = max_line_bytes
        self._tmp, self.con = open_database(database)
        self.newest_ns = 0
        self.spans = 0
        if self._exists():
            row = self.con.execute(f"SELECT coalesce(max(end_time_unix_nano), 0), count(*) FROM {SPANS_LOADED}").fetchall()[0]
            self.newest_ns, self.spans = int(row[0]), int(row[1])
        self._chunks = 0
        self.evidence: Optional[Evidence] = None
        self._judged: Optional[tuple[list[str], dict[str, list[dict[str, Any]]]]] = None
        """The last evaluation (question names, rows), while the spans it judged are unchanged."""

    def _exists(self) -> bool:
        rows = self.con.execute("SELECT 1 FROM duckdb_tables() WHERE table_name = ? AND NOT temporary",
                                [SPANS_LOADED]).fetchall()
        return bool(rows)

    def add(self, chunks: list[Chunk]) -> Added:
        """Read ``chunks`` (complete lines) into the window; bad lines are skipped and returned."""
        added = Added(lines=sum(c.lines for c in chunks))
        if not chunks:
            return added
        self._judged = None  # before anything is written: a failure below still leaves it re-judged
        files: list[Path] = []
        for chunk in chunks:
            self._chunks += 1
            target = self._tmp / f"chunk-{self._chunks}.jsonl"
            target.write_bytes(chunk.data)
            files.append(target)
        try:
            report = read_json_lines(self.con, files, _STAGING, max_line_bytes=self.max_line_bytes)
            by_file = {str(f): c for f, c in zip(files, chunks)}
            for diagnosis in report.skipped:
                chunk = by_file[str(diagnosis.path)]
                added.bad += [BadLine(chunk.path, chunk.first_line + b.number - 1, b.reason) for b in diagnosis.bad]
            self.con.execute(
                f"UPDATE {_STAGING} SET source_file = list_extract(CAST($sources AS VARCHAR[]), "
                "list_position(CAST($chunks AS VARCHAR[]), source_file))",
                {"sources": [c.path for c in chunks], "chunks": [str(f) for f in files]}).fetchall()
            if self._exists():
                self.con.execute(f"INSERT INTO {SPANS_LOADED} BY NAME SELECT * FROM {_STAGING}").fetchall()
            else:
                self.con.execute(f"CREATE TABLE {SPANS_LOADED} AS SELECT * FROM {_STAGING}").fetchall()
            row = self.con.execute(f"SELECT count(*), coalesce(max(end_time_unix_nano), 0) FROM {_STAGING}").fetchall()[0]
            added.spans = int(row[0])
            self.newest_ns = max(self.newest_ns, int(row[1]))
            self.con.execute(f"DROP TABLE {_STAGING}").fetchall()
        finally:
            for target in files:
                target.unlink(missing_ok=True)
        return added

    def evict(self) -> int:
        """Drop what has left the window (see the module docstring); return how many spans."""
        if not self._exists() or not self.newest_ns:
            return 0
        cutoff = self.newest_ns - self.window_ns
        hard = self.newest_ns - 2 * self.window_ns
        before = self.con.execute(f"SELECT count(*) FROM {SPANS_LOADED}").fetchall()[0][0]
        judged, self._judged = self._judged, None  # kept only once the delete is known to remove nothing
        self.con.execute(f"""
            DELETE FROM {SPANS_LOADED}
            WHERE end_time_unix_nano < $hard
               OR run_id IN (SELECT run_id FROM {SPANS_LOADED} GROUP BY run_id
                             HAVING max(end_time_unix_nano) < $cutoff)
        """, {"hard": max(hard, 0), "cutoff": max(cutoff, 0)}).fetchall()
        self.spans = int(self.con.execute(f"SELECT count(*) FROM {SPANS_LOADED}").fetchall()[0][0])
        if self.spans == int(before):
            self._judged = judged
        return int(before) - self.spans

    def runs(self) -> set[str]:
        """The runs with a span in the window."""
        if not self._exists():
            return set()
        return {str(r[0]) for r in self.con.execute(f"SELECT DISTINCT run_id FROM {SPANS_LOADED}").fetchall()}

    def evaluate(self, names: list[str]) -> dict[str, list[dict[str, Any]]]:
        """Run ``names`` over the window, after the same deduplication and evidence as ``forensics``
        (or return the last pass's rows when the window has not changed since: see the module docstring)."""
        if self._judged is not None and self._judged[0] == names:
            return dict(self._judged[1])
        if not self._exists():
            return {name: [] for name in names}
        report = LoadReport(files=0, spans=self.spans)
        started = time.perf_counter()
        finish_load(self.con, report, is_table=True)
        self.evidence, out = judge(self.con, report, names)
        self.spans = self.evidence.spans_kept
        report.seconds = time.perf_counter() - started
        self._judged = (list(names), out)
        return dict(out)

    def checkpoint(self) -> None:
        """Make the window durable before the state file says its lines were read."""
        self.con.execute("CHECKPOINT").fetchall()

    def close(self) -> None:
        self.con.close()
        shutil.rmtree(self._tmp, ignore_errors=True)
