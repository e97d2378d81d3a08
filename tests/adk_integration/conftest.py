"""Google ADK's tests run in their own environment (``make test-adk-strands``): ADK pins an older
OpenTelemetry SDK than the rest of the suite uses. Elsewhere this folder is not collected; with
``OUTCOME_TELEMETRY_ADK_STRANDS=1`` (set by ``make test-adk-strands`` and CI) a missing ADK fails."""

from __future__ import annotations

import importlib.util
import os

collect_ignore_glob: list[str] = []
if importlib.util.find_spec("google") is None or importlib.util.find_spec("google.adk") is None:
    if os.environ.get("OUTCOME_TELEMETRY_ADK_STRANDS") == "1":
        raise RuntimeError("OUTCOME_TELEMETRY_ADK_STRANDS=1 but google-adk is not installed: run make test-adk-strands")
    collect_ignore_glob = ["test_*.py"]
