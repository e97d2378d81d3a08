"""observe_tool_spans: the tool spans other instrumentations end, counted as our calls, bounded, never raising.

The spans here are written the way each format writes a tool call (one small fixture per format,
:func:`peer_span`); tests/alerting/test_observe_alerting.py drives the real instrumentors.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode
from prometheus_client import CollectorRegistry, Histogram

import telemetry
from telemetry import conventions as c
from telemetry.envelopes import RecordedVerdicts, register_result_shape
from telemetry.runtime import ToolSpanObserver, observe_tool_spans
from telemetry.testing import capture

from .kinds import KINDS, drive, make

QUOTA = {"success": False, "error": "quota_exceeded"}
PEER_FORMATS = (c.FORMAT_GENAI, c.FORMAT_OPENINFERENCE, c.FORMAT_TRACELOOP, c.FORMAT_LANGFUSE, c.FORMAT_MLFLOW)


def peer_attributes(fmt: str, tool: str, result: str | None) -> tuple[str, dict[str, Any]]:
    """(span name, attributes) of a tool span as ``fmt``'s instrumentation writes one."""
    if fmt == c.FORMAT_GENAI:
        attrs: dict[str, Any] = {c.GEN_AI_OPERATION_NAME: c.OPERATION_EXECUTE_TOOL, c.GEN_AI_TOOL_NAME: tool,
                                 c.GEN_AI_TOOL_CALL_ID: "call-1", c.GEN_AI_TOOL_CALL_ARGUMENTS: '{"amount": 5}'}
        if result is not None:
            attrs[c.GEN_AI_TOOL_CALL_RESULT] = result
        return c.SPAN_NAME_PREFIX + tool, attrs
    if fmt == c.FORMAT_OPENINFERENCE:
        attrs = {c.OPENINFERENCE_SPAN_KIND: c.OPENINFERENCE_KIND_TOOL, c.OI_TOOL_NAME: tool, c.OI_INPUT_VALUE: '{"amount": 5}'}
        if result is not None:
            attrs[c.OI_OUTPUT_VALUE] = result
        return tool, attrs
    if fmt == c.FORMAT_TRACELOOP:
        attrs = {c.TRACELOOP_SPAN_KIND: c.TRACELOOP_KIND_TOOL, c.TRACELOOP_ENTITY_NAME: tool}
        if result is not None:
            attrs[c.TRACELOOP_ENTITY_OUTPUT] = result
        return f"{tool}.tool", attrs
    if fmt == c.FORMAT_LANGFUSE:
        attrs = {c.LANGFUSE_OBSERVATION_TYPE: c.LANGFUSE_KIND_TOOL}
        if result is not None:
            attrs[c.LANGFUSE_OBSERVATION_OUTPUT] = result
        return tool, attrs
    assert fmt == c.FORMAT_MLFLOW
    attrs = {c.MLFLOW_SPAN_TYPE: json.dumps(c.MLFLOW_KIND_TOOL)}  # MLflow JSON-encodes every attribute
    if result is not None:
        attrs[c.MLFLOW_SPAN_OUTPUTS] = json.dumps(result)
    return tool, attrs


