"""The CrewAI tests run in their own environment (``make test-crewai``): CrewAI pins ``mcp<2``,
which the rest of the suite cannot share. Elsewhere this folder is not collected; with
``OUTCOME_TELEMETRY_CREWAI=1`` (set by ``make test-crewai`` and CI) a missing CrewAI fails."""

from __future__ import annotations

import importlib.util
import os

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")  # no phoning home from a test run
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")

collect_ignore_glob: list[str] = []
if importlib.util.find_spec("crewai") is None:
    if os.environ.get("OUTCOME_TELEMETRY_CREWAI") == "1":
        raise RuntimeError("OUTCOME_TELEMETRY_CREWAI=1 but crewai is not installed: run make test-crewai")
    collect_ignore_glob = ["test_*.py"]
