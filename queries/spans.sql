-- spans: the normalized span relation every forensics question reads.
--
-- This file defines two DuckDB macros; the loader (telemetry/forensics/loading.py) runs it once
-- per connection and then materializes `CREATE TEMP TABLE spans AS SELECT * FROM otlp_spans($paths)`
-- with the file list bound as a parameter (Parquet input is the same columns, written by `ingest`).
--
-- Input: OTLP JSON lines, one `TracesData` object a line (our exporter, or an OpenTelemetry
-- Collector `file` exporter with format json). Read with an explicit structure through
-- read_ndjson_objects + from_json, never auto-detection. Accepted per the OTLP JSON encoding: hex
-- ids in any case (lower-cased here), int64 as string or number, `kind`/`status.code` as integer
-- or enum name, omitted kind/status/parentSpanId/attributes, every AnyValue type, unknown fields
-- (ignored). A line that is JSON but not a TracesData object (no `resourceSpans` array) raises an
-- error naming the file; the loader then locates the line and explains.
--
-- Columns (one row per span):
--   run_id                  gen_ai.conversation.id when present, else the trace id
--   trace_id, span_id, parent_span_id (NULL for a root; ids lower-case hex)
--   name, kind ('internal', 'server', ...), status_code ('unset' | 'ok' | 'error'), status_message
--   start_time_unix_nano, end_time_unix_nano (UBIGINT), start_time, end_time (TIMESTAMP_NS),
--   duration_ms (DOUBLE)
--   service_name, scope_name, scope_version, source_file
--   attributes              MAP(VARCHAR, VARCHAR): every scalar attribute as text (kvlist as JSON)
--   array_attributes        MAP(VARCHAR, VARCHAR[]): every array attribute as a list of text
--   resource_attributes     MAP(VARCHAR, VARCHAR)
--   typed columns: tool_name, agent_id, conversation_id, tool_kind, transport, readback, outcome,
--   error_type, state_key, state_version_read/expected/current/written, delegation_task_id,
--   delegation_origin_task_id, delegation_root_task_id, delegation_hop (BIGINT),
--   constraints_carried, constraints_waived, waiver_reasons (VARCHAR[]), objective_task_id,
--   objective_version, policy_version, policy_version_current, idempotency_key_hash,
--   idempotency_payload_hash, idempotency_original_id, deduplicated (BOOLEAN), plan_id,
--   plan_objects_matched, plan_changed_count, plan_outside_target_changed_count (BIGINT),
--   plan_binding_moved
--
-- Example: SELECT run_id, name, outcome FROM spans WHERE transport = 'ok' AND outcome <> 'ok';

-- A map from key/value entries that tolerates what OTLP forbids but files contain: NULL keys are
-- dropped and, when a key repeats, its first value wins (map_from_entries refuses duplicates).
CREATE OR REPLACE TEMP MACRO otlp_unique_map(entries) AS
    CASE
        WHEN len(list_distinct(list_transform(entries, lambda e: e.key))) = len(entries)
            THEN map_from_entries(entries)
        ELSE map_from_entries(list_filter(
            list_filter(entries, lambda e: e.key IS NOT NULL),
            lambda e, i: list_position(list_transform(list_filter(entries, lambda x: x.key IS NOT NULL), lambda x: x.key), e.key) = i))
    END;

-- One AnyValue (scalar branches) as text; arrays and kvlists are handled by the caller.
CREATE OR REPLACE TEMP MACRO otlp_scalar_text(v) AS
    coalesce(v.stringValue, v.intValue, v.boolValue, v.doubleValue, v.bytesValue,
             CAST(v.kvlistValue AS VARCHAR), CAST(v.arrayValue AS VARCHAR));

