-- guard_refusals: calls a guard refused at call time, the reason, and whether the same agent then recovered with an accepted call on the same key or task.
--
-- A refusal is a call whose tool.outcome is one of the guard refusal codes (stale version,
-- stale policy, missing constraint, duplicate request, expired plan, moved binding, in
-- progress). Its subject is the state key, else the delegating task (the parent it delegated
-- from), else the objective, else the plan, else the idempotency key. It is recovered when the
-- same agent, later in the same run, made a call (not a read) with outcome ok or forced on the
-- same subject.
-- A refusal is a prevented failure and the caller was told, so this question is a record; an
-- unrecovered refusal is the one to read (an agent that gave up, or retried blindly elsewhere).
--
-- Scope: spans are compared only with spans of the same run (run_id: gen_ai.conversation.id, else
-- the trace id); a refusal and its recovery are paired within a run.
--
-- Verdict: prevented (the guard refused the call and told its caller; recovered says whether the
--   agent then did it right).
--
-- Columns: verdict, verdict_basis, run_id, tool_name, agent_id, reason, subject_kind ('state_key' |
--   'task' | 'objective' | 'plan' | 'idempotency_key'), subject, refused_at, recovered,
--   recovered_by_tool, recovered_at, recovery_span_id, trace_id, span_id
--
-- Example: prevented, run r-17, write_state, builder-b, rejected_stale_version, state_key
--   plan/pricing-447, recovered true by write_state 0.4 ms later.
WITH subjects AS NOT MATERIALIZED (
    SELECT
        run_id, tool_name, tool_kind, agent_id, coalesce(agent_id, '') AS agent_key, outcome, trace_id, span_id,
        start_time, start_time_unix_nano AS t,
        CASE
            WHEN state_key IS NOT NULL THEN 'state_key'
            WHEN delegation_origin_task_id IS NOT NULL THEN 'task'
            WHEN objective_task_id IS NOT NULL THEN 'objective'
            WHEN plan_id IS NOT NULL THEN 'plan'
            WHEN idempotency_key_hash IS NOT NULL THEN 'idempotency_key'
        END AS subject_kind,
        coalesce(state_key, delegation_origin_task_id, objective_task_id, plan_id, idempotency_key_hash) AS subject
    FROM spans
    WHERE outcome IS NOT NULL
),
-- Refusals are few: kept whole, with a hash of (run, agent, subject) each.
refused AS MATERIALIZED (
    SELECT *, hash(run_id, agent_key, subject_kind, subject) AS h FROM subjects
    WHERE outcome IN ('rejected_stale_version', 'stale_policy', 'constraint_missing', 'duplicate_request',
                      'plan_expired', 'plan_binding_moved', 'in_progress')
),
-- Accepted calls on a subject the same agent was refused on in its run: only those can be a
-- recovery, so the accepted calls stream past the refusals' hashes (equal hashes of different
-- subjects only add calls, which the exact ASOF join below never pairs) and the ASOF join sorts a
-- few rows instead of every accepted call.
accepted AS (
    SELECT * FROM subjects
    WHERE outcome IN ('ok', 'forced') AND subject IS NOT NULL AND coalesce(tool_kind, '') <> 'read'
      AND hash(run_id, agent_key, subject_kind, subject) IN (SELECT h FROM refused)
),
-- The first accepted call after the refusal by the same agent on the same subject (ASOF: nearest later).
recovery AS (
    SELECT r.span_id AS refused_span_id, a.tool_name, a.start_time, a.span_id
    FROM refused r
    ASOF JOIN accepted a
      ON a.run_id = r.run_id AND a.agent_key = r.agent_key AND a.subject_kind = r.subject_kind
     AND a.subject = r.subject AND a.t > r.t
)
SELECT
    'prevented' AS verdict,
    CASE WHEN v.refused_span_id IS NOT NULL THEN 'the guard refused the call; the agent then made an accepted one'
         ELSE 'the guard refused the call; the agent made no accepted call on the same subject after it' END
        AS verdict_basis,
    r.run_id, r.tool_name, r.agent_id, r.outcome AS reason, r.subject_kind, r.subject,
    r.start_time AS refused_at, v.refused_span_id IS NOT NULL AS recovered,
    v.tool_name AS recovered_by_tool, v.start_time AS recovered_at, v.span_id AS recovery_span_id,
    r.trace_id, r.span_id
FROM refused r
LEFT JOIN recovery v ON v.refused_span_id = r.span_id
ORDER BY recovered, refused_at, run_id, tool_name;
