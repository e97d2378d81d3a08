"""The notebook-facing API: open trace files once, then ask any question of them.

    >>> from telemetry.forensics import open_traces
    >>> with open_traces(["traces/"]) as traces:          # doctest: +SKIP
    ...     rows = traces.run("constraint_loss_by_hop")
    ...     rel = traces.relation("divergent_reads")      # a DuckDB relation, e.g. rel.df()
    ...     print(traces.report().render())
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Union

import duckdb

from ..exceptions import ForensicsInputError
from ._evidence import Evidence, columns_and_rows, gather
from ._inputs import PathLike, path_list, resolve_inputs
from ._loading import (
    MAX_LINE_BYTES,
    SPANS,
    LoadReport,
    Progress,
    install_macros,
    limit_memory,
    load,
    memory_limit_bytes,
)
from ._peers import PeerOptions, ResultShape, ToolSpanSelector, options_from
from ._peers import install as install_peers
from ._questions import CONTENT_COLUMNS, Question, all_questions, question
from ._report import Report, Section
from ._verdicts import examples_first, verdict_counts
from .clickhouse import _client as ch_client
from .clickhouse import _source as ch_source
from .clickhouse import iso, window

EXAMPLES_PER_SECTION = 3
ToolSpans = Union[None, str, ToolSpanSelector, Iterable[str | ToolSpanSelector]]
"""``tool_spans=``: a span-name glob, a selector file's path, a :class:`ToolSpanSelector`, or several."""
ResultShapes = Union[None, str, ResultShape, Sequence[str | ResultShape]]
"""``result_shapes=``: ``"module:function"`` or the function itself (``result -> outcome | None``), or several."""


