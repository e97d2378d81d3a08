"""The ClickHouse select that fetches exactly what the forensics questions read from ``otel_traces``.

Generated, never hand-written per question: the attribute keys come from the packaged
``queries/spans.sql`` (every key its typing macro reads), so a question that starts reading a new
attribute is fetched from ClickHouse too. Everything that is a value (keys, spellings, the
window, the service, the limit) is a bound ``{name:Type}`` parameter; the two identifiers
(database, table) are validated and quoted. The SQL text therefore holds no quote character.

What runs in ClickHouse: the window and service filter (on the table's primary key and
partitions), the tool-span filter, the choice of whole runs, the direct parents of their tool
spans, and the reduction of the attribute maps to the keys read. What comes back: one row per
span, as text (times included) and lists of text, as Arrow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Optional

from ... import conventions as c
from ...runtime.resources import data_file
from ...exceptions import ClickHouseInputError, ClickHouseSchemaError, ClickHouseTableMissing

__all__ = [
    "IDENTIFIER",
    "KIND_SPELLINGS",
    "NOT_TOOL_KEYS",
    "REQUIRED_COLUMNS",
    "RUN_KEYS",
    "STATUS_SPELLINGS",
    "AttributeKeys",
    "SpansSelect",
    "Window",
    "attribute_keys",
    "check_columns",
    "columns_select",
    "normalize_type",
    "quote_identifier",
    "spans_select",
]

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,199}")
"""Database and table names accepted: ClickHouse's plain identifiers (anything else is refused)."""

RUN_KEYS = (c.GEN_AI_CONVERSATION_ID,)
"""The attribute that names a run; a span without it belongs to the run named by its trace id."""

NOT_TOOL_KEYS = frozenset({c.GEN_AI_CONVERSATION_ID, c.GEN_AI_AGENT_ID, c.ERROR_TYPE})
"""Keys the questions read that non-tool spans also carry (a chat span, an HTTP error): having
only these does not make a span a tool span."""

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
}
"""The ``otel_traces`` columns read and the types accepted (``LowCardinality`` aside): those the
Collector's clickhouseexporter creates."""

_READ = re.compile(r"\b(attribute_values|attribute_arrays)\[list_position\(attribute_keys, '([^']+)'\)\]")


@dataclass(frozen=True)
class AttributeKeys:
    """The span attribute keys the span typing reads, in order, and which of them are arrays."""

    keys: tuple[str, ...]
    arrays: frozenset[str]

    @property
    def tool_keys(self) -> tuple[str, ...]:
        """Keys whose presence makes a span a tool span."""
        return tuple(k for k in self.keys if k not in NOT_TOOL_KEYS)


@lru_cache(maxsize=1)
def attribute_keys() -> AttributeKeys:
    """Read the keys from the packaged ``spans.sql`` (the one place that says what is read)."""
    text = data_file("queries", "spans.sql").read_text(encoding="utf-8")
    keys: list[str] = []
    arrays: set[str] = set()
    for column, key in _READ.findall(text):
        if key not in keys:
            keys.append(key)
        if column == "attribute_arrays":
            arrays.add(key)
    return AttributeKeys(tuple(keys), frozenset(arrays))


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
    """Hands out ``{pN:Type}`` placeholders and collects their values."""

    values: dict[str, Any] = field(default_factory=dict)

    def __call__(self, value: Any, type_name: str) -> str:
        name = f"p{len(self.values)}"
        self.values[name] = value
        return f"{{{name}:{type_name}}}"


@dataclass(frozen=True)
class Window:
    """Which runs to fetch: those with a tool span starting in [since, until) (ns since the epoch)."""

    since_ns: int
    until_ns: int
    service: Optional[str] = None


@dataclass(frozen=True)
class SpansSelect:
    """A generated select and its parameters (pass both to the client; nothing is formatted in)."""

    sql: str
    parameters: dict[str, Any]


def _spelling(column: str, spellings: dict[str, tuple[str, ...]], bind: _Binder) -> str:
    branches = []
    for canonical, written in spellings.items():
        branches.append(f"has({bind(list(written), 'Array(String)')}, {column}), {bind(canonical, 'String')}")
    return f"multiIf({', '.join(branches)}, {column})"


