"""MLflow Tracing (``mlflow-tracing``) in its OpenTelemetry export mode: ``@mlflow.trace`` spans and OpenAI autolog.

MLflow exports OTel spans when ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set: its provider then
gets ``OtelSpanProcessor(span_exporter=get_otlp_exporter())``. Here that factory returns our
exporter instead of an OTLP client, so MLflow's own processor (trace registration, trace tags
copied onto the root span) runs and nothing is sent; no tracking server or store is involved.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import story
from .exporter import CollectorFileExporter
from .scripted_openai import chat_completions_client

__all__ = ["write_story"]


def write_story(path: Path, *, genai_semconv: bool = False) -> None:
    """Run the story with ``mlflow.trace`` and ``mlflow.openai.autolog``; write ``path``.

    ``genai_semconv`` sets ``MLFLOW_ENABLE_OTEL_GENAI_SEMCONV``: MLflow's processor then rewrites each
    span into the OpenTelemetry GenAI conventions before export (names, ``gen_ai.*`` attributes).
    """
    os.environ["MLFLOW_ENABLE_OTEL_GENAI_SEMCONV"] = "true" if genai_semconv else "false"
    os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "http://127.0.0.1:4318/v1/traces"  # selects OTel export; never dialled
    os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"
    os.environ["OTEL_SERVICE_NAME"] = "peer-story-mlflow"
    # mlflow-tracing 3.17 resolves a default tracking URI on first use by importing its file store, which
    # needs sqlparse (not among its dependencies); an explicit URI skips that. Nothing dials it here.
    os.environ["MLFLOW_TRACKING_URI"] = "http://127.0.0.1:9"
    os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
    os.environ["DO_NOT_TRACK"] = "true"
    import mlflow
    import mlflow.tracing.provider as mlflow_provider
    from mlflow.entities import SpanType

    exporter = CollectorFileExporter(path)
    mlflow_provider.get_otlp_exporter = lambda: exporter
    mlflow.openai.autolog()
    client = chat_completions_client()

    tools = {name: mlflow.trace(name=name, span_type=SpanType.TOOL)(fn) for name, fn in story.TOOLS.items()}

    @mlflow.trace(name="support", span_type=SpanType.AGENT)
    def support(prompt: str) -> str:
        mlflow.update_current_trace(metadata={"mlflow.trace.session": story.SESSION_ID, "mlflow.trace.user": story.USER_ID})
        return story.chat_loop(client, tools, prompt)

    support(story.PROMPT)
    mlflow.tracing.get_bridged_tracer_provider().shutdown()
    assert exporter.exported, "MLflow did not hand its spans to the exporter (did get_otlp_exporter move?)"


if __name__ == "__main__":
    write_story(Path(sys.argv[1]))
