"""The notebook-facing API: open trace files once, then ask any question of them.

    >>> from telemetry.forensics import open_traces
    >>> with open_traces(["traces/"]) as traces:          # doctest: +SKIP
    ...     rows = traces.run("constraint_loss_by_hop")
    ...     rel = traces.relation("divergent_reads")      # a DuckDB relation, e.g. rel.df()
    ...     print(traces.report().render())
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any, Iterable, Optional

import duckdb

from .inputs import PathLike, resolve_inputs
from .loading import SPANS, LoadReport, Progress, load
from .questions import Question, all_questions, question
from .report import Report, Section

EXAMPLES_PER_SECTION = 3


class Forensics:
    """Trace files loaded into a private DuckDB connection as the ``spans`` relation."""

    def __init__(self, con: duckdb.DuckDBPyConnection, load_report: LoadReport, paths: list[str]):
        self.connection = con
        """The DuckDB connection; ``spans`` and the ``attr``/``attr_list`` macros are defined in it."""
        self.load_report = load_report
        self.paths = paths

    def __enter__(self) -> "Forensics":
        return self

    def __exit__(
        self, kind: Optional[type[BaseException]], value: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the DuckDB connection (the source files are never modified)."""
        self.connection.close()

    @property
    def questions(self) -> list[Question]:
        return all_questions()

    def spans(self) -> duckdb.DuckDBPyRelation:
        """The normalized spans (columns documented in ``queries/spans.sql``)."""
        return self.connection.table(SPANS)

    def relation(self, name: str) -> duckdb.DuckDBPyRelation:
        """Question ``name`` as a lazy DuckDB relation (``.df()``, ``.fetchall()``, further SQL)."""
        return self.connection.sql(question(name).sql)

    def run(self, name: str) -> list[dict[str, Any]]:
        """Question ``name``'s rows as dictionaries, in the question's order (worst first)."""
        result = self.connection.execute(question(name).sql)
        columns = [d[0] for d in result.description]
        return [dict(zip(columns, row)) for row in result.fetchall()]

    def columns(self, name: str) -> list[str]:
        """Question ``name``'s column names."""
        return list(self.relation(name).columns)

    def report(self, progress: Optional[Progress] = None) -> Report:
        """Run every question and summarise: counts, worst examples, the command for detail."""
        sections = []
        for q in all_questions():
            started = time.perf_counter()
            rows = self.run(q.name)
            if progress:
                progress(f"{q.name}: {len(rows)} row(s) in {time.perf_counter() - started:.2f} s")
            sections.append(
                Section(question=q, count=len(rows), examples=rows[:EXAMPLES_PER_SECTION], columns=self.columns(q.name))
            )
        return Report(sections=sections, load=self.load_report, paths=self.paths)


def open_traces(
    paths: Iterable[PathLike],
    *,
    skip_bad_lines: bool = False,
    progress: Optional[Progress] = None,
    threads: Optional[int] = None,
) -> Forensics:
    """Load OTLP JSON-lines files, directories, globs or ``ingest`` Parquet directories.

    Raises :class:`~telemetry.exceptions.ForensicsInputError` for missing paths, empty
    directories and input that is not OTLP (naming the file and line). A truncated last line is
    dropped and reported in ``load_report.warnings()``; other bad lines fail the load unless
    ``skip_bad_lines``.
    """
    given = [str(p) for p in paths]
    inputs = resolve_inputs(given)
    con = duckdb.connect(":memory:")
    if threads:
        con.execute(f"SET threads = {int(threads)}").fetchall()  # an int, validated by int()
    try:
        report = load(con, inputs, skip_bad_lines=skip_bad_lines, progress=progress)
    except BaseException:
        con.close()
        raise
    return Forensics(con, report, given)