class Peer:
    """A provider with the observer (and an in-memory exporter after it), and a peer's tracer."""

    def __init__(self, observer: ToolSpanObserver) -> None:
        self.observer = observer
        self.provider = TracerProvider()
        self.provider.add_span_processor(observer)
        self.exporter = InMemorySpanExporter()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("a-peer-instrumentation")

    def call(
        self,
        fmt: str,
        tool: str,
        result: Any = QUOTA,
        *,
        status: StatusCode | None = None,
        extra: dict[str, Any] | None = None,
        exception: BaseException | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> None:
        """One tool span as ``fmt`` writes it (``result`` a value is recorded as JSON; None: no result)."""
        text = result if result is None or isinstance(result, str) else json.dumps(result)
        name, attrs = peer_attributes(fmt, tool, text)
        attrs.update(extra or {})
        with self.tracer.start_as_current_span(name, kind=kind, attributes=attrs, record_exception=False,
                                               set_status_on_exception=False) as span:
            if exception is not None:
                span.record_exception(exception)
            if status is not None:
                span.set_status(Status(status))

    def sample(self, name: str, **labels: str) -> float:
        assert self.observer.metrics is not None
        return self.observer.metrics.registry.get_sample_value(name, labels) or 0.0

    def calls(self, tool: str, transport: str, outcome: str) -> float:
        return self.sample(c.METRIC_TOOL_CALLS_TOTAL, tool=tool, transport=transport, readback=c.READBACK_UNKNOWN, outcome=outcome)

    def masked(self, tool: str, outcome: str) -> float:
        return self.sample(c.METRIC_MASKED_FAILURES_TOTAL, tool=tool, outcome=outcome)

    def internal_errors(self, stage: str) -> float:
        return self.sample(c.METRIC_INTERNAL_ERRORS_TOTAL, stage=stage)

    def label_values(self, name: str, label: str) -> set[str]:
        assert self.observer.metrics is not None
        return {s.labels[label] for m in self.observer.metrics.registry.collect() for s in m.samples
                if s.name == name and label in s.labels}


@pytest.fixture
def peer() -> Iterator[Peer]:
    found = Peer(observe_tool_spans(registry=CollectorRegistry(), outcomes=["quota_exceeded"]))
    yield found
    found.provider.shutdown()


# --- what a peer's tool span becomes ---------------------------------------------------------


@pytest.mark.parametrize("fmt", PEER_FORMATS)
def test_a_failure_the_tracer_marked_ok_is_a_call_told_failure_and_masked_failure(peer: Peer, fmt: str) -> None:
    """{"success": false, "error": "quota_exceeded"} on a span left UNSET, and on one set OK, in every format."""
    peer.call(fmt, "charge")
    peer.call(fmt, "charge", status=StatusCode.OK)
    assert peer.calls("charge", c.TRANSPORT_OK, "quota_exceeded") == 2
    assert peer.masked("charge", "quota_exceeded") == 2
    assert peer.sample(c.METRIC_TOOL_CALL_DURATION + "_count", tool="charge") == 2
    assert peer.sample(c.METRIC_SILENT_FAILURES_TOTAL, tool="charge", outcome="quota_exceeded") == 0  # never silent


@pytest.mark.parametrize("fmt", PEER_FORMATS)
def test_a_good_result_is_an_ok_call(peer: Peer, fmt: str) -> None:
    peer.call(fmt, "lookup", {"success": True, "items": [1, 2]})
    peer.call(fmt, "lookup", "plain text found")
    assert peer.calls("lookup", c.TRANSPORT_OK, c.OUTCOME_OK) == 2
    assert peer.label_values(c.METRIC_MASKED_FAILURES_TOTAL, c.LABEL_TOOL) == set()
    # A tool's single-label series exist at zero from its first call, as for our own tools.
    assert peer.observer.metrics is not None and peer.sample(c.METRIC_STALE_SENDS_TOTAL, tool="lookup") == 0
    assert peer.observer.metrics.registry.get_sample_value(c.METRIC_STALE_SENDS_TOTAL, {c.LABEL_TOOL: "lookup"}) == 0


def test_a_failure_the_tracer_marked_error_is_told_not_masked(peer: Peer) -> None:
    peer.call(c.FORMAT_GENAI, "charge", status=StatusCode.ERROR)
    assert peer.calls("charge", c.TRANSPORT_ERROR, "quota_exceeded") == 1
    assert peer.masked("charge", "quota_exceeded") == 0


@pytest.mark.parametrize(
    "how",
    ["status", "error.type", "exception event", "strands status"],
)
def test_transport_error_from_status_error_type_exception_events_and_strands(peer: Peer, how: str) -> None:
    """A raised tool with no recorded result: transport error, outcome error; masked only when the result says so."""
    kwargs: dict[str, Any] = {
        "status": {"status": StatusCode.ERROR},
        "error.type": {"extra": {c.ERROR_TYPE: "TimeoutError"}},
        "exception event": {"exception": TimeoutError("upstream")},
        "strands status": {"extra": {c.GEN_AI_TOOL_STATUS: "error"}},
    }[how]
    peer.call(c.FORMAT_GENAI, "charge", None, **kwargs)
    assert peer.calls("charge", c.TRANSPORT_ERROR, c.OUTCOME_ERROR) == 1
    assert peer.masked("charge", c.OUTCOME_ERROR) == 0


def test_a_non_2xx_result_is_a_transport_error(peer: Peer) -> None:
    peer.call(c.FORMAT_OPENINFERENCE, "fetch", {"status_code": 429, "body": "slow down"})
    assert peer.calls("fetch", c.TRANSPORT_ERROR, c.OUTCOME_RATE_LIMITED) == 1
    assert peer.masked("fetch", c.OUTCOME_RATE_LIMITED) == 1  # the span still says OK


def test_wrapped_results_are_unwrapped_as_for_forensics(peer: Peer) -> None:
    """LangChain's serialised ToolMessage (OpenInference) and an MCP CallToolResult."""
    message = {"type": "tool", "data": {"content": json.dumps({"status": "error", "code": "refund_window_closed"}),
                                        "tool_call_id": "call-9", "status": "success"}}
    peer.call(c.FORMAT_OPENINFERENCE, "refund", message)
    mcp = {"content": [{"type": "text", "text": json.dumps(QUOTA)}], "isError": False}
    peer.call(c.FORMAT_GENAI, "charge", mcp)
    assert peer.calls("refund", c.TRANSPORT_OK, c.OUTCOME_OTHER) == 1  # refund_window_closed is not declared
    assert peer.masked("refund", c.OUTCOME_OTHER) == 1
    assert peer.masked("charge", "quota_exceeded") == 1


def test_refusal_codes_count_as_guard_refusals_and_stale_sends(peer: Peer) -> None:
    peer.call(c.FORMAT_GENAI, "send_update", {"ok": False, "error": c.OUTCOME_STALE_POLICY})
    peer.call(c.FORMAT_GENAI, "write_row", {"ok": False, "error": c.OUTCOME_REJECTED_STALE_VERSION})
    assert peer.sample(c.METRIC_GUARD_REFUSALS_TOTAL, tool="send_update", reason=c.OUTCOME_STALE_POLICY) == 1
    assert peer.sample(c.METRIC_STALE_SENDS_TOTAL, tool="send_update") == 1
    assert peer.sample(c.METRIC_GUARD_REFUSALS_TOTAL, tool="write_row", reason=c.OUTCOME_REJECTED_STALE_VERSION) == 1
    assert peer.sample(c.METRIC_STALE_SENDS_TOTAL, tool="write_row") == 0


def test_counts_carry_the_peer_trace_id_as_exemplar(peer: Peer) -> None:
    """The call and the masked failure both point at the span's trace; a good call carries none."""
    peer.call(c.FORMAT_GENAI, "charge")
    peer.call(c.FORMAT_GENAI, "charge", {"ok": True})
    span = peer.exporter.get_finished_spans()[0]
    assert peer.observer.metrics is not None
    for name in (c.METRIC_TOOL_CALLS, c.METRIC_MASKED_FAILURES):
        [family] = [m for m in peer.observer.metrics.registry.collect() if m.name == name]
        exemplars = [s.exemplar for s in family.samples if s.exemplar is not None]
        assert [e.labels[c.EXEMPLAR_TRACE_ID] for e in exemplars] == [format(span.context.trace_id, "032x")], name
        assert exemplars[0].value == 1


def test_prometheus_client_still_keeps_an_exemplar_on_the_childs_value() -> None:
    """The observer hands a made exemplar to ``child._value.set_exemplar`` (what ``inc`` does after
    checking it); fail loudly if a prometheus-client release moves it. Without it the observer
    still works (``inc(1, exemplar)``), only slower."""
    metrics = observe_tool_spans(registry=CollectorRegistry()).metrics
    assert metrics is not None
    for child in (metrics.calls.labels("t", "ok", "unknown", "ok"), metrics.masked.labels("t", "quota_exceeded")):
        assert callable(child._value.set_exemplar)


def test_durations_fall_in_the_buckets_observe_picks_and_counts_match_the_public_methods() -> None:
    """The observer adds to the children's values straight and bisects the histogram's bounds;
    every duration (a bound exactly, just past one, zero, past the last) lands where
    ``Histogram.observe`` puts it, and the direct path is the one taken (fail loudly if a
    prometheus-client release moves the values: the observer then falls back, only slower)."""
    observer = observe_tool_spans(registry=CollectorRegistry(), outcomes=["quota_exceeded"])
    assert observer.metrics is not None
    provider = TracerProvider()
    provider.add_span_processor(observer)
    tracer = provider.get_tracer("a-peer")
    reference = CollectorRegistry()
    bounds = tuple(observer.metrics.duration.labels("t")._upper_bounds[:-1])
    expected = Histogram("reference_seconds", "the same buckets", registry=reference, buckets=bounds)
    nanos = [0, 1, 5_000_000, 5_000_001, 30_000_000_000, 30_000_000_001, 250_000_000, 7]
    for i, elapsed in enumerate(nanos):
        name, attrs = peer_attributes(c.FORMAT_GENAI, "charge", json.dumps(QUOTA if i % 2 else {"ok": True}))
        tracer.start_span(name, attributes=attrs, start_time=10**18).end(end_time=10**18 + elapsed)
        expected.observe(elapsed / 1e9)
    got = {(s.name.removeprefix(c.METRIC_TOOL_CALL_DURATION), s.labels.get("le")): s.value
           for s in observer.metrics.duration.collect()[0].samples if not s.name.endswith("_created")}
    want = {(s.name.removeprefix("reference_seconds"), s.labels.get("le")): s.value
            for s in expected.collect()[0].samples if not s.name.endswith("_created")}
    assert got == want
    assert all(plan.direct is not None for plan in observer._plans[1].values())
    registry = observer.metrics.registry
    assert registry.get_sample_value(c.METRIC_TOOL_CALLS_TOTAL, {c.LABEL_TOOL: "charge", c.LABEL_TRANSPORT: c.TRANSPORT_OK,
                                     c.LABEL_READBACK: c.READBACK_UNKNOWN, c.LABEL_OUTCOME: "quota_exceeded"}) == 4
    assert registry.get_sample_value(c.METRIC_MASKED_FAILURES_TOTAL, {c.LABEL_TOOL: "charge", c.LABEL_OUTCOME: "quota_exceeded"}) == 4


# --- results that cannot be judged -----------------------------------------------------------


@pytest.mark.parametrize("fmt", PEER_FORMATS)
def test_no_recorded_result_counts_by_transport_and_says_how_to_record_it(peer: Peer, fmt: str, caplog: pytest.LogCaptureFixture) -> None:
    """Content capture off: outcome ok when the transport is (no label of its own would keep the alerts honest)."""
    with caplog.at_level(logging.WARNING, logger="telemetry"):
        peer.call(fmt, "charge", None)
        peer.call(fmt, "charge", None)
    assert peer.calls("charge", c.TRANSPORT_OK, c.OUTCOME_OK) == 2
    logged = [r.getMessage() for r in caplog.records if "no recorded result" in r.getMessage()]
    assert len(logged) == 1, logged  # once per format
    from telemetry._span_formats import format_named

    assert format_named(fmt).content_setting in logged[0]


def test_a_result_over_the_limit_is_not_parsed(peer: Peer) -> None:
    huge = json.dumps({"success": False, "error": "quota_exceeded", "pad": "x" * c.MAX_RECORDED_RESULT_CHARS})
    peer.call(c.FORMAT_GENAI, "charge", huge)
    assert peer.calls("charge", c.TRANSPORT_OK, c.OUTCOME_OK) == 1
    assert peer.masked("charge", "quota_exceeded") == 0


@given(st.one_of(st.text(max_size=200), st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
).map(json.dumps)))
def test_any_recorded_text_is_one_call_and_never_an_internal_error(text: str) -> None:
    """Whatever a tracer recorded, the span is counted exactly once and nothing is contained as a failure."""
    found = Peer(observe_tool_spans(registry=CollectorRegistry()))
    found.call(c.FORMAT_OPENINFERENCE, "tool", text)
    assert sum(found.sample(c.METRIC_TOOL_CALLS_TOTAL, tool="tool", transport=t, readback=c.READBACK_UNKNOWN, outcome=o)
               for t in c.TRANSPORT_VALUES for o in sorted(c.OUTCOMES | {c.OUTCOME_OTHER})) == 1
    assert all(found.internal_errors(stage) == 0 for stage in c.STAGES)
    found.provider.shutdown()


