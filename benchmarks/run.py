"""Run every benchmark (``benchmarks/bench_*.py``) in turn and write docs/benchmarks.md; ``make bench`` calls this.

Each benchmark is a standalone script that prints its own table and writes its figures as JSON
to ``bench-output/``. This runner then reads those files and replaces the generated block of
``docs/benchmarks.md`` with the ratios and figures of this one run, the command, the machine's
cores and load, the date, and the Python and package versions. The rest of that page (its
history) is written by hand and left as it is.

Pass ``--only NAME`` to run one (e.g. ``--only decorator``), and ``--quick`` for smaller sizes
when you only want to see that they run. Only a full run (every benchmark at its own sizes)
writes docs/benchmarks.md by default; ``--docs PATH`` writes the block into PATH after any run
(a partial or quick run says so in the block), ``--no-docs`` writes nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.metadata
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DOCS = ROOT / "docs" / "benchmarks.md"
README = ROOT / "README.md"
OUTPUT = Path("bench-output")  # where every benchmark writes its JSON, relative to where it runs
QUICK_ARGS = {
    "decorator": ["--calls", "5000", "--rounds", "5"],
    "encoder": ["--spans", "1280", "--rounds", "3"],
    "kill": ["--seconds", "1.5", "--runs", "1"],
    "forensics": ["--spans", "50000"],
    "peer_forensics": ["--spans", "50000"],
    "json_readers": ["--spans", "50000"],
    "clickhouse": ["--spans", "50000"],
    "guards": ["--writes", "2000", "--increments", "20"],
    "watch": ["--spans", "50000"],
    "observe": ["--spans", "2000", "--rounds", "3"],
    "peers": ["--calls", "2000", "--rounds", "3"],
}
PACKAGES = ("outcome-telemetry", "opentelemetry-sdk", "prometheus-client", "duckdb", "psycopg",
            "clickhouse-connect", "chdb", "pyarrow", "traceloop-sdk", "logfire", "openinference-instrumentation")
"""The distributions whose versions move the figures, named in the generated block."""

BEGIN = "<!-- benchmarks/run.py writes from here to the end marker: edit the history below instead -->"
END = "<!-- end of the part benchmarks/run.py writes -->"
TABLE_HEADER = "| benchmark | measure | this run | target | met |"


# --- what each benchmark's JSON holds, as rows of the table -------------------------------------


def _step(figures: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((s for s in figures.get("steps", []) if s["step"] == name), None)


def _ratio(figures: dict[str, Any], numerator: str, denominator: str, key: str) -> float | None:
    top, bottom = _step(figures, numerator), _step(figures, denominator)
    if top is None or bottom is None or not bottom[key]:
        return None
    return float(top[key]) / float(bottom[key])


def _table_scale(figures: dict[str, Any]) -> float | None:
    """The larger of the two reports' ratios (chDB in process, HTTP) of a big table's window to the spans alone."""
    ratios = [s.get("ratio_to_the_spans_alone") for s in figures.get("table_scale", {}).get("steps", [])
              if str(s.get("step", "")).startswith("report ")]
    found = [float(r) for r in ratios if r is not None]
    return max(found) if found else None


def _get(*path: str) -> Callable[[dict[str, Any]], float | None]:
    def read(figures: dict[str, Any]) -> float | None:
        value: Any = figures
        for key in path:
            if not isinstance(value, dict) or key not in value:
                return None
            value = value[key]
        return None if value is None else float(value)

    return read


def _contention_p99(figures: dict[str, Any]) -> float | None:
    rows = figures.get("contention", {})
    sqlite, postgres = rows.get("sqlite, telemetry off"), rows.get("postgresql, telemetry off")
    if not sqlite or not postgres or not sqlite["p99_ms"]:
        return None
    return float(postgres["p99_ms"]) / float(sqlite["p99_ms"])


def _encoder_ratio(figures: dict[str, Any]) -> float | None:
    if not figures.get("sdk_otlp_protobuf"):
        return None
    return float(figures["file_exporter_text"]) / float(figures["sdk_otlp_protobuf"])


def _watch_steady(figures: dict[str, Any]) -> float | None:
    steady = figures.get("steady_pass_seconds")
    return max(steady) if steady else None


JSON_REPORT, PARQUET_REPORT, LOOP = "report from JSON lines", "report from Parquet", "python json.loads loop"


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the generated table: a figure read from one benchmark's JSON."""

    benchmark: str
    measure: str
    value: Callable[[dict[str, Any]], float | None]
    unit: str
    target: float | None = None
    at_most: bool = True

    def cells(self, figures: dict[str, Any] | None) -> tuple[str, str, str, str, str]:
        value = None if figures is None else self.value(figures)
        shown = "not measured" if value is None else fmt(value, self.unit)
        target = "" if self.target is None else f"{'≤' if self.at_most else '≥'} {fmt(self.target, self.unit)}"
        met = ""
        if value is not None and self.target is not None:
            met = "yes" if (value <= self.target if self.at_most else value >= self.target) else "no"
        return self.benchmark, self.measure, shown, target, met


