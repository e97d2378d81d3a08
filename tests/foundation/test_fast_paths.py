"""The per-call path's shortcuts decide exactly what the long way decides.

Each shortcut keeps or skips something for the common case: a plain dict judged from its keys,
the start attributes kept per agent context, each tool's metric children kept per runtime, the
sync and async wrappers without a context-manager object. Each test puts the shortcut's case
beside the cases it must not swallow: a result of a type it did not expect, another agent, a
new runtime, an exception.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import Status, StatusCode
from prometheus_client import CollectorRegistry

import telemetry
from telemetry import conventions as c
from telemetry._span_formats import FORMATS, span_format_of, tool_call_of
from telemetry.envelopes import builtin_result_class, read_recorded, register_result_shape, result_class
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


# --- observe_tool_spans: the reading of a peer's tool span ------------------------------------
#
# The processor reads a span by a shorter road than the long way (span_format_of, tool_call_of,
# read_recorded): the format from the first marker it meets, the name and result straight from a
# plain string attribute, the verdict remembered per result text, the metric children per kind of
# call. The long way below is the rule as docs/peer-traces.md states it; every span a real SDK
# provider ends must be counted as it says, whether its text was judged before or not.

_LABELLED = ("quota_exceeded", "refund_window_closed", "card_fault")
_TEXTS = [
    None,
    '{"success": false, "error": "quota_exceeded"}',
    '{"status": "error", "code": "refund_window_closed"}',
    '{"ok": true}',
    '{"ok": false, "error": "stale_policy"}',
    '{"order_id": "o-5", "state": "shipped"}',
    '{"fault": 1}',
    '"{\\"success\\": false, \\"error\\": \\"quota_exceeded\\"}"',
    '{"type": "tool", "data": {"content": "{\\"success\\": false}", "status": "error"}}',
    '{"status_code": 503}',
    "Error: the card was declined",
    '{"success": false, "error": "quota_exceeded", "pad": "' + "x" * 1100 + '"}',
    '{"success": false',
    "",
]
_NAMES = ["charge_card", "refund", '"quoted_name"', None]


def _peer_span_attributes(fmt: str, name: str | None, text: str | None, flags: frozenset[str]) -> tuple[str, dict[str, Any]]:
    span_name = "execute_tool " + (name or "refund")
    if fmt == c.FORMAT_GENAI:
        attrs: dict[str, Any] = {c.GEN_AI_OPERATION_NAME: c.OPERATION_EXECUTE_TOOL}
        keys = (c.GEN_AI_TOOL_NAME, c.GEN_AI_TOOL_CALL_RESULT)
    elif fmt == c.FORMAT_OPENINFERENCE:
        attrs, keys = {c.OPENINFERENCE_SPAN_KIND: c.OPENINFERENCE_KIND_TOOL}, (c.OI_TOOL_NAME, c.OI_OUTPUT_VALUE)
    elif fmt == c.FORMAT_TRACELOOP:
        attrs, keys = {c.TRACELOOP_SPAN_KIND: c.TRACELOOP_KIND_TOOL}, (c.TRACELOOP_ENTITY_NAME, c.TRACELOOP_ENTITY_OUTPUT)
    elif fmt == c.FORMAT_LANGFUSE:
        attrs, keys = {c.LANGFUSE_OBSERVATION_TYPE: c.LANGFUSE_KIND_TOOL}, ("", c.LANGFUSE_OBSERVATION_OUTPUT)
    else:  # MLflow JSON-encodes every attribute
        attrs, keys = {c.MLFLOW_SPAN_TYPE: json.dumps(c.MLFLOW_KIND_TOOL)}, ("", c.MLFLOW_SPAN_OUTPUTS)
        text = None if text is None else json.dumps(text)
    if name is not None and keys[0]:
        attrs[keys[0]] = name
    if text is not None:
        attrs[keys[1]] = text
    if "error.type" in flags:
        attrs[c.ERROR_TYPE] = "TimeoutError"
    if "tool.status" in flags:
        attrs[c.GEN_AI_TOOL_STATUS] = "error"
    if "numeric result" in flags and text is not None:
        attrs[keys[1]] = 7
    if "llm marker too" in flags:  # a second format's marker with another value: the first tool marker decides
        attrs[c.OPENINFERENCE_SPAN_KIND] = "LLM"
    return span_name, attrs


def _long_way(span: ReadableSpan, labelled: frozenset[str]) -> tuple[tuple[str, str, str], str | None] | None:
    """((tool, transport, outcome label), masked outcome label or None) by the long way, or None."""
    attributes = dict(span.attributes or {})
    fmt = span_format_of(attributes)
    if fmt is None:
        return None
    call = tool_call_of(span.name, attributes, fmt)
    assert call is not None
    status_error = span.status.status_code is StatusCode.ERROR
    transport_error = (
        status_error or call.status_error or c.ERROR_TYPE in attributes or any(e.name == "exception" for e in span.events)
    )
    verdict = read_recorded(call.result).verdict
    if verdict is not None and verdict.outcome != c.OUTCOME_OK:
        outcome = verdict.outcome
        transport = c.TRANSPORT_ERROR if transport_error else verdict.transport
        masked = not status_error and outcome != c.OUTCOME_FORCED
    else:
        outcome = c.OUTCOME_ERROR if transport_error else c.OUTCOME_OK
        transport = c.TRANSPORT_ERROR if transport_error else c.TRANSPORT_OK
        masked = False
    label = outcome if outcome in labelled else c.OUTCOME_OTHER
    return (call.tool_name or "", transport, label), (label if masked else None)


class _Keep(SpanProcessor):
    def __init__(self, kept: list[ReadableSpan]) -> None:
        self.kept = kept

    def on_end(self, span: ReadableSpan) -> None:
        self.kept.append(span)


class _Observed:
    """One observer for a whole test (so verdicts judged in one example are remembered in the next)."""

    def __init__(self, outcomes: tuple[str, ...] = _LABELLED) -> None:
        self.observer = telemetry.observe_tool_spans(registry=CollectorRegistry(), outcomes=outcomes)
        self.labelled = c.OUTCOMES | frozenset(outcomes)
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.observer)
        self.kept: list[ReadableSpan] = []
        self.provider.add_span_processor(_Keep(self.kept))  # after the observer: the same ended span
        self.tracer = self.provider.get_tracer("a-peer-instrumentation")

    def counts(self) -> tuple[Counter[tuple[str, str, str]], Counter[tuple[str, str]]]:
        calls: Counter[tuple[str, str, str]] = Counter()
        masked: Counter[tuple[str, str]] = Counter()
        assert self.observer.metrics is not None
        for family in self.observer.metrics.registry.collect():
            for sample in family.samples:
                labels = sample.labels
                if sample.name == c.METRIC_TOOL_CALLS_TOTAL and labels[c.LABEL_READBACK] == c.READBACK_UNKNOWN:
                    calls[(labels[c.LABEL_TOOL], labels[c.LABEL_TRANSPORT], labels[c.LABEL_OUTCOME])] += int(sample.value)
                elif sample.name == c.METRIC_MASKED_FAILURES_TOTAL:
                    masked[(labels[c.LABEL_TOOL], labels[c.LABEL_OUTCOME])] += int(sample.value)
        return calls, masked

    def end(self, name: str, attributes: dict[str, Any], status: StatusCode, raised: bool) -> ReadableSpan:
        span = self.tracer.start_span(name, attributes=attributes)
        if raised:
            span.record_exception(TimeoutError("upstream"))
        span.set_status(Status(status))
        span.end()
        return self.kept.pop()

    def check(self, spans: list[tuple[str, dict[str, Any], StatusCode, bool]]) -> None:
        before_calls, before_masked = self.counts()
        expected_calls: Counter[tuple[str, str, str]] = Counter()
        expected_masked: Counter[tuple[str, str]] = Counter()
        for name, attributes, status, raised in spans:
            found = _long_way(self.end(name, attributes, status, raised), self.labelled)
            if found is not None:
                expected_calls[found[0]] += 1
                if found[1] is not None:
                    expected_masked[(found[0][0], found[1])] += 1
        calls, masked = self.counts()
        assert calls - before_calls == expected_calls
        assert masked - before_masked == expected_masked


_SPAN = st.tuples(
    st.sampled_from([fmt.name for fmt in FORMATS]),
    st.sampled_from(_NAMES),
    st.sampled_from(_TEXTS),
    st.frozensets(st.sampled_from(["error.type", "tool.status", "numeric result", "llm marker too"]), max_size=2),
    st.sampled_from([StatusCode.UNSET, StatusCode.OK, StatusCode.ERROR]),
    st.booleans(),
)
_OTHER = st.sampled_from([
    ("chat gpt-4.1", {c.GEN_AI_OPERATION_NAME: "chat"}),
    ("ChatOpenAI", {c.OPENINFERENCE_SPAN_KIND: "LLM"}),
    ("workflow", {c.MLFLOW_SPAN_TYPE: json.dumps("CHAIN")}),
    ("POST /v1/charges", {"http.request.method": "POST"}),
])
_OBSERVED = _Observed()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_SPAN, _OTHER), min_size=1, max_size=6))
def test_the_observer_counts_every_span_as_the_long_way_does(drawn: list[Any]) -> None:
    spans = []
    for item in drawn:
        if len(item) == 2:
            spans.append((item[0], dict(item[1]), StatusCode.UNSET, False))
        else:
            fmt, name, text, flags, status, raised = item
            span_name, attributes = _peer_span_attributes(fmt, name, text, flags)
            spans.append((span_name, attributes, status, raised))
    _OBSERVED.check(spans)


def test_a_shape_registered_or_removed_is_met_by_texts_judged_before() -> None:
    """Verdicts remembered under the shapes of before are judged anew after each change."""
    observed = _Observed()
    fault = _peer_span_attributes(c.FORMAT_GENAI, "charge_card", '{"fault": 1}', frozenset())
    quota = _peer_span_attributes(c.FORMAT_OPENINFERENCE, "charge_card", _TEXTS[1], frozenset())
    spans = [(*fault, StatusCode.UNSET, False), (*quota, StatusCode.UNSET, False)] * 2
    observed.check(spans)  # judged by the built-in rules, and remembered
    unregister = register_result_shape(lambda r: isinstance(r, dict) and "fault" in r, lambda r: "card_fault")
    try:
        before = observed.counts()[1][("charge_card", "card_fault")]
        observed.check(spans)
        assert observed.counts()[1][("charge_card", "card_fault")] == before + 2
        second = register_result_shape(lambda r: isinstance(r, dict) and r.get("success") is False, lambda r: None)
        observed.check(spans)  # the newest shape says the quota envelope is a success
        second()
        observed.check(spans)
    finally:
        unregister()
    observed.check(spans)
    # ok: the fault texts before any shape and after the last removal, the quota texts under the second
    assert observed.counts()[0][("charge_card", c.TRANSPORT_OK, c.OUTCOME_OK)] == 2 + 2 + 2
