"""Every span name, attribute name, metric name and outcome code the toolkit uses.

This module is the single owner of those strings. Code, SQL, dashboards and alert rules name
them as spelled here, and a test checks that every name they use is defined below. Changing a
name means changing it here and nowhere else in Python; SQL and YAML files are checked against
this module rather than importing it.

The GenAI names follow the OpenTelemetry semantic conventions for tool execution; the ``tool.*``,
``state.*``, ``delegation.*``, ``objective.*``, ``policy.*``, ``idempotency.*`` and ``plan.*``
names are the toolkit's own namespace (docs/architecture.md says which module sets which).
"""

from __future__ import annotations

from typing import Final

# --- spans -----------------------------------------------------------------------------------

OPERATION_EXECUTE_TOOL: Final = "execute_tool"
SPAN_NAME_PREFIX: Final = OPERATION_EXECUTE_TOOL + " "
"""A tool span is named ``execute_tool {gen_ai.tool.name}``."""

INSTRUMENTATION_SCOPE: Final = "outcome-telemetry"

# OpenTelemetry GenAI and general semantic-convention attributes.
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_AGENT_ID: Final = "gen_ai.agent.id"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
ERROR_TYPE: Final = "error.type"
HTTP_RESPONSE_STATUS_CODE: Final = "http.response.status_code"
SERVICE_NAME: Final = "service.name"

# The toolkit's triad.
TOOL_TRANSPORT: Final = "tool.transport"
TOOL_READBACK: Final = "tool.readback"
TOOL_OUTCOME: Final = "tool.outcome"
TOOL_KIND: Final = "tool.kind"
TOOL_READ_ONLY: Final = "tool.hint.read_only"
TOOL_DESTRUCTIVE: Final = "tool.hint.destructive"
TOOL_IDEMPOTENT: Final = "tool.hint.idempotent"
TOOL_ARGUMENT_PREFIX: Final = "tool.argument."
"""Opt-in recorded arguments are ``tool.argument.{name}`` (redacted, length-capped)."""
TOOL_FORCED_BY: Final = "tool.forced_by"
"""Operator identity on a forced (guard-bypassing) operation."""
TOOL_DEDUPLICATED: Final = "tool.deduplicated"
TOOL_SILENT_FAILURE: Final = "tool.silent_failure"
"""True when the result did not itself report failure (transport ok, the result classified ok)
but the outcome was decided not ok afterwards, by a read-back, an ``outcome=`` callable or
``set_outcome``: the caller was told "done" and it was not. False on every other call."""

# Domain attributes: the guards set them and forensics reads them.
STATE_KEY: Final = "state.key"
STATE_VERSION_READ: Final = "state.version.read"
STATE_VERSION_EXPECTED: Final = "state.version.expected"
STATE_VERSION_CURRENT: Final = "state.version.current"
STATE_VERSION_WRITTEN: Final = "state.version.written"
DELEGATION_TASK_ID: Final = "delegation.task_id"
DELEGATION_ORIGIN_TASK_ID: Final = "delegation.origin_task_id"
DELEGATION_ROOT_TASK_ID: Final = "delegation.root_task_id"
DELEGATION_HOP: Final = "delegation.hop"
DELEGATION_CONSTRAINTS_CARRIED: Final = "delegation.constraints.carried"
DELEGATION_CONSTRAINTS_WAIVED: Final = "delegation.constraints.waived"
DELEGATION_WAIVER_REASONS: Final = "delegation.constraints.waiver_reasons"
DELEGATION_CONSTRAINTS_MISSING: Final = "delegation.constraints.missing"
"""On a refused delegation: the origin's constraint ids neither carried verbatim nor waived."""
OBJECTIVE_TASK_ID: Final = "objective.task_id"
OBJECTIVE_VERSION: Final = "objective.version"
OBJECTIVE_CURRENT_VERSION: Final = "objective.version.current"
OBJECTIVE_PREVIOUS_VERSION: Final = "objective.version.previous"
"""On a supersession: the version it replaced (``objective.version`` is the new one)."""
OBJECTIVE_STALE_HOLDERS: Final = "objective.stale_holders"
"""On a supersession: how many agents held an older version (the correction fan-out size)."""
POLICY_VERSION: Final = "policy.version"
POLICY_CURRENT_VERSION: Final = "policy.version.current"
IDEMPOTENCY_KEY_HASH: Final = "idempotency.key_hash"
IDEMPOTENCY_PAYLOAD_HASH: Final = "idempotency.payload_hash"
IDEMPOTENCY_ORIGINAL_ID: Final = "idempotency.original_id"
IDEMPOTENCY_LEASE_LOST: Final = "idempotency.lease_lost"
"""True on a call that ran longer than its claim's lease: another call took the key over and
ran the write again (raise ``lease_seconds`` above the slowest call)."""
PLAN_ID: Final = "plan.id"
PLAN_OBJECTS_MATCHED: Final = "plan.objects_matched"
PLAN_CHANGED_COUNT: Final = "plan.changed_count"
PLAN_OUTSIDE_TARGET_CHANGED_COUNT: Final = "plan.outside_target_changed_count"
PLAN_BINDING_MOVED: Final = "plan.binding_moved"
SCHEDULE_ID: Final = "schedule.id"
"""A scheduled send's id, on every span of its life: scheduled, approved, cancelled, fired."""
SCHEDULE_EVENT: Final = "schedule.event"
"""What this span did to the scheduled send: one of ``SCHEDULE_EVENTS``."""
SCHEDULE_TOOL: Final = "schedule.tool"
"""The send tool a scheduled send belongs to (on the cancel and approve spans too)."""
SCHEDULE_WINDOW_SECONDS: Final = "schedule.window_seconds"
"""The review window the send was scheduled with; 0 means nobody could review it before it fired."""
SCHEDULE_FIRES_AT: Final = "schedule.fires_at"
"""When the send fires (ISO 8601, UTC), as it stood when the span was recorded."""
SCHEDULE_IN_WINDOW: Final = "schedule.in_window"
"""On a cancel: whether it came before the send was due (by the guard's clock, not the span's)."""

# --- the triad's values ----------------------------------------------------------------------

