"""Plan-before-commit: expiry, every binding moving, replayed commits, the change-log postcondition."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from telemetry import GuardError
from telemetry import conventions as c
from telemetry.guards import ABSENT_VERSION, Planner, PlanWriter, StateStore, open_store
from telemetry.testing import Capture

SUMMER = {"collection": "summer-2026"}


class Shop:
    """Eight products in two collections and a planner with policy, schema and app bindings."""

    def __init__(self, store_url: str) -> None:
        self.state = StateStore(open_store(store_url))
        self.live = {"policy_version": "14", "tool_schema_version": "2026-07-01", "app": "my-shop"}
        self.now = 1_800_000_000.0  # the planner's clock: a test moves it instead of sleeping
        self.planner = Planner(
            self.state, bindings={n: (lambda n=n: self.live[n]) for n in self.live}, sample_size=3, clock=lambda: self.now
        )
        for i in range(4):
            for collection in ("summer-2026", "winter-2026"):
                key = f"products/{collection[:6]}-{i}"
                self.state.write_state(key, {"collection": collection, "price": 100}, ABSENT_VERSION)
        self.planner.register_transform("reprice", lambda v, p: {**v, "price": v["price"] * (100 - p["discount_pct"]) // 100})

    def prices(self) -> dict[str, int]:
        with self.state.store.read() as conn:
            rows = conn.execute("SELECT key, value FROM guard_state ORDER BY key").fetchall()
        import json

        return {k: json.loads(v)["price"] for k, v in rows}

    def plan(self, **overrides: Any) -> dict[str, Any]:
        args: dict[str, Any] = {"action": "reprice", "object_set": "products", "target_predicate": SUMMER,
                                "params": {"discount_pct": 20}, **overrides}
        return self.planner.plan_change(**args)


@pytest.fixture
def shop(store_url: str) -> Shop:
    return Shop(store_url)


def test_plan_writes_nothing_and_describes_the_target(shop: Shop, telemetry_capture: Capture) -> None:
    """A plan counts and samples the matched objects, binds them, and leaves every object as it was."""
    before = shop.prices()
    plan = shop.plan()
    assert plan["ok"] and plan["objects_matched"] == 4
    assert plan["sample"] == ["products/summer-0", "products/summer-1", "products/summer-2"]
    assert set(plan["bound_to"]) == {"object_set_hash", "policy_version", "tool_schema_version", "app"}
    assert plan["bound_to"]["policy_version"] == "14" and plan["bound_to"]["object_set_hash"].startswith("sha256:")
    assert plan["plan_id"].startswith("plan_") and plan["expires_at"].endswith("Z")
    assert "Nothing was written" in plan["message"]
    assert shop.prices() == before
    attrs = telemetry_capture.span("plan_change").attributes
    assert attrs[c.PLAN_ID] == plan["plan_id"] and attrs[c.PLAN_OBJECTS_MATCHED] == 4


def test_commit_changes_exactly_the_planned_objects(shop: Shop, telemetry_capture: Capture) -> None:
    """A good commit: the four summer prices change, winter untouched, postcondition holds, read-back match."""
    plan = shop.plan()
    result = shop.planner.commit_plan(plan["plan_id"], agent_id="pricing-agent")
    assert result["ok"] and result["changed_count"] == 4 and result["outside_target_changed_count"] == 0
    prices = shop.prices()
    assert {k: v for k, v in prices.items() if "summer" in k} == {f"products/summer-{i}": 80 for i in range(4)}
    assert all(v == 100 for k, v in prices.items() if "winter" in k)
    attrs = telemetry_capture.span("commit_plan").attributes
    assert attrs[c.TOOL_TRANSPORT] == c.TRANSPORT_OK and attrs[c.TOOL_READBACK] == c.READBACK_MATCH
    assert attrs[c.TOOL_OUTCOME] == c.OUTCOME_OK
    assert attrs[c.PLAN_CHANGED_COUNT] == 4 and attrs[c.PLAN_OUTSIDE_TARGET_CHANGED_COUNT] == 0
    assert attrs[c.GEN_AI_AGENT_ID] == "pricing-agent"
    with shop.state.store.read() as conn:
        refs = conn.execute("SELECT count(*) FROM guard_changes WHERE change_ref = ?", (plan["plan_id"],)).fetchone()[0]
    assert refs == 4


def test_retried_commit_replays_and_never_recomputes(shop: Shop, telemetry_capture: Capture) -> None:
    """Committing twice (even after a new summer product appears) writes once and replays the result."""
    plan = shop.plan()
    first = shop.planner.commit_plan(plan["plan_id"])
    shop.state.write_state("products/summer-9", {"collection": "summer-2026", "price": 100}, ABSENT_VERSION)
    second = shop.planner.commit_plan(plan["plan_id"])
    assert second == {**first, "deduplicated": True}
    assert shop.prices()["products/summer-0"] == 80 and shop.prices()["products/summer-9"] == 100
    spans = telemetry_capture.spans("commit_plan")
    assert spans[1].attributes[c.TOOL_DEDUPLICATED] is True
    assert telemetry_capture.sample(c.METRIC_IDEMPOTENT_REPLAYS_TOTAL, {c.LABEL_TOOL: "commit_plan"}) == 1


def test_concurrent_commits_of_one_plan_write_once(shop: Shop) -> None:
    """Four threads commit the same plan at once: one commit, three replays, prices cut once."""
    plan = shop.plan()
    results: list[dict[str, Any]] = []
    barrier = threading.Barrier(4)

    def commit() -> None:
        barrier.wait()
        results.append(shop.planner.commit_plan(plan["plan_id"]))

    threads = [threading.Thread(target=commit) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(bool(r.get("deduplicated")) for r in results) == [False, True, True, True]
    assert shop.prices()["products/summer-0"] == 80


def test_expired_plan_is_refused(shop: Shop, telemetry_capture: Capture) -> None:
    """A plan past its ttl is refused as plan_expired and writes nothing."""
    plan = shop.plan(ttl_seconds=0.2)
    shop.now += 0.3
    before = shop.prices()
    refused = shop.planner.commit_plan(plan["plan_id"])
    assert refused["error"] == c.OUTCOME_PLAN_EXPIRED and refused["retry"] is True
    assert "expired" in refused["message"] and "new plan" in refused["message"]
    assert shop.prices() == before
    labels = {c.LABEL_TOOL: "commit_plan", c.LABEL_REASON: c.OUTCOME_PLAN_EXPIRED}
    assert telemetry_capture.sample(c.METRIC_GUARD_REFUSALS_TOTAL, labels) == 1


def test_a_plan_commits_until_its_ttl_runs_out_on_the_planners_clock(shop: Shop) -> None:
    """Expiry is judged by the injected clock: a plan 0.1 s before its expiry still commits."""
    plan = shop.plan(ttl_seconds=60)
    shop.now += 59.9
    assert shop.planner.commit_plan(plan["plan_id"])["ok"] is True


@pytest.mark.parametrize("binding", ["policy_version", "tool_schema_version", "app"])
def test_each_registered_binding_moving_is_refused(shop: Shop, telemetry_capture: Capture, binding: str) -> None:
    """Policy, schema or app changing between plan and commit refuses the commit, naming the binding."""
    plan = shop.plan()
    shop.live[binding] = shop.live[binding] + "-moved"
    before = shop.prices()
    refused = shop.planner.commit_plan(plan["plan_id"])
    assert refused["error"] == c.OUTCOME_PLAN_BINDING_MOVED and refused["binding_moved"] == [binding]
    assert binding in refused["message"] and refused["bindings"][binding]["current"].endswith("-moved")
    assert shop.prices() == before
    assert telemetry_capture.span("commit_plan").attributes[c.PLAN_BINDING_MOVED] == binding


def _touch_target(shop: Shop) -> None:
    v = shop.state.read_state("products/summer-1")
    shop.state.write_state("products/summer-1", {**v["value"], "price": 95}, v["version"])


def _add_to_target(shop: Shop) -> None:
    shop.state.write_state("products/summer-7", {"collection": "summer-2026", "price": 100}, ABSENT_VERSION)


def _leave_target(shop: Shop) -> None:
    v = shop.state.read_state("products/summer-2")
    shop.state.write_state("products/summer-2", {**v["value"], "collection": "archive"}, v["version"])


@pytest.mark.parametrize("move", [_touch_target, _add_to_target, _leave_target])
def test_object_set_moving_is_refused(shop: Shop, telemetry_capture: Capture, move: Any) -> None:
    """A target object edited, a new match, or an object leaving the match: object_set_hash moved."""
    plan = shop.plan()
    move(shop)
    before = shop.prices()
    refused = shop.planner.commit_plan(plan["plan_id"])
    assert refused["error"] == c.OUTCOME_PLAN_BINDING_MOVED and refused["binding_moved"] == ["object_set_hash"]
    assert shop.prices() == before
    assert telemetry_capture.span("commit_plan").attributes[c.PLAN_BINDING_MOVED] == "object_set_hash"


def test_stale_stated_binding_is_refused_at_plan_time(shop: Shop) -> None:
    """A caller planning against an old policy version is told so before any plan exists."""
    refused = shop.plan(bindings={"policy_version": "13"})
    assert refused["error"] == c.OUTCOME_PLAN_BINDING_MOVED and refused["bindings"]["policy_version"]["current"] == "14"
    assert shop.plan(bindings={"policy_version": "14"})["ok"]


@pytest.mark.parametrize("undo", [True, False], ids=["rolled-back", "kept"])
def test_wrong_collection_is_postcondition_failed_with_every_write_ok(
    shop: Shop, telemetry_capture: Capture, undo: bool
) -> None:
    """An action that reprices the winter twin of each planned object: every write ok, read-back match,
    outcome postcondition_failed (the wrong-collection repricing); by default the writes are rolled back."""
    shop.planner.undo_on_postcondition_failure = undo
    write_results: list[dict[str, Any]] = []

    def reprice_by_stale_lookup(writer: PlanWriter, key: str, value: Any, params: dict[str, Any]) -> None:
        wrong = key.replace("summer", "winter")  # the lookup table maps to the wrong collection
        current = writer.read(wrong)
        write_results.append(writer.write(wrong, {**current, "price": 80}))

    shop.planner.register_action("reprice_buggy", reprice_by_stale_lookup)
    plan = shop.plan(action="reprice_buggy")
    result = shop.planner.commit_plan(plan["plan_id"])
    assert len(write_results) == 4 and all(r["ok"] for r in write_results)
    assert result["ok"] is False and result["error"] == c.OUTCOME_POSTCONDITION_FAILED and result["retry"] is False
    assert result["objects_matched"] == 4 and result["changed_count"] == 0
    assert result["outside_target_changed_count"] == 4
    assert result["outside_target_sample"][0] == "products/winter-0"
    assert result["undone"] is undo and "do not retry" in result["message"]
    assert ("rolled back: nothing changed" in result["message"]) is undo
    attrs = telemetry_capture.span("commit_plan").attributes
    assert attrs[c.TOOL_TRANSPORT] == c.TRANSPORT_OK
    assert attrs[c.TOOL_READBACK] == c.READBACK_MATCH
    assert attrs[c.TOOL_OUTCOME] == c.OUTCOME_POSTCONDITION_FAILED
    assert attrs[c.PLAN_CHANGED_COUNT] == 0 and attrs[c.PLAN_OUTSIDE_TARGET_CHANGED_COUNT] == 4
    assert telemetry_capture.calls(
        "commit_plan", transport=c.TRANSPORT_OK, readback=c.READBACK_MATCH, outcome=c.OUTCOME_POSTCONDITION_FAILED
    ) == 1
    # Rolled back, the winter prices are untouched; kept, the writes happened (detection only).
    assert (shop.prices()["products/winter-0"] == 80) is not undo
    assert shop.planner.commit_plan(plan["plan_id"])["deduplicated"] is True  # the verdict is final


def test_partial_execution_is_postcondition_failed(shop: Shop) -> None:
    """An action that silently skips one planned object fails the changed_count postcondition."""

    def skip_one(writer: PlanWriter, key: str, value: Any, params: dict[str, Any]) -> None:
        if not key.endswith("-3"):
            writer.write(key, {**value, "price": 1})

    shop.planner.register_action("skip_one", skip_one)
    result = shop.planner.commit_plan(shop.plan(action="skip_one")["plan_id"])
    assert result["error"] == c.OUTCOME_POSTCONDITION_FAILED
    assert result["changed_count"] == 3 and result["outside_target_changed_count"] == 0
    assert result["unchanged_sample"] == ["products/summer-3"]


def test_unknown_plan_id_is_not_found(shop: Shop) -> None:
    """Committing a plan id that was never issued answers not_found, telling the caller to plan first."""
    refused = shop.planner.commit_plan("plan_0000")
    assert refused["error"] == c.OUTCOME_NOT_FOUND and "plan_change" in refused["message"]


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"action": "delete_everything"}, "not one this planner knows"),
        ({"action": 3}, "action must be a string"),
        ({"object_set": ""}, "object_set must be a non-empty string"),
        ({"target_predicate": {}}, "target_predicate must be a non-empty object"),
        ({"target_predicate": "collection=summer"}, "target_predicate must be a non-empty object"),
        ({"target_predicate": {"tags": ["a"]}}, "plain value"),
        ({"params": {"x": "y" * 300_000}}, "the limit is"),
        ({"bindings": {"policy_version": 14}}, "bindings must map"),
        ({"bindings": {"mood": "good"}}, "unknown bindings"),
        ({"ttl_seconds": -1}, "ttl_seconds=-1 is out of range"),
        ({"ttl_seconds": "soon"}, "ttl_seconds must be a finite number"),
    ],
)
def test_bad_plan_input_is_invalid_argument(shop: Shop, overrides: dict[str, Any], needle: str) -> None:
    """Each malformed plan argument gets an invalid_argument naming it, and no plan is stored."""
    result = shop.plan(**overrides)
    assert result["error"] == c.OUTCOME_INVALID_ARGUMENT and needle in result["message"]
    with shop.state.store.read() as conn:
        assert conn.execute("SELECT count(*) FROM guard_plans").fetchone()[0] == 0


def test_invalid_write_inside_an_action_rolls_everything_back(shop: Shop) -> None:
    """An action whose third write is not JSON: invalid_argument, and none of the first two writes persist."""
    seen = []

    def bad_third(writer: PlanWriter, key: str, value: Any, params: dict[str, Any]) -> None:
        seen.append(key)
        writer.write(key, {**value, "price": {1, 2}} if len(seen) == 3 else {**value, "price": 5})

    shop.planner.register_action("bad_third", bad_third)
    before = shop.prices()
    plan = shop.plan(action="bad_third")
    result = shop.planner.commit_plan(plan["plan_id"])
    assert result["error"] == c.OUTCOME_INVALID_ARGUMENT and "nothing was written" in result["message"]
    assert shop.prices() == before
    with shop.state.store.read() as conn:
        assert conn.execute("SELECT count(*) FROM guard_changes WHERE change_ref = ?", (plan["plan_id"],)).fetchone()[0] == 0


def test_plan_size_cap(store_url: str) -> None:
    """A predicate matching more objects than the planner allows is refused: narrow or split."""
    shop = Shop(store_url)
    small = Planner(shop.state, max_objects=3)
    small.register_transform("reprice", lambda v, p: v)
    result = small.plan_change("reprice", "products", SUMMER)
    assert result["error"] == c.OUTCOME_INVALID_ARGUMENT and "at most 3" in result["message"]


def test_commit_where_the_action_is_not_registered_is_refused(shop: Shop) -> None:
    """A planner (another process, a restart) without the plan's action refuses the commit, writing nothing."""
    plan = shop.plan()
    other = Planner(shop.state, bindings={n: (lambda n=n: shop.live[n]) for n in shop.live})
    before = shop.prices()
    refused = other.commit_plan(plan["plan_id"])
    assert refused["error"] == c.OUTCOME_INVALID_ARGUMENT and refused["retry"] is False
    assert "'reprice'" in refused["message"] and "not registered" in refused["message"]
    assert shop.prices() == before
    assert shop.planner.commit_plan(plan["plan_id"])["ok"]  # the plan is still good where the action lives


def test_predicate_booleans_never_match_numbers(shop: Shop) -> None:
    """{"price": True} matches no product priced 1, and a number matches by value (100 == 100.0)."""
    with shop.state.store.transaction() as conn:
        from telemetry.guards._state import put

        put(conn, "products/flag-1", '{"collection":"flags","price":1}', ABSENT_VERSION, actor="test")
    assert shop.plan(target_predicate={"collection": "flags", "price": True})["objects_matched"] == 0
    assert shop.plan(target_predicate={"collection": "flags", "price": 1.0})["objects_matched"] == 1


@pytest.mark.parametrize("bad", [{"max_objects": 0}, {"sample_size": -1}, {"max_ttl_seconds": 0}, {"max_objects": True}])
def test_planner_settings_are_checked_at_construction(shop: Shop, bad: dict[str, Any]) -> None:
    """A Planner with a nonsensical limit fails when built, naming the setting, not on the first plan."""
    with pytest.raises(GuardError, match=next(iter(bad))):
        Planner(shop.state, **bad)
