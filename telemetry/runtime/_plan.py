"""What ``configure()`` will do, decided and checked before it does any of it.

:func:`plan` validates every argument, resolves the environment (``OTEL_BSP_*``, the OTLP
variables), picks the tracer provider and proves the traces folder writable, and changes
nothing else: a :class:`ConfigurationError` from here leaves the process exactly as it was.
``_setup.install`` then acts on the :class:`Plan`, undoing its own steps if one fails.
"""

from __future__ import annotations

import logging
import os
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from prometheus_client import CollectorRegistry

from .. import conventions as c
from .._extras import require
from ..exceptions import ConfigurationError
from . import _active as _state
from ._batching import BatchSettings

logger = logging.getLogger("telemetry")

OUR_PROVIDERS: weakref.WeakSet[TracerProvider] = weakref.WeakSet()
"""Providers configure() created. Weak references, not ids: an id is reused once its provider
is collected, and an application's provider at that address would be mistaken for ours."""
PROTOCOLS = ("http/protobuf", "grpc")
OTLP_EXPORTERS = {
    "http/protobuf": ("otlp", "opentelemetry.exporter.otlp.proto.http.trace_exporter",
                      "opentelemetry-exporter-otlp-proto-http"),
    "grpc": ("otlp-grpc", "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
             "opentelemetry-exporter-otlp-proto-grpc"),
}
"""Per protocol: the extra that installs its exporter, the exporter's module, its distribution."""
SDK_BATCH_DEFAULTS = BatchSettings(max_queue_size=2048, schedule_delay_millis=5000, max_export_batch_size=512, export_timeout_millis=30_000)
"""The SDK's ``BatchSpanProcessor`` defaults, for the OTLP and extra exporters."""
FILE_BATCH_DEFAULTS = BatchSettings(
    max_queue_size=2048, schedule_delay_millis=500, max_export_batch_size=512, export_timeout_millis=30_000, block_millis=1000
)
"""The trace files' defaults: the SDK's queue and batch sizes, a shorter delay (a file write is
cheap, and the delay bounds what a killed process loses), and back-pressure: a thread ending a
tool span waits up to a second for room rather than lose the evidence forensics reads."""


@dataclass(frozen=True)
class OtlpChoice:
    """Which OTLP exporter to build: ``endpoint`` None means the standard variables name it."""

    protocol: str
    endpoint: str | None


@dataclass
class Plan:
    """Everything ``configure()`` decided, ready to install."""

    provider: TracerProvider | None
    """The application's provider to add to, or None to create one (with ``resource``)."""
    resource: Resource
    install_global: bool
    service_name: str
    traces_dir: Path | None
    file_settings: BatchSettings
    file_all_spans: bool
    otlp: OtlpChoice | None
    export_settings: BatchSettings
    extra_exporters: list[SpanExporter] = field(default_factory=list)
    registry: CollectorRegistry | None = None
    metrics_port: int | None = None
    metrics_addr: str = "127.0.0.1"
    multiprocess_dir: Path | None = None
    """prometheus-client's multiprocess folder, or None for one process's own metrics."""


def otlp_choice(endpoint: str | None, protocol: str | None) -> OtlpChoice | None:
    """The OTLP exporter the arguments or the ``OTEL_EXPORTER_OTLP_*`` variables ask for, if any.

    An argument is checked (a bad protocol raises); a bad protocol variable warns and falls
    back to ``http/protobuf``, as the SDK treats its variables.
    """
    env_endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if endpoint is None and not env_endpoint:
        return None
    if protocol is None:
        env_protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        protocol = env_protocol or "http/protobuf"
        if protocol not in PROTOCOLS:
            logger.warning("OTEL_EXPORTER_OTLP_PROTOCOL=%r is not one of %s; using http/protobuf", protocol, PROTOCOLS)
            protocol = "http/protobuf"
    elif protocol not in PROTOCOLS:
        raise ConfigurationError(f"otlp_protocol={protocol!r} is not one of {', '.join(PROTOCOLS)}")
    if endpoint is not None and protocol == "http/protobuf" and not endpoint.rstrip("/").endswith("/v1/traces"):
        endpoint = endpoint.rstrip("/") + "/v1/traces"
    return OtlpChoice(protocol, endpoint)


def available(choice: OtlpChoice, *, explicit: bool) -> OtlpChoice | None:
    """``choice``, when its exporter is installed. Otherwise a :class:`ConfigurationError` naming
    the extra when the arguments asked for it; when only the ``OTEL_EXPORTER_OTLP_*`` variables
    did, a warning naming it, and no OTLP exporter (the variables are lenient, as above)."""
    extra, module, distribution = OTLP_EXPORTERS[choice.protocol]
    try:
        require(module, extra=extra, needed_for=f"OTLP export over {choice.protocol}", error=ConfigurationError,
                name=distribution)
    except ConfigurationError as exc:
        if explicit:
            raise
        logger.warning("outcome-telemetry: the OTEL_EXPORTER_OTLP_* variables ask for OTLP export, but %s; "
                       "spans go to the trace files only", exc)
        return None
    return choice


def build_otlp_exporter(choice: OtlpChoice) -> SpanExporter:
    """The SDK's OTLP exporter for ``choice`` (the exporter reads the variables itself when no endpoint is given)."""
    if choice.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter(endpoint=choice.endpoint)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    return HttpExporter(endpoint=choice.endpoint)


