"""``observe_tool_spans()``: the tool spans other instrumentations end, counted as our calls.

An agent traced by OpenInference, OpenLLMetry (traceloop), pydantic-ai, Langfuse, MLflow or the
OpenTelemetry GenAI instrumentations already ends one span per tool call. The processor this
module builds turns each of those spans, as it ends on the application's own provider, into the
counters the shipped alerts and dashboard read, without re-decorating a single tool::

    provider.add_span_processor(telemetry.observe_tool_spans(registry=registry))

What a span becomes:

- ``tool_calls_total{tool, transport, readback="unknown", outcome}``: transport ``error`` when
  the span's status is ERROR, it carries ``error.type`` or an ``exception`` event, Strands'
  ``gen_ai.tool.status`` says error, or the recorded result is a non-2xx; the outcome is what the
  recorded result says about itself, judged by the same rules a live result meets
  (:func:`telemetry.envelopes.read_recorded`: the built-in envelopes and the shapes the team
  registered), else ``error`` when the transport failed, else ``ok``. Read-back is always
  ``unknown``: nothing read the state back, so a peer's call is never a silent failure and never
  spends the intent SLO's budget.
- ``tool_masked_failures_total{tool, outcome}``: the result reported a failure while the span's
  status is OK or unset, so every tracer's error view shows the call green (``ToolMaskedFailures``).
- ``tool_guard_refusals_total`` and ``tool_stale_sends_total`` for refusal codes, as for our own
  calls, and ``tool_call_duration_seconds`` from the span's start and end.

**A span with no recorded result** (the format's content capture is off, or the result was
larger than :data:`~telemetry.conventions.MAX_RECORDED_RESULT_CHARS`) cannot be judged. It is
counted by its transport alone: outcome ``ok`` when the transport is ok. That is what keeps the
alerts honest: a label value of its own would fall outside the reported-failure rules' "not bad"
set, and every call of an agent with content capture off would then page
``ToolReportedFailuresHigh`` as a failure it never had. Counted ``ok`` it dilutes no ratio of an
agent whose results are recorded, and the first such span of each format is logged (logger
``telemetry``) with the setting that turns content capture on.

**Bounded labels.** Tool names come from spans, so they are bounded the way the decorator's
are fixed at decoration: ``tools=`` names the allowed ones, or else the first ``max_tools``
distinct names are kept (:data:`DEFAULT_MAX_TOOLS`); any other name, and a name that is not
1 to 128 printable characters, is counted as ``tool="other"`` (:data:`~telemetry.conventions.TOOL_OTHER`,
logged once). An outcome outside the vocabulary and ``outcomes=`` is ``other`` on the labels,
as for our own spans.

**Never raises into the application.** Every failure (an unreadable span, a registered shape
that raises, a counter) is contained by :mod:`.containment`: logged once per place and counted
in ``outcome_telemetry_internal_errors_total``; the span and the tool's result are untouched (a
processor only reads a span that has already ended).

**Not twice.** Spans our decorator wrote carry ``tool.transport`` and were counted when they
ended; they are skipped. A framework's tool span around a call our decorator also recorded
(pydantic-ai's ``execute_tool`` span around an instrumented tool) is skipped too: our span ends
first, inside it, and the processor remembers its parent.

Where the counts go: ``registry=`` makes the processor's own metrics in that registry (for an
application that does not call ``telemetry.configure()``); without it, each span is counted in
the runtime active when it ends (``configure()``'s or ``telemetry.testing.capture()``'s), and
nothing is counted while none is. Add the processor to the provider the runtime records on
(``Runtime.provider``, or the application's provider given to ``configure``), so that it sees our
spans too.

Cost: a span that is not a peer's tool span is turned away by five containment checks on the
SDK's attribute dict. A tool span's result is judged once per distinct short text
(:class:`telemetry.envelopes.RecordedVerdicts`: tools return the same few texts again and again),
the metric children each kind of call increments are looked up once, and its counts are held by
that kind of call under one lock until the metrics are collected
(:meth:`ToolSpanObserver.flush_counts`: before every collection, at ``force_flush`` and at
shutdown, so no reader sees a count still held), instead of six locked increments and an
exemplar made per span. In prometheus-client's multiprocess mode the counts go to the worker's
file as each span ends, since another process reads them. benchmarks/bench_observe.py measures
both paths.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import TraceFlags
from prometheus_client import CollectorRegistry
from prometheus_client.samples import Exemplar

from .. import conventions as c
from .._span_formats import SpanFormat, format_named
from ..envelopes import RECORDED_ABSENT, RECORDED_TOO_LARGE, RecordedVerdicts
from ..exceptions import ConfigurationError
from . import _active as _state
from . import _containment as _safe
from . import _peer_spans
from ._fork import renew_after_fork
from ._metric_values import DirectValues, direct_values
from ._metrics import ToolMetrics

__all__ = ["DEFAULT_MAX_TOOLS", "MAX_TOOL_LABEL_LENGTH", "ToolSpanObserver", "observe_tool_spans"]

logger = logging.getLogger("telemetry")

DEFAULT_MAX_TOOLS = 100
"""Distinct tool names kept as labels when no ``tools=`` list is given; later names are ``other``."""
MAX_TOOL_LABEL_LENGTH = 128
"""The longest tool name kept as a label (the decorator's limit on a tool's name)."""
_REMEMBERED_PARENTS = 4096
"""How many parents of our own tool spans are remembered, so a framework span around one is skipped."""

_OUTCOME_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_EMPTY: Mapping[str, Any] = {}
_tool_format = _peer_spans.tool_format
_read = _peer_spans.read
_TOOL_TRANSPORT = c.TOOL_TRANSPORT
_SAMPLED = TraceFlags.SAMPLED
_PLANS_KEPT = 4096
"""Count plans (the children one kind of call increments) kept per metrics; past that they start over."""


class _Plan(NamedTuple):
    """The metric children one kind of call increments: tool, transport, outcome label and masked fixed.

    ``exemplar``: the calls counted carry their trace id (the failed ones). ``direct``: the
    values behind the children, counted straight (:class:`._metric_values.DirectValues`); None
    when the client keeps them some other way (then the public ``inc(1, exemplar)`` and
    ``observe`` serve).
    """

    calls: Any
    duration: Any
    masked: Any
    refused: Any
    stale_sends: Any
    exemplar: bool
    direct: DirectValues | None
    held: list[Any] | None
    """The counts of this kind held since the last collection (see :meth:`ToolSpanObserver.flush_counts`):
    ``[calls, duration sum, per-bucket counts, exemplar trace id or None, its span's end in ns]``;
    None when the public methods serve (``direct`` is None)."""


def _shared(child: Any) -> bool:
    """Whether ``child``'s value is read by other processes (prometheus-client's multiprocess mode:
    another process serves the folder of values, so a count must reach its file as the span ends,
    never wait for this process's own collection). Unknown counts as shared."""
    return getattr(getattr(child, "_value", None), "_multiprocess", True) is not False


def _labelable(name: Any) -> bool:
    return isinstance(name, str) and 0 < len(name) <= MAX_TOOL_LABEL_LENGTH and name.isprintable()


class ToolSpanObserver(SpanProcessor):
    """The span processor :func:`observe_tool_spans` returns; see the module docstring.

    ``metrics`` is its own :class:`~telemetry.runtime._metrics.ToolMetrics` when it was given a
    registry, else None (it counts in the active runtime's). :meth:`unregister` frees that
    registry for other metrics; :meth:`shutdown` (the provider calls it) stops counting and
    leaves the final counts readable.
    """

    def __init__(
        self,
        *,
        metrics: ToolMetrics | None,
        tools: frozenset[str] | None,
        max_tools: int,
        outcomes: frozenset[str],
    ) -> None:
        self.metrics = metrics
        self._allowed = tools
        self._max_tools = len(tools) if tools is not None else max_tools
        self._names: dict[Any, str] = {name: name for name in tools} if tools is not None else {}
        self._label_outcomes = c.OUTCOMES | outcomes
        self._lock = threading.Lock()
        self._ours: OrderedDict[int, bool] = OrderedDict()
        self._logged: set[str] = set()
        self._closed = False
        self._verdicts = RecordedVerdicts()
        self._plans: tuple[ToolMetrics | None, dict[tuple[str, str, str, bool], _Plan]] = (None, {})
        self._trace_hex: tuple[int, str] = (0, "")
        self._held_lock = threading.Lock()
        self._retired: list[_Plan] = []
        """Plans dropped (another runtime's metrics, or past :data:`_PLANS_KEPT`): the next
        :meth:`flush_counts` also takes what a thread still holding one added after they were dropped."""
        if metrics is not None:
            metrics.before_collect(self.flush_counts)
        renew_after_fork(self)

    def _after_fork(self) -> None:
        """In a forked child: locks of its own. The parent's may have been held by a thread that
        does not exist in the child, and the child's first tool span would then wait forever."""
        self._lock = threading.Lock()
        self._held_lock = threading.Lock()

    # --- the SpanProcessor interface ---------------------------------------------------------

    def on_end(self, span: ReadableSpan) -> None:
        """Count ``span`` when a peer format marks it a tool span; never raises an Exception."""
        try:
            try:
                # The SDK's plain dict behind the read-only view ``span.attributes`` builds: a
                # missing key costs a dict lookup, not a KeyError raised and caught inside
                # Mapping.get. Any other span object takes the public path.
                attributes = span._attributes._dict  # type: ignore[union-attr]
            except AttributeError:
                attributes = span.attributes or _EMPTY
            fmt = _tool_format(attributes)
            if fmt is None or self._closed:
                return
            self._observe(span, attributes, fmt)
        except Exception as exc:
            _safe.report(c.STAGE_SPAN, "observe_tool_spans reading an ended span", exc, self.metrics)

    def shutdown(self) -> None:
        """Stop counting (spans ending later are ignored); the counts stay in the registry, and
        the metrics no longer call this processor (nothing of it is kept alive by them)."""
        self._closed = True
        self.flush_counts()
        for metrics in (self._plans[0], self.metrics):
            if metrics is not None:
                metrics.forget_before_collect(self.flush_counts)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Hand the counts held since the last collection to the metrics (a collection does it too)."""
        self.flush_counts()
        return True

    def unregister(self) -> None:
        """Remove this processor's own metrics from its registry (nothing when it has none)."""
        self.shutdown()
        if self.metrics is not None:
            self.metrics.unregister()

    def flush_counts(self) -> None:
        """Add the counts held since the last collection to the metrics' values; never raises.

        A tool span's counts are held by its kind of call (:class:`_Plan`) as it ends: one lock
        and a few additions instead of six locked increments and an exemplar made per span. The
        metrics call this before every collection (:meth:`ToolMetrics.before_collect`), so a
        scrape or ``get_sample_value`` sees every span ended before it, exactly.
        """
        try:
            with self._held_lock:
                taken = []
                retired, self._retired = self._retired, []
                for plan in [*self._plans[1].values(), *retired]:
                    held = plan.held
                    if held is not None and held[0]:
                        taken.append((plan, held[0], held[1], held[2], held[3], held[4]))
                        held[0], held[1], held[2], held[3] = 0, 0.0, [0] * len(held[2]), None
            for plan, calls, seconds, buckets, trace_id, ended_ns in taken:
                self._hand_over(plan, calls, seconds, buckets, trace_id, ended_ns)
        except Exception as exc:
            _safe.report(c.STAGE_METRICS, "observe_tool_spans handing its counts to the metrics", exc, self.metrics)

    @staticmethod
    def _hand_over(plan: _Plan, calls: int, seconds: float, buckets: list[int], trace_id: int | None,
                   ended_ns: int) -> None:
        direct = plan.direct
        assert direct is not None
        direct.calls(calls)
        if direct.masked is not None:
            direct.masked(calls)
        if trace_id is not None:  # the last failed call's trace, at its span's end
            kept = Exemplar({c.EXEMPLAR_TRACE_ID: format(trace_id, "032x")}, 1, ended_ns / 1e9)
            direct.keep_exemplars[0](kept)
            if direct.masked is not None:
                direct.keep_exemplars[1](kept)
        if any(buckets):
            direct.duration_sum(seconds)
            for inc, count in zip(direct.buckets, buckets):
                if count:
                    inc(count)
        if plan.refused is not None:
            plan.refused.inc(calls)
            if plan.stale_sends is not None:
                plan.stale_sends.inc(calls)

    # --- one tool span -----------------------------------------------------------------------

    def _observe(self, span: ReadableSpan, attributes: Mapping[str, Any], fmt: SpanFormat) -> None:
        if _TOOL_TRANSPORT in attributes:  # ours, counted when it ended: remember its parent
            parent = span.parent
            if parent is not None:
                self._remember(parent.span_id)
            return
        ours = self._ours
        if ours and ours.pop(span.context.span_id, False):  # around a call our decorator counted
            return
        metrics = self.metrics
        if metrics is None:
            runtime = _state.active
            if runtime is None:
                return
            metrics = runtime.metrics
        name, transport, outcome, masked, recorded, judged = _read(
            span, attributes, fmt, self._verdicts, self._shape_failed, self._unreadable
        )
        if not judged:
            self._unjudged(fmt.name, recorded)
        tool = self._names.get(name)
        # The counting, written out here rather than in a method of its own: it runs once per tool
        # span, and a call with its arguments costs as much as several of the steps below.
        try:
            key = (tool if tool is not None else self._tool_label(name), transport, outcome, masked)
            plans = self._plans
            plan = plans[1].get(key) if plans[0] is metrics else None
            if plan is None:
                plan = self._plan_for(metrics, key)
            try:  # the SDK's own fields behind the properties (as for the attributes, in on_end)
                start, end, context = span._start_time, span._end_time, span._context  # type: ignore[attr-defined]
            except AttributeError:
                start, end, context = span.start_time, span.end_time, span.context
            seconds = (end - start) / 1e9 if start is not None and end is not None and end >= start else None
            # Exemplars on the calls a panel's spike is about: the failed ones (each good call is
            # spared making one).
            trace_id = None
            if plan.exemplar and context is not None and context.trace_flags & _SAMPLED:
                trace_id = context.trace_id
            held = plan.held
            if held is None:  # the public methods count it now
                self._count_now(plan, seconds, trace_id)
                return
            bucket = bisect_left(plan.direct.bounds, seconds) if seconds is not None else -1  # type: ignore[union-attr]
            lock = self._held_lock
            lock.acquire()  # not `with`: its enter and exit calls cost more than the additions it guards
            try:  # held until the next collection (flush_counts)
                held[0] += 1
                if bucket >= 0:
                    held[1] += seconds
                    held[2][bucket] += 1
                if trace_id is not None:
                    held[3] = trace_id
                    held[4] = end if end is not None else time.time_ns()
            finally:
                lock.release()
        except Exception as exc:
            _safe.report(c.STAGE_METRICS, "observe_tool_spans counting a tool span", exc, metrics)

    def _plan_for(self, metrics: ToolMetrics, key: tuple[str, str, str, bool]) -> _Plan:
        """The plan of this kind of call in ``metrics``, made the first time it is met."""
        plans = self._plans
        if plans[0] is not metrics:  # another runtime's metrics: its own children
            plans = self._switch(metrics)
        plan = plans[1].get(key)
        if plan is None:
            tool, transport, outcome, masked = key
            label = outcome if outcome in self._label_outcomes else c.OUTCOME_OTHER
            plan = self._plan(metrics, tool, transport, outcome, label, masked)
            if len(plans[1]) >= _PLANS_KEPT:
                with self._lock:
                    self._retire(plans[1])
                    plans[1].clear()
            plans[1][key] = plan
        return plan

    def _count_now(self, plan: _Plan, seconds: float | None, trace_id: int | None) -> None:
        """One call counted through prometheus-client's public methods (values it keeps elsewhere)."""
        exemplar = None
        if trace_id is not None:
            known = self._trace_hex  # a run's tool spans share a trace: its hex is made once
            if known[0] != trace_id:
                known = self._trace_hex = (trace_id, format(trace_id, "032x"))
            exemplar = {c.EXEMPLAR_TRACE_ID: known[1]}
        plan.calls.inc(1, exemplar)
        if plan.masked is not None:
            plan.masked.inc(1, exemplar)
        if seconds is not None:
            plan.duration.observe(seconds)
        if plan.refused is not None:
            plan.refused.inc()
            if plan.stale_sends is not None:
                plan.stale_sends.inc()

    def _retire(self, plans: dict[tuple[str, str, str, bool], _Plan]) -> None:
        """Hand over what ``plans`` hold before they are dropped, and keep them for the next
        :meth:`flush_counts` (a thread may still add to one it found before they were dropped)."""
        self.flush_counts()
        self._retired = list(plans.values())

    def _switch(self, metrics: ToolMetrics) -> tuple[ToolMetrics | None, dict[tuple[str, str, str, bool], _Plan]]:
        """Count in ``metrics`` from now on: what is held for the metrics before goes to them first."""
        with self._lock:
            plans = self._plans
            if plans[0] is metrics:
                return plans
            self._retire(plans[1])
            previous = plans[0]
            if previous is not None and previous is not self.metrics:
                previous.forget_before_collect(self.flush_counts)
            metrics.before_collect(self.flush_counts)
            plans = self._plans = (metrics, {})
            return plans

    @staticmethod
    def _plan(metrics: ToolMetrics, tool: str, transport: str, outcome: str, label: str, masked: bool) -> _Plan:
        if tool not in metrics.known_tools:
            metrics.ensure_tool(tool)
        child = metrics.child
        refused = outcome in c.REFUSAL_OUTCOMES
        calls = child(metrics.calls, tool, transport, c.READBACK_UNKNOWN, label)
        masked_child = child(metrics.masked, tool, label) if masked else None
        duration = child(metrics.duration, tool)
        direct = direct_values(calls, masked_child, duration)
        return _Plan(
            calls=calls,
            duration=duration,
            masked=masked_child,
            refused=child(metrics.rejected, tool, outcome) if refused else None,
            stale_sends=child(metrics.stale_sends, tool) if refused and outcome == c.OUTCOME_STALE_POLICY else None,
            exemplar=outcome != c.OUTCOME_OK or transport != c.TRANSPORT_OK,
            direct=direct,
            held=None if direct is None or _shared(calls) else [0, 0.0, [0] * len(direct.bounds), None, 0],
        )

    # --- bounds, memory, logging -------------------------------------------------------------

    def _tool_label(self, name: str | None) -> str:
        known = self._names.get(name)
        if known is not None:
            return known
        if self._allowed is None and _labelable(name):
            with self._lock:
                if len(self._names) < self._max_tools:
                    self._names[name] = name  # type: ignore[assignment]  # a str: _labelable said so
                    return name  # type: ignore[return-value]
        self._log_once(
            "tool",
            "observe_tool_spans: a tool span named %r is counted as tool=%r (not 1 to %d printable "
            "characters, outside tools=, or beyond the first %d names): pass tools=[...] to choose "
            "the names kept; later ones are not logged",
            name if not isinstance(name, str) else name[:MAX_TOOL_LABEL_LENGTH],
            c.TOOL_OTHER,
            MAX_TOOL_LABEL_LENGTH,
            self._max_tools,
        )
        return c.TOOL_OTHER

    def _remember(self, span_id: int) -> None:
        ours = self._ours
        ours[span_id] = True
        if len(ours) > _REMEMBERED_PARENTS:
            ours.popitem(last=False)

    def _shape_failed(self, exc: BaseException) -> None:
        _safe.report(c.STAGE_CLASSIFIER, "a registered result shape, judging a peer tool span", exc, self.metrics)

    def _unreadable(self, exc: BaseException) -> None:
        _safe.report(c.STAGE_CLASSIFIER, "observe_tool_spans judging a recorded result", exc, self.metrics)

    def _unjudged(self, format_name: str, status: str) -> None:
        if status == RECORDED_ABSENT:
            setting = format_named(format_name).content_setting
            self._log_once(
                "absent:" + format_name,
                "observe_tool_spans: %s tool spans carry no recorded result, so their outcome cannot be "
                "judged: they are counted by transport alone (outcome ok when the transport is); %s",
                format_name,
                setting,
            )
        elif status == RECORDED_TOO_LARGE:
            self._log_once(
                "too_large:" + format_name,
                "observe_tool_spans: a %s tool span's recorded result is longer than %d characters and was "
                "not judged (counted by transport alone); later ones are not logged",
                format_name,
                c.MAX_RECORDED_RESULT_CHARS,
            )

    def _log_once(self, key: str, message: str, *args: Any) -> None:
        if key in self._logged:
            return
        with self._lock:
            if key in self._logged:
                return
            self._logged.add(key)
        logger.warning(message, *args)


def observe_tool_spans(
    *,
    registry: CollectorRegistry | None = None,
    tools: Iterable[str] | None = None,
    max_tools: int = DEFAULT_MAX_TOOLS,
    outcomes: Iterable[str] = (),
) -> ToolSpanObserver:
    """A span processor counting every tool span other instrumentations end (see the module docstring).

    Parameters:
        registry: count in outcome-telemetry's metrics made in this prometheus-client registry
            (``ConfigurationError`` when it already holds them: a runtime's registry is counted in
            without this argument). None: count in the runtime active when each span ends.
        tools: the tool names kept as labels; any other name is counted as ``tool="other"``.
        max_tools: without ``tools``, how many distinct names are kept (the first seen).
        outcomes: outcome codes of your tools kept as labels beyond the vocabulary (``quota_exceeded``);
            others are ``other`` on the labels, as ``instrument_tool(outcomes=...)`` does.

    Add it to the application's provider: ``provider.add_span_processor(observe_tool_spans())``.
    """
    allowed = None
    if tools is not None:
        if isinstance(tools, str):
            raise ConfigurationError(f"observe_tool_spans: tools takes a list of tool names, not one string: pass [{tools!r}]")
        allowed = frozenset(tools)
        bad = sorted(repr(name) for name in allowed if not _labelable(name))
        if bad:
            raise ConfigurationError(
                f"observe_tool_spans: tools {', '.join(bad)} are not 1 to {MAX_TOOL_LABEL_LENGTH} printable characters"
            )
    if isinstance(max_tools, bool) or not isinstance(max_tools, int) or max_tools < 1:
        raise ConfigurationError(f"observe_tool_spans: max_tools={max_tools!r}: pass a whole number of at least 1")
    if isinstance(outcomes, str):
        raise ConfigurationError(f"observe_tool_spans: outcomes takes a list of codes, not one string: pass [{outcomes!r}]")
    declared = frozenset(outcomes)
    odd = sorted(repr(code) for code in declared if not (isinstance(code, str) and _OUTCOME_CODE.fullmatch(code)))
    if odd:
        raise ConfigurationError(
            f"observe_tool_spans: outcomes {', '.join(odd)} are not short snake_case codes (a lower-case letter, "
            f"then up to 63 lower-case letters, digits or _)"
        )
    metrics = None
    if registry is not None:
        try:
            metrics = ToolMetrics(registry)
        except ValueError as exc:
            raise ConfigurationError(
                "observe_tool_spans: the registry already holds outcome-telemetry's metrics (a runtime's, or "
                "another observer's); to count in the runtime configure() made, leave registry out"
            ) from exc
    return ToolSpanObserver(metrics=metrics, tools=allowed, max_tools=max_tools, outcomes=declared)
