-- plan_violations: plan commits that failed a postcondition, ran on an expired plan or found a binding moved, and accepted commits that changed objects outside the plan's target.
--
-- Spans with plan.id and outcome postcondition_failed, plan_expired or plan_binding_moved (the
-- guard refused); plus accepted spans with plan.outside_target_changed_count > 0 (violation
-- 'changed_outside_target': the wrong-collection repricing, not prevented).
--
-- Scope: spans are compared only with spans of the same run (run_id: gen_ai.conversation.id, else
-- the trace id); each row is one span, so no spans are paired.
--
-- Columns: violation, run_id, plan_id, tool_name, agent_id, outcome, objects_matched,
--   changed_count, outside_target_changed_count, binding_moved, start_time, trace_id, span_id
--
-- Example: changed_outside_target, plan p-12 by writer: matched 40, changed 1,200, 1,160 outside
--   the target.
SELECT
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