# --- what is not counted ---------------------------------------------------------------------


def test_spans_that_are_no_peer_tool_span_are_not_counted(peer: Peer) -> None:
    with peer.tracer.start_as_current_span("chat gpt", attributes={c.GEN_AI_OPERATION_NAME: "chat"}):
        pass
    with peer.tracer.start_as_current_span("llm", attributes={c.OPENINFERENCE_SPAN_KIND: "LLM", c.OI_OUTPUT_VALUE: json.dumps(QUOTA)}):
        pass
    with peer.tracer.start_as_current_span("wf", attributes={c.TRACELOOP_SPAN_KIND: c.TRACELOOP_KIND_WORKFLOW}):
        pass
    with peer.tracer.start_as_current_span("mlflow chain", attributes={c.MLFLOW_SPAN_TYPE: '"CHAIN"'}):
        pass
    with peer.tracer.start_as_current_span("GET /", attributes={"http.request.method": "GET"}):
        pass
    assert peer.label_values(c.METRIC_TOOL_CALLS_TOTAL, c.LABEL_TOOL) == set()


@pytest.mark.parametrize("kind", KINDS)
def test_our_own_spans_are_not_counted_twice(kind: str) -> None:
    """A decorated tool, alone and inside a framework's execute_tool span of the same call: one call each."""
    tool = telemetry.instrument_tool(name="charge", kind="write")(make(kind, lambda x, y: dict(QUOTA)))
    with capture() as cap:
        cap.runtime.provider.add_span_processor(observe_tool_spans())
        drive(kind, tool, 1)
        framework = cap.runtime.provider.get_tracer("pydantic-ai")
        name, attrs = peer_attributes(c.FORMAT_GENAI, "charge", None)
        with framework.start_as_current_span(name, attributes=attrs):
            drive(kind, tool, 2)
        assert cap.calls("charge") == 2
        assert cap.calls("charge", readback=c.READBACK_UNKNOWN) == 0
        assert cap.sample(c.METRIC_MASKED_FAILURES_TOTAL, {c.LABEL_TOOL: "charge", c.LABEL_OUTCOME: c.OUTCOME_OTHER}) is None
        # A peer tool span that merely follows one of ours is still counted.
        with framework.start_as_current_span(name, attributes=attrs):
            pass
        assert cap.calls("charge", readback=c.READBACK_UNKNOWN) == 1


