"""The queries behind the HTML report's pictures, over the ``spans`` view and the delegation tables.

They name only columns documented in ``queries/spans.sql`` and bind every value as a parameter.
Everything is bounded, so a huge trace set still makes a page a browser opens, and each bound
comes back with what it left out (how many chains, tasks, hops and events were not drawn), for
the page to say.

A chain is a run's tasks under one root task id, as the questions scope it: two runs that reuse
task ids (every run of one workflow usually does) are two chains, never one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from ... import conventions as c
from .._evidence import rows

__all__ = [
    "Chain", "MAX_CHAINS", "MAX_EVENTS_PER_KEY", "MAX_KEYS", "MAX_PER_HOP", "MAX_TASKS",
    "MAX_TOOLS", "chain", "chain_keys", "key_events", "tool_breakdown",
]

MAX_CHAINS = 20
"""Chains drawn (those with a lost constraint first)."""
MAX_TASKS = 40
"""Tasks drawn per chain: the lost ones and the hop before each, the chain's first hops, the
tasks that waived something, then by hop."""
MAX_PER_HOP = 5
"""Tasks drawn side by side at one hop."""
FIRST_HOPS = 2
"""Hops after the chain's first that are always drawn when the chain is cut."""
MAX_KEYS = 20
MAX_EVENTS_PER_KEY = 40
"""Reads and writes drawn per key: the first ones and a window around each marked span."""
BEFORE, AFTER = 6, 2
"""The window around a marked span: this many events before it and after it."""
MAX_TOOLS = 60


@dataclass
class Chain:
    """One chain as drawn: its run and root, the tasks drawn, and what was left out."""

    run_id: str
    root: str
    total: int
    """Accepted tasks in the chain."""
    tasks: list[dict[str, Any]] = field(default_factory=list)
    per_hop: dict[int, int] = field(default_factory=dict)
    """Tasks in the chain at each hop drawn (more than drawn when a hop was cut)."""
    gaps: list[tuple[int, int, int]] = field(default_factory=list)
    """(first hop, last hop, tasks) of each run of hops not drawn between two drawn ones."""


_CHAINS = """
WITH lossy AS (SELECT unnest(?::VARCHAR[]) AS run_id, unnest(?::VARCHAR[]) AS root_task_id)
SELECT t.run_id, t.delegation_root_task_id AS root, count(*) AS tasks,
       EXISTS (SELECT 1 FROM lossy l WHERE l.run_id = t.run_id AND l.root_task_id = t.delegation_root_task_id)
           AS lossy,
       min(t.start_time) AS first_time
FROM delegation_tasks t
WHERE t.delegation_root_task_id IS NOT NULL
GROUP BY ALL
ORDER BY lossy DESC, first_time, t.run_id, root
LIMIT ?
"""

_TASKS = """
SELECT t.delegation_task_id AS task, t.delegation_origin_task_id AS parent, coalesce(t.delegation_hop, 0) AS hop,
       t.agent_id, t.constraints_carried AS carried, t.constraints_waived AS waived, s.waiver_reasons AS reasons,
       t.span_id
FROM delegation_tasks t
LEFT JOIN spans s ON s.trace_id = t.trace_id AND s.span_id = t.span_id
WHERE t.run_id = ? AND t.delegation_root_task_id = ?
ORDER BY t.delegation_task_id IN (SELECT unnest(?::VARCHAR[])) DESC,
         coalesce(t.delegation_hop, 0) <= (SELECT min(coalesce(delegation_hop, 0)) FROM delegation_tasks
                                           WHERE run_id = ? AND delegation_root_task_id = ?) + ? DESC,
         len(coalesce(t.constraints_waived, [])) > 0 DESC,
         hop, task
LIMIT ?
"""

_PER_HOP = """
SELECT coalesce(delegation_hop, 0) AS hop, count(*) AS n FROM delegation_tasks
WHERE run_id = ? AND delegation_root_task_id = ? AND coalesce(delegation_hop, 0) IN (SELECT unnest(?::BIGINT[]))
GROUP BY ALL
"""

_GAPS = """
WITH gaps AS (SELECT unnest(?::BIGINT[]) AS lo, unnest(?::BIGINT[]) AS hi)
SELECT g.lo, g.hi, count(*) AS n
FROM gaps g JOIN delegation_tasks t
  ON coalesce(t.delegation_hop, 0) > g.lo AND coalesce(t.delegation_hop, 0) < g.hi
WHERE t.run_id = ? AND t.delegation_root_task_id = ?
GROUP BY ALL ORDER BY g.lo
"""

