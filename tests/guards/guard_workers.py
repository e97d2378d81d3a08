"""Processes for the guards' multi-process tests: each opens its own store on the shared database.

Workers write what they saw as JSON to their own file, so the parent never blocks on a pipe.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from telemetry import conventions as c
from telemetry import instrument_tool
from telemetry.guards import IdempotencyKeys, StateStore, open_store
from telemetry.testing import capture

WAIT_SECONDS = 60.0
COUNTER_KEY = "counter"


def hammer(db: str, threads: int, increments: int, out_path: str, start: Any) -> None:
    """``threads`` threads each add 1 to the counter ``increments`` times by read-modify-write."""
    state = StateStore(open_store(db))
    seen = {"accepted": 0, "rejected": 0, "unexpected": 0}
    lock = threading.Lock()

    def loop(name: str) -> None:
        done = 0
        while done < increments:
            read = state.read_state(COUNTER_KEY, agent_id=name)
            result = state.write_state(COUNTER_KEY, read["value"] + 1, read["version"], agent_id=name)
            with lock:
                if result["ok"]:
                    seen["accepted"] += 1
                    done += 1
                elif result["error"] == c.OUTCOME_REJECTED_STALE_VERSION:
                    seen["rejected"] += 1
                else:
                    seen["unexpected"] += 1
                    return

    with capture() as cap:
        start.wait(WAIT_SECONDS)
        workers = [threading.Thread(target=loop, args=(f"p{os.getpid()}-t{i}",)) for i in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        counted = cap.sample(
            c.METRIC_GUARD_REFUSALS_TOTAL,
            {c.LABEL_TOOL: "write_state", c.LABEL_REASON: c.OUTCOME_REJECTED_STALE_VERSION},
        )
        seen["counted_rejections"] = int(counted or 0)
        seen["counted_ok"] = int(cap.calls("write_state", outcome=c.OUTCOME_OK))
    with open(out_path, "w", encoding="utf-8") as out:
        json.dump(seen, out)


def replay_charge(db: str, key: str, runs_path: str, out_path: str, start: Any) -> None:
    """Call one keyed, slow, non-idempotent charge until it answers with something other than in_progress."""
    keys = IdempotencyKeys(open_store(db), retry_after_seconds=0.05)

    @instrument_tool(name="charge_card", kind=c.KIND_WRITE)
    @keys.idempotent()
    def charge_card(amount_cents: int, idempotency_key: str) -> dict[str, Any]:
        with open(runs_path, "a", encoding="utf-8") as runs:
            runs.write(f"{os.getpid()}\n")
        time.sleep(0.4)
        return {"ok": True, "charge_id": f"ch_{os.getpid()}", "amount_cents": amount_cents}

    answers: list[dict[str, Any]] = []
    with capture() as cap:
        start.wait(WAIT_SECONDS)
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            result = charge_card(1200, idempotency_key=key)
            answers.append(result)
            if result.get("error") != c.OUTCOME_IN_PROGRESS:
                break
            time.sleep(result["retry_after_seconds"])
        replays = cap.sample(c.METRIC_IDEMPOTENT_REPLAYS_TOTAL, {c.LABEL_TOOL: "charge_card"})
        in_progress = cap.sample(
            c.METRIC_GUARD_REFUSALS_TOTAL, {c.LABEL_TOOL: "charge_card", c.LABEL_REASON: c.OUTCOME_IN_PROGRESS}
        )
    with open(out_path, "w", encoding="utf-8") as out:
        json.dump({"answers": answers, "replays": replays or 0, "in_progress_counted": in_progress or 0}, out)


def crash_holding_claim(db: str, key: str, start: Any) -> None:
    """Claim ``key`` and die inside the tool, as a process killed mid-write would."""
    keys = IdempotencyKeys(open_store(db), lease_seconds=600)

    @keys.idempotent(scope="crashy")
    def crashy_write(n: int, idempotency_key: str) -> dict[str, Any]:
        os._exit(3)

    start.wait(WAIT_SECONDS)
    crashy_write(1, idempotency_key=key)