def test_without_a_registry_it_counts_in_the_active_runtime_and_nothing_without_one() -> None:
    observer = observe_tool_spans()
    found = Peer(observer)
    assert observer.metrics is None
    found.call(c.FORMAT_GENAI, "charge")  # no runtime: nothing counted, nothing raised
    with capture() as cap:
        found.call(c.FORMAT_GENAI, "charge")
        assert cap.calls("charge", transport=c.TRANSPORT_OK, readback=c.READBACK_UNKNOWN, outcome=c.OUTCOME_OTHER) == 1
        assert cap.sample(c.METRIC_MASKED_FAILURES_TOTAL, {c.LABEL_TOOL: "charge", c.LABEL_OUTCOME: c.OUTCOME_OTHER}) == 1
        found.provider.shutdown()  # the provider shuts the observer down: later spans are ignored
        found.call(c.FORMAT_GENAI, "charge")
        assert cap.calls("charge") == 1


# --- bounded labels --------------------------------------------------------------------------


def test_a_flood_of_distinct_tool_names_stays_bounded() -> None:
    found = Peer(observe_tool_spans(registry=CollectorRegistry(), max_tools=5))
    for n in range(300):
        found.call(c.FORMAT_GENAI, f"tool_{n}", {"success": False, "error": f"code_{n}"})
    tools = found.label_values(c.METRIC_TOOL_CALLS_TOTAL, c.LABEL_TOOL)
    assert tools == {f"tool_{n}" for n in range(5)} | {c.TOOL_OTHER}
    assert found.label_values(c.METRIC_TOOL_CALLS_TOTAL, c.LABEL_OUTCOME) == {c.OUTCOME_OTHER}
    assert found.calls(c.TOOL_OTHER, c.TRANSPORT_OK, c.OUTCOME_OTHER) == 295
    assert found.masked(c.TOOL_OTHER, c.OUTCOME_OTHER) == 295
    series = sum(len(m.samples) for m in found.observer.metrics.registry.collect()) if found.observer.metrics else 0
    assert series < 300  # every family together, bounded by the six names
    found.provider.shutdown()


