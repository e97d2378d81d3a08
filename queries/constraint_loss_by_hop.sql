-- constraint_loss_by_hop: for each delegation chain, each constraint present at the root that a later hop neither carried nor waived.
--
-- Root constraints are delegation.constraints.carried on the root task's registration span
-- (delegation.task_id = delegation.root_task_id, hop 0). A delegation drops a constraint when
-- its parent task (delegation.origin_task_id) carried it and the child neither carries nor waives
-- it; only the first drop in a chain is reported (descendants lose it as a consequence). Refused
-- delegations (any outcome but ok) created no task and are ignored.
--
-- Columns: run_id, root_task_id, constraint_id, last_hop_carried, dropped_at_hop,
--   dropped_task_id, dropped_by_agent (the delegating agent), parent_task_id, tool_name,
--   delegation_time, trace_id, span_id
--
-- Example: root T1 carried C1, C2, C3; constraint C3 was last seen at hop 2 (task T1.2.1) and
--   dropped at hop 3 by agent researcher delegating task T1.2.1.4.
WITH tasks AS (
    SELECT run_id, agent_id, tool_name, start_time, trace_id, span_id, delegation_task_id,
           delegation_origin_task_id, delegation_root_task_id, delegation_hop, constraints_carried,
           constraints_waived
    FROM spans
    WHERE delegation_task_id IS NOT NULL AND coalesce(outcome, 'ok') = 'ok'
    -- a task retried or recorded twice counts once: its latest accepted span
    QUALIFY row_number() OVER (PARTITION BY delegation_task_id ORDER BY start_time_unix_nano DESC, span_id) = 1
),
roots AS (
    SELECT delegation_task_id AS root_task_id, constraints_carried AS root_constraints
    FROM tasks
    WHERE delegation_task_id = delegation_root_task_id
),
edges AS (
    SELECT
        child.run_id, child.delegation_root_task_id AS root_task_id,
        unnest(parent.constraints_carried) AS constraint_id,
        parent.delegation_hop AS last_hop_carried, child.delegation_hop AS dropped_at_hop,
        child.delegation_task_id AS dropped_task_id, child.agent_id AS dropped_by_agent,
        parent.delegation_task_id AS parent_task_id, child.tool_name,
        child.start_time AS delegation_time, child.trace_id, child.span_id,
        child.constraints_carried AS child_carried, child.constraints_waived AS child_waived
    FROM tasks child
    JOIN tasks parent ON parent.delegation_task_id = child.delegation_origin_task_id
    WHERE child.delegation_task_id <> child.delegation_root_task_id
)
SELECT DISTINCT
    e.run_id, e.root_task_id, e.constraint_id, e.last_hop_carried, e.dropped_at_hop, e.dropped_task_id,
    e.dropped_by_agent, e.parent_task_id, e.tool_name, e.delegation_time, e.trace_id, e.span_id
FROM edges e
JOIN roots r ON r.root_task_id = e.root_task_id
WHERE list_contains(r.root_constraints, e.constraint_id)
  AND NOT list_contains(e.child_carried, e.constraint_id)
  AND NOT list_contains(e.child_waived, e.constraint_id)
ORDER BY delegation_time, run_id, root_task_id, dropped_at_hop, constraint_id;
