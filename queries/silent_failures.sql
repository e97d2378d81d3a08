-- silent_failures: silent failures, the calls that told their caller success while the outcome was not ok, by tool and outcome (exactly what ToolSilentFailure pages on).
--
-- One predicate, decided once by the decorator and recorded on the span: tool.silent_failure is
-- true when the result did not itself report failure (transport ok, the result classified ok)
-- and the outcome was decided not ok afterwards by a read-back, an outcome= callable or
-- set_outcome. The same calls are counted in tool_silent_failures_total{tool, outcome}, which
-- the alert reads. Refusals and error envelopes told their caller, so they are not here (see
-- guard_refusals). Worst first: the most spans.
--
-- Scope: spans are compared only with spans of the same run (run_id: gen_ai.conversation.id, else
-- the trace id); this question pairs no spans, it counts them per tool and outcome across runs.
--
-- Columns: tool_name, outcome, spans, runs, agents, first_seen, last_seen, example_trace_ids
--   (up to three)
--
-- Example: legacy_reprice_collection, postcondition_failed, 1 span in 1 run by 1 agent,
--   example_trace_ids [4bf9...].
SELECT
    tool_name, outcome, count(*) AS spans, count(DISTINCT run_id) AS runs,
    count(DISTINCT agent_id) AS agents, min(start_time) AS first_seen, max(start_time) AS last_seen,
    list_sort(list_distinct(list(trace_id)))[1:3] AS example_trace_ids
FROM spans
WHERE silent_failure
GROUP BY tool_name, outcome
ORDER BY spans DESC, tool_name, outcome;
