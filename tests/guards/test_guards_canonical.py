"""Idempotency payloads by meaning: canonical twins replay (across processes and hash seeds),
a different payload is refused; the lease heartbeat; the injectable clock."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from telemetry import conventions as c
from telemetry import instrument_tool
from telemetry.guards import IdempotencyKeys, SQLiteStore, open_store
from telemetry.guards._validation import BadInput, canonical_payload
from telemetry.testing import Capture

from . import canonical_worker
from .hostile import FUZZ

WORKER = Path(__file__).with_name("canonical_worker.py")
_fresh = itertools.count()

# A payload spec is JSON with markers for sets and tuples, so a subprocess can rebuild it.
leaf = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12),
)
set_members = st.one_of(st.integers(min_value=-1000, max_value=1000), st.text(min_size=1, max_size=8))
specs = st.recursive(
    leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=8), children, max_size=4),
        st.lists(set_members, max_size=8, unique=True).map(lambda items: {"__set__": items}),
        st.lists(children, max_size=3).map(lambda items: {"__tuple__": items}),
    ),
    max_leaves=10,
)


def twin(spec: Any) -> Any:
    """The same meaning written differently: ints as floats, keys and set members reversed,
    tuples as lists, lists as tuples."""
    if isinstance(spec, bool) or spec is None or isinstance(spec, str):
        return spec
    if isinstance(spec, int):
        return float(spec)
    if isinstance(spec, float):
        return int(spec) if spec.is_integer() and abs(spec) < 2**53 else spec
    if isinstance(spec, dict) and set(spec) == {"__set__"}:
        return {"__set__": [twin(m) if isinstance(m, str) else m for m in reversed(spec["__set__"])]}
    if isinstance(spec, dict) and set(spec) == {"__tuple__"}:
        return [twin(item) for item in spec["__tuple__"]]
    if isinstance(spec, dict):
        return {k: twin(spec[k]) for k in reversed(list(spec))}
    return {"__tuple__": [twin(item) for item in spec]}


def build(spec: Any) -> Any:
    """The Python value a spec describes (the worker's rule, so both sides build alike)."""
    return canonical_worker.build(spec, [])


def test_canonical_text_is_the_documented_rule() -> None:
    """Keys sorted (by UTF-16 units), numbers by value, sets sorted, tuples as arrays, -0 as 0."""
    assert canonical_payload("p", {"b": 500.0, "a": 500}) == '{"a":500,"b":500}'
    assert canonical_payload("p", {"s": {"b", "a", "c"}, "t": (1, 2.5)}) == '{"s":["a","b","c"],"t":[1,2.5]}'
    assert canonical_payload("p", [-0.0, 1e21, 0.1, True, None]) == "[0,1e+21,0.1,true,null]"
    assert canonical_payload("p", {"\U0001f600": 1, "\uffff": 2}) == '{"\U0001f600":1,"\uffff":2}'
    assert canonical_payload("p", 1.0) == canonical_payload("p", 1) != canonical_payload("p", True)


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ({"when": object()}, "arguments[\"when\"] is a object, not a JSON value"),
        ({"n": 10**30}, "64 signed bits"),
        ({"t": "x\ud800"}, "lone surrogate"),
        ({"k": float("nan")}, "nan"),
        ({1: "x"}, "key of type int"),
    ],
)
def test_a_payload_without_a_canonical_form_is_refused_naming_the_argument(value: Any, needle: str) -> None:
    """What JSON cannot mean is refused with the argument's path and what to send."""
    with pytest.raises(BadInput) as info:
        canonical_payload("arguments", value)
    assert needle in info.value.envelope["message"]


@pytest.fixture
def keys(store_url: str) -> IdempotencyKeys:
    return IdempotencyKeys(open_store(store_url), lease_seconds=30)


@FUZZ
@given(spec=specs, key=st.text(st.characters(codec="utf-8", blacklist_characters="\0"), min_size=1, max_size=20).filter(str.strip))
def test_a_canonical_twin_replays_and_a_different_payload_is_refused(keys: IdempotencyKeys, spec: Any, key: str) -> None:
    """The same meaning replays without running; a different amount with the same key is refused."""
    runs: list[int] = []

    @keys.idempotent(scope="ship")
    def ship(amount: int, details: Any, idempotency_key: str) -> dict[str, Any]:
        runs.append(1)
        return {"ok": True}

    key = f"{key}#{next(_fresh)}"  # the store outlives one example: a fresh key each time
    first = ship(500, build(spec), idempotency_key=key)
    assert first == {"ok": True} and runs == [1]
    again = ship(500.0, build(twin(spec)), idempotency_key=key)
    assert again["deduplicated"] is True and runs == [1]
    other = ship(501, build(spec), idempotency_key=key)
    assert other["error"] == c.OUTCOME_DUPLICATE_REQUEST and runs == [1]