ROWS: tuple[Row, ...] = (
    Row("decorator", "decorated call vs a hand-written span, both exporting to the file (CPU)",
        _get("cpu_ratio_both_exporting"), "x", 1.10),
    Row("decorator", "decorated call vs a hand-written span, both exporting to the file (wall)",
        _get("wall_ratio_both_exporting"), "x", 1.10),
    Row("decorator", "decorated call vs a hand-written span exporting nothing (CPU)",
        _get("cpu_ratio_to_discarding"), "x", 1.25),
    Row("decorator", "decorated call vs a hand-written span exporting nothing (wall)",
        _get("wall_ratio_to_discarding"), "x", 1.25),
    Row("decorator", "decorated call without configure(), over the bare call", _get("unconfigured_overhead_us"), "µs", 2.0),
    Row("encoder", "file encoder vs the SDK's OTLP protobuf encoder (CPU per span)", _encoder_ratio, "x"),
    Row("encoder", "file encoder, CPU per span", _get("file_exporter_text"), "µs", 8.0),
    Row("kill", "spans lost to SIGKILL at 2,000 calls/s (median of runs)", _get("2000/s", "median_lost"), "spans"),
    Row("forensics", "forensics report from JSON lines vs a plain json.loads loop (wall)",
        lambda f: _ratio(f, JSON_REPORT, LOOP, "seconds"), "x", 0.5),
    Row("forensics", "forensics report from JSON lines vs a plain json.loads loop (CPU)",
        lambda f: _ratio(f, JSON_REPORT, LOOP, "cpu_seconds"), "x", 1.0),
    Row("forensics", "forensics report from Parquet vs the same loop (wall)",
        lambda f: _ratio(f, PARQUET_REPORT, LOOP, "seconds"), "x"),
    Row("forensics", "forensics report from JSON lines, peak RSS",
        lambda f: (_step(f, JSON_REPORT) or {}).get("process_max_rss_mb"), "MB", 1000.0),
    Row("peer_forensics", "forensics report over peer-format spans vs over as many of ours (CPU)",
        _get("peer_to_ours_cpu_ratio"), "x", 1.3),
    Row("json_readers", "DuckDB's parse alone (from_json, the loader's structure) vs the loop (CPU)",
        lambda f: (_step(f, "duckdb from_json, the loader's structure") or {}).get("cpu_x_loop"), "x"),
    Row("clickhouse", "forensics report over ClickHouse HTTP vs the JSON-lines report (wall)",
        lambda f: _ratio(f, "report over HTTP", JSON_REPORT, "seconds"), "x", 0.6),
    Row("clickhouse", "the same over HTTP from a server that already holds the answer (the reader alone, wall)",
        lambda f: _ratio(f, "report over HTTP, answer replayed", JSON_REPORT, "seconds"), "x"),
    Row("clickhouse", "forensics report from chDB in process vs the JSON-lines report (wall)",
        lambda f: _ratio(f, "report from chDB in process", JSON_REPORT, "seconds"), "x", 0.6),
    Row("clickhouse", "a 1M-span window of a 10M-row table vs the same spans alone (wall, the slower path)",
        _table_scale, "x", 1.3),
    Row("guards", "guarded write vs a hand-written compare-and-set with its change-log row: SQLite",
        _get("floor", "sqlite", "ratio"), "x", 1.25),
    Row("guards", "guarded write vs a hand-written compare-and-set: SQLite",
        _get("floor", "sqlite", "ratio_to_plain_cas"), "x"),
    Row("guards", "guarded write vs a hand-written compare-and-set: PostgreSQL",
        _get("floor", "postgresql", "ratio"), "x", 1.0),
    Row("guards", "guarded, instrumented write vs a bare SQLite UPDATE",
        _get("sqlite_instrumented", "ratio_guarded_instrumented_to_bare"), "x", 3.0),
    Row("guards", "contention p99, PostgreSQL vs SQLite (telemetry off)", _contention_p99, "x", 1.0),
    Row("watch", "watch: a steady pass over the whole window", _watch_steady, "s"),
    Row("watch", "watch: catch-up, spans a second", _get("sustained_spans_per_second"), "/s"),
    Row("observe", "observe_tool_spans: added at a peer tool span's end (CPU)", _get("peer_tool_span_added_us"), "µs", 3.0),
    Row("observe", "observe_tool_spans: added at any other span's end (CPU)", _get("other_span_added_us"), "µs", 0.3),
    Row("observe", "observe_tool_spans vs a hand-written GenAI-only processor, at a tool span's end (CPU)",
        _get("peer_tool_span_to_hand_written"), "x"),
    Row("observe", "observe_tool_spans: added at a peer tool span whose result text is new (CPU)",
        _get("peer_tool_span_new_result_added_us"), "µs"),
    Row("peers", "@instrument_tool, default configuration, vs a hand-written span exporting nothing (CPU)",
        _get("ours_default", "cpu_ratio"), "x", 1.25),
    Row("peers", "@instrument_tool, spans discarded, vs the same hand-written span (CPU)",
        _get("ours_discarded", "cpu_ratio"), "x", 1.10),
    Row("peers", "traceloop-sdk @tool vs the same hand-written span (CPU)", _get("traceloop", "cpu_ratio"), "x"),
    Row("peers", "logfire @instrument vs the same hand-written span (CPU)", _get("logfire", "cpu_ratio"), "x"),
    Row("peers", "openinference tracer.tool vs the same hand-written span (CPU)", _get("openinference", "cpu_ratio"), "x"),
)


