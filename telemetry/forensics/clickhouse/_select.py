"""The ClickHouse select that fetches exactly what the forensics questions read from ``otel_traces``.

Generated, never hand-written per question: the attribute keys are those the packaged
``queries/spans.sql`` reads and those other instrumentations write (``keys.py``). Everything that
is a value (keys, spellings, the window, the service, the limit) is a bound ``{name:Type}``
parameter; the identifiers (database, tables) are validated and quoted. The SQL text therefore
holds no quote character.

What runs in ClickHouse: the choice of runs (those with a tool span in the window, of the service
if one is named), whole, with the direct parents of their tool spans; every read of the table is
bounded in time (the window, padded for the runs that straddle it, and widened to the whole of
their traces when the exporter's ``<table>_trace_id_ts`` lookup table says where they lie), so it
costs what the window holds, not what the table holds. Each attribute map is cut to the keys read
with one ``mapFilter`` per row. What comes back: one row per span, as text (times as numbers) and
lists of text, as Arrow; and whether each span is a tool span by the rule that chose it
(``is_tool``), so the spans read only as parents are counted without judging them again.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ... import conventions as c
from ...exceptions import ClickHouseInputError, ClickHouseSchemaError, ClickHouseTableMissing
from .._loading import MAX_LINE_BYTES
from ._keys import NOT_TOOL_KEYS, PEER_RUN_KEYS, RUN_KEYS, AttributeKeys, attribute_keys
from ._parameters import sendable

__all__ = [
    "IDENTIFIER",
    "KIND_SPELLINGS",
    "LOOKUP_SUFFIX",
    "MAX_ROW_BYTES",
    "NOT_TOOL_KEYS",
    "REQUIRED_COLUMNS",
    "RUN_KEYS",
    "RUN_PADDING_NS",
    "STATUS_SPELLINGS",
    "AttributeKeys",
    "SpansSelect",
    "ReadWindow",
    "attribute_keys",
    "check_columns",
    "columns_select",
    "iso",
    "is_lookup_table",
    "normalize_type",
    "quote_identifier",
    "spans_select",
]

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,199}")
"""Database and table names accepted: ClickHouse's plain identifiers (anything else is refused)."""

KIND_SPELLINGS: dict[str, tuple[str, ...]] = {
    "SPAN_KIND_UNSPECIFIED": ("", "Unspecified", "SPAN_KIND_UNSPECIFIED"),
    "SPAN_KIND_INTERNAL": ("Internal", "SPAN_KIND_INTERNAL"),
    "SPAN_KIND_SERVER": ("Server", "SPAN_KIND_SERVER"),
    "SPAN_KIND_CLIENT": ("Client", "SPAN_KIND_CLIENT"),
    "SPAN_KIND_PRODUCER": ("Producer", "SPAN_KIND_PRODUCER"),
    "SPAN_KIND_CONSUMER": ("Consumer", "SPAN_KIND_CONSUMER"),
}
"""``SpanKind`` as exporters write it (current: ``Internal``; older: ``SPAN_KIND_INTERNAL``),
mapped to the OTLP enum name the span typing in ``spans.sql`` reads."""

STATUS_SPELLINGS: dict[str, tuple[str, ...]] = {
    "STATUS_CODE_UNSET": ("", "Unset", "STATUS_CODE_UNSET"),
    "STATUS_CODE_OK": ("Ok", "STATUS_CODE_OK"),
    "STATUS_CODE_ERROR": ("Error", "STATUS_CODE_ERROR"),
}
"""``StatusCode`` likewise (``Error`` or ``STATUS_CODE_ERROR``)."""

REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "Timestamp": ("DateTime64(9)",),
    "TraceId": ("String",),
    "SpanId": ("String",),
    "ParentSpanId": ("String",),
    "SpanName": ("String",),
    "SpanKind": ("String",),
    "ServiceName": ("String",),
    "ScopeName": ("String",),
    "ScopeVersion": ("String",),
    "SpanAttributes": ("Map(String, String)",),
    "Duration": ("UInt64", "Int64"),
    "StatusCode": ("String",),
    "StatusMessage": ("String",),
    "Events.Name": ("Array(String)",),
    "Events.Attributes": ("Array(Map(String, String))",),
}
"""The ``otel_traces`` columns read and the types accepted (``LowCardinality`` aside): those the
Collector's clickhouseexporter creates."""