def _run_worker(db: str, calls: list[dict[str, Any]], tmp: Path, seed: int) -> dict[str, Any]:
    calls_path, out_path = tmp / f"calls-{seed}.json", tmp / f"out-{seed}.json"
    calls_path.write_text(json.dumps(calls), encoding="utf-8")
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    subprocess.run([sys.executable, str(WORKER), db, str(calls_path), str(out_path)], env=env, check=True, timeout=120)
    result: dict[str, Any] = json.loads(out_path.read_text(encoding="utf-8"))
    return result


@pytest.mark.slow
def test_twins_replay_across_processes_with_different_hash_seeds(store_url: str, tmp_path: Path) -> None:
    """Process one books; processes with other PYTHONHASHSEEDs send canonical twins (replayed,
    nothing runs) and different payloads (refused). Set iteration order really differs."""
    tags = [f"tag-{i}" for i in range(40)]
    base = [
        {"key": f"k{i}", "amount": 500 + i, "tags": {"__set__": tags[i:]}, "meta": {"b": [1, 2], "a": {"x": i}}}
        for i in range(5)
    ]
    twins = [{**call, "amount": float(call["amount"]), "tags": {"__set__": list(reversed(call["tags"]["__set__"]))},
              "meta": {"a": call["meta"]["a"], "b": {"__tuple__": [1, 2.0]}}} for call in base]
    different = [{**call, "tags": {"__set__": tags[: len(call["tags"]["__set__"]) - 1]}} for call in base]
    db = store_url
    first = _run_worker(db, base, tmp_path, 1)
    assert first["runs"] == 5 and all(a == {"ok": True, "booking": f"b-k{i}"} for i, a in enumerate(first["answers"]))
    second = _run_worker(db, twins, tmp_path, 2)
    assert second["runs"] == 0
    assert all(a["deduplicated"] is True and a["booking"] == f"b-k{i}" for i, a in enumerate(second["answers"]))
    third = _run_worker(db, different, tmp_path, 3)
    assert third["runs"] == 0 and {a["error"] for a in third["answers"]} == {c.OUTCOME_DUPLICATE_REQUEST}
    assert first["set_orders"][0] != second["set_orders"][0]  # the same 40 tags, iterated in another order


def test_a_slow_call_keeps_its_key_while_it_runs(tmp_path: Path, telemetry_capture: Capture) -> None:
    """The heartbeat renews the lease: a call running past three leases is still in_progress to a
    concurrent retry, which does not run the write a second time."""
    keys = IdempotencyKeys(SQLiteStore(tmp_path / "guards.db"), lease_seconds=0.3, retry_after_seconds=0.05)
    runs: list[str] = []
    answers: list[dict[str, Any]] = []

    def lease_row() -> tuple[float, float]:
        row = keys.store.query_one("SELECT claimed_at, lease_until FROM guard_idempotency WHERE scope = 'slow'")
        assert row is not None
        return float(row[0]), float(row[1])

    @instrument_tool(name="slow_charge")
    @keys.idempotent(scope="slow")
    def slow_charge(amount: int, idempotency_key: str) -> dict[str, Any]:
        runs.append("run")
        claimed_at, _ = lease_row()
        deadline = time.monotonic() + 30  # bounded: the heartbeat renews every 0.1 s
        while time.monotonic() < deadline:
            _, lease_until = lease_row()
            if time.time() > claimed_at + 3 * 0.3 and lease_until > time.time():
                break  # three first leases have passed, and the claim is still alive
            time.sleep(0.02)
        retry = threading.Thread(target=lambda: answers.append(slow_charge(amount, idempotency_key=idempotency_key)))
        retry.start()
        retry.join(30)
        return {"ok": True}

    assert slow_charge(5, idempotency_key="k") == {"ok": True}
    assert runs == ["run"]
    assert answers[0]["error"] == c.OUTCOME_IN_PROGRESS and answers[0]["retry"] is True


def test_the_lease_runs_out_on_the_injected_clock(tmp_path: Path) -> None:
    """With a fake clock a dead holder's claim is taken over once the clock passes its lease."""
    now = [1_800_000_000.0]
    keys = IdempotencyKeys(SQLiteStore(tmp_path / "guards.db"), lease_seconds=60, clock=lambda: now[0])
    runs: list[int] = []

    @keys.idempotent(scope="pay")
    def pay(amount: int, idempotency_key: str) -> dict[str, Any]:
        runs.append(amount)
        return {"ok": True}

    with keys.store.transaction() as conn:  # a holder that died right after claiming, at the clock's now
        conn.execute(
            "INSERT INTO guard_idempotency (scope, key_hash, payload_hash, original_id, status, claimed_at, lease_until) "
            "VALUES ('pay', ?, ?, 'idem_dead', 'running', ?, ?)",
            (keys.hash("pay", "k"), keys.hash(canonical_payload("arguments", {"amount": 7})), now[0], now[0] + 60),
        )
    assert pay(7, idempotency_key="k")["error"] == c.OUTCOME_IN_PROGRESS and runs == []
    now[0] += 61
    assert pay(7, idempotency_key="k") == {"ok": True} and runs == [7]
