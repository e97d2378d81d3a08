"""``telemetry.configure()``: wire spans to files (and a collector) and metrics to a registry.

The runtime owns what it created and nothing else: its span processors, its metrics (in the
registry it was given or made) and its ``/metrics`` server. ``shutdown()`` flushes every span to
disk, stops the server and unregisters the metrics, and is idempotent; it also runs at exit.

Tracer providers: an application that already installed an SDK ``TracerProvider`` keeps it: the
runtime adds its processors to it, so tool spans share the application's resource, sampler and
exporters. An application that installed some other provider gets a ``ConfigurationError``
saying what to do. Otherwise the runtime creates an SDK provider (honouring ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES`` and the ``OTEL_TRACES_SAMPLER`` variables) and installs it as the
global one, so the application's own spans join the same traces.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref
from pathlib import Path
from types import TracebackType
from typing import Any, Callable

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from . import active as _state
from .. import conventions as c
from ..exceptions import ConfigurationError
from .exporter import JsonLinesSpanExporter
from .metrics import ToolMetrics

logger = logging.getLogger("telemetry")

_OUR_PROVIDERS: weakref.WeakSet[TracerProvider] = weakref.WeakSet()
"""Providers configure() created. Weak references, not ids: an id is reused once its provider
is collected, and an application's provider at that address would be mistaken for ours."""
_PROTOCOLS = ("http/protobuf", "grpc")
DEFAULT_MAX_QUEUE_SIZE = 65_536


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("outcome-telemetry")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"


def _otlp_exporter(endpoint: str | None, protocol: str | None) -> SpanExporter | None:
    """An OTLP exporter when an endpoint is given or the standard variables name one."""
    env_endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if endpoint is None and not env_endpoint:
        return None
    if protocol is None:
        env_protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        protocol = env_protocol or "http/protobuf"
        if protocol not in _PROTOCOLS:
            logger.warning("OTEL_EXPORTER_OTLP_PROTOCOL=%r is not one of %s; using http/protobuf", protocol, _PROTOCOLS)
            protocol = "http/protobuf"
    elif protocol not in _PROTOCOLS:
        raise ConfigurationError(f"otlp_protocol={protocol!r} is not one of {', '.join(_PROTOCOLS)}")
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter(endpoint=endpoint)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    if endpoint is not None and not endpoint.rstrip("/").endswith("/v1/traces"):
        endpoint = endpoint.rstrip("/") + "/v1/traces"
    return HttpExporter(endpoint=endpoint)


class Runtime:
    """The handle ``configure()`` returns. Use as a context manager or call :meth:`shutdown`."""

    def __init__(
        self,
        *,
        provider: TracerProvider,
        owns_provider: bool,
        processors: list[SpanProcessor],
        registry: CollectorRegistry,
        file_exporter: JsonLinesSpanExporter | None,
        metrics_server: Any = None,
        owns_registry: bool = True,
    ) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer(c.INSTRUMENTATION_SCOPE, _package_version())
        self.registry = registry
        self.metrics = ToolMetrics(registry)
        self.file_exporter = file_exporter
        self._owns_provider = owns_provider
        self._processors = processors
        self._metrics_server = metrics_server
        self._owns_registry = owns_registry
        self._lock = threading.Lock()
        self._closed = False

    # --- where things went ---------------------------------------------------------------------

    @property
    def service_name(self) -> str:
        return str(self.provider.resource.attributes.get(c.SERVICE_NAME, "unknown_service"))

    @property
    def traces_dir(self) -> Path | None:
        """The folder the OTLP JSON lines files go to (None when file export is off)."""
        return self.file_exporter.directory if self.file_exporter is not None else None

    @property
    def trace_file(self) -> Path | None:
        """This process's trace file, once the first span was written."""
        return self.file_exporter.path if self.file_exporter is not None else None

    @property
    def metrics_url(self) -> str | None:
        """``http://127.0.0.1:PORT/metrics`` when a metrics port was opened."""
        if self._metrics_server is None:
            return None
        host, port = self._metrics_server.server_address[:2]
        return f"http://{host}:{port}/metrics"

    def metrics_text(self, openmetrics: bool = True) -> str:
        """The registry's exposition text (OpenMetrics carries the ``trace_id`` exemplars)."""
        render = generate_openmetrics if openmetrics else generate_latest
        return render(self.registry).decode("utf-8")

    def wsgi_app(self) -> Callable[..., Any]:
        """A WSGI app serving this runtime's registry, to mount in an existing server."""
        from prometheus_client import make_wsgi_app

        return make_wsgi_app(self.registry)

    def asgi_app(self) -> Callable[..., Any]:
        """An ASGI app serving this runtime's registry (e.g. ``app.mount("/metrics", ...)``)."""
        from prometheus_client import make_asgi_app

        return make_asgi_app(self.registry)

    # --- lifecycle ---------------------------------------------------------------------------

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Write every finished span out now; True when all processors flushed in time."""
        return all(p.force_flush(timeout_millis) for p in self._processors)

    def shutdown(self) -> None:
        """Flush and close everything this runtime opened. Safe to call more than once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if _state.active is self:
            _state.active = None
        if self._owns_provider:
            self.provider.shutdown()
        else:
            for processor in self._processors:
                processor.shutdown()
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
        if not self._owns_registry:
            # A shared registry must be free for the next runtime's metrics; our own keeps
            # its final counts readable after shutdown.
            self.metrics.unregister()
        atexit.unregister(self.shutdown)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.shutdown()


def is_ours(provider: object) -> bool:
    """True when ``configure()`` created ``provider`` (and it still exists)."""
    return isinstance(provider, TracerProvider) and provider in _OUR_PROVIDERS