TRANSPORT_OK: Final = "ok"
TRANSPORT_ERROR: Final = "error"
TRANSPORT_VALUES: Final = (TRANSPORT_OK, TRANSPORT_ERROR)

READBACK_MATCH: Final = "match"
READBACK_MISMATCH: Final = "mismatch"
READBACK_SKIPPED: Final = "skipped"
READBACK_ERROR: Final = "error"
READBACK_NOT_APPLICABLE: Final = "not_applicable"
READBACK_UNKNOWN: Final = "unknown"
"""A call recorded by another instrumentation: nothing read the state back, and nothing says
whether it should have (the ``readback`` label of calls counted by ``observe_tool_spans``)."""
READBACK_VALUES: Final = (
    READBACK_MATCH,
    READBACK_MISMATCH,
    READBACK_SKIPPED,
    READBACK_ERROR,
    READBACK_NOT_APPLICABLE,
    READBACK_UNKNOWN,
)
TOOL_READBACK_ERROR: Final = "tool.readback.error"
"""Why ``tool.readback`` is ``error``: one of :data:`READBACK_ERRORS`; absent on every other call."""
READBACK_ERROR_RAISED: Final = "raised"
"""The read-back raised (or returned what is not a read-back answer)."""
READBACK_ERROR_TIMEOUT: Final = "timeout"
"""The read-back did not answer within the tool's ``readback_timeout``; the tool's result went back
to its caller at the timeout, and the read-back's late answer is ignored."""
READBACK_ERROR_NO_THREAD: Final = "no_thread"
"""Every read-back thread was still held by earlier read-backs that timed out, so this one was not run."""
READBACK_ERRORS: Final = (READBACK_ERROR_RAISED, READBACK_ERROR_TIMEOUT, READBACK_ERROR_NO_THREAD)

# --- the outcome vocabulary ------------------------------------------------------------------

OUTCOME_OK: Final = "ok"
OUTCOME_ERROR: Final = "error"
OUTCOME_TOOL_ERROR: Final = "tool_error"
OUTCOME_INVALID_ARGUMENT: Final = "invalid_argument"
OUTCOME_REJECTED_STALE_VERSION: Final = "rejected_stale_version"
OUTCOME_STALE_POLICY: Final = "stale_policy"
OUTCOME_CONSTRAINT_MISSING: Final = "constraint_missing"
OUTCOME_DUPLICATE_REQUEST: Final = "duplicate_request"
OUTCOME_PLAN_EXPIRED: Final = "plan_expired"
OUTCOME_PLAN_BINDING_MOVED: Final = "plan_binding_moved"
OUTCOME_POSTCONDITION_FAILED: Final = "postcondition_failed"
OUTCOME_READBACK_MISMATCH: Final = "readback_mismatch"
OUTCOME_RATE_LIMITED: Final = "rate_limited"
OUTCOME_NOT_FOUND: Final = "not_found"
OUTCOME_FORCED: Final = "forced"
"""A guard was bypassed by an operator: the write happened, and the span says who forced it."""
OUTCOME_IN_PROGRESS: Final = "in_progress"
"""An idempotency key is claimed by a call that has not finished yet: retry after a pause."""
OUTCOME_RETRY_REQUESTED: Final = "retry_requested"
"""The tool asked the model to call it again with better arguments (pydantic-ai's ``ModelRetry``):
the tool worked, the model's request did not."""
OUTCOME_DEFERRED: Final = "deferred"
"""The call was handed off to be finished elsewhere, later (pydantic-ai's ``CallDeferred``): a pause,
not a failure; the result arrives in a later run."""
OUTCOME_APPROVAL_REQUIRED: Final = "approval_required"
"""The call waits for a human's approval before it runs (pydantic-ai's ``ApprovalRequired``): a
pause, not a failure; the approved call is recorded again when it runs."""
OUTCOME_OTHER: Final = "other"
"""Metric label for an outcome outside the vocabulary and the tool's declared set."""

OUTCOMES: Final = frozenset(
    {
        OUTCOME_OK,
        OUTCOME_ERROR,
        OUTCOME_TOOL_ERROR,
        OUTCOME_INVALID_ARGUMENT,
        OUTCOME_REJECTED_STALE_VERSION,
        OUTCOME_STALE_POLICY,
        OUTCOME_CONSTRAINT_MISSING,
        OUTCOME_DUPLICATE_REQUEST,
        OUTCOME_PLAN_EXPIRED,
        OUTCOME_PLAN_BINDING_MOVED,
        OUTCOME_POSTCONDITION_FAILED,
        OUTCOME_READBACK_MISMATCH,
        OUTCOME_RATE_LIMITED,
        OUTCOME_NOT_FOUND,
        OUTCOME_FORCED,
        OUTCOME_IN_PROGRESS,
        OUTCOME_RETRY_REQUESTED,
        OUTCOME_DEFERRED,
        OUTCOME_APPROVAL_REQUIRED,
    }
)

REFUSAL_OUTCOMES: Final = frozenset(
    {
        OUTCOME_REJECTED_STALE_VERSION,
        OUTCOME_STALE_POLICY,
        OUTCOME_CONSTRAINT_MISSING,
        OUTCOME_DUPLICATE_REQUEST,
        OUTCOME_PLAN_EXPIRED,
        OUTCOME_PLAN_BINDING_MOVED,
        OUTCOME_IN_PROGRESS,
    }
)
"""Outcomes by which a guard refused at call time; each is counted in
``tool_guard_refusals_total`` with the outcome as its ``reason``."""

# --- the result envelope (what a guard returns, what the classifier reads) --------------------

ENVELOPE_OK: Final = "ok"
"""``True`` on success, ``False`` on a refusal; the classifier reads ``False`` as "not ok"."""
ENVELOPE_ERROR: Final = "error"
"""A refusal's outcome code (from the vocabulary above)."""
ENVELOPE_MESSAGE: Final = "message"
"""What happened and what to do next, for the model."""
ENVELOPE_RETRY: Final = "retry"
"""Whether redoing the call (after doing what the message says) can succeed."""
ENVELOPE_RETRY_AFTER_SECONDS: Final = "retry_after_seconds"
ENVELOPE_REJECTED: Final = "rejected"
"""``True`` in a stale-write result of tools that predate the envelope: ``rejected_stale_version``."""
ENVELOPE_DEDUPLICATED: Final = "deduplicated"
"""``True`` in a result answered from a stored outcome (an idempotent replay)."""
ENVELOPE_KEYS: Final = frozenset(
    {ENVELOPE_OK, ENVELOPE_ERROR, ENVELOPE_MESSAGE, ENVELOPE_RETRY, ENVELOPE_RETRY_AFTER_SECONDS}
)
"""The keys a refusal's context may not reuse."""

