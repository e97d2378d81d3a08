"""Stream the generated ClickHouse select into the DuckDB ``spans`` relation the questions read.

The Arrow batches go from clickhouse-connect straight into one DuckDB ``CREATE TABLE AS`` over a
``RecordBatchReader``, which checks and types every row into ``spans_loaded`` (one
materialisation): no Python object per span or per value is made. Each row is checked with the
JSON-lines path's own rules (``otlp_id_problem``: ids 32/16 hex; ``otlp_time_problem``: times in
[0, 2^63 - 1), end not before start, judged on the numbers the select sends, NULL where out of
range) and against :data:`~.select.MAX_ROW_BYTES` of attribute values: a bad row is named by its
trace and span id and refused, or skipped and counted with ``skip_bad_rows``, never typed into a
wrong value (it is typed with harmless times, marked, and removed before anything reads it). The
typing is the ``otlp_typed`` macro the JSON-lines path uses (``queries/spans.sql``), so kinds,
statuses, ids, ints-as-text and arrays follow one set of rules, and every question (and every
check that runs on the loaded spans) runs unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import duckdb

from ... import conventions as c
from ...exceptions import ClickHouseBadRows, ClickHouseInputError, TooManySpans
from .._loading import SPANS_LOADED, LoadReport, Progress, SkippedRow, finish_load, install_macros
from ._client import ClickHouseConnection
from ._select import (
    IDENTIFIER,
    LOOKUP_SUFFIX,
    MAX_ROW_BYTES,
    ReadWindow,
    check_columns,
    is_lookup_table,
    quote_identifier,
    spans_select,
)
from ._window import iso

__all__ = [
    "DEFAULT_MAX_SPANS",
    "DEFAULT_TABLE",
    "LISTED_BAD_ROWS",
    "ClickHouseRead",
    "load_clickhouse",
    "plan_read",
]

DEFAULT_MAX_SPANS = 5_000_000
"""The most spans one read takes in (the client peaked at 0.83 GB per million in ``make bench``)."""
DEFAULT_TABLE = "otel_traces"
_STREAM = "clickhouse_spans_stream"
_PROGRESS_EVERY_S = 1.0

_CHECKED = "clickhouse_checked_rows"
LISTED_BAD_ROWS = 20
"""How many bad rows a refusal or the evidence names (all are counted)."""

_TYPED_SQL = f"""
CREATE OR REPLACE TABLE {SPANS_LOADED} AS
WITH keyed AS (
    SELECT
        CASE WHEN service_name = '' THEN CAST([] AS STRUCT("key" VARCHAR, "value" VARCHAR, "values" VARCHAR[])[])
             ELSE [{{'key': CAST($service_key AS VARCHAR), 'value': service_name, 'values': CAST(NULL AS VARCHAR[])}}]
        END AS resource_attributes,
        nullif(service_name, '') AS service_name,
        nullif(scope_name, '') AS scope_name,
        nullif(scope_version, '') AS scope_version,
        {{'traceId': trace_id, 'spanId': span_id, 'parentSpanId': parent_span_id, 'name': name, 'kind': kind,
          'status': {{'code': status_code, 'message': status_message}},
          'startTimeUnixNano': start_time_unix_nano, 'endTimeUnixNano': end_time_unix_nano}} AS s,
        CAST(raised AS BOOLEAN) AS raised,
        exception_type,
        CAST(attribute_keys AS VARCHAR[]) AS attribute_keys,
        CAST(attribute_values AS VARCHAR[]) AS attribute_values,
        CASE WHEN len(attribute_arrays) = 0 THEN list_resize(CAST([] AS VARCHAR[][]), len(attribute_keys))
             ELSE list_transform(range(1, len(attribute_keys) + 1), lambda i:
                      CASE WHEN attribute_values[i] IS NULL THEN CAST(attribute_arrays[i] AS VARCHAR[]) END)
        END AS attribute_arrays,
        is_tool,
        coalesce(otlp_id_problem(trace_id, span_id, parent_span_id),
                 otlp_time_problem(start_time_unix_nano IS NOT NULL AND end_time_unix_nano IS NOT NULL,
                                   start_time_unix_nano, end_time_unix_nano),
                 CASE WHEN attribute_bytes > $max_row_bytes THEN
            'a span''s attribute values add up to ' || attribute_bytes || ' bytes, more than a row may bring ('
            || $max_row_bytes || ' bytes, the JSON-lines --max-line-bytes)' END) AS problem
    FROM {_STREAM}
),
{_CHECKED} AS (
SELECT
    CASE WHEN problem IS NULL THEN CAST($source AS VARCHAR)
         ELSE chr(0) || CASE WHEN is_tool = 1 THEN $tool_mark ELSE $parent_mark END || problem END AS source_file,
    resource_attributes, service_name, scope_name, scope_version,
    CASE WHEN problem IS NULL THEN s
         ELSE struct_pack(traceId := s.traceId, spanId := s.spanId, parentSpanId := s.parentSpanId, name := s.name,
                          kind := s.kind, status := s.status, startTimeUnixNano := 0::BIGINT, endTimeUnixNano := 0::BIGINT)
    END AS s,
    raised, exception_type, attribute_keys, attribute_values, attribute_arrays
FROM keyed
)
SELECT * FROM otlp_typed('{_CHECKED}')
"""
"""The rows from ClickHouse shaped like the JSON-lines path's parsed spans. A row that breaks a rule
(the JSON path's id and time rules, or more attribute bytes than a row may bring) keeps its
ids, gets times that type, and carries the rule it breaks in ``source_file``; then every row is
typed alike (``otlp_typed``, as the JSON-lines path types its spans) straight from the stream into
``spans_loaded``, one materialisation, and the bad ones are named and removed after (a bad row's
``source_file`` is NUL, then :data:`_TOOL_MARK` or :data:`_PARENT_MARK` as the select judged it,
then the rule). (The relation names are constants; the values are bound.)"""

_TOOL_MARK, _PARENT_MARK = "t", "p"


@dataclass(frozen=True)
class ClickHouseRead:
    """What to read: ``database.table``, the window that selects runs, and the span budget."""

    database: str
    table: str
    window: ReadWindow
    max_spans: int = DEFAULT_MAX_SPANS
    skip_bad_rows: bool = False
    """Skip (and count) rows that break the OTLP id or time rules instead of refusing the read."""

    def describe(self, label: str) -> str:
        service = f", service {self.window.service!r}" if self.window.service is not None else ""
        return (f"{label} table {self.database}.{self.table} (runs with tool spans from "
                f"{iso(self.window.since_ns)} to {iso(self.window.until_ns)}{service})")


def plan_read(table: str | None, database: str, window: ReadWindow, max_spans: int | None = None,
              skip_bad_rows: bool = False) -> ClickHouseRead:
    """What to read, from the options as given: ``table`` is ``TABLE`` (in ``database``, the URL's)
    or ``DB.TABLE``; ``max_spans`` must be a positive number of spans."""
    limit = DEFAULT_MAX_SPANS if max_spans is None else max_spans
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ClickHouseInputError(f"--max-spans must be a positive number of spans, not {limit!r}")
    named, _, name = (table or DEFAULT_TABLE).rpartition(".")
    quote_identifier(named or database, "database")  # refused now, before any connection
    quote_identifier(name, "table")
    return ClickHouseRead(named or database, name, window, limit, skip_bad_rows)


class _Counted:
    """The batches, counted; stops (without raising inside DuckDB's scan) past the budget or on failure."""

    def __init__(self, batches: Iterator[Any], budget: int, progress: Progress | None):
        self._batches, self._budget, self._progress = batches, budget, progress
        self.rows = 0
        self.parents = 0
        """Rows the select judged not tool spans (read only because they parent one)."""
        self.over = False
        self.failure: ClickHouseInputError | None = None
        self._said = time.perf_counter()

    def __iter__(self) -> Iterator[Any]:
        import pyarrow.compute as pc

        try:
            for batch in self._batches:
                self.rows += batch.num_rows
                self.parents += batch.num_rows - (pc.sum(batch.column("is_tool")).as_py() or 0)
                if self.rows > self._budget:
                    self.over = True
                    return
                if self._progress and time.perf_counter() - self._said >= _PROGRESS_EVERY_S:
                    self._said = time.perf_counter()
                    self._progress(f"read {self.rows:,} spans from ClickHouse")
                yield batch
        except ClickHouseInputError as exc:
            self.failure = exc


def _empty_batch() -> Any:
    """A batch with no rows and the select's columns, so an empty window still makes ``spans``."""
    import pyarrow as pa

    text, texts, nanoseconds = pa.string(), pa.list_(pa.string()), pa.int64()
    fields = [("trace_id", text), ("span_id", text), ("parent_span_id", text), ("name", text), ("kind", text),
              ("status_code", text), ("status_message", text), ("raised", pa.bool_()), ("exception_type", text),
              ("start_time_unix_nano", nanoseconds), ("end_time_unix_nano", nanoseconds), ("service_name", text),
              ("scope_name", text), ("scope_version", text), ("is_tool", pa.uint8()), ("attribute_bytes", pa.uint64()),
              ("attribute_keys", texts), ("attribute_values", texts), ("attribute_arrays", pa.list_(texts))]
    return pa.RecordBatch.from_pylist([], schema=pa.schema(fields))


def _lookup_table(connection: ClickHouseConnection, read: ClickHouseRead) -> str | None:
    """The exporter's trace-id lookup table beside ``read.table``, if it is there with its columns."""
    name = read.table + LOOKUP_SUFFIX
    if not IDENTIFIER.fullmatch(name):
        return None
    return name if is_lookup_table(connection.columns(read.database, name)) else None


def load_clickhouse(
    con: duckdb.DuckDBPyConnection,
    connection: ClickHouseConnection,
    read: ClickHouseRead,
    progress: Progress | None = None,
) -> LoadReport:
    """Make ``spans`` in ``con`` from the runs ``read`` selects; return what loading found.

    Raises :class:`~telemetry.exceptions.TooManySpans` past ``read.max_spans``,
    :class:`~telemetry.exceptions.ClickHouseBadRows` for malformed rows (unless
    ``read.skip_bad_rows``) and the other :class:`~telemetry.exceptions.ClickHouseInputError`
    kinds for every ClickHouse failure.
    """
    import pyarrow as pa

    started = time.perf_counter()
    where = read.describe(connection.label)
    install_macros(con)
    check_columns(connection.columns(read.database, read.table),
                  f"table {read.database}.{read.table} at {connection.label}")
    select = spans_select(read.database, read.table, read.window, read.max_spans + 1,
                          lookup=_lookup_table(connection, read))
    if progress:
        progress(f"reading {where}")
    try:
        with connection.stream(select, "reading spans") as batches:
            counted = _Counted(batches, read.max_spans, progress)
            rows = iter(counted)
            first = next(rows, None)
            if first is None:
                first = _empty_batch()
            reader = pa.RecordBatchReader.from_batches(first.schema, _chain(first, rows))
            con.register(_STREAM, reader)
            try:
                con.execute(_TYPED_SQL, {"source": connection.label, "service_key": c.SERVICE_NAME,
                                         "max_row_bytes": MAX_ROW_BYTES, "tool_mark": _TOOL_MARK,
                                         "parent_mark": _PARENT_MARK}).fetchall()
            except duckdb.Error as exc:
                if counted.failure is None and not counted.over:
                    raise ClickHouseInputError(f"the spans from {where} could not be read: {exc}") from None
            finally:
                con.unregister(_STREAM)
        if counted.failure is not None:
            raise counted.failure
        if counted.over:
            raise TooManySpans(
                f"{where} holds more than --max-spans {read.max_spans:,} spans (tool spans and their "
                "parents); narrow the window (--since/--until or --last), name one --service, or raise "
                "--max-spans (the spans are held on disk, so mostly time grows with it)")
        report = LoadReport(files=0, source=where)
        skipped_parents = _judge_rows(con, report, read.skip_bad_rows, where, connection.label)
    except BaseException:
        con.execute(f"DROP TABLE IF EXISTS {SPANS_LOADED}").fetchall()
        raise
    report.spans = int(con.execute(f"SELECT count(*) FROM {SPANS_LOADED}").fetchall()[0][0])
    report.parent_spans = counted.parents - skipped_parents
    finish_load(con, report)
    report.seconds = time.perf_counter() - started
    if progress:
        progress(f"loaded {report.spans:,} spans from ClickHouse in {report.seconds:.1f} s")
    return report


def _judge_rows(con: duckdb.DuckDBPyConnection, report: LoadReport, skip: bool, where: str, label: str) -> int:
    """Refuse the read over the rows that break a rule, or (``skip``) count them; either way they
    leave ``spans_loaded``. Returns how many of the skipped rows were not tool spans."""
    bad, parents = (int(n) for n in con.execute(
        f"SELECT count(*), count(*) FILTER (WHERE source_file[2] = $parent) FROM {SPANS_LOADED} "
        "WHERE source_file <> $label", {"label": label, "parent": _PARENT_MARK}).fetchall()[0])
    if not bad:
        return 0
    named = [SkippedRow(str(trace), str(span), str(reason)[2:]) for trace, span, reason in con.execute(
        f"SELECT trace_id, span_id, source_file FROM {SPANS_LOADED} WHERE source_file <> $label "
        f"ORDER BY trace_id, span_id LIMIT {LISTED_BAD_ROWS}", {"label": label}).fetchall()]
    if not skip:
        listed = "; ".join(f"trace {r.trace_id!r} span {r.span_id!r}: {r.reason}" for r in named[:5])
        more = f" (and {bad - 5:,} more)" if bad > 5 else ""
        raise ClickHouseBadRows(
            f"{bad:,} row(s) of {where} are not OTLP spans: {listed}{more}. (traceId, spanId and "
            "parentSpanId are the TraceId, SpanId and ParentSpanId columns; startTimeUnixNano is "
            "Timestamp, endTimeUnixNano Timestamp + Duration.) Pass --skip-bad-lines to read the rest")
    con.execute(f"DELETE FROM {SPANS_LOADED} WHERE source_file <> $label", {"label": label}).fetchall()
    report.skipped_rows, report.skipped_row_count = named, bad
    return parents


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    if first.num_rows:
        yield first
    yield from rest
