"""Strands Agents' tests run in their own environment (``make test-adk-strands``): Strands pins an
older ``mcp`` than the rest of the suite uses. Elsewhere this folder is not collected; with
``OUTCOME_TELEMETRY_ADK_STRANDS=1`` (set by ``make test-adk-strands`` and CI) a missing Strands fails."""

from __future__ import annotations

import importlib.util
import os

collect_ignore_glob: list[str] = []
if importlib.util.find_spec("strands") is None:
    if os.environ.get("OUTCOME_TELEMETRY_ADK_STRANDS") == "1":
        raise RuntimeError("OUTCOME_TELEMETRY_ADK_STRANDS=1 but strands-agents is not installed: run make test-adk-strands")
    collect_ignore_glob = ["test_*.py"]
