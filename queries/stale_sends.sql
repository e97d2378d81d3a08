-- stale_sends: sends made (or refused) against a superseded policy.version.
--
-- A send (tool.kind = send) names the policy it used: objective.task_id and policy.version. The
-- current version is policy.version.current when the guard checked it, else the latest version
-- published or superseded (objective.version on an accepted, non-read, non-send span of that
-- objective) before the send. 'refused': outcome stale_policy. 'sent_stale': accepted though the
-- version used was not current.
--
-- Scope: spans are compared only with spans of the same run (run_id: gen_ai.conversation.id, else
-- the trace id); a send is judged against the publications of its own run.
--
-- Verdict: prevented for 'refused' (the guard refused the send); happened for 'sent_stale' (the
--   send went out); unknown for 'sent_stale' when order_uncertain (the publication may have come
--   after the send).
--
-- Columns: verdict, verdict_basis, kind ('refused' | 'sent_stale'), run_id, agent_id, tool_name,
--   policy_task_id, used_version, current_version, outcome, order_uncertain (the send and the
--   publication it is judged against are closer than the detected clock skew between their
--   services), start_time, trace_id, span_id
--
-- Example: happened, sent_stale, run r-2, billing sent with refunds-policy v3 while v4 was current.
WITH publications AS (
    SELECT run_id, objective_task_id, objective_version, start_time_unix_nano AS t, service_name AS p_service
    FROM spans
    WHERE objective_task_id IS NOT NULL AND objective_version IS NOT NULL
      AND coalesce(tool_kind, '') NOT IN ('read', 'send') AND coalesce(outcome, 'ok') = 'ok'
),
candidates AS (
    SELECT run_id, agent_id, tool_name, objective_task_id, policy_version, policy_version_current, outcome,
           start_time, trace_id, span_id, service_name, start_time_unix_nano AS t
    FROM spans
    WHERE tool_kind = 'send' AND policy_version IS NOT NULL
      AND (outcome = 'stale_policy' OR coalesce(outcome, 'ok') = 'ok')
),
-- Sends of an objective published in their run are judged against the latest publication before
-- them (ASOF); the others have only the guard's policy.version.current to go by.
sends AS (
    SELECT s.*, coalesce(s.policy_version_current, p.objective_version) AS current_version,
           coalesce(order_uncertain(s.service_name, s.t, p.p_service, p.t), false) AS order_uncertain
    FROM (SELECT * FROM candidates c SEMI JOIN publications p
          ON p.run_id = c.run_id AND p.objective_task_id = c.objective_task_id) s
    ASOF LEFT JOIN publications p
      ON p.run_id = s.run_id AND p.objective_task_id = s.objective_task_id AND s.t > p.t
    UNION ALL
    SELECT c.*, c.policy_version_current AS current_version, false AS order_uncertain
    FROM candidates c ANTI JOIN publications p
      ON p.run_id = c.run_id AND p.objective_task_id = c.objective_task_id
)
SELECT
    CASE WHEN outcome = 'stale_policy' THEN 'prevented' WHEN order_uncertain THEN 'unknown' ELSE 'happened' END
        AS verdict,
    CASE WHEN outcome = 'stale_policy' THEN 'the guard refused the send (stale_policy)'
         WHEN order_uncertain THEN 'the send and the publication are closer than the clock skew between their '
                                   || 'services: the version may still have been current'
         ELSE 'the send went out under a superseded policy version' END AS verdict_basis,
    CASE WHEN outcome = 'stale_policy' THEN 'refused' ELSE 'sent_stale' END AS kind,
    run_id, agent_id, tool_name, objective_task_id AS policy_task_id, policy_version AS used_version,
    current_version, outcome, order_uncertain, start_time, trace_id, span_id
FROM sends
WHERE outcome = 'stale_policy'
   OR (coalesce(outcome, 'ok') = 'ok' AND current_version IS NOT NULL AND policy_version <> current_version)
ORDER BY kind DESC, start_time, span_id;
