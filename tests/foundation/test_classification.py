"""The classification table of docs/configuration.md, row by row, on spans and on the registry."""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

import telemetry
from telemetry import conventions as c
from telemetry.instrument import NO_CALL
from telemetry.testing import Capture


@dataclass
class Response:
    status_code: int
    body: str = ""


@dataclass
class ToolResult:
    """Shaped like MCP's CallToolResult."""

    isError: bool
    structuredContent: dict[str, Any] | None = None


ROWS = [
    # result, expected (transport, outcome, http status or None)
    ("a plain value", ("ok", "ok", None)),
    ({"ok": True, "id": 3}, ("ok", "ok", None)),
    ({"ok": False, "error": "not_found"}, ("ok", "not_found", None)),
    ({"ok": False}, ("ok", "error", None)),
    ({"rejected": True, "current_version": "v9"}, ("ok", "rejected_stale_version", None)),
    ({"isError": True, "content": []}, ("ok", "tool_error", None)),
    (ToolResult(isError=True), ("ok", "tool_error", None)),
    (ToolResult(isError=True, structuredContent={"ok": False, "error": "stale_policy"}), ("ok", "stale_policy", None)),
    (Response(200), ("ok", "ok", 200)),
    (Response(201), ("ok", "ok", 201)),
    ({"status_code": 204}, ("ok", "ok", 204)),
    (Response(404), ("error", "not_found", 404)),
    (Response(429), ("error", "rate_limited", 429)),
    (Response(412), ("error", "rejected_stale_version", 412)),
    ({"status_code": 503}, ("error", "error", 503)),
]


@pytest.mark.parametrize(("result", "expected"), ROWS, ids=[repr(r[0])[:40] for r in ROWS])
def test_result_classification(result: Any, expected: tuple[str, str, int | None], telemetry_capture: Capture) -> None:
    """Each result shape gives its transport, outcome and HTTP status on the span and the counter."""
    transport, outcome, status = expected

    @telemetry.instrument_tool(kind="write")
    def tool() -> Any:
        return result

    assert tool() is result
    attrs = telemetry_capture.span("tool").attributes
    assert (attrs[c.TOOL_TRANSPORT], attrs[c.TOOL_OUTCOME]) == (transport, outcome)
    assert attrs.get(c.HTTP_RESPONSE_STATUS_CODE) == status
    assert attrs[c.TOOL_READBACK] == "skipped"
    span = telemetry_capture.span("tool")
    if outcome == "ok":
        assert c.ERROR_TYPE not in attrs and span.status.status_code is not StatusCode.ERROR
    else:
        assert attrs[c.ERROR_TYPE] in (outcome, str(status)) and span.status.status_code is StatusCode.ERROR
    labels = {"tool": "tool", "transport": transport, "readback": "skipped", "outcome": outcome}
    assert telemetry_capture.sample(c.METRIC_TOOL_CALLS_TOTAL, labels) == 1.0


def test_exception_row(telemetry_capture: Capture) -> None:
    """An exception is transport error, outcome error, error.type its qualified class."""

    class QuotaExceeded(RuntimeError):
        pass

    @telemetry.instrument_tool(kind="write")
    def tool() -> None:
        raise QuotaExceeded("over")

    with pytest.raises(QuotaExceeded):
        tool()
    attrs = telemetry_capture.span("tool").attributes
    assert attrs[c.TOOL_TRANSPORT] == "error" and attrs[c.TOOL_OUTCOME] == "error"
    assert attrs[c.ERROR_TYPE].endswith("QuotaExceeded") and "." in attrs[c.ERROR_TYPE]
    assert telemetry_capture.span("tool").events[0].name == "exception"
    assert telemetry_capture.calls("tool", transport="error", outcome="error") == 1


@pytest.mark.parametrize(
    ("readback_result", "readback", "outcome"),
    [(True, "match", "ok"), (False, "mismatch", "readback_mismatch"), (None, "skipped", "ok"),
     (telemetry.Readback.ERROR, "error", "ok")],
)
def test_readback_rows(readback_result: Any, readback: str, outcome: str, telemetry_capture: Capture) -> None:
    """A read-back's answer sets tool.readback; a mismatch on an ok call makes it readback_mismatch."""
    seen: list[dict[str, Any]] = []

    def check(call: telemetry.Call, result: Any) -> Any:
        seen.append(call.arguments)
        return readback_result

    @telemetry.instrument_tool(kind="write", readback=check)
    def write(key: str, value: str, version: str = "v1") -> dict[str, bool]:
        return {"ok": True}

    write("k", value="x")
    assert seen == [{"key": "k", "value": "x", "version": "v1"}]
    attrs = telemetry_capture.span("write").attributes
    assert (attrs[c.TOOL_READBACK], attrs[c.TOOL_OUTCOME]) == (readback, outcome)
    assert telemetry_capture.calls("write", readback=readback, outcome=outcome) == 1


