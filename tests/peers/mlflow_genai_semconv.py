"""MLflow Tracing's OTel export with ``MLFLOW_ENABLE_OTEL_GENAI_SEMCONV=true``: the same story, GenAI-shaped spans."""

from __future__ import annotations

import sys
from pathlib import Path

from .mlflow_tracing import write_story as _write_mlflow

__all__ = ["write_story"]


def write_story(path: Path) -> None:
    """Run ``mlflow_tracing``'s story with MLflow translating its spans to the GenAI conventions; write ``path``."""
    _write_mlflow(path, genai_semconv=True)


if __name__ == "__main__":
    write_story(Path(sys.argv[1]))
