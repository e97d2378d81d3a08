"""The sliding window: recent spans in a DuckDB database, read and judged exactly as ``forensics`` does.

New lines go through the loader's own reader (``read_json_lines``: the ``otlp_spans`` macro and
its line-by-line diagnosis), then into ``spans_loaded``; every pass drops copies, rebuilds the
``spans`` view, the delegation tables and the clock-skew evidence (``finish_load`` and
``gather``), and runs the questions. There is no second parser.

What leaves the window: a run (``run_id``) once its newest span is older than the window, so a
question never sees half a run (which would invent dropped constraints and gaps at the edge);
and, in a run that stays busy, spans older than twice the window, which bounds the database by
the window, not the history.

The window ends at the newest span read, bounded by the wall clock: a span that ends more than
``future_seconds`` after now (a writer's clock ahead, a corrupt time, the watcher's own clock
stepped back) is counted in ``Added.future`` and judged, but never moves the window's end, so
it cannot push every other span out; a span more than a window beyond that leaves at once
(counted in :attr:`WatchWindow.evicted_future`). Files that are old (a backlog, a copy read later)
keep their own time: the window then ends at their newest span.

A line DuckDB refuses although the line-by-line diagnosis accepts it (a foreign writer's lone
surrogate escape, say) does not sink the read: the read is retried chunk by chunk and the
refused chunk halved until the refused lines are found, which are skipped and named like any
bad line, by trace file and line, never by the temporary file DuckDB read.

A pass that adds no span and evicts none judges the same spans as the pass before, so it reuses
that pass's evidence and rows instead of computing them again: an idle watcher (on-call runs it
all day over files that are mostly quiet) costs a scan of the files per pass, not the questions.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from ...exceptions import ForensicsInputError
from .._evidence import Evidence, gather, rows
from .._loading import (
    MAX_LINE_BYTES,
    SPANS_LOADED,
    LoadReport,
    finish_load,
    install_macros,
    limit_memory,
    read_json_lines,
)
from .._peers import PeerOptions
from .._peers import install as install_peers
from .._questions import question
from ._follow import Chunk

__all__ = ["Added", "WatchBadLine", "FUTURE_SECONDS", "WatchWindow", "judge", "open_database"]

_STAGING = "watch_new_spans"
FUTURE_SECONDS = 300.0
"""How far after the wall clock a span may end and still be trusted as the newest (clocks of
the hosts writing traces differ by less)."""
_DUCKDB_LINE = re.compile(r"in line \d+: (.+?)\.?\s*(?:\)|$)")


@dataclass(frozen=True)
class WatchBadLine:
    """A line that is not OTLP TracesData: where it is and why (the loader's words)."""

    path: str
    line: int
    reason: str


@dataclass
class Added:
    """What one read into the window brought."""

    lines: int = 0
    spans: int = 0
    bad: list[WatchBadLine] = field(default_factory=list)
    future: int = 0
    """Spans read that end more than ``future_seconds`` after now (judged, never the window's end)."""


def open_database(database: Path | None, peer_options: PeerOptions | None = None) -> tuple[Path, duckdb.DuckDBPyConnection]:
    """A private temporary folder and a DuckDB connection to ``database`` (else one in the folder),
    under the forensics memory limit, spilling into the folder, with the span macros installed
    (and the span-format layer shaped by ``peer_options``: ``--tool-spans``, ``--result-shape``)."""
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
    if peer_options is not None:
        install_peers(con, peer_options)
    return tmp, con


def judge(con: duckdb.DuckDBPyConnection, report: LoadReport, names: list[str]) -> tuple[Evidence, dict[str, list[dict[str, Any]]]]:
    """The evidence over the loaded spans in ``con`` and the rows of questions ``names``, exactly
    as a report computes them (``finish_load`` must have run)."""
    evidence = gather(con, report)
    return evidence, {name: rows(con, question(name).sql) for name in names}


class WatchWindow:
    """Spans of the last ``window_seconds`` (by span time) in a DuckDB database.

    ``database`` keeps the window across restarts (beside a ``--state`` file); without it the
    database lives in a private temporary folder removed by :meth:`close`.
    """

    def __init__(self, window_seconds: float, database: Path | None = None,
                 max_line_bytes: int = MAX_LINE_BYTES, *, clock: Callable[[], float] = time.time,
                 future_seconds: float = FUTURE_SECONDS, peer_options: PeerOptions | None = None):
        self.window_ns = int(window_seconds * 1e9)
        self.max_line_bytes = max_line_bytes
        self.future_ns = int(future_seconds * 1e9)
        self._clock = clock
        self._tmp, self.con = open_database(database, peer_options)
        self.newest_ns = 0
        """The end of the newest span trusted as the window's end (see the module docstring)."""
        self.spans = 0
        self.evicted_future = 0
        """Of the spans the last :meth:`evict` dropped, those dated more than a window past the clock."""
        if self._exists():
            # A window kept by an older release has no exception-event column: spans in it have none.
            self.con.execute(f"ALTER TABLE {SPANS_LOADED} ADD COLUMN IF NOT EXISTS raised BOOLEAN DEFAULT false"
                             ).fetchall()
            row = self.con.execute(
                f"SELECT coalesce(max(end_time_unix_nano) FILTER (WHERE end_time_unix_nano <= $limit), 0), "
                f"count(*) FROM {SPANS_LOADED}", {"limit": self._limit()}).fetchall()[0]
            self.newest_ns, self.spans = int(row[0]), int(row[1])
        self._chunks = 0
        self.evidence: Evidence | None = None
        self._judged: tuple[list[str], dict[str, list[dict[str, Any]]]] | None = None
        """The last evaluation (question names, rows), while the spans it judged are unchanged."""

    def _limit(self) -> int:
        """The latest span end trusted now: the wall clock plus ``future_seconds``."""
        return int(self._clock() * 1e9) + self.future_ns

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
        try:
            self._ingest(chunks, added)
        except ForensicsInputError:  # a line DuckDB refuses: find it, skip it, read the rest
            for chunk in chunks:
                self._ingest_isolating(chunk, added)
        return added

    def _ingest(self, chunks: list[Chunk], added: Added) -> None:
        """Read ``chunks`` into the window in one read; :class:`ForensicsInputError` (naming the
        trace files, not the temporary ones) when DuckDB refuses a line the diagnosis accepts."""
        files: list[Path] = []
        try:
            for chunk in chunks:
                self._chunks += 1
                target = self._tmp / f"chunk-{self._chunks}.jsonl"
                target.write_bytes(chunk.data)
                files.append(target)
            try:
                report = read_json_lines(self.con, files, _STAGING, max_line_bytes=self.max_line_bytes)
            except ForensicsInputError as error:
                raise ForensicsInputError(_renamed(str(error), files, chunks)) from None
            by_file = {str(f): c for f, c in zip(files, chunks)}
            bad: list[WatchBadLine] = []
            for diagnosis in report.skipped:
                chunk = by_file[str(diagnosis.path)]
                bad += [WatchBadLine(chunk.path, chunk.first_line + b.number - 1, b.reason) for b in diagnosis.bad]
            self.con.execute(
                f"UPDATE {_STAGING} SET source_file = list_extract(CAST($sources AS VARCHAR[]), "
                "list_position(CAST($chunks AS VARCHAR[]), source_file))",
                {"sources": [c.path for c in chunks], "chunks": [str(f) for f in files]}).fetchall()
            if self._exists():
                self.con.execute(f"INSERT INTO {SPANS_LOADED} BY NAME SELECT * FROM {_STAGING}").fetchall()
            else:
                self.con.execute(f"CREATE TABLE {SPANS_LOADED} AS SELECT * FROM {_STAGING}").fetchall()
            row = self.con.execute(
                "SELECT count(*), coalesce(max(end_time_unix_nano) FILTER (WHERE end_time_unix_nano <= $limit), 0), "
                f"count(*) FILTER (WHERE end_time_unix_nano > $limit) FROM {_STAGING}",
                {"limit": self._limit()}).fetchall()[0]
            self.con.execute(f"DROP TABLE {_STAGING}").fetchall()
        finally:
            for target in files:
                target.unlink(missing_ok=True)
        added.spans += int(row[0])
        added.future += int(row[2])
        added.bad += bad
        self.newest_ns = max(self.newest_ns, int(row[1]))

    def _ingest_isolating(self, chunk: Chunk, added: Added) -> None:
        """Read ``chunk``; if DuckDB refuses it, halve it until each refused line stands alone."""
        try:
            self._ingest([chunk], added)
            return
        except ForensicsInputError as error:
            if chunk.lines <= 1:
                reason = _refusal(str(error))
                if reason is None:  # not about the line (a folder, the memory): the pass fails, retried
                    raise
                added.bad.append(WatchBadLine(chunk.path, chunk.first_line, reason))
                return
        lines = chunk.data.splitlines(keepends=True)
        half = len(lines) // 2
        for first, part in ((0, lines[:half]), (half, lines[half:])):
            self._ingest_isolating(Chunk(chunk.path, chunk.first_line + first, b"".join(part), len(part)), added)

    def evict(self) -> int:
        """Drop what has left the window (see the module docstring); return how many spans."""
        self.evicted_future = 0
        if not self._exists():
            return 0
        limit = self._limit()
        before, trusted, far = self.con.execute(
            f"SELECT count(*), max(end_time_unix_nano) FILTER (WHERE end_time_unix_nano <= $limit), "
            f"count(*) FILTER (WHERE end_time_unix_nano > $far) FROM {SPANS_LOADED}",
            {"limit": limit, "far": limit + self.window_ns}).fetchall()[0]
        if trusted is not None:
            self.newest_ns = int(trusted)  # the clock stepped back: no longer what it was
        end = int(trusted) if trusted is not None else min(self.newest_ns or limit, limit)
        cutoff = end - self.window_ns
        hard = end - 2 * self.window_ns
        judged, self._judged = self._judged, None  # kept only once the delete is known to remove nothing
        self.con.execute(f"""
            DELETE FROM {SPANS_LOADED}
            WHERE end_time_unix_nano < $hard OR end_time_unix_nano > $far
               OR run_id IN (SELECT run_id FROM {SPANS_LOADED} GROUP BY run_id
                             HAVING max(end_time_unix_nano) < $cutoff)
        """, {"hard": max(hard, 0), "cutoff": max(cutoff, 0), "far": limit + self.window_ns}).fetchall()
        self.spans = int(self.con.execute(f"SELECT count(*) FROM {SPANS_LOADED}").fetchall()[0][0])
        if self.spans == int(before):
            self._judged = judged
        self.evicted_future = int(far)
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


def _renamed(message: str, files: list[Path], chunks: list[Chunk]) -> str:
    """``message`` with each temporary chunk file named as the trace file and lines it holds."""
    for target, chunk in sorted(zip(files, chunks), key=lambda pair: -len(str(pair[0]))):
        last = chunk.first_line + chunk.lines - 1
        where = f"{chunk.path} (line {chunk.first_line:,})" if chunk.lines == 1 else \
            f"{chunk.path} (lines {chunk.first_line:,}-{last:,})"
        message = message.replace(str(target), where)
    return message


def _refusal(message: str) -> str | None:
    """What DuckDB said about one refused line, without the file it read; None when the error
    is not about the line's content."""
    found = _DUCKDB_LINE.search(message)
    if found:
        return f"DuckDB refuses it: {found.group(1)}"
    if "--max-line-bytes" in message:
        return "longer than --max-line-bytes"
    return None
