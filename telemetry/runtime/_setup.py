"""``telemetry.configure()``: wire spans to files (and a collector) and metrics to a registry.

The runtime owns what it created and nothing else: its span processors, its metrics (in the
registry it was given or made) and its ``/metrics`` server. ``shutdown()`` flushes every span to
disk, stops the server, unregisters the metrics and detaches its processors from a provider that
is not its own; it is idempotent and also runs at exit.

``configure()`` first decides and checks everything (:mod:`._plan`: arguments, environment,
provider, a writable traces folder) without changing anything; then it registers the metrics,
binds the metrics port, starts the export threads, attaches them and, last, installs its provider
globally. A step that fails undoes the ones before it, so a corrected retry starts clean.

Tracer providers: an application that already installed an SDK ``TracerProvider`` keeps it: the
runtime adds its processors to it, so tool spans share the application's resource, sampler and
exporters, and adds no OTLP exporter of its own from the ``OTEL_EXPORTER_OTLP_*`` variables (the
application exports its spans itself). An application that installed some other provider gets a
``ConfigurationError`` saying what to do. Otherwise the runtime creates an SDK provider
(honouring ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_TRACES_SAMPLER``) and
installs it as the global one, so the application's own spans join the same traces. The trace
files hold tool spans only unless ``file_all_spans=True``.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from .. import conventions as c
from ..exceptions import ConfigurationError
from . import _active as _state
from ._batching import BatchSettings, CountingBatchProcessor, shutdown_together
from ._exporter import JsonLinesSpanExporter
from ._metrics import ToolMetrics
from ._metrics_server import stop_server
from ._multiprocess import aggregate_registry
from ._multiprocess import enable as enable_multiprocess
from ._plan import OUR_PROVIDERS, Plan, build_otlp_exporter, is_ours, plan, service_name_of

logger = logging.getLogger("telemetry")

__all__ = ["Runtime", "active_runtime", "configure", "is_ours"]


def _package_version() -> str:
    from .. import __version__  # read where it is defined: the one source is pyproject.toml

    return __version__


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
        metrics: ToolMetrics | None = None,
        multiprocess_dir: Path | None = None,
    ) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer(c.INSTRUMENTATION_SCOPE, _package_version())
        self.registry = registry
        self.metrics = metrics if metrics is not None else ToolMetrics(registry)
        self.file_exporter = file_exporter
        self._owns_provider = owns_provider
        self._processors = processors
        self._metrics_server = metrics_server
        self._owns_registry = owns_registry
        self.multiprocess_dir = multiprocess_dir
        """prometheus-client's multiprocess folder when every worker's metrics are summed (else None)."""
        self.exposed_registry = aggregate_registry(multiprocess_dir) if multiprocess_dir is not None else registry
        """What ``/metrics`` serves: ``registry``, or in multiprocess mode the sum of every process."""
        self._lock = threading.Lock()
        self._closed = False

    # --- where things went ---------------------------------------------------------------------

    @property
    def service_name(self) -> str:
        return service_name_of(self.provider.resource)

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
        """The exposition text (OpenMetrics carries the ``trace_id`` exemplars, except in
        multiprocess mode, where it is the sum of every worker and carries none)."""
        render = generate_openmetrics if openmetrics else generate_latest
        return render(self.exposed_registry).decode("utf-8")

    def wsgi_app(self) -> Callable[..., Any]:
        """A WSGI app serving this runtime's metrics (every worker's, in multiprocess mode)."""
        from prometheus_client import make_wsgi_app

        return make_wsgi_app(self.exposed_registry)

    def asgi_app(self) -> Callable[..., Any]:
        """An ASGI app serving this runtime's metrics (e.g. ``app.mount("/metrics", ...)``)."""
        from prometheus_client import make_asgi_app

        return make_asgi_app(self.exposed_registry)

    @property
    def exporters(self) -> dict[str, list[SpanExporter]]:
        """The span exporters this runtime batches to, by label (``file``, ``otlp``, ``other``)."""
        out: dict[str, list[SpanExporter]] = {}
        for processor in self._processors:
            if isinstance(processor, CountingBatchProcessor):
                out.setdefault(processor.exporter_label, []).append(processor.exporter)
        return out

    @property
    def batch_settings(self) -> dict[str, BatchSettings]:
        """How each kind of exporter batches (after arguments, ``OTEL_BSP_*`` and defaults)."""
        return {
            p.exporter_label: p.settings for p in self._processors if isinstance(p, CountingBatchProcessor)
        }

    # --- what was lost ------------------------------------------------------------------------

    @property
    def dropped_spans(self) -> dict[str, dict[str, int]]:
        """Spans lost so far, by exporter (``file``, ``otlp``, ``other``) and reason; zeros included.

        The same counts as ``outcome_telemetry_spans_dropped_total``, readable after shutdown.
        """
        out: dict[str, dict[str, int]] = {}
        for processor in self._processors:
            if isinstance(processor, CountingBatchProcessor):
                counts = out.setdefault(processor.exporter_label, dict.fromkeys(c.DROP_REASONS, 0))
                for reason, n in processor.dropped.items():
                    counts[reason] += n
        return out

    @property
    def internal_errors(self) -> dict[str, int]:
        """Contained failures so far by stage, as ``outcome_telemetry_internal_errors_total`` counts them."""
        return {
            stage: int(self.registry.get_sample_value(c.METRIC_INTERNAL_ERRORS_TOTAL, {c.LABEL_STAGE: stage}) or 0)
            for stage in c.STAGES
        }

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
        shutdown_together([p for p in self._processors if isinstance(p, CountingBatchProcessor)])
        if self._owns_provider:
            self.provider.shutdown()
        else:
            for processor in self._processors:
                processor.shutdown()
                detach_processor(self.provider, processor)
        if self._metrics_server is not None:
            stop_server(self._metrics_server)
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


