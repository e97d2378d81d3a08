"""configure(): checks before installing, undoes a failed start, picks exporters, respects the app's provider."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, Counter

import telemetry
from telemetry import conventions as c


def export_threads() -> int:
    return sum(t.name.startswith("outcome-telemetry-") for t in threading.enumerate())


def file_span_names(directory: Path) -> list[str]:
    return [
        span["name"]
        for path in directory.glob("*.jsonl")
        for line in path.read_text().splitlines()
        for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]


@pytest.fixture
def busy_port() -> object:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


def test_a_port_in_use_fails_before_anything_is_installed(tmp_path: Path, busy_port: int) -> None:
    """A metrics port in use raises naming it, leaves no thread, metric or active runtime; a retry works."""
    registry = CollectorRegistry()
    before = export_threads()
    with pytest.raises(telemetry.ConfigurationError, match=str(busy_port)):
        telemetry.configure(traces_dir=tmp_path, metrics_port=busy_port, registry=registry)
    assert telemetry.active_runtime() is None and export_threads() == before
    assert list(registry.collect()) == []  # the metrics it registered were removed again
    with telemetry.configure(traces_dir=tmp_path, metrics_port=0, registry=registry) as rt:
        assert rt.metrics_url is not None


def test_a_taken_metric_name_fails_cleanly_and_the_retry_works(tmp_path: Path) -> None:
    """A registry already holding one of our names raises; the metrics registered before it are removed again."""
    registry = CollectorRegistry()
    foreign = Counter(c.METRIC_INTERNAL_ERRORS, "another library's counter", registry=registry)  # our last family
    before = export_threads()
    with pytest.raises(telemetry.ConfigurationError, match="already holds"):
        telemetry.configure(traces_dir=tmp_path, registry=registry)
    assert export_threads() == before and telemetry.active_runtime() is None
    assert [m.name for m in registry.collect()] == [c.METRIC_INTERNAL_ERRORS]
    registry.unregister(foreign)
    with telemetry.configure(traces_dir=tmp_path, registry=registry) as rt:
        assert rt.registry.get_sample_value(c.METRIC_INTERNAL_ERRORS_TOTAL, {c.LABEL_STAGE: c.STAGE_READBACK}) == 0


def test_a_failed_configure_installs_no_global_provider() -> None:
    """In a fresh process: a failing configure() leaves the global provider alone, so the corrected retry installs its own."""
    code = (
        "import socket\n"
        "from opentelemetry import trace\n"
        "import telemetry\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n"
        "try:\n"
        "    telemetry.configure(traces_dir=None, metrics_port=s.getsockname()[1])\n"
        "except telemetry.ConfigurationError:\n"
        "    pass\n"
        "assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)\n"
        "rt = telemetry.configure(traces_dir=None, metrics_port=0)\n"
        "assert trace.get_tracer_provider() is rt.provider\n"
        "print('clean')\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "clean", run.stderr


def test_an_unwritable_traces_dir_is_refused_at_configure(tmp_path: Path) -> None:
    """A traces_dir that cannot be created raises ConfigurationError naming it, and starts nothing."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    before = export_threads()
    with pytest.raises(telemetry.ConfigurationError, match="a-file/traces"):
        telemetry.configure(traces_dir=blocker / "traces")
    assert telemetry.active_runtime() is None and export_threads() == before
    created = tmp_path / "new" / "nested"
    with telemetry.configure(traces_dir=created):
        assert created.is_dir()


def _exporter_class(protocol: str) -> type:
    """The SDK's OTLP span exporter for ``protocol``; gRPC's is imported here, not at collection
    (it loads grpc, a tenth of a CPU second in every process that collects this module)."""
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter
    return HttpExporter


