-- stale_holders: agents that acted after the objective they held had been superseded.
--
-- An agent holds the objective.version its latest get_objective (a read span with
-- objective.task_id and objective.version) returned in its run. It acts with any write, send or
-- delegate span. It is stale when, at the action, a newer version had been published or
-- superseded (objective.version on an accepted, non-read, non-send span of that objective). One row
-- per agent, objective and held version, with the first stale action and how many there were;
-- accepted_stale_actions counts those that went through (a guard's refusal, e.g. stale_policy, is
-- a stale action that was prevented). Rows with accepted stale actions come first.
--
-- Scope: spans are compared only with spans of the same run (run_id: gen_ai.conversation.id, else
-- the trace id); an action is judged against the publications of its own run.
--
-- Verdict: happened when a stale action went through (accepted_stale_actions > 0); prevented when
--   a guard refused every stale action; unknown when each accepted one is closer to the publication
--   than the clock skew (the held version may still have been current), or when none went through
--   but some failed without a refusal (whether they acted is not recorded).
--
-- Columns: verdict, verdict_basis, run_id, agent_id, objective_task_id, held_version,
--   current_version, superseded_at, first_stale_action_at, first_stale_tool, stale_actions,
--   accepted_stale_actions, order_uncertain (the first stale action and the publication that
--   superseded the held version are closer than the detected clock skew between their services),
--   trace_id, span_id (first action)
--
-- Example: happened, run r-5, agent writer held objective T9 v1; v2 was published at 10:04; writer
--   then called send_email at 10:06 (3 stale actions in all).
WITH publications AS (
    SELECT run_id, objective_task_id, objective_version, start_time_unix_nano AS t, start_time,
           service_name AS p_service
    FROM spans
    WHERE objective_task_id IS NOT NULL AND objective_version IS NOT NULL
      AND coalesce(tool_kind, '') NOT IN ('read', 'send') AND coalesce(outcome, 'ok') = 'ok'
),
holdings AS (
    SELECT run_id, agent_id, objective_task_id, objective_version, start_time_unix_nano AS t
    FROM spans
    WHERE tool_kind = 'read' AND objective_task_id IS NOT NULL AND objective_version IS NOT NULL
      AND agent_id IS NOT NULL
),
held AS (
    SELECT DISTINCT run_id, agent_id, objective_task_id FROM holdings
),
actions AS (
    SELECT a.run_id, a.agent_id, a.tool_name, a.outcome, a.start_time, a.start_time_unix_nano AS t,
           a.trace_id, a.span_id, h.objective_task_id, a.service_name
    FROM spans a
    JOIN held h ON h.run_id = a.run_id AND h.agent_id = a.agent_id
    WHERE a.tool_kind IN ('write', 'send', 'delegate')
),
-- What the agent held at the action: its latest get_objective of that objective before it.
holding AS (
    SELECT a.*, h.objective_version AS held_version
    FROM actions a
    ASOF JOIN holdings h
      ON h.run_id = a.run_id AND h.agent_id = a.agent_id AND h.objective_task_id = a.objective_task_id
     AND a.t > h.t
),
judged AS (
    SELECT x.*, p.objective_version AS current_version, p.start_time AS superseded_at,
           order_uncertain(x.service_name, x.t, p.p_service, p.t) AS uncertain
    FROM holding x
    ASOF JOIN publications p ON p.run_id = x.run_id AND p.objective_task_id = x.objective_task_id AND x.t > p.t
    WHERE p.objective_version <> x.held_version
),
grouped AS (
    SELECT
        run_id, agent_id, objective_task_id, held_version,
        arg_min(current_version, t) AS current_version, arg_min(superseded_at, t) AS superseded_at,
        min(start_time) AS first_stale_action_at, arg_min(tool_name, t) AS first_stale_tool,
        count(*) AS stale_actions,
        count(*) FILTER (WHERE coalesce(outcome, 'ok') IN ('ok', 'forced')) AS accepted_stale_actions,
        arg_min(uncertain, t) AS order_uncertain,
        arg_min(trace_id, t) AS trace_id, arg_min(span_id, t) AS span_id,
        count(*) FILTER (WHERE outcome IN ('rejected_stale_version', 'stale_policy', 'constraint_missing',
                                           'duplicate_request', 'plan_expired', 'plan_binding_moved',
                                           'in_progress')) AS refused_stale_actions,
        coalesce(bool_and(uncertain) FILTER (WHERE coalesce(outcome, 'ok') IN ('ok', 'forced')), false)
            AS accepted_uncertain
    FROM judged
    GROUP BY run_id, agent_id, objective_task_id, held_version
)
SELECT
    CASE WHEN accepted_stale_actions > 0 AND NOT accepted_uncertain THEN 'happened'
         WHEN accepted_stale_actions = 0 AND refused_stale_actions = stale_actions THEN 'prevented'
         ELSE 'unknown' END AS verdict,
    CASE WHEN accepted_stale_actions > 0 AND NOT accepted_uncertain
         THEN 'the agent acted on a superseded objective and the action went through'
         WHEN accepted_stale_actions > 0
         THEN 'each accepted action is closer to the publication than the clock skew: the held version may '
              || 'still have been current'
         WHEN refused_stale_actions = stale_actions THEN 'a guard refused every stale action'
         ELSE 'the stale actions failed without a refusal: whether they acted is not recorded' END AS verdict_basis,
    * EXCLUDE (refused_stale_actions, accepted_uncertain)
FROM grouped
ORDER BY accepted_stale_actions DESC, stale_actions DESC, first_stale_action_at, run_id, agent_id;