def test_readback_not_run_for_refusals_or_reads(telemetry_capture: Capture) -> None:
    """A refused write is not read back; a read-only tool's read-back is not_applicable."""
    runs: list[int] = []

    @telemetry.instrument_tool(kind="write", readback=lambda call, result: runs.append(1) or True)
    def write() -> dict[str, Any]:
        return {"ok": False, "error": "rejected_stale_version"}

    @telemetry.instrument_tool(kind="read")
    def read() -> str:
        return "v"

    write(), read()
    assert runs == []
    assert telemetry_capture.span("write").attributes[c.TOOL_READBACK] == "skipped"
    assert telemetry_capture.span("read").attributes[c.TOOL_READBACK] == "not_applicable"
    assert telemetry_capture.sample(c.METRIC_GUARD_REFUSALS_TOTAL, {"tool": "write", "reason": "rejected_stale_version"}) == 1


def test_outcome_callable_overrides(telemetry_capture: Capture) -> None:
    """The user's outcome classifier has the last word (None keeps the derived outcome)."""

    @telemetry.instrument_tool(outcome=lambda call, result: "postcondition_failed" if result["changed"] != 3 else None)
    def reprice(ids: list[int]) -> dict[str, int]:
        return {"changed": len(ids)}

    reprice([1, 2, 3]), reprice([1, 2])
    outcomes = [s.attributes[c.TOOL_OUTCOME] for s in telemetry_capture.spans("reprice")]
    assert outcomes == ["ok", "postcondition_failed"]


def test_current_call_sets_outcome_readback_and_attributes(telemetry_capture: Capture) -> None:
    """Inside a tool, current_call() sets the outcome, the read-back and domain attributes."""

    @telemetry.instrument_tool(kind="write")
    def commit(plan_id: str) -> str:
        call = telemetry.current_call()
        assert call.tool_name == "commit" and call.arguments == {"plan_id": plan_id}
        call.set_attributes({c.PLAN_ID: plan_id, c.PLAN_CHANGED_COUNT: 412, "ignored": None})
        call.set_readback(True)
        call.set_outcome(c.OUTCOME_POSTCONDITION_FAILED)
        return "done"

    assert commit("p1") == "done"
    attrs = telemetry_capture.span("commit").attributes
    assert attrs[c.PLAN_ID] == "p1" and attrs[c.PLAN_CHANGED_COUNT] == 412 and "ignored" not in attrs
    assert (attrs[c.TOOL_TRANSPORT], attrs[c.TOOL_READBACK], attrs[c.TOOL_OUTCOME]) == ("ok", "match", "postcondition_failed")


def test_current_call_outside_a_tool_is_harmless() -> None:
    """current_call() outside an instrumented call accepts everything and records nothing."""
    call = telemetry.current_call()
    call.set_outcome("ok"), call.set_attribute("a", 1), call.add_waivers(2), call.mark_replayed()
    call.set_attributes({"b": 2}), call.set_readback(False)
    assert call is NO_CALL and not call.is_recording() and call.tool_name == ""
    assert (call.outcome, call.readback, call.waivers, call.replayed) == (None, None, 0, False)
    assert dict(call.attributes) == {} and call.arguments == {}
    with pytest.raises(ValueError):
        call.set_readback("maybe")  # a bad value is still a bug, inside a tool or not


def test_the_call_outside_a_tool_cannot_be_changed() -> None:
    """The shared outside-a-tool call is immutable, so no thread can leave state for another."""
    with pytest.raises(AttributeError, match="cannot be changed"):
        NO_CALL.outcome = "forced"  # type: ignore[misc]
    with pytest.raises(TypeError):
        NO_CALL.attributes["a"] = 1
    NO_CALL.arguments["a"] = 1  # a fresh dict each time: nothing sticks
    assert NO_CALL.arguments == {} and NO_CALL.outcome is None


def test_the_call_outside_a_tool_is_the_same_in_every_thread() -> None:
    """Threads using current_call() outside a tool all see the one unchanged object."""
    seen: list[object] = []

    def worker() -> None:
        for _ in range(200):
            call = telemetry.current_call()
            call.set_outcome("weird"), call.add_waivers(1), call.mark_replayed()
            seen.append((call, call.outcome, call.waivers, call.replayed))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(seen) == {(NO_CALL, None, 0, False)}