@pytest.mark.parametrize(
    ("env", "argument", "expected", "endpoint"),
    [
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, None, "http/protobuf", None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, None, "grpc", None),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
          "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, None, "http/protobuf", None),
        ({}, ("http://127.0.0.1:1", None), "http/protobuf", "http://127.0.0.1:1/v1/traces"),
        ({}, ("http://127.0.0.1:1/v1/traces", "http/protobuf"), "http/protobuf", "http://127.0.0.1:1/v1/traces"),
        ({}, ("127.0.0.1:1", "grpc"), "grpc", None),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, None, None, None),  # a protocol alone names no endpoint
    ],
)
def test_otlp_exporter_selection(
    env: dict[str, str], argument: tuple[str, str | None] | None, expected: str | None, endpoint: str | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """http/protobuf or grpc, from arguments or the OTEL_EXPORTER_OTLP_* variables (per-signal ones first)."""
    for name in ("ENDPOINT", "TRACES_ENDPOINT", "PROTOCOL", "TRACES_PROTOCOL"):
        monkeypatch.delenv(f"OTEL_EXPORTER_OTLP_{name}", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    kwargs = {"otlp_endpoint": argument[0], "otlp_protocol": argument[1]} if argument else {}
    with telemetry.configure(traces_dir=None, install_global=False, export_timeout_millis=1, **kwargs) as rt:  # type: ignore[arg-type]
        found = rt.exporters.get(c.EXPORTER_OTLP, [])
        if expected is None:
            assert found == []
        else:
            assert len(found) == 1 and type(found[0]) is _exporter_class(expected)
            if endpoint is not None:
                assert found[0]._endpoint == endpoint  # the SDK exporter keeps it there


def test_a_bad_protocol_variable_warns_and_falls_back(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """OTEL_EXPORTER_OTLP_PROTOCOL=carrier-pigeon warns, naming it, and uses http/protobuf."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
    with caplog.at_level(logging.WARNING, "telemetry"):
        with telemetry.configure(traces_dir=None, install_global=False) as rt:
            assert type(rt.exporters[c.EXPORTER_OTLP][0]) is HttpExporter
    assert "carrier-pigeon" in caplog.text


def test_otel_bsp_variables_are_honoured(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """OTEL_BSP_* set every processor's batching; an argument wins; a bad value warns and keeps the default."""
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "4096")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "250")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "not-a-number")
    with caplog.at_level(logging.WARNING, "telemetry"):
        with telemetry.configure(
            traces_dir=None, install_global=False, extra_exporters=[InMemorySpanExporter()], export_timeout_millis=900
        ) as rt:
            file_like = rt.batch_settings[c.EXPORTER_OTHER]
    assert (file_like.max_queue_size, file_like.schedule_delay_millis, file_like.max_export_batch_size) == (4096, 250, 512)
    assert "OTEL_BSP_MAX_EXPORT_BATCH_SIZE" in caplog.text
    with pytest.raises(telemetry.ConfigurationError, match="max_export_batch_size=5000"):
        telemetry.configure(traces_dir=None, max_export_batch_size=5000)
    with pytest.raises(telemetry.ConfigurationError, match="block_millis"):
        telemetry.configure(traces_dir=None, block_millis=-1)


def test_the_applications_provider_gets_no_second_otlp_exporter_and_keeps_its_spans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """With the app's provider: no OTLP exporter from the variables, only tool spans in the file, a warning
    naming both service names, and after shutdown() none of our processors left on the app's provider."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    app_exporter = InMemorySpanExporter()
    app = TracerProvider(resource=Resource.create({c.SERVICE_NAME: "shop"}))
    app.add_span_processor(SimpleSpanProcessor(app_exporter))

    @telemetry.instrument_tool(kind="read")
    def lookup() -> None:
        app.get_tracer("app").start_span("app.inner").end()

    with caplog.at_level(logging.WARNING, "telemetry"):
        rt = telemetry.configure(service_name="tools", traces_dir=tmp_path, tracer_provider=app)
    assert "'tools'" in caplog.text and "'shop'" in caplog.text
    assert c.EXPORTER_OTLP not in rt.exporters
    with telemetry.agent("a"):
        lookup()
        app.get_tracer("app").start_span("app.request").end()
    rt.shutdown()
    assert file_span_names(tmp_path) == ["execute_tool lookup"]
    assert sorted(s.name for s in app_exporter.get_finished_spans()) == ["app.inner", "app.request", "execute_tool lookup"]
    remaining = app._active_span_processor._span_processors  # the SDK's field detach_processor edits
    assert len(remaining) == 1 and isinstance(remaining[0], SimpleSpanProcessor)


def test_file_all_spans_writes_every_span_of_the_provider(tmp_path: Path) -> None:
    """file_all_spans=True puts the application's own spans in the trace file too."""
    app = TracerProvider()
    with telemetry.configure(traces_dir=tmp_path, tracer_provider=app, file_all_spans=True):
        app.get_tracer("app").start_span("app.request").end()
    assert file_span_names(tmp_path) == ["app.request"]


def test_shutdown_still_finds_the_sdk_fields_it_edits(tmp_path: Path) -> None:
    """Fails loudly if an SDK release renames the provider's processor list that shutdown() edits."""
    provider = TracerProvider()
    rt = telemetry.configure(traces_dir=tmp_path, tracer_provider=provider)
    fields = "TracerProvider._active_span_processor._span_processors/_lock changed; update detach_processor"
    assert provider._active_span_processor._span_processors and provider._active_span_processor._lock, fields
    rt.shutdown()
    assert provider._active_span_processor._span_processors == (), fields