LOOKUP_SUFFIX = "_trace_id_ts"
"""The exporter's lookup table beside ``<table>``: per trace id, the first and last span start
(``Start``, ``End``), kept by a materialised view on every insert."""

_LOOKUP_TIME = re.compile(r"(?:SimpleAggregateFunction\((?:min|max),\s*)?DateTime(?:64\(\d\))?(?:\(\s*'[^']*'\s*\))?\)?")
"""``Start``/``End`` as the exporter's versions declare them: ``DateTime64(9)``, ``DateTime`` or
``SimpleAggregateFunction(min|max, DateTime)``."""

RUN_PADDING_NS = 3600 * 10**9
"""How far before and after the window a picked run's spans are read (1 hour): a run that started
before ``--since`` or goes on past ``--until`` is read whole if it lies within this much of the
window (and its traces wholly, however long, when the lookup table exists)."""

MAX_ROW_BYTES = MAX_LINE_BYTES
"""The most bytes of attribute values one row may bring (the JSON-lines default
``--max-line-bytes``): a larger row is a bad row (refused, or skipped and counted with
``--skip-bad-lines``), never cut; its values are not sent."""


def iso(ns: int) -> str:
    """``ns`` as ISO 8601 UTC (microseconds), for messages and the report's detail commands; a time
    no calendar date spells (before year 1 or after 9999) as its number of nanoseconds."""
    try:
        moment = _dt.datetime.fromtimestamp(ns // 1000 / 1e6, tz=_dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return f"{ns} ns since 1970"
    return moment.isoformat().replace("+00:00", "Z")


def quote_identifier(name: str, what: str) -> str:
    """``name`` quoted with backticks after checking it is a plain identifier; refuse anything else."""
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
        raise ClickHouseInputError(
            f"the ClickHouse {what} name {name!r} is not a plain identifier (letters, digits and _, not "
            "starting with a digit); name the table the Collector writes, e.g. otel.otel_traces")
    return f"`{name}`"


def normalize_type(type_name: str) -> str:
    """A column type without ``LowCardinality(...)`` wrappers or a ``DateTime64`` time zone."""
    out = re.sub(r"LowCardinality\(([^()]*)\)", r"\1", type_name)
    return re.sub(r"DateTime64\((\d+)(?:,\s*'[^']*')?\)", r"DateTime64(\1)", out)


def is_lookup_table(columns: dict[str, str]) -> bool:
    """Whether ``columns`` are those of the exporter's trace-id lookup table (any of its versions)."""
    return (normalize_type(columns.get("TraceId", "")) == "String"
            and all(_LOOKUP_TIME.fullmatch(columns.get(name, "")) for name in ("Start", "End")))


def check_columns(columns: dict[str, str], where: str) -> None:
    """Refuse a table that lacks a column the select reads, or has it with another type, by name."""
    if not columns:
        raise ClickHouseTableMissing(
            f"there is no {where} (or no database of that name, or this user may not see it); "
            "check --table and the database in the URL (the Collector's default is otel.otel_traces)")
    for name, accepted in REQUIRED_COLUMNS.items():
        found = columns.get(name)
        if found is None:
            raise ClickHouseSchemaError(
                f"{where} has no column {name}, which forensics reads; point --table at the table the "
                "OpenTelemetry Collector's clickhouseexporter writes (otel_traces)")
        if normalize_type(found) not in accepted:
            raise ClickHouseSchemaError(
                f"{where} column {name} is {found}, expected {' or '.join(accepted)} (the clickhouseexporter "
                "schema); forensics cannot read this table")


@dataclass
class _Binder:
    """Hands out ``{pN:Type}`` placeholders and collects their values; a value bound twice with
    one type gets one placeholder (the parameters travel in the URL while they are short)."""

    values: dict[str, Any] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    _given: dict[str, str] = field(default_factory=dict)

    def __call__(self, value: Any, type_name: str) -> str:
        key = repr((type(value).__name__, value, type_name))
        if key not in self._given:
            name = f"p{len(self.values)}"
            self.values[name] = value
            self.types[name] = type_name
            self._given[key] = f"{{{name}:{type_name}}}"
        return self._given[key]

    def select(self, sql: str) -> SpansSelect:
        return SpansSelect(sql=sql, parameters=dict(self.values), types=dict(self.types))


@dataclass(frozen=True)
class ReadWindow:
    """Which runs to fetch: those with a tool span starting in [since, until) (ns since the epoch),
    of ``service`` if one is named; their spans are read from ``padding_ns`` before the window to
    ``padding_ns`` after it."""

    since_ns: int
    until_ns: int
    service: str | None = None
    padding_ns: int = RUN_PADDING_NS

    def __post_init__(self) -> None:
        # Checked here, where every window is made (the command's options, watch's passes, a
        # caller's own), so an empty one is refused before anything connects.
        if self.until_ns <= self.since_ns:
            raise ClickHouseInputError(
                f"the time window is empty: --until ({iso(self.until_ns)}) must be later than --since "
                f"({iso(self.since_ns)})")
        if self.padding_ns < 0:
            raise ClickHouseInputError(f"the run padding must not be negative, not {self.padding_ns!r} ns")
        if self.service is not None and not sendable(self.service):
            # a command line's bytes that are not UTF-8 arrive as lone surrogates: such a name would
            # match no span, or reach ClickHouse changed
            raise ClickHouseInputError(
                f"--service {self.service!r} is not UTF-8 text (it holds bytes that are not UTF-8); give the "
                "service name as the exporter wrote it, the resource's service.name")


@dataclass(frozen=True)
class SpansSelect:
    """A generated select and its parameters (pass both to the client; nothing is formatted in),
    with the type each parameter's placeholder declares (chDB takes the values as text of that type)."""

    sql: str
    parameters: dict[str, Any]
    types: dict[str, str] = field(default_factory=dict)


def _spelling(column: str, spellings: dict[str, tuple[str, ...]], bind: _Binder) -> str:
    branches = []
    for canonical, written in spellings.items():
        branches.append(f"has({bind(list(written), 'Array(String)')}, {column}), {bind(canonical, 'String')}")
    return f"multiIf({', '.join(branches)}, {column})"


def _run(bind: _Binder) -> str:
    """The run a span belongs to, as ``spans.sql`` names it: on a peer tool span its format's run
    key (a session id) when it has one, else the conversation id, else its trace id."""
    branches = []
    for marker, values, key in PEER_RUN_KEYS:
        bound = bind(key, "String")
        branches.append(f"has({bind(list(values), 'Array(String)')}, SpanAttributes[{bind(marker, 'String')}]) "
                        f"AND mapContains(SpanAttributes, {bound}), SpanAttributes[{bound}]")
    for key in RUN_KEYS:
        bound = bind(key, "String")
        branches.append(f"mapContains(SpanAttributes, {bound}), SpanAttributes[{bound}]")
    return f"multiIf({', '.join(branches)}, lower(TraceId))"


def _tool(keys: AttributeKeys, bind: _Binder) -> str:
    """Whether a span is a tool span, as two conditions: the first reads only the map's keys (so
    ClickHouse can drop most other spans before it reads any value), the second decides."""
    markers = keys.markers
    ours = f"hasAny(mapKeys(SpanAttributes), {bind(list(keys.tool_keys), 'Array(String)')})"
    if not markers:
        return ours
    candidate = f"({ours} OR hasAny(mapKeys(SpanAttributes), {bind(list(markers), 'Array(String)')}))"
    decide = [ours] + [f"has({bind(list(values), 'Array(String)')}, SpanAttributes[{bind(key, 'String')}])"
                       for key, values in markers.items()]
    return f"{candidate} AND ({' OR '.join(decide)})"


def _spelled(value: str) -> tuple[str, ...]:
    """A marker value as written, and JSON-encoded (as :data:`PEER_TOOL_MARKERS` spells them)."""
    return (value, json.dumps(value))


def _time(ns: int, bind: _Binder) -> str:
    return f"fromUnixTimestamp64Nano({bind(max(min(ns, c.INT64_MAX), -c.INT64_MAX), 'Int64')})"


def _nanoseconds(wide: str, bind: _Binder) -> str:
    """A time computed in ``Int128`` (so nothing wraps), as ``Int64`` when it lies in the JSON lines'
    range [0, 2^63 - 1) and NULL when not: the one place a ClickHouse row's times meet that range."""
    return f"if({wide} BETWEEN 0 AND {bind(c.INT64_MAX - 1, 'Int64')}, toInt64({wide}), NULL)"


def spans_select(database: str, table: str, window: ReadWindow, limit: int, *, lookup: str | None = None,
                 max_row_bytes: int = MAX_ROW_BYTES) -> SpansSelect:
    """The select of every tool span of every run that has a tool span in ``window``, of the
    spans that are not tool spans but parent one of them (an agent's or a server's span: the
    clock-skew evidence compares a child with its parent), and of the OpenInference LLM spans in
    the traces of its OpenInference tool spans (they hold the call ids).

    The runs are chosen once (a scalar subquery over the window); their spans are read from the
    window padded by ``window.padding_ns`` on both sides, widened to the first and last span of
    their traces when ``lookup`` names the exporter's trace-id lookup table (``<table>_trace_id_ts``,
    in ``database``). Times come back as ``Int64`` nanoseconds, each NULL when it falls outside
    [0, 2^63 - 1) (the end is the start plus the duration, added without wrapping in ``Int128``),
    so a time before 1970 or past the range reaches the JSON lines' range rule
    (``otlp_time_problem``) instead of turning into a plausible number; numbers cost neither engine
    a text conversion. A row whose attribute values add up to more than ``max_row_bytes`` comes back
    without them and with ``attribute_bytes`` saying how many there were. At most ``limit`` rows come
    back (the caller asks for one more than it accepts, to tell a full result from a cut one).
    """
    source = f"{quote_identifier(database, 'database')}.{quote_identifier(table, 'table')}"
    bind = _Binder()
    keys = attribute_keys()
    read = bind(list(keys.keys), "Array(String)")
    keep = " OR ".join([f"has({read}, k)"] + [f"startsWith(k, {bind(p, 'String')})" for p in keys.prefixes])
    kept = f"mapFilter((k, v) -> {keep}, SpanAttributes)"
    fits = f"attribute_bytes <= {bind(int(max_row_bytes), 'UInt64')}"
    arrays = bind(sorted(keys.arrays), "Array(String)")
    is_array = f"(has({arrays}, k) AND JSONType(v) = {bind('Array', 'String')})"
    as_strings = bind("Array(String)", "String")
    tool = _tool(keys, bind)
    run = _run(bind)
    in_window = f"Timestamp >= {_time(window.since_ns, bind)} AND Timestamp < {_time(window.until_ns, bind)}"
    if window.service is not None:
        in_window += f" AND ServiceName = {bind(window.service, 'String')}"
    lowest, highest = _time(window.since_ns - window.padding_ns, bind), _time(window.until_ns + window.padding_ns, bind)
    if lookup is None:
        picked = f"(SELECT groupUniqArray({run}) FROM {source} WHERE {in_window} AND {tool}) AS picked_runs"
        bounds = f"Timestamp >= {lowest} AND Timestamp < {highest}"
    else:
        table_ts = f"{quote_identifier(database, 'database')}.{quote_identifier(lookup, 'table')}"
        picked = (f"(SELECT (groupUniqArray({run}), groupUniqArray(TraceId)) FROM {source} "
                  f"WHERE {in_window} AND {tool}) AS picked,\n"
                  f"    tupleElement(picked, 1) AS picked_runs,\n"
                  f"    (SELECT (least({lowest}, ifNull(minOrNull(toDateTime64(Start, 9)), {lowest})),\n"
                  f"             greatest({highest}, ifNull(maxOrNull(toDateTime64(End, 9)) + toIntervalSecond(1), {highest})))\n"
                  f"     FROM {table_ts} WHERE TraceId IN (SELECT arrayJoin(tupleElement(picked, 2)))) AS bounds")
        bounds = "Timestamp >= tupleElement(bounds, 1) AND Timestamp < tupleElement(bounds, 2)"
    chosen = f"{run} IN (SELECT arrayJoin(picked_runs))"
    # OpenInference's LLM spans name the call ids its tool spans lack (spans.sql matches them by
    # tool name and order); LangGraph makes them the tool spans' cousins, not parents, so every
    # LLM span of a trace with a chosen OpenInference tool span is read.
    kind = f"SpanAttributes[{bind(c.OPENINFERENCE_SPAN_KIND, 'String')}]"
    asking = f"has({bind(list(_spelled(c.OPENINFERENCE_KIND_LLM)), 'Array(String)')}, {kind})"
    exception = bind(c.EXCEPTION_EVENT, "String")
    exception_type = bind(c.EXCEPTION_TYPE, "String")
    oi_tool = f"has({bind(list(_spelled(c.OPENINFERENCE_KIND_TOOL)), 'Array(String)')}, {kind})"
    sql = f"""WITH
    {picked},
    {kept} AS kept,
    indexOf(`Events.Name`, {exception}) AS exception_at,
    if(exception_at > 0 AND mapContains(`Events.Attributes`[exception_at], {exception_type}),
       `Events.Attributes`[exception_at][{exception_type}], NULL) AS exception_type_found,
    toUInt64(arraySum(arrayMap(v -> length(v), mapValues(kept))) + ifNull(length(exception_type_found), 0))
        AS attribute_bytes,
    if({fits}, CAST(mapKeys(kept) AS Array(String)), []) AS kept_keys,
    if({fits}, mapValues(kept), []) AS kept_values,
    hasAny(kept_keys, {arrays}) AS kept_arrays
SELECT
    toString(TraceId) AS trace_id,
    toString(SpanId) AS span_id,
    toString(ParentSpanId) AS parent_span_id,
    toString(SpanName) AS name,
    toString({_spelling('SpanKind', KIND_SPELLINGS, bind)}) AS kind,
    toString({_spelling('StatusCode', STATUS_SPELLINGS, bind)}) AS status_code,
    toString(StatusMessage) AS status_message,
    exception_at > 0 AS raised,
    if({fits}, exception_type_found, NULL) AS exception_type,
    {_nanoseconds('toInt128(toUnixTimestamp64Nano(Timestamp))', bind)} AS start_time_unix_nano,
    {_nanoseconds('toInt128(toUnixTimestamp64Nano(Timestamp)) + toInt128(Duration)', bind)} AS end_time_unix_nano,
    toString(ServiceName) AS service_name,
    toString(ScopeName) AS scope_name,
    toString(ScopeVersion) AS scope_version,
    toUInt8({tool}) AS is_tool,
    attribute_bytes,
    kept_keys AS attribute_keys,
    if(kept_arrays, arrayMap((k, v) -> if({is_array}, NULL, v), kept_keys, kept_values),
       CAST(kept_values AS Array(Nullable(String)))) AS attribute_values,
    if(kept_arrays, arrayMap((k, v) -> if({is_array}, JSONExtract(v, {as_strings}), []), kept_keys, kept_values),
       []) AS attribute_arrays
FROM {source}
WHERE {bounds}
  AND (({tool} AND {chosen})
       OR (NOT ({tool}) AND (TraceId, SpanId) IN (
           SELECT TraceId, ParentSpanId FROM {source} WHERE {bounds} AND {tool} AND notEmpty(ParentSpanId) AND {chosen}))
       OR ({asking} AND TraceId IN (
           SELECT TraceId FROM {source} WHERE {bounds} AND {oi_tool} AND {chosen})))
LIMIT {bind(int(limit), 'UInt64')}"""
    return bind.select(sql)


def columns_select(database: str, table: str) -> SpansSelect:
    """The select of ``database.table``'s column names and types, from ``system.columns``."""
    quote_identifier(database, "database")
    quote_identifier(table, "table")
    bind = _Binder()
    sql = (f"SELECT name, type FROM system.columns WHERE database = {bind(database, 'String')} "
           f"AND table = {bind(table, 'String')}")
    return bind.select(sql)
