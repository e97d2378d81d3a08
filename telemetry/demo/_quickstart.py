"""A small, self-contained example run: three tools, one 200 that did the wrong thing.

``outcome-telemetry quickstart`` runs it. It shows the three separate successes on real spans
and counters: a write whose read-back matches, a write that returned but whose read-back shows
it did not persist as sent, and a bulk update that returned ok while missing its target set.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any, TextIO

from .. import conventions as c
from ..instrument import agent, instrument_tool
from ..runtime import configure

__all__ = ["run"]


def run(out_dir: Path, *, stream: TextIO | None = None) -> dict[str, Any]:
    """Run the example into ``out_dir``; return where the traces went and what was counted.

    It prints to ``stream``, by default the ``sys.stdout`` of the moment it runs.
    """
    stream = sys.stdout if stream is None else stream
    store: dict[str, str] = {}
    cache: dict[str, str] = {}

    @instrument_tool(kind="write", readback=lambda call, result: store.get(call.arguments["key"]) == call.arguments["value"])
    def save_note(key: str, value: str) -> dict[str, Any]:
        """Persists as sent: read-back matches."""
        store[key] = value
        return {"ok": True}

    @instrument_tool(kind="write", readback=lambda call, result: store.get(call.arguments["key"]) == call.arguments["value"])
    def save_note_lossy(key: str, value: str) -> dict[str, Any]:
        """Answers 200 but truncates what it stores: read-back mismatch."""
        store[key] = value[:10]
        cache[key] = value
        return {"ok": True, "status_code": 200}

    @instrument_tool(kind="write", outcome=lambda call, result: None if result["changed"] == len(call.arguments["wanted"]) else c.OUTCOME_POSTCONDITION_FAILED)
    def reprice(wanted: list[str], discount: float) -> dict[str, Any]:
        """Reprices a collection, but the wrong one: every write ok, the set is wrong."""
        return {"ok": True, "changed": len(wanted) + 3}

    with configure(service_name="quickstart", traces_dir=out_dir / "traces") as rt:
        with agent("planner", conversation_id="quickstart-run"):
            save_note("plan", "reprice the summer collection")
            save_note_lossy("brief", "a brief that is longer than ten characters")
            reprice(["sku-1", "sku-2"], 0.2)
        metrics = rt.metrics_text(openmetrics=False)
    lines = [ln for ln in metrics.splitlines() if ln.startswith(c.METRIC_TOOL_CALLS_TOTAL + "{")]
    print(f"traces written to {rt.trace_file}", file=stream)
    print("tool_calls_total after three calls that all returned:", file=stream)
    for line in lines:
        print("  " + line, file=stream)
    print(f"next: outcome-telemetry forensics report {shlex.quote(str(out_dir / 'traces'))}", file=stream)
    return {"trace_file": rt.trace_file, "metrics": lines}
