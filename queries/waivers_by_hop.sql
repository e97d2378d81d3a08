-- waivers_by_hop: every constraint waiver, with its reason, hop and the agent that waived it.
--
-- One row per constraint id in delegation.constraints.waived on an accepted delegation span;
-- the reason is the element at the same position of delegation.constraints.waiver_reasons
-- (NULL when the span recorded fewer reasons than waivers).
--
-- Scope: spans are compared only with spans of the same run (run_id: gen_ai.conversation.id, else
-- the trace id); each row is one span of a run's delegation chain.
--
-- Verdict: happened (a record: the delegation was accepted without the constraint, by a reasoned
--   decision; records are not incidents and never counted in the headline).
--
-- Columns: verdict, verdict_basis, run_id, root_task_id, hop, task_id, origin_task_id, agent_id,
--   constraint_id, reason, tool_name, delegation_time, trace_id, span_id
--
-- Example: happened, run r-3, root T1, hop 2, task T1.1.2, agent planner waived C2 because
--   "customer approved by phone".
SELECT
    'happened' AS verdict, 'the delegation was accepted with the constraint waived, for the reason given'
        AS verdict_basis,
    run_id, delegation_root_task_id AS root_task_id, delegation_hop AS hop,
    delegation_task_id AS task_id, delegation_origin_task_id AS origin_task_id, agent_id,
    constraints_waived[i] AS constraint_id, waiver_reasons[i] AS reason, tool_name,
    start_time AS delegation_time, trace_id, span_id
FROM (
    SELECT *, unnest(range(1, len(constraints_waived) + 1)) AS i
    FROM spans
    WHERE delegation_task_id IS NOT NULL AND len(constraints_waived) > 0
      AND coalesce(outcome, 'ok') = 'ok'
)
ORDER BY run_id, root_task_id, hop, task_id, constraint_id;