# --- tool kinds ------------------------------------------------------------------------------

KIND_READ: Final = "read"
KIND_WRITE: Final = "write"
KIND_SEND: Final = "send"
KIND_DELEGATE: Final = "delegate"
KINDS: Final = (KIND_READ, KIND_WRITE, KIND_SEND, KIND_DELEGATE)
MCP_HINTS: Final = {
    "read_only": ("read_only_hint", "readOnlyHint"),
    "destructive": ("destructive_hint", "destructiveHint"),
    "idempotent": ("idempotent_hint", "idempotentHint"),
}
"""The decorator's hints and the MCP ``ToolAnnotations`` that say the same: hint (a ``ToolSpec``
field) -> (the SDK's attribute, the name on the wire in ``tools/list``)."""

# --- coordination guard tool names (gen_ai.tool.name and the ``tool`` label) -----------------

TOOL_REGISTER_TASK: Final = "register_task"
TOOL_DELEGATE: Final = "delegate"
TOOL_GET_TASK: Final = "get_task"
TOOL_PUBLISH_OBJECTIVE: Final = "publish_objective"
TOOL_GET_OBJECTIVE: Final = "get_objective"
TOOL_SUPERSEDE_OBJECTIVE: Final = "supersede_objective"
TOOL_GET_SCHEDULED_SEND: Final = "get_scheduled_send"
TOOL_CANCEL_SCHEDULED_SEND: Final = "cancel_scheduled_send"
TOOL_APPROVE_SCHEDULED_SEND: Final = "approve_scheduled_send"

# --- scheduled sends: the values of ``schedule.event`` ---------------------------------------

SCHEDULE_SCHEDULED: Final = "scheduled"
"""The send tool was called: nothing was sent, a row now waits for its fire time."""
SCHEDULE_CANCELLED: Final = "cancelled"
"""A reviewer cancelled it before it fired: it will never be sent."""
SCHEDULE_APPROVED: Final = "approved"
"""A reviewer other than the scheduling agent approved it: it fires at the next firing pass."""
SCHEDULE_FIRED: Final = "fired"
"""The policy was still current at fire time and the send's body ran."""
SCHEDULE_REFUSED_AT_FIRE: Final = "refused_at_fire"
"""The policy moved inside the window: the guard refused the send at fire time (``stale_policy``)."""
SCHEDULE_EVENTS: Final = (SCHEDULE_SCHEDULED, SCHEDULE_CANCELLED, SCHEDULE_APPROVED, SCHEDULE_FIRED,
                          SCHEDULE_REFUSED_AT_FIRE)

# --- metrics ---------------------------------------------------------------------------------
# prometheus-client appends ``_total`` to counters itself, so each counter has its base name
# (what the client takes) and its exposed name (what PromQL, rules and dashboards use).

METRIC_TOOL_CALLS: Final = "tool_calls"
METRIC_TOOL_CALLS_TOTAL: Final = "tool_calls_total"
METRIC_TOOL_CALL_DURATION: Final = "tool_call_duration_seconds"
METRIC_GUARD_REFUSALS: Final = "tool_guard_refusals"
METRIC_GUARD_REFUSALS_TOTAL: Final = "tool_guard_refusals_total"
METRIC_CONSTRAINT_WAIVERS: Final = "tool_constraint_waivers"
METRIC_CONSTRAINT_WAIVERS_TOTAL: Final = "tool_constraint_waivers_total"
METRIC_STALE_SENDS: Final = "tool_stale_sends"
METRIC_STALE_SENDS_TOTAL: Final = "tool_stale_sends_total"
METRIC_IDEMPOTENT_REPLAYS: Final = "tool_idempotent_replays"
METRIC_IDEMPOTENT_REPLAYS_TOTAL: Final = "tool_idempotent_replays_total"
METRIC_SPANS_DROPPED: Final = "outcome_telemetry_spans_dropped"
METRIC_SPANS_DROPPED_TOTAL: Final = "outcome_telemetry_spans_dropped_total"
"""Finished spans an exporter never received or could not deliver: forensics reads less."""
METRIC_INTERNAL_ERRORS: Final = "outcome_telemetry_internal_errors"
METRIC_INTERNAL_ERRORS_TOTAL: Final = "outcome_telemetry_internal_errors_total"
"""Failures inside the toolkit's own work, contained so the tool call was unaffected."""
METRIC_SILENT_FAILURES: Final = "tool_silent_failures"
METRIC_SILENT_FAILURES_TOTAL: Final = "tool_silent_failures_total"
"""Calls whose caller was told success while the outcome was not ok (see ``TOOL_SILENT_FAILURE``)."""
METRIC_MASKED_FAILURES: Final = "tool_masked_failures"
METRIC_MASKED_FAILURES_TOTAL: Final = "tool_masked_failures_total"
"""Masked failures: calls whose result reported a failure while their span's status says OK or
unset, so every tracer's error view shows them green (counted by ``observe_tool_spans``)."""

LABEL_TOOL: Final = "tool"
LABEL_TRANSPORT: Final = "transport"
LABEL_READBACK: Final = "readback"
LABEL_OUTCOME: Final = "outcome"
LABEL_REASON: Final = "reason"
LABEL_EXPORTER: Final = "exporter"
LABEL_STAGE: Final = "stage"
EXEMPLAR_TRACE_ID: Final = "trace_id"