def test_an_allow_list_keeps_only_its_names_and_odd_names_are_other() -> None:
    found = Peer(observe_tool_spans(registry=CollectorRegistry(), tools=["charge", "refund"]))
    for name in ("charge", "refund", "lookup", "x" * 200, "bad\nname"):
        found.call(c.FORMAT_GENAI, name)
    found.call(c.FORMAT_GENAI, "charge", extra={c.GEN_AI_TOOL_NAME: 42})  # not a string at all
    assert found.label_values(c.METRIC_TOOL_CALLS_TOTAL, c.LABEL_TOOL) == {"charge", "refund", c.TOOL_OTHER}
    assert found.calls(c.TOOL_OTHER, c.TRANSPORT_OK, c.OUTCOME_OTHER) == 4
    found.provider.shutdown()


def test_the_arguments_are_checked_when_it_is_made() -> None:
    with pytest.raises(telemetry.ConfigurationError, match="list of tool names"):
        observe_tool_spans(tools="charge")
    with pytest.raises(telemetry.ConfigurationError, match="printable"):
        observe_tool_spans(tools=["ok", ""])
    with pytest.raises(telemetry.ConfigurationError, match="max_tools"):
        observe_tool_spans(max_tools=0)
    with pytest.raises(telemetry.ConfigurationError, match="snake_case"):
        observe_tool_spans(outcomes=["Quota Exceeded"])
    with pytest.raises(telemetry.ConfigurationError, match="list of codes"):
        observe_tool_spans(outcomes="quota_exceeded")


