-- unpersisted_writes: writes that reported success but whose key, read next in the same run, showed another version with no write in between: the write did not persist.
--
-- An accepted write (outcome ok) that recorded state.version.written, followed in its run by a read
-- of the same key (state.version.read) as the next observation of that key, with no accepted
-- write between them, and the read returned a different version. A read-back that asks a cache
-- rather than the source of truth says "match" here; this question catches it from the next read.
--
-- Scope: spans are compared only with spans of the same run (run_id: gen_ai.conversation.id, else
-- the trace id); a write and the next read are paired within a run.
--
-- Verdict: happened (the write was accepted and reported success, and did not persist); unknown
--   when order_uncertain (the read may have come before the write).
--
-- Columns: verdict, verdict_basis, run_id, state_key, agent_id (the writer), tool_name,
--   written_version, readback (what the write's own read-back said), read_version, reader_agent,
--   write_time, read_time, order_uncertain (the write and the read are closer than the detected
--   clock skew between their services), trace_id, span_id (the write), read_span_id
--
-- Example: happened, run r-6, profile/user-145: support's update_email wrote rev-9 (read-back:
--   match, through the cache); the auditor's next read returned rev-8.
WITH all_writes AS (
    SELECT run_id, state_key, agent_id, tool_name, state_version_written, readback, start_time,
           start_time_unix_nano AS t, trace_id, span_id, service_name
    FROM spans
    WHERE tool_kind = 'write' AND state_key IS NOT NULL AND state_version_written IS NOT NULL
      AND coalesce(outcome, 'ok') IN ('ok', 'forced')
),
reads AS (
    SELECT run_id, state_key, state_version_read AS version, agent_id, start_time,
           start_time_unix_nano AS t, span_id, service_name
    FROM spans
    WHERE tool_kind = 'read' AND state_key IS NOT NULL AND state_version_read IS NOT NULL
),
-- Only keys both written and read in a run can show a lost write; the ASOF join sorts just those.
-- Keys are matched by a hash of (run, key): equal hashes of different keys only add candidates,
-- and the ASOF join below pairs exact keys, so the answer is the same.
candidates AS (
    SELECT hash(run_id, state_key) AS h FROM all_writes
    INTERSECT
    SELECT hash(run_id, state_key) FROM reads
),
writes AS (
    SELECT * FROM all_writes WHERE hash(run_id, state_key) IN (SELECT h FROM candidates)
),
observations AS (
    SELECT run_id, state_key, version, agent_id, start_time, t, span_id, service_name, true AS is_read
    FROM reads WHERE hash(run_id, state_key) IN (SELECT h FROM candidates)
    UNION ALL
    SELECT run_id, state_key, state_version_written, agent_id, start_time, t, span_id, service_name, false
    FROM writes
)
SELECT
    CASE WHEN order_uncertain(w.service_name, w.t, o.service_name, o.t) THEN 'unknown' ELSE 'happened' END AS verdict,
    CASE WHEN order_uncertain(w.service_name, w.t, o.service_name, o.t)
         THEN 'the write and the read are closer than the clock skew between their services: the read may come first'
         ELSE 'the write reported success; the next read of the key showed another version' END AS verdict_basis,
    w.run_id, w.state_key, w.agent_id, w.tool_name, w.state_version_written AS written_version,
    w.readback, o.version AS read_version, o.agent_id AS reader_agent, w.start_time AS write_time,
    o.start_time AS read_time, order_uncertain(w.service_name, w.t, o.service_name, o.t) AS order_uncertain,
    w.trace_id, w.span_id, o.span_id AS read_span_id
FROM writes w
-- the first observation of the key after the write (ASOF with <: the nearest later one)
ASOF JOIN observations o ON o.run_id = w.run_id AND o.state_key = w.state_key AND w.t < o.t
WHERE o.is_read AND o.version <> w.state_version_written
ORDER BY write_time, run_id, state_key;
