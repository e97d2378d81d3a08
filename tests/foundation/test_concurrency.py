"""Under threads and asyncio tasks, counters are exact and every span reaches the file."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import telemetry
from telemetry import conventions as c


def spans_in(directory: Path) -> list[str]:
    """Span ids of every span in the directory's files; each line must parse as OTLP."""
    ids = []
    for path in directory.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            request = json_format.Parse(line, ExportTraceServiceRequest())
            ids.extend(s.span_id.hex() for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans)
    data = [json.loads(ln) for p in directory.glob("*.jsonl") for ln in p.read_text().splitlines()]
    assert all("resourceSpans" in d for d in data)
    return ids


def test_eight_threads_thousand_calls_each(tmp_path: Path) -> None:
    """8 threads x 1,000 calls: exact counters per outcome, 8,000 distinct spans in the file."""

    @telemetry.instrument_tool
    def write(i: int) -> dict[str, object]:
        return {"ok": True} if i % 4 else {"ok": False, "error": "rejected_stale_version"}

    def worker(agent: str) -> None:
        with telemetry.agent(agent):
            for i in range(1000):
                write(i)

    rt = telemetry.configure(service_name="threads", traces_dir=tmp_path)
    threads = [threading.Thread(target=worker, args=(f"agent-{n}",)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    registry = rt.registry
    rt.shutdown()
    base = {"tool": "write", "transport": "ok", "readback": "skipped"}
    assert registry.get_sample_value(c.METRIC_TOOL_CALLS_TOTAL, {**base, "outcome": "ok"}) == 6000
    assert registry.get_sample_value(c.METRIC_TOOL_CALLS_TOTAL, {**base, "outcome": "rejected_stale_version"}) == 2000
    assert registry.get_sample_value(c.METRIC_GUARD_REFUSALS_TOTAL, {"tool": "write", "reason": "rejected_stale_version"}) == 2000
    assert registry.get_sample_value(c.METRIC_TOOL_CALL_DURATION + "_count", {"tool": "write"}) == 8000
    ids = spans_in(tmp_path)
    assert len(ids) == 8000 and len(set(ids)) == 8000


def test_thousand_concurrent_asyncio_tasks(tmp_path: Path) -> None:
    """1,000 concurrent tasks, each awaiting inside the tool: exact counts, every span written."""

    @telemetry.instrument_tool(kind="read")
    async def fetch(i: int) -> int:
        await asyncio.sleep(0.001)
        return i

    async def main() -> list[int]:
        return await asyncio.gather(*(fetch(i) for i in range(1000)))

    rt = telemetry.configure(service_name="tasks", traces_dir=tmp_path)
    assert asyncio.run(main()) == list(range(1000))
    registry = rt.registry
    rt.shutdown()
    labels = {"tool": "fetch", "transport": "ok", "readback": "not_applicable", "outcome": "ok"}
    assert registry.get_sample_value(c.METRIC_TOOL_CALLS_TOTAL, labels) == 1000
    ids = spans_in(tmp_path)
    assert len(set(ids)) == 1000
