"""Write the story's trace file for every peer format, each in a subprocess of its own.

    python -m tests.peers.generate OUTDIR [FORMAT ...]    # OUTDIR/<format>.jsonl, as written
    python -m tests.peers.generate --fixtures [FORMAT ...] # tests/peers/fixtures/<format>.jsonl, stabilised

Several instrumentors patch libraries and set global tracer providers, so each format runs in a
fresh interpreter (``--one FORMAT PATH``). That process refuses every Internet-family socket
connection and DNS lookup, and lists any attempt in ``PATH.network``: the stories must never
leave the machine, and the tests check that none tried.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "EXTRA", "FIXTURES", "FORMATS", "Format", "Outcome", "generate", "missing_packages", "stabilise", "write_fixtures",
]

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@dataclass(frozen=True)
class Format:
    """One peer format: the module whose ``write_story`` writes it and the distributions it needs."""

    name: str
    module: str
    imports: tuple[str, ...]  # importable modules the story needs (checked without importing them)
    distributions: str  # what to pip install, for the skip message


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("openinference_langchain", "tests.peers.openinference_langchain",
           ("openinference.instrumentation.langchain", "langgraph.prebuilt", "langchain_core"),
           "openinference-instrumentation-langchain langgraph langchain-core"),
    Format("openinference_openai_agents", "tests.peers.openinference_openai_agents",
           ("openinference.instrumentation.openai_agents", "agents", "httpx"),
           "openinference-instrumentation-openai-agents openai-agents"),
    Format("pydantic_ai", "tests.peers.pydantic_ai_genai", ("pydantic_ai",), "pydantic-ai-slim"),
    Format("openllmetry", "tests.peers.openllmetry",
           ("traceloop.sdk", "opentelemetry.instrumentation.openai", "openai", "httpx"), "traceloop-sdk openai"),
    Format("logfire", "tests.peers.logfire_instrument", ("logfire", "openai", "httpx"), "logfire openai"),
    Format("langfuse", "tests.peers.langfuse_observe", ("langfuse", "openai", "httpx"), "langfuse openai"),
    Format("mlflow", "tests.peers.mlflow_tracing", ("mlflow.tracing", "openai", "httpx"), "mlflow-tracing openai"),
    Format("mlflow_genai", "tests.peers.mlflow_genai_semconv", ("mlflow.tracing", "openai", "httpx"), "mlflow-tracing openai"),
)}

EXTRA: dict[str, Format] = {f.name: f for f in (
    Format("openllmetry_raising", "tests.peers.openllmetry_raising", ("traceloop.sdk",), "traceloop-sdk"),
)}
"""Other stories, not the payments story: a tool that raises (tests/forensics/test_forensics_exception_type.py)."""

# Nothing that any of these libraries might phone home with, even where the story already gives
# it no key or endpoint.
_QUIET_ENV = {
    "DO_NOT_TRACK": "true",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "TRACELOOP_TELEMETRY": "false",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "OTEL_SDK_DISABLED": "false",
    "OTEL_TRACES_EXPORTER": "none",
    "OTEL_METRICS_EXPORTER": "none",
    "OTEL_LOGS_EXPORTER": "none",
    "OPENAI_API_KEY": "sk-peer-story-no-network",
    "PYTHONWARNINGS": "ignore",
}
_DROP_ENV = ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "LANGFUSE_HOST", "LANGFUSE_BASE_URL", "TRACELOOP_API_KEY",
             "LOGFIRE_TOKEN", "MLFLOW_TRACKING_URI", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
             "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY")


def missing_packages(fmt: Format) -> list[str]:
    """The modules among ``fmt.imports`` that cannot be found (found without importing them)."""
    missing = []
    for module in fmt.imports:
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            missing.append(module)
    return missing


@dataclass
class Outcome:
    """What one format's subprocess did."""

    name: str
    path: Path
    returncode: int
    stderr: str
    seconds: float
    network: list[str]


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
    env.update(_QUIET_ENV)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def generate(outdir: Path, names: Iterable[str] | None = None, *, timeout: float = 240) -> dict[str, Outcome]:
    """Run every format (or ``names``) at once, each in its own interpreter; write ``outdir/<format>.jsonl``."""
    outdir.mkdir(parents=True, exist_ok=True)
    chosen = list(names) if names else list(FORMATS)
    running: dict[str, tuple[subprocess.Popen[str], Path, float, Any]] = {}
    for name in chosen:
        path = outdir / f"{name}.jsonl"
        for stale in (path, path.with_name(path.name + ".network")):
            stale.unlink(missing_ok=True)
        err = tempfile.TemporaryFile(mode="w+")
        proc = subprocess.Popen([sys.executable, "-m", "tests.peers.generate", "--one", name, str(path)],
                                cwd=ROOT, env=_child_env(), stdin=subprocess.DEVNULL, stdout=err, stderr=err, text=True)
        running[name] = (proc, path, time.monotonic(), err)
    outcomes = {}
    for name, (proc, path, started, err) in running.items():
        try:
            returncode = proc.wait(timeout=max(1.0, started + timeout - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            returncode = proc.wait()
        seconds = time.monotonic() - started
        err.seek(0)
        stderr = err.read()
        err.close()
        net_file = path.with_name(path.name + ".network")
        network = net_file.read_text().splitlines() if net_file.exists() else []
        outcomes[name] = Outcome(name, path, returncode, stderr, seconds, network)
    return outcomes


def _guard_network(record: Path) -> None:
    """Refuse Internet sockets and DNS in this process, noting each attempt in ``record``."""

    def refuse(what: str) -> OSError:
        with record.open("a", encoding="utf-8") as out:
            out.write(what + "\n")
        return ConnectionRefusedError(f"peer stories never use the network (tried {what})")

    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise refuse(f"connect {address!r}")
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise refuse(f"connect {address!r}")
        return real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        raise refuse(f"getaddrinfo {host!r}")

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = getaddrinfo
    socket.create_connection = lambda address, *a, **k: (_ for _ in ()).throw(refuse(f"create_connection {address!r}"))  # type: ignore[assignment]


def _run_one(name: str, path: Path) -> None:
    _guard_network(path.with_name(path.name + ".network"))
    module = importlib.import_module({**FORMATS, **EXTRA}[name].module)
    module.write_story(path)


# ---- fixtures: the same files with ids, times and machine details made stable ----

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_EPOCH = 1767225600_000_000_000  # 2026-01-01T00:00:00Z, in ns
_MACHINE = {"host.name": "peer-host", "host.id": "peer-host-id", "host.arch": "x86_64", "os.version": "peer-os",
            "process.pid": 4242, "process.runtime.description": "peer-python", "process.runtime.version": "3.x"}


def _digest(*parts: str, length: int) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:length]


def _spans_of(lines: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    found = []
    for data in lines:
        for rs in data.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for span in ss.get("spans", []):
                    found.append((rs, ss, span))
    return found


def stabilise(name: str, lines: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same spans with stable ids, times and machine details, one ``TracesData`` line per span.

    Trace and span ids are renumbered in start order (and replaced wherever an attribute quotes
    them, e.g. MLflow's ``tr-<trace id>``), every UUID becomes a stable one, the timestamps become
    1 ms steps from 2026-01-01 in the same order, and host and process details are fixed. Lines
    follow the spans' end order, one span each, as a ``SimpleSpanProcessor`` behind a Collector
    would write them.
    """
    spans = _spans_of(lines)
    by_start = sorted(spans, key=lambda t: (int(t[2]["startTimeUnixNano"]), int(t[2]["endTimeUnixNano"])))
    trace_ids: dict[str, str] = {}
    span_ids: dict[str, str] = {}
    for _, _, span in by_start:
        trace_ids.setdefault(span["traceId"], _digest(name, "trace", str(len(trace_ids)), length=32))
        span_ids.setdefault(span["spanId"], _digest(name, "span", str(len(span_ids)), length=16))
    times = sorted({int(t) for _, _, s in spans for t in _times_of(s)})
    new_time = {t: str(_EPOCH + i * 1_000_000) for i, t in enumerate(times)}
    uuids: dict[str, str] = {}

    def text(value: str) -> str:
        for old, new in trace_ids.items():
            value = value.replace(old, new)
        for old, new in span_ids.items():
            value = value.replace(old, new)

        def swap(match: re.Match[str]) -> str:
            key = match.group(0).lower()
            if key not in uuids:
                h = _digest(name, "uuid", str(len(uuids)), length=32)
                uuids[key] = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
            return uuids[key]

        return _UUID.sub(swap, value)

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return text(value)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    out = []
    for rs, ss, span in sorted(spans, key=lambda t: (int(t[2]["endTimeUnixNano"]), int(t[2]["startTimeUnixNano"]))):
        span = walk(span)
        span["traceId"] = trace_ids.get(span["traceId"], span["traceId"])
        for key in ("startTimeUnixNano", "endTimeUnixNano"):
            span[key] = new_time[int(span[key])]
        for event in span.get("events", []):
            event["timeUnixNano"] = new_time[int(event["timeUnixNano"])]
        resource = walk(rs.get("resource", {}))
        for attribute in resource.get("attributes", []):
            if attribute["key"] in _MACHINE:
                fixed = _MACHINE[attribute["key"]]
                attribute["value"] = {"intValue": str(fixed)} if isinstance(fixed, int) else {"stringValue": fixed}
        scope_spans = {k: v for k, v in ss.items() if k != "spans"}
        scope_spans["spans"] = [span]
        resource_spans = {k: v for k, v in rs.items() if k not in ("resource", "scopeSpans")}
        out.append({"resourceSpans": [{"resource": resource, **resource_spans, "scopeSpans": [scope_spans]}]})
    return out


def _times_of(span: dict[str, Any]) -> list[str]:
    return [span["startTimeUnixNano"], span["endTimeUnixNano"], *(e["timeUnixNano"] for e in span.get("events", []))]


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The ``TracesData`` objects of a Collector-format JSON lines file."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_fixtures(names: Iterable[str] | None = None) -> dict[str, Outcome]:
    """Generate the chosen formats and write their stabilised files to ``tests/peers/fixtures/``."""
    with tempfile.TemporaryDirectory(prefix="peer-stories-") as tmp:
        outcomes = generate(Path(tmp), names)
        for name, outcome in outcomes.items():
            if outcome.returncode != 0 or outcome.network:
                continue
            lines = stabilise(name, read_lines(outcome.path))
            FIXTURES.mkdir(exist_ok=True)
            text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
            (FIXTURES / f"{name}.jsonl").write_text(text, encoding="utf-8")
    return outcomes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.peers.generate", description=__doc__.split("\n")[0])
    parser.add_argument("--one", nargs=2, metavar=("FORMAT", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--fixtures", action="store_true", help="write stabilised files to tests/peers/fixtures/")
    parser.add_argument("args", nargs="*", help="OUTDIR (unless --fixtures), then formats (default: all)")
    ns = parser.parse_args(argv)
    if ns.one:
        _run_one(ns.one[0], Path(ns.one[1]))
        return 0
    if not ns.fixtures and not ns.args:
        parser.error("OUTDIR is required (or --fixtures)")
    names = ns.args if ns.fixtures else ns.args[1:]
    unknown = [n for n in names if n not in FORMATS]
    if unknown:
        parser.error(f"unknown formats {unknown}; known: {sorted(FORMATS)}")
    outcomes = write_fixtures(names or None) if ns.fixtures else generate(Path(ns.args[0]), names or None)
    failed = 0
    for name, outcome in outcomes.items():
        state = "ok" if outcome.returncode == 0 and not outcome.network else "FAILED"
        failed += state != "ok"
        print(f"{name:30} {state:6} {outcome.seconds:5.1f} s  {outcome.path if not ns.fixtures else FIXTURES / (name + '.jsonl')}")
        if state != "ok":
            print("\n".join("    " + line for line in (outcome.stderr.strip().splitlines()[-15:] + outcome.network)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
