"""Benchmark: forensics from ClickHouse ``otel_traces`` versus from the same spans as JSON lines.

    python benchmarks/bench_clickhouse.py --spans 1000000

Generates the forensics benchmark's crew spans (recent times), loads them into the Collector
clickhouseexporter's table in a chDB data directory, then runs the whole report three ways, each
in a fresh process: from JSON lines (what a team would do instead: export to files first, not
counting the export), from ClickHouse with chDB in process, and over HTTP through
clickhouse-connect from a loopback server that answers from chDB in another process (so the
client's peak RSS is the client's alone). Prints a table; writes ``bench-output/clickhouse.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE), str(HERE.parent / "tests" / "forensics")]

from bench_forensics import _measure, generate  # noqa: E402
from telemetry.forensics import open_clickhouse, open_traces  # noqa: E402

_EXPORT = """
COPY (
    SELECT CAST(start_time_unix_nano AS BIGINT) AS ts, trace_id AS TraceId, span_id AS SpanId,
           coalesce(parent_span_id, '') AS ParentSpanId, name AS SpanName, 'Internal' AS SpanKind,
           coalesce(service_name, '') AS ServiceName, coalesce(scope_name, '') AS ScopeName,
           coalesce(scope_version, '') AS ScopeVersion,
           MAP(attribute_keys, list_transform(range(1, len(attribute_keys) + 1), lambda i:
               coalesce(attribute_values[i], CAST(to_json(attribute_arrays[i]) AS VARCHAR)))) AS SpanAttributes,
           CAST(end_time_unix_nano - start_time_unix_nano AS UBIGINT) AS Duration,
           CASE status_code WHEN 'error' THEN 'Error' WHEN 'ok' THEN 'Ok' ELSE 'Unset' END AS StatusCode,
           coalesce(status_message, '') AS StatusMessage
    FROM spans_base
) TO '{target}' (FORMAT parquet)
"""

_LOAD = """
import sys
sys.path[:0] = {paths!r}
import clickhouse_connect
from clickhouse_support import create
client = clickhouse_connect.get_client(dsn="chdb://{engine}")
create(client)
client.command("INSERT INTO otel.otel_traces (Timestamp, TraceId, SpanId, ParentSpanId, SpanName, SpanKind, "
               "ServiceName, ScopeName, ScopeVersion, SpanAttributes, Duration, StatusCode, StatusMessage) "
               "SELECT fromUnixTimestamp64Nano(ts), TraceId, SpanId, ParentSpanId, SpanName, SpanKind, ServiceName, "
               "ScopeName, ScopeVersion, SpanAttributes, Duration, StatusCode, StatusMessage "
               "FROM file('{parquet}', Parquet)")
print(client.query("SELECT count() FROM otel.otel_traces").result_rows[0][0])
"""

_SERVE = """
import sys, time
sys.path[:0] = {paths!r}
from chdb_http import ChdbHttpServer, session_for
session = session_for("{engine}")
with ChdbHttpServer(session, "reader", "bench") as server:
    print(server.port, flush=True)
    sys.stdin.read()
session.close()
"""


def _report_clickhouse(url: str) -> dict[str, Any]:
    with open_clickhouse(url, last="2d", max_spans=50_000_000) as traces:
        findings = sum(s.count for s in traces.report().sections)
        return {"findings": findings, "spans": traces.load_report.spans, "load_s": round(traces.load_report.seconds, 3)}


def _report_files(path: Path) -> dict[str, Any]:
    with open_traces([path]) as traces:
        findings = sum(s.count for s in traces.report().sections)
        return {"findings": findings, "spans": traces.load_report.spans, "load_s": round(traces.load_report.seconds, 3)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=1_000_000, help="spans to generate (default 1,000,000)")
    parser.add_argument("--output", type=Path, default=Path("bench-output/clickhouse.json"))
    args = parser.parse_args(argv)
    # Only looked up, not imported: chDB must start in the measured (forked) process, not before the fork.
    if importlib.util.find_spec("chdb") is None or importlib.util.find_spec("clickhouse_connect") is None:
        print("bench_clickhouse needs outcome-telemetry[chdb] (pip install -e '.[dev]')", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="bench-clickhouse-"))
    paths = [str(HERE.parent), str(HERE.parent / "tests" / "forensics")]
    try:
        source, parquet, engine = work / "traces.jsonl", work / "spans.parquet", work / "engine"
        t0 = time.time_ns() - 3600 * 10**9
        print(f"generating {args.spans:,} spans", file=sys.stderr, flush=True)
        generate(source, args.spans, t0=t0)
        with open_traces([source]) as traces:
            traces.connection.execute(_EXPORT.format(target=parquet)).fetchall()
        loaded = subprocess.run([sys.executable, "-c", _LOAD.format(paths=paths, engine=engine, parquet=parquet)],
                                check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        print(f"  loaded {int(loaded):,} rows into otel.otel_traces", file=sys.stderr, flush=True)
        steps = [_measure("report from JSON lines", lambda: _report_files(source)),
                 _measure("report from chDB in process", lambda: _report_clickhouse(f"chdb://{engine}"))]
        server = subprocess.Popen([sys.executable, "-c", _SERVE.format(paths=paths, engine=engine)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            port = int(server.stdout.readline())
            os.environ["CLICKHOUSE_PASSWORD"] = "bench"
            steps.append(_measure("report over HTTP", lambda: _report_clickhouse(f"http://reader@127.0.0.1:{port}/otel")))
        finally:
            assert server.stdin is not None
            server.stdin.close()
            server.wait(timeout=60)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = steps[0]["seconds"]
    for step in steps:
        step["ratio_to_json_lines"] = round(step["seconds"] / base, 3) if base else None
        step["seconds_per_million_spans"] = round(step["seconds"] / (args.spans / 1e6), 3)
    same = len({(s["result"]["findings"], s["result"]["spans"]) for s in steps}) == 1
    result = {"spans": args.spans, "cpus": os.cpu_count(), "steps": steps, "same_answers": same}
    print(f"\n{'step':<30}{'seconds':>9}{'CPU s':>8}{'load s':>8}{'x JSON':>8}{'py peak MB':>11}{'max RSS MB':>12}")
    for s in steps:
        print(f"{s['step']:<30}{s['seconds']:>9.2f}{s.get('cpu_seconds', 0):>8.2f}{s['result']['load_s']:>8.2f}"
              f"{s['ratio_to_json_lines']:>8.2f}{s['python_peak_mb'] or 0:>11.1f}{s['process_max_rss_mb']:>12.1f}")
    print("same findings and spans on every path:", same)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