CREATE OR REPLACE TEMP MACRO otlp_spans(paths) AS TABLE
WITH lines AS (
    SELECT
        filename AS source_file,
        from_json(json, '{"resourceSpans":[{"resource":{"attributes":[{"key":"VARCHAR","value":{"stringValue":"VARCHAR","boolValue":"VARCHAR","intValue":"VARCHAR","doubleValue":"VARCHAR","bytesValue":"VARCHAR","kvlistValue":"JSON","arrayValue":"JSON"}}]},"scopeSpans":[{"scope":{"name":"VARCHAR","version":"VARCHAR"},"spans":[{"traceId":"VARCHAR","spanId":"VARCHAR","parentSpanId":"VARCHAR","name":"VARCHAR","kind":"VARCHAR","startTimeUnixNano":"UBIGINT","endTimeUnixNano":"UBIGINT","attributes":[{"key":"VARCHAR","value":{"stringValue":"VARCHAR","boolValue":"VARCHAR","intValue":"VARCHAR","doubleValue":"VARCHAR","bytesValue":"VARCHAR","kvlistValue":"JSON","arrayValue":{"values":[{"stringValue":"VARCHAR","boolValue":"VARCHAR","intValue":"VARCHAR","doubleValue":"VARCHAR","bytesValue":"VARCHAR","kvlistValue":"JSON","arrayValue":"JSON"}]}}}],"status":{"code":"VARCHAR","message":"VARCHAR"}}]}]}]}') AS d
    FROM read_ndjson_objects(paths, filename = true)
),
resources AS (
    SELECT
        source_file,
        unnest(CASE
            WHEN d.resourceSpans IS NULL THEN error(
                'forensics: a line is JSON but not an OTLP TracesData object (no "resourceSpans" array) in file "'
                || source_file || '"')
            ELSE d.resourceSpans
        END) AS rs
    FROM lines
),
scopes AS (
    SELECT
        source_file,
        otlp_unique_map(list_transform(rs.resource.attributes,
            lambda a: {'key': a.key, 'value': otlp_scalar_text(a.value)})) AS resource_attributes,
        unnest(rs.scopeSpans) AS ss
    FROM resources
),
raw_spans AS (
    SELECT
        source_file,
        resource_attributes,
        ss.scope.name AS scope_name,
        ss.scope.version AS scope_version,
        unnest(ss.spans) AS s
    FROM scopes
),
mapped AS (
    SELECT
        source_file,
        resource_attributes,
        scope_name,
        scope_version,
        s,
        otlp_unique_map(list_transform(
            list_filter(coalesce(s.attributes, []), lambda a: a.value.arrayValue IS NULL),
            lambda a: {'key': a.key, 'value': otlp_scalar_text(a.value)})) AS attributes,
        otlp_unique_map(list_transform(
            list_filter(coalesce(s.attributes, []), lambda a: a.value.arrayValue IS NOT NULL),
            lambda a: {'key': a.key, 'value': list_transform(coalesce(a.value.arrayValue.values, []),
                                                          lambda v: otlp_scalar_text(v))})) AS array_attributes
    FROM raw_spans
),
typed AS (
    SELECT
        CASE
            WHEN s.traceId IS NULL OR s.spanId IS NULL THEN error(
                'forensics: a span has no traceId or spanId, which OTLP requires, in file "'
                || source_file || '"')
            ELSE lower(s.traceId)
        END AS trace_id,
        lower(s.spanId) AS span_id,
        lower(nullif(s.parentSpanId, '')) AS parent_span_id,
        s.name AS name,
        CASE upper(coalesce(s.kind, '0'))
            WHEN '0' THEN 'unspecified' WHEN 'SPAN_KIND_UNSPECIFIED' THEN 'unspecified'
            WHEN '1' THEN 'internal' WHEN 'SPAN_KIND_INTERNAL' THEN 'internal'
            WHEN '2' THEN 'server' WHEN 'SPAN_KIND_SERVER' THEN 'server'
            WHEN '3' THEN 'client' WHEN 'SPAN_KIND_CLIENT' THEN 'client'
            WHEN '4' THEN 'producer' WHEN 'SPAN_KIND_PRODUCER' THEN 'producer'
            WHEN '5' THEN 'consumer' WHEN 'SPAN_KIND_CONSUMER' THEN 'consumer'
            ELSE lower(s.kind)
        END AS kind,
        CASE upper(coalesce(s.status.code, '0'))
            WHEN '0' THEN 'unset' WHEN 'STATUS_CODE_UNSET' THEN 'unset'
            WHEN '1' THEN 'ok' WHEN 'STATUS_CODE_OK' THEN 'ok'
            WHEN '2' THEN 'error' WHEN 'STATUS_CODE_ERROR' THEN 'error'
            ELSE lower(s.status.code)
        END AS status_code,
        nullif(s.status.message, '') AS status_message,
        s.startTimeUnixNano AS start_time_unix_nano,
        s.endTimeUnixNano AS end_time_unix_nano,
        make_timestamp_ns(CAST(s.startTimeUnixNano AS BIGINT)) AS start_time,
        make_timestamp_ns(CAST(s.endTimeUnixNano AS BIGINT)) AS end_time,
        (CAST(s.endTimeUnixNano AS DOUBLE) - CAST(s.startTimeUnixNano AS DOUBLE)) / 1e6 AS duration_ms,
        resource_attributes['service.name'] AS service_name,
        scope_name,
        scope_version,
        source_file,
        attributes,
        array_attributes,
        resource_attributes
    FROM mapped
)
SELECT
    coalesce(attributes['gen_ai.conversation.id'], trace_id) AS run_id,
    trace_id, span_id, parent_span_id, name, kind, status_code, status_message,
    start_time_unix_nano, end_time_unix_nano, start_time, end_time, duration_ms,
    service_name, scope_name, scope_version, source_file,
    attributes, array_attributes, resource_attributes,
    attributes['gen_ai.tool.name'] AS tool_name,
    attributes['gen_ai.agent.id'] AS agent_id,
    attributes['gen_ai.conversation.id'] AS conversation_id,
    attributes['tool.kind'] AS tool_kind,
    attributes['tool.transport'] AS transport,
    attributes['tool.readback'] AS readback,
    attributes['tool.outcome'] AS outcome,
    attributes['error.type'] AS error_type,
    attributes['state.key'] AS state_key,
    attributes['state.version.read'] AS state_version_read,
    attributes['state.version.expected'] AS state_version_expected,
    attributes['state.version.current'] AS state_version_current,
    attributes['state.version.written'] AS state_version_written,
    attributes['delegation.task_id'] AS delegation_task_id,
    attributes['delegation.origin_task_id'] AS delegation_origin_task_id,
    attributes['delegation.root_task_id'] AS delegation_root_task_id,
    TRY_CAST(TRY_CAST(attributes['delegation.hop'] AS DOUBLE) AS BIGINT) AS delegation_hop,
    coalesce(array_attributes['delegation.constraints.carried'], []) AS constraints_carried,
    coalesce(array_attributes['delegation.constraints.waived'], []) AS constraints_waived,
    coalesce(array_attributes['delegation.constraints.waiver_reasons'], []) AS waiver_reasons,
    attributes['objective.task_id'] AS objective_task_id,
    attributes['objective.version'] AS objective_version,
    attributes['policy.version'] AS policy_version,
    attributes['policy.version.current'] AS policy_version_current,
    attributes['idempotency.key_hash'] AS idempotency_key_hash,
    attributes['idempotency.payload_hash'] AS idempotency_payload_hash,
    attributes['idempotency.original_id'] AS idempotency_original_id,
    coalesce(lower(attributes['tool.deduplicated']) IN ('true', '1'), false) AS deduplicated,
    attributes['plan.id'] AS plan_id,
    TRY_CAST(TRY_CAST(attributes['plan.objects_matched'] AS DOUBLE) AS BIGINT) AS plan_objects_matched,
    TRY_CAST(TRY_CAST(attributes['plan.changed_count'] AS DOUBLE) AS BIGINT) AS plan_changed_count,
    TRY_CAST(TRY_CAST(attributes['plan.outside_target_changed_count'] AS DOUBLE) AS BIGINT)
        AS plan_outside_target_changed_count,
    attributes['plan.binding_moved'] AS plan_binding_moved
FROM typed;