def test_unknown_outcome_is_other_on_labels_real_on_span(telemetry_capture: Capture) -> None:
    """An undeclared outcome is 'other' on metric labels; the span keeps it, truncated."""
    long_code = "weird_" + "x" * 400

    @telemetry.instrument_tool(outcomes=["quota_exhausted"])
    def tool(code: str) -> dict[str, Any]:
        return {"ok": False, "error": code}

    tool("quota_exhausted"), tool(long_code)
    spans = telemetry_capture.spans("tool")
    assert spans[0].attributes[c.TOOL_OUTCOME] == "quota_exhausted"
    assert spans[1].attributes[c.TOOL_OUTCOME].startswith("weird_xxx")
    assert len(spans[1].attributes[c.TOOL_OUTCOME]) == c.MAX_ATTRIBUTE_LENGTH
    assert telemetry_capture.calls("tool", outcome="quota_exhausted") == 1
    assert telemetry_capture.calls("tool", outcome="other") == 1


def test_counters_for_waivers_replays_and_stale_sends(telemetry_capture: Capture) -> None:
    """Waivers, idempotent replays and stale sends reach their own counters."""

    @telemetry.instrument_tool(kind="delegate")
    def delegate() -> str:
        telemetry.current_call().add_waivers(2)
        return "ok"

    @telemetry.instrument_tool
    def charge() -> dict[str, Any]:
        telemetry.current_call().mark_replayed()
        return {"ok": True, "deduplicated": True}

    @telemetry.instrument_tool(kind="send")
    def send() -> dict[str, Any]:
        return {"ok": False, "error": "stale_policy"}

    delegate(), charge(), send()
    assert telemetry_capture.sample(c.METRIC_CONSTRAINT_WAIVERS_TOTAL, {"tool": "delegate"}) == 2
    assert telemetry_capture.sample(c.METRIC_IDEMPOTENT_REPLAYS_TOTAL, {"tool": "charge"}) == 1
    assert telemetry_capture.span("charge").attributes[c.TOOL_DEDUPLICATED] is True
    assert telemetry_capture.sample(c.METRIC_STALE_SENDS_TOTAL, {"tool": "send"}) == 1
    assert telemetry_capture.sample(c.METRIC_GUARD_REFUSALS_TOTAL, {"tool": "send", "reason": "stale_policy"}) == 1


def test_recorded_arguments_are_opt_in_redacted_and_capped(telemetry_capture: Capture) -> None:
    """Only named arguments are recorded; secret-looking ones are redacted; long ones cut."""

    @telemetry.instrument_tool(record_arguments=["ticket_id", "api_token", "body", "meta"])
    def send(ticket_id: int, body: str, api_token: str, meta: dict[str, str], note: str = "private") -> None:
        return None

    send(7, "x" * 1000, "s3cret", {"password": "hunter2", "lang": "en"})
    attrs = telemetry_capture.span("send").attributes
    p = c.TOOL_ARGUMENT_PREFIX
    assert attrs[p + "ticket_id"] == 7
    assert attrs[p + "api_token"] == c.REDACTED
    assert len(attrs[p + "body"]) == c.MAX_ATTRIBUTE_LENGTH
    assert "hunter2" not in attrs[p + "meta"] and '"lang": "en"' in attrs[p + "meta"]
    assert p + "note" not in attrs
    assert all("s3cret" not in str(v) for v in attrs.values())


def test_decoration_time_warnings_and_errors() -> None:
    """Misuse visible at decoration raises or warns there, naming the problem."""
    with pytest.warns(UserWarning, match="nope"):

        @telemetry.instrument_tool(record_arguments=["nope"])
        def a(x: int) -> None: ...

    with pytest.raises(telemetry.ConfigurationError, match="kind='erase'"):
        telemetry.instrument_tool(kind="erase")(lambda: None)
    with pytest.raises(telemetry.ConfigurationError, match="read-only"):
        telemetry.instrument_tool(kind="read", readback=lambda c_, r: True)(lambda: None)
    with pytest.raises(telemetry.ConfigurationError, match="already instrumented"):
        telemetry.instrument_tool(telemetry.instrument_tool(name="noop")(lambda: None))
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        @telemetry.instrument_tool(record_arguments=["x"])
        def b(x: int) -> None: ...


