"""configure(): files in the OTLP JSON format, /metrics, OTLP export, providers, lifecycle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import telemetry
from telemetry import conventions as c


def read_lines(directory: Path) -> list[dict[str, Any]]:
    lines = []
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            json_format.Parse(line, ExportTraceServiceRequest())  # must be valid OTLP JSON
            lines.append(json.loads(line))
    return lines


def all_spans(directory: Path) -> list[dict[str, Any]]:
    return [
        span
        for line in read_lines(directory)
        for rs in line["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]


def test_files_follow_the_otlp_json_file_format(tmp_path: Path) -> None:
    """One file per process; each line a TracesData with hex ids, string int64s, integer enums."""

    @telemetry.instrument_tool(kind="delegate")
    def delegate(hop: int) -> dict[str, Any]:
        telemetry.current_call().set_attributes(
            {c.DELEGATION_HOP: hop, c.DELEGATION_CONSTRAINTS_CARRIED: ["C1", "C2"], "ratio": 0.5, "flag": True}
        )
        return {"ok": False, "error": "constraint_missing"}

    with telemetry.configure(service_name="crew/one", traces_dir=tmp_path) as rt:
        with telemetry.agent("planner"):
            delegate(2)
    files = list(tmp_path.glob("*.jsonl"))
    assert len(files) == 1 and files[0].name.startswith(f"crew_one-{os.getpid()}-") and rt.trace_file == files[0]
    line = read_lines(tmp_path)[0]
    resource = {a["key"]: a["value"] for a in line["resourceSpans"][0]["resource"]["attributes"]}
    assert resource[c.SERVICE_NAME] == {"stringValue": "crew/one"}
    span = line["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(span["traceId"]) == 32 and span["traceId"] == span["traceId"].lower()
    assert len(span["spanId"]) == 16 and "parentSpanId" not in span
    assert span["kind"] == 1 and span["status"]["code"] == 2
    assert isinstance(span["startTimeUnixNano"], str) and int(span["endTimeUnixNano"]) >= int(span["startTimeUnixNano"])
    attrs = {a["key"]: a["value"] for a in span["attributes"]}
    assert attrs[c.DELEGATION_HOP] == {"intValue": "2"}
    assert attrs[c.DELEGATION_CONSTRAINTS_CARRIED] == {"arrayValue": {"values": [{"stringValue": "C1"}, {"stringValue": "C2"}]}}
    assert attrs["ratio"] == {"doubleValue": 0.5} and attrs["flag"] == {"boolValue": True}
    assert attrs[c.GEN_AI_AGENT_ID] == {"stringValue": "planner"}
    assert attrs[c.TOOL_OUTCOME] == {"stringValue": "constraint_missing"}


def test_lines_hold_at_most_64_spans(tmp_path: Path) -> None:
    """Large batches are split so each line stays small (readers stream line by line; a crash loses one line)."""

    @telemetry.instrument_tool(kind="read")
    def ping() -> None: ...

    with telemetry.configure(service_name="lines", traces_dir=tmp_path, schedule_delay_millis=60_000):
        for _ in range(300):
            ping()
    lines = read_lines(tmp_path)
    counts = [sum(len(ss["spans"]) for rs in ln["resourceSpans"] for ss in rs["scopeSpans"]) for ln in lines]
    assert sum(counts) == 300 and max(counts) <= c.OTLP_SPANS_PER_LINE


def test_shutdown_is_idempotent_and_reconfigure_works(tmp_path: Path) -> None:
    """shutdown() twice is fine; a second configure() while one is live is refused clearly."""
    rt = telemetry.configure(service_name="a", traces_dir=tmp_path / "a")
    with pytest.raises(telemetry.ConfigurationError, match="already configured"):
        telemetry.configure(service_name="b", traces_dir=tmp_path / "b")
    rt.shutdown()
    rt.shutdown()
    assert telemetry.active_runtime() is None
    with telemetry.configure(service_name="b", traces_dir=tmp_path / "b") as rt2:
        assert telemetry.active_runtime() is rt2


def test_bad_configuration_names_the_value(tmp_path: Path) -> None:
    """Wrong values raise ConfigurationError naming them."""
    with pytest.raises(telemetry.ConfigurationError, match="70000"):
        telemetry.configure(metrics_port=70000, traces_dir=tmp_path)
    with pytest.raises(telemetry.ConfigurationError, match="carrier-pigeon"):
        telemetry.configure(otlp_endpoint="http://127.0.0.1:1", otlp_protocol="carrier-pigeon", traces_dir=tmp_path)
    assert telemetry.active_runtime() is None


def test_service_name_and_sampler_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_SERVICE_NAME names the service; OTEL_TRACES_SAMPLER=always_off records no spans but still counts."""
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")

    @telemetry.instrument_tool(kind="read")
    def ping() -> None: ...

    with telemetry.configure(traces_dir=tmp_path) as rt:
        assert rt.service_name == "from-env"
        ping()
        text = rt.metrics_text()
    assert all_spans(tmp_path) == []
    assert 'tool_calls_total{outcome="ok",readback="not_applicable",tool="ping",transport="ok"} 1.0' in text
    assert "trace_id" not in text  # no exemplar for an unsampled call


