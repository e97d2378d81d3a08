-- constraint_loss_by_hop: for each delegation chain, each constraint present at the root that a later hop neither carried nor waived.
--
-- Scope: spans are compared only with spans of the same run (run_id); a chain is a run's tasks
-- under one delegation.root_task_id. The baseline is delegation.constraints.carried on the root
-- task's registration (delegation.task_id = delegation.root_task_id). When that registration is
-- not in the evidence (sampled out, another service's file), the constraints carried at the
-- earliest hop present are the baseline and the row says so: root_seen false, baseline_hop.
-- A delegation drops a constraint when its parent task (delegation.origin_task_id) carried it
-- and the child neither carries nor waives it; only the first drop in a chain is reported
-- (descendants lose it as a consequence). Refused delegations (any outcome but ok) created no
-- task and are ignored. A task whose parent is missing from the evidence is a row of finding
-- 'gap' (parent_task_id is the missing task, constraint_id NULL): nothing can be said about what
-- the missing hop carried, so the chain is never silently joined past it.
--
-- Verdict: happened for 'dropped' (the delegation was accepted without the constraint); unknown for
--   'gap' (what the missing hop carried is not in the evidence).
--
-- Columns: verdict, verdict_basis, finding ('dropped' | 'gap'), run_id, root_task_id, root_seen,
--   baseline_hop, constraint_id, last_hop_carried, dropped_at_hop, dropped_task_id,
--   dropped_by_agent (the delegating agent), parent_task_id, tool_name, delegation_time, trace_id,
--   span_id
--
-- Example: happened, dropped, root T1 (root_seen true, baseline_hop 0) carried C1, C2, C3;
--   constraint C3 was last seen at hop 2 (task T1.2.1) and dropped at hop 3 by agent researcher
--   delegating T1.2.1.4.
WITH edges AS (
    SELECT
        child.run_id, child.delegation_root_task_id AS root_task_id,
        unnest(parent.constraints_carried) AS constraint_id,
        parent.delegation_hop AS last_hop_carried, child.delegation_hop AS dropped_at_hop,
        child.delegation_task_id AS dropped_task_id, child.agent_id AS dropped_by_agent,
        parent.delegation_task_id AS parent_task_id, child.tool_name,
        child.start_time AS delegation_time, child.trace_id, child.span_id,
        child.constraints_carried AS child_carried, child.constraints_waived AS child_waived
    FROM delegation_tasks child
    JOIN delegation_tasks parent
      ON parent.run_id = child.run_id AND parent.delegation_task_id = child.delegation_origin_task_id
    WHERE child.delegation_task_id <> child.delegation_root_task_id
),
dropped AS (
    SELECT DISTINCT
        'dropped' AS finding, e.run_id, e.root_task_id, ch.root_seen, ch.baseline_hop, e.constraint_id,
        e.last_hop_carried, e.dropped_at_hop, e.dropped_task_id, e.dropped_by_agent, e.parent_task_id,
        e.tool_name, e.delegation_time, e.trace_id, e.span_id
    FROM edges e
    JOIN delegation_chains ch ON ch.run_id = e.run_id AND ch.root_task_id = e.root_task_id
    WHERE list_contains(ch.baseline_constraints, e.constraint_id)
      AND NOT list_contains(e.child_carried, e.constraint_id)
      AND NOT list_contains(e.child_waived, e.constraint_id)
),
gaps AS (
    SELECT 'gap' AS finding, g.run_id, g.root_task_id, ch.root_seen, ch.baseline_hop,
           CAST(NULL AS VARCHAR) AS constraint_id, CAST(NULL AS BIGINT) AS last_hop_carried,
           g.hop AS dropped_at_hop, g.task_id AS dropped_task_id, t.agent_id AS dropped_by_agent,
           g.missing_task_id AS parent_task_id, t.tool_name, t.start_time AS delegation_time,
           g.trace_id, g.span_id
    FROM delegation_gaps g
    JOIN delegation_chains ch ON ch.run_id = g.run_id AND ch.root_task_id = g.root_task_id
    JOIN delegation_tasks t ON t.run_id = g.run_id AND t.span_id = g.span_id
)
SELECT
    CASE finding WHEN 'dropped' THEN 'happened' ELSE 'unknown' END AS verdict,
    CASE finding WHEN 'dropped' THEN 'the delegation was accepted without the constraint, neither carried nor waived'
         ELSE 'the parent hop is not in the evidence: what it carried cannot be told' END AS verdict_basis,
    *
FROM (SELECT * FROM dropped UNION ALL SELECT * FROM gaps)
ORDER BY delegation_time, run_id, root_task_id, dropped_at_hop, finding, constraint_id;
