-- masked_failures: tool calls whose result reported a failure while the span's status says OK or unset ("your tracer shows these green"), by format, tool and outcome.
--
-- A masked failure is a call whose recorded or decided outcome is a failure (not ok, not an
-- operator's forced write, not a pause for a human or for later: deferred, approval_required) while its span status is 'ok' or 'unset', so every tracer's error view
-- shows it green. On other instrumentations' spans the outcome comes from the recorded result
-- (the envelope rules a live result meets: {"success": false}, {"status": "error"}, an
-- {"ok": false, "error": ...}, a LangChain ToolMessage with status error, ...); a span whose
-- result was not recorded (content capture off), too large or malformed has no outcome and is
-- not here (the evidence counts them). On our own spans the decorator sets the status ERROR for
-- every outcome that is not ok, so a row there exposes a classifier gap (or a span another
-- process rewrote).
--
-- Scope: spans are compared only with spans of the same run (run_id: the format's conversation
-- or session id, else the trace id); this question pairs no spans, it counts them per format,
-- tool and outcome across runs.
--
-- Verdict: happened (the call failed and every tracer shows it green); prevented when the outcome
--   is a guard's refusal (nothing went through; only the status hides the refusal).
--
-- Columns: verdict, verdict_basis, span_format, tool_name, outcome, status_codes (the statuses the
--   spans carried), calls, runs, first_seen, last_seen, example_trace_ids (up to three),
--   example_result (only with --show-content: one recorded result, cut to 1,000 characters)
--
-- Example: happened, openinference, charge, quota_exceeded, ['unset'], 1 call in 1 run,
--   example_trace_ids [4bf9...].
-- The failures, then their example traces (the three smallest ids per row, each once) from the
-- distinct (row, trace) pairs, so no list of every trace id is built.
WITH failed AS MATERIALIZED (
    SELECT span_format, tool_name, outcome, status_code, run_id, start_time, trace_id, result_shown
    FROM spans
    WHERE tool_name IS NOT NULL AND outcome IS NOT NULL AND outcome NOT IN ('ok', 'forced', 'deferred', 'approval_required')
      AND status_code IN ('ok', 'unset')
),
examples AS (
    SELECT span_format, tool_name, outcome, list_sort(min(trace_id, 3)) AS example_trace_ids
    FROM (SELECT DISTINCT span_format, tool_name, outcome, trace_id FROM failed)
    GROUP BY ALL
)
SELECT
    CASE WHEN f.outcome IN ('rejected_stale_version', 'stale_policy', 'constraint_missing', 'duplicate_request',
                            'plan_expired', 'plan_binding_moved', 'in_progress') THEN 'prevented'
         ELSE 'happened' END AS verdict,
    CASE WHEN f.outcome IN ('rejected_stale_version', 'stale_policy', 'constraint_missing', 'duplicate_request',
                            'plan_expired', 'plan_binding_moved', 'in_progress')
         THEN 'a guard refused the call; its span status hides the refusal'
         ELSE 'the call failed while its span status says ok or unset: tracers show it green' END AS verdict_basis,
    f.span_format, f.tool_name, f.outcome, list_sort(list(DISTINCT f.status_code)) AS status_codes,
    count(*) AS calls, count(DISTINCT f.run_id) AS runs, min(f.start_time) AS first_seen,
    max(f.start_time) AS last_seen, any_value(e.example_trace_ids) AS example_trace_ids,
    min(f.result_shown) AS example_result
FROM failed f
JOIN examples e ON e.span_format IS NOT DISTINCT FROM f.span_format AND e.tool_name = f.tool_name
               AND e.outcome = f.outcome
GROUP BY f.span_format, f.tool_name, f.outcome
ORDER BY calls DESC, f.span_format, f.tool_name, f.outcome;
