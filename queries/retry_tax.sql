-- retry_tax: immediate retries after rate_limited (or after an error that said not to retry): the same agent calling the same tool again before the wait it was given had passed, a retry storm.
--
-- A call is an immediate retry when the previous call of the same tool by the same agent in the
-- same run ended with outcome rate_limited, or with an error result that said not to retry
-- (tool.error.retry = 'not_advised'), and the call started before that error's retry-after had
-- passed (tool.error.retry_after_seconds), or within 1 second of it when the error gave none
-- (RETRY_TAX_WINDOW_SECONDS). Consecutive immediate retries are one storm: one row each, from the
-- error that started it. Each retry costs a call, a quota unit and the model's turn, and a storm
-- keeps the rate limit tripped.
-- Verdict: 'prevented' when a guard refused every retry or answered it from a stored outcome (it
-- never reached the work); 'unknown' when a retry ran in another service closer in time to the
-- error than their clocks' detected skew (which came first is not known); else 'happened'.
--
-- Scope: calls are paired only with calls of the same run (run_id: gen_ai.conversation.id, else
-- the trace id), agent and tool; other instrumentations' tool calls count too (their outcome
-- comes from the recorded result; they carry no retry advice, so only rate_limited starts a storm).
--
-- Columns: verdict, verdict_basis, run_id, agent_id, tool_name, trigger_outcome, error_code,
--   retry_advice, retry_after_seconds, retries (immediate retries in the storm), outcomes (of the
--   retries), shortest_wait_ms, first_at, last_at, ended_with (outcome of the storm's last call),
--   trace_id, span_id (the error that started it), span_ids (the retries, in order)
--
-- Example: run r-9, agent billing, legacy_fetch_rates, rate_limited, no retry-after, 5 retries
--   within 0.2 ms each, ended with rate_limited: happened.
WITH tool_calls AS NOT MATERIALIZED (
    SELECT run_id, agent_id, coalesce(agent_id, '') AS agent_key, tool_name, outcome, service_name, deduplicated,
           start_time, start_time_unix_nano AS t, end_time_unix_nano AS t_end, trace_id, span_id,
           attribute_keys, attribute_values
    FROM spans
    WHERE tool_name IS NOT NULL AND outcome IS NOT NULL
),
-- The (run, agent, tool) series an error that asks for patience started; only their calls are
-- read further (the retry advice of every other call is never looked up). Two selects, not one
-- with OR: the advice alone is a condition on the span's own attributes, read where they are
-- stored, while an OR with the outcome (another instrumentation's comes from the span-format
-- layer) would be checked on every tool call after the join that brings it.
triggered AS (
    SELECT run_id, agent_key, tool_name FROM tool_calls WHERE outcome = 'rate_limited'
    UNION
    SELECT run_id, agent_key, tool_name FROM tool_calls
    WHERE attribute_values[list_position(attribute_keys, 'tool.error.retry')] = 'not_advised'
),
calls AS (
    SELECT c.run_id, c.agent_id, c.agent_key, c.tool_name, c.outcome, c.service_name, c.deduplicated, c.start_time,
           c.t, c.t_end, c.trace_id, c.span_id,
           c.attribute_values[list_position(c.attribute_keys, 'tool.error.retry')] AS retry_advice,
           TRY_CAST(c.attribute_values[list_position(c.attribute_keys, 'tool.error.retry_after_seconds')] AS DOUBLE)
               AS retry_after_seconds,
           c.attribute_values[list_position(c.attribute_keys, 'tool.error.code')] AS error_code
    FROM tool_calls c SEMI JOIN triggered g
      ON g.run_id = c.run_id AND g.agent_key = c.agent_key AND g.tool_name = c.tool_name
),
ordered AS (
    SELECT c.*,
           lag(c.outcome) OVER w AS prev_outcome, lag(c.retry_advice) OVER w AS prev_advice,
           lag(c.retry_after_seconds) OVER w AS prev_after, lag(c.t_end) OVER w AS prev_end,
           lag(c.service_name) OVER w AS prev_service
    FROM calls c
    WINDOW w AS (PARTITION BY c.run_id, c.agent_key, c.tool_name ORDER BY c.t, c.span_id)
),
judged AS (
    SELECT *,
           coalesce((prev_outcome = 'rate_limited' OR prev_advice = 'not_advised')
                    AND CAST(t AS HUGEINT) - CAST(prev_end AS HUGEINT)
                        < CAST(coalesce(prev_after, 1.0) * 1e9 AS HUGEINT), false) AS immediate,
           (CAST(t AS HUGEINT) - CAST(prev_end AS HUGEINT)) / 1e6 AS wait_ms
    FROM ordered
),
-- A storm: the error that started it and the immediate retries after it (a running count of the
-- calls that were not immediate retries numbers them).
stormed AS (
    SELECT *, sum(CASE WHEN immediate THEN 0 ELSE 1 END)
                  OVER (PARTITION BY run_id, agent_key, tool_name ORDER BY t, span_id ROWS UNBOUNDED PRECEDING) AS storm
    FROM judged
),
storms AS (
    SELECT run_id, agent_key, tool_name, storm,
           arg_min(agent_id, t) AS agent_id,
           arg_min(outcome, t) AS trigger_outcome,
           arg_min(error_code, t) AS error_code,
           arg_min(coalesce(retry_advice, 'unsaid'), t) AS retry_advice,
           arg_min(retry_after_seconds, t) AS retry_after_seconds,
           count(*) FILTER (WHERE immediate) AS retries,
           list_sort(list_distinct(list(outcome) FILTER (WHERE immediate))) AS outcomes,
           min(wait_ms) FILTER (WHERE immediate) AS shortest_wait_ms,
           min(start_time) AS first_at, max(start_time) AS last_at,
           arg_max(outcome, t) AS ended_with,
           bool_and(outcome IN ('rejected_stale_version', 'stale_policy', 'constraint_missing', 'duplicate_request',
                                'plan_expired', 'plan_binding_moved', 'in_progress') OR deduplicated)
               FILTER (WHERE immediate) AS all_refused,
           bool_or(order_uncertain(prev_service, prev_end, service_name, t)) FILTER (WHERE immediate) AS uncertain,
           arg_min(trace_id, t) AS trace_id, arg_min(span_id, t) AS span_id,
           list(span_id ORDER BY t, span_id) FILTER (WHERE immediate) AS span_ids
    FROM stormed
    GROUP BY run_id, agent_key, tool_name, storm
    HAVING count(*) FILTER (WHERE immediate) > 0
)
SELECT
    CASE WHEN all_refused THEN 'prevented' WHEN uncertain THEN 'unknown' ELSE 'happened' END AS verdict,
    CASE
        WHEN all_refused THEN 'a guard refused every retry or answered it from a stored outcome'
        WHEN uncertain THEN 'a retry ran in another service closer to the error than their clock skew'
        WHEN retry_advice = 'not_advised' THEN 'the error said not to retry, and the retries reached the tool'
        WHEN retry_after_seconds IS NOT NULL THEN 'the retries reached the tool before the retry-after had passed'
        ELSE 'the retries reached the tool within 1 s of an error that gave no retry-after'
    END AS verdict_basis,
    run_id, agent_id, tool_name, trigger_outcome, error_code, retry_advice, retry_after_seconds, retries, outcomes,
    round(shortest_wait_ms, 3) AS shortest_wait_ms, first_at, last_at, ended_with,
    trace_id, span_id, span_ids
FROM storms
ORDER BY retries DESC, run_id, tool_name, first_at;