def test_a_registry_holding_our_metrics_is_refused_and_unregister_frees_it() -> None:
    registry = CollectorRegistry()
    first = observe_tool_spans(registry=registry)
    with pytest.raises(telemetry.ConfigurationError, match="leave registry out"):
        observe_tool_spans(registry=registry)
    first.unregister()
    assert observe_tool_spans(registry=registry).metrics is not None


def test_it_is_public_and_a_span_processor() -> None:
    from opentelemetry.sdk.trace import SpanProcessor

    assert telemetry.observe_tool_spans is observe_tool_spans
    observer = telemetry.observe_tool_spans()
    assert isinstance(observer, SpanProcessor) and observer.force_flush() is True


# --- never raises into the application -------------------------------------------------------

SPAN_KINDS = (*PEER_FORMATS, "ours", "llm", "plain")


class _Broken:
    """A collector whose every use raises, as a broken registry would."""

    def labels(self, *values: str) -> Any:
        raise RuntimeError("the registry is broken")


def _peer_tool(found: Peer, fmt: str, kind: SpanKind) -> Any:
    """A peer-instrumented tool: its instrumentation wraps the call in a span as ``fmt`` does."""

    def charge(amount: int) -> dict[str, Any]:
        result = dict(QUOTA)
        name, attrs = peer_attributes(fmt, "charge", json.dumps(result))
        with found.tracer.start_as_current_span(name, kind=kind, attributes=attrs):
            return result

    return charge


