"""Benchmark: forensics over OTLP JSON lines versus Parquet versus a plain Python json.loads loop.

    python benchmarks/bench_forensics.py --spans 1000000

Generates the span set (a templated writer: realistic crew runs, 64 spans a line, a sprinkle of
planted incidents so every question has work), then measures in one run: the full ``report``
from JSON lines, ``ingest`` to Parquet, the ``report`` from Parquet, and a plain Python loop that
only ``json.loads`` every line. Prints a table and writes ``bench-output/forensics.json``.
Each step runs in a fresh process and reports its wall time, CPU seconds and peak RSS; each report
is also split into its steps (load, dedup, evidence, questions), each with its own peak RSS
(Linux: ``VmHWM``, reset between steps).
Targets: the JSON-lines report at most 0.5x the loop's wall time and 1x its CPU seconds; the
Parquet report at most 1.5 s at 1M spans (12 s at 10M); the JSON report's peak RSS at most 1 GB
whatever the span count.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import os
import random
import resource
import shutil
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from telemetry import conventions as c  # noqa: E402
from telemetry.forensics import ingest, open_traces  # noqa: E402

SPANS_PER_LINE = c.OTLP_SPANS_PER_LINE
AGENTS = ("planner", "researcher", "writer", "reviewer", "billing")


def _s(key: str, value: str) -> str:
    return '{"key":"%s","value":{"stringValue":"%s"}}' % (key, value)


def _i(key: str, value: int) -> str:
    return '{"key":"%s","value":{"intValue":"%d"}}' % (key, value)


def _a(key: str, values: list[str]) -> str:
    inner = ",".join('{"stringValue":"%s"}' % v for v in values)
    return '{"key":"%s","value":{"arrayValue":{"values":[%s]}}}' % (key, inner)


def _span(rng: random.Random, trace: str, run: str, n: int, t0: int, versions: dict[str, int]) -> str:
    """One tool span of a crew run, as OTLP JSON text. ``versions`` is the store: key -> version."""
    agent = AGENTS[n % len(AGENTS)]
    which = rng.random()
    outcome = c.OUTCOME_OK
    attrs = [_s(c.GEN_AI_CONVERSATION_ID, run), _s(c.GEN_AI_AGENT_ID, agent),
             _s(c.GEN_AI_OPERATION_NAME, c.OPERATION_EXECUTE_TOOL), _s(c.TOOL_TRANSPORT, c.TRANSPORT_OK)]
    key = f"account/{rng.randrange(5000)}"
    current = versions.get(key, 0)
    if which < 0.35:
        tool, kind = "read_state", c.KIND_READ
        attrs += [_s(c.STATE_KEY, key), _s(c.STATE_VERSION_READ, f"v{current}"),
                  _s(c.TOOL_READBACK, c.READBACK_NOT_APPLICABLE)]
    elif which < 0.65:
        tool, kind = "write_state", c.KIND_WRITE
        stale = current > 0 and rng.random() < 0.02
        expected = current - 1 if stale else current
        outcome = c.OUTCOME_REJECTED_STALE_VERSION if stale else c.OUTCOME_OK
        legacy = not stale and rng.random() < 0.05  # an unguarded write: no expected version
        attrs += [_s(c.STATE_KEY, key)]
        if not legacy:
            attrs += [_s(c.STATE_VERSION_EXPECTED, f"v{expected}"), _s(c.STATE_VERSION_CURRENT, f"v{current}")]
        attrs.append(_s(c.TOOL_READBACK, c.READBACK_MISMATCH if rng.random() < 0.005 else c.READBACK_MATCH))
        if not stale:
            versions[key] = current + 1
            attrs.append(_s(c.STATE_VERSION_WRITTEN, f"v{current + 1}"))
    elif which < 0.80:
        tool, kind = "send_email", c.KIND_SEND
        attrs += [_s(c.OBJECTIVE_TASK_ID, "policy-refunds"), _s(c.POLICY_VERSION, "3"),
                  _s(c.IDEMPOTENCY_KEY_HASH, f"k{n}"), _s(c.IDEMPOTENCY_PAYLOAD_HASH, f"p{n}"),
                  _s(c.TOOL_READBACK, c.READBACK_SKIPPED)]
    elif which < 0.92:
        tool, kind = "delegate", c.KIND_DELEGATE
        hop = 1 + n % 4
        carried = ["C1", "C2"] if rng.random() < 0.01 else ["C1", "C2", "C3"]
        attrs += [_s(c.DELEGATION_TASK_ID, f"{run}-t{n}"), _s(c.DELEGATION_ORIGIN_TASK_ID, f"{run}-t0"),
                  _s(c.DELEGATION_ROOT_TASK_ID, f"{run}-t0"), _i(c.DELEGATION_HOP, hop),
                  _a(c.DELEGATION_CONSTRAINTS_CARRIED, carried), _a(c.DELEGATION_CONSTRAINTS_WAIVED, []),
                  _s(c.TOOL_READBACK, c.READBACK_NOT_APPLICABLE)]
    else:
        tool, kind = "get_objective", c.KIND_READ
        attrs += [_s(c.OBJECTIVE_TASK_ID, "policy-refunds"), _s(c.OBJECTIVE_VERSION, "3"),
                  _s(c.TOOL_READBACK, c.READBACK_NOT_APPLICABLE)]
    attrs += [_s(c.GEN_AI_TOOL_NAME, tool), _s(c.TOOL_KIND, kind), _s(c.TOOL_OUTCOME, outcome)]
    status = '{"code":2,"message":"%s"}' % outcome if outcome != c.OUTCOME_OK else "{}"
    start = t0 + n * 1_000_000
    return ('{"traceId":"%s","spanId":"%016x","parentSpanId":"","name":"%s%s","kind":1,'
            '"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[%s],"status":%s}') % (
        trace, rng.getrandbits(64), c.SPAN_NAME_PREFIX, tool, start, start + 250_000, ",".join(attrs), status)


def _root(trace: str, run: str, n: int, t0: int) -> str:
    attrs = [_s(c.GEN_AI_CONVERSATION_ID, run), _s(c.GEN_AI_AGENT_ID, "planner"), _s(c.GEN_AI_TOOL_NAME, "register_task"),
             _s(c.TOOL_KIND, c.KIND_DELEGATE), _s(c.TOOL_TRANSPORT, c.TRANSPORT_OK), _s(c.TOOL_OUTCOME, c.OUTCOME_OK),
             _s(c.DELEGATION_TASK_ID, f"{run}-t0"), _s(c.DELEGATION_ROOT_TASK_ID, f"{run}-t0"), _i(c.DELEGATION_HOP, 0),
             _a(c.DELEGATION_CONSTRAINTS_CARRIED, ["C1", "C2", "C3"])]
    start = t0 + n * 1_000_000
    return ('{"traceId":"%s","spanId":"%016x","name":"%sregister_task","kind":1,"startTimeUnixNano":"%d",'
            '"endTimeUnixNano":"%d","attributes":[%s]}') % (trace, n, c.SPAN_NAME_PREFIX, start, start + 1000, ",".join(attrs))


def generate(path: Path, spans: int, seed: int = 7, t0: int = 1_700_000_000_000_000_000) -> int:
    """Write ``spans`` spans to ``path`` as OTLP JSON lines, from ``t0`` on; return the file size in bytes."""
    rng = random.Random(seed)
    head = ('{"resourceSpans":[{"resource":{"attributes":[%s]},"scopeSpans":[{"scope":{"name":"%s",'
            '"version":"0.1.0"},"spans":[') % (_s(c.SERVICE_NAME, "crew"), c.INSTRUMENTATION_SCOPE)
    tail = "]}]}]}\n"
    written = 0
    versions: dict[str, int] = {}
    with open(path, "w", encoding="utf-8", buffering=1 << 22) as out:
        while written < spans:
            batch = min(SPANS_PER_LINE, spans - written)
            run_no = written // 256
            trace = "%032x" % (run_no * 7919 + 1)
            run = f"run-{run_no}"
            spans_text = [_span(rng, trace, run, written + i, t0, versions) for i in range(batch)]
            if written % 256 == 0:  # each run starts by registering its root task
                spans_text[0] = _root(trace, run, written, t0)
            out.write(head + ",".join(spans_text) + tail)
            written += batch
    return path.stat().st_size


def _child(fn: Callable[[], Any], trace_python: bool, conn: Any) -> None:
    if trace_python:
        tracemalloc.start()
    started = time.perf_counter()
    cpu_started = time.process_time()
    try:
        value = fn()
    except BaseException as error:  # the parent would wait for a result forever
        conn.send(("failed", repr(error)))  # as text: not every exception pickles
        conn.close()
        raise
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    peak = tracemalloc.get_traced_memory()[1] if trace_python else None
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if isinstance(value, dict):  # a report split into steps resets the peak between them (others have none)
        rss = max([rss] + [int(s["peak_rss_mb"] * 1e6) for s in value.get("steps", [])])
    conn.send((seconds, cpu, value, peak, rss))
    conn.close()


def _measure(label: str, fn: Callable[[], Any], trace_python: bool = True) -> dict[str, Any]:
    """Run one step in a fresh (forked) process: its time, result, Python peak and max RSS.

    tracemalloc slows Python allocation several-fold, so the pure-Python loop runs without it
    (its Python peak is one line); DuckDB allocates outside Python, so RSS is the real figure.
    """
    gc.collect()
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child, args=(fn, trace_python, child))
    process.start()
    got = parent.recv()
    process.join()
    if got[0] == "failed":
        raise SystemExit(f"{label} failed in its process: {got[1]}")
    seconds, cpu, value, peak, rss = got
    print(f"  {label}: {seconds:.2f} s, {cpu:.2f} CPU s, max RSS {rss / 1e6:,.0f} MB", file=sys.stderr, flush=True)
    return {"step": label, "seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3),
            "python_peak_mb": round(peak / 1e6, 1) if peak is not None else None,
            "process_max_rss_mb": round(rss / 1e6, 1), "result": value}


def json_loads_loop(path: Path) -> int:
    """The baseline: read every line and json.loads it, counting spans."""
    count = 0
    with open(path, "rb") as handle:
        for line in handle:
            data = json.loads(line)
            for rs in data["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    count += len(ss["spans"])
    return count


def _peak_rss_kb(reset: bool = False) -> int:
    """This process's peak RSS so far (Linux ``VmHWM``); ``reset`` starts a new peak from now."""
    with open("/proc/self/status", encoding="ascii") as status:
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    if reset:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")  # resets VmHWM to the current RSS
    return peak


