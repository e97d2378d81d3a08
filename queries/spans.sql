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
--   attributes, resource_attributes   STRUCT(key, value, "values")[]: every attribute, value the
--                           scalar as text (kvlist as JSON), "values" an array's elements as text;
--                           read one with attr(attributes, 'name') or attr_list(attributes, 'name')
--   typed columns: tool_name, agent_id, conversation_id, tool_kind, transport, readback, outcome,
--   error_type, state_key, state_version_read/expected/current/written, delegation_task_id,
--   delegation_origin_task_id, delegation_root_task_id, delegation_hop (BIGINT),
--   constraints_carried, constraints_waived, waiver_reasons (VARCHAR[]), objective_task_id,
--   objective_version, policy_version, policy_version_current, idempotency_key_hash,
--   idempotency_payload_hash, idempotency_original_id, deduplicated (BOOLEAN), plan_id,
--   plan_objects_matched, plan_changed_count, plan_outside_target_changed_count (BIGINT),
--   plan_binding_moved
--
-- Example: SELECT run_id, name, outcome, attr(attributes, 'error.type') FROM spans
--          WHERE transport = 'ok' AND outcome <> 'ok';

-- One AnyValue (scalar branches) as text; kvlists (and arrays nested in arrays) as JSON text.
CREATE OR REPLACE TEMP MACRO otlp_scalar_text(v) AS
    coalesce(v.stringValue, v.intValue, v.boolValue, v.doubleValue, v.bytesValue,
             CAST(v.kvlistValue AS VARCHAR), CAST(v.arrayValue AS VARCHAR));

-- OTLP attributes as a list of {key, value, values}: value is the scalar as text, values the
-- array's elements as text (NULL for a scalar). A list, not a MAP: building a MAP per span costs
-- more than parsing the JSON, and OTLP files can repeat a key (a MAP refuses that).
CREATE OR REPLACE TEMP MACRO otlp_attribute_list(attrs) AS
    list_transform(coalesce(attrs, []), lambda a: {
        'key': a.key,
        'value': CASE WHEN a.value.arrayValue IS NULL THEN otlp_scalar_text(a.value) END,
        'values': CASE WHEN a.value.arrayValue IS NOT NULL
            THEN list_transform(coalesce(a.value.arrayValue.values, []), lambda x: otlp_scalar_text(x)) END});

-- attr(attributes, 'state.key'): one scalar attribute as text (first one when a key repeats).
CREATE OR REPLACE TEMP MACRO attr(attributes, name) AS
    attributes[list_position(list_transform(attributes, lambda a: a.key), name)].value;

-- attr_list(attributes, 'delegation.constraints.carried'): one array attribute as a list of text.
CREATE OR REPLACE TEMP MACRO attr_list(attributes, name) AS
    attributes[list_position(list_transform(attributes, lambda a: a.key), name)].values;

