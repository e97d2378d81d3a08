"""Benchmark: how fast can the OTLP JSON lines of a report be parsed at all, by each reader at hand.

    python benchmarks/bench_json_readers.py --spans 1000000

The forensics report over JSON lines is held to the plain ``json.loads`` loop of
``bench_forensics.py`` (at most half its wall time, at most its CPU seconds). This benchmark asks
what the parse alone costs, with nothing after it (no checks, no typed columns, no dedup, no
questions), for each reader that could stand in front of the questions:

- the ``json.loads`` loop itself (the baseline);
- DuckDB's ``read_ndjson_objects`` alone (the raw lines, not parsed into a structure), and with
  ``from_json`` into the exact structure the loader uses (taken from the shipped ``spans.sql``);
- pyarrow's streaming JSON reader with an explicit nested schema (C++, multi-threaded): the fastest
  columnar reader among the dependencies;
- msgspec and orjson, when installed (not dependencies): compiled decoders into Python objects.

Every reader counts the spans it parsed (they must agree) in a fresh process; each line gives wall
time, CPU seconds and the ratio of its CPU seconds to the loop's. A reader whose parse alone costs
close to the loop's CPU leaves nothing for the rest of a report, which ``bench_forensics.py``
splits into its steps. Writes ``bench-output/json_readers.json``.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from telemetry.runtime._resources import data_file  # noqa: E402

from bench_forensics import _measure, generated_file, json_loads_loop, span_file_arguments, write_result  # noqa: E402


def _loader_structure() -> str:
    """The ``from_json`` structure of the shipped loader (so this measures exactly what it parses)."""
    text = data_file("queries", "spans.sql").read_text(encoding="utf-8")
    found = re.search(r"from_json\(json, '(\{\"resourceSpans\".*?)'\)", text)
    if found is None:
        raise SystemExit("spans.sql no longer parses with from_json(json, '<structure>'): update this benchmark")
    return found.group(1)


def duckdb_lines(path: Path) -> int:
    """DuckDB reads the lines as JSON values, parsing nothing into a structure (a lower bound)."""
    import duckdb

    con = duckdb.connect()
    row = con.execute("SELECT count(*) FROM read_ndjson_objects(?, maximum_object_size = 16777216)",
                      [str(path)]).fetchall()
    return int(row[0][0])


def duckdb_structure(path: Path) -> int:
    """DuckDB parses every line into the loader's structure and counts the spans in it."""
    import duckdb

    con = duckdb.connect()
    sql = ("SELECT sum(list_sum(list_transform(d.resourceSpans, lambda rs: "
           "list_sum(list_transform(rs.scopeSpans, lambda ss: len(ss.spans)))))) "
           "FROM (SELECT from_json(json, ?) AS d FROM read_ndjson_objects(?, maximum_object_size = 16777216))")
    row = con.execute(sql, [_loader_structure(), str(path)]).fetchall()
    return int(row[0][0])