def test_agent_identity_on_spans(telemetry_capture: Capture) -> None:
    """agent() sets gen_ai.agent.id and gen_ai.conversation.id; nested blocks keep the run."""

    @telemetry.instrument_tool(kind="read")
    def look() -> None: ...

    with telemetry.agent("planner", conversation_id="run-1"):
        look()
        with telemetry.agent("builder"):
            look()
    look()
    spans = telemetry_capture.spans("look")
    assert [(s.attributes.get(c.GEN_AI_AGENT_ID), s.attributes.get(c.GEN_AI_CONVERSATION_ID)) for s in spans] == [
        ("planner", "run-1"),
        ("builder", "run-1"),
        (None, None),
    ]
    with pytest.raises(telemetry.ConfigurationError):
        with telemetry.agent(""):
            pass


def test_agent_identity_follows_asyncio_tasks(telemetry_capture: Capture) -> None:
    """Each asyncio task keeps the agent it was started under."""
    import asyncio

    @telemetry.instrument_tool(kind="read")
    async def look() -> None:
        await asyncio.sleep(0)

    async def as_agent(name: str) -> None:
        with telemetry.agent(name):
            await asyncio.sleep(0)
            await look()

    async def main() -> None:
        await asyncio.gather(*(as_agent(f"agent-{i}") for i in range(20)))

    asyncio.run(main())
    assert sorted(s.attributes[c.GEN_AI_AGENT_ID] for s in telemetry_capture.spans("look")) == sorted(
        f"agent-{i}" for i in range(20)
    )


def test_nested_tool_spans_form_a_tree(telemetry_capture: Capture) -> None:
    """A tool called inside another tool is its child span, in the same trace."""

    @telemetry.instrument_tool(kind="read")
    def inner() -> int:
        return 1

    @telemetry.instrument_tool
    def outer() -> int:
        return inner() + 1

    assert outer() == 2
    parent, child = telemetry_capture.span("outer"), telemetry_capture.span("inner")
    assert child.parent.span_id == parent.context.span_id
    assert child.context.trace_id == parent.context.trace_id


def test_single_label_series_exist_from_the_first_call(telemetry_capture: Capture) -> None:
    """A tool's waiver, stale-send and replay series exist at 0 before their first increment."""

    @telemetry.instrument_tool(kind="send")
    def notify() -> None: ...

    notify()
    for name in (c.METRIC_CONSTRAINT_WAIVERS_TOTAL, c.METRIC_STALE_SENDS_TOTAL, c.METRIC_IDEMPOTENT_REPLAYS_TOTAL):
        assert telemetry_capture.sample(name, {"tool": "notify"}) == 0.0


def test_mcp_sdk_call_tool_result_is_a_tool_error(telemetry_capture: Capture) -> None:
    """The mcp SDK's CallToolResult (attribute is_error) is transport ok, outcome tool_error or its code."""
    import mcp.types as types  # a dev dependency: a missing SDK is a failure, not a skip

    @telemetry.instrument_tool
    def tool(code: str | None) -> Any:
        structured = {"ok": False, "error": code} if code else None
        return types.CallToolResult(content=[], is_error=True, structured_content=structured)

    tool(None), tool("rejected_stale_version")
    outcomes = [s.attributes[c.TOOL_OUTCOME] for s in telemetry_capture.spans("tool")]
    assert outcomes == ["tool_error", "rejected_stale_version"]


def test_tool_call_id_on_the_span(telemetry_capture: Capture) -> None:
    """tool_call_id() puts the model's call id on the tool span opened inside it, and only there."""

    @telemetry.instrument_tool(kind="read")
    def look() -> None: ...

    with telemetry.tool_call_id("call_8f2a"):
        look()
    look()
    spans = telemetry_capture.spans("look")
    assert [s.attributes.get(c.GEN_AI_TOOL_CALL_ID) for s in spans] == ["call_8f2a", None]
    with pytest.raises(telemetry.ConfigurationError):
        with telemetry.tool_call_id(""):
            pass


def test_an_odd_argument_value_does_not_cost_the_others(telemetry_capture: Capture) -> None:
    """A recorded dict with non-string keys, or a cycle, is recorded as text; the other arguments still are."""
    cyclic: list[Any] = []
    cyclic.append(cyclic)

    @telemetry.instrument_tool(record_arguments=["by_id", "loop", "name"])
    def tool(by_id: dict[Any, str], loop: list[Any], name: str) -> None: ...

    tool({1: "one", "two": "2"}, cyclic, "kept")
    attrs = telemetry_capture.span("tool").attributes
    p = c.TOOL_ARGUMENT_PREFIX
    assert attrs[p + "name"] == "kept"
    assert "one" in attrs[p + "by_id"] and attrs[p + "loop"] == "<list>"  # a cycle: named, not rendered