def spans_select(database: str, table: str, window: Window, limit: int) -> SpansSelect:
    """The select of every tool span of every run that has a tool span in ``window``, and of the
    spans that are not tool spans but parent one of them (an agent's or a server's span: the
    clock-skew evidence compares a child with its parent).

    Times come back as decimal text, computed without wrapping (``Int128``), so a time before
    1970 or an end past 2^63 reaches the same range checks as a JSON line instead of turning
    into a plausible number. At most ``limit`` rows come back (the caller asks for one more than
    it accepts, to tell a full result from a cut one).
    """
    if window.until_ns <= window.since_ns:
        raise ClickHouseInputError("the time window is empty: --until must be later than --since")
    source = f"{quote_identifier(database, 'database')}.{quote_identifier(table, 'table')}"
    bind = _Binder()
    keys = attribute_keys()
    read = bind(list(keys.keys), "Array(String)")
    arrays = bind(sorted(keys.arrays), "Array(String)")
    json_array = bind("Array", "String")
    as_strings = bind("Array(String)", "String")
    tool = f"hasAny(mapKeys(SpanAttributes), {bind(list(keys.tool_keys), 'Array(String)')})"
    run_key = bind(RUN_KEYS[0], "String")
    run = f"if(mapContains(SpanAttributes, {run_key}), SpanAttributes[{run_key}], lower(TraceId))"
    is_array = f"(has({arrays}, k) AND JSONType(SpanAttributes[k]) = {json_array})"
    in_window = (f"Timestamp >= fromUnixTimestamp64Nano({bind(window.since_ns, 'Int64')}) "
                 f"AND Timestamp < fromUnixTimestamp64Nano({bind(window.until_ns, 'Int64')})")
    if window.service is not None:
        in_window += f" AND ServiceName = {bind(window.service, 'String')}"
    sql = f"""WITH picked AS (SELECT DISTINCT {run} FROM {source} WHERE {in_window} AND {tool})
SELECT
    toString(TraceId) AS trace_id,
    toString(SpanId) AS span_id,
    toString(ParentSpanId) AS parent_span_id,
    toString(SpanName) AS name,
    toString({_spelling('SpanKind', KIND_SPELLINGS, bind)}) AS kind,
    toString({_spelling('StatusCode', STATUS_SPELLINGS, bind)}) AS status_code,
    toString(StatusMessage) AS status_message,
    toString(toUnixTimestamp64Nano(Timestamp)) AS start_time_unix_nano,
    toString(toInt128(toUnixTimestamp64Nano(Timestamp)) + toInt128(Duration)) AS end_time_unix_nano,
    toString(ServiceName) AS service_name,
    toString(ScopeName) AS scope_name,
    toString(ScopeVersion) AS scope_version,
    arrayFilter(k -> mapContains(SpanAttributes, k), {read}) AS attribute_keys,
    arrayMap(k -> if({is_array}, NULL, SpanAttributes[k]), attribute_keys) AS attribute_values,
    arrayMap(k -> if({is_array}, JSONExtract(SpanAttributes[k], {as_strings}), []), attribute_keys)
        AS attribute_arrays
FROM {source}
WHERE ({tool} AND {run} IN picked)
   OR (NOT {tool} AND (TraceId, SpanId) IN (
       SELECT TraceId, ParentSpanId FROM {source} WHERE {tool} AND notEmpty(ParentSpanId) AND {run} IN picked))
LIMIT {bind(int(limit), 'UInt64')}"""
    return SpansSelect(sql=sql, parameters=dict(bind.values))


def columns_select(database: str, table: str) -> SpansSelect:
    """The select of ``database.table``'s column names and types, from ``system.columns``."""
    quote_identifier(database, "database")
    quote_identifier(table, "table")
    bind = _Binder()
    sql = (f"SELECT name, type FROM system.columns WHERE database = {bind(database, 'String')} "
           f"AND table = {bind(table, 'String')}")
    return SpansSelect(sql=sql, parameters=dict(bind.values))