class Forensics:
    """Trace files loaded into a private DuckDB connection as the ``spans`` relation."""

    def __init__(self, con: duckdb.DuckDBPyConnection, load_report: LoadReport, paths: list[str],
                 workdir: Path | None = None, peer_options: PeerOptions | None = None):
        self.connection = con
        """The DuckDB connection; ``spans`` and the ``attr``/``attr_list`` macros are defined in it."""
        self.load_report = load_report
        self.paths = paths
        self._workdir = workdir
        self.show_content = bool(peer_options and peer_options.show_content)
        """Whether recorded arguments and results may appear in rows (``--show-content``)."""
        failures = peer_options.shape_failures if peer_options is not None else 0
        self.evidence: Evidence = gather(con, load_report, shape_failures=failures)
        """What the answers rest on (duplicates, ignored spans, gaps, skew): see :mod:`._evidence`."""
        self._columns: dict[str, list[str]] = {}  # each question's column names, from its last run

    def __enter__(self) -> Forensics:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the DuckDB connection and remove its database (the source files are never modified)."""
        self.connection.close()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

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
        columns, out = columns_and_rows(self.connection, question(name).sql)
        if not self.show_content and CONTENT_COLUMNS.intersection(columns):  # recorded content stays out
            columns = [column for column in columns if column not in CONTENT_COLUMNS]
            out = [{column: row[column] for column in columns} for row in out]
        self._columns[name] = columns
        return out

    def columns(self, name: str) -> list[str]:
        """Question ``name``'s column names: those of its last :meth:`run` (a report runs every
        question), else from binding its SQL without running it."""
        known = self._columns.get(name)
        if known is None:
            known = [column for column in self.relation(name).columns
                     if self.show_content or column not in CONTENT_COLUMNS]
        return list(known)

    def answers(self, progress: Progress | None = None) -> dict[str, list[dict[str, Any]]]:
        """Every question's rows by name, each question run once: for callers that need the rows
        of all of them (the HTML page, the demo's scoring) and a :meth:`report` of the same."""
        return {q.name: self._timed(q, progress) for q in all_questions()}

    def _timed(self, q: Question, progress: Progress | None) -> list[dict[str, Any]]:
        started = time.perf_counter()
        rows = self.run(q.name)
        if progress:
            progress(f"{q.name}: {len(rows)} row(s) in {time.perf_counter() - started:.2f} s")
        return rows

    def report(self, progress: Progress | None = None,
               answers: Mapping[str, list[dict[str, Any]]] | None = None) -> Report:
        """Run every question and summarise: counts per verdict, the worst examples (happened first),
        the command for detail.

        ``answers`` (from :meth:`answers`) are used instead of running the questions again;
        without them each question's rows are dropped once summarised, so memory holds one at a time.
        """
        sections = []
        for q in all_questions():
            rows = answers[q.name] if answers is not None else self._timed(q, progress)
            sections.append(
                Section(question=q, count=len(rows), examples=examples_first(rows, EXAMPLES_PER_SECTION),
                        columns=self.columns(q.name), verdicts=verdict_counts(rows))
            )
        return Report(sections=sections, load=self.load_report, paths=self.paths, evidence=self.evidence)


def _peer_words(tool_spans: ToolSpans, result_shapes: ResultShapes) -> list[str]:
    """The command-line words that give the same ``tool_spans`` and ``result_shapes`` (those given as
    text), so each question's "rows:" command reads the traces the same way."""
    words: list[str] = []
    for item in [tool_spans] if isinstance(tool_spans, (str, ToolSpanSelector)) else list(tool_spans or ()):
        if isinstance(item, str):
            words += ["--tool-spans", item]
    for shape in [result_shapes] if isinstance(result_shapes, str) or callable(result_shapes) else list(result_shapes or ()):
        if isinstance(shape, str):
            words += ["--result-shape", shape]
    return words


def _open(loader: Callable[[duckdb.DuckDBPyConnection], LoadReport], given: list[str],
          threads: int | None, peer_options: PeerOptions | None = None, memory_limit: int | None = None) -> Forensics:
    """An in-memory DuckDB database held to :data:`~.loading.MEMORY_LIMIT`, spilling to a private
    temporary folder, with ``spans`` made by ``loader``; the folder is removed again if loading
    fails (else on :meth:`Forensics.close`).

    In memory rather than an on-disk database file: DuckDB compresses and checkpoints what it
    writes to a database file, which costs more CPU to load the same spans (docs/forensics.md has
    the comparison), for the same peak memory (the limit holds either way; the buffer manager spills the
    table's blocks to the folder as they are)."""
    workdir = Path(tempfile.mkdtemp(prefix="outcome-telemetry-forensics-db-"))
    con = duckdb.connect(":memory:")
    try:
        limit_memory(con, workdir / "spill", memory_limit)
        if threads:
            con.execute(f"SET threads = {int(threads)}").fetchall()  # an int, validated by int()
        if peer_options is not None:  # before the loader, whose install_macros keeps them
            install_macros(con)
            install_peers(con, peer_options)
        report = loader(con)
        return Forensics(con, report, given, workdir, peer_options)
    except BaseException:
        con.close()
        shutil.rmtree(workdir, ignore_errors=True)
        raise


def open_traces(
    paths: Iterable[PathLike] | PathLike,
    *,
    skip_bad_lines: bool = False,
    progress: Progress | None = None,
    threads: int | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
    tool_spans: ToolSpans = None,
    result_shapes: ResultShapes = None,
    show_content: bool = False,
    skip_unreadable: bool = False,
    memory_limit: int | None = None,
) -> Forensics:
    """Load OTLP JSON-lines files, directories, globs or ``ingest`` Parquet directories.

    Tool calls other instrumentations wrote (OpenTelemetry GenAI, OpenInference, OpenLLMetry,
    Langfuse, MLflow) are read into the same ``spans`` columns (docs/peer-traces.md).
    ``tool_spans`` makes spans no format marks tool calls (``--tool-spans``: a span-name glob or a
    selector file), ``result_shapes`` judges recorded results before the built-in rules
    (``--result-shape``), and ``show_content`` lets recorded arguments and results into rows
    (``--show-content``; without it only tool names, outcome codes and hashes do).

    Raises :class:`~telemetry.exceptions.ForensicsInputError` for missing paths, empty
    directories and input that is not OTLP (naming the file and line). A truncated last line is
    dropped and reported in ``load_report.warnings()``; other bad lines fail the load unless
    ``skip_bad_lines``. Lines longer than ``max_line_bytes`` are refused (or skipped). A folder
    or file this user cannot read is refused by name, or with ``skip_unreadable`` skipped, counted
    and named in the evidence (``load_report.unreadable``, a caveat on every answer).
    ``memory_limit`` (bytes; default :data:`~.loading.MEMORY_LIMIT`) holds DuckDB; a line of N bytes
    needs about :data:`~.loading.LINE_MEMORY_FACTOR` times N to be parsed, so a very long line
    is read by raising both ``max_line_bytes`` and it (an out-of-memory is a named error saying so).

    The spans are held in an in-memory DuckDB database under a fixed memory limit; what does not
    fit spills to a private temporary folder, removed on :meth:`Forensics.close`.
    """
    given = [os.fspath(p) for p in path_list(paths)]  # one path is that path, not its characters
    inputs = resolve_inputs(given, skip_unreadable=skip_unreadable)
    limit = memory_limit_bytes(memory_limit)
    if not isinstance(max_line_bytes, int) or isinstance(max_line_bytes, bool) or max_line_bytes < 1:
        raise ForensicsInputError(f"max_line_bytes must be a positive number of bytes, not {max_line_bytes!r}")
    options = options_from(tool_spans, result_shapes, show_content)
    return _open(lambda con: load(con, inputs, skip_bad_lines=skip_bad_lines, progress=progress,
                                  max_line_bytes=max_line_bytes), given + _peer_words(tool_spans, result_shapes),
                 threads, options, limit)


def open_clickhouse(
    url: str,
    *,
    table: str | None = None,
    since: str | None = None,
    until: str | None = None,
    last: str | None = None,
    service: str | None = None,
    max_spans: int | None = None,
    password_env: str | None = None,
    progress: Progress | None = None,
    threads: int | None = None,
    skip_bad_rows: bool = False,
    tool_spans: ToolSpans = None,
    result_shapes: ResultShapes = None,
    show_content: bool = False,
) -> Forensics:
    """Read the runs with tool spans in a time window from a ClickHouse ``otel_traces`` table.

    ``url`` is ``http(s)://USER@HOST:PORT/DATABASE`` (or ``chdb:///PATH``); the password comes
    from the environment variable ``password_env`` (``CLICKHOUSE_PASSWORD``). ``table`` is
    ``otel_traces`` or ``DATABASE.TABLE``. The window is ``since``/``until`` (ISO 8601, UTC unless
    an offset is given) or ``last`` (``6h``, the default); every run (conversation id, else trace
    id) with a tool span in it is read whole, with the spans that parent its tool spans. Raises a
    :class:`~telemetry.exceptions.ClickHouseInputError` subclass for every failure,
    :class:`~telemetry.exceptions.TooManySpans` past ``max_spans``, and
    :class:`~telemetry.exceptions.ClickHouseBadRows` for rows with bad ids or times unless
    ``skip_bad_rows`` (then they are skipped and counted in the evidence). ``tool_spans``,
    ``result_shapes`` and ``show_content`` are :func:`open_traces`' (a selector's own attribute
    keys are not fetched from ClickHouse: it matches on the span name and the keys forensics reads).
    """
    options = options_from(tool_spans, result_shapes, show_content)  # refused before connecting
    chosen = window(since, until, last, service)
    read = ch_source.plan_read(table, ch_client.parse_url(url).database, chosen, max_spans, skip_bad_rows)
    connection = ch_client.connect(url, password_env=password_env or ch_client.PASSWORD_ENV)
    given = ["--clickhouse", connection.label, "--table", f"{read.database}.{read.table}",
             "--since", iso(chosen.since_ns), "--until", iso(chosen.until_ns)]
    if service is not None:
        given += ["--service", service]
    if skip_bad_rows:
        given += ["--skip-bad-lines"]
    given += _peer_words(tool_spans, result_shapes)
    try:
        return _open(lambda con: ch_source.load_clickhouse(con, connection, read, progress),
                     given, threads, options)
    finally:
        connection.close()