METRIC_LABELS: Final = {
    METRIC_TOOL_CALLS_TOTAL: (LABEL_TOOL, LABEL_TRANSPORT, LABEL_READBACK, LABEL_OUTCOME),
    METRIC_TOOL_CALL_DURATION: (LABEL_TOOL,),
    METRIC_GUARD_REFUSALS_TOTAL: (LABEL_TOOL, LABEL_REASON),
    METRIC_CONSTRAINT_WAIVERS_TOTAL: (LABEL_TOOL,),
    METRIC_STALE_SENDS_TOTAL: (LABEL_TOOL,),
    METRIC_IDEMPOTENT_REPLAYS_TOTAL: (LABEL_TOOL,),
    METRIC_SPANS_DROPPED_TOTAL: (LABEL_EXPORTER, LABEL_REASON),
    METRIC_INTERNAL_ERRORS_TOTAL: (LABEL_STAGE,),
    METRIC_SILENT_FAILURES_TOTAL: (LABEL_TOOL, LABEL_OUTCOME),
    METRIC_MASKED_FAILURES_TOTAL: (LABEL_TOOL, LABEL_OUTCOME),
}
"""Exposed metric name to its label names, in order."""


# The bounded label values of the toolkit's own health counters.
EXPORTER_FILE: Final = "file"
"""The OTLP JSON lines files forensics reads."""
EXPORTER_OTLP: Final = "otlp"
EXPORTER_OTHER: Final = "other"
"""An exporter passed in ``extra_exporters``."""
EXPORTERS: Final = (EXPORTER_FILE, EXPORTER_OTLP, EXPORTER_OTHER)

DROP_QUEUE_FULL: Final = "queue_full"
"""The export queue was full (and back-pressure, if on, waited its limit)."""
DROP_EXPORT_FAILED: Final = "export_failed"
"""The exporter failed or raised: a full disk, an unwritable folder, a collector that refused."""
DROP_SHUTDOWN_TIMEOUT: Final = "shutdown_timeout"
"""Still queued when ``shutdown()`` ran out of time."""
DROP_REASONS: Final = (DROP_QUEUE_FULL, DROP_EXPORT_FAILED, DROP_SHUTDOWN_TIMEOUT)

STAGE_READBACK: Final = "readback"
"""A read-back callable raised or returned something that is not a read-back value."""
STAGE_CLASSIFIER: Final = "classifier"
"""Classifying a result failed, or an outcome classifier raised."""
STAGE_OUTCOME: Final = "outcome"
"""An outcome could not be made a string."""
STAGE_SPAN: Final = "span"
"""Starting, recording or ending a span failed."""
STAGE_EXPORTER: Final = "exporter"
"""Writing, flushing or closing spans failed."""
STAGE_METRICS: Final = "metrics"
"""Counting a call failed."""
STAGE_ARGUMENTS: Final = "arguments"
"""Recording a tool's arguments failed."""
STAGE_GUARD: Final = "guard"
"""A guard's own bookkeeping failed (e.g. storing an idempotent result)."""
STAGES: Final = (
    STAGE_READBACK,
    STAGE_CLASSIFIER,
    STAGE_OUTCOME,
    STAGE_SPAN,
    STAGE_EXPORTER,
    STAGE_METRICS,
    STAGE_ARGUMENTS,
    STAGE_GUARD,
)

# --- recording limits ------------------------------------------------------------------------

MAX_ATTRIBUTE_LENGTH: Final = 256
"""Recorded argument values and out-of-vocabulary outcomes are cut to this many characters."""
REDACTED: Final = "[REDACTED]"
SECRET_NAME_PARTS: Final = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "privatekey",
    "authorization",
    "credential",
    "cookie",
    "session",
)
"""An argument (or a key inside one) whose folded name (lower-cased, non-alphanumerics dropped,
so ``X-Api-Key`` is ``xapikey``) contains one of these is recorded as ``[REDACTED]``."""
SECRET_NAME_WORDS: Final = ("auth", "bearer", "jwt", "otp", "pwd")
"""Short words that mark a secret only as a whole word of the name (``x-auth``, ``authHeader``,
not ``author``)."""
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
"""OTLP carries integers as int64: an int outside this range is recorded (and encoded) as text."""

MAX_RECORDED_RESULT_CHARS: Final = 1_000_000
"""A recorded result (another tracer's output attribute) longer than this is counted and skipped,
never parsed: a 10 MB output must cost a count, not the report."""

OTLP_SPANS_PER_LINE: Final = 64
"""The file exporter writes at most this many spans per JSON line: short lines let a reader stream
the file without holding a large batch in memory, and a crash loses at most the line being written."""

# --- alert rules and dashboards --------------------------------------------------------------
# The names ``alerts/*.rules.yml`` and ``dashboards/*.json`` use beyond the metrics above:
# recording rules, alerts, the Prometheus built-ins they join on, and the alert labels. A test
# (tests/alerting/test_alerting_names.py) checks every name those files use is defined here.

PROMETHEUS_UP: Final = "up"
"""Prometheus's own per-target health series; the first-silent-failure branch joins on it."""
LABEL_JOB: Final = "job"
LABEL_INSTANCE: Final = "instance"
LABEL_LE: Final = "le"
"""Histogram bucket bound label (``tool_call_duration_seconds_bucket{le=...}``)."""
HISTOGRAM_SUFFIXES: Final = ("_bucket", "_sum", "_count")
LABEL_SEVERITY: Final = "severity"
SEVERITY_CRITICAL: Final = "critical"
"""Page a human now."""
SEVERITY_WARNING: Final = "warning"
"""Open a ticket; look during working hours."""
LABEL_ALERTNAME: Final = "alertname"
"""Prometheus's own label holding an alert's name (promtool reports alerts with it)."""
ANNOTATION_SUMMARY: Final = "summary"
"""The one-line alert annotation every shipped alert carries (``telemetry.demo._alerting`` reads it)."""

PAUSED_OUTCOMES: Final = frozenset({OUTCOME_DEFERRED, OUTCOME_APPROVAL_REQUIRED})
"""Outcomes of a call that paused for a human or for later (human in the loop): not a failure."""

NOT_MASKABLE_OUTCOMES: Final = frozenset({OUTCOME_OK, OUTCOME_FORCED}) | PAUSED_OUTCOMES
"""Outcomes that are no failure a green span status could hide (success, an operator's force, a
pause): a masked failure is any other outcome on a span whose status is OK or unset
(``queries/masked_failures.sql`` lists them; ``observe_tool_spans`` counts by them)."""

