"""The constraint-carrying delegation guard over a real SQLite file: partition rules, refusals,
waivers per hop, a 4-hop chain, and the legacy free-text pattern read back by forensics."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from telemetry import conventions as c
from telemetry import instrument_tool
from telemetry.exceptions import ConfigurationError
from telemetry.guards import Delegations, carried_ids, open_store, record_handoff
from telemetry.runtime._otlp_json import encode_traces_data
from telemetry.testing import Capture

ROOT = [
    {"id": "C1", "text": "Keep the public API contract unchanged"},
    {"id": "C2", "text": "p95 latency under 200 ms"},
    {"id": "C3", "text": "Never bypass the cache for authenticated users"},
    {"id": "C4", "text": "Ship behind a feature flag"},
]


@pytest.fixture
def ledger(store_url: str) -> Delegations:
    store = open_store(store_url)
    found = Delegations(store)
    found.register_task("T0", "Make the API faster", ROOT, agent_id="lead")
    return found


def criteria(*ids: str) -> list[dict[str, str]]:
    return [{"check": f"verify {cid}", "constraint_id": cid} for cid in ids]


def carry(*ids: str) -> list[dict[str, str]]:
    by_id = {item["id"]: item for item in ROOT}
    return [dict(by_id[cid]) for cid in ids]


def task_count(ledger: Delegations) -> int:
    with ledger.store.read() as conn:
        return int(conn.execute("SELECT count(*) FROM delegation_tasks").fetchone()[0])


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_register_task_span_names_root_hop_zero_and_all_ids(store_url: str, telemetry_capture: Capture) -> None:
    """register_task puts task id = root id, hop 0 and every constraint id on its span."""
    ledger = Delegations(open_store(store_url))
    result = ledger.register_task("T0", "Make the API faster", ROOT)
    assert result["ok"] and result["created"] and result["hop"] == 0
    a = attrs(telemetry_capture.span(c.TOOL_REGISTER_TASK))
    assert a[c.DELEGATION_TASK_ID] == a[c.DELEGATION_ROOT_TASK_ID] == "T0"
    assert a[c.DELEGATION_HOP] == 0
    assert list(a[c.DELEGATION_CONSTRAINTS_CARRIED]) == ["C1", "C2", "C3", "C4"]
    assert a[c.TOOL_READBACK] == c.READBACK_MATCH


def test_register_again_is_idempotent_but_a_different_ledger_is_refused(ledger: Delegations) -> None:
    """Re-registering the same ledger is a no-op; a different one for the same id is refused."""
    again = ledger.register_task("T0", "Make the API faster", ROOT)
    assert again["ok"] and again["created"] is False
    changed = ledger.register_task("T0", "Make the API faster", ROOT[:3])
    assert changed["error"] == c.OUTCOME_INVALID_ARGUMENT and "'T0'" in changed["message"]


def test_full_partition_creates_child_one_hop_deeper(ledger: Delegations, telemetry_capture: Capture) -> None:
    """Carried plus waived covering the ledger creates a child whose ledger is the carried set."""
    result = ledger.delegate(
        "Add a read cache",
        "T0",
        constraints=carry("C1", "C2", "C3"),
        acceptance_criteria=criteria("C1", "C3"),
        waived_constraints=[{"id": "C4", "reason": "internal endpoint, no flag system"}],
        agent_id="planner",
        task_id="T1",
    )
    assert result == {
        "ok": True,
        "task_id": "T1",
        "origin_task_id": "T0",
        "root_task_id": "T0",
        "hop": 1,
        "carried": ["C1", "C2", "C3"],
        "waived": ["C4"],
    }
    child = ledger.get_task("T1")
    assert [item["id"] for item in child["constraints"]] == ["C1", "C2", "C3"]
    a = attrs(telemetry_capture.span(c.TOOL_DELEGATE))
    assert a[c.DELEGATION_TASK_ID] == "T1" and a[c.DELEGATION_ORIGIN_TASK_ID] == "T0"
    assert a[c.DELEGATION_ROOT_TASK_ID] == "T0" and a[c.DELEGATION_HOP] == 1
    assert list(a[c.DELEGATION_CONSTRAINTS_CARRIED]) == ["C1", "C2", "C3"]
    assert list(a[c.DELEGATION_CONSTRAINTS_WAIVED]) == ["C4"]
    assert list(a[c.DELEGATION_WAIVER_REASONS]) == ["internal endpoint, no flag system"]
    assert a[c.GEN_AI_AGENT_ID] == "planner"
    assert a[c.TOOL_OUTCOME] == c.OUTCOME_OK and a[c.TOOL_READBACK] == c.READBACK_MATCH
    assert telemetry_capture.sample(c.METRIC_CONSTRAINT_WAIVERS_TOTAL, {c.LABEL_TOOL: c.TOOL_DELEGATE}) == 1.0


def test_missing_constraint_is_refused_naming_id_and_hop(ledger: Delegations, telemetry_capture: Capture) -> None:
    """An origin id neither carried nor waived is constraint_missing, naming the id and the hop."""
    before = task_count(ledger)
    result = ledger.delegate("Add a cache", "T0", carry("C1", "C2", "C4"), criteria("C1"), [], "planner")
    assert result["error"] == c.OUTCOME_CONSTRAINT_MISSING and result["retry"] is True
    assert "['C3']" in result["message"] and "hop 1" in result["message"]
    assert result["missing_ids"] == ["C3"]
    assert {item["id"] for item in result["required_constraints"]} == {"C1", "C2", "C3", "C4"}
    assert task_count(ledger) == before
    a = attrs(telemetry_capture.span(c.TOOL_DELEGATE))
    assert list(a[c.DELEGATION_CONSTRAINTS_MISSING]) == ["C3"]
    assert a[c.DELEGATION_HOP] == 1 and c.DELEGATION_TASK_ID not in a
    reason = {c.LABEL_TOOL: c.TOOL_DELEGATE, c.LABEL_REASON: c.OUTCOME_CONSTRAINT_MISSING}
    assert telemetry_capture.sample(c.METRIC_GUARD_REFUSALS_TOTAL, reason) == 1.0


def test_altered_text_is_refused_but_whitespace_is_not_alteration(ledger: Delegations) -> None:
    """A reworded constraint is constraint_missing; the same words re-spaced are carried."""
    reworded = carry("C1", "C2", "C3", "C4")
    reworded[2]["text"] = "Avoid cache bypass where possible"
    result = ledger.delegate("Add a cache", "T0", reworded, criteria("C1"), [], "planner")
    assert result["error"] == c.OUTCOME_CONSTRAINT_MISSING
    assert "['C3']" in result["message"] and "altered" in result["message"]
    assert "Never bypass the cache for authenticated users" in result["message"]
    respaced = carry("C1", "C2", "C3", "C4")
    respaced[2]["text"] = "  Never bypass the cache\nfor   authenticated users "
    ok = ledger.delegate("Add a cache", "T0", respaced, criteria("C1"), [], "planner")
    assert ok["ok"], ok
    stored = ledger.get_task(ok["task_id"])["constraints"][2]["text"]
    assert stored == "Never bypass the cache for authenticated users"


@pytest.mark.parametrize(
    ("constraints", "waived", "crit", "expected"),
    [
        (carry("C1", "C2", "C3", "C4") + [{"id": "C9", "text": "made up"}], [], criteria("C1"), "['C9']"),
        (carry("C1", "C2", "C3"), [{"id": "C4", "reason": "  "}], criteria("C1"), "'C4'"),
        (carry("C1", "C2", "C3", "C4"), [], [{"check": "it works"}], "cites no constraint id"),
        (carry("C1", "C2", "C3"), [{"id": "C4", "reason": "n/a"}], criteria("C4"), "'C4'"),
        (carry("C1", "C2", "C3", "C4"), [{"id": "C4", "reason": "n/a"}], criteria("C1"), "both carried and waived"),
        (carry("C1", "C1", "C2", "C3", "C4"), [], criteria("C1"), "twice"),
        ("C1, C2", [], criteria("C1"), "list of objects"),
    ],
    ids=["unknown-id", "empty-reason", "uncited-criterion", "criterion-cites-waived", "carried-and-waived", "dup", "shape"],
)
def test_malformed_partitions_are_invalid_argument(
    ledger: Delegations, constraints: Any, waived: Any, crit: Any, expected: str
) -> None:
    """Unknown ids, empty reasons, criteria citing no carried id and bad shapes are invalid_argument."""
    result = ledger.delegate("Add a cache", "T0", constraints, crit, waived, "planner")
    assert result["error"] == c.OUTCOME_INVALID_ARGUMENT, result
    assert expected in result["message"] and "hop 1" in result["message"]


def test_unknown_origin_is_not_found(ledger: Delegations) -> None:
    """Delegating from a task nobody registered is refused, naming the task."""
    result = ledger.delegate("x", "T404", carry("C1"), criteria("C1"), [], "planner")
    assert result["error"] == c.OUTCOME_NOT_FOUND and "'T404'" in result["message"]


def test_four_hop_chain_shrinks_only_by_recorded_waivers(ledger: Delegations, telemetry_capture: Capture) -> None:
    """Over four hops each child ledger is its parent's minus that hop's waivers, each counted."""
    plan = [("T1", "planner", []), ("T2", "architect", ["C4"]), ("T3", "builder", []), ("T4", "tester", ["C2", "C1"])]
    parent, kept = "T0", ["C1", "C2", "C3", "C4"]
    for hop, (task, agent_id, waive) in enumerate(plan, start=1):
        keep = [cid for cid in kept if cid not in waive]
        result = ledger.delegate(
            f"hop {hop}",
            parent,
            constraints=carry(*keep),
            acceptance_criteria=criteria(keep[0]),
            waived_constraints=[{"id": cid, "reason": f"{agent_id}: not applicable"} for cid in waive],
            agent_id=agent_id,
            task_id=task,
        )
        assert result["ok"] and result["hop"] == hop and result["root_task_id"] == "T0", result
        assert [i["id"] for i in ledger.get_task(task)["constraints"]] == keep
        parent, kept = task, keep
    spans = telemetry_capture.spans(c.TOOL_DELEGATE)
    assert [attrs(s)[c.DELEGATION_HOP] for s in spans] == [1, 2, 3, 4]
    assert [list(attrs(s)[c.DELEGATION_CONSTRAINTS_WAIVED]) for s in spans] == [[], ["C4"], [], ["C2", "C1"]]
    for before, after in zip(spans, spans[1:]):
        lost = set(attrs(before)[c.DELEGATION_CONSTRAINTS_CARRIED]) - set(attrs(after)[c.DELEGATION_CONSTRAINTS_CARRIED])
        assert lost == set(attrs(after)[c.DELEGATION_CONSTRAINTS_WAIVED])
    assert telemetry_capture.sample(c.METRIC_CONSTRAINT_WAIVERS_TOTAL, {c.LABEL_TOOL: c.TOOL_DELEGATE}) == 3.0
    waivers = ledger.waivers("T0")
    assert [(w["hop"], w["constraint_id"], w["agent_id"]) for w in waivers] == [
        (2, "C4", "architect"),
        (4, "C1", "tester"),
        (4, "C2", "tester"),
    ]
    dropping_c2 = ledger.delegate("hop 5", "T4", carry("C3"), criteria("C3"), [], "tester")
    assert dropping_c2["ok"], "C2 was waived at hop 4, so hop 5 owes it nothing"


def test_carried_ids_matches_verbatim_text_modulo_whitespace() -> None:
    """carried_ids finds constraint text in free text; a paraphrase is not carried."""
    context = "Please add caching.\nKeep the public API\n contract unchanged. Keep latency low."
    assert carried_ids(context, ROOT) == ["C1"]


@pytest.mark.parametrize(("context", "constraints", "named"), [
    ("keep C1", "C1", "constraints takes a list of {'id', 'text'} mappings (the chain root's), not 'C1'"),
    ("keep x", {"id": "C1", "text": "keep x"}, "constraints takes a list of {'id', 'text'} mappings"),
    ("keep x", [{"id": "C1"}], "each constraint is a mapping with an 'id' and a 'text', not {'id': 'C1'}"),
    ("keep x", [{"id": True, "text": "keep x"}], "each constraint is a mapping with an 'id' and a 'text'"),
    (None, [], "context is the hand-off's free text, not None"),
])
def test_carried_ids_refuses_what_is_not_text_and_a_list_of_constraints(context: Any, constraints: Any,
                                                                         named: str) -> None:
    """A string of constraints was iterated by character (a bare TypeError), a constraint without
    its text a KeyError: each is a ConfigurationError naming what it got."""
    with pytest.raises(ConfigurationError, match=re.escape(named)):
        carried_ids(context, constraints)


def test_record_handoff_rejects_misaligned_reasons() -> None:
    """record_handoff needs one reason per waived id."""
    with pytest.raises(ConfigurationError, match="1 waived ids but 0 reasons"):
        record_handoff(task_id="T1", origin_task_id="T0", root_task_id="T0", hop=1, carried=[], waived=["C1"])


@pytest.mark.parametrize(("field", "value", "named"), [
    ("carried", "C12", "carried takes a list of strings, not 'C12'; pass ['C12']"),
    ("carried", None, "carried takes a list of strings, not None"),
    ("carried", ["C1", 5], "carried takes a list of strings; 5 is not one"),
    ("waived", "C1", "waived takes a list of strings, not 'C1'; pass ['C1']"),
    ("waiver_reasons", b"why", "waiver_reasons takes a list of strings, not 3 bytes"),
])
def test_record_handoff_refuses_ids_that_are_not_a_list_of_strings(
        telemetry_capture: Capture, field: str, value: Any, named: str) -> None:
    """One string would be recorded as its characters ("C12" carried as "C", "1", "2"), and
    forensics would then judge constraints nobody named: refused by name, nothing recorded."""

    @instrument_tool(kind="delegate")
    def delegate(task: str) -> dict[str, Any]:
        given: dict[str, Any] = {"carried": ["C1"], "waived": [], "waiver_reasons": [], field: value}
        record_handoff(task_id="T1", origin_task_id="T0", root_task_id="T0", hop=1, **given)
        return {"ok": True}

    with pytest.raises(ConfigurationError, match=re.escape(named)):
        delegate("x")
    (span,) = telemetry_capture.spans()
    assert c.DELEGATION_CONSTRAINTS_CARRIED not in span.attributes


def test_legacy_free_text_chain_lets_forensics_find_the_dropping_hop(
    telemetry_capture: Capture, ledger: Delegations, tmp_path: Path
) -> None:
    """A legacy 4-hop free-text chain that loses C3 at hop 2 is found by constraint_loss_by_hop."""
    assert telemetry_capture.spans(c.TOOL_REGISTER_TASK), "the root's registration span is the baseline"
    current_task = {"id": "T0"}

    @instrument_tool(kind=c.KIND_DELEGATE)
    def delegate(subtask: str, context: str) -> str:
        handoff = ledger.legacy_handoff(context, origin_task_id=current_task["id"], subtask=subtask, agent_id="crew")
        current_task["id"] = handoff["task_id"]
        return f"delegated as {handoff['task_id']}"

    everything = " ".join(item["text"] for item in ROOT)
    without_c3 = " ".join(item["text"] for item in ROOT if item["id"] != "C3")
    from telemetry import agent

    # Forensics compares spans within a run: the hand-offs share one conversation. The root was
    # registered outside it (by the fixture), so the chain is judged from its earliest hop present.
    with agent("crew", conversation_id="legacy-chain"):
        for context in (everything, without_c3, without_c3 + " (cache as needed)", without_c3):
            delegate("next step", context)
    legacy = telemetry_capture.spans(delegate.__name__)
    assert [attrs(s)[c.DELEGATION_HOP] for s in legacy] == [1, 2, 3, 4]
    assert "C3" not in attrs(legacy[1])[c.DELEGATION_CONSTRAINTS_CARRIED]
    assert "C3" in attrs(legacy[0])[c.DELEGATION_CONSTRAINTS_CARRIED]

    from telemetry.forensics import open_traces

    trace_file = tmp_path / "traces.jsonl"
    trace_file.write_text(json.dumps(encode_traces_data(telemetry_capture.spans())) + "\n")
    with open_traces([trace_file]) as forensics:
        rows = forensics.run("constraint_loss_by_hop")
    assert [(r["constraint_id"], r["last_hop_carried"], r["dropped_at_hop"]) for r in rows] == [("C3", 1, 2)]
    assert rows[0]["root_task_id"] == "T0" and rows[0]["root_seen"] is False and rows[0]["baseline_hop"] == 1


def test_legacy_handoff_wiring_errors_raise_naming_the_task(ledger: Delegations) -> None:
    """An unregistered origin or a reused child id is the harness's bug: ConfigurationError naming it."""
    with pytest.raises(ConfigurationError, match="'T404' is not registered"):
        ledger.legacy_handoff("text", origin_task_id="T404")
    ledger.legacy_handoff("text", origin_task_id="T0", task_id="L1")
    with pytest.raises(ConfigurationError, match="'L1' already exists"):
        ledger.legacy_handoff("text", origin_task_id="T0", task_id="L1")


def test_oversized_constraint_text_is_invalid_and_registers_nothing(store_url: str) -> None:
    """A constraint text over the cap, or with a lone surrogate, is refused with the item named; no task is stored."""
    ledger = Delegations(open_store(store_url))
    for text, needle in (("y" * 20_000, "the limit is 16384"), ("\udc00 budget", "not valid Unicode text")):
        refused = ledger.register_task("T9", "objective", [{"id": "C1", "text": text}], "lead")
        assert refused["error"] == c.OUTCOME_INVALID_ARGUMENT and needle in refused["message"]
        assert "constraints[0]" in refused["message"]
        assert ledger.get_task("T9")["error"] == c.OUTCOME_NOT_FOUND