@pytest.mark.parametrize("span_kind", SPAN_KINDS)
@pytest.mark.parametrize("failure", ["envelope rules", "registered shape", "registry"])
def test_a_failing_observer_never_raises_and_leaves_result_and_span_alone(
    monkeypatch: pytest.MonkeyPatch, span_kind: str, failure: str
) -> None:
    found = Peer(observe_tool_spans(registry=CollectorRegistry()))
    assert found.observer.metrics is not None
    unregister = None
    if failure == "envelope rules":
        def broken(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("the rules are broken")

        monkeypatch.setattr(RecordedVerdicts, "read", broken)
    elif failure == "registered shape":
        def matches(result: Any) -> bool:
            raise RuntimeError("a team's predicate is broken")

        unregister = register_result_shape(matches, lambda result: "never")
    else:
        found.observer.metrics.calls = _Broken()
    try:
        if span_kind in PEER_FORMATS:
            for kind in (SpanKind.INTERNAL, SpanKind.CLIENT, SpanKind.SERVER):
                assert _peer_tool(found, span_kind, kind)(5) == QUOTA
            spans = found.exporter.get_finished_spans()
            assert len(spans) == 3 and all(s.status.status_code is StatusCode.UNSET for s in spans)
            assert all(dict(s.attributes or {}) == peer_attributes(span_kind, "charge", json.dumps(QUOTA))[1] for s in spans)
            stage = c.STAGE_METRICS if failure == "registry" else c.STAGE_CLASSIFIER
            assert found.internal_errors(stage) == 3
        elif span_kind == "ours":
            with capture() as cap:
                cap.runtime.provider.add_span_processor(found.observer)
                tool = telemetry.instrument_tool(name="charge")(make("sync", lambda x, y: dict(QUOTA)))
                assert tool(1) == QUOTA
                assert cap.span("charge").attributes[c.TOOL_OUTCOME] == "quota_exceeded"
                assert cap.calls("charge") == 1
        else:
            attrs = {c.GEN_AI_OPERATION_NAME: "chat"} if span_kind == "llm" else {"http.request.method": "GET"}
            with found.tracer.start_as_current_span(span_kind, attributes=attrs):
                pass
            assert len(found.exporter.get_finished_spans()) == 1
        assert all(found.internal_errors(stage) == 0 for stage in c.STAGES if span_kind not in PEER_FORMATS)
    finally:
        if unregister is not None:
            unregister()
        found.provider.shutdown()


def test_an_unreadable_span_is_contained() -> None:
    """A span object whose attributes raise (not the SDK's): reported, counted, not raised."""

    class Odd(ReadableSpan):
        @property
        def attributes(self) -> Any:
            raise RuntimeError("no attributes")

    observer = observe_tool_spans(registry=CollectorRegistry())
    observer.on_end(Odd(name="x"))
    assert observer.metrics is not None
    assert observer.metrics.registry.get_sample_value(c.METRIC_INTERNAL_ERRORS_TOTAL, {c.LABEL_STAGE: c.STAGE_SPAN}) == 1


def test_the_sdk_still_keeps_a_plain_dict_behind_span_attributes() -> None:
    """The fast path reads ``span._attributes._dict``; fail loudly if an SDK release renames it.

    Without it the processor still works (the public ``span.attributes`` path), only slower.
    """
    found = Peer(observe_tool_spans(registry=CollectorRegistry()))
    found.call(c.FORMAT_GENAI, "charge")
    (span,) = found.exporter.get_finished_spans()
    assert type(span._attributes._dict) is dict  # type: ignore[attr-defined]
    # A ReadableSpan built by hand holds a plain dict (no _dict): the public path counts it.
    _name, attrs = peer_attributes(c.FORMAT_GENAI, "charge", json.dumps(QUOTA))
    found.observer.on_end(ReadableSpan(name="execute_tool charge", attributes=attrs))
    assert found.masked("charge", c.OUTCOME_OTHER) == 2
    found.provider.shutdown()


@pytest.mark.parametrize("outcome", sorted(c.PAUSED_OUTCOMES))
def test_a_paused_call_shown_green_is_counted_but_not_masked(peer: Peer, outcome: str) -> None:
    """A call that paused for a human or for later is not a failure the status hides, as in
    queries/masked_failures.sql: counted with its outcome, never as a masked failure."""
    peer.call(c.FORMAT_GENAI, "refund", {"ok": False, "error": outcome})
    assert peer.calls("refund", c.TRANSPORT_OK, outcome) == 1
    assert peer.masked("refund", outcome) == 0