NOT_BAD_OUTCOMES: Final = NOT_MASKABLE_OUTCOMES | REFUSAL_OUTCOMES
"""Outcomes that are not a reported failure: success, an operator's counted force, guard
refusals (prevented failures with their own ratio alert) and pauses (deferred, awaiting approval). The reported-failures alert selects
``tool_calls_total`` outside this set; a test checks each copy of the regex against it."""

RULE_CALLS_RATE5M: Final = "tool:tool_calls:rate5m"
RULE_SILENT_FAILURES_RATE5M: Final = "tool_outcome:silent_failures:rate5m"
RULE_INTENT_SUCCESS_RATIO_RATE5M: Final = "tool:intent_success:ratio_rate5m"
RULE_INTENT_ERROR_RATIO_RATE5M: Final = "tool:intent_error:ratio_rate5m"
RULE_INTENT_ERROR_RATIO_RATE30M: Final = "tool:intent_error:ratio_rate30m"
RULE_INTENT_ERROR_RATIO_RATE1H: Final = "tool:intent_error:ratio_rate1h"
RULE_INTENT_ERROR_RATIO_RATE6H: Final = "tool:intent_error:ratio_rate6h"
RULE_INTENT_ERROR_RATIO_RATE3D: Final = "tool:intent_error:ratio_rate3d"
RULE_GUARD_REFUSALS_RATIO_RATE5M: Final = "tool:guard_refusals:ratio_rate5m"
RULE_REPORTED_FAILURES_RATIO_RATE5M: Final = "tool:reported_failures:ratio_rate5m"
"""Failures the caller was told about (errors, error envelopes, non-2xx), refusals and silent
failures excluded, as a share of calls."""
RULE_READBACK_MATCH_RATIO_RATE5M: Final = "tool:readback_match:ratio_rate5m"
RULE_READBACK_MISMATCH_RATIO_RATE5M: Final = "tool:readback_mismatch:ratio_rate5m"
RULE_INTENT_SLO_TARGET: Final = "outcome_telemetry:intent_slo:target"
"""The intent-success SLO target, a constant recording rule (``vector(0.99)``) operators edit."""
RULE_INTENT_SLO_ERROR_BUDGET: Final = "outcome_telemetry:intent_slo:error_budget"
RECORDING_RULES: Final = (
    RULE_CALLS_RATE5M,
    RULE_SILENT_FAILURES_RATE5M,
    RULE_INTENT_SUCCESS_RATIO_RATE5M,
    RULE_INTENT_ERROR_RATIO_RATE5M,
    RULE_INTENT_ERROR_RATIO_RATE30M,
    RULE_INTENT_ERROR_RATIO_RATE1H,
    RULE_INTENT_ERROR_RATIO_RATE6H,
    RULE_INTENT_ERROR_RATIO_RATE3D,
    RULE_GUARD_REFUSALS_RATIO_RATE5M,
    RULE_REPORTED_FAILURES_RATIO_RATE5M,
    RULE_READBACK_MATCH_RATIO_RATE5M,
    RULE_READBACK_MISMATCH_RATIO_RATE5M,
    RULE_INTENT_SLO_TARGET,
    RULE_INTENT_SLO_ERROR_BUDGET,
)

ALERT_SILENT_FAILURE: Final = "ToolSilentFailure"
"""A silent failure (``tool_silent_failures_total``): the caller was told done and it was not."""
ALERT_READBACK_MISMATCH: Final = "ToolReadbackMismatch"
ALERT_GUARD_REFUSALS_HIGH: Final = "ToolGuardRefusalsHigh"
ALERT_REPORTED_FAILURES_HIGH: Final = "ToolReportedFailuresHigh"
ALERT_STALE_SENDS: Final = "ToolStaleSends"
ALERT_CONSTRAINT_WAIVER_SPIKE: Final = "ToolConstraintWaiverSpike"
ALERT_INTENT_BUDGET_BURN_FAST: Final = "ToolIntentErrorBudgetBurnFast"
ALERT_INTENT_BUDGET_BURN_MEDIUM: Final = "ToolIntentErrorBudgetBurnMedium"
ALERT_INTENT_BUDGET_BURN_SLOW: Final = "ToolIntentErrorBudgetBurnSlow"
ALERT_DROPPING_SPANS: Final = "OutcomeTelemetryDroppingSpans"
"""Spans were dropped: the evidence forensics will read is incomplete."""
ALERT_READBACK_ERRORS: Final = "ToolReadbackErrors"
"""Read-backs raise: whether the tool's writes really happened is unknown."""
ALERT_MASKED_FAILURES: Final = "ToolMaskedFailures"
"""Masked failures (``tool_masked_failures_total``): results that reported a failure on spans
another instrumentation marked OK or unset, counted by ``observe_tool_spans``."""
ALERTS: Final = (
    ALERT_SILENT_FAILURE,
    ALERT_READBACK_MISMATCH,
    ALERT_GUARD_REFUSALS_HIGH,
    ALERT_REPORTED_FAILURES_HIGH,
    ALERT_STALE_SENDS,
    ALERT_CONSTRAINT_WAIVER_SPIKE,
    ALERT_INTENT_BUDGET_BURN_FAST,
    ALERT_INTENT_BUDGET_BURN_MEDIUM,
    ALERT_INTENT_BUDGET_BURN_SLOW,
    ALERT_DROPPING_SPANS,
    ALERT_READBACK_ERRORS,
    ALERT_MASKED_FAILURES,
)

# --- continuous forensics (``outcome-telemetry watch``) --------------------------------------

