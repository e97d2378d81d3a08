"""Benchmark: forensics from ClickHouse ``otel_traces`` versus from the same spans as JSON lines.

    python benchmarks/bench_clickhouse.py --spans 200000 1000000     # the default; --table-rows 0 skips the big table

For each span count: generates the forensics benchmark's crew spans (recent times), loads them
into the Collector clickhouseexporter's table in a chDB data directory, then runs the whole report
three ways, each in a fresh process: from JSON lines (what a team would do instead: export to
files first, not counting the export), from ClickHouse with chDB in process, and over HTTP through
clickhouse-connect from a loopback server that answers from chDB in another process (so the
client's peak RSS is the client's alone, and the server's own CPU and the rows it read are
measured apart). The stand-in server shares the reader's cores, which a real server would not, so
the HTTP report runs once more against a server that replays the answer it sent the first time
(``answer replayed``): the reader's own cost. Beside them: the generated SELECT alone in process,
and the granules its main read selects (``EXPLAIN indexes = 1``). Every ClickHouse read names the
same window, the one the spans lie in.

Then the largest span set is loaded into a second table and copied in it, shifted six hours at a
time into the past as other runs, until it holds ``--table-rows`` rows (ten times the spans by default: 10M for
1M), its parts merged, and the same window is read from both tables in alternating rounds: what a
window of a big table costs against the same spans alone in a table.

Prints a table per size and writes ``bench-output/clickhouse.json`` (the largest size's steps at the
top level, every size under ``sizes``, the table-scale read under ``table_scale``).
Targets (issue 30): at 1M spans each ClickHouse report at most 0.6x the JSON-lines report's wall
time; the 1M-span window of a 10M-row table at most 1.3x the same spans alone.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE), str(HERE.parent / "tests" / "forensics")]

from telemetry.forensics import open_clickhouse, open_traces  # noqa: E402
from telemetry.forensics.clickhouse import iso  # noqa: E402

from bench_forensics import _measure, generate  # noqa: E402

REPLAYED = "report over HTTP, answer replayed"
"""The HTTP report whose server sends an answer it already holds: the reader's own cost, which a
server on a machine of its own would leave it (not the issue's measure: that is the report over HTTP)."""
SPAN_NS = 1_000_000
"""The generator starts a span every millisecond."""
SHIFT_HOURS = 6
"""How far apart the copies of the span set lie in the big table (more than the run padding; less
when there are more than nine copies, so that all of them stay inside the exporter's 3-day TTL)."""

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
client.command("OPTIMIZE TABLE otel.otel_traces FINAL")
print(client.query("SELECT count() FROM otel.otel_traces").result_rows[0][0])
"""

_GROW = """
import sys
sys.path[:0] = {paths!r}
import clickhouse_connect
client = clickhouse_connect.get_client(dsn="chdb://{engine}")
columns = ("Timestamp, TraceId, SpanId, ParentSpanId, TraceState, SpanName, SpanKind, ServiceName, "
           "ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes, Duration, StatusCode, StatusMessage")
for copy in range(1, {copies} + 1):
    client.command(
        f"INSERT INTO otel.otel_traces ({{columns}}) SELECT Timestamp - toIntervalHour({shift} * {{copy}}), "
        f"concat(leftPad(hex({{copy}}), 4, '0'), substring(TraceId, 5)), SpanId, ParentSpanId, TraceState, SpanName, "
        f"SpanKind, ServiceName, ResourceAttributes, ScopeName, ScopeVersion, "
        f"mapUpdate(SpanAttributes, map('gen_ai.conversation.id', concat(SpanAttributes['gen_ai.conversation.id'], "
        f"'-copy{{copy}}'))), Duration, StatusCode, StatusMessage "
        f"FROM otel.otel_traces WHERE Timestamp >= fromUnixTimestamp64Nano({since}) "
        f"AND Timestamp < fromUnixTimestamp64Nano({until})")
client.command("OPTIMIZE TABLE otel.otel_traces FINAL")
print(client.query("SELECT count() FROM otel.otel_traces").result_rows[0][0])
"""

_SERVE = """
import json, sys
sys.path[:0] = {paths!r}
from chdb_http import ChdbHttpServer, session_for
session = session_for("{engine}")
with ChdbHttpServer(session, "reader", "bench", path="{engine}", replay={replay}) as server:
    print(server.port, flush=True)
    sys.stdin.read()
    spans = [r for r in server.requests if "mapFilter" in r["sql"] and "seconds" in r]
    last = spans[-1] if spans else {{}}
    cost = {{k: last[k] for k in ("seconds", "cpu_seconds", "read_rows", "read_bytes") if k in last}}
    print(json.dumps(cost), flush=True)
session.close()
"""

_SELECT_ALONE = """
import sys, time
sys.path[:0] = {paths!r}
import chdb.session
from telemetry.forensics.clickhouse._parameters import chdb_parameters
from telemetry.forensics.clickhouse._select import ReadWindow, spans_select
select = spans_select("otel", "otel_traces", ReadWindow({since}, {until}), 10**9)
query, params = select.sql, chdb_parameters(select.parameters, select.types)
session = chdb.session.Session("{engine}")
plan = session.query("EXPLAIN indexes = 1 " + query, "TSVRaw", params=params).bytes().decode()
started, cpu = time.perf_counter(), time.process_time()
result = session.query(query, "{fmt}", params=params)
print(time.perf_counter() - started, time.process_time() - cpu, result.storage_rows_read(), flush=True)
print(plan, flush=True)
session.close()
"""


def _digest(traces: Any) -> str:
    """The report's answers (each question's row count and examples), as one hash."""
    sections = [(s.question.name, s.count, s.examples) for s in traces.report().sections]
    return hashlib.sha256(json.dumps(sections, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _report_clickhouse(url: str, since: str, until: str) -> dict[str, Any]:
    with open_clickhouse(url, since=since, until=until, max_spans=50_000_000) as traces:
        return {"answers": _digest(traces), "spans": traces.load_report.spans,
                "load_s": round(traces.load_report.seconds, 3)}


def _report_files(path: Path) -> dict[str, Any]:
    with open_traces([path]) as traces:
        return {"answers": _digest(traces), "spans": traces.load_report.spans,
                "load_s": round(traces.load_report.seconds, 3)}


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout


def _select_alone(paths: list[str], engine: Path, since_ns: int, until_ns: int) -> dict[str, Any]:
    """The generated SELECT alone in a fresh process (no output), and what its main read selects."""
    out = _run(_SELECT_ALONE.format(paths=paths, engine=engine, since=since_ns, until=until_ns, fmt="Null"))
    first, plan = out.split("\n", 1)
    seconds, cpu, rows = first.split()
    granules = re.search(r"Parts: \d+ \| Granules: (\d+)", plan)
    total = re.search(r"Granules: \d+/(\d+)", plan)
    return {"step": "SELECT alone, in process", "seconds": round(float(seconds), 3),
            "cpu_seconds": round(float(cpu), 3), "rows_read": int(rows),
            "granules": int(granules.group(1)) if granules else None,
            "granules_total": int(total.group(1)) if total else None}


def _over_http(paths: list[str], engine: Path, label: str, since: str, until: str,
               replay: bool = False) -> dict[str, Any]:
    """The report over HTTP from a loopback server in another process, with the server's own cost.

    ``replay``: a first, unmeasured report has the server keep its streamed answer, and the
    measured one gets those bytes again without the engine, so it shows what the reader alone
    costs, as with a server on a machine of its own that already holds the answer."""
    server = subprocess.Popen([sys.executable, "-c", _SERVE.format(paths=paths, engine=engine, replay=replay)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdin is not None
        port = int(server.stdout.readline())
        os.environ["CLICKHOUSE_PASSWORD"] = "bench"
        url = f"http://reader@127.0.0.1:{port}/otel"
        if replay:
            _measure(f"{label} (kept by the server)", lambda: _report_clickhouse(url, since, until))
        step = _measure(label, lambda: _report_clickhouse(url, since, until))
        server.stdin.close()
        step["server"] = json.loads(server.stdout.readline() or "{}")
    finally:
        server.wait(timeout=120)
    return step


def _size(n: int, work: Path, paths: list[str], rounds: int) -> dict[str, Any]:
    """Every step at ``n`` spans (the best of ``rounds`` alternating rounds for each report)."""
    source, parquet, engine = work / f"traces-{n}.jsonl", work / f"spans-{n}.parquet", work / f"engine-{n}"
    t0 = time.time_ns() - 3600 * 10**9
    print(f"generating {n:,} spans", file=sys.stderr, flush=True)
    generate(source, n, t0=t0)
    with open_traces([source]) as traces:
        traces.connection.execute(_EXPORT.format(target=parquet)).fetchall()
    loaded = int(_run(_LOAD.format(paths=paths, engine=engine, parquet=parquet)).strip().splitlines()[-1])
    print(f"  loaded {loaded:,} rows into otel.otel_traces", file=sys.stderr, flush=True)
    since_ns, until_ns = t0 - 10**9, t0 + n * SPAN_NS + 10**9
    since, until = iso(since_ns), iso(until_ns)
    reports: dict[str, list[dict[str, Any]]] = {}
    for _ in range(rounds):
        measured: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            ("report from JSON lines", lambda: _measure("report from JSON lines", lambda: _report_files(source))),
            ("report from chDB in process", lambda: _measure(
                "report from chDB in process", lambda: _report_clickhouse(f"chdb://{engine}", since, until))),
            ("report over HTTP", lambda: _over_http(paths, engine, "report over HTTP", since, until)),
            (REPLAYED, lambda: _over_http(paths, engine, REPLAYED, since, until, replay=True)),
        ]
        for label, measure in measured:
            reports.setdefault(label, []).append(measure())
    steps = [min(runs, key=lambda s: s["seconds"]) for runs in reports.values()]
    steps.append(_select_alone(paths, engine, since_ns, until_ns))
    base = steps[0]
    for step in steps:
        step["ratio_to_json_lines"] = round(step["seconds"] / base["seconds"], 3) if base["seconds"] else None
        step["cpu_ratio_to_json_lines"] = (round(step["cpu_seconds"] / base["cpu_seconds"], 3)
                                           if base["cpu_seconds"] else None)
    answers = {(s["result"]["answers"], s["result"]["spans"]) for s in steps if "result" in s}
    return {"spans": n, "engine": str(engine), "parquet": str(parquet), "since_ns": since_ns, "until_ns": until_ns,
            "steps": steps,
            "same_answers": len(answers) == 1}


def _table_scale(size: dict[str, Any], rows: int, paths: list[str], rounds: int) -> dict[str, Any]:
    """The largest size's window again, in a copy of its table grown to ``rows`` rows (copies of its
    runs, merged as a settled table's parts are), measured in alternating rounds with the table
    that holds the spans alone (the best of each counts)."""
    n, alone_engine = size["spans"], Path(size["engine"])
    engine = alone_engine.with_name(alone_engine.name + "-big")
    _run(_LOAD.format(paths=paths, engine=engine, parquet=size["parquet"]))  # a chDB directory cannot be copied
    copies = max(0, -(-rows // n) - 1)
    print(f"copying the {n:,} spans {copies} times into a second table of them", file=sys.stderr, flush=True)
    shift = max(2, min(SHIFT_HOURS, 60 // max(copies, 1)))
    total = int(_run(_GROW.format(paths=paths, engine=engine, copies=copies, shift=shift,
                                  since=size["since_ns"], until=size["until_ns"])).strip().splitlines()[-1])
    print(f"  the table holds {total:,} rows", file=sys.stderr, flush=True)
    since, until = iso(size["since_ns"]), iso(size["until_ns"])
    runs: dict[str, list[dict[str, Any]]] = {}
    for _ in range(rounds):
        for where, label in ((alone_engine, "the spans alone"), (engine, "big table")):
            url = f"chdb://{where}"
            for step in (_measure(f"report from chDB in process, {label}",
                                  lambda: _report_clickhouse(url, since, until)),  # noqa: B023 (called at once)
                         _over_http(paths, where, f"report over HTTP, {label}", since, until)):
                runs.setdefault(step["step"], []).append(step)
            select = _select_alone(paths, where, size["since_ns"], size["until_ns"])
            select["step"] = f"SELECT alone, in process, {label}"
            runs.setdefault(select["step"], []).append(select)
    best = {name: min(steps, key=lambda s: s["seconds"]) for name, steps in runs.items()}
    steps = [step for name, step in best.items() if name.endswith("big table")]
    for step in steps:
        alone = best[step["step"].replace("big table", "the spans alone")]
        step["ratio_to_the_spans_alone"] = round(step["seconds"] / alone["seconds"], 3)
        step["cpu_ratio_to_the_spans_alone"] = round(step["cpu_seconds"] / alone["cpu_seconds"], 3)
    answers = {s["result"]["answers"] for s in best.values() if "result" in s}
    return {"rows": total, "window_spans": n, "steps": steps,
            "spans_alone": [s for name, s in best.items() if name.endswith("alone")],
            "same_answers": answers == {size["steps"][0]["result"]["answers"]}}


def _print(size: dict[str, Any]) -> None:
    print(f"\n{size['spans']:,} spans")
    print(f"{'step':<36}{'seconds':>9}{'CPU s':>8}{'x JSON':>8}{'CPU x':>7}{'server CPU s':>13}{'rows read':>12}"
          f"{'granules':>12}{'max RSS MB':>12}")
    for s in size["steps"]:
        server = s.get("server", {})
        granules = f"{s['granules']}/{s['granules_total']}" if s.get("granules") is not None else ""
        rows = s.get("rows_read", server.get("read_rows", ""))
        print(f"{s['step']:<36}{s['seconds']:>9.2f}{s['cpu_seconds']:>8.2f}{s['ratio_to_json_lines']:>8.2f}"
              f"{s['cpu_ratio_to_json_lines']:>7.2f}{server.get('cpu_seconds', 0):>13.2f}{rows!s:>12}{granules:>12}"
              f"{s.get('process_max_rss_mb', 0):>12.1f}")
    print("same answers on every path:", size["same_answers"])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, nargs="+", default=[200_000, 1_000_000],
                        help="span counts to measure (default 200,000 and 1,000,000)")
    parser.add_argument("--table-rows", type=int, default=None,
                        help="grow the table to this many rows and read the largest window again (default ten "
                             "times the largest span count; 0: skip)")
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds of the reports (the best counts)")
    parser.add_argument("--output", type=Path, default=Path("bench-output/clickhouse.json"))
    args = parser.parse_args(argv)
    # Only looked up, not imported: chDB must start in the measured (forked) process, not before the fork.
    if importlib.util.find_spec("chdb") is None or importlib.util.find_spec("clickhouse_connect") is None:
        print("bench_clickhouse needs outcome-telemetry[chdb] (pip install -e '.[dev]')", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="bench-clickhouse-"))
    paths = [str(HERE.parent), str(HERE.parent / "tests" / "forensics")]
    load = [round(x, 2) for x in os.getloadavg()]
    try:
        sizes = [_size(n, work, paths, args.rounds) for n in sorted(args.spans)]
        for size in sizes:
            _print(size)
        rows = 10 * sizes[-1]["spans"] if args.table_rows is None else args.table_rows
        scale = _table_scale(sizes[-1], rows, paths, args.rounds) if rows > sizes[-1]["spans"] else None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if scale:
        print(f"\nthe {scale['window_spans']:,}-span window of a {scale['rows']:,}-row table, "
              "against the same spans alone")
        print(f"{'step':<44}{'seconds':>9}{'CPU s':>8}{'x alone':>9}{'CPU x':>7}{'rows read':>12}{'granules':>13}")
        for s in scale["steps"]:
            rows_read = s.get("rows_read", s.get("server", {}).get("read_rows", ""))
            granules = f"{s['granules']}/{s['granules_total']}" if s.get("granules") is not None else ""
            print(f"{s['step']:<44}{s['seconds']:>9.2f}{s['cpu_seconds']:>8.2f}{s['ratio_to_the_spans_alone']:>9.2f}"
                  f"{s['cpu_ratio_to_the_spans_alone']:>7.2f}{rows_read!s:>12}{granules:>13}")
        print("same answers as the spans alone:", scale["same_answers"])
    largest = sizes[-1]
    result = {"spans": largest["spans"], "cpus": os.cpu_count(), "load_average_at_start": load,
              "load_average_at_end": [round(x, 2) for x in os.getloadavg()], "steps": largest["steps"],
              "same_answers": all(s["same_answers"] for s in sizes) and (scale is None or scale["same_answers"]),
              "sizes": {str(s["spans"]): s["steps"] for s in sizes}, "table_scale": scale}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0 if result["same_answers"] else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
