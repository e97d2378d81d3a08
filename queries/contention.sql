-- contention: writes refused as stale per key per minute, the early signal that contention is growing.
--
-- For every key and one-minute bucket with at least one rejected_stale_version write: how many
-- writes were attempted, how many refused, the ratio, how many agents and runs competed, and the
-- change against the same key's previous bucket with rejections. Worst first.
--
-- Scope: spans are compared only with spans of the same run (run_id: gen_ai.conversation.id, else
-- the trace id); writes are counted per key and minute across runs, never paired across them.
--
-- Verdict: prevented (every row counts writes the guard refused as stale: the contention is the
--   warning, the refused writes did not go through).
--
-- Columns: verdict, verdict_basis, state_key, bucket_start, writes, rejected, rejected_ratio,
--   agents, runs, rejected_change (NULL for a key's first bucket)
--
-- Example: prevented, key queue/head, 10:05: 30 writes, 12 rejected (0.40) by 4 agents in 2 runs,
--   rejected_change +9.
WITH writes AS (
    SELECT state_key, time_bucket(INTERVAL 1 MINUTE, CAST(start_time AS TIMESTAMP)) AS bucket_start,
           outcome, agent_id, run_id
    FROM spans
    WHERE tool_kind = 'write' AND state_key IS NOT NULL
),
-- Only buckets with a rejection are reported (and compared with each other), so only their writes
-- are counted.
rejecting AS (
    SELECT DISTINCT state_key, bucket_start FROM writes WHERE outcome = 'rejected_stale_version'
),
per_bucket AS (
    SELECT
        state_key, bucket_start, count(*) AS writes,
        count(*) FILTER (WHERE outcome = 'rejected_stale_version') AS rejected,
        count(DISTINCT agent_id) AS agents, count(DISTINCT run_id) AS runs
    FROM writes SEMI JOIN rejecting USING (state_key, bucket_start)
    GROUP BY ALL
)
SELECT
    'prevented' AS verdict,
    'the guard refused the stale writes (rejected_stale_version); agents are racing on the key' AS verdict_basis,
    state_key, bucket_start, writes, rejected, round(rejected / writes, 3) AS rejected_ratio,
    agents, runs,
    rejected - lag(rejected) OVER (PARTITION BY state_key ORDER BY bucket_start) AS rejected_change
FROM per_bucket
WHERE rejected > 0
ORDER BY rejected DESC, rejected_ratio DESC, state_key, bucket_start;