def service_name_of(resource: Resource) -> str:
    """The ``service.name`` a resource gives its spans (the SDK's ``unknown_service`` when it has none)."""
    return str(resource.attributes.get(c.SERVICE_NAME, "unknown_service"))


def is_ours(provider: object) -> bool:
    """True when ``configure()`` created ``provider`` (and it still exists)."""
    return isinstance(provider, TracerProvider) and provider in OUR_PROVIDERS


def _existing_provider(tracer_provider: object, install_global: bool) -> TracerProvider | None:
    """The application's provider to add to, or None when the runtime should create its own."""
    if tracer_provider is not None:
        if not isinstance(tracer_provider, TracerProvider):
            raise ConfigurationError(
                f"tracer_provider must be an opentelemetry.sdk.trace.TracerProvider, got {type(tracer_provider).__name__}"
            )
        return tracer_provider
    if not install_global:
        return None
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider) and not is_ours(current):
        return current
    if not isinstance(current, (trace.ProxyTracerProvider, TracerProvider)):
        raise ConfigurationError(
            f"the application already installed a {type(current).__module__}.{type(current).__name__} as the global "
            f"tracer provider, which outcome-telemetry cannot add span processors to. Pass "
            f"tracer_provider=<an SDK TracerProvider>, or install_global=False to keep tool spans in a provider "
            f"of their own."
        )
    return None


def plan(
    *,
    service_name: str | None,
    traces_dir: str | os.PathLike[str] | None,
    metrics_port: int | None,
    metrics_addr: str,
    registry: CollectorRegistry | None,
    otlp_endpoint: str | None,
    otlp_protocol: str | None,
    tracer_provider: TracerProvider | None,
    install_global: bool,
    extra_exporters: list[SpanExporter] | None,
    file_all_spans: bool,
    max_queue_size: int | None,
    schedule_delay_millis: int | None,
    max_export_batch_size: int | None,
    export_timeout_millis: int | None,
    block_millis: int | None,
    multiprocess_dir: str | os.PathLike[str] | None = None,
) -> Plan:
    """Check every argument and decide what to install; raises :class:`ConfigurationError`, changes nothing else."""
    if _state.active is not None and not _state.active.closed:
        raise ConfigurationError(
            "outcome-telemetry is already configured in this process; call shutdown() on the runtime "
            "configure() returned before configuring again, or keep using it"
        )
    if service_name is not None and (not isinstance(service_name, str) or not service_name):
        raise ConfigurationError(f"service_name must be a non-empty string, got {service_name!r}")
    if metrics_port is not None and (isinstance(metrics_port, bool) or not isinstance(metrics_port, int) or not 0 <= metrics_port <= 65535):
        raise ConfigurationError(f"metrics_port must be a port number 0-65535, got {metrics_port!r}")
    if registry is not None and not isinstance(registry, CollectorRegistry):
        raise ConfigurationError(f"registry must be a prometheus_client.CollectorRegistry, got {type(registry).__name__}")
    for exporter in extra_exporters or ():
        if not isinstance(exporter, SpanExporter):
            raise ConfigurationError(f"extra_exporters must hold SpanExporter objects, got {type(exporter).__name__}")
    file_settings = BatchSettings.resolve(
        defaults=FILE_BATCH_DEFAULTS, max_queue_size=max_queue_size, schedule_delay_millis=schedule_delay_millis,
        max_export_batch_size=max_export_batch_size, export_timeout_millis=export_timeout_millis,
        block_millis=block_millis)
    export_settings = BatchSettings.resolve(defaults=SDK_BATCH_DEFAULTS, export_timeout_millis=export_timeout_millis)
    otlp = otlp_choice(otlp_endpoint, otlp_protocol)
    provider = _existing_provider(tracer_provider, install_global)
    resource = Resource.create({c.SERVICE_NAME: service_name} if service_name else {})
    if provider is not None:
        effective = service_name_of(provider.resource)
        if service_name is not None and service_name != effective:
            logger.warning(
                "outcome-telemetry: service_name=%r cannot apply: the application's TracerProvider names the "
                "service %r in its resource, and its spans (tool spans included) keep that name",
                service_name,
                effective,
            )
        if otlp is not None and otlp_endpoint is None:
            logger.info(
                "outcome-telemetry: the OTEL_EXPORTER_OTLP_* variables are left to the application's TracerProvider; "
                "no second OTLP exporter is added to it"
            )
            otlp = None
    else:
        effective = service_name_of(resource)
    if otlp is not None:
        otlp = available(otlp, explicit=otlp_endpoint is not None or otlp_protocol is not None)
    from ._multiprocess import resolve

    shared_metrics = resolve(multiprocess_dir)
    directory = Path(traces_dir) if traces_dir is not None else None
    if directory is not None:
        from ._exporter import JsonLinesSpanExporter

        JsonLinesSpanExporter(directory, effective).check_writable()
    return Plan(
        provider=provider, resource=resource, install_global=install_global, service_name=effective,
        traces_dir=directory, file_settings=file_settings, file_all_spans=bool(file_all_spans), otlp=otlp,
        export_settings=export_settings, extra_exporters=list(extra_exporters or ()), registry=registry,
        metrics_port=metrics_port, metrics_addr=metrics_addr, multiprocess_dir=shared_metrics)
