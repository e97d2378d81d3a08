-- silent_failures: silent failures, the calls that told their caller success while the outcome was not ok, by tool and outcome (exactly what ToolSilentFailure pages on).
--
-- One predicate, decided once by the decorator and recorded on the span: tool.silent_failure is
-- true when the result did not itself report failure (transport ok, the result classified ok)
-- and the outcome was decided not ok afterwards by a read-back, an outcome= callable or
-- set_outcome. The same calls are counted in tool_silent_failures_total{tool, outcome}, which
-- the alert reads. Refusals and error envelopes told their caller, so they are not here (see
-- guard_refusals). Worst first: the most spans.
-- Spans of ours without tool.silent_failure (older writers, other writers of our conventions)
-- are judged by the same rule from what they carry (silent_unconfirmed in spans.sql): transport
-- ok, an outcome decided not ok, no refusal, pause or exception. Whether the result itself
-- reported the failure only tool.silent_failure records, so those spans are rows of their own
-- with verdict unknown (the evidence counts them).
--
-- Verdict: happened (tool.silent_failure true: the caller was told done); unknown (no
--   tool.silent_failure, and the attributes allow a silent failure).
--
-- Scope: spans are compared only with spans of the same run (run_id: gen_ai.conversation.id, else
-- the trace id); this question pairs no spans, it counts them per tool and outcome across runs.
--
-- Columns: verdict, verdict_basis, tool_name, outcome, spans, runs, agents, first_seen, last_seen,
--   example_trace_ids (up to three)
--
-- Example: happened, legacy_reprice_collection, postcondition_failed, 1 span in 1 run by 1 agent,
--   example_trace_ids [4bf9...].
WITH judged AS (
    SELECT tool_name, outcome, run_id, agent_id, start_time, trace_id,
           CASE WHEN silent_failure THEN 'happened' ELSE 'unknown' END AS verdict
    FROM spans
    -- true, or not recorded (NULL) and the rule allows it; the first part is on a stored column,
    -- so spans that recorded false (nearly all) are dropped before the rest is read
    WHERE silent_failure IS NOT FALSE
      AND (silent_failure OR silent_unconfirmed(span_format, silent_failure, transport, outcome, error_type))
)
SELECT
    verdict,
    CASE verdict WHEN 'happened' THEN 'the caller was told done; the outcome was decided not ok afterwards'
         ELSE 'no tool.silent_failure on these spans: whether the result itself reported the failure is not recorded'
    END AS verdict_basis,
    tool_name, outcome, count(*) AS spans, count(DISTINCT run_id) AS runs,
    count(DISTINCT agent_id) AS agents, min(start_time) AS first_seen, max(start_time) AS last_seen,
    list_sort(list_distinct(list(trace_id)))[1:3] AS example_trace_ids
FROM judged
GROUP BY verdict, tool_name, outcome
ORDER BY spans DESC, tool_name, outcome, verdict;
