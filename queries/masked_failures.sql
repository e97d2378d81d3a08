-- masked_failures: tool calls whose result reported a failure while the span's status says OK or unset ("your tracer shows these green"), by format, tool and outcome.
--
-- A masked failure is a call whose recorded or decided outcome is a failure (not ok, not an
-- operator's forced write) while its span status is 'ok' or 'unset', so every tracer's error view
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
-- Columns: span_format, tool_name, outcome, status_codes (the statuses the spans carried), calls,
--   runs, first_seen, last_seen, example_trace_ids (up to three), example_result (only with
--   --show-content: one recorded result, cut to 1,000 characters)
--
-- Example: openinference, charge, quota_exceeded, ['unset'], 1 call in 1 run, example_trace_ids
--   [4bf9...].
SELECT
    span_format, tool_name, outcome, list_sort(list_distinct(list(status_code))) AS status_codes,
    count(*) AS calls, count(DISTINCT run_id) AS runs, min(start_time) AS first_seen, max(start_time) AS last_seen,
    list_sort(list_distinct(list(trace_id)))[1:3] AS example_trace_ids,
    min(result_shown) AS example_result
FROM spans
WHERE tool_name IS NOT NULL AND outcome IS NOT NULL AND outcome NOT IN ('ok', 'forced')
  AND status_code IN ('ok', 'unset')
GROUP BY span_format, tool_name, outcome
ORDER BY calls DESC, span_format, tool_name, outcome;