CREATE OR REPLACE TEMP MACRO otlp_spans(paths) AS TABLE
WITH lines AS (
    SELECT
        filename AS source_file,
        from_json(json, '{"resourceSpans":[{"resource":{"attributes":[{"key":"VARCHAR","value":{"stringValue":"VARCHAR","boolValue":"VARCHAR","intValue":"VARCHAR","doubleValue":"VARCHAR","bytesValue":"VARCHAR","kvlistValue":"JSON","arrayValue":{"values":[{"stringValue":"VARCHAR","boolValue":"VARCHAR","intValue":"VARCHAR","doubleValue":"VARCHAR","bytesValue":"VARCHAR","kvlistValue":"JSON","arrayValue":"JSON"}]}}}]},"scopeSpans":[{"scope":{"name":"VARCHAR","version":"VARCHAR"},"spans":[{"traceId":"VARCHAR","spanId":"VARCHAR","parentSpanId":"VARCHAR","name":"VARCHAR","kind":"VARCHAR","startTimeUnixNano":"UBIGINT","endTimeUnixNano":"UBIGINT","attributes":[{"key":"VARCHAR","value":{"stringValue":"VARCHAR","boolValue":"VARCHAR","intValue":"VARCHAR","doubleValue":"VARCHAR","bytesValue":"VARCHAR","kvlistValue":"JSON","arrayValue":{"values":[{"stringValue":"VARCHAR","boolValue":"VARCHAR","intValue":"VARCHAR","doubleValue":"VARCHAR","bytesValue":"VARCHAR","kvlistValue":"JSON","arrayValue":"JSON"}]}}}],"status":{"code":"VARCHAR","message":"VARCHAR"}}]}]}]}') AS d
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
        otlp_attribute_list(rs.resource.attributes) AS resource_attributes,
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
        otlp_attribute_list(s.attributes) AS attributes
    FROM raw_spans
),
keyed AS (
    SELECT
        *,
        list_transform(attributes, lambda a: a.key) AS k
    FROM mapped
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
        attr(resource_attributes, 'service.name') AS service_name,
        scope_name,
        scope_version,
        source_file,
        attributes,
        resource_attributes,
        attributes[list_position(k, 'gen_ai.conversation.id')].value AS conversation_id,
        attributes[list_position(k, 'gen_ai.tool.name')].value AS tool_name,
        attributes[list_position(k, 'gen_ai.agent.id')].value AS agent_id,
        attributes[list_position(k, 'tool.kind')].value AS tool_kind,
        attributes[list_position(k, 'tool.transport')].value AS transport,
        attributes[list_position(k, 'tool.readback')].value AS readback,
        attributes[list_position(k, 'tool.outcome')].value AS outcome,
        attributes[list_position(k, 'error.type')].value AS error_type,
        attributes[list_position(k, 'state.key')].value AS state_key,
        attributes[list_position(k, 'state.version.read')].value AS state_version_read,
        attributes[list_position(k, 'state.version.expected')].value AS state_version_expected,
        attributes[list_position(k, 'state.version.current')].value AS state_version_current,
        attributes[list_position(k, 'state.version.written')].value AS state_version_written,
        attributes[list_position(k, 'delegation.task_id')].value AS delegation_task_id,
        attributes[list_position(k, 'delegation.origin_task_id')].value AS delegation_origin_task_id,
        attributes[list_position(k, 'delegation.root_task_id')].value AS delegation_root_task_id,
        TRY_CAST(TRY_CAST(attributes[list_position(k, 'delegation.hop')].value AS DOUBLE) AS BIGINT)
            AS delegation_hop,
        coalesce(attributes[list_position(k, 'delegation.constraints.carried')]."values", [])
            AS constraints_carried,
        coalesce(attributes[list_position(k, 'delegation.constraints.waived')]."values", [])
            AS constraints_waived,
        coalesce(attributes[list_position(k, 'delegation.constraints.waiver_reasons')]."values", [])
            AS waiver_reasons,
        attributes[list_position(k, 'objective.task_id')].value AS objective_task_id,
        attributes[list_position(k, 'objective.version')].value AS objective_version,
        attributes[list_position(k, 'policy.version')].value AS policy_version,
        attributes[list_position(k, 'policy.version.current')].value AS policy_version_current,
        attributes[list_position(k, 'idempotency.key_hash')].value AS idempotency_key_hash,
        attributes[list_position(k, 'idempotency.payload_hash')].value AS idempotency_payload_hash,
        attributes[list_position(k, 'idempotency.original_id')].value AS idempotency_original_id,
        coalesce(lower(attributes[list_position(k, 'tool.deduplicated')].value) IN ('true', '1'), false)
            AS deduplicated,
        attributes[list_position(k, 'plan.id')].value AS plan_id,
        TRY_CAST(TRY_CAST(attributes[list_position(k, 'plan.objects_matched')].value AS DOUBLE) AS BIGINT)
            AS plan_objects_matched,
        TRY_CAST(TRY_CAST(attributes[list_position(k, 'plan.changed_count')].value AS DOUBLE) AS BIGINT)
            AS plan_changed_count,
        TRY_CAST(TRY_CAST(attributes[list_position(k, 'plan.outside_target_changed_count')].value AS DOUBLE)
            AS BIGINT) AS plan_outside_target_changed_count,
        attributes[list_position(k, 'plan.binding_moved')].value AS plan_binding_moved
    FROM keyed
)
SELECT coalesce(conversation_id, trace_id) AS run_id, * FROM typed;
