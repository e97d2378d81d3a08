-- readback_mismatches: writes whose read-back through the source of truth did not match what was sent.
--
-- tool.readback = mismatch, or tool.outcome = readback_mismatch. The transport column shows how
-- many of these reported success to the caller.
--
-- Scope: spans are compared only with spans of the same run (run_id: gen_ai.conversation.id, else
-- the trace id); each row is one span, so no spans are paired.
--
-- Columns: run_id, tool_name, agent_id, state_key, transport, outcome, error_type, start_time,
--   trace_id, span_id
--
-- Example: run r-8, update_price by writer on price/sku-77: transport ok, outcome
--   readback_mismatch.
SELECT
    run_id, tool_name, agent_id, state_key, transport, outcome, error_type, start_time, trace_id,
    span_id
FROM spans
WHERE readback = 'mismatch' OR outcome = 'readback_mismatch'
ORDER BY start_time, run_id, span_id;
