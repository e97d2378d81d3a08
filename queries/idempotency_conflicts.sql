-- idempotency_conflicts: idempotency keys reused with a different payload, and replays the guard deduplicated.
--
-- Four kinds of row. 'conflict_refused': outcome duplicate_request (the guard refused a reused
-- key with another payload). 'conflict_accepted': an accepted call whose key an earlier accepted
-- call used with a different payload hash (no guard stopped it: the payload was applied twice or
-- differently). 'repeated_execution': an accepted call repeating an earlier accepted call's key
-- and payload without being deduplicated (a retry that ran twice: the double charge).
-- 'replay': tool.deduplicated = true (the guard returned the original result).
--
-- Scope: spans are compared only with spans of the same run (run_id: gen_ai.conversation.id, else
-- the trace id); keys are compared within a run (a key reused in another run is a new request).
--
-- Verdict: prevented for 'conflict_refused' (refused) and 'replay' (deduplicated: it ran once);
--   happened for 'conflict_accepted' and 'repeated_execution' (the second call ran).
--
-- Columns: verdict, verdict_basis, kind, idempotency_key_hash, payload_hash, original_payload_hash,
--   original_id, run_id, agent_id, tool_name, outcome, start_time, trace_id, span_id
--
-- Example: prevented, conflict_refused, key 9f2c..., payload 77aa... against original payload
--   1b3e... (original_id call-118), run r-4, agent billing, send_refund.
-- Spans that can be a row: calls with a key, refusals and replays (h: a hash of run and key).
WITH idem AS (
    SELECT run_id, idempotency_key_hash, idempotency_payload_hash, idempotency_original_id, agent_id,
           tool_name, outcome, start_time, start_time_unix_nano, trace_id, span_id, deduplicated,
           hash(run_id, idempotency_key_hash) AS h,
           idempotency_key_hash IS NOT NULL AND coalesce(outcome, 'ok') = 'ok' AND NOT deduplicated AS is_call
    FROM spans
    WHERE idempotency_key_hash IS NOT NULL OR outcome = 'duplicate_request' OR deduplicated
),
-- Keys whose first payload matters: used by more than one accepted call (a key's first call
-- never conflicts with itself), or named by a refusal or a replay. Equal hashes of different keys
-- only add whole keys, whose rows the window below numbers exactly as before.
needed AS (
    SELECT h FROM idem WHERE is_call GROUP BY h HAVING count(*) > 1
    UNION
    SELECT h FROM idem WHERE outcome = 'duplicate_request' OR deduplicated
),
keyed AS (
    SELECT *,
        first_value(idempotency_payload_hash) OVER w AS first_payload,
        row_number() OVER w AS n
    FROM idem
    WHERE is_call AND h IN (SELECT h FROM needed)
    WINDOW w AS (PARTITION BY run_id, idempotency_key_hash ORDER BY start_time_unix_nano, span_id)
),
firsts AS (
    SELECT run_id, idempotency_key_hash, any_value(first_payload) AS first_payload
    FROM keyed GROUP BY run_id, idempotency_key_hash
)
SELECT
    CASE WHEN kind IN ('conflict_refused', 'replay') THEN 'prevented' ELSE 'happened' END AS verdict,
    CASE kind WHEN 'conflict_refused' THEN 'the guard refused the reused key with another payload (duplicate_request)'
              WHEN 'replay' THEN 'the guard deduplicated the retry: it returned the original result, nothing ran again'
              WHEN 'conflict_accepted' THEN 'the reused key was accepted with another payload: applied twice or differently'
              ELSE 'the retry was accepted and ran again: the same key and payload executed twice' END AS verdict_basis,
    *
FROM (
    SELECT 'conflict_refused' AS kind, s.idempotency_key_hash, s.idempotency_payload_hash AS payload_hash,
           f.first_payload AS original_payload_hash, s.idempotency_original_id AS original_id, s.run_id,
           s.agent_id, s.tool_name, s.outcome, s.start_time, s.trace_id, s.span_id
    FROM idem s LEFT JOIN firsts f USING (run_id, idempotency_key_hash)
    WHERE s.outcome = 'duplicate_request'
    UNION ALL
    SELECT 'conflict_accepted', idempotency_key_hash, idempotency_payload_hash, first_payload,
           idempotency_original_id, run_id, agent_id, tool_name, outcome, start_time, trace_id, span_id
    FROM keyed
    WHERE idempotency_payload_hash IS DISTINCT FROM first_payload
    UNION ALL
    SELECT 'repeated_execution', idempotency_key_hash, idempotency_payload_hash, first_payload,
           idempotency_original_id, run_id, agent_id, tool_name, outcome, start_time, trace_id, span_id
    FROM keyed
    WHERE n > 1 AND idempotency_payload_hash IS NOT DISTINCT FROM first_payload
    UNION ALL
    SELECT 'replay', s.idempotency_key_hash, s.idempotency_payload_hash, f.first_payload,
           s.idempotency_original_id, s.run_id, s.agent_id, s.tool_name, s.outcome, s.start_time,
           s.trace_id, s.span_id
    FROM idem s LEFT JOIN firsts f USING (run_id, idempotency_key_hash)
    WHERE s.deduplicated
)
ORDER BY kind, start_time, span_id;
