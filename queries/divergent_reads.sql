-- divergent_reads: two agents in one run read the same state key at different versions, and one then wrote the key expecting the version it had read.
--
-- A write's baseline is its state.version.expected (guarded write) or, for a legacy unguarded
-- write, the version that agent last read of that key earlier in the same run; the write counts
-- when that last read returned its baseline (it wrote on what it had read). A row is one such
-- write together with another agent whose latest read of the key in the run, before the write,
-- saw a different version (an agent that re-read and caught up is not divergent). The store's version at the write is state.version.current when the
-- guard recorded it, else the latest version anyone observed of the key in the run (read or
-- accepted write) before the write. The side whose version differs from that is the stale one.
-- Only keys read at two or more versions in a run are examined, which keeps this fast.
--
-- Scope: spans are compared only with spans of the same run (run_id: gen_ai.conversation.id, else
-- the trace id); reads and writes are paired within a run.
--
-- Verdict: prevented when a guard refused the write (a refusal outcome); happened when the write
--   was accepted (a lost update when the writer was the stale side; else the write was current
--   while the other agent acted on an older version); unknown when a lost update is
--   order_uncertain, or the write failed otherwise (whether it applied is not recorded).
--
-- Columns: verdict, verdict_basis, run_id, state_key, writer_agent, writer_version, other_agent,
--   other_version, version_at_write, stale_side ('writer' | 'other'), write_outcome
--   ('rejected_stale_version' when a guard refused, 'ok' when the stale write went through: a lost
--   update), lost_update, order_uncertain (the write and the other agent's read are closer than the
--   detected clock skew between their services, so which came first is not known), write_time,
--   trace_id, write_span_id
--
-- Example: happened, run r-17, key invoice/42: planner read v3, billing read v4, planner wrote
--   expecting v3; version_at_write v4, stale_side writer, write_outcome ok (lost_update true).
WITH all_reads AS NOT MATERIALIZED (
    SELECT run_id, agent_id, coalesce(agent_id, '') AS agent_key, state_key,
           state_version_read AS version, start_time_unix_nano AS t, service_name
    FROM spans
    WHERE tool_kind = 'read' AND state_key IS NOT NULL AND state_version_read IS NOT NULL
),
-- Only keys read at two or more versions within a run can diverge; everything below is limited to
-- them. They are found by a hash of (run, key) first: equal hashes of different keys only add
-- candidates, which the exact grouping then drops.
divergent_hashes AS (
    SELECT hash(run_id, state_key) AS h FROM all_reads GROUP BY h HAVING min(version) <> max(version)
),
candidate_reads AS MATERIALIZED (
    SELECT * FROM all_reads WHERE hash(run_id, state_key) IN (SELECT h FROM divergent_hashes)
),
divergent_keys AS (
    SELECT run_id, state_key FROM candidate_reads GROUP BY run_id, state_key HAVING count(DISTINCT version) > 1
),
reads AS (
    SELECT r.* FROM candidate_reads r SEMI JOIN divergent_keys d ON d.run_id = r.run_id AND d.state_key = r.state_key
),
writes AS (
    SELECT s.run_id, s.agent_id, coalesce(s.agent_id, '') AS agent_key, s.state_key, s.outcome, s.trace_id,
           s.span_id, s.start_time, s.start_time_unix_nano AS t, s.state_version_expected,
           s.state_version_current, s.state_version_written, s.service_name
    FROM spans s SEMI JOIN divergent_keys d ON d.run_id = s.run_id AND d.state_key = s.state_key
    WHERE s.tool_kind = 'write'
),
-- The writer's own latest read of the key before the write (ASOF: the nearest earlier one). The
-- baseline is the expected version, else that read; the write counts when it wrote on what it read.
based AS (
    SELECT w.*, r.version AS baseline
    FROM writes w
    ASOF JOIN reads r
      ON r.run_id = w.run_id AND r.state_key = w.state_key AND r.agent_key = w.agent_key AND w.t > r.t
    WHERE coalesce(w.state_version_expected, r.version) = r.version
),
observations AS (
    SELECT run_id, state_key, version, t FROM reads
    UNION ALL
    SELECT run_id, state_key, state_version_written, t
    FROM writes
    WHERE state_version_written IS NOT NULL AND outcome IN ('ok', 'forced')
),
judged AS (
    SELECT b.* EXCLUDE (service_name), b.service_name AS writer_service,
           coalesce(b.state_version_current, o.version) AS version_at_write
    FROM based b
    ASOF LEFT JOIN observations o ON o.run_id = b.run_id AND o.state_key = b.state_key AND b.t > o.t
),
-- Every other agent's latest read of the key before the write: what it believed at that moment.
others AS (
    SELECT
        j.run_id, j.state_key, j.agent_id AS writer_agent, j.baseline AS writer_version,
        r.agent_id AS other_agent, r.version AS other_version, j.version_at_write,
        j.outcome AS write_outcome, j.start_time AS write_time, j.trace_id, j.span_id AS write_span_id,
        order_uncertain(j.writer_service, j.t, r.service_name, r.t) AS order_uncertain
    FROM judged j
    JOIN reads r
      ON r.run_id = j.run_id AND r.state_key = j.state_key AND r.t < j.t AND r.agent_key <> j.agent_key
    QUALIFY row_number() OVER (PARTITION BY j.span_id, r.agent_key ORDER BY r.t DESC) = 1
),
pairs AS (
    SELECT * FROM others WHERE other_version <> writer_version
)
SELECT
    CASE WHEN write_outcome IN ('rejected_stale_version', 'stale_policy', 'constraint_missing', 'duplicate_request',
                                'plan_expired', 'plan_binding_moved', 'in_progress') THEN 'prevented'
         WHEN coalesce(write_outcome, 'ok') NOT IN ('ok', 'forced') THEN 'unknown'
         WHEN writer_version IS DISTINCT FROM version_at_write AND order_uncertain THEN 'unknown'
         ELSE 'happened' END AS verdict,
    CASE WHEN write_outcome IN ('rejected_stale_version', 'stale_policy', 'constraint_missing', 'duplicate_request',
                                'plan_expired', 'plan_binding_moved', 'in_progress')
         THEN 'the guard refused the write (' || write_outcome || ')'
         WHEN coalesce(write_outcome, 'ok') NOT IN ('ok', 'forced')
         THEN 'the write failed without a refusal: whether it applied is not recorded'
         WHEN writer_version IS DISTINCT FROM version_at_write AND order_uncertain
         THEN 'the write and the other read are closer than the clock skew: which came first is not known'
         WHEN writer_version IS DISTINCT FROM version_at_write
         THEN 'the stale write was accepted: the newer version is lost'
         ELSE 'the write was accepted on the current version while the other agent held an older one' END
        AS verdict_basis,
    run_id, state_key, writer_agent, writer_version, other_agent, other_version, version_at_write,
    CASE WHEN writer_version = version_at_write THEN 'other' ELSE 'writer' END AS stale_side,
    write_outcome,
    (writer_version IS DISTINCT FROM version_at_write AND write_outcome = 'ok') AS lost_update,
    order_uncertain, write_time, trace_id, write_span_id
FROM pairs
ORDER BY lost_update DESC, stale_side DESC, write_time, run_id, state_key, other_agent;