class _Steps:
    """Split one report into its steps from the loader's progress lines: wall, CPU and peak RSS each."""

    MARKS = (("read ", "load (read + structure checks)"), ("loaded ", "dedup"))

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        _peak_rss_kb(reset=True)

    def mark(self, step: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self.rows.append({"step": step, "seconds": round(wall - self._wall, 3), "cpu_seconds": round(cpu - self._cpu, 3),
                          "peak_rss_mb": round(_peak_rss_kb(reset=True) * 1024 / 1e6, 1)})
        self._wall, self._cpu = wall, cpu

    def progress(self, message: str) -> None:
        for prefix, step in self.MARKS:
            if message.startswith(prefix):
                self.mark(step)


def _report(paths: list[Path]) -> dict[str, Any]:
    steps = _Steps()
    with open_traces(paths, progress=steps.progress) as traces:
        steps.mark("evidence (kinds, chains, clock skew)")
        findings = sum(s.count for s in traces.report().sections)
        steps.mark(f"{len(traces.questions)} questions")
    return {"rows": findings, "steps": steps.rows}


def span_file_arguments(description: str, output: str, argv: list[str]) -> argparse.Namespace:
    """The options of a benchmark over one generated span file: --spans, --workdir, --output."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=1_000_000, help="spans to generate (default 1,000,000)")
    parser.add_argument("--workdir", type=Path, default=None, help="where to write the data (default: a temp dir)")
    parser.add_argument("--output", type=Path, default=Path(output))
    return parser.parse_args(argv)


def generated_file(args: argparse.Namespace, prefix: str) -> tuple[Path, Path, int]:
    """Generate ``args.spans`` spans into ``traces.jsonl`` of the work folder: (folder, file, bytes)."""
    work = args.workdir or Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    source = work / "traces.jsonl"
    print(f"generating {args.spans:,} spans in {source}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    size = generate(source, args.spans)
    print(f"  generated {size / 1e6:,.0f} MB in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return work, source, size


def write_result(args: argparse.Namespace, work: Path, result: dict[str, Any]) -> int:
    """Write ``result`` to ``args.output`` and remove the generated data unless --workdir kept it."""
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def main(argv: list[str]) -> int:
    args = span_file_arguments(__doc__ or "", "bench-output/forensics.json", argv)
    work, source, size = generated_file(args, "bench-forensics-")
    parquet_dir = work / "parquet"
    shutil.rmtree(parquet_dir, ignore_errors=True)
    load_start = [round(x, 2) for x in os.getloadavg()]  # the machine may be shared: say how busy it was
    steps = [
        _measure("python json.loads loop", lambda: json_loads_loop(source), trace_python=False),
        _measure("report from JSON lines", lambda: _report([source]), trace_python=False),
        _measure("ingest to Parquet", lambda: ingest([source], parquet_dir).spans),
        _measure("report from Parquet", lambda: _report([parquet_dir]), trace_python=False),
    ]
    base = steps[0]["seconds"]
    for step in steps:
        step["ratio_to_python_loop"] = round(step["seconds"] / base, 3) if base else None
    result = {
        "spans": args.spans, "json_bytes": size, "spans_per_line": SPANS_PER_LINE, "cpus": os.cpu_count(),
        "load_average": {"start": list(load_start), "end": [round(x, 2) for x in os.getloadavg()]},
        "steps": steps,
        "targets": {
            "json_report_at_most_half_the_loop_wall": steps[1]["seconds"] <= 0.5 * base,
            "json_report_cpu_at_most_the_loop_cpu": steps[1]["cpu_seconds"] <= steps[0]["cpu_seconds"],
            "parquet_report_within": steps[3]["seconds"] <= (1.5 if args.spans <= 1_000_000 else 12.0),
            "json_report_peak_rss_at_most_1gb": steps[1]["process_max_rss_mb"] <= 1000,
        },
    }
    print(f"\n{'step':<40}{'seconds':>9}{'CPU s':>8}{'x loop':>8}{'max RSS MB':>12}")
    for step in steps:
        print(f"{step['step']:<40}{step['seconds']:>9.2f}{step['cpu_seconds']:>8.2f}{step['ratio_to_python_loop']:>8.2f}"
              f"{step['process_max_rss_mb']:>12.1f}")
        for inner in step["result"]["steps"] if isinstance(step["result"], dict) else []:
            print(f"{'  ' + inner['step']:<40}{inner['seconds']:>9.2f}{inner['cpu_seconds']:>8.2f}{'':>8}"
                  f"{inner['peak_rss_mb']:>12.1f}")
    print("targets:", json.dumps(result["targets"]))
    print("load average (1, 5, 15 min) at start:", load_start, "at end:", result["load_average"]["end"])
    return write_result(args, work, result)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
