"""Stream the generated ClickHouse select into the DuckDB ``spans`` relation the questions read.

The Arrow batches go from clickhouse-connect straight into one DuckDB ``CREATE TABLE AS`` over a
``RecordBatchReader``: no Python object per span or per value is made. DuckDB then types the rows
with the same ``otlp_typed`` macro the JSON-lines path uses (``queries/spans.sql``), so kinds,
statuses, ids, ints-as-text and arrays follow one set of rules, and every question (and every
check that runs on the loaded spans) runs unchanged.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterator, Optional

import duckdb

from ... import conventions as c
from ...exceptions import ClickHouseInputError, TooManySpans
from ..loading import LOADED, LoadReport, Progress, finish_load, install_macros
from .client import ClickHouseConnection
from .select import Window, check_columns, spans_select
from .window import iso

__all__ = [
    "DEFAULT_MAX_SPANS",
    "DEFAULT_TABLE",
    "ClickHouseRead",
    "load_clickhouse",
]

DEFAULT_MAX_SPANS = 5_000_000
"""The most spans one read takes in (the client peaked at 0.6 GB per million in ``make bench``)."""
DEFAULT_TABLE = "otel_traces"
_STREAM = "clickhouse_spans_stream"
_PROGRESS_EVERY_S = 1.0

_KEYED_SQL = f"""
CREATE OR REPLACE TABLE {LOADED} AS
WITH keyed AS (
    SELECT
        CAST($source AS VARCHAR) AS source_file,
        CASE WHEN service_name = '' THEN CAST([] AS STRUCT("key" VARCHAR, "value" VARCHAR, "values" VARCHAR[])[])
             ELSE [{{'key': CAST($service_key AS VARCHAR), 'value': service_name, 'values': CAST(NULL AS VARCHAR[])}}]
        END AS resource_attributes,
        nullif(scope_name, '') AS scope_name,
        nullif(scope_version, '') AS scope_version,
        {{'traceId': trace_id, 'spanId': span_id, 'parentSpanId': parent_span_id, 'name': name, 'kind': kind,
          'status': {{'code': status_code, 'message': status_message}},
          'startTimeUnixNano': CAST(start_time_unix_nano AS UBIGINT),
          'endTimeUnixNano': CAST(end_time_unix_nano AS UBIGINT)}} AS s,
        CAST(attribute_keys AS VARCHAR[]) AS attribute_keys,
        CAST(attribute_values AS VARCHAR[]) AS attribute_values,
        list_transform(range(1, len(attribute_keys) + 1), lambda i:
            CASE WHEN attribute_values[i] IS NULL THEN CAST(attribute_arrays[i] AS VARCHAR[]) END)
            AS attribute_arrays
    FROM {_STREAM}
)
SELECT * FROM otlp_typed('keyed')
"""
"""The rows from ClickHouse shaped like the JSON-lines path's parsed spans, then typed alike.
(The relation names are constants; the two values are bound.)"""


@dataclass(frozen=True)
class ClickHouseRead:
    """What to read: ``database.table``, the window that selects runs, and the span budget."""

    database: str
    table: str
    window: Window
    max_spans: int = DEFAULT_MAX_SPANS

    def describe(self, label: str) -> str:
        service = f", service {self.window.service!r}" if self.window.service is not None else ""
        return (f"{label} table {self.database}.{self.table} (runs with tool spans from "
                f"{iso(self.window.since_ns)} to {iso(self.window.until_ns)}{service})")


class _Counted:
    """The batches, counted; stops (without raising inside DuckDB's scan) past the budget or on failure."""

    def __init__(self, batches: Iterator[Any], budget: int, progress: Optional[Progress]):
        self._batches, self._budget, self._progress = batches, budget, progress
        self.rows = 0
        self.over = False
        self.failure: Optional[ClickHouseInputError] = None
        self._said = time.perf_counter()

    def __iter__(self) -> Iterator[Any]:
        try:
            for batch in self._batches:
                self.rows += batch.num_rows
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

    text, texts = pa.string(), pa.list_(pa.string())
    fields = [("trace_id", text), ("span_id", text), ("parent_span_id", text), ("name", text), ("kind", text),
              ("status_code", text), ("status_message", text), ("start_time_unix_nano", pa.uint64()),
              ("end_time_unix_nano", pa.uint64()), ("service_name", text), ("scope_name", text),
              ("scope_version", text), ("attribute_keys", texts), ("attribute_values", texts),
              ("attribute_arrays", pa.list_(texts))]
    return pa.RecordBatch.from_pylist([], schema=pa.schema(fields))


def load_clickhouse(
    con: duckdb.DuckDBPyConnection,
    connection: ClickHouseConnection,
    read: ClickHouseRead,
    progress: Optional[Progress] = None,
) -> LoadReport:
    """Make ``spans`` in ``con`` from the runs ``read`` selects; return what loading found.

    Raises :class:`~telemetry.exceptions.TooManySpans` past ``read.max_spans`` and the other
    :class:`~telemetry.exceptions.ClickHouseInputError` kinds for every ClickHouse failure.
    """
    import pyarrow as pa

    started = time.perf_counter()
    where = read.describe(connection.label)
    install_macros(con)
    check_columns(connection.columns(read.database, read.table),
                  f"table {read.database}.{read.table} at {connection.label}")
    select = spans_select(read.database, read.table, read.window, read.max_spans + 1)
    if progress:
        progress(f"reading {where}")
    with connection.stream(select, "reading spans") as batches:
        counted = _Counted(batches, read.max_spans, progress)
        rows = iter(counted)
        first = next(rows, None)
        if first is None:
            first = _empty_batch()
        reader = pa.RecordBatchReader.from_batches(first.schema, _chain(first, rows))
        con.register(_STREAM, reader)
        try:
            con.execute(_KEYED_SQL, {"source": connection.label, "service_key": c.SERVICE_NAME}).fetchall()
        except duckdb.Error as exc:
            if counted.failure is None and not counted.over:
                raise ClickHouseInputError(f"the spans from {where} could not be typed: {exc}") from None
        finally:
            con.unregister(_STREAM)
    if counted.failure is not None:
        raise counted.failure
    if counted.over:
        raise TooManySpans(
            f"{where} holds more than --max-spans {read.max_spans:,} tool spans; narrow the window (--since/"
            "--until or --last), name one --service, or raise --max-spans (the spans are held on disk, "
            "so mostly time grows with it)")
    report = LoadReport(files=0, source=where)
    report.spans = int(con.execute(f"SELECT count(*) FROM {LOADED}").fetchall()[0][0])
    finish_load(con, report)
    report.seconds = time.perf_counter() - started
    if progress:
        progress(f"loaded {report.spans:,} spans from ClickHouse in {report.seconds:.1f} s")
    return report


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    if first.num_rows:
        yield first
    yield from rest
