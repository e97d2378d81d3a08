"""Forensics over ClickHouse ``otel_traces`` (the OpenTelemetry Collector's clickhouseexporter table).

ClickHouse filters (window, service, tool spans, whole runs, the attribute keys read) and streams
the rows as Arrow into the same DuckDB ``spans`` relation the file path builds; the questions run
there unchanged. ``select`` generates the query, ``client`` connects and names failures,
``_window`` parses times, ``source`` loads. The entry point is
:func:`telemetry.forensics.open_clickhouse`.
"""

from __future__ import annotations

from ._client import PASSWORD_ENV, ClickHouseConnection, Target, connect, parse_url
from ._select import ReadWindow, SpansSelect, attribute_keys, spans_select
from ._source import DEFAULT_MAX_SPANS, DEFAULT_TABLE, ClickHouseRead, load_clickhouse
from ._window import DEFAULT_LAST, iso, window

__all__ = [
    "DEFAULT_LAST",
    "DEFAULT_MAX_SPANS",
    "DEFAULT_TABLE",
    "PASSWORD_ENV",
    "ClickHouseConnection",
    "ClickHouseRead",
    "SpansSelect",
    "Target",
    "ReadWindow",
    "attribute_keys",
    "connect",
    "iso",
    "load_clickhouse",
    "parse_url",
    "spans_select",
    "window",
]
