-- bad_outcome_successes: calls whose transport succeeded but whose outcome was not ok (the 200 that failed), by tool and outcome.
--
-- tool.transport = ok and tool.outcome present and not ok; guard refusals count too (they are
-- the prevented half of the same failure). Worst first: the most spans.
--
-- Scope: spans are compared only with spans of the same run (run_id: gen_ai.conversation.id, else
-- the trace id); this question pairs no spans, it counts them per tool and outcome across runs.
--
-- Columns: tool_name, outcome, spans, runs, agents, first_seen, last_seen, example_trace_ids
--   (up to three)
--
-- Example: write_state, rejected_stale_version, 41 spans in 12 runs by 3 agents,
--   example_trace_ids [4bf9..., 00f0..., 9a1c...].
SELECT
    tool_name, outcome, count(*) AS spans, count(DISTINCT run_id) AS runs,
    count(DISTINCT agent_id) AS agents, min(start_time) AS first_seen, max(start_time) AS last_seen,
    list_sort(list_distinct(list(trace_id)))[1:3] AS example_trace_ids
FROM spans
WHERE transport = 'ok' AND outcome IS NOT NULL AND outcome <> 'ok'
GROUP BY tool_name, outcome
ORDER BY spans DESC, tool_name, outcome;
