"""The per-call path's shortcuts decide exactly what the long way decides.

Each shortcut keeps or skips something for the common case: a plain dict judged from its keys,
the start attributes kept per agent context, each tool's metric children kept per runtime, the
sync and async wrappers without a context-manager object. Each test puts the shortcut's case
beside the cases it must not swallow: a result of a type it did not expect, another agent, a
new runtime, an exception.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace

import telemetry
from telemetry import conventions as c
from telemetry.envelopes import builtin_result_class, result_class
from telemetry.instrument import NO_CALL, current_call
from telemetry.testing import Capture, capture

# Every key a rule reads, a few it never reads, and values that make each rule match or not.
KEYS = st.sampled_from(["status_code", "ok", "rejected", "isError", "success", "status", "errors", "jsonrpc",
                        "error", "error_code", "code", "structuredContent", "key", "result"])
VALUES = st.sampled_from([True, False, None, 0, 1, 200, 404, 429, 503, "error", "failed", "ok", "quota_exceeded",
                          "Bad Code", [], [{"message": "boom"}], [{"extensions": {"code": "NOT_FOUND"}}],
                          {"code": -32601}, {"code": "stale_policy"}, {"ok": False, "error": "stale_policy"}])


class Plain(Mapping[str, Any]):
    """A mapping that is not a dict: always judged the long way."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=5))
def test_a_dict_judged_from_its_keys_gets_the_verdict_of_every_rule(result: dict[str, Any]) -> None:
    """The exact-dict shortcut against the same content as a mapping that meets every rule."""
    assert builtin_result_class(result) == builtin_result_class(MappingProxyType(result)) == builtin_result_class(Plain(result))


def test_the_shortcut_never_swallows_a_failure_next_to_ok() -> None:
    """``ok: true`` beside another rule's key is judged by that rule; a success envelope is ok."""
    assert builtin_result_class({"ok": True, "key": "k"}).outcome == c.OUTCOME_OK
    assert builtin_result_class({"ok": True, "status_code": 503}) == (c.TRANSPORT_ERROR, c.OUTCOME_ERROR, 503)
    assert builtin_result_class({"ok": True, "rejected": True}).outcome == c.OUTCOME_REJECTED_STALE_VERSION
    assert builtin_result_class({"ok": True, "success": False, "error": "quota_exceeded"}).outcome == "quota_exceeded"
    assert builtin_result_class({"ok": None}).outcome == c.OUTCOME_OK
    assert builtin_result_class({"ok": False}).outcome == c.OUTCOME_ERROR
    assert builtin_result_class({}).outcome == c.OUTCOME_OK


def test_a_tool_returning_dicts_still_reads_a_result_of_another_type(telemetry_capture: Capture) -> None:
    """After many plain dicts, a dict subclass, another mapping and objects are each judged in full."""

    class Envelope(dict[str, Any]):
        def get(self, key: str, default: Any = None) -> Any:  # a subclass may answer differently
            return False if key == "ok" else super().get(key, default)

    class Response:
        status_code = 503

    class Failure:
        success = False
        error = "quota_exceeded"

    results: list[Any] = [{"ok": True}] * 50 + [Envelope(), Plain({"ok": False, "error": "not_found"}), Response(),
                                                 Failure(), {"ok": True, "status_code": 429}, {"ok": True}]

    @telemetry.instrument_tool(name="mixed", kind="read")
    def mixed(i: int) -> Any:
        return results[i]

    for i in range(len(results)):
        mixed(i)
    outcomes = [s.attributes[c.TOOL_OUTCOME] for s in telemetry_capture.spans("mixed")]  # type: ignore[index]
    assert outcomes == ["ok"] * 50 + ["error", "not_found", "error", "quota_exceeded", "rate_limited", "ok"]
    assert telemetry_capture.calls("mixed", transport="error") == 2


def test_a_registered_shape_still_comes_before_the_shortcut(telemetry_capture: Capture) -> None:
    """A plain dict without any rule key is still offered to the team's shapes first."""
    remove = telemetry.register_result_shape(lambda r: isinstance(r, dict) and "result_code" in r, lambda r: "vendor_error")
    try:
        assert result_class({"result_code": 7}).outcome == "vendor_error"

        @telemetry.instrument_tool(kind="read")
        def vendor() -> dict[str, Any]:
            return {"result_code": 7}

        vendor()
        assert telemetry_capture.span("vendor").attributes[c.TOOL_OUTCOME] == "vendor_error"  # type: ignore[index]
    finally:
        remove()


def _agent_of(span: Any) -> tuple[Any, Any, Any]:
    attributes = span.attributes
    return attributes.get(c.GEN_AI_AGENT_ID), attributes.get(c.GEN_AI_CONVERSATION_ID), attributes.get(c.GEN_AI_TOOL_CALL_ID)