METRIC_FORENSIC_FINDINGS: Final = "tool_forensic_findings"
METRIC_FORENSIC_FINDINGS_TOTAL: Final = "tool_forensic_findings_total"
"""New forensics findings by ``question``: each finding (its question and identifying columns)
counted once, however many passes over the window see it."""
LABEL_QUESTION: Final = "question"
METRIC_WATCH_LINES_READ_TOTAL: Final = "outcome_telemetry_watch_lines_read_total"
"""Complete trace lines the watcher has read (each once)."""
METRIC_WATCH_BAD_LINES_TOTAL: Final = "outcome_telemetry_watch_bad_lines_total"
"""Lines that were not OTLP TracesData (skipped, named on stderr with file and line)."""
METRIC_WATCH_LAG_SECONDS: Final = "outcome_telemetry_watch_lag_seconds"
"""Wall-clock now minus the end of the newest span read: how far behind the traces the watcher is."""
METRIC_WATCH_PASS_DURATION: Final = "outcome_telemetry_watch_pass_duration_seconds"
"""A histogram of pass durations (read, evaluate every question, count)."""
METRIC_WATCH_PASS_FAILURES_TOTAL: Final = "outcome_telemetry_watch_pass_failures_total"
"""Passes that failed (logged with a traceback; the next pass retries)."""
METRIC_WATCH_WINDOW_SPANS: Final = "outcome_telemetry_watch_window_spans"
"""Spans in the sliding window after the last pass."""
METRIC_WATCH_FILES: Final = "outcome_telemetry_watch_files"
"""Trace files being followed."""
METRIC_WATCH_SPANS_EVICTED_TOTAL: Final = "outcome_telemetry_watch_spans_evicted_total"
"""Spans that left the window, by ``reason``: ``window`` (their run aged out, or they are older
than twice the window) or ``future`` (dated more than a window past the wall clock)."""
METRIC_WATCH_FUTURE_SPANS_TOTAL: Final = "outcome_telemetry_watch_future_spans_total"
"""Spans read that end more than ``future_seconds`` after the wall clock (judged, never trusted
as the window's end)."""
EVICTED_WINDOW: Final = "window"
EVICTED_FUTURE: Final = "future"
ALERT_FORENSIC_FINDING: Final = "ToolForensicFinding"
"""A new finding from continuous forensics, with the question's severity."""
WATCH_METRIC_LABELS: Final = {
    METRIC_FORENSIC_FINDINGS_TOTAL: (LABEL_QUESTION,),
    METRIC_WATCH_LINES_READ_TOTAL: (),
    METRIC_WATCH_BAD_LINES_TOTAL: (),
    METRIC_WATCH_LAG_SECONDS: (),
    METRIC_WATCH_PASS_DURATION: (),
    METRIC_WATCH_PASS_FAILURES_TOTAL: (),
    METRIC_WATCH_WINDOW_SPANS: (),
    METRIC_WATCH_FILES: (),
    METRIC_WATCH_SPANS_EVICTED_TOTAL: (LABEL_REASON,),
    METRIC_WATCH_FUTURE_SPANS_TOTAL: (),
}
"""What ``outcome-telemetry watch`` serves (exposed name to labels); ``question`` values are the
forensics question names."""
WATCH_ALERTS: Final = (ALERT_FORENSIC_FINDING,)
"""Alerts on what ``watch`` serves, in ``alerts/outcome-telemetry.rules.yml`` (one rule per severity,
all named the same)."""

# --- the tool-surface audit (``outcome-telemetry audit``) ------------------------------------
# Its JSON report, table and SARIF use these words; telemetry.audit._model re-exports them under
# short names.

AUDIT_YES: Final = "yes"
AUDIT_NO: Final = "no"
AUDIT_NOT_APPLICABLE: Final = "not_applicable"
AUDIT_VERDICTS: Final = (AUDIT_YES, AUDIT_NO, AUDIT_NOT_APPLICABLE)
"""An audit answer's verdict."""
AUDIT_SCOPED: Final = "scoped"
AUDIT_IDEMPOTENT: Final = "idempotent"
AUDIT_VERSION_BOUND: Final = "version_bound"
AUDIT_PREVIEWABLE: Final = "previewable"
AUDIT_READBACK_VERIFIED: Final = "readback_verified"
AUDIT_SEMANTICALLY_OBSERVABLE: Final = "semantically_observable"
AUDIT_ACTIONABLE_ERRORS: Final = "actionable_errors"
"""The seventh check: the tool's errors name a code, say whether and when to retry, and hand the
model no exception text (AUD107)."""
AUDIT_CHECKS: Final = (AUDIT_SCOPED, AUDIT_IDEMPOTENT, AUDIT_VERSION_BOUND, AUDIT_PREVIEWABLE,
                       AUDIT_READBACK_VERIFIED, AUDIT_SEMANTICALLY_OBSERVABLE, AUDIT_ACTIONABLE_ERRORS)
"""The questions the audit asks of every tool, in the order its table shows them."""
AUDIT_SEVERITY_INFO: Final = "info"
"""A finding below the alert severities (``SEVERITY_CRITICAL``, ``SEVERITY_WARNING``)."""
AUDIT_FROM_DECLARATION: Final = "declaration"
"""The answer rests on what the tool declares (decorator options, annotations, a guard)."""
AUDIT_FROM_INFERENCE: Final = "inference"
"""The answer rests on the tool's name and parameters: nothing declared it."""
AUDIT_FROM_TRACES: Final = "traces"
"""The answer rests on what the tool's spans show it did."""

# --- traces written by other instrumentations ("bring your own traces") ----------------------
# What forensics, the audit and ``observe_tool_spans`` read on spans that our decorator did not
# write. Each format marks a tool span its own way and records the call's input and result under
# its own keys; ``telemetry._span_formats`` says which key means what, per format.

FORMAT_OURS: Final = "outcome-telemetry"
FORMAT_GENAI: Final = "genai"
"""OpenTelemetry GenAI semantic conventions (pydantic-ai, the OpenAI Agents SDK, the
``opentelemetry-instrumentation-genai-*`` packages, Strands)."""
FORMAT_OPENINFERENCE: Final = "openinference"
FORMAT_TRACELOOP: Final = "traceloop"
"""OpenLLMetry (traceloop-sdk)."""
FORMAT_LANGFUSE: Final = "langfuse"
FORMAT_MLFLOW: Final = "mlflow"
FORMAT_SELECTED: Final = "selected"
"""A span the user named a tool span with ``--tool-spans`` (logfire's ``@instrument``, in-house)."""
SPAN_FORMATS: Final = (FORMAT_OURS, FORMAT_GENAI, FORMAT_OPENINFERENCE, FORMAT_TRACELOOP,
                       FORMAT_LANGFUSE, FORMAT_MLFLOW, FORMAT_SELECTED)

GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
PYDANTIC_AI_TOOL_ARGUMENTS: Final = "tool_arguments"
PYDANTIC_AI_TOOL_RESPONSE: Final = "tool_response"
"""What pydantic-ai's instrumentation wrote before it used ``gen_ai.tool.call.arguments``/``.result``."""
GEN_AI_TOOL_STATUS: Final = "gen_ai.tool.status"
"""Strands' own tool status (``success`` | ``error``)."""
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
OPENINFERENCE_KIND_TOOL: Final = "TOOL"
OI_TOOL_NAME: Final = "tool.name"
OI_INPUT_VALUE: Final = "input.value"
OI_OUTPUT_VALUE: Final = "output.value"
OI_SESSION_ID: Final = "session.id"
OI_TOOL_CALL_ID: Final = "tool_call.id"
OI_LLM_OUTPUT_MESSAGES: Final = "llm.output_messages"
"""Prefix of the flattened output messages of an LLM span
(``llm.output_messages.{i}.message.tool_calls.{j}.tool_call.id``)."""
TRACELOOP_SPAN_KIND: Final = "traceloop.span.kind"
TRACELOOP_KIND_TOOL: Final = "tool"
TRACELOOP_KIND_WORKFLOW: Final = "workflow"
TRACELOOP_ENTITY_NAME: Final = "traceloop.entity.name"
TRACELOOP_ENTITY_INPUT: Final = "traceloop.entity.input"
TRACELOOP_ENTITY_OUTPUT: Final = "traceloop.entity.output"
TRACELOOP_WORKFLOW_NAME: Final = "traceloop.workflow.name"
LANGFUSE_OBSERVATION_TYPE: Final = "langfuse.observation.type"
LANGFUSE_KIND_TOOL: Final = "tool"
LANGFUSE_OBSERVATION_INPUT: Final = "langfuse.observation.input"
LANGFUSE_OBSERVATION_OUTPUT: Final = "langfuse.observation.output"
LANGFUSE_SESSION_ID: Final = "langfuse.session.id"
MLFLOW_SPAN_TYPE: Final = "mlflow.spanType"
MLFLOW_KIND_TOOL: Final = "TOOL"
MLFLOW_SPAN_INPUTS: Final = "mlflow.spanInputs"
MLFLOW_SPAN_OUTPUTS: Final = "mlflow.spanOutputs"
MLFLOW_TRACE_REQUEST_ID: Final = "mlflow.traceRequestId"
TOOL_OTHER: Final = "other"
"""The ``tool`` label of a span ``observe_tool_spans`` counts under no name of its own: a name
outside its ``tools=`` list or beyond its ``max_tools``, or not 1 to 128 printable characters."""
OPENINFERENCE_KIND_LLM: Final = "LLM"
"""The OpenInference span kind of a model call, whose output messages name the tool calls it made."""
CODE_FUNCTION: Final = "code.function"
"""The function a span was made for (logfire's ``@logfire.instrument``, the OpenTelemetry code
attributes): such a span carries no tool marker, so only ``--tool-spans`` makes it a tool call."""
LOGFIRE_JSON_SCHEMA: Final = "logfire.json_schema"
"""logfire's JSON Schema of the attributes it recorded: the function's arguments (and ``return``)."""
LOGFIRE_RETURN: Final = "return"
"""The attribute logfire records a function's return value in (``record_return=True``)."""

# The span-format layer's columns of the forensics ``spans`` view (``queries/spans.sql``) and
# their values: which format a tool call came from, how its recorded result was read, and where
# its kind came from.
COLUMN_SPAN_FORMAT: Final = "span_format"
COLUMN_RESULT_STATUS: Final = "result_status"
COLUMN_ARGUMENTS_HASH: Final = "arguments_hash"
"""A hash of a peer tool call's arguments (parsed and dumped again with sorted keys): two calls
with the same arguments have the same hash; the arguments themselves never reach a report."""
COLUMN_ARGUMENTS_KEYED: Final = "arguments_keyed"
"""True when a peer tool call's arguments carry an idempotency key (``request_id``, ...)."""
COLUMN_TOOL_CALL_ID: Final = "tool_call_id"
COLUMN_TOOL_KIND_SOURCE: Final = "tool_kind_source"
RESULT_MALFORMED: Final = "malformed"
"""A recorded result that looks like JSON but does not parse (cut by an attribute length limit,
or hostile): counted and skipped, never judged. The other values of ``result_status`` are
``telemetry.envelopes``' ``RECORDED_*`` (judged, text, absent, too_large)."""
KIND_SOURCE_RECORDED: Final = "recorded"
KIND_SOURCE_INFERRED: Final = "inferred"
"""From the span's own attributes (``state.version.*``, ``delegation.*``, ``policy.version``)."""
KIND_SOURCE_FROM_NAME: Final = "inferred_from_name"
KIND_SOURCE_FROM_ARGUMENTS: Final = "inferred_from_arguments"
KIND_SOURCE_AMBIGUOUS: Final = "ambiguous"
KIND_SOURCE_UNDECIDED: Final = "undecided"
KIND_SOURCES: Final = (KIND_SOURCE_RECORDED, KIND_SOURCE_INFERRED, KIND_SOURCE_FROM_NAME,
                       KIND_SOURCE_FROM_ARGUMENTS, KIND_SOURCE_AMBIGUOUS, KIND_SOURCE_UNDECIDED)
OI_TOOL_CALL_FUNCTION_NAME: Final = "tool_call.function.name"
"""Beside ``tool_call.id`` in an OpenInference LLM span's output messages: the tool it asks for."""

# --- MCP request _meta: who is calling (read by telemetry.mcp, written by trace_meta) ---------
MCP_META_TOOL_CALL_ID: Final = "outcome-telemetry/tool_call_id"
"""The model's tool-call id, in a ``tools/call`` request's ``_meta``: ``gen_ai.tool.call.id`` on the server's span."""
MCP_META_AGENT_ID: Final = "outcome-telemetry/agent_id"
"""The calling agent, in a request's ``_meta``: ``gen_ai.agent.id`` on the server's span."""
MCP_META_CONVERSATION_ID: Final = "outcome-telemetry/conversation_id"
"""The calling run, in a request's ``_meta``: ``gen_ai.conversation.id`` on the server's span."""

