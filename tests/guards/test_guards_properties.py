"""Every guard tool, fed anything: an envelope back, never an exception, and a consistent store.

Property-based (hypothesis): JSON-like values of every shape, lone surrogates, integers beyond
64 bits and 5000 digits, a dict nested 1000 deep, a 10 MB string, objects whose ``__repr__``
raises. After each call the database passes ``PRAGMA integrity_check`` and every guard's own
invariants (no half-written rows).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from telemetry import conventions as c
from telemetry import instrument_tool
from telemetry.guards import (
    ABSENT_VERSION,
    Delegations,
    IdempotencyKeys,
    Objectives,
    Planner,
    StateStore,
    guarded_send,
    open_store,
)
from telemetry.testing import Capture

from .hostile import FUZZ, anything, assert_consistent, assert_envelope, texts

maybe = st.one_of(st.none(), anything)


class Crew:
    """One store with every guard on it, seeded with a little valid data to aim at."""

    def __init__(self, store_url: str) -> None:
        self.path = store_url
        store = open_store(store_url)
        self.store = store
        self.state = StateStore(store)
        self.state.write_state("products/a", {"collection": "summer", "price": 100}, ABSENT_VERSION)
        self.planner = Planner(self.state, bindings={"policy_version": lambda: "14"})
        self.planner.register_transform("reprice", lambda v, p: {**v, "price": 1})
        self.delegations = Delegations(store)
        self.delegations.register_task("T0", "ship it", [{"id": "C1", "text": "keep the API"}])
        self.objectives = Objectives(store)
        self.version = self.objectives.publish_objective("policy", "refund up to $20")["version"]
        keys = IdempotencyKeys(store, lease_seconds=30)
        self.runs = 0

        @instrument_tool(name="charge", kind=c.KIND_WRITE)
        @keys.idempotent()
        def charge(amount: Any, note: Any, idempotency_key: Any) -> dict[str, Any]:
            self.runs += 1
            return {"ok": True, "charged": self.runs}

        @instrument_tool(name="send", kind=c.KIND_SEND)
        @guarded_send(self.objectives, policy_task_id="policy")
        def send(body: Any, policy_version: Any, agent_id: Any = None) -> dict[str, Any]:
            return {"ok": True}

        self.charge, self.send = charge, send


@pytest.fixture
def crew(store_url: str, telemetry_capture: Capture) -> Crew:
    return Crew(store_url)


def answered(crew: Crew, result: Any) -> Any:
    assert_envelope(result)
    assert_consistent(crew.store)
    return result


@FUZZ
@given(key=anything, agent_id=maybe)
def test_read_state_answers_anything(crew: Crew, key: Any, agent_id: Any) -> None:
    """read_state: any key and agent id get an envelope."""
    answered(crew, crew.state.read_state(key, agent_id))


@FUZZ
@given(key=st.one_of(st.just("products/a"), st.just("k"), anything), value=anything,
       expected=st.one_of(st.just(ABSENT_VERSION), anything), agent_id=maybe)
def test_write_state_answers_anything_and_writes_only_valid_values(
    crew: Crew, key: Any, value: Any, expected: Any, agent_id: Any
) -> None:
    """write_state: any input gets an envelope; an accepted write reads back exactly as sent."""
    result = answered(crew, crew.state.write_state(key, value, expected, agent_id))
    if result["ok"]:
        assert crew.state.read_state(key)["value"] == as_json(value)


def as_json(value: Any) -> Any:
    """``value`` as JSON carries it back: a tuple, at any depth, as a list."""
    if isinstance(value, (list, tuple)):
        return [as_json(item) for item in value]
    if isinstance(value, dict):
        return {key: as_json(item) for key, item in value.items()}
    return value


@FUZZ
@given(key=anything, value=anything)
def test_force_write_state_answers_anything_from_an_operator(crew: Crew, key: Any, value: Any) -> None:
    """force_write_state with a real operator: any key and value get an envelope."""
    answered(crew, crew.state.force_write_state(key, value, operator="ops@example.com"))


@FUZZ
@given(action=st.one_of(st.just("reprice"), anything), object_set=st.one_of(st.just("products"), anything),
       predicate=st.one_of(st.just({"collection": "summer"}), anything), params=maybe, bindings=maybe,
       ttl=st.one_of(st.just(60), anything), agent_id=maybe)
def test_plan_change_and_commit_answer_anything(
    crew: Crew, action: Any, object_set: Any, predicate: Any, params: Any, bindings: Any, ttl: Any, agent_id: Any
) -> None:
    """plan_change (and the commit of any plan it accepts) answer every input with an envelope."""
    plan = answered(crew, crew.planner.plan_change(action, object_set, predicate, params, bindings, ttl, agent_id))
    if plan["ok"]:
        answered(crew, crew.planner.commit_plan(plan["plan_id"], agent_id))


@FUZZ
@given(plan_id=anything, agent_id=maybe)
def test_commit_plan_answers_anything(crew: Crew, plan_id: Any, agent_id: Any) -> None:
    """commit_plan: any plan id and agent id get an envelope."""
    answered(crew, crew.planner.commit_plan(plan_id, agent_id))


@FUZZ
@given(amount=anything, note=anything, key=st.one_of(st.just("k-1"), anything))
def test_an_idempotent_tool_answers_anything_and_never_leaves_a_claim(crew: Crew, amount: Any, note: Any, key: Any) -> None:
    """A keyed tool: any payload and key get an envelope; no claim is left running."""
    answered(crew, crew.charge(amount, note, idempotency_key=key))


@FUZZ
@given(task_id=st.one_of(st.just("T1"), anything), objective=anything, constraints=maybe, agent_id=maybe)
def test_register_task_answers_anything(crew: Crew, task_id: Any, objective: Any, constraints: Any, agent_id: Any) -> None:
    """register_task: any id, objective and ledger get an envelope."""
    answered(crew, crew.delegations.register_task(task_id, objective, () if constraints is None else constraints, agent_id))


constraint_lists = st.one_of(
    st.just([{"id": "C1", "text": "keep the API"}]),
    st.lists(st.dictionaries(st.sampled_from(["id", "text", "reason", "check", "constraint_id"]), anything), max_size=3),
    anything,
)


@FUZZ
@given(subtask=anything, origin=st.one_of(st.just("T0"), anything), constraints=constraint_lists,
       criteria=constraint_lists, waived=constraint_lists, agent_id=st.one_of(st.just("lead"), anything), task_id=maybe)
def test_delegate_answers_anything(
    crew: Crew, subtask: Any, origin: Any, constraints: Any, criteria: Any, waived: Any, agent_id: Any, task_id: Any
) -> None:
    """delegate: any hand-off gets an envelope and never a half-written child task."""
    answered(crew, crew.delegations.delegate(subtask, origin, constraints, criteria, waived, agent_id, task_id))


@FUZZ
@given(task_id=anything)
def test_get_task_answers_anything(crew: Crew, task_id: Any) -> None:
    """get_task: any id gets an envelope."""
    answered(crew, crew.delegations.get_task(task_id))


@FUZZ
@given(task_id=st.one_of(st.just("policy"), texts, anything), text=anything, reason=anything,
       expected=st.one_of(st.just("current"), anything), agent_id=anything)
def test_objective_tools_answer_anything(
    crew: Crew, task_id: Any, text: Any, reason: Any, expected: Any, agent_id: Any
) -> None:
    """publish, get and supersede an objective: any input gets an envelope; versions stay a chain."""
    answered(crew, crew.objectives.publish_objective(task_id, text))
    answered(crew, crew.objectives.get_objective(task_id, agent_id))
    current = crew.objectives.get_objective("policy", "auditor")["version"]
    answered(crew, crew.objectives.supersede_objective(task_id, text, reason, current if expected == "current" else expected))


@FUZZ
@given(body=anything, version=st.one_of(st.just("current"), anything), agent_id=maybe)
def test_a_guarded_send_answers_anything(crew: Crew, body: Any, version: Any, agent_id: Any) -> None:
    """A guarded send: any policy_version and agent id get an envelope (the body is the tool's own)."""
    current = crew.objectives.get_objective("policy", "auditor")["version"]
    answered(crew, crew.send(body, current if version == "current" else version, agent_id))
