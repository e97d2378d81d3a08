-- repeated_executions: the same tool (a write, a send, or of undecided kind) called more than once in one run with identical arguments and no idempotency key: the double refund.
--
-- Calls are the same when their arguments hash alike (arguments_hash: the recorded arguments
-- parsed and dumped again with sorted keys, so key order does not matter). Only tools whose kind
-- is write, send or undecided are compared (a read repeated is harmless), and only calls without
-- an idempotency key (no idempotency.key_hash, no key among the arguments: a keyed retry is
-- idempotency_conflicts' business, and whether the tool deduplicated it cannot be told from its
-- arguments). Every call counts, whatever its outcome: a tool that reported a failure may still
-- have moved the money, and nothing here read the state back. A span without recorded arguments
-- (content capture off; our decorator records only the arguments it is told to) has no hash and
-- is not compared (the evidence counts them).
--
-- Scope: spans are compared only with spans of the same run (run_id: the format's conversation
-- or session id, else the trace id); calls are grouped within a run.
--
-- Verdict: happened when two or more of the calls were accepted (outcome ok or forced); prevented
--   when at most one was and a guard refused every other; unknown otherwise (a call that reported
--   a failure, or recorded no outcome, may still have acted: nothing read the state back).
--
-- Columns: verdict, verdict_basis, run_id, span_format, tool_name, tool_kind, tool_kind_source,
--   arguments_hash, calls, outcomes (the distinct outcomes, NULL for none), agents, first_at,
--   last_at, trace_id (of the first call), span_ids (in call order), arguments (only with
--   --show-content: the first call's recorded arguments, cut to 1,000 characters)
--
-- Example: unknown, run session-17, openinference, refund, kind undecided, arguments 7fe4..., 2
--   calls, outcomes ['refund_window_closed'].
-- The calls that can be repeated (h: a hash of run, tool and arguments); only the groups with more
-- than one call (found by h first: equal hashes of different groups only add calls, which the exact
-- grouping below keeps apart) are aggregated in full.
WITH calls AS NOT MATERIALIZED (
    SELECT run_id, span_format, tool_name, tool_kind, tool_kind_source, arguments_hash, outcome, agent_id,
           start_time, start_time_unix_nano AS t, trace_id, span_id, arguments_shown,
           hash(run_id, tool_name, arguments_hash) AS h
    FROM spans
    WHERE arguments_hash IS NOT NULL AND tool_name IS NOT NULL
      AND (tool_kind IS NULL OR tool_kind IN ('write', 'send'))
      AND idempotency_key_hash IS NULL AND NOT arguments_keyed AND NOT deduplicated
),
repeated AS (
    SELECT h FROM calls GROUP BY h HAVING count(*) > 1
),
grouped AS (
    SELECT
        run_id, any_value(span_format) AS span_format, tool_name, any_value(tool_kind) AS tool_kind,
        any_value(tool_kind_source) AS tool_kind_source, arguments_hash, count(*) AS calls,
        list_sort(list_distinct(list(outcome))) AS outcomes, list_sort(list_distinct(list(agent_id))) AS agents,
        min(start_time) AS first_at, max(start_time) AS last_at, arg_min(trace_id, t) AS trace_id,
        list(span_id ORDER BY t, span_id) AS span_ids, arg_min(arguments_shown, t) AS arguments,
        count(*) FILTER (WHERE outcome IN ('ok', 'forced')) AS accepted_calls,
        count(*) FILTER (WHERE outcome IN ('rejected_stale_version', 'stale_policy', 'constraint_missing',
                                           'duplicate_request', 'plan_expired', 'plan_binding_moved',
                                           'in_progress')) AS refused_calls
    FROM calls
    WHERE h IN (SELECT h FROM repeated)
    GROUP BY run_id, tool_name, arguments_hash
    HAVING count(*) > 1
)
SELECT
    CASE WHEN accepted_calls >= 2 THEN 'happened'
         WHEN accepted_calls + refused_calls = calls THEN 'prevented'
         ELSE 'unknown' END AS verdict,
    CASE WHEN accepted_calls >= 2 THEN 'the same call was accepted ' || accepted_calls || ' times'
         WHEN accepted_calls + refused_calls = calls THEN 'a guard refused every repeat'
         ELSE 'at most one call was accepted; the others reported a failure or no outcome, and may still have acted'
    END AS verdict_basis,
    * EXCLUDE (accepted_calls, refused_calls)
FROM grouped
ORDER BY calls DESC, run_id, tool_name, arguments_hash;
