-- spans: the normalized span relation every forensics question reads.
--
-- This file defines DuckDB macros; the loader (telemetry/forensics/loading.py) runs it once per
-- connection, materializes `CREATE TEMP TABLE spans_base AS SELECT * FROM otlp_spans($paths)` with
-- the file list bound as a parameter (Parquet parts written by `ingest` hold the same columns),
-- then runs the part after the `@after spans_base` marker, which defines the view `spans`.
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
--   attribute_keys, attribute_values, attribute_arrays: the same, as three aligned lists (stored)
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

-- The attributes of a span as a list of {key, value, values}: value is a scalar as text (kvlist
-- as JSON), values an array's elements as text (NULL for a scalar). Built from the three aligned
-- lists the table stores (attribute_keys, attribute_values, attribute_arrays) when a query asks for
-- it: building a struct list, or a MAP, for every span costs more than parsing the JSON, and OTLP
-- files can repeat a key, which a MAP refuses.
CREATE OR REPLACE TEMP MACRO otlp_attributes(keys, vals, arrs) AS
    list_transform(range(1, len(keys) + 1), lambda i: {'key': keys[i], 'value': vals[i], 'values': arrs[i]});

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
        otlp_attributes(list_transform(rs.resource.attributes, lambda a: a.key),
                        list_transform(rs.resource.attributes, lambda a: otlp_scalar_text(a.value)),
                        list_transform(rs.resource.attributes, lambda a: CAST(NULL AS VARCHAR[])))
            AS resource_attributes,
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
keyed AS (
    SELECT
        *,
        list_transform(s.attributes, lambda a: a.key) AS attribute_keys,
        list_transform(s.attributes, lambda a: CASE WHEN a.value.arrayValue IS NULL THEN otlp_scalar_text(a.value) END)
            AS attribute_values,
        list_transform(s.attributes, lambda a: CASE WHEN a.value.arrayValue IS NOT NULL
            THEN list_transform(coalesce(a.value.arrayValue."values", []), lambda x: otlp_scalar_text(x)) END)
            AS attribute_arrays
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
        attr(resource_attributes, 'service.name') AS service_name,
        scope_name,
        scope_version,
        source_file,
        attribute_keys,
        attribute_values,
        attribute_arrays,
        resource_attributes,
        attribute_values[list_position(attribute_keys, 'gen_ai.conversation.id')] AS conversation_id,
        attribute_values[list_position(attribute_keys, 'gen_ai.tool.name')] AS tool_name,
        attribute_values[list_position(attribute_keys, 'gen_ai.agent.id')] AS agent_id,
        attribute_values[list_position(attribute_keys, 'tool.kind')] AS tool_kind,
        attribute_values[list_position(attribute_keys, 'tool.transport')] AS transport,
        attribute_values[list_position(attribute_keys, 'tool.readback')] AS readback,
        attribute_values[list_position(attribute_keys, 'tool.outcome')] AS outcome,
        attribute_values[list_position(attribute_keys, 'error.type')] AS error_type,
        attribute_values[list_position(attribute_keys, 'state.key')] AS state_key,
        attribute_values[list_position(attribute_keys, 'state.version.read')] AS state_version_read,
        attribute_values[list_position(attribute_keys, 'state.version.expected')] AS state_version_expected,
        attribute_values[list_position(attribute_keys, 'state.version.current')] AS state_version_current,
        attribute_values[list_position(attribute_keys, 'state.version.written')] AS state_version_written,
        attribute_values[list_position(attribute_keys, 'delegation.task_id')] AS delegation_task_id,
        attribute_values[list_position(attribute_keys, 'delegation.origin_task_id')] AS delegation_origin_task_id,
        attribute_values[list_position(attribute_keys, 'delegation.root_task_id')] AS delegation_root_task_id,
        TRY_CAST(TRY_CAST(attribute_values[list_position(attribute_keys, 'delegation.hop')] AS DOUBLE) AS BIGINT)
            AS delegation_hop,
        coalesce(attribute_arrays[list_position(attribute_keys, 'delegation.constraints.carried')], [])
            AS constraints_carried,
        coalesce(attribute_arrays[list_position(attribute_keys, 'delegation.constraints.waived')], [])
            AS constraints_waived,
        coalesce(attribute_arrays[list_position(attribute_keys, 'delegation.constraints.waiver_reasons')], [])
            AS waiver_reasons,
        attribute_values[list_position(attribute_keys, 'objective.task_id')] AS objective_task_id,
        attribute_values[list_position(attribute_keys, 'objective.version')] AS objective_version,
        attribute_values[list_position(attribute_keys, 'policy.version')] AS policy_version,
        attribute_values[list_position(attribute_keys, 'policy.version.current')] AS policy_version_current,
        attribute_values[list_position(attribute_keys, 'idempotency.key_hash')] AS idempotency_key_hash,
        attribute_values[list_position(attribute_keys, 'idempotency.payload_hash')] AS idempotency_payload_hash,
        attribute_values[list_position(attribute_keys, 'idempotency.original_id')] AS idempotency_original_id,
        coalesce(lower(attribute_values[list_position(attribute_keys, 'tool.deduplicated')]) IN ('true', '1'), false)
            AS deduplicated,
        attribute_values[list_position(attribute_keys, 'plan.id')] AS plan_id,
        TRY_CAST(TRY_CAST(attribute_values[list_position(attribute_keys, 'plan.objects_matched')] AS DOUBLE) AS BIGINT)
            AS plan_objects_matched,
        TRY_CAST(TRY_CAST(attribute_values[list_position(attribute_keys, 'plan.changed_count')] AS DOUBLE) AS BIGINT)
            AS plan_changed_count,
        TRY_CAST(TRY_CAST(attribute_values[list_position(attribute_keys, 'plan.outside_target_changed_count')] AS DOUBLE)
            AS BIGINT) AS plan_outside_target_changed_count,
        attribute_values[list_position(attribute_keys, 'plan.binding_moved')] AS plan_binding_moved
    FROM keyed
)
SELECT coalesce(conversation_id, trace_id) AS run_id, * FROM typed;

-- @after spans_base
-- (The loader runs what follows once `spans_base` exists.) The `spans` view: the stored columns
-- (a temporary table from JSON lines, or the Parquet parts) plus `attributes`, which is computed
-- only when a query selects it.
CREATE OR REPLACE TEMP VIEW spans AS
    SELECT *, otlp_attributes(attribute_keys, attribute_values, attribute_arrays) AS attributes
    FROM spans_base;
