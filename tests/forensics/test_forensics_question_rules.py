"""The questions against their documented rules, on random crews (hypothesis).

Each SQL file narrows its joins to the rows that can be an answer (a refused subject, a key used
twice, a bucket with a rejection) before the expensive step. These tests restate three of those
rules in plain Python, straight from the SQL headers, and check the questions' rows against them
on crews whose keys, agents, payloads and outcomes collide often, so a narrowing that dropped a
row (or let one in) shows up.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from telemetry import conventions as c
from telemetry.forensics import open_traces

from forensics_builder import Span, TraceBuilder, attrs, ns

REFUSALS = (c.OUTCOME_REJECTED_STALE_VERSION, c.OUTCOME_STALE_POLICY, c.OUTCOME_DUPLICATE_REQUEST)
OUTCOMES = (c.OUTCOME_OK, c.OUTCOME_OK, c.OUTCOME_OK, c.OUTCOME_FORCED) + REFUSALS
_call = st.tuples(
    st.sampled_from(("r1", "r2")),                        # run
    st.sampled_from(("a", "b", None)),                    # agent
    st.sampled_from((c.KIND_READ, c.KIND_WRITE, c.KIND_SEND)),
    st.sampled_from(OUTCOMES),
    st.sampled_from(("k1", "k2", None)),                  # state key
    st.sampled_from(("i1", "i2", None)),                  # idempotency key
    st.sampled_from(("p1", "p2", None)),                  # payload hash
    st.booleans(),                                        # deduplicated replay
    st.integers(min_value=1, max_value=40),               # seconds since the previous call
)


def _crew(calls: list[tuple[Any, ...]]) -> TraceBuilder:
    """Plant the calls in order, each a few seconds after the last (distinct times, several minutes)."""
    builder, t = TraceBuilder(), 0.0
    for run, agent, kind, outcome, key, idem, payload, replay, gap in calls:
        t += gap
        named: dict[str, Any] = {}
        if key is not None:
            named["STATE_KEY"] = key
            named["STATE_VERSION_READ" if kind == c.KIND_READ else "STATE_VERSION_EXPECTED"] = "v1"
        if idem is not None:
            named["IDEMPOTENCY_KEY_HASH"] = idem
            if payload is not None:
                named["IDEMPOTENCY_PAYLOAD_HASH"] = payload
            if replay:
                named["TOOL_DEDUPLICATED"] = True
        builder.add(run, f"{kind}_tool", kind, agent, t, outcome=outcome, attrs=attrs(**named))
    return builder


def _attr(span: Span, name: str) -> Any | None:
    return span.attributes.get(name)


def _idempotency_rows(spans: list[Span]) -> Counter[tuple[Any, ...]]:
    """idempotency_conflicts by its header: (kind, span id, original payload) per row."""
    calls: dict[tuple[str, str], list[Span]] = {}
    for s in spans:  # planted in time order
        key = _attr(s, c.IDEMPOTENCY_KEY_HASH)
        if key is not None and s.outcome == c.OUTCOME_OK and not _attr(s, c.TOOL_DEDUPLICATED):
            calls.setdefault((s.run, key), []).append(s)
    first = {k: _attr(v[0], c.IDEMPOTENCY_PAYLOAD_HASH) for k, v in calls.items()}
    rows: Counter[tuple[Any, ...]] = Counter()
    for s in spans:
        original = first.get((s.run, _attr(s, c.IDEMPOTENCY_KEY_HASH)))
        if s.outcome == c.OUTCOME_DUPLICATE_REQUEST:
            rows[("conflict_refused", s.span_id, original)] += 1
        if _attr(s, c.TOOL_DEDUPLICATED):
            rows[("replay", s.span_id, original)] += 1
    for key, group in calls.items():
        for n, s in enumerate(group):
            payload = _attr(s, c.IDEMPOTENCY_PAYLOAD_HASH)
            if payload != first[key]:
                rows[("conflict_accepted", s.span_id, first[key])] += 1
            elif n > 0:
                rows[("repeated_execution", s.span_id, first[key])] += 1
    return rows


def _contention_rows(spans: list[Span]) -> Counter[tuple[Any, ...]]:
    """contention by its header: per key and minute with a rejection, and the change since the last such."""
    buckets: dict[tuple[str, int], list[Span]] = {}
    for s in spans:
        if s.kind == c.KIND_WRITE and _attr(s, c.STATE_KEY) is not None:
            buckets.setdefault((_attr(s, c.STATE_KEY), ns(s.t) // 60_000_000_000), []).append(s)
    rows: Counter[tuple[Any, ...]] = Counter()
    previous: dict[str, int] = {}
    for (key, minute), group in sorted(buckets.items()):
        rejected = sum(s.outcome == c.OUTCOME_REJECTED_STALE_VERSION for s in group)
        if not rejected:
            continue
        change = rejected - previous[key] if key in previous else None
        previous[key] = rejected
        start = datetime.fromtimestamp(minute * 60, tz=timezone.utc).replace(tzinfo=None)
        rows[(key, start, len(group), rejected, len({s.agent for s in group if s.agent is not None}),
              len({s.run for s in group}), change)] += 1
    return rows


def _subject(s: Span) -> tuple[str | None, str | None]:
    key, idem = _attr(s, c.STATE_KEY), _attr(s, c.IDEMPOTENCY_KEY_HASH)
    if key is not None:
        return "state_key", key
    return ("idempotency_key", idem) if idem is not None else (None, None)


def _refusal_rows(spans: list[Span]) -> Counter[tuple[Any, ...]]:
    """guard_refusals by its header: each refusal, and the same agent's first accepted call on its
    subject later in the run (not a read)."""
    rows: Counter[tuple[Any, ...]] = Counter()
    for i, s in enumerate(spans):
        if s.outcome not in REFUSALS:
            continue
        subject = _subject(s)
        recovery = next((a for a in spans[i + 1:] if a.run == s.run and (a.agent or "") == (s.agent or "")
                         and a.outcome in (c.OUTCOME_OK, c.OUTCOME_FORCED) and a.kind != c.KIND_READ
                         and subject[1] is not None and _subject(a) == subject), None)
        rows[(s.span_id, recovery is not None, recovery.span_id if recovery else None)] += 1
    return rows


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(_call, min_size=1, max_size=40))
def test_narrowed_questions_return_exactly_the_rows_their_rules_define(calls: list[tuple[Any, ...]],
                                                                      tmp_path: Path) -> None:
    """idempotency_conflicts, contention and guard_refusals give the rows their headers define, no more,
    no fewer; every question's rows carry a valid verdict."""
    builder = _crew(calls)
    path = builder.write(tmp_path / "crew.jsonl")
    with open_traces([path]) as traces:
        idem = Counter((r["kind"], r["span_id"], r["original_payload_hash"]) for r in traces.run("idempotency_conflicts"))
        busy = Counter((r["state_key"], r["bucket_start"], r["writes"], r["rejected"], r["agents"], r["runs"],
                        r["rejected_change"]) for r in traces.run("contention"))
        refusals = Counter((r["span_id"], r["recovered"], r["recovery_span_id"]) for r in traces.run("guard_refusals"))
        answers = traces.answers()  # every question's rows carry a verdict their kind decides
    for name, rows in answers.items():
        assert all(r["verdict"] in c.VERDICTS and r["verdict_basis"] for r in rows), name
    assert all(r["verdict"] == (c.VERDICT_PREVENTED if r["kind"] in ("conflict_refused", "replay")
                                else c.VERDICT_HAPPENED) for r in answers["idempotency_conflicts"])
    assert all(r["verdict"] == c.VERDICT_PREVENTED for r in answers["contention"] + answers["guard_refusals"])
    assert idem == _idempotency_rows(builder.spans)
    assert busy == _contention_rows(builder.spans)
    assert refusals == _refusal_rows(builder.spans)
