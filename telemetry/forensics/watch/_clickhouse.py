"""``watch --clickhouse``: each pass reads the ``--last`` DURATION of runs from ClickHouse ``otel_traces``.

Nothing is followed: a pass reads the runs with a tool span in the window (``now - window`` to
now), whole and with the spans that parent their tool spans, through the same
:func:`~telemetry.forensics.clickhouse.load_clickhouse` as ``forensics --clickhouse`` (the
``--max-spans`` guard and the row rules included), into a private DuckDB database; the watcher
then judges it and counts findings exactly as for files. A malformed row is skipped, named on
stderr and counted once while it stays in the window (as a bad line of a file is). The
connection is opened at the first pass and again after a pass that could not reach the server,
so a server that is down is a failed pass, counted and retried, never a crash.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ...exceptions import ClickHouseUnreachable
from .._evidence import Evidence
from .._loading import SPANS_BASE, SPANS_LOADED, LoadReport, SkippedRow
from .._peers import PeerOptions
from ..clickhouse._client import PASSWORD_ENV, ClickHouseConnection, connect, parse_url, require_driver
from ..clickhouse._select import ReadWindow
from ..clickhouse._source import load_clickhouse, plan_read
from ._window import judge, open_database

__all__ = ["ClickHouseSource", "ClickHouseWindow", "Fetched"]


@dataclass(frozen=True)
class ClickHouseSource:
    """Where ``watch --clickhouse`` reads (see ``outcome-telemetry watch --help``)."""

    url: str
    table: str | None = None
    service: str | None = None
    max_spans: int | None = None
    password_env: str = PASSWORD_ENV


@dataclass
class Fetched:
    """What one pass read from ClickHouse."""

    rows: int = 0
    """Rows fetched (every pass fetches its whole window)."""
    spans: int = 0
    """Spans kept after copies of one span were dropped."""
    new_bad: list[SkippedRow] = field(default_factory=list)
    """Malformed rows skipped that the previous pass did not skip."""
    new_bad_unnamed: int = 0
    """Of those, how many only the count knows (past the names one load keeps)."""


class ClickHouseWindow:
    """The runs of the last ``window_seconds`` in ClickHouse, read again at every pass.

    Checks the URL, table name and ``max_spans`` at construction (a bad one is refused at once);
    reaching the server waits for the first pass. Not thread-safe: one watcher drives it.
    """

    def __init__(self, source: ClickHouseSource, window_seconds: float,
                 now_ns: Callable[[], int] = time.time_ns, peer_options: PeerOptions | None = None):
        self.source = source
        self.window_ns = int(window_seconds * 1e9)
        self._now_ns = now_ns
        target = parse_url(source.url)
        self._read = plan_read(source.table, target.database, ReadWindow(0, 1, source.service), source.max_spans,
                               skip_bad_rows=True)
        require_driver(target)  # a missing extra is refused now, not at the first pass
        self._connection: ClickHouseConnection | None = None
        self._tmp, self.con = open_database(None, peer_options)
        self.label = target.label
        self.report: LoadReport | None = None
        self.evidence: Evidence | None = None
        self.spans = 0
        self.newest_ns = 0
        self._bad: set[SkippedRow] = set()
        self._bad_unnamed = 0

    def describe(self) -> str:
        """Where it reads, for the start-up line."""
        service = f", service {self.source.service!r}" if self.source.service is not None else ""
        return f"{self.label} table {self._read.database}.{self._read.table}{service}"

    def fetch(self) -> Fetched:
        """Read the window now (replacing the previous pass's spans); ClickHouse failures raise
        their named :class:`~telemetry.exceptions.ClickHouseInputError`."""
        if self._connection is None:
            self._connection = connect(self.source.url, password_env=self.source.password_env)
        now = self._now_ns()
        read = replace(self._read, window=ReadWindow(now - self.window_ns, now + 1, self.source.service))
        try:
            report = load_clickhouse(self.con, self._connection, read)
        except ClickHouseUnreachable:
            self._drop_connection()  # reconnect at the next pass
            raise
        self.report = report
        row = self.con.execute(f"SELECT count(*), coalesce(max(end_time_unix_nano), 0), "
                               f"(SELECT count(*) FROM {SPANS_LOADED}) FROM {SPANS_BASE}").fetchall()[0]
        self.spans, self.newest_ns = int(row[0]), int(row[1])
        named = set(report.skipped_rows)
        unnamed = report.skipped_row_count - len(named)
        fetched = Fetched(rows=int(row[2]) + report.skipped_row_count, spans=self.spans,
                          new_bad=sorted(named - self._bad, key=lambda r: (r.trace_id, r.span_id)),
                          new_bad_unnamed=max(unnamed - self._bad_unnamed, 0))
        self._bad, self._bad_unnamed = named, unnamed
        for bad in fetched.new_bad:
            print(f"warning: {self.label}: row trace {bad.trace_id!r} span {bad.span_id!r}: {bad.reason}; skipped",
                  file=sys.stderr)
        if fetched.new_bad_unnamed:
            print(f"warning: {self.label}: {fetched.new_bad_unnamed:,} more malformed row(s) skipped",
                  file=sys.stderr)
        return fetched

    def evaluate(self, names: list[str]) -> dict[str, list[dict[str, Any]]]:
        """Run ``names`` over the spans the last :meth:`fetch` read (nothing before the first)."""
        if self.report is None:
            return {name: [] for name in names}
        self.evidence, out = judge(self.con, self.report, names)
        return out

    def runs(self) -> set[str]:
        """The runs the last pass read."""
        if self.report is None:
            return set()
        return {str(r[0]) for r in self.con.execute(f"SELECT DISTINCT run_id FROM {SPANS_LOADED}").fetchall()}

    def checkpoint(self) -> None:
        """Nothing to make durable: the window is read again from ClickHouse after a restart."""

    def _drop_connection(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def close(self) -> None:
        self._drop_connection()
        self.con.close()
        shutil.rmtree(self._tmp, ignore_errors=True)
