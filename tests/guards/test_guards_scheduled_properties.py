"""The scheduled sends' boundary, property-based: any window, any clock time, any id either works
exactly (fires at its time to the float, never a tick before) or is refused with a named error."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from telemetry import conventions as c
from telemetry import instrument_tool
from telemetry.exceptions import ConfigurationError
from telemetry.guards import MAX_REVIEW_SECONDS, Objectives, ScheduledSends, open_store
from telemetry.testing import Capture

from .hostile import FUZZ, anything, assert_consistent, assert_envelope

POLICY = "policy"
windows = st.one_of(st.floats(min_value=0, max_value=MAX_REVIEW_SECONDS), st.integers(0, int(MAX_REVIEW_SECONDS)),
                    st.sampled_from([0, 0.0, 5e-324, MAX_REVIEW_SECONDS]))
epochs = st.one_of(st.floats(min_value=0, max_value=4e9), st.integers(0, 4_000_000_000))


class World:
    def __init__(self, store_url: str) -> None:
        self.now = 1_700_000_000.0
        store = open_store(store_url)
        self.objectives = Objectives(store)
        self.sends = ScheduledSends(store, self.objectives, clock=lambda: self.now)
        self.version = self.objectives.publish_objective(POLICY, "notices to opted-in users only")["version"]
        self.delivered: list[str] = []

    def tool(self, window: Any) -> Any:
        delivered = self.delivered

        @instrument_tool(name="notify", kind=c.KIND_SEND)
        @self.sends.schedule_send(policy_task_id=POLICY, review_seconds=window)
        def notify(notice: str, policy_version: str) -> dict[str, Any]:
            delivered.append(notice)
            return {"ok": True}

        return self.sends.register(notify)


@pytest.fixture
def world(store_url: str, telemetry_capture: Capture) -> World:
    return World(store_url)


@FUZZ
@given(window=windows, now=epochs, notice=st.text(min_size=1, max_size=20).filter(str.strip))
def test_a_send_fires_at_its_time_to_the_float_and_not_a_tick_before(world: World, window: Any, now: Any,
                                                                      notice: str) -> None:
    """Scheduled at ``now`` with ``window``: not due one float below now + window, fired once at it."""
    world.now = float(now)
    got = world.tool(window)(notice, world.version)
    assert got["ok"] and got["review_window_seconds"] == float(window)
    sid, fires_at = got["scheduled_id"], float(now) + float(window)
    world.now = math.nextafter(fires_at, -math.inf)
    assert sid not in {r["scheduled_id"] for r in world.sends.fire_due(limit=10_000)}
    world.now = fires_at
    fired = {r["scheduled_id"]: r["status"] for r in world.sends.fire_due(limit=10_000)}
    assert fired.get(sid) == "fired"
    assert sid not in {r["scheduled_id"] for r in world.sends.fire_due(limit=10_000)}
    assert world.sends.get_scheduled_send(sid)["status"] == "fired"


@FUZZ
@given(window=st.one_of(st.floats().filter(lambda w: not 0 <= w <= MAX_REVIEW_SECONDS),
                        st.integers().filter(lambda w: not 0 <= w <= MAX_REVIEW_SECONDS), anything,
                        st.sampled_from([True, False, None, "60", [60]])))
def test_a_window_out_of_range_is_refused_at_decoration_naming_it(world: World, window: Any) -> None:
    """Negative, beyond 30 days, NaN, infinite, a bool or not a number: ConfigurationError naming review_seconds."""
    if isinstance(window, (int, float)) and not isinstance(window, bool) and 0 <= window <= MAX_REVIEW_SECONDS:
        return  # a valid window drawn from `anything`: the other property covers it
    with pytest.raises(ConfigurationError, match="review_seconds"):
        world.tool(window)


@FUZZ
@given(scheduled_id=anything, reason=anything, agent_id=anything)
def test_the_review_tools_answer_any_id_with_an_envelope(world: World, scheduled_id: Any, reason: Any,
                                                          agent_id: Any) -> None:
    """get, cancel and approve: any id, reason or agent gets an envelope; the store stays consistent."""
    for result in (world.sends.get_scheduled_send(scheduled_id),
                   world.sends.cancel_scheduled_send(scheduled_id, reason, agent_id),
                   world.sends.approve_scheduled_send(scheduled_id, agent_id)):
        assert_envelope(result)
    assert_consistent(world.sends.store)


@FUZZ
@given(notice=anything, version=st.one_of(st.just("current"), anything))
def test_scheduling_answers_any_arguments_with_an_envelope(world: World, notice: Any, version: Any) -> None:
    """The send tool itself: any notice and policy_version get an envelope, and only a valid one is stored."""
    result = world.tool(1)(notice, world.version if version == "current" else version)
    assert_envelope(result)
    if result["ok"]:
        assert world.sends.get_scheduled_send(result["scheduled_id"])["status"] == "scheduled"
    assert_consistent(world.sends.store)