def test_start_attributes_follow_every_change_of_agent(telemetry_capture: Capture) -> None:
    """The attributes kept for one agent block are never those of another block, a call id or no agent."""

    @telemetry.instrument_tool(kind="read")
    def look() -> str:
        return "x"

    look()
    with telemetry.agent("planner"):
        look()
        look()
        with telemetry.agent("critic", conversation_id="run-1"):
            look()
            with telemetry.tool_call_id("call-7"):
                look()
            look()
        look()
        with telemetry.agent("planner"):  # an equal identity in a new block
            look()
    look()
    assert [_agent_of(s) for s in telemetry_capture.spans("look")] == [
        (None, None, None),
        ("planner", None, None),
        ("planner", None, None),
        ("critic", "run-1", None),
        ("critic", "run-1", "call-7"),
        ("critic", "run-1", None),
        ("planner", None, None),
        ("planner", None, None),
        (None, None, None),
    ]
    spec = look.__outcome_telemetry__  # type: ignore[attr-defined]
    assert c.GEN_AI_AGENT_ID not in spec.static_attributes  # the shared start attributes are never written to


def test_threads_in_their_own_agent_blocks_never_see_each_others_attributes(telemetry_capture: Capture) -> None:
    """Two threads alternating on one tool, each inside its own agent block: every span names its own."""

    @telemetry.instrument_tool(kind="read")
    def shared(who: str) -> str:
        return who

    start = threading.Barrier(4)

    def run(name: str) -> None:
        with telemetry.agent(name, conversation_id=f"conv-{name}"):
            start.wait()
            for _ in range(300):
                shared(name)

    threads = [threading.Thread(target=run, args=(f"agent-{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spans = telemetry_capture.spans("shared")
    assert len(spans) == 1200
    for span in spans:
        attributes = span.attributes or {}
        who = attributes[c.GEN_AI_AGENT_ID]
        assert attributes[c.GEN_AI_CONVERSATION_ID] == f"conv-{who}"
        assert span.name == "execute_tool shared"


def test_metric_children_kept_for_one_runtime_are_not_used_by_the_next() -> None:
    """A tool counted in one runtime counts in a new runtime's registry after reconfiguring."""

    @telemetry.instrument_tool(kind="write", outcomes=["vendor_error"])
    def charge(fail: bool) -> dict[str, Any]:
        return {"ok": not fail, "error": "vendor_error"}

    with capture() as first:
        charge(False)
        charge(True)
    with capture() as second:
        charge(True)
        charge(True)
        charge(False)
    assert first.calls("charge") == 2 and second.calls("charge") == 3
    assert second.calls("charge", outcome="vendor_error") == 2
    labels = {c.LABEL_TOOL: "charge"}
    assert second.sample(c.METRIC_TOOL_CALL_DURATION + "_count", labels) == 3
    for name in (c.METRIC_STALE_SENDS_TOTAL, c.METRIC_CONSTRAINT_WAIVERS_TOTAL, c.METRIC_IDEMPOTENT_REPLAYS_TOTAL):
        assert second.sample(name, labels) == 0  # the single-label series exist at zero in the new registry too


def test_a_tool_exception_leaves_both_contexts_as_they_were(telemetry_capture: Capture) -> None:
    """Sync and async: the exception passes unchanged, its span is ended, nothing stays current."""

    @telemetry.instrument_tool(kind="write")
    def breaks() -> None:
        assert current_call().is_recording()
        raise KeyError("k")

    @telemetry.instrument_tool(kind="write")
    async def breaks_later() -> None:
        await asyncio.sleep(0)
        raise KeyError("later")

    outer = trace.get_current_span()
    with pytest.raises(KeyError) as raised:
        breaks()
    assert raised.value.args == ("k",)
    with pytest.raises(KeyError, match="later"):
        asyncio.run(breaks_later())
    assert current_call() is NO_CALL and trace.get_current_span() is outer
    for tool in ("breaks", "breaks_later"):
        span = telemetry_capture.span(tool)
        assert span.end_time is not None and span.attributes[c.TOOL_TRANSPORT] == c.TRANSPORT_ERROR  # type: ignore[index]


def test_a_readback_that_interrupts_runs_inside_the_call_and_still_counts(telemetry_capture: Capture) -> None:
    """The read-back runs while the call is current; its KeyboardInterrupt reaches the caller after counting."""
    seen: list[Any] = []

    def readback(call: Any, result: Any) -> bool:
        seen.append(current_call())
        raise KeyboardInterrupt

    @telemetry.instrument_tool(kind="write", readback=readback)
    def write() -> dict[str, Any]:
        return {"ok": True}

    with pytest.raises(KeyboardInterrupt):
        write()
    assert seen and seen[0] is not NO_CALL and seen[0].tool_name == "write"
    assert current_call() is NO_CALL
    assert telemetry_capture.span("write").attributes[c.TOOL_READBACK] == c.READBACK_ERROR  # type: ignore[index]
    assert telemetry_capture.calls("write", readback=c.READBACK_ERROR) == 1
