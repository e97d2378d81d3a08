"""Run keyed calls from a JSON file in a fresh interpreter (the test sets its PYTHONHASHSEED).

``python canonical_worker.py DB CALLS OUT``: CALLS is ``[{"amount": spec, "tags": spec,
"meta": spec, "key": str}]`` where a spec ``{"__set__": [...]}`` becomes a Python set,
``{"__tuple__": [...]}`` a tuple, anything else itself. OUT receives each answer and the
iteration order of every set this process built (proof that the hash seed changed it).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from telemetry import conventions as c
from telemetry import instrument_tool
from telemetry.guards import IdempotencyKeys, open_store


def build(spec: Any, orders: list[list[Any]]) -> Any:
    if isinstance(spec, dict) and set(spec) == {"__set__"}:
        members = {build(item, orders) for item in spec["__set__"]}
        orders.append(list(members))
        return members
    if isinstance(spec, dict) and set(spec) == {"__tuple__"}:
        return tuple(build(item, orders) for item in spec["__tuple__"])
    if isinstance(spec, dict):
        return {k: build(v, orders) for k, v in spec.items()}
    if isinstance(spec, list):
        return [build(item, orders) for item in spec]
    return spec


def main(db: str, calls_path: str, out_path: str) -> None:
    keys = IdempotencyKeys(open_store(db))
    runs: list[int] = []

    @instrument_tool(name="book_shipment", kind=c.KIND_WRITE)
    @keys.idempotent(scope="book_shipment")
    def book_shipment(amount: Any, tags: Any, meta: Any, idempotency_key: str) -> dict[str, Any]:
        runs.append(1)
        return {"ok": True, "booking": f"b-{idempotency_key}"}

    with open(calls_path, encoding="utf-8") as f:
        calls = json.load(f)
    orders: list[list[Any]] = []
    answers = []
    for call in calls:
        args = {name: build(call[name], orders) for name in ("amount", "tags", "meta")}
        answers.append(book_shipment(**args, idempotency_key=call["key"]))
    with open(out_path, "w", encoding="utf-8") as out:
        json.dump({"answers": answers, "runs": len(runs), "set_orders": orders}, out)


if __name__ == "__main__":
    main(*sys.argv[1:4])