def detach_processor(provider: TracerProvider, processor: SpanProcessor) -> bool:
    """Take ``processor`` off ``provider`` (the SDK has no public way); True when it was removed.

    This reads two private fields of the SDK's provider; a test fails loudly if a release renames
    them. Should they be gone, a shut-down processor of ours still ignores every span it is given.
    """
    multi = getattr(provider, "_active_span_processor", None)
    lock = getattr(multi, "_lock", None)
    current = getattr(multi, "_span_processors", None)
    if lock is None or not isinstance(current, tuple):
        return False
    with lock:
        kept = tuple(p for p in current if p is not processor)
        multi._span_processors = kept  # type: ignore[union-attr]
    return len(kept) < len(current)


def _is_tool_span(span: ReadableSpan) -> bool:
    scope = span.instrumentation_scope
    return scope is not None and scope.name == c.INSTRUMENTATION_SCOPE


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
    file_all_spans: bool = False,
    max_queue_size: int | None = None,
    schedule_delay_millis: int | None = None,
    max_export_batch_size: int | None = None,
    export_timeout_millis: int | None = None,
    block_millis: int | None = None,
    multiprocess_dir: str | os.PathLike[str] | None = None,
) -> Runtime:
    """Start recording tool calls; returns the :class:`Runtime` handle.

    Parameters:
        service_name: ``service.name`` of the spans (default: ``OTEL_SERVICE_NAME``). It cannot
            rename an application's provider; a warning names both names when they differ.
        traces_dir: folder for OTLP JSON lines files, one per process, created and checked
            writable now (``ConfigurationError`` naming it if not); None turns files off.
        metrics_port: serve ``/metrics`` on ``metrics_addr:metrics_port`` (0 picks a free port;
            see ``Runtime.metrics_url``). None serves nothing: mount ``wsgi_app()``/``asgi_app()``.
        registry: the prometheus-client registry to register in (default: a new one, so two
            runtimes in one process never collide; pass ``prometheus_client.REGISTRY`` to
            share the application's).
        otlp_endpoint, otlp_protocol: also export over OTLP (``http/protobuf`` or ``grpc``);
            the standard ``OTEL_EXPORTER_OTLP_*`` variables do the same without code, unless the
            application's own provider is used (it exports for itself).
        tracer_provider, install_global: see the module docstring.
        extra_exporters: more span exporters to batch to (e.g. a test's in-memory exporter).
        file_all_spans: write every span of the provider to the files, not only tool spans.
        max_queue_size, schedule_delay_millis, max_export_batch_size, export_timeout_millis:
            the trace files' batching; each defaults to its ``OTEL_BSP_*`` variable, else to
            the SDK's value (the delay to 500 ms). The OTLP and extra exporters batch as the SDK
            does, from the same variables, but ``export_timeout_millis`` bounds their
            ``shutdown()`` too (all exporters wait together; what a hung one held is counted).
        block_millis: how long a thread ending a tool span may wait for room when the file
            queue is full (default 1000); 0 drops at once. Every drop is counted.
        multiprocess_dir: prometheus-client's multiprocess folder (default:
            ``PROMETHEUS_MULTIPROC_DIR``). Set, every worker's counters and histograms are summed
            into what ``/metrics``, ``wsgi_app()`` and ``metrics_text()`` serve, without
            exemplars; see :mod:`telemetry.runtime._multiprocess`.
    """
    return install(plan(**locals()))  # every argument, as given: plan() checks them all


