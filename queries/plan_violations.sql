-- plan_violations: plan commits that failed a postcondition, ran on an expired plan or found a binding moved, and accepted commits that changed objects outside the plan's target.
--
-- Spans with plan.id and outcome postcondition_failed, plan_expired or plan_binding_moved (the
-- guard refused); plus accepted spans with plan.outside_target_changed_count > 0 (violation
-- 'changed_outside_target': the wrong-collection repricing, not prevented).
--
-- Scope: spans are compared only with spans of the same run (run_id: gen_ai.conversation.id, else
-- the trace id); each row is one span, so no spans are paired.
--
-- Verdict: prevented for the refusals (plan_expired, plan_binding_moved, and postcondition_failed
--   told to the caller: the guard rolled the commit back); happened for changed_outside_target, and
--   for a postcondition_failed the caller was told was done (tool.silent_failure true: nothing
--   rolled back); unknown for a postcondition_failed on our span without tool.silent_failure
--   (silent_unconfirmed in spans.sql: whether it was told and rolled back is not recorded).
--
-- Columns: verdict, verdict_basis, violation, run_id, plan_id, tool_name, agent_id, outcome,
--   objects_matched, changed_count, outside_target_changed_count, binding_moved, start_time,
--   trace_id, span_id
--
-- Example: happened, changed_outside_target, plan p-12 by writer: matched 40, changed 1,200, 1,160
--   outside the target.
SELECT
    CASE WHEN outcome IN ('plan_expired', 'plan_binding_moved') THEN 'prevented'
         WHEN outcome = 'postcondition_failed' AND silent_failure THEN 'happened'
         WHEN outcome = 'postcondition_failed'
              AND silent_unconfirmed(span_format, silent_failure, transport, outcome, error_type) THEN 'unknown'
         WHEN outcome = 'postcondition_failed' THEN 'prevented'
         ELSE 'happened' END AS verdict,
    CASE WHEN outcome = 'plan_expired' THEN 'the guard refused the commit: the plan had expired'
         WHEN outcome = 'plan_binding_moved' THEN 'the guard refused the commit: what the plan bound had moved'
         WHEN outcome = 'postcondition_failed' AND silent_failure
         THEN 'the caller was told done; the postcondition failed afterwards and nothing was rolled back'
         WHEN outcome = 'postcondition_failed'
              AND silent_unconfirmed(span_format, silent_failure, transport, outcome, error_type)
         THEN 'no tool.silent_failure on the span: whether the commit was told and rolled back is not recorded'
         WHEN outcome = 'postcondition_failed'
         THEN 'the postcondition failed, the caller was told and the commit rolled back'
         ELSE 'the commit was accepted and changed objects outside the plan''s target' END AS verdict_basis,
    CASE WHEN outcome IN ('postcondition_failed', 'plan_expired', 'plan_binding_moved') THEN outcome
         ELSE 'changed_outside_target' END AS violation,
    run_id, plan_id, tool_name, agent_id, outcome, plan_objects_matched AS objects_matched,
    plan_changed_count AS changed_count,
    plan_outside_target_changed_count AS outside_target_changed_count,
    plan_binding_moved AS binding_moved, start_time, trace_id, span_id
FROM spans
WHERE plan_id IS NOT NULL
  AND (outcome IN ('postcondition_failed', 'plan_expired', 'plan_binding_moved')
       OR (coalesce(outcome, 'ok') IN ('ok', 'forced') AND coalesce(plan_outside_target_changed_count, 0) > 0))
ORDER BY start_time, span_id;