def pyarrow_streaming(path: Path) -> int:
    """pyarrow's streaming JSON reader into an explicit nested schema (1 MB blocks measured fastest)."""
    import pyarrow as pa
    import pyarrow.json as pj

    text = pa.string()
    scalars = [("stringValue", text), ("boolValue", pa.bool_()), ("intValue", text), ("doubleValue", pa.float64())]
    value = pa.struct(scalars + [("arrayValue", pa.struct([("values", pa.list_(pa.struct(scalars)))]))])
    attributes = pa.list_(pa.struct([("key", text), ("value", value)]))
    span = pa.struct([("traceId", text), ("spanId", text), ("parentSpanId", text), ("name", text),
                      ("kind", pa.int64()), ("startTimeUnixNano", text), ("endTimeUnixNano", text),
                      ("attributes", attributes), ("status", pa.struct([("code", pa.int64()), ("message", text)]))])
    scope = pa.struct([("scope", pa.struct([("name", text), ("version", text)])), ("spans", pa.list_(span))])
    schema = pa.schema([("resourceSpans", pa.list_(pa.struct([
        ("resource", pa.struct([("attributes", attributes)])), ("scopeSpans", pa.list_(scope))])))])
    reader = pj.open_json(str(path), read_options=pj.ReadOptions(block_size=1 << 20),
                          parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"))
    count = 0
    for batch in reader:
        count += len(batch.column(0).flatten().field("scopeSpans").flatten().field("spans").flatten())
    return count


def msgspec_typed(path: Path) -> int:
    """msgspec decodes every line into typed structs of the OTLP fields (others skipped), in C."""
    import msgspec

    # defstruct with real types: this module's postponed annotations cannot name local classes.
    value = msgspec.defstruct("Value", [("stringValue", Optional[str], None), ("intValue", Optional[str], None),
                                        ("boolValue", Optional[bool], None), ("doubleValue", Optional[float], None),
                                        ("arrayValue", Optional[dict[str, Any]], None)])
    attribute = msgspec.defstruct("Attribute", [("key", str), ("value", value)])
    span = msgspec.defstruct("Span", [("traceId", str), ("spanId", str), ("startTimeUnixNano", str),
                                      ("endTimeUnixNano", str), ("parentSpanId", str, ""), ("name", str, ""),
                                      ("kind", int, 0), ("attributes", list[attribute], [])])  # type: ignore[valid-type]
    scope_spans = msgspec.defstruct("ScopeSpans", [("spans", list[span], [])])  # type: ignore[valid-type]
    resource_spans = msgspec.defstruct("ResourceSpans", [("scopeSpans", list[scope_spans], [])])  # type: ignore[valid-type]
    traces = msgspec.defstruct("TracesData", [("resourceSpans", list[resource_spans])])  # type: ignore[valid-type]

    decoder = msgspec.json.Decoder(traces)
    count = 0
    with open(path, "rb") as handle:
        for line in handle:
            for rs in decoder.decode(line).resourceSpans:
                for ss in rs.scopeSpans:
                    count += len(ss.spans)
    return count


def orjson_loop(path: Path) -> int:
    """The loop with orjson instead of the standard library's json."""
    import orjson

    count = 0
    with open(path, "rb") as handle:
        for line in handle:
            for rs in orjson.loads(line)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    count += len(ss["spans"])
    return count


def _available(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


LINES_ONLY = "duckdb read_ndjson_objects (no structure)"
"""The one reader that counts lines, not spans (it parses nothing into spans to count)."""
READERS: list[tuple[str, Callable[[Path], int], str | None]] = [
    (LINES_ONLY, duckdb_lines, None),
    ("duckdb from_json, the loader's structure", duckdb_structure, None),
    ("pyarrow streaming, explicit schema", pyarrow_streaming, "pyarrow"),
    ("msgspec typed structs", msgspec_typed, "msgspec"),
    ("orjson loop", orjson_loop, "orjson"),
]


def main(argv: list[str]) -> int:
    args = span_file_arguments(__doc__ or "", "bench-output/json_readers.json", argv)
    work, source, size = generated_file(args, "bench-json-readers-")
    load_start = [round(x, 2) for x in os.getloadavg()]
    steps = [_measure("python json.loads loop", lambda: json_loads_loop(source), trace_python=False)]
    skipped = []
    for label, reader, module in READERS:
        if module is not None and not _available(module):
            skipped.append(f"{label} ({module} is not installed)")
            continue
        steps.append(_measure(label, lambda reader=reader: reader(source), trace_python=False))  # type: ignore[misc]
    base_wall, base_cpu = steps[0]["seconds"], steps[0]["cpu_seconds"]
    wrong = [s["step"] for s in steps[1:] if s["step"] != LINES_ONLY and s["result"] != steps[0]["result"]]
    if wrong:
        raise SystemExit(f"these readers counted another number of spans than the loop: {', '.join(wrong)}")
    for step in steps:
        step["wall_x_loop"] = round(step["seconds"] / base_wall, 3)
        step["cpu_x_loop"] = round(step["cpu_seconds"] / base_cpu, 3)
    print(f"\n{'parse only, ' + format(args.spans, ',') + ' spans':<44}{'seconds':>9}{'CPU s':>8}"
          f"{'wall x':>8}{'CPU x':>8}{'max RSS MB':>12}")
    for step in steps:
        print(f"{step['step']:<44}{step['seconds']:>9.2f}{step['cpu_seconds']:>8.2f}{step['wall_x_loop']:>8.2f}"
              f"{step['cpu_x_loop']:>8.2f}{step['process_max_rss_mb']:>12.1f}")
    for line in skipped:
        print("skipped:", line)
    print("load average (1, 5, 15 min) at start:", load_start, "at end:", [round(x, 2) for x in os.getloadavg()])
    result = {"spans": args.spans, "json_bytes": size, "cpus": os.cpu_count(), "steps": steps, "skipped": skipped,
              "load_average": {"start": load_start, "end": [round(x, 2) for x in os.getloadavg()]},
              "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return write_result(args, work, result)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