def install(decided: Plan) -> Runtime:
    """Act on a checked :class:`Plan`; if a step fails, undo the ones before it and raise."""
    with contextlib.ExitStack() as undo:
        if decided.multiprocess_dir is not None:
            enable_multiprocess(decided.multiprocess_dir)  # before the first metric is made
        owns_registry = decided.registry is None
        registry = decided.registry if decided.registry is not None else CollectorRegistry()
        try:
            metrics = ToolMetrics(registry)
        except ValueError as exc:
            raise ConfigurationError(
                "the registry already holds outcome-telemetry's metrics (a runtime that was not shut down, "
                "or another library using the same names); shut the old runtime down or pass registry="
                "CollectorRegistry()"
            ) from exc
        undo.callback(metrics.unregister)
        server = None
        if decided.metrics_port is not None:
            try:
                served = aggregate_registry(decided.multiprocess_dir) if decided.multiprocess_dir is not None else registry
                server, _thread = start_http_server(decided.metrics_port, addr=decided.metrics_addr, registry=served)
            except OSError as exc:
                raise ConfigurationError(
                    f"cannot serve /metrics on {decided.metrics_addr}:{decided.metrics_port}: {exc}; "
                    f"pick a free port (0 picks one for you)"
                ) from exc
            undo.callback(stop_server, server)
        processors, file_exporter = _processors(decided, metrics, owned=decided.provider is None)
        for processor in processors:
            undo.callback(processor.shutdown)
        if decided.provider is None:
            provider = TracerProvider(resource=decided.resource)
            OUR_PROVIDERS.add(provider)
        else:
            provider = decided.provider
            logger.info("outcome-telemetry: adding its span processors to the application's TracerProvider")
        for processor in processors:
            provider.add_span_processor(processor)
            if decided.provider is not None:
                undo.callback(detach_processor, provider, processor)
        runtime = Runtime(
            provider=provider,
            owns_provider=decided.provider is None,
            processors=list(processors),
            registry=registry,
            file_exporter=file_exporter,
            metrics_server=server,
            owns_registry=owns_registry,
            metrics=metrics,
            multiprocess_dir=decided.multiprocess_dir,
        )
        if decided.provider is None and decided.install_global and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            trace.set_tracer_provider(provider)  # last: the one step that cannot be undone
        undo.pop_all()
    _state.active = runtime
    atexit.register(runtime.shutdown)
    return runtime


def _processors(decided: Plan, metrics: ToolMetrics, owned: bool) -> tuple[list[CountingBatchProcessor], JsonLinesSpanExporter | None]:
    """One counting batch processor per exporter: the files, OTLP, then the extra exporters."""
    targets: list[tuple[SpanExporter, str, BatchSettings, Callable[[ReadableSpan], bool] | None]] = []
    only_tools = None if owned else _is_tool_span  # an application's spans are the application's to export
    file_exporter = None
    if decided.traces_dir is not None:
        file_exporter = JsonLinesSpanExporter(decided.traces_dir, decided.service_name)
        file_exporter.metrics = metrics
        targets.append((file_exporter, c.EXPORTER_FILE, decided.file_settings, None if decided.file_all_spans else _is_tool_span))
    if decided.otlp is not None:
        targets.append((build_otlp_exporter(decided.otlp), c.EXPORTER_OTLP, decided.export_settings, only_tools))
    for exporter in decided.extra_exporters:
        targets.append((exporter, c.EXPORTER_OTHER, decided.export_settings, only_tools))
    processors: list[CountingBatchProcessor] = []
    try:
        for exporter, label, settings, accept in targets:
            processors.append(CountingBatchProcessor(exporter, settings, metrics, accept=accept, exporter_label=label))
    except Exception:
        for processor in processors:
            processor.shutdown()
        raise
    return processors, file_exporter

def active_runtime() -> Runtime | None:
    """The runtime decorated calls currently record into, if any."""
    return _state.active
