"""ClickHouse for the forensics tests: the exporter's ``otel_traces`` DDL and its rows from OTLP JSON.

The DDL is the OpenTelemetry Collector clickhouseexporter's ``traces_table.sql`` template as it
renders for the MergeTree engine with a TTL (the bloom-filter index branch). Rows are written the
way the exporter writes them: ids as lower-case hex, kind and status as ``Internal``/``Error``
(``old_spellings`` gives the older ``SPAN_KIND_INTERNAL``/``STATUS_CODE_ERROR``), every attribute
value as text (``AsString``: ints in decimal, bools as true/false, arrays and kvlists as compact
JSON with ``<``, ``>``, ``&`` escaped), ``Duration`` in nanoseconds, ``Timestamp`` the start.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

TTL_DAYS = 3

EXPORTER_DDL = """
CREATE TABLE IF NOT EXISTS {database}.{table} (
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    TraceState String CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    SpanAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    Duration UInt64 CODEC(T64, ZSTD(1)),
    StatusCode LowCardinality(String) CODEC(ZSTD(1)),
    StatusMessage String CODEC(ZSTD(1)),
    Events Nested (
        Timestamp DateTime64(9),
        Name LowCardinality(String),
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    Links Nested (
        TraceId String,
        SpanId String,
        TraceState String,
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    ResourceAttributeItems Array(String) ALIAS arrayMap(kv -> concat(kv.1, '=', kv.2), CAST(ResourceAttributes, 'Array(Tuple(String, String))')),
    SpanAttributeItems Array(String) ALIAS arrayMap(kv -> concat(kv.1, '=', kv.2), CAST(SpanAttributes, 'Array(Tuple(String, String))')),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_key mapKeys(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_value mapValues(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_duration Duration TYPE minmax GRANULARITY 1,
    INDEX idx_lower_span_name lower(SpanName) TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 8
) ENGINE = MergeTree
PARTITION BY toDate(Timestamp)
PRIMARY KEY (ServiceName, SpanName, toDateTime(Timestamp))
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp), Timestamp)
TTL toDateTime(Timestamp) + toIntervalDay({ttl_days})
SETTINGS index_granularity = {granularity}, ttl_only_drop_parts = 1
"""

LOOKUP_DDL = """
CREATE TABLE IF NOT EXISTS {database}.{table}_trace_id_ts (
    TraceId String CODEC(ZSTD(1)),
    Start SimpleAggregateFunction(min, DateTime) CODEC(ZSTD(1)),
    End SimpleAggregateFunction(max, DateTime) CODEC(ZSTD(1))
) ENGINE = MergeTree
PARTITION BY toStartOfWeek(Start)
ORDER BY (TraceId)
TTL toDateTime(Start) + toIntervalDay({ttl_days})
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1
"""
"""The exporter's trace-id lookup table (``traces_id_ts_lookup_table.sql``, MergeTree, with the TTL)."""

LOOKUP_VIEW = """
CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.{table}_trace_id_ts_mv
TO {database}.{table}_trace_id_ts
AS SELECT TraceId, min(Timestamp) AS Start, max(Timestamp) AS End
FROM {database}.{table}
WHERE TraceId != ''
GROUP BY TraceId
"""
"""The materialised view that fills it on every insert (``traces_id_ts_lookup_mv.sql``)."""

COLUMNS = ["Timestamp", "TraceId", "SpanId", "ParentSpanId", "TraceState", "SpanName", "SpanKind",
           "ServiceName", "ResourceAttributes", "ScopeName", "ScopeVersion", "SpanAttributes", "Duration",
           "StatusCode", "StatusMessage"]
EVENT_COLUMNS = ["EventTimes", "EventNames", "EventAttributes"]
"""The staging columns a row's events travel in (times as text), after :data:`COLUMNS`; the
insert writes them into the Nested ``Events`` columns as the exporter does."""

_KINDS = ["Unspecified", "Internal", "Server", "Client", "Producer", "Consumer"]
_STATUSES = ["Unset", "Ok", "Error"]
_ENUM_KINDS = {"SPAN_KIND_" + k.upper(): i for i, k in enumerate(_KINDS)}
_ENUM_STATUSES = {"STATUS_CODE_" + s.upper(): i for i, s in enumerate(_STATUSES)}


def ddl(database: str = "otel", table: str = "otel_traces", granularity: int = 8192) -> str:
    """The exporter's DDL; a test of index use may ask for smaller granules (the exporter's 8192
    rows would need a million-row table to show a granule skipped)."""
    return EXPORTER_DDL.format(database=database, table=table, ttl_days=TTL_DAYS, granularity=granularity)


def _go_json(value: Any) -> str:
    """Compact JSON the way Go's encoder writes it (HTML characters escaped)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _raw(value: dict[str, Any]) -> Any:
    """An OTLP AnyValue as the Go value AsRaw gives."""
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "arrayValue" in value:
        return [_raw(v) for v in value["arrayValue"].get("values", [])]
    if "kvlistValue" in value:
        return {kv["key"]: _raw(kv["value"]) for kv in value["kvlistValue"].get("values", [])}
    return None


def as_string(value: dict[str, Any]) -> str:
    """pcommon.Value.AsString for an OTLP AnyValue."""
    raw = _raw(value)
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, (list, dict)):
        return _go_json(raw)
    if raw is None:
        return ""
    return str(raw)


def _code(value: Any, enum: dict[str, int]) -> int:
    if value is None:
        return 0
    if isinstance(value, int) or str(value).isdigit():
        return int(value)
    return enum[str(value)]


def exporter_rows(lines: Iterable[str], *, old_spellings: bool = False) -> Iterator[list[Any]]:
    """One ``otel_traces`` row (in :data:`COLUMNS` order, Timestamp as ns, then the span's events in
    :data:`EVENT_COLUMNS` order, attribute values as ``AsString``) per span of ``lines``."""
    for line in lines:
        data = json.loads(line)
        for rs in data["resourceSpans"]:
            resource = {a["key"]: as_string(a["value"]) for a in rs.get("resource", {}).get("attributes", [])}
            for ss in rs["scopeSpans"]:
                scope = ss.get("scope", {})
                for span in ss["spans"]:
                    start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
                    kind = _code(span.get("kind"), _ENUM_KINDS)
                    status = _code(span.get("status", {}).get("code"), _ENUM_STATUSES)
                    yield [
                        start, span["traceId"].lower(), span["spanId"].lower(),
                        (span.get("parentSpanId") or "").lower(), "", span["name"],
                        ("SPAN_KIND_" + _KINDS[kind].upper()) if old_spellings else _KINDS[kind],
                        resource.get("service.name", ""), resource, scope.get("name", ""),
                        scope.get("version", ""),
                        {a["key"]: as_string(a["value"]) for a in span.get("attributes", [])},
                        end - start,
                        ("STATUS_CODE_" + _STATUSES[status].upper()) if old_spellings else _STATUSES[status],
                        span.get("status", {}).get("message", ""),
                        [_ns_text(int(e["timeUnixNano"])) for e in span.get("events", [])],
                        [e["name"] for e in span.get("events", [])],
                        [{a["key"]: as_string(a["value"]) for a in e.get("attributes", [])}
                         for e in span.get("events", [])],
                    ]


def shifted_lines(lines: Iterable[str], shift_ns: int) -> list[str]:
    """``lines`` with every span's times moved by ``shift_ns`` (recent times, for the TTL)."""
    out = []
    for line in lines:
        data = json.loads(line)
        for rs in data["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    for key in ("startTimeUnixNano", "endTimeUnixNano"):
                        span[key] = str(int(span[key]) + shift_ns)
        out.append(json.dumps(data, separators=(",", ":")))
    return out


def insert_rows(client: Any, rows: list[list[Any]], database: str = "otel", table: str = "otel_traces") -> None:
    """Insert exporter rows through clickhouse-connect (Timestamp converted from ns exactly)."""
    staged = [[_ns_text(r[0])] + r[1:] + ([[], [], []] if len(r) == len(COLUMNS) else []) for r in rows]
    client.insert(f"{database}.{table}_staging", staged, column_names=["TimestampText"] + COLUMNS[1:] + EVENT_COLUMNS)
    client.command(f"INSERT INTO {database}.{table} ({', '.join(COLUMNS)}, `Events.Timestamp`, `Events.Name`, "
                   f"`Events.Attributes`) SELECT toDateTime64(TimestampText, 9, 'UTC'), {', '.join(COLUMNS[1:])}, "
                   f"arrayMap(t -> toDateTime64(t, 9, 'UTC'), EventTimes), EventNames, EventAttributes "
                   f"FROM {database}.{table}_staging")
    client.command(f"TRUNCATE TABLE {database}.{table}_staging")


def create(client: Any, database: str = "otel", table: str = "otel_traces", *, lookup: bool = False,
           granularity: int = 8192) -> None:
    """The exporter's database and table, plus a staging table the tests insert through; with
    ``lookup``, the trace-id lookup table and the view that fills it, as the exporter makes them."""
    client.command(f"CREATE DATABASE IF NOT EXISTS {database}")
    client.command(ddl(database, table, granularity))
    if lookup:
        client.command(LOOKUP_DDL.format(database=database, table=table, ttl_days=TTL_DAYS))
        client.command(LOOKUP_VIEW.format(database=database, table=table))
    client.command(f"CREATE TABLE IF NOT EXISTS {database}.{table}_staging (TimestampText String, "
                   "TraceId String, SpanId String, ParentSpanId String, TraceState String, SpanName String, "
                   "SpanKind String, ServiceName String, ResourceAttributes Map(String, String), ScopeName String, "
                   "ScopeVersion String, SpanAttributes Map(String, String), Duration UInt64, StatusCode String, "
                   "StatusMessage String, EventTimes Array(String), EventNames Array(String), "
                   "EventAttributes Array(Map(String, String))) ENGINE = Memory")


def _ns_text(ns: int) -> str:
    import datetime as dt

    seconds, rest = divmod(ns, 1_000_000_000)
    moment = dt.datetime.fromtimestamp(seconds, tz=dt.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S") + f".{rest:09d}"


def write_lines(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path