_KEY_EVENTS = """
WITH ev AS (
    SELECT agent_id, tool_kind, tool_name, outcome, span_id, start_time,
           state_version_read AS version_read, state_version_expected AS version_expected,
           state_version_written AS version_written,
           row_number() OVER (ORDER BY start_time_unix_nano, span_id) AS n
    FROM spans
    WHERE state_key = ? AND run_id = ? AND tool_kind IN (?, ?)
),
marks AS (SELECT n FROM ev WHERE span_id IN (SELECT unnest(?::VARCHAR[])))
SELECT *, (SELECT count(*) FROM ev) AS total
FROM ev
WHERE n <= ? OR EXISTS (SELECT 1 FROM marks m WHERE ev.n BETWEEN m.n - ? AND m.n + ?)
ORDER BY n
LIMIT ?
"""

_TOOLS = """
WITH chosen AS (SELECT DISTINCT tool_name FROM spans WHERE tool_name IS NOT NULL ORDER BY tool_name LIMIT ?)
SELECT tool_name, transport, readback, outcome, count(*) AS calls
FROM spans SEMI JOIN chosen USING (tool_name)
GROUP BY ALL
ORDER BY ALL
"""


def chain_keys(con: duckdb.DuckDBPyConnection,
               lossy: Sequence[tuple[str, str]]) -> tuple[list[tuple[str, str, int]], int]:
    """Up to :data:`MAX_CHAINS` chains as (run, root, tasks), those in ``lossy`` (run, root)
    first, then by first delegation; and how many chains there are in all."""
    found = rows(con, _CHAINS, [[run for run, _ in lossy], [root for _, root in lossy], MAX_CHAINS])
    total = con.execute("SELECT count(*) FROM delegation_chains").fetchall()[0][0]
    return [(str(r["run_id"]), str(r["root"]), int(r["tasks"])) for r in found], int(total)


def chain(con: duckdb.DuckDBPyConnection, run_id: str, root: str, total: int, marked: Sequence[str]) -> Chain:
    """The tasks of one chain to draw (``marked``: the tasks that lost something and their parents,
    always drawn), at most :data:`MAX_TASKS` and :data:`MAX_PER_HOP` a hop, with what was left out."""
    picked = rows(con, _TASKS, [run_id, root, list(marked), run_id, root, FIRST_HOPS, MAX_TASKS])
    by_hop: dict[int, list[dict[str, Any]]] = {}
    for task in picked:  # marked first, so a full hop keeps them
        hop = by_hop.setdefault(int(task["hop"]), [])
        if len(hop) < MAX_PER_HOP:
            hop.append(task)
    hops = sorted(by_hop)
    out = Chain(run_id, root, total, tasks=[t for hop in hops for t in by_hop[hop]])
    if len(out.tasks) == total:
        out.per_hop = {hop: len(by_hop[hop]) for hop in hops}
        return out
    out.per_hop = {int(r["hop"]): int(r["n"]) for r in rows(con, _PER_HOP, [run_id, root, hops])}
    pairs = [(lo, hi) for lo, hi in zip(hops, hops[1:]) if hi > lo + 1]
    if pairs:
        found = rows(con, _GAPS, [[lo for lo, _ in pairs], [hi for _, hi in pairs], run_id, root])
        out.gaps = [(int(r["lo"]) + 1, int(r["hi"]) - 1, int(r["n"])) for r in found]
    return out


def key_events(con: duckdb.DuckDBPyConnection, run_id: str, key: str,
               marked: Sequence[str]) -> tuple[list[dict[str, Any]], int]:
    """Reads and writes of one state key in one run, in time order: the first ones and a window
    around each ``marked`` span, at most :data:`MAX_EVENTS_PER_KEY`; and how many there are in
    all. Each event's ``n`` is its place among all of them, so the page can say where it cut."""
    found = rows(con, _KEY_EVENTS, [key, run_id, c.KIND_READ, c.KIND_WRITE, list(marked),
                                    MAX_EVENTS_PER_KEY // 2, BEFORE, AFTER, MAX_EVENTS_PER_KEY])
    return found, int(found[0]["total"]) if found else 0


def tool_breakdown(con: duckdb.DuckDBPyConnection) -> tuple[dict[str, dict[str, dict[str, int]]], int]:
    """Per tool (at most :data:`MAX_TOOLS`), call counts by transport, read-back and outcome;
    and how many tools there are in all."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for r in rows(con, _TOOLS, [MAX_TOOLS]):
        tool = out.setdefault(r["tool_name"], {"transport": {}, "readback": {}, "outcome": {}})
        for part in ("transport", "readback", "outcome"):
            value = r[part] if r[part] is not None else "(none)"
            tool[part][value] = tool[part].get(value, 0) + int(r["calls"])
    total = con.execute("SELECT count(DISTINCT tool_name) FROM spans").fetchall()[0][0]
    return out, int(total)