def test_metrics_endpoint_serves_openmetrics_with_exemplars(tmp_path: Path) -> None:
    """/metrics binds to 127.0.0.1 and carries trace_id exemplars in OpenMetrics."""

    @telemetry.instrument_tool
    def write() -> dict[str, Any]:
        return {"ok": False, "error": "postcondition_failed"}

    with telemetry.configure(service_name="m", traces_dir=tmp_path, metrics_port=0) as rt:
        write()
        assert rt.metrics_url is not None and rt.metrics_url.startswith("http://127.0.0.1:")
        req = urllib.request.Request(rt.metrics_url, headers={"Accept": "application/openmetrics-text; version=1.0.0"})
        body = urllib.request.urlopen(req, timeout=10).read().decode()
        url = rt.metrics_url
    line = next(ln for ln in body.splitlines() if ln.startswith("tool_calls_total{"))
    assert 'outcome="postcondition_failed"' in line and '# {trace_id="' in line
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=2)  # the server is gone after shutdown


def test_wsgi_app_serves_the_registry(tmp_path: Path) -> None:
    """wsgi_app() mounts the runtime's registry in an existing WSGI server."""

    @telemetry.instrument_tool(kind="read")
    def ping() -> None: ...

    with telemetry.configure(service_name="w", traces_dir=tmp_path) as rt:
        ping()
        status: list[str] = []
        chunks = rt.wsgi_app()({"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": ""},
                               lambda s, h: status.append(s))
        assert status[0].startswith("200") and b'tool="ping"' in b"".join(chunks)


def test_application_tracer_provider_is_added_to(tmp_path: Path) -> None:
    """Given the application's SDK provider, tool spans go to its exporters and to our files."""
    app_exporter = InMemorySpanExporter()
    app_provider = TracerProvider()
    app_provider.add_span_processor(SimpleSpanProcessor(app_exporter))

    @telemetry.instrument_tool(kind="read")
    def ping() -> None: ...

    with telemetry.configure(service_name="x", traces_dir=tmp_path, tracer_provider=app_provider):
        ping()
    assert [s.name for s in app_exporter.get_finished_spans()] == ["execute_tool ping"]
    assert len(all_spans(tmp_path)) == 1


def _run_python(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)


def test_global_sdk_provider_is_kept_and_foreign_provider_refused(tmp_path: Path) -> None:
    """A process-global SDK provider is added to, never replaced; a non-SDK one gets a clear error."""
    keep = _run_python(
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "p = TracerProvider(); trace.set_tracer_provider(p)\n"
        "import telemetry\n"
        "rt = telemetry.configure(service_name='s', traces_dir='t')\n"
        "assert rt.provider is p and trace.get_tracer_provider() is p\n"
        "print('kept')\n",
        tmp_path,
    )
    assert keep.stdout.strip() == "kept", keep.stderr
    refuse = _run_python(
        "from opentelemetry import trace\n"
        "class Vendor(trace.NoOpTracerProvider): pass\n"
        "trace.set_tracer_provider(Vendor())\n"
        "import telemetry\n"
        "try:\n"
        "    telemetry.configure(service_name='s', traces_dir='t')\n"
        "except telemetry.ConfigurationError as e:\n"
        "    print(e)\n",
        tmp_path,
    )
    assert "Vendor" in refuse.stdout and "tracer_provider=" in refuse.stdout, refuse.stderr


class _Receiver(BaseHTTPRequestHandler):
    received: list[ExportTraceServiceRequest] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        type(self).received.append(request)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_otlp_http_export_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_EXPORTER_OTLP_ENDPOINT adds an OTLP/HTTP exporter next to the files."""
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    # A short poll: shutdown() waits for the loop's next wake-up (0.5 s by default).
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    try:

        @telemetry.instrument_tool(kind="read")
        def ping() -> None: ...

        with telemetry.configure(service_name="otlp", traces_dir=tmp_path):
            ping()
    finally:
        server.shutdown()
    names = [s.name for r in _Receiver.received for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert names == ["execute_tool ping"]
    assert len(all_spans(tmp_path)) == 1


def test_asgi_app_serves_the_registry(tmp_path: Path) -> None:
    """asgi_app() mounts the runtime's registry in an existing ASGI server."""
    import asyncio

    @telemetry.instrument_tool(kind="read")
    def ping() -> None: ...

    async def get(app: Any) -> tuple[int, bytes]:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "GET", "path": "/metrics", "query_string": b"", "headers": []}
        await app(scope, receive, send)
        status = next(m["status"] for m in sent if m["type"] == "http.response.start")
        return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")

    with telemetry.configure(service_name="a", traces_dir=tmp_path) as rt:
        ping()
        status, body = asyncio.run(get(rt.asgi_app()))
    assert status == 200 and b'tool="ping"' in body
