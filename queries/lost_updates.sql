-- lost_updates: accepted writes of one key that derived from the same baseline version, and unversioned writes that followed a read of an older version.
--
-- Two kinds of row. 'same_baseline': a second (third, ...) accepted write of a key whose
-- baseline equals an earlier accepted write's baseline, so the earlier write was overwritten
-- unseen (a guarded store must show none). 'stale_baseline': an accepted unguarded write (no
-- state.version.expected) whose baseline, the version that agent last read of the key earlier
-- in the run, is not the latest version observed of the key before the write.
-- The baseline is state.version.expected, else that last read.
--
-- Columns: kind, state_key, baseline_version, newer_version (for stale_baseline: the version the
--   key had moved to; for same_baseline: the overwritten write's state.version.written), run_id,
--   agent_id, write_time, trace_id, span_id, earlier_run_id, earlier_agent_id, earlier_span_id
--
-- Example: same_baseline, key cart/9, baseline v7: planner's write at 10:02 and writer's at
--   10:03 both derived from v7; the planner's update is lost.
WITH reads AS (
    SELECT run_id, agent_id, state_key, state_version_read AS version, start_time_unix_nano AS t
    FROM spans
    WHERE tool_kind = 'read' AND state_key IS NOT NULL AND state_version_read IS NOT NULL
),
accepted AS (
    SELECT
        w.run_id, w.agent_id, w.state_key, w.trace_id, w.span_id, w.start_time,
        w.start_time_unix_nano AS t, w.state_version_written, w.state_version_expected,
        coalesce(w.state_version_expected, (
            SELECT r.version FROM reads r
            WHERE r.run_id = w.run_id AND r.state_key = w.state_key
              AND r.agent_id IS NOT DISTINCT FROM w.agent_id AND r.t < w.start_time_unix_nano
            ORDER BY r.t DESC LIMIT 1)) AS baseline
    FROM spans w
    WHERE w.tool_kind = 'write' AND w.state_key IS NOT NULL AND w.outcome IN ('ok', 'forced')
),
observations AS (
    SELECT state_key, version, t FROM reads
    UNION ALL
    SELECT state_key, state_version_written, t FROM accepted WHERE state_version_written IS NOT NULL
),
ranked AS (
    SELECT *,
        first_value(span_id) OVER w AS first_span_id,
        first_value(run_id) OVER w AS first_run_id,
        first_value(agent_id) OVER w AS first_agent_id,
        first_value(state_version_written) OVER w AS first_written,
        row_number() OVER w AS n
    FROM accepted
    WHERE baseline IS NOT NULL
    WINDOW w AS (PARTITION BY state_key, baseline ORDER BY t, span_id)
),
same_baseline AS (
    SELECT 'same_baseline' AS kind, state_key, baseline AS baseline_version,
           first_written AS newer_version, run_id, agent_id, start_time AS write_time, trace_id,
           span_id, first_run_id AS earlier_run_id, first_agent_id AS earlier_agent_id,
           first_span_id AS earlier_span_id
    FROM ranked
    WHERE n > 1
),
stale_baseline AS (
    SELECT 'stale_baseline' AS kind, a.state_key, a.baseline AS baseline_version,
           latest.version AS newer_version, a.run_id, a.agent_id, a.start_time AS write_time,
           a.trace_id, a.span_id, NULL AS earlier_run_id, NULL AS earlier_agent_id,
           NULL AS earlier_span_id
    FROM accepted a,
         LATERAL (SELECT o.version FROM observations o
                  WHERE o.state_key = a.state_key AND o.t < a.t
                  ORDER BY o.t DESC LIMIT 1) latest
    WHERE a.state_version_expected IS NULL AND a.baseline IS NOT NULL
      AND latest.version <> a.baseline
)
SELECT * FROM same_baseline
UNION ALL
SELECT * FROM stale_baseline
ORDER BY write_time, state_key, kind;
