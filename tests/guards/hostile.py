"""What a model, a fuzzer or a careless caller sends a guard tool, as hypothesis strategies,
and the checks every answer and every store must pass afterwards."""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from telemetry import conventions as c
from telemetry.guards import Store

FUZZ = settings(
    max_examples=int(os.environ.get("GUARD_FUZZ_EXAMPLES", "40")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""Examples per property (raise ``GUARD_FUZZ_EXAMPLES`` for a longer hunt)."""


class RaisingRepr:
    """An object whose ``repr`` and ``str`` raise: a message built from it must not."""

    def __repr__(self) -> str:
        raise RuntimeError("repr refused")

    __str__ = __repr__


def nested(depth: int) -> dict[str, Any]:
    """A dict nested ``depth`` levels deep."""
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


HUGE_TEXT = "z" * 10_000_000
ODD_VALUES = [
    nested(1000), [[[[[[[[[[[]]]]]]]]]]] * 3, RaisingRepr(), object(), b"bytes", bytearray(b"x"), 10**5000, 2**64, -(2**63) - 1,
    float("nan"), float("inf"), "\ud800", "ok\udfff", HUGE_TEXT, "x" * 600, "y" * 20_000, "", "   ", "\x00", {1, 2},
    frozenset({"a"}), (1, 2), {1: "int key"}, {("t",): 1}, {"\ud800": 1}, [RaisingRepr()], {"k": RaisingRepr()},
]

surrogates = st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3)
texts = st.one_of(st.text(max_size=30), surrogates.map(lambda s: "id" + s), st.sampled_from(["", " ", "x" * 600]))
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=2**63 - 2, max_value=2**70), st.floats(), texts
)
json_like = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(texts, st.integers()), children, max_size=4),
        st.tuples(children, children),
    ),
    max_leaves=12,
)
anything = st.one_of(json_like, st.sampled_from(ODD_VALUES))
"""Any JSON-like value, and the odd values above (huge, deep, unprintable, not JSON at all)."""


def assert_envelope(result: Any) -> None:
    """``result`` is a success or a refusal envelope that JSON and UTF-8 can carry whole."""
    assert isinstance(result, dict) and isinstance(result.get("ok"), bool), result
    if not result["ok"]:
        assert result["error"] in c.OUTCOMES and result["error"] != c.OUTCOME_OK
        assert isinstance(result["retry"], bool)
        message = result["message"]
        assert isinstance(message, str) and 0 < len(message) <= 8_000, len(message)
    text = json.dumps(result, ensure_ascii=False, allow_nan=False)
    text.encode("utf-8")  # no lone surrogate anywhere in the answer


def assert_consistent(store: Store) -> None:
    """The database passes its own integrity check (SQLite's) and every guard's row invariants."""
    with store.read() as conn:
        if store.dialect == "sqlite":
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
            listing = "SELECT name FROM sqlite_master WHERE type = 'table'"
        else:
            listing = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        tables = {row[0] for row in conn.execute(listing)}
        if "guard_state" in tables:  # every current version was logged by the write that made it
            unlogged = conn.execute(
                "SELECT s.key FROM guard_state s WHERE NOT EXISTS "
                "(SELECT 1 FROM guard_changes g WHERE g.key = s.key AND g.version = s.version)"
            ).fetchall()
            assert unlogged == [], unlogged
            for (value,) in conn.execute("SELECT value FROM guard_state"):
                json.loads(value)
        if "guard_idempotency" in tables:  # a finished call never leaves its claim running
            assert conn.execute("SELECT count(*) FROM guard_idempotency WHERE status = 'running'").fetchone()[0] == 0
        if "guard_plans" in tables:
            for targets, status in conn.execute("SELECT targets, status FROM guard_plans"):
                assert isinstance(json.loads(targets), list) and status in ("planned", "committed", "failed")
        if "delegation_tasks" in tables:  # a child carries only ids of its origin's ledger
            stray = conn.execute(
                "SELECT k.task_id, k.constraint_id FROM delegation_constraints k JOIN delegation_tasks t "
                "ON t.task_id = k.task_id WHERE t.origin_task_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "
                "delegation_constraints o WHERE o.task_id = t.origin_task_id AND o.constraint_id = k.constraint_id)"
            ).fetchall()
            assert stray == [], stray
        if "objective_versions" in tables:  # each task: versions 1..n, only the last one current
            for task_id, n, top, current in conn.execute(
                "SELECT task_id, count(*), max(seq), sum(CASE WHEN superseded_at IS NULL THEN 1 ELSE 0 END) "
                "FROM objective_versions GROUP BY task_id"
            ):
                assert n == top and current == 1, (task_id, n, top, current)