def fmt(value: float, unit: str) -> str:
    """A figure as the tables show it: ratios to two decimals, counts whole."""
    if unit == "x":
        return f"{value:.2f}x"
    if unit in ("µs", "s"):
        return f"{value:.2f} {unit}"
    if unit == "MB":
        return f"{value:,.0f} MB"
    if unit == "/s":
        return f"{value:,.0f}/s"
    return f"{value:,.0f} {unit}".strip()


# --- the generated block -------------------------------------------------------------------------


@dataclasses.dataclass
class Run:
    """What one benchmark script did in this run."""

    name: str
    command: list[str]
    returncode: int
    seconds: float
    figures: dict[str, Any] | None


def _versions() -> str:
    found = []
    for name in PACKAGES:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} not installed")
    return ", ".join(found)


def _commit() -> str:
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "no git checkout"
    if not head:
        return "no git checkout"
    return f"commit {head}" + (" with uncommitted changes" if dirty else "")


def render(runs: list[Run], argv: list[str], started: datetime.datetime, load: tuple[float, float], partial: bool) -> str:
    """The generated block, markers included."""
    by_name = {run.name: run for run in runs}
    command = "make bench" if not argv else "python benchmarks/run.py " + shlex.join(argv)
    lines = [
        BEGIN,
        "",
        f"Measured by `{command}` on {started:%Y-%m-%d %H:%M} UTC, {_commit()}.",
        f"Machine: {os.cpu_count()} cores ({platform.system()} {platform.machine()}), load average (1 min) "
        f"{load[0]:.1f} at the start and {load[1]:.1f} at the end.",
        f"Python {platform.python_version()}; {_versions()}.",
    ]
    if partial:
        lines.append("This was a partial or quick run (see the command): its figures are not the ones to compare.")
    lines += ["", TABLE_HEADER, "|---|---|---|---|---|"]
    for row in ROWS:
        if row.benchmark in by_name:
            lines.append("| " + " | ".join(row.cells(by_name[row.benchmark].figures)) + " |")
    lines += ["", "Each benchmark as it ran (its own table is in its output; its JSON in `bench-output/`):", ""]
    for run in runs:
        status = "" if run.returncode == 0 else f", **failed** (exit {run.returncode})"
        lines.append(f"- `{shlex.join(run.command)}`: {run.seconds:.0f} s{status}")
    lines += ["", END]
    return "\n".join(lines)


