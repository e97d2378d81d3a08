-- readback_mismatches: writes whose read-back through the source of truth did not match what was sent.
--
-- tool.readback = mismatch, or tool.outcome = readback_mismatch. The transport column shows how
-- many of these reported success to the caller.
--
-- Scope: spans are compared only with spans of the same run (run_id: gen_ai.conversation.id, else
-- the trace id); each row is one span, so no spans are paired.
--
-- Verdict: happened when the caller was told done (tool.silent_failure true, or the outcome ok
--   or forced: nothing acted on the mismatch); prevented when the caller was told the write did not
--   persist (tool.silent_failure false, a transport error, or another instrumentation's recorded
--   result said so); unknown for our spans without tool.silent_failure whose attributes cannot tell
--   (silent_unconfirmed in spans.sql).
--
-- Columns: verdict, verdict_basis, run_id, tool_name, agent_id, state_key, transport, outcome,
--   error_type, start_time, trace_id, span_id
--
-- Example: prevented, run r-8, update_price by writer on price/sku-77: transport ok, outcome
--   readback_mismatch.
SELECT
    CASE WHEN silent_failure OR coalesce(outcome, 'ok') IN ('ok', 'forced') THEN 'happened'
         WHEN silent_unconfirmed(span_format, silent_failure, transport, outcome, error_type) THEN 'unknown'
         ELSE 'prevented' END AS verdict,
    CASE WHEN silent_failure OR coalesce(outcome, 'ok') IN ('ok', 'forced')
         THEN 'the caller was told done; the read-back found the write not persisted'
         WHEN silent_unconfirmed(span_format, silent_failure, transport, outcome, error_type)
         THEN 'no tool.silent_failure on the span: whether the caller was told is not recorded'
         ELSE 'the read-back caught it and the caller was told the write did not persist' END AS verdict_basis,
    run_id, tool_name, agent_id, state_key, transport, outcome, error_type, start_time, trace_id,
    span_id
FROM spans
WHERE readback = 'mismatch' OR outcome = 'readback_mismatch'
ORDER BY start_time, run_id, span_id;