# --- errors a model can act on, and the verification contract (issue 32) ---------------------
# Recorded on an error result (a result that reported a failure, not an exception) without its
# content: whether it named a code, said whether and when to retry, and offered a recovery path.

TOOL_ERROR_CODE: Final = "tool.error.code"
"""The condition an error result named, as a code a model can branch on (a short snake_case
token); absent when the result said only that it failed."""
TOOL_ERROR_RETRY: Final = "tool.error.retry"
"""On every error result: ``advised``, ``not_advised`` or ``unsaid`` (the result said nothing)."""
TOOL_ERROR_RETRY_AFTER_SECONDS: Final = "tool.error.retry_after_seconds"
"""How long the error result asked the caller to wait before a retry (absent when it did not say)."""
TOOL_ERROR_RECOVERY: Final = "tool.error.recovery"
"""On every error result: the recovery path it offered: ``tool`` (another tool to call),
``existing_id`` (an object that already exists) or ``none``."""
TOOL_ERROR_EXCEPTION_TEXT: Final = "tool.error.exception_text"
"""True when an error result handed the model exception text or a stack trace (absent otherwise)."""
RETRY_ADVISED: Final = "advised"
RETRY_NOT_ADVISED: Final = "not_advised"
RETRY_UNSAID: Final = "unsaid"
RETRY_ADVICE: Final = (RETRY_ADVISED, RETRY_NOT_ADVISED, RETRY_UNSAID)
RECOVERY_TOOL: Final = "tool"
RECOVERY_EXISTING_ID: Final = "existing_id"
RECOVERY_NONE: Final = "none"
RECOVERY_PATHS: Final = (RECOVERY_TOOL, RECOVERY_EXISTING_ID, RECOVERY_NONE)
ENVELOPE_RECOVERY_TOOL: Final = "recovery_tool"
"""In an error envelope: the tool the model should call to recover (``read_state`` after a stale write)."""
ENVELOPE_EXISTING_ID: Final = "existing_id"
"""In an error envelope: the id of the object that already exists (a duplicate's original)."""
ENVELOPE_RETRY_AFTER: Final = "retry_after"
"""The retry-after key other APIs use (seconds); read beside ``retry_after_seconds``."""
ENVELOPE_RETRYABLE: Final = "retryable"
"""The retry flag other APIs use; read beside ``retry``."""
MAX_RETRY_AFTER_SECONDS: Final = 86_400.0
"""A retry-after above a day (or negative, or not finite) is not recorded: it is not advice."""

ENVELOPE_VERIFICATION_REQUIRED: Final = "verification_required"
"""In a success envelope: the caller must verify the write, ``{"tool", "arguments", "compare"}``."""
VERIFY_TOOL: Final = "tool"
VERIFY_ARGUMENTS: Final = "arguments"
VERIFY_COMPARE: Final = "compare"
TOOL_VERIFICATION_TOOL: Final = "tool.verification.tool"
"""On a call whose result asked the caller to verify it: the read tool it named."""
TOOL_VERIFICATION_COMPARE: Final = "tool.verification.compare"
"""The fields the caller is to compare (names only, never values)."""

TOOL_PLAN_NAME: Final = "tool_plan"
"""The default name of the tool-plan meta tool ``telemetry.mcp.expose_tool_plan`` registers."""
MCP_META_TOOL_PLAN: Final = "outcome-telemetry/tool_plan"
"""``_meta`` of the tool-plan meta tool in ``tools/list``: true (the audit reads it)."""
MCP_META_READS_CACHE: Final = "outcome-telemetry/reads_cache"
"""``_meta`` of a read tool whose answer comes from a cache, not the source of truth."""
PLAN_SCHEMA_ID: Final = "outcome-telemetry.tool-plan/1"
"""The ``schema`` key of the tool plan the meta tool returns."""
IDEMPOTENT_BY_READ: Final = "read"
IDEMPOTENT_BY_KEY: Final = "idempotency_key"
IDEMPOTENT_BY_VERSION: Final = "compare_and_set"
IDEMPOTENT_BY_DECLARATION: Final = "declared"
IDEMPOTENT_NOT: Final = "no"
IDEMPOTENT_HOW: Final = (IDEMPOTENT_BY_READ, IDEMPOTENT_BY_KEY, IDEMPOTENT_BY_VERSION, IDEMPOTENT_BY_DECLARATION,
                         IDEMPOTENT_NOT)
"""How a tool plan says a tool is idempotent (or that it is not)."""

# --- Forensics verdicts: what a row's evidence shows became of the harm it describes -----------
VERDICT_HAPPENED: Final = "happened"
"""The write, send, delegation or repeat was accepted: the harm is done."""
VERDICT_PREVENTED: Final = "prevented"
"""A guard refused, rolled back, deduplicated or expired it: the harm was stopped."""
VERDICT_UNKNOWN: Final = "unknown"
"""The evidence cannot tell which (the row's ``verdict_basis`` says why)."""
VERDICTS: Final = (VERDICT_HAPPENED, VERDICT_PREVENTED, VERDICT_UNKNOWN)
COLUMN_VERDICT: Final = "verdict"
COLUMN_VERDICT_BASIS: Final = "verdict_basis"
QUESTION_RETRY_TAX: Final = "retry_tax"
RETRY_TAX_WINDOW_SECONDS: Final = 1.0
"""A retry within this long of an error that gave no retry-after counts as immediate."""

# --- OpenTelemetry exception events (semantic conventions): what forensics reads of them ------
EXCEPTION_EVENT: Final = "exception"
"""The name of the span event a tracer records for an exception (``span.record_exception``)."""
EXCEPTION_TYPE: Final = "exception.type"
"""The exception event's attribute naming the exception's type: forensics takes the first
exception event's as a span's error type where the span has no ``error.type``."""
ERROR_TYPE_FROM_EVENT: Final = "exception event"
"""``error_type_source`` of a peer tool call whose error type came from its exception event."""
ERROR_TYPE_FROM_ATTRIBUTE: Final = ERROR_TYPE
"""``error_type_source`` of a peer tool call whose error type is its ``error.type`` attribute."""
