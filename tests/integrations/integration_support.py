"""What the framework tests share: a guarded store, trace files from a capture, forensics checks."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from telemetry import conventions as c
from telemetry.forensics import open_traces
from telemetry.guards import SQLiteStore, StateStore
from telemetry.runtime._otlp_json import encode_traces_data
from telemetry.testing import Capture

KEY = "plan"


def state_store(tmp_path: Path, capture: Capture) -> StateStore:
    """A StateStore on a fresh SQLite file, ``plan`` created at a first version (its span dropped)."""
    store = StateStore(SQLiteStore(tmp_path / "state.db"))
    created = store.write_state(KEY, {"steps": ["draft"]}, "absent", agent_id="setup")
    assert created["ok"] is True
    capture.clear()
    return store


def ours(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    """Our tool spans only (the instrumentation scope says whose a span is)."""
    return [s for s in spans if s.instrumentation_scope is not None and s.instrumentation_scope.name == c.INSTRUMENTATION_SCOPE]


def write_traces(path: Path, spans: Sequence[ReadableSpan]) -> Path:
    """The spans as one OTLP JSON line, the format our exporter and a Collector write."""
    path.write_text(json.dumps(encode_traces_data(list(spans))) + "\n")
    return path


def findings(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Every forensics question's rows over the file (row order as the question sorts)."""
    with open_traces([path]) as traces:
        return {q.name: traces.run(q.name) for q in traces.questions}


def tool_spans_by_name(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    """Our spans of tool ``name``, oldest first."""
    return [s for s in ours(spans) if (s.attributes or {}).get(c.GEN_AI_TOOL_NAME) == name]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def assert_stale_write_story(path: Path, run_id: str) -> None:
    """Forensics over the agent's run: one run, the refused stale write found in it, no update lost."""
    with open_traces([path]) as traces:
        runs = traces.connection.execute(
            "SELECT DISTINCT run_id FROM spans WHERE outcome IS NOT NULL AND agent_id IS DISTINCT FROM 'colleague'"
        ).fetchall()
    assert runs == [(run_id,)], runs
    found = findings(path)
    refused = found["guard_refusals"]
    assert [(r["tool_name"], r["reason"], r["run_id"], r["recovered"]) for r in refused] == [
        ("write_state", c.OUTCOME_REJECTED_STALE_VERSION, run_id, True)], refused
    assert found["silent_failures"] == [], "a refusal the agent was told about is not a silent failure"
    assert [(r["state_key"], r["rejected"]) for r in found["contention"]] == [(KEY, 1)]
    assert found["lost_updates"] == []