def _choose_provider(tracer_provider: TracerProvider | None, install_global: bool, resource: Resource) -> tuple[TracerProvider, bool]:
    """Return (provider, owned): the application's provider if it has one, else a new one."""
    if tracer_provider is not None:
        if not isinstance(tracer_provider, TracerProvider):
            raise ConfigurationError(
                f"tracer_provider must be an opentelemetry.sdk.trace.TracerProvider, got {type(tracer_provider).__name__}"
            )
        return tracer_provider, False
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider) and not is_ours(current) and install_global:
        logger.info("outcome-telemetry: adding its span processors to the application's TracerProvider")
        return current, False
    if not isinstance(current, (trace.ProxyTracerProvider, TracerProvider)) and install_global:
        raise ConfigurationError(
            f"the application already installed a {type(current).__module__}.{type(current).__name__} as the global "
            f"tracer provider, which outcome-telemetry cannot add span processors to. Pass "
            f"tracer_provider=<an SDK TracerProvider>, or install_global=False to keep tool spans in a provider "
            f"of their own."
        )
    provider = TracerProvider(resource=resource)
    _OUR_PROVIDERS.add(provider)
    if install_global and isinstance(current, trace.ProxyTracerProvider):
        trace.set_tracer_provider(provider)
    return provider, True


def configure(
    *,
    service_name: str | None = None,
    traces_dir: str | os.PathLike[str] | None = "traces",
    metrics_port: int | None = None,
    metrics_addr: str = "127.0.0.1",
    registry: CollectorRegistry | None = None,
    otlp_endpoint: str | None = None,
    otlp_protocol: str | None = None,
    tracer_provider: TracerProvider | None = None,
    install_global: bool = True,
    extra_exporters: list[SpanExporter] | None = None,
    max_queue_size: int = DEFAULT_MAX_QUEUE_SIZE,
    schedule_delay_millis: int = 500,
) -> Runtime:
    """Start recording tool calls; returns the :class:`Runtime` handle.

    Parameters:
        service_name: ``service.name`` of the spans (default: ``OTEL_SERVICE_NAME``).
        traces_dir: folder for OTLP JSON lines files, one per process; None turns files off.
        metrics_port: serve ``/metrics`` on ``metrics_addr:metrics_port`` (0 picks a free port;
            see ``Runtime.metrics_url``). None serves nothing: mount ``wsgi_app()``/``asgi_app()``.
        registry: the prometheus-client registry to register in (default: a new one, so two
            runtimes in one process never collide; pass ``prometheus_client.REGISTRY`` to
            share the application's).
        otlp_endpoint, otlp_protocol: also export over OTLP (``http/protobuf`` or ``grpc``);
            the standard ``OTEL_EXPORTER_OTLP_*`` variables do the same without code.
        tracer_provider, install_global: see the module docstring.
        extra_exporters: more span exporters to batch to (e.g. a test's in-memory exporter).
    """
    if _state.active is not None and not _state.active.closed:
        raise ConfigurationError(
            "outcome-telemetry is already configured in this process; call shutdown() on the runtime "
            "configure() returned before configuring again, or keep using it"
        )
    if service_name is not None and (not isinstance(service_name, str) or not service_name):
        raise ConfigurationError(f"service_name must be a non-empty string, got {service_name!r}")
    if metrics_port is not None and (not isinstance(metrics_port, int) or not 0 <= metrics_port <= 65535):
        raise ConfigurationError(f"metrics_port must be a port number 0-65535, got {metrics_port!r}")
    if max_queue_size < 1:
        raise ConfigurationError(f"max_queue_size must be positive, got {max_queue_size!r}")
    resource = Resource.create({c.SERVICE_NAME: service_name} if service_name else {})
    provider, owned = _choose_provider(tracer_provider, install_global, resource)
    effective_service = str(provider.resource.attributes.get(c.SERVICE_NAME, "unknown_service"))

    exporters: list[SpanExporter] = []
    file_exporter = None
    if traces_dir is not None:
        file_exporter = JsonLinesSpanExporter(traces_dir, effective_service)
        exporters.append(file_exporter)
    otlp = _otlp_exporter(otlp_endpoint, otlp_protocol)
    if otlp is not None:
        exporters.append(otlp)
    exporters.extend(extra_exporters or ())
    processors: list[SpanProcessor] = [
        BatchSpanProcessor(
            exporter,
            max_queue_size=max_queue_size,
            schedule_delay_millis=schedule_delay_millis,
            max_export_batch_size=min(512, max_queue_size),
        )
        for exporter in exporters
    ]
    for processor in processors:
        provider.add_span_processor(processor)

    owns_registry = registry is None
    registry = registry if registry is not None else CollectorRegistry()
    server = None
    try:
        runtime = Runtime(
            provider=provider,
            owns_provider=owned,
            processors=processors,
            registry=registry,
            file_exporter=file_exporter,
            owns_registry=owns_registry,
        )
        if metrics_port is not None:
            server, _thread = start_http_server(metrics_port, addr=metrics_addr, registry=registry)
            runtime._metrics_server = server
    except Exception as exc:
        for processor in processors:
            processor.shutdown()
        if isinstance(exc, ValueError) and "Duplicated timeseries" in str(exc):
            raise ConfigurationError(
                "the registry already holds outcome-telemetry's metrics (a runtime that was not shut down, "
                "or another library using the same names); shut the old runtime down or pass registry="
                "CollectorRegistry()"
            ) from exc
        if isinstance(exc, OSError):
            raise ConfigurationError(f"cannot serve /metrics on {metrics_addr}:{metrics_port}: {exc}") from exc
        raise
    _state.active = runtime
    atexit.register(runtime.shutdown)
    return runtime


def active_runtime() -> Runtime | None:
    """The runtime decorated calls currently record into, if any."""
    return _state.active
