-- lost_updates: accepted writes of one key in a run that derived from the same baseline version, and unversioned writes that followed a read of an older version.
--
-- Two kinds of row, both within one crew run (key names and sentinel versions such as "absent"
-- repeat across runs and stores, so comparing across runs would pair unrelated writes).
-- 'same_baseline': a second (third, ...) accepted write of a key whose baseline equals an earlier
-- accepted write's baseline in the run, so the earlier write was overwritten unseen (a guarded
-- store must show none). 'stale_baseline': an accepted unguarded write (no
-- state.version.expected) whose baseline, the version that agent last read of the key earlier
-- in the run, is not the latest version observed of the key in the run before the write.
-- The baseline is state.version.expected, else that last read.
--
-- Verdict: happened (the write was accepted: the earlier change is lost); unknown when
--   order_uncertain (which write came first is within the clock skew, so the loss is not known).
--
-- Scope: spans are compared only with spans of the same run (run_id: gen_ai.conversation.id, else
-- the trace id); writes and reads are paired within a run.
--
-- Columns: verdict, verdict_basis, kind, state_key, baseline_version, newer_version (for
--   stale_baseline: the version the key had moved to; for same_baseline: the overwritten write's
--   state.version.written), run_id, agent_id, write_time, trace_id, span_id, earlier_run_id,
--   earlier_agent_id, earlier_span_id, order_uncertain (the write and the write or observation it
--   is judged against are closer than the detected clock skew between their services)
--
-- Example: happened, same_baseline, key cart/9, baseline v7: planner's write at 10:02 and writer's
--   at 10:03 both derived from v7; the planner's update is lost.
WITH writes AS MATERIALIZED (
    SELECT run_id, agent_id, coalesce(agent_id, '') AS agent_key, state_key, trace_id, span_id,
           start_time, start_time_unix_nano AS t, state_version_written, state_version_expected, service_name
    FROM spans
    WHERE tool_kind = 'write' AND state_key IS NOT NULL AND outcome IN ('ok', 'forced')
),
unguarded AS (
    SELECT * FROM writes WHERE state_version_expected IS NULL
),
-- Only the keys an unguarded write touched need the (sorting) ASOF joins below.
unguarded_keys AS (
    SELECT DISTINCT run_id, state_key FROM unguarded
),
-- Reads are needed only for those keys (an unguarded write's baseline and what it is judged against).
reads AS (
    SELECT s.run_id, coalesce(s.agent_id, '') AS agent_key, s.state_key, s.state_version_read AS version,
           s.start_time_unix_nano AS t, s.service_name
    FROM spans s SEMI JOIN unguarded_keys k ON k.run_id = s.run_id AND k.state_key = s.state_key
    WHERE s.tool_kind = 'read' AND s.state_key IS NOT NULL AND s.state_version_read IS NOT NULL
),
-- An unguarded write's baseline: the writer's latest read of the key earlier in the run.
baselined AS MATERIALIZED (
    SELECT w.*, r.version AS baseline
    FROM unguarded w
    ASOF LEFT JOIN reads r
      ON r.run_id = w.run_id AND r.state_key = w.state_key AND r.agent_key = w.agent_key AND w.t > r.t
),
-- The baseline: the expected version, else that last read (a view over the writes kept above).
accepted AS NOT MATERIALIZED (
    SELECT *, state_version_expected AS baseline FROM writes WHERE state_version_expected IS NOT NULL
    UNION ALL BY NAME
    SELECT * FROM baselined
),
observations AS (
    SELECT run_id, state_key, version, t, service_name FROM reads
    UNION ALL
    SELECT run_id, state_key, state_version_written, t, service_name FROM writes
    SEMI JOIN unguarded_keys k ON k.run_id = writes.run_id AND k.state_key = writes.state_key
    WHERE state_version_written IS NOT NULL
),
-- Keys whose baseline more than one accepted write used, with the first of those writes. The
-- writes are first narrowed by a hash of (run, key, baseline): equal hashes of different groups
-- only add candidates, which the exact grouping then drops, so no group is missed or merged.
shared_hashes AS (
    SELECT hash(run_id, state_key, baseline) AS h FROM accepted WHERE baseline IS NOT NULL
    GROUP BY h HAVING count(*) > 1
),
shared AS (
    SELECT a.run_id, a.state_key, a.baseline, arg_min(a.span_id, a.t) AS first_span_id,
           arg_min(a.run_id, a.t) AS first_run_id, arg_min(a.agent_id, a.t) AS first_agent_id,
           arg_min(a.state_version_written, a.t) AS first_written, min(a.t) AS first_t,
           arg_min(a.service_name, a.t) AS first_service
    FROM accepted a
    WHERE a.baseline IS NOT NULL AND hash(a.run_id, a.state_key, a.baseline) IN (SELECT h FROM shared_hashes)
    GROUP BY a.run_id, a.state_key, a.baseline
    HAVING count(*) > 1
),
same_baseline AS (
    SELECT 'same_baseline' AS kind, a.state_key, a.baseline AS baseline_version,
           s.first_written AS newer_version, a.run_id, a.agent_id, a.start_time AS write_time,
           a.trace_id, a.span_id, s.first_run_id AS earlier_run_id,
           s.first_agent_id AS earlier_agent_id, s.first_span_id AS earlier_span_id,
           order_uncertain(a.service_name, a.t, s.first_service, s.first_t) AS order_uncertain
    FROM accepted a
    JOIN shared s ON s.run_id = a.run_id AND s.state_key = a.state_key AND s.baseline = a.baseline
    WHERE a.span_id <> s.first_span_id
),
stale_baseline AS (
    SELECT 'stale_baseline' AS kind, a.state_key, a.baseline AS baseline_version,
           o.version AS newer_version, a.run_id, a.agent_id, a.start_time AS write_time,
           a.trace_id, a.span_id, NULL AS earlier_run_id, NULL AS earlier_agent_id,
           NULL AS earlier_span_id, order_uncertain(a.service_name, a.t, o.service_name, o.t) AS order_uncertain
    FROM (SELECT * FROM baselined WHERE baseline IS NOT NULL) a
    ASOF JOIN observations o ON o.run_id = a.run_id AND o.state_key = a.state_key AND a.t > o.t
    WHERE o.version <> a.baseline
)
SELECT
    CASE WHEN order_uncertain THEN 'unknown' ELSE 'happened' END AS verdict,
    CASE WHEN order_uncertain THEN 'the writes are closer than the clock skew between their services: '
                                   || 'which came first is not known'
         WHEN kind = 'same_baseline' THEN 'the write was accepted over an earlier write from the same baseline'
         ELSE 'the unguarded write was accepted on a version the key had moved past' END AS verdict_basis,
    *
FROM (SELECT * FROM same_baseline UNION ALL SELECT * FROM stale_baseline)
ORDER BY write_time, state_key, kind;
