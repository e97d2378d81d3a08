-- divergent_reads: two agents in one run read the same state key at different versions, and one then wrote the key expecting the version it had read.
--
-- A write's baseline is its state.version.expected (guarded write) or, for a legacy unguarded
-- write, the version that agent last read of that key earlier in the same run. A row is one
-- such write together with another agent's read of the same key, before the write, that saw a
-- different version. The store's version at the write is state.version.current when the guard
-- recorded it, else the latest version anyone observed of the key (read or accepted write)
-- before the write. The side whose version differs from that is the stale one.
--
-- Columns: run_id, state_key, writer_agent, writer_version, other_agent, other_version,
--   version_at_write, stale_side ('writer' | 'other'), write_outcome ('rejected_stale_version'
--   when a guard refused, 'ok' when the stale write went through: a lost update), lost_update,
--   write_time, trace_id, write_span_id
--
-- Example: run r-17, key invoice/42: planner read v3, billing read v4, planner wrote expecting
--   v3; version_at_write v4, stale_side writer, write_outcome ok (lost_update true).
WITH reads AS (
    SELECT run_id, agent_id, state_key, state_version_read AS version, start_time_unix_nano AS t
    FROM spans
    WHERE tool_kind = 'read' AND state_key IS NOT NULL AND state_version_read IS NOT NULL
),
writes AS (
    SELECT
        w.run_id, w.agent_id, w.state_key, w.outcome, w.trace_id, w.span_id, w.start_time,
        w.start_time_unix_nano AS t, w.state_version_current,
        coalesce(w.state_version_expected, (
            SELECT r.version FROM reads r
            WHERE r.run_id = w.run_id AND r.state_key = w.state_key
              AND r.agent_id IS NOT DISTINCT FROM w.agent_id AND r.t < w.start_time_unix_nano
            ORDER BY r.t DESC LIMIT 1)) AS baseline
    FROM spans w
    WHERE w.tool_kind = 'write' AND w.state_key IS NOT NULL
),
observations AS (
    SELECT run_id, state_key, version, t FROM reads
    UNION ALL
    SELECT run_id, state_key, state_version_written, start_time_unix_nano
    FROM spans
    WHERE tool_kind = 'write' AND state_version_written IS NOT NULL AND outcome IN ('ok', 'forced')
),
pairs AS (
    SELECT DISTINCT
        w.run_id, w.state_key, w.agent_id AS writer_agent, w.baseline AS writer_version,
        r.agent_id AS other_agent, r.version AS other_version, w.outcome AS write_outcome,
        w.start_time AS write_time, w.trace_id, w.span_id AS write_span_id, w.t,
        w.state_version_current
    FROM writes w
    JOIN reads r
      ON r.run_id = w.run_id AND r.state_key = w.state_key AND r.t < w.t
     AND r.agent_id IS DISTINCT FROM w.agent_id AND r.version <> w.baseline
    WHERE w.baseline IS NOT NULL
      -- the writer itself read the key at its baseline in this run (the divergence is between reads)
      AND EXISTS (SELECT 1 FROM reads mine
                  WHERE mine.run_id = w.run_id AND mine.state_key = w.state_key
                    AND mine.agent_id IS NOT DISTINCT FROM w.agent_id
                    AND mine.version = w.baseline AND mine.t < w.t)
),
judged AS (
    SELECT
        p.*,
        coalesce(p.state_version_current, (
            SELECT o.version FROM observations o
            WHERE o.run_id = p.run_id AND o.state_key = p.state_key AND o.t < p.t
            ORDER BY o.t DESC LIMIT 1)) AS version_at_write
    FROM pairs p
)
SELECT
    run_id, state_key, writer_agent, writer_version, other_agent, other_version, version_at_write,
    CASE WHEN writer_version = version_at_write THEN 'other' ELSE 'writer' END AS stale_side,
    write_outcome,
    (writer_version IS DISTINCT FROM version_at_write AND write_outcome = 'ok') AS lost_update,
    write_time, trace_id, write_span_id
FROM judged
ORDER BY lost_update DESC, stale_side DESC, write_time, run_id, state_key, other_agent;
