"""Span processors of other instrumentations, kept off our spans.

Some instrumentations convert spans after they end instead of creating their own: OpenInference's
pydantic-ai support is a span processor (``OpenInferenceSpanProcessor``) that rewrites every span
of the provider carrying GenAI attributes into an OpenInference span. Ours carry
``gen_ai.operation.name=execute_tool``, so on a shared provider each tool call would show twice
in Phoenix as a TOOL span: pydantic-ai's and ours. The processor has no attribute it skips on
(its ``span_filter`` only decides what it exports, after it has rewritten the span), so wrap it::

    from openinference.instrumentation.pydantic_ai import OpenInferenceSpanProcessor
    from telemetry.integrations._spans import skip_ours

    provider.add_span_processor(skip_ours(OpenInferenceSpanProcessor()))

Our spans then reach every exporter as we wrote them (``tool.*`` attributes, scope
``outcome-telemetry``), and the framework's own span is the one TOOL span of the call.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from .. import conventions as c

__all__ = ["skip_ours"]


def _ours(span: ReadableSpan) -> bool:
    scope = span.instrumentation_scope
    return scope is not None and scope.name == c.INSTRUMENTATION_SCOPE


class _SkipOurs(SpanProcessor):
    """``processor`` for every span but ours (instrumentation scope ``outcome-telemetry``)."""

    def __init__(self, processor: SpanProcessor) -> None:
        self.processor = processor

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if not _ours(span):
            self.processor.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if not _ours(span):
            self.processor.on_end(span)

    def shutdown(self) -> None:
        self.processor.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.processor.force_flush(timeout_millis))

    def __getattr__(self, name: str) -> Any:  # the wrapped processor's own settings
        if name == "processor":
            raise AttributeError(name)
        return getattr(self.processor, name)


def skip_ours(processor: SpanProcessor) -> SpanProcessor:
    """``processor``, called for every span of the provider except ours."""
    if not isinstance(processor, SpanProcessor):
        raise TypeError(f"skip_ours takes an OpenTelemetry SpanProcessor, got {processor!r}")
    return _SkipOurs(processor)
