"""retry_tax: immediate retries after rate_limited, or after an error that said not to retry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from telemetry import conventions as c
from telemetry.forensics import Forensics, open_traces
from telemetry.forensics._questions import SEVERITY, question

from forensics_builder import TraceBuilder

HOSTILE = "x'); DROP TABLE spans; --\u202e"


def _planted() -> TraceBuilder:
    b = TraceBuilder()
    limited = c.OUTCOME_RATE_LIMITED
    # A storm: four retries within milliseconds of a rate limit that gave no retry-after.
    b.add("r-storm", "fetch_rates", "read", "pricer", 0.0, outcome=limited,
          attrs={c.TOOL_ERROR_CODE: limited, c.TOOL_ERROR_RETRY: c.RETRY_UNSAID})
    for t in (0.01, 0.02, 0.03):
        b.add("r-storm", "fetch_rates", "read", "pricer", t, outcome=limited,
              attrs={c.TOOL_ERROR_CODE: limited, c.TOOL_ERROR_RETRY: c.RETRY_UNSAID})
    b.add("r-storm", "fetch_rates", "read", "pricer", 0.04)
    b.add("r-storm", "fetch_rates", "read", "pricer", 9.0)  # a later, unrelated call: not part of it
    # Honoured: asked to wait 0.5 s, came back after 0.6 s.
    b.add("r-honoured", "fetch_rates", "read", "pricer", 0.0, outcome=limited,
          attrs={c.TOOL_ERROR_RETRY: c.RETRY_ADVISED, c.TOOL_ERROR_RETRY_AFTER_SECONDS: 0.5})
    b.add("r-honoured", "fetch_rates", "read", "pricer", 0.6)
    # Early: asked to wait 5 s, came back after 2 s (with a hostile code).
    b.add("r-early", "send_sms", "send", "notifier", 0.0, outcome=limited,
          attrs={c.TOOL_ERROR_CODE: HOSTILE, c.TOOL_ERROR_RETRY: c.RETRY_ADVISED, c.TOOL_ERROR_RETRY_AFTER_SECONDS: 5.0})
    b.add("r-early", "send_sms", "send", "notifier", 2.0)
    # Told not to retry (a declined card), retried at once.
    b.add("r-declined", "charge", "write", "billing", 0.0, outcome="card_declined",
          attrs={c.TOOL_ERROR_CODE: "card_declined", c.TOOL_ERROR_RETRY: c.RETRY_NOT_ADVISED})
    b.add("r-declined", "charge", "write", "billing", 0.1, outcome="card_declined",
          attrs={c.TOOL_ERROR_CODE: "card_declined", c.TOOL_ERROR_RETRY: c.RETRY_NOT_ADVISED})
    # Retried at once, but the guard answered: the retry never reached the work.
    b.add("r-guarded", "charge_card", "write", "billing", 0.0, outcome=limited)
    b.add("r-guarded", "charge_card", "write", "billing", 0.05, outcome=c.OUTCOME_IN_PROGRESS)
    # Another agent calling the same tool right after is not a retry; nor is an error that advised one.
    b.add("r-others", "fetch_rates", "read", "pricer", 0.0, outcome=limited)
    b.add("r-others", "fetch_rates", "read", "auditor", 0.05)
    b.add("r-others", "lookup", "read", "pricer", 0.0, outcome=c.OUTCOME_NOT_FOUND,
          attrs={c.TOOL_ERROR_RETRY: c.RETRY_ADVISED})
    b.add("r-others", "lookup", "read", "pricer", 0.05)
    return b


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forensics]:
    path = _planted().write(tmp_path_factory.mktemp("retry-tax") / "t.jsonl")
    with open_traces([path]) as opened:
        yield opened


def _by_run(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    assert len({r["run_id"] for r in rows}) == len(rows)
    return {r["run_id"]: r for r in rows}


def test_each_storm_is_one_row_with_its_retries_and_verdict(traces: Forensics) -> None:
    rows = _by_run(traces.run(c.QUESTION_RETRY_TAX))
    assert set(rows) == {"r-storm", "r-early", "r-declined", "r-guarded"}
    storm = rows["r-storm"]
    assert (storm["agent_id"], storm["tool_name"], storm["retries"], storm["ended_with"]) == (
        "pricer", "fetch_rates", 4, c.OUTCOME_OK)
    assert storm["outcomes"] == [c.OUTCOME_OK, c.OUTCOME_RATE_LIMITED]
    assert storm["retry_advice"] == c.RETRY_UNSAID and storm["retry_after_seconds"] is None
    assert len(storm["span_ids"]) == 4 and storm["span_id"] not in storm["span_ids"]
    assert storm["verdict"] == c.VERDICT_HAPPENED and "no retry-after" in storm["verdict_basis"]
    assert 0 < storm["shortest_wait_ms"] < 10
    early = rows["r-early"]
    assert early["error_code"] == HOSTILE  # data, never SQL
    assert early["retry_after_seconds"] == 5.0 and "before the retry-after" in early["verdict_basis"]
    assert rows["r-declined"]["retry_advice"] == c.RETRY_NOT_ADVISED
    assert "said not to retry" in rows["r-declined"]["verdict_basis"]
    assert rows["r-guarded"]["verdict"] == c.VERDICT_PREVENTED
    assert list(rows) == ["r-storm", "r-declined", "r-early", "r-guarded"]  # the biggest storm first


def test_every_row_carries_a_verdict_from_the_vocabulary(traces: Forensics) -> None:
    for row in traces.run(c.QUESTION_RETRY_TAX):
        assert row[c.COLUMN_VERDICT] in c.VERDICTS and row[c.COLUMN_VERDICT_BASIS]


def test_the_question_is_registered_with_its_description() -> None:
    q = question(c.QUESTION_RETRY_TAX)
    assert q.description.startswith("immediate retries after rate_limited")
    assert SEVERITY[c.QUESTION_RETRY_TAX] == "warning" and q.is_finding


def test_nothing_is_found_without_an_error_that_asked_for_a_wait(tmp_path: Path) -> None:
    b = TraceBuilder()
    for i in range(5):
        b.add("r-calm", "fetch_rates", "read", "pricer", i * 0.01)
    b.add("r-calm", "fetch_rates", "read", "pricer", 1.0, outcome=c.OUTCOME_TOOL_ERROR)
    b.add("r-calm", "fetch_rates", "read", "pricer", 1.01)
    with open_traces([b.write(tmp_path / "calm.jsonl")]) as opened:
        assert opened.run(c.QUESTION_RETRY_TAX) == []
