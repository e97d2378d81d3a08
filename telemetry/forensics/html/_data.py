"""The queries behind the HTML report's pictures, over the ``spans`` view.

They name only ``spans`` columns (documented in ``queries/spans.sql``) and bind every value as
a parameter. Each is bounded (``LIMIT``) so a huge trace set still makes a page a browser opens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb

from .._evidence import rows

MAX_CHAINS = 20
MAX_KEYS = 20
MAX_EVENTS_PER_KEY = 60
MAX_TOOLS = 60

_CHAIN_TASKS = """
SELECT delegation_root_task_id AS root, delegation_task_id AS task, delegation_origin_task_id AS parent,
       coalesce(delegation_hop, 0) AS hop, agent_id, run_id, constraints_carried AS carried,
       constraints_waived AS waived, waiver_reasons AS reasons
FROM spans
WHERE delegation_task_id IS NOT NULL AND coalesce(outcome, 'ok') = 'ok'
  AND delegation_root_task_id IN (SELECT unnest(?::VARCHAR[]))
QUALIFY row_number() OVER (PARTITION BY delegation_task_id ORDER BY start_time_unix_nano DESC, span_id) = 1
ORDER BY root, hop, task
"""

_ROOTS = """
SELECT delegation_root_task_id AS root, min(start_time_unix_nano) AS t
FROM spans WHERE delegation_root_task_id IS NOT NULL AND delegation_task_id IS NOT NULL
GROUP BY root ORDER BY (root IN (SELECT unnest(?::VARCHAR[]))) DESC, t LIMIT ?
"""

_KEY_EVENTS = """
SELECT run_id, state_key, agent_id, tool_kind, tool_name, outcome, span_id, start_time,
       state_version_read AS version_read, state_version_expected AS version_expected,
       state_version_written AS version_written, readback
FROM spans
WHERE state_key = ? AND run_id = ? AND tool_kind IN ('read', 'write')
ORDER BY start_time_unix_nano, span_id
LIMIT ?
"""

_TOOLS = """
SELECT tool_name, transport, readback, outcome, count(*) AS calls
FROM spans WHERE tool_name IS NOT NULL
GROUP BY ALL
ORDER BY tool_name
"""


def chains(con: duckdb.DuckDBPyConnection, lossy_roots: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Accepted tasks of up to :data:`MAX_CHAINS` delegation chains (those with a loss first)."""
    roots = [r["root"] for r in rows(con, _ROOTS, [list(lossy_roots), MAX_CHAINS])]
    out: dict[str, list[dict[str, Any]]] = {root: [] for root in roots}
    for task in rows(con, _CHAIN_TASKS, [roots]):
        out[task["root"]].append(task)
    return out


def key_events(con: duckdb.DuckDBPyConnection, run_id: str, key: str) -> list[dict[str, Any]]:
    """Reads and writes of one state key in one run, in time order (at most :data:`MAX_EVENTS_PER_KEY`)."""
    return rows(con, _KEY_EVENTS, [key, run_id, MAX_EVENTS_PER_KEY])


def tool_breakdown(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, dict[str, int]]]:
    """Per tool (at most :data:`MAX_TOOLS`), call counts by transport, read-back and outcome."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for r in rows(con, _TOOLS):
        tool = out.setdefault(r["tool_name"], {"transport": {}, "readback": {}, "outcome": {}})
        for part in ("transport", "readback", "outcome"):
            value = r[part] if r[part] is not None else "(none)"
            tool[part][value] = tool[part].get(value, 0) + int(r["calls"])
        if len(out) > MAX_TOOLS:
            out.pop(r["tool_name"])
            break
    return out
