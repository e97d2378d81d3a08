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
    SELECT * EXCLUDE (n) FROM (
        SELECT *, row_number() OVER (PARTITION BY delegation_task_id ORDER BY start_time_unix_nano DESC, span_id) AS n
        FROM spans
        WHERE delegation_task_id IS NOT NULL AND coalesce(outcome, 'ok') = 'ok'
    ) WHERE n = 1
),
roots AS (
    SELECT delegation_task_id AS root_task_id, constraints_carried AS root_constraints
    FROM tasks
    WHERE delegation_task_id = delegation_root_task_id
),
drops AS (
    SELECT
        child.run_id, child.delegation_root_task_id AS root_task_id, c.constraint_id,
        parent.delegation_hop AS last_hop_carried, child.delegation_hop AS dropped_at_hop,
        child.delegation_task_id AS dropped_task_id, child.agent_id AS dropped_by_agent,
        parent.delegation_task_id AS parent_task_id, child.tool_name,
        child.start_time AS delegation_time, child.trace_id, child.span_id
    FROM tasks child
    JOIN tasks parent ON parent.delegation_task_id = child.delegation_origin_task_id
    JOIN roots r ON r.root_task_id = child.delegation_root_task_id
    CROSS JOIN LATERAL (SELECT unnest(parent.constraints_carried) AS constraint_id) c
    WHERE child.delegation_task_id <> child.delegation_root_task_id
      AND list_contains(r.root_constraints, c.constraint_id)
      AND NOT list_contains(child.constraints_carried, c.constraint_id)
      AND NOT list_contains(child.constraints_waived, c.constraint_id)
)
SELECT DISTINCT * FROM drops
ORDER BY delegation_time, run_id, root_task_id, dropped_at_hop, constraint_id;
