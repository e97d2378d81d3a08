"""One validation module, one set of limits: the same id is judged the same by every guard, and
every message renders any value safely."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given

from telemetry import conventions as c
from telemetry.guards import (
    ABSENT_VERSION,
    Delegations,
    IdempotencyKeys,
    Objectives,
    Planner,
    StateStore,
    open_store,
)
from telemetry.guards._validation import MAX_ID_LENGTH, MAX_SHOWN, MAX_TEXT_LENGTH, show

from .hostile import FUZZ, HUGE_TEXT, RaisingRepr, anything, nested


@FUZZ
@given(value=anything)
def test_show_renders_anything_briefly_and_never_raises(value: Any) -> None:
    """show() gives at most MAX_SHOWN characters of plain UTF-8 for any value."""
    shown = show(value)
    assert isinstance(shown, str) and len(shown) <= MAX_SHOWN
    shown.encode("utf-8")


def test_show_names_what_it_cannot_print() -> None:
    """An unprintable object shows its type; a huge int its size; a surrogate is escaped."""
    assert show(RaisingRepr()) == "a RaisingRepr"
    assert show(10**5000) == "an integer of 16610 bits"
    assert show("a\ud800") == "'a\\ud800'"
    assert show(nested(1000)) == "{'a': {'a': {...}}}"


@pytest.fixture
def guards(store_url: str) -> dict[str, Callable[[Any], dict[str, Any]]]:
    """One id-taking call per guard, each given the id under test."""
    store = open_store(store_url)
    state = StateStore(store)
    planner = Planner(state)
    delegations = Delegations(store)
    objectives = Objectives(store)
    keys = IdempotencyKeys(store)

    @keys.idempotent(scope="pay")
    def pay(amount: int, idempotency_key: str) -> dict[str, Any]:
        return {"ok": True}

    return {
        "state key": lambda v: state.write_state(v, 1, ABSENT_VERSION),
        "agent id": lambda v: state.read_state("k", agent_id=v),
        "plan id": lambda v: planner.commit_plan(v),
        "task id": lambda v: delegations.register_task(v, "objective"),
        "objective task id": lambda v: objectives.publish_objective(v, "text"),
        "idempotency key": lambda v: pay(1, idempotency_key=v),
    }


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("x" * (MAX_ID_LENGTH + 1), f"the limit is {MAX_ID_LENGTH}"),
        (HUGE_TEXT, f"the limit is {MAX_ID_LENGTH}"),
        ("id\ud800", "lone surrogate"),
        (nested(1000), "must be a string, got dict"),
        (10**5000, "an integer of 16610 bits"),
        (RaisingRepr(), "got RaisingRepr a RaisingRepr"),
        ("  ", "must be a non-empty string"),
    ],
    ids=["over-limit", "10-MB", "surrogate", "deep-dict", "5000-digits", "raising-repr", "blank"],
)
def test_every_guard_judges_an_id_by_the_same_limits(guards: dict[str, Any], value: Any, needle: str) -> None:
    """Each guard refuses the same bad id as invalid_argument with the same reason, in a short message."""
    for name, call in guards.items():
        refused = call(value)
        assert refused["error"] == c.OUTCOME_INVALID_ARGUMENT, name
        assert needle in refused["message"] and len(refused["message"]) < 1_000, (name, refused["message"][:200])


def test_an_id_at_the_limit_is_accepted_by_every_guard(guards: dict[str, Any]) -> None:
    """MAX_ID_LENGTH characters is still an id everywhere (the plan is merely unknown)."""
    for name, call in guards.items():
        answer = call("y" * MAX_ID_LENGTH)
        assert answer["ok"] or answer["error"] == c.OUTCOME_NOT_FOUND, (name, answer)


def test_free_texts_share_one_limit(store_url: str) -> None:
    """An objective and a constraint text are both capped at MAX_TEXT_LENGTH."""
    store = open_store(store_url)
    long = "t" * (MAX_TEXT_LENGTH + 1)
    assert f"the limit is {MAX_TEXT_LENGTH}" in Objectives(store).publish_objective("p", long)["message"]
    refused = Delegations(store).register_task("T", "o", [{"id": "C1", "text": long}])
    assert f"the limit is {MAX_TEXT_LENGTH}" in refused["message"]
    assert Delegations(store).register_task("T", "o", [{"id": "C1", "text": long[:-1]}])["ok"]


@FUZZ
@given(value=anything)
def test_a_text_is_accepted_exactly_when_no_problem_is_found(value: Any) -> None:
    """text() decides a plain ASCII string without text_problem: the two agree on every value,
    and an accepted text comes back unchanged."""
    from telemetry.guards._validation import BadInput, text, text_problem

    for limit in (MAX_ID_LENGTH, 3):
        problem = text_problem("key", value, limit=limit)
        try:
            accepted = text("key", value, max_length=limit)
        except BadInput as bad:
            assert problem is not None and bad.envelope["message"] == problem
        else:
            assert problem is None and accepted == value and type(accepted) is str


@FUZZ
@given(value=anything)
def test_the_stored_text_and_its_logged_hash_match_the_long_way(value: Any) -> None:
    """The shortcuts for a lone integer or ASCII string (json_text's, the encoder's) write what
    the encoder's walk writes (the same value inside a list takes the walk) and refuse what it
    refuses; an accepted write logs validation.digest of that text as its value_hash."""
    from telemetry.guards._validation import BadInput, digest, json_text

    def stored(candidate: Any, limit: int) -> str | None:
        try:
            return json_text("value", candidate, max_bytes=limit)
        except BadInput:
            return None

    if not isinstance(value, (list, tuple, dict)):
        for limit in (256 * 1024, 2):
            walked = stored([value], limit + 2)
            assert stored(value, limit) == (walked[1:-1] if walked is not None else None)
    text = stored(value, 256 * 1024)
    state = StateStore(open_store(":memory:"))
    written = state.write_state("k", value, ABSENT_VERSION)
    assert written["ok"] is (text is not None)
    if text is not None:
        logged = state.store.query_one("SELECT value_hash FROM guard_changes WHERE version = ?", (written["version"],))
        assert logged[0] == digest(text)