def replace_block(text: str, block: str) -> str:
    """``text`` with its generated block replaced by ``block`` (appended when it has none)."""
    start, end = text.find(BEGIN), text.find(END)
    if start == -1 or end == -1 or end < start:
        return text.rstrip("\n") + "\n\n" + block + "\n"
    return text[:start] + block + text[end + len(END):]


def generated_block(text: str) -> str:
    """The generated block of a docs/benchmarks.md text (empty when it has none)."""
    start, end = text.find(BEGIN), text.find(END)
    return text[start:end] if start != -1 and end > start else ""


def table_rows(text: str) -> list[list[str]]:
    """The cells of every row of every Markdown table in ``text`` (separator rows left out)."""
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("|") and line.endswith("|") and not re.fullmatch(r"\|[\s:|-]+\|", line):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def readme_rows(readme: str) -> list[list[str]]:
    """The README's benchmark table: the rows of the table under its "## Benchmarks" heading."""
    found = re.search(r"^## Benchmarks\n(.*?)(?=^## |\Z)", readme, re.S | re.M)
    return table_rows(found.group(1))[1:] if found else []


def stale_readme_rows(readme: str, block: str) -> list[str]:
    """The README's benchmark rows whose (measure, figure) the generated block does not hold."""
    generated = {(cells[1], cells[2]) for cells in table_rows(block) if len(cells) == 5}
    return [f"{cells[0]}: {cells[1]}" for cells in readme_rows(readme) if (cells[0], cells[1]) not in generated]


# --- running -------------------------------------------------------------------------------------


def run_one(script: Path, extra: list[str]) -> Run:
    name = script.stem.removeprefix("bench_")
    output = OUTPUT / f"{name}.json"
    command = [sys.executable, str(script), *extra]
    print(f"== {name} ==", flush=True)
    started = time.time()
    returncode = subprocess.run(command).returncode
    seconds = time.time() - started
    figures = None
    # Only a file this run wrote: an older one would put another run's figures in the table.
    if returncode == 0 and output.exists() and output.stat().st_mtime >= started:
        figures = json.loads(output.read_text(encoding="utf-8"))
    shown = ["python", str(script.relative_to(ROOT)) if script.is_relative_to(ROOT) else str(script), *extra]
    return Run(name, shown, returncode, seconds, figures)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", default=[], help="run only this benchmark (repeatable)")
    parser.add_argument("--quick", action="store_true", help="small sizes, to check the scripts run")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--docs", type=Path, help="write the generated block into this file (default: "
                       "docs/benchmarks.md after a full run, nothing otherwise)")
    where.add_argument("--no-docs", action="store_true", help="write no generated block")
    ns = parser.parse_args(argv)
    scripts = sorted(HERE.glob("bench_*.py"))
    unknown = sorted(set(ns.only) - {s.stem.removeprefix("bench_") for s in scripts})
    if unknown:
        parser.error(f"no such benchmark: {', '.join(unknown)}")
    partial = bool(ns.only) or ns.quick
    docs = None if ns.no_docs else ns.docs if ns.docs is not None else None if partial else DOCS
    started, load_start = datetime.datetime.now(datetime.timezone.utc), os.getloadavg()[0]
    runs = []
    for script in scripts:
        name = script.stem.removeprefix("bench_")
        if ns.only and name not in ns.only:
            continue
        runs.append(run_one(script, QUICK_ARGS.get(name, []) if ns.quick else []))
    failed = [run.name for run in runs if run.returncode != 0]
    if docs is not None:
        block = render(runs, argv, started, (load_start, os.getloadavg()[0]), partial)
        text = docs.read_text(encoding="utf-8") if docs.exists() else "# Benchmarks\n"
        docs.write_text(replace_block(text, block), encoding="utf-8")
        print(f"wrote the figures of this run to {docs}")
        if docs.resolve() == DOCS and README.exists():
            for stale in stale_readme_rows(README.read_text(encoding="utf-8"), block):
                print(f"README.md's benchmark table differs from this run; update: {stale}", file=sys.stderr)
    if failed:
        print(f"benchmarks failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
