"""One span is one (trace id, span id): copies of it are counted, dropped, and the differing ones listed.

The same spans arrive twice more often than not: a ``.jsonl`` beside its ``gzip -k`` copy, two
Collector files that overlap, a file copied into the folder again. Counting every copy would
double findings, so after any source is loaded (JSON lines, Parquet, or anything else producing
the ``spans_loaded`` relation) this runs in SQL over the loaded rows:

- identical copies (every recorded field equal; the file they came from aside) count once;
- copies that differ are *conflicting*: one is kept by a fixed rule (the copy with the most
  attributes, then the latest end time, then the first file in path order) and the key is
  listed, since the two sources disagree about what happened.

Finding copies costs one hash aggregation over the span keys; only spans that have a copy are
touched further.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb

CONFLICTS_LISTED = 20
"""How many conflicting spans the evidence lists by id (all are counted)."""

_CONTENT = ("name, kind, status_code, status_message, parent_span_id, start_time_unix_nano, "
            "end_time_unix_nano, attribute_keys, attribute_values, attribute_arrays, service_name, "
            "scope_name, scope_version")
"""What makes two copies identical: everything recorded about the span but the file it came in."""

_KEEP_ORDER = "len(attribute_keys) DESC, end_time_unix_nano DESC, source_file"
"""Which copy of a span is kept: the most attributes, then the latest end, then the first file."""


@dataclass
class Duplicates:
    """What deduplication found: copies dropped, per file, and the spans whose copies differ."""

    spans_with_copies: int = 0
    dropped: int = 0
    """Copies removed (identical and conflicting alike); the kept copy is not counted."""
    dropped_by_file: dict[str, int] = field(default_factory=dict)
    conflicting: int = 0
    """Spans whose copies differ in content."""
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    """The first :data:`CONFLICTS_LISTED` conflicting spans: ids, files, the file kept."""

    def as_dict(self) -> dict[str, Any]:
        return {"spans_with_copies": self.spans_with_copies, "dropped": self.dropped,
                "dropped_by_file": dict(self.dropped_by_file), "conflicting": self.conflicting,
                "conflicts": list(self.conflicts),
                "rule": "a span is (trace_id, span_id); identical copies count once; of differing "
                        "copies the one with the most attributes, then the latest end time, then the "
                        "first file in path order is kept"}

    def warnings(self) -> list[str]:
        out = []
        if self.dropped:
            files = ", ".join(f"{f} ({n})" for f, n in sorted(self.dropped_by_file.items())[:3])
            more = " ..." if len(self.dropped_by_file) > 3 else ""
            out.append(f"dropped {self.dropped:,} duplicate span cop(ies) of {self.spans_with_copies:,} span(s) "
                       f"(same trace id and span id), from {files}{more}")
        if self.conflicting:
            out.append(f"{self.conflicting:,} span(s) have copies that differ; one copy of each was kept "
                       "(most attributes, then latest end, then first file): see the evidence section")
        return out


def deduplicate(con: duckdb.DuckDBPyConnection, loaded: str, base: str, *, is_table: bool) -> Duplicates:
    """Make ``base`` hold one row per (trace id, span id) of ``loaded``; return what was dropped.

    ``loaded`` is a table (rows are deleted from it, and ``base`` is a view over it) or a view
    (``base`` becomes a view that leaves the copies out). The relation names are the loader's
    constants, never user input.
    """
    result = Duplicates()
    con.execute(f"CREATE OR REPLACE TEMP TABLE span_copy_hashes AS SELECT hash(trace_id, span_id) AS h "
                f"FROM {loaded} GROUP BY h HAVING count(*) > 1").fetchall()
    count = 0
    if con.execute("SELECT count(*) FROM span_copy_hashes").fetchall()[0][0]:  # else no span has a copy
        con.execute(f"""
            CREATE OR REPLACE TEMP TABLE span_copy_keys AS
            SELECT trace_id, span_id FROM {loaded}
            WHERE hash(trace_id, span_id) IN (SELECT h FROM span_copy_hashes)
            GROUP BY trace_id, span_id HAVING count(*) > 1
        """).fetchall()
        count = con.execute("SELECT count(*) FROM span_copy_keys").fetchall()[0][0]
    if not count:
        con.execute(f"CREATE OR REPLACE TEMP VIEW {base} AS SELECT * FROM {loaded}").fetchall()
        return result
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE span_copies AS
        SELECT l.*, hash({_CONTENT}) AS copy_content,
               row_number() OVER (PARTITION BY trace_id, span_id ORDER BY {_KEEP_ORDER}) AS copy_rank
        FROM {loaded} l SEMI JOIN span_copy_keys k USING (trace_id, span_id)
    """).fetchall()
    result.spans_with_copies = int(count)
    for file, dropped in con.execute(
            "SELECT source_file, count(*) FROM span_copies WHERE copy_rank > 1 GROUP BY 1 ORDER BY 1").fetchall():
        result.dropped_by_file[str(file)] = int(dropped)
    result.dropped = sum(result.dropped_by_file.values())
    conflicts = con.execute("""
        SELECT trace_id, span_id, list_sort(list_distinct(list(source_file))) AS files,
               arg_min(source_file, copy_rank) AS kept_file, count(DISTINCT copy_content) AS versions
        FROM span_copies GROUP BY trace_id, span_id HAVING count(DISTINCT copy_content) > 1
        ORDER BY trace_id, span_id
    """)
    columns = [d[0] for d in conflicts.description]
    rows = conflicts.fetchall()
    result.conflicting = len(rows)
    result.conflicts = [dict(zip(columns, row)) for row in rows[:CONFLICTS_LISTED]]
    if is_table:
        con.execute(f"DELETE FROM {loaded} USING span_copy_keys k "
                    f"WHERE {loaded}.trace_id = k.trace_id AND {loaded}.span_id = k.span_id").fetchall()
        con.execute(f"INSERT INTO {loaded} SELECT * EXCLUDE (copy_content, copy_rank) FROM span_copies "
                    "WHERE copy_rank = 1").fetchall()
        con.execute(f"CREATE OR REPLACE TEMP VIEW {base} AS SELECT * FROM {loaded}").fetchall()
        con.execute("DROP TABLE span_copies").fetchall()
    else:  # the kept copies stay in span_copies, which the view reads
        con.execute(f"""
            CREATE OR REPLACE TEMP VIEW {base} AS
            SELECT * FROM {loaded} ANTI JOIN span_copy_keys k USING (trace_id, span_id)
            UNION ALL BY NAME
            SELECT * EXCLUDE (copy_content, copy_rank) FROM span_copies WHERE copy_rank = 1
        """).fetchall()
    return result
