-- spans: the normalized span relation every forensics question reads.
--
-- This file defines DuckDB macros; the loader (telemetry/forensics/_loading.py) runs it once per
-- connection, materializes `CREATE TABLE spans_loaded AS SELECT * FROM otlp_spans($paths)` with
-- the file list bound as a parameter (Parquet parts written by `ingest` hold the same columns),
-- drops copies of a span into `spans_base` (telemetry/forensics/_dedup.py), then runs the part
-- after the `@after spans_base` marker, which defines the view `spans`.
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
--   run_id                  gen_ai.conversation.id when present (on another instrumentation's tool
--                           span, its format's conversation or session id), else the trace id
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
--   error_type (error.type; on a span without it, the exception.type of its first exception
--   event), state_key, state_version_read/expected/current/written, delegation_task_id,
--   delegation_origin_task_id, delegation_root_task_id, delegation_hop (BIGINT),
--   constraints_carried, constraints_waived, waiver_reasons (VARCHAR[]), objective_task_id,
--   objective_version, policy_version, policy_version_current, idempotency_key_hash,
--   idempotency_payload_hash, idempotency_original_id, deduplicated (BOOLEAN), silent_failure
--   (BOOLEAN: tool.silent_failure; NULL when the span does not carry it: an older or another
--   writer, see silent_unconfirmed), plan_id,
--   plan_objects_matched, plan_changed_count, plan_outside_target_changed_count (BIGINT),
--   plan_binding_moved, schedule_id, schedule_event, schedule_tool, schedule_window_seconds (DOUBLE),
--   schedule_fires_at, schedule_in_window (BOOLEAN: schedule.in_window, NULL when absent)
--   tool_kind_source        'recorded' | 'inferred' | 'inferred_from_name' | 'inferred_from_arguments'
--                           | 'ambiguous' | 'undecided' (see the view below)
--   the span-format layer (the view below): span_format ('outcome-telemetry' for our spans, a peer
--   format's name for another instrumentation's tool call, NULL for a span that is no tool call),
--   result_status (a peer tool call's recorded result: 'judged' | 'text' | 'absent' | 'too_large' |
--   'malformed'), arguments_hash (a hash of its arguments, parsed and dumped with sorted keys),
--   arguments_keyed (BOOLEAN: an idempotency key among them), tool_call_id (gen_ai.tool.call.id, or
--   the format's, or the parent LLM span's), arguments_shown, result_shown (the recorded texts, cut
--   to 1,000 characters, only with --show-content; NULL otherwise); on a peer tool call tool_name,
--   agent_id, transport, readback ('unknown'), outcome and tool_kind are filled from its format (a
--   peer span around one of our tool spans has no tool_name: the call is ours)
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

-- The OTLP structure is enforced here, off the fast path where it can be: a container that
-- parsed to NULL (omitted, JSON null, or the wrong type) is looked at in the raw line only then,
-- so well-formed input never pays for a second parse. Every refusal raises an error naming the
-- file; the loader then names the line (telemetry/forensics/_validation.py applies the same rules
-- line by line). otlp_wrong_type(line, path, ok): some value at the wildcard path has a JSON type
-- other than ok or NULL.
CREATE OR REPLACE TEMP MACRO otlp_wrong_type(line, path, ok) AS
    list_bool_or(list_transform(json_type(line, path), lambda t: t NOT IN (ok, 'NULL')));

CREATE OR REPLACE TEMP MACRO otlp_refuse(reason, file) AS
    error('forensics: ' || reason || ' in file "' || file || '"');

-- A time: a decimal integer (string or number) in [0, 2^63 - 1): what a TIMESTAMP_NS holds (DuckDB
-- keeps 2^63 - 1 for infinity, and a span that ends there cannot be typed).
CREATE OR REPLACE TEMP MACRO otlp_time_ok(v) AS
    coalesce(regexp_full_match(v, '[0-9]+') AND TRY_CAST(v AS HUGEINT) < 9223372036854775807, false);

-- otlp_id_problem(trace_id, span_id, parent_span_id): why a span's ids break OTLP (32 and 16 hex,
-- the parent empty or 16 hex), or NULL when they do not.
CREATE OR REPLACE TEMP MACRO otlp_id_problem(trace_id, span_id, parent_span_id) AS
    CASE
        WHEN NOT coalesce(regexp_full_match(trace_id, '[0-9a-fA-F]{32}'), false)
            THEN 'a span''s traceId is not 32 hex characters'
        WHEN NOT coalesce(regexp_full_match(span_id, '[0-9a-fA-F]{16}'), false)
            THEN 'a span''s spanId is not 16 hex characters'
        WHEN NOT coalesce(parent_span_id = '' OR regexp_full_match(parent_span_id, '[0-9a-fA-F]{16}'), true)
            THEN 'a span''s parentSpanId is not empty or 16 hex characters'
    END;

-- otlp_time_problem(in_range, start, end): why a span's times break OTLP, given whether both are
-- integers in [0, 2^63 - 1) (each source tells that its own way: a JSON line's text, a ClickHouse
-- row's numbers); start and end are read only when they are.
CREATE OR REPLACE TEMP MACRO otlp_time_problem(in_range, start_ns, end_ns) AS
    CASE
        WHEN NOT coalesce(in_range, false) THEN 'a span''s startTimeUnixNano or endTimeUnixNano is not an integer in [0, 2^63 - 1)'
        WHEN CAST(end_ns AS UBIGINT) < CAST(start_ns AS UBIGINT) THEN 'a span ends before it starts'
    END;

-- otlp_span_problem(s): why a parsed JSON span's ids or times break OTLP, or NULL when they do
-- not. The ClickHouse path applies the same two rules to its columns (telemetry/forensics/clickhouse/).
CREATE OR REPLACE TEMP MACRO otlp_span_problem(s) AS
    coalesce(otlp_id_problem(s.traceId, s.spanId, s.parentSpanId),
             otlp_time_problem(otlp_time_ok(s.startTimeUnixNano) AND otlp_time_ok(s.endTimeUnixNano),
                               s.startTimeUnixNano, s.endTimeUnixNano));

-- An attribute that is not {key, value: AnyValue}, or whose value has no branch that reads (empty,
-- or an arrayValue that is not an object): its value would silently become NULL. (An arrayValue
-- whose "values" is omitted or not a list reads as an empty array.)
CREATE OR REPLACE TEMP MACRO otlp_bad_attribute(a) AS
    a IS NULL OR a.key IS NULL OR a.value IS NULL
    OR (a.value.arrayValue IS NULL AND otlp_scalar_text(a.value) IS NULL)
    OR (a.value.arrayValue IS NOT NULL
        AND list_bool_or(list_transform(coalesce(a.value.arrayValue."values", []), lambda x: x IS NULL)));

-- An attribute whose array may read as less than the line holds: from_json reads an arrayValue that
-- is not an object as one without "values" (an empty array) and an element that is not an object
-- as one without a value, exactly as it reads {"values": ...} omitted or an element {} (both
-- allowed). Only for such an attribute is the raw line looked at (otlp_array_wrong_type, with the
-- wildcard path of the attribute lists it sits in).
CREATE OR REPLACE TEMP MACRO otlp_array_suspect(a) AS
    a.value.arrayValue IS NOT NULL AND (a.value.arrayValue."values" IS NULL
        OR coalesce(list_bool_or(list_transform(a.value.arrayValue."values",
                                                lambda x: otlp_scalar_text(x) IS NULL)), false));

CREATE OR REPLACE TEMP MACRO otlp_array_wrong_type(line, attributes) AS
    otlp_wrong_type(line, attributes || '[*].value.arrayValue', 'OBJECT')
    OR otlp_wrong_type(line, attributes || '[*].value.arrayValue.values[*]', 'OBJECT');

-- A line with a container that parsed to NULL somewhere: only such a line's raw text is examined.
CREATE OR REPLACE TEMP MACRO otlp_suspicious(d) AS
    coalesce(list_bool_or(list_transform(d.resourceSpans, lambda rs:
        rs.scopeSpans IS NULL OR rs.resource IS NULL OR rs.resource.attributes IS NULL
        OR list_bool_or(list_transform(rs.scopeSpans, lambda ss:
            ss.spans IS NULL OR ss.scope IS NULL
            OR list_bool_or(list_transform(ss.spans, lambda sp: sp.attributes IS NULL)))))), false);

-- otlp_exception_type(events): the exception.type of a span's first event named 'exception' (the
-- OpenTelemetry semantic conventions' exception event; a later one, or its message and stack
-- trace, are never read), as text like an attribute's scalar value; NULL without one.
CREATE OR REPLACE TEMP MACRO otlp_exception_type(events) AS
    list_transform(list_filter(list_filter(events, lambda e: e.name = 'exception')[1].attributes,
                               lambda a: a.key = 'exception.type'),
                   lambda a: coalesce(a.value.stringValue, a.value.intValue, a.value.boolValue,
                                      a.value.doubleValue))[1];

-- otlp_typed('name'): the stored span columns from the relation `name` (a table, a view or a CTE
-- in scope) of checked spans, with the columns source_file, resource_attributes, service_name,
-- scope_name, scope_version, s (the span: traceId, spanId, parentSpanId, name, kind, status {code,
-- message}, startTimeUnixNano, endTimeUnixNano: decimal text or integers, already checked),
-- raised (it recorded an exception event), exception_type (the first such event's, or NULL),
-- attribute_keys, attribute_values and attribute_arrays.
-- Every source (JSON lines here, ClickHouse in telemetry/forensics/clickhouse/) goes through it,
-- so one set of rules types them. Each source hands over what it already has at hand (a JSON
-- resource's service name once per resource, a ClickHouse row's times as numbers), so no span is
-- taken apart again here; each time is read once.
CREATE OR REPLACE TEMP MACRO otlp_typed(checked) AS TABLE
WITH timed AS (
    SELECT *, CAST(s.startTimeUnixNano AS UBIGINT) AS start_ns, CAST(s.endTimeUnixNano AS UBIGINT) AS end_ns
    FROM query_table(checked)
),
typed AS (
    SELECT
        lower(s.traceId) AS trace_id,
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
        start_ns AS start_time_unix_nano,
        end_ns AS end_time_unix_nano,
        make_timestamp_ns(CAST(start_ns AS BIGINT)) AS start_time,
        make_timestamp_ns(CAST(end_ns AS BIGINT)) AS end_time,
        (CAST(end_ns AS DOUBLE) - CAST(start_ns AS DOUBLE)) / 1e6 AS duration_ms,
        service_name,
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
        coalesce(attribute_values[list_position(attribute_keys, 'error.type')], exception_type) AS error_type,
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
        lower(attribute_values[list_position(attribute_keys, 'tool.silent_failure')]) IN ('true', '1')
            AS silent_failure,
        attribute_values[list_position(attribute_keys, 'plan.id')] AS plan_id,
        TRY_CAST(TRY_CAST(attribute_values[list_position(attribute_keys, 'plan.objects_matched')] AS DOUBLE) AS BIGINT)
            AS plan_objects_matched,
        TRY_CAST(TRY_CAST(attribute_values[list_position(attribute_keys, 'plan.changed_count')] AS DOUBLE) AS BIGINT)
            AS plan_changed_count,
        TRY_CAST(TRY_CAST(attribute_values[list_position(attribute_keys, 'plan.outside_target_changed_count')] AS DOUBLE)
            AS BIGINT) AS plan_outside_target_changed_count,
        attribute_values[list_position(attribute_keys, 'plan.binding_moved')] AS plan_binding_moved,
        attribute_values[list_position(attribute_keys, 'schedule.id')] AS schedule_id,
        attribute_values[list_position(attribute_keys, 'schedule.event')] AS schedule_event,
        attribute_values[list_position(attribute_keys, 'schedule.tool')] AS schedule_tool,
        TRY_CAST(attribute_values[list_position(attribute_keys, 'schedule.window_seconds')] AS DOUBLE)
            AS schedule_window_seconds,
        attribute_values[list_position(attribute_keys, 'schedule.fires_at')] AS schedule_fires_at,
        lower(attribute_values[list_position(attribute_keys, 'schedule.in_window')]) IN ('true', '1')
            AS schedule_in_window,
        -- The span recorded an exception event: a peer tool span that raised with its status left
        -- UNSET is a transport error (the span-format layer); its type is error_type's fallback.
        raised
    FROM timed
)
SELECT coalesce(conversation_id, trace_id) AS run_id, * FROM typed;

CREATE OR REPLACE TEMP MACRO otlp_spans(paths, max_line_bytes := 16777216) AS TABLE
WITH lines AS (
    SELECT
        filename AS source_file,
        json AS line,
        from_json(json, '{"resourceSpans":[{"resource":{"attributes":[{"key":"VARCHAR","value":{"stringValue":"VARCHAR","boolValue":"VARCHAR","intValue":"VARCHAR","doubleValue":"VARCHAR","bytesValue":"VARCHAR","kvlistValue":"JSON","arrayValue":{"values":[{"stringValue":"VARCHAR","boolValue":"VARCHAR","intValue":"VARCHAR","doubleValue":"VARCHAR","bytesValue":"VARCHAR","kvlistValue":"JSON","arrayValue":"JSON"}]}}}]},"scopeSpans":[{"scope":{"name":"VARCHAR","version":"VARCHAR"},"spans":[{"traceId":"VARCHAR","spanId":"VARCHAR","parentSpanId":"VARCHAR","name":"VARCHAR","kind":"VARCHAR","startTimeUnixNano":"VARCHAR","endTimeUnixNano":"VARCHAR","attributes":[{"key":"VARCHAR","value":{"stringValue":"VARCHAR","boolValue":"VARCHAR","intValue":"VARCHAR","doubleValue":"VARCHAR","bytesValue":"VARCHAR","kvlistValue":"JSON","arrayValue":{"values":[{"stringValue":"VARCHAR","boolValue":"VARCHAR","intValue":"VARCHAR","doubleValue":"VARCHAR","bytesValue":"VARCHAR","kvlistValue":"JSON","arrayValue":"JSON"}]}}}],"status":{"code":"VARCHAR","message":"VARCHAR"},"events":[{"name":"VARCHAR","attributes":[{"key":"VARCHAR","value":{"stringValue":"VARCHAR","boolValue":"VARCHAR","intValue":"VARCHAR","doubleValue":"VARCHAR"}}]}]}]}]}]}') AS d
    FROM read_ndjson_objects(paths, filename = true, maximum_object_size = max_line_bytes)
),
-- Every check is a filter that is true or raises: the parsed data flows on untouched (a CASE that
-- returned the checked struct would copy every nested value once per check level). Containers that
-- parsed to NULL (omitted, null, or the wrong type) send the line to a look at its raw text; a
-- line with none (what our exporter writes) is parsed once.
checked AS (
    SELECT source_file, line, d.resourceSpans AS resource_spans
    FROM lines
    WHERE CASE
        WHEN strlen(CAST(line AS VARCHAR)) > max_line_bytes
            THEN otlp_refuse('a line is longer than --max-line-bytes (' || max_line_bytes || ' bytes)', source_file)
        WHEN d.resourceSpans IS NULL THEN otlp_refuse(
            'a line is JSON but not an OTLP TracesData object (no "resourceSpans" array)', source_file)
        WHEN NOT otlp_suspicious(d) THEN true
        WHEN otlp_wrong_type(line, '$.resourceSpans[*]', 'OBJECT')
            THEN otlp_refuse('an element of "resourceSpans" is not an object', source_file)
        WHEN otlp_wrong_type(line, '$.resourceSpans[*].scopeSpans', 'ARRAY')
            THEN otlp_refuse('"scopeSpans" is not a list', source_file)
        WHEN otlp_wrong_type(line, '$.resourceSpans[*].resource', 'OBJECT')
            THEN otlp_refuse('"resource" is not an object', source_file)
        WHEN otlp_wrong_type(line, '$.resourceSpans[*].resource.attributes', 'ARRAY')
            THEN otlp_refuse('the resource "attributes" is not a list', source_file)
        WHEN otlp_wrong_type(line, '$.resourceSpans[*].scopeSpans[*]', 'OBJECT')
            THEN otlp_refuse('an element of "scopeSpans" is not an object', source_file)
        WHEN otlp_wrong_type(line, '$.resourceSpans[*].scopeSpans[*].spans', 'ARRAY')
            THEN otlp_refuse('"spans" is not a list', source_file)
        WHEN otlp_wrong_type(line, '$.resourceSpans[*].scopeSpans[*].scope', 'OBJECT')
            THEN otlp_refuse('"scope" is not an object', source_file)
        WHEN otlp_wrong_type(line, '$.resourceSpans[*].scopeSpans[*].spans[*].attributes', 'ARRAY')
            THEN otlp_refuse('a span''s "attributes" is not a list', source_file)
        ELSE true
    END
),
-- Unnesting a NULL list gives no rows, as an empty one does, so the lists are unnested as parsed:
-- coalesce(list, []) copies every nested value in it (around the spans, a large share of the
-- read). The attribute lists below use a CASE instead, which passes
-- the branch's vector on untouched when a whole chunk takes one branch.
resources AS (
    SELECT source_file, line, unnest(resource_spans) AS rs FROM checked
),
scopes AS (
    SELECT
        source_file,
        line,
        otlp_attributes(list_transform(rs.resource.attributes, lambda a: a.key),
                        list_transform(rs.resource.attributes, lambda a: otlp_scalar_text(a.value)),
                        list_transform(rs.resource.attributes, lambda a: CAST(NULL AS VARCHAR[])))
            AS resource_attributes,
        attr(resource_attributes, 'service.name') AS service_name,
        unnest(rs.scopeSpans) AS ss
    FROM resources
    WHERE CASE
        WHEN rs IS NULL THEN otlp_refuse('an element of "resourceSpans" is not an object', source_file)
        WHEN list_bool_or(list_transform(rs.resource.attributes, lambda a: otlp_bad_attribute(a)))
            THEN otlp_refuse('a resource attribute is not {"key": ..., "value": {...}} with a value', source_file)
        WHEN list_bool_or(list_transform(rs.resource.attributes, lambda a: otlp_array_suspect(a)))
             AND otlp_array_wrong_type(line, '$.resourceSpans[*].resource.attributes')
            THEN otlp_refuse('a resource attribute''s array is not {"values": [{...}, ...]}', source_file)
        ELSE true
    END
),
raw_spans AS (
    SELECT source_file, line, resource_attributes, service_name, ss.scope.name AS scope_name,
           ss.scope.version AS scope_version, unnest(ss.spans) AS s
    FROM scopes
    WHERE CASE WHEN ss IS NULL THEN otlp_refuse('an element of "scopeSpans" is not an object', source_file)
               ELSE true END
),
keyed AS (
    SELECT
        source_file,
        line,
        resource_attributes,
        service_name,
        scope_name,
        scope_version,
        s,
        coalesce(list_contains(list_transform(s.events, lambda e: e.name), 'exception'), false) AS raised,
        otlp_exception_type(s.events) AS exception_type,
        CASE WHEN s.attributes IS NULL THEN [] ELSE list_transform(s.attributes, lambda a: a.key) END
            AS attribute_keys,
        CASE WHEN s.attributes IS NULL THEN [] ELSE list_transform(s.attributes, lambda a:
            CASE WHEN a.value.arrayValue IS NULL THEN otlp_scalar_text(a.value) END) END AS attribute_values
    FROM raw_spans
),
with_flag AS (
    SELECT *, list_count(attribute_values) = len(attribute_keys) AS all_scalar FROM keyed
),
-- Arrays: only a span with an attribute that has no scalar value (an array, or a bad attribute)
-- walks its attributes again; for the rest (every attribute a scalar, most spans) the arrays are
-- all NULL and no element can be bad, so the list is padded without a walk (cheaper than
-- building both lists for every span).
arrays AS (
    SELECT
        *,
        CASE WHEN all_scalar THEN list_resize(CAST([] AS VARCHAR[][]), len(attribute_keys))
            ELSE coalesce(list_transform(s.attributes, lambda a: CASE WHEN a.value.arrayValue IS NOT NULL
                THEN list_transform(coalesce(a.value.arrayValue."values", []), lambda x: otlp_scalar_text(x)) END), [])
        END AS attribute_arrays,
        CASE WHEN all_scalar THEN [] ELSE flatten(list_transform(s.attributes, lambda a: a.value.arrayValue."values"))
        END AS array_elements,
        CASE WHEN all_scalar THEN false ELSE coalesce(list_bool_or(list_transform(s.attributes, lambda a: otlp_array_suspect(a))), false)
        END AS array_suspect
    FROM with_flag
),
-- The span checks, on the lists just built (cheaper than a second walk over the attributes): an
-- attribute is bad when it has no key (or is not an object), or neither a scalar value nor an
-- array reads from it (exactly one of attribute_values[i], attribute_arrays[i] is set for a good
-- one), or an element of its array is not an object. A NULL span (not an object) is named as
-- what it is; the id and time rules are otlp_span_problem's. A span without attributes has three
-- empty lists (not NULL).
valid AS (
    SELECT * EXCLUDE (line, all_scalar, array_elements, array_suspect)
    FROM arrays
    WHERE CASE
        WHEN s IS NULL THEN otlp_refuse('an element of "spans" is not an object', source_file)
        WHEN otlp_span_problem(s) IS NOT NULL THEN otlp_refuse(otlp_span_problem(s), source_file)
        WHEN list_count(attribute_keys) < len(attribute_keys)
             OR list_count(attribute_values) + list_count(attribute_arrays) < len(attribute_keys)
             OR list_count(array_elements) < len(array_elements)
            THEN otlp_refuse('a span attribute is not {"key": ..., "value": {...}} with a value', source_file)
        WHEN array_suspect AND otlp_array_wrong_type(line, '$.resourceSpans[*].scopeSpans[*].spans[*].attributes')
            THEN otlp_refuse('a span attribute''s array is not {"values": [{...}, ...]}', source_file)
        ELSE true
    END
)
SELECT * FROM otlp_typed('valid');

-- The tool kind a span without tool.kind implies, from the attributes that decide it: only
-- state.version.read: read; state.version.expected or .written: write; any delegation.*:
-- delegate; policy.version (a send names the policy it used): send. NULL when none decides it or
-- more than one kind is named (tool_kind_source then says which).
CREATE OR REPLACE TEMP MACRO inferred_tool_kind(rd, wr, dl, pv) AS
    CASE WHEN CAST(rd AS INT) + CAST(wr AS INT) + CAST(dl AS INT) + CAST(pv AS INT) <> 1 THEN NULL
         WHEN rd THEN 'read' WHEN wr THEN 'write' WHEN dl THEN 'delegate' ELSE 'send' END;

-- peer_plain(v): a value as its format meant it. MLflow stores every attribute JSON-encoded
-- ('"TOOL"'), so a value that is one JSON string is decoded; anything else is kept as it is.
CREATE OR REPLACE TEMP MACRO peer_plain(v) AS
    CASE WHEN length(v) >= 2 AND starts_with(v, '"') AND ends_with(v, '"') AND json_valid(v)
         THEN coalesce(json_extract_string(v, '$'), v) ELSE v END;

-- peer_token(v): an error type (error.type, else an exception event's exception.type) as an outcome
-- code: snake_case, at most 64 characters ('ValueError' -> 'value_error'); NULL when nothing is left.
CREATE OR REPLACE TEMP MACRO peer_token(v) AS
    nullif(left(trim(regexp_replace(lower(regexp_replace(v, '([a-z0-9])([A-Z])', '\1_\2', 'g')),
                                    '[^a-z0-9_]+', '_', 'g'), '_'), 64), '');

-- peer_object(keys, vals, wanted): the attributes named in `wanted` as one JSON object text
-- (a logfire span records each argument as its own attribute).
CREATE OR REPLACE TEMP MACRO peer_object(keys, vals, wanted) AS
    '{' || array_to_string(list_transform(
        list_filter(range(1, len(keys) + 1), lambda i: list_contains(wanted, keys[i]) AND vals[i] IS NOT NULL),
        lambda i: CAST(to_json(keys[i]) AS VARCHAR) || ':' || CAST(to_json(vals[i]) AS VARCHAR)), ',') || '}';

-- --tool-spans: the selectors the user gave (telemetry/forensics/_peers.py inserts them with bound
-- values; empty without the option). A span no format marks is a tool call of format 'selected'
-- when its name matches name_glob (GLOB) and it has attribute_key (its value matching the glob
-- attribute_value when set);
-- the first matching selector (by position) says where its tool name, arguments and result are.
CREATE TEMP TABLE IF NOT EXISTS tool_span_selection (
    position INTEGER, name_glob VARCHAR, attribute_key VARCHAR, attribute_value VARCHAR, tool_name_key VARCHAR,
    arguments_keys VARCHAR[], result_key VARCHAR, call_id_key VARCHAR, run_key VARCHAR, agent_key VARCHAR);

-- @after spans_base
-- (The loader runs what follows once `spans_base` exists: the loaded spans, one row per
-- (trace_id, span_id) after deduplication.)
--
-- The span-format layer: tool calls other instrumentations wrote (telemetry/_span_formats.py says
-- where each format keeps a call's facts; a test checks the keys below against it). Only spans
-- our decorator did not write (no tool.transport) are looked at, and only those that carry a
-- format's marker key, or code.function, or that a --tool-spans selector matches, are kept, in
-- the table `peer_spans`: one row per such span with its format, whether it is a tool call (or
-- why it was not understood), and the call's facts. The Python functions peer_result,
-- peer_arguments and peer_name_kind (telemetry/forensics/_peers.py) run here, once per peer tool
-- span with a recorded result, arguments or a name (each remembers the short texts it has seen),
-- never per question, and never for our own spans. The scans only a --tool-spans selection needs
-- are left out without one (the variable tool_span_selectors, set by peers.install, is folded to a
-- constant). Recorded texts stay in the span attributes: only their
-- verdict, status and hash are kept, and the text itself only with --show-content (cut to
-- 1,000 characters).
CREATE OR REPLACE TEMP TABLE peer_spans AS
WITH candidates AS (
    SELECT trace_id, span_id, parent_span_id, name, status_code, error_type, coalesce(raised, false) AS raised,
           conversation_id, start_time_unix_nano, end_time_unix_nano, attribute_keys, attribute_values,
           attribute_values[list_position(attribute_keys, 'error.type')] IS NULL AND error_type IS NOT NULL
               AS error_type_from_event,
           peer_plain(attribute_values[list_position(attribute_keys, 'gen_ai.operation.name')]) AS m_genai,
           peer_plain(attribute_values[list_position(attribute_keys, 'openinference.span.kind')]) AS m_openinference,
           peer_plain(attribute_values[list_position(attribute_keys, 'traceloop.span.kind')]) AS m_traceloop,
           peer_plain(attribute_values[list_position(attribute_keys, 'langfuse.observation.type')]) AS m_langfuse,
           peer_plain(attribute_values[list_position(attribute_keys, 'mlflow.spanType')]) AS m_mlflow,
           attribute_values[list_position(attribute_keys, 'code.function')] AS code_function
    FROM spans_base
    WHERE transport IS NULL
      AND list_has_any(attribute_keys, ['gen_ai.operation.name', 'openinference.span.kind', 'traceloop.span.kind',
                                        'langfuse.observation.type', 'mlflow.spanType', 'code.function'])
    UNION ALL
    -- Spans only a selector can make tool calls (no marker key, no code.function): only when one is given.
    SELECT trace_id, span_id, parent_span_id, name, status_code, error_type, coalesce(raised, false) AS raised,
           conversation_id, start_time_unix_nano, end_time_unix_nano, attribute_keys, attribute_values,
           attribute_values[list_position(attribute_keys, 'error.type')] IS NULL AND error_type IS NOT NULL,
           NULL, NULL, NULL, NULL, NULL, NULL
    FROM spans_base
    WHERE coalesce(getvariable('tool_span_selectors'), 0) > 0 AND transport IS NULL
      AND NOT list_has_any(attribute_keys, ['gen_ai.operation.name', 'openinference.span.kind', 'traceloop.span.kind',
                                            'langfuse.observation.type', 'mlflow.spanType', 'code.function'])
),
marked AS (
    SELECT *,
           CASE WHEN m_genai = 'execute_tool' THEN 'genai'
                WHEN m_openinference = 'TOOL' THEN 'openinference'
                WHEN m_traceloop = 'tool' THEN 'traceloop'
                WHEN m_langfuse = 'tool' THEN 'langfuse'
                WHEN m_mlflow = 'TOOL' THEN 'mlflow' END AS tool_format,
           -- the first format whose marker key the span has (its marker names another kind of span)
           CASE WHEN list_contains(attribute_keys, 'gen_ai.operation.name') THEN 'genai'
                WHEN list_contains(attribute_keys, 'openinference.span.kind') THEN 'openinference'
                WHEN list_contains(attribute_keys, 'traceloop.span.kind') THEN 'traceloop'
                WHEN list_contains(attribute_keys, 'langfuse.observation.type') THEN 'langfuse'
                WHEN list_contains(attribute_keys, 'mlflow.spanType') THEN 'mlflow' END AS marker_format,
           (list_contains(attribute_keys, 'gen_ai.operation.name') AND m_genai IS NULL)
               OR (list_contains(attribute_keys, 'openinference.span.kind') AND m_openinference IS NULL)
               OR (list_contains(attribute_keys, 'traceloop.span.kind') AND m_traceloop IS NULL)
               OR (list_contains(attribute_keys, 'langfuse.observation.type') AND m_langfuse IS NULL)
               OR (list_contains(attribute_keys, 'mlflow.spanType') AND m_mlflow IS NULL) AS marker_not_text
    FROM candidates
),
-- The spans --tool-spans selects (none without it), read apart from `marked` so that the spans
-- with their attribute lists are streamed through once, never held for a second reader.
selected AS (
    SELECT b.trace_id, b.span_id, s.tool_name_key, s.arguments_keys, s.result_key, s.call_id_key, s.run_key,
           s.agent_key
    FROM spans_base b
    JOIN tool_span_selection s
      ON (s.name_glob IS NULL OR b.name GLOB s.name_glob)
     AND (s.attribute_key IS NULL OR (list_contains(b.attribute_keys, s.attribute_key)
          AND (s.attribute_value IS NULL
               OR b.attribute_values[list_position(b.attribute_keys, s.attribute_key)] GLOB s.attribute_value)))
    WHERE coalesce(getvariable('tool_span_selectors'), 0) > 0 AND b.transport IS NULL
      AND NOT coalesce(peer_plain(b.attribute_values[list_position(b.attribute_keys, 'gen_ai.operation.name')]) = 'execute_tool'
                       OR peer_plain(b.attribute_values[list_position(b.attribute_keys, 'openinference.span.kind')]) = 'TOOL'
                       OR peer_plain(b.attribute_values[list_position(b.attribute_keys, 'traceloop.span.kind')]) = 'tool'
                       OR peer_plain(b.attribute_values[list_position(b.attribute_keys, 'langfuse.observation.type')]) = 'tool'
                       OR peer_plain(b.attribute_values[list_position(b.attribute_keys, 'mlflow.spanType')]) = 'TOOL', false)
    QUALIFY row_number() OVER (PARTITION BY b.trace_id, b.span_id ORDER BY s.position) = 1
),
facts AS (
    SELECT m.*, coalesce(m.tool_format, CASE WHEN s.span_id IS NOT NULL THEN 'selected' END) AS call_format,
           s.tool_name_key, s.arguments_keys, s.result_key, s.call_id_key, s.run_key, s.agent_key
    FROM marked m LEFT JOIN selected s ON s.trace_id = m.trace_id AND s.span_id = m.span_id
),
-- Each call's facts, without the attribute lists.
calls AS (
    SELECT * EXCLUDE (named, attribute_keys, attribute_values, tool_name_key, arguments_keys, result_key, call_id_key,
                      run_key, agent_key, m_genai, m_openinference, m_traceloop, m_langfuse, m_mlflow),
           coalesce(nullif(named, ''), nullif(CASE WHEN starts_with(name, 'execute_tool ') THEN substr(name, 14)
                                                   ELSE name END, '')) AS tool_name,
           CASE WHEN nullif(named, '') IS NOT NULL THEN 'attribute' ELSE 'span name' END AS tool_name_source,
           peer_plain(attribute_values[list_position(attribute_keys, run_key_found)]) AS run_value
    FROM (
    SELECT *,
           peer_plain(CASE call_format
               WHEN 'genai' THEN attribute_values[list_position(attribute_keys, 'gen_ai.tool.name')]
               WHEN 'openinference' THEN attribute_values[list_position(attribute_keys, 'tool.name')]
               WHEN 'traceloop' THEN attribute_values[list_position(attribute_keys, 'traceloop.entity.name')]
               WHEN 'selected' THEN coalesce(attribute_values[list_position(attribute_keys, tool_name_key)],
                                             code_function) END) AS named,
           CASE call_format
               WHEN 'genai' THEN coalesce(attribute_values[list_position(attribute_keys, 'gen_ai.tool.call.arguments')],
                                          attribute_values[list_position(attribute_keys, 'tool_arguments')])
               WHEN 'openinference' THEN attribute_values[list_position(attribute_keys, 'input.value')]
               WHEN 'traceloop' THEN attribute_values[list_position(attribute_keys, 'traceloop.entity.input')]
               WHEN 'langfuse' THEN attribute_values[list_position(attribute_keys, 'langfuse.observation.input')]
               WHEN 'mlflow' THEN attribute_values[list_position(attribute_keys, 'mlflow.spanInputs')]
               WHEN 'selected' THEN CASE
                   WHEN len(arguments_keys) = 1 THEN attribute_values[list_position(attribute_keys, arguments_keys[1])]
                   WHEN len(arguments_keys) > 1 THEN peer_object(attribute_keys, attribute_values, arguments_keys)
                   WHEN json_valid(attribute_values[list_position(attribute_keys, 'logfire.json_schema')])
                       THEN peer_object(attribute_keys, attribute_values, list_filter(
                           json_keys(attribute_values[list_position(attribute_keys, 'logfire.json_schema')], '$.properties'),
                           lambda k: k <> 'return')) END END AS arguments_text,
           CASE call_format
               WHEN 'genai' THEN coalesce(attribute_values[list_position(attribute_keys, 'gen_ai.tool.call.result')],
                                          attribute_values[list_position(attribute_keys, 'tool_response')])
               WHEN 'openinference' THEN attribute_values[list_position(attribute_keys, 'output.value')]
               WHEN 'traceloop' THEN attribute_values[list_position(attribute_keys, 'traceloop.entity.output')]
               WHEN 'langfuse' THEN attribute_values[list_position(attribute_keys, 'langfuse.observation.output')]
               WHEN 'mlflow' THEN attribute_values[list_position(attribute_keys, 'mlflow.spanOutputs')]
               WHEN 'selected' THEN attribute_values[list_position(attribute_keys, coalesce(result_key, 'return'))]
               END AS result_text,
           peer_plain(CASE call_format
               WHEN 'genai' THEN attribute_values[list_position(attribute_keys, 'gen_ai.tool.call.id')]
               WHEN 'openinference' THEN attribute_values[list_position(attribute_keys, 'tool_call.id')]
               WHEN 'selected' THEN attribute_values[list_position(attribute_keys, call_id_key)] END) AS recorded_call_id,
           CASE call_format
               WHEN 'genai' THEN CASE WHEN attribute_values[list_position(attribute_keys, 'gen_ai.conversation.id')] IS NOT NULL
                                      THEN 'gen_ai.conversation.id' END
               WHEN 'openinference' THEN CASE WHEN attribute_values[list_position(attribute_keys, 'session.id')] IS NOT NULL
                                              THEN 'session.id' END
               WHEN 'langfuse' THEN CASE WHEN attribute_values[list_position(attribute_keys, 'langfuse.session.id')] IS NOT NULL
                                         THEN 'langfuse.session.id' END
               WHEN 'mlflow' THEN CASE WHEN attribute_values[list_position(attribute_keys, 'mlflow.traceRequestId')] IS NOT NULL
                                       THEN 'mlflow.traceRequestId' END
               WHEN 'selected' THEN CASE WHEN attribute_values[list_position(attribute_keys, run_key)] IS NOT NULL
                                         THEN run_key END END AS run_key_found,
           peer_plain(CASE call_format
               WHEN 'genai' THEN coalesce(attribute_values[list_position(attribute_keys, 'gen_ai.agent.id')],
                                          attribute_values[list_position(attribute_keys, 'gen_ai.agent.name')])
               WHEN 'selected' THEN attribute_values[list_position(attribute_keys, agent_key)] END) AS recorded_agent,
           lower(attribute_values[list_position(attribute_keys, 'gen_ai.tool.status')]) AS tool_status
    FROM facts
    )
),
-- The verdicts come back as one text each ('status:outcome', 'status:hash:keyed:kind'): a struct
-- per row costs DuckDB more than the verdict itself. Each function runs once per row that has its
-- input (a test counts the calls).
judged AS (
    SELECT *, CASE WHEN call_format IS NOT NULL AND tool_name IS NOT NULL THEN peer_name_kind(tool_name) END AS name_kind,
           CASE WHEN result_text IS NOT NULL THEN peer_result(result_text) END AS verdict,
           CASE WHEN arguments_text IS NOT NULL THEN peer_arguments(arguments_text) END AS args
    FROM calls
)
SELECT
    trace_id, span_id,
    coalesce(call_format, marker_format) AS span_format,
    call_format IS NOT NULL AND tool_name IS NOT NULL AS is_tool_call,
    CASE WHEN call_format IS NOT NULL AND tool_name IS NULL THEN 'no tool name (no name attribute and an empty span name)'
         WHEN call_format IS NULL AND marker_not_text THEN 'its format''s marker attribute is not a text value'
         END AS not_understood,
    call_format IS NULL AND marker_format IS NULL AND code_function IS NOT NULL AS function_span,
    false AS around_ours,
    CASE WHEN call_format IS NOT NULL THEN tool_name END AS tool_name,
    CASE WHEN call_format IS NOT NULL THEN tool_name_source END AS tool_name_source,
    parent_span_id, start_time_unix_nano,
    recorded_call_id AS call_id,
    CASE WHEN recorded_call_id IS NOT NULL THEN 'attribute' END AS call_id_source,
    run_value AS run_id,
    CASE WHEN call_format IS NULL THEN NULL WHEN run_value IS NOT NULL THEN run_key_found
         WHEN conversation_id IS NOT NULL THEN 'gen_ai.conversation.id' ELSE 'trace id' END AS run_source,
    recorded_agent AS agent_id,
    CASE WHEN status_code = 'error' OR error_type IS NOT NULL OR tool_status = 'error' OR raised THEN 'error' ELSE 'ok' END
        AS transport,
    CASE WHEN status_code = 'error' OR error_type IS NOT NULL OR tool_status = 'error' OR raised
         THEN coalesce(peer_token(error_type), 'error') ELSE nullif(split_part(verdict, ':', 2), '') END AS outcome,
    CASE WHEN call_format IS NULL OR error_type IS NULL THEN NULL WHEN error_type_from_event THEN 'exception event'
         ELSE 'error.type' END AS error_type_source,
    CASE WHEN call_format IS NULL THEN NULL WHEN result_text IS NULL OR result_text = '' THEN 'absent'
         ELSE split_part(verdict, ':', 1) END AS result_status,
    nullif(split_part(args, ':', 1), '') AS arguments_status,
    nullif(split_part(args, ':', 2), '') AS arguments_hash,
    coalesce(split_part(args, ':', 3) = '1', false) AS arguments_keyed,
    coalesce(name_kind, nullif(split_part(args, ':', 4), '')) AS tool_kind,
    CASE WHEN name_kind IS NOT NULL THEN 'inferred_from_name'
         WHEN nullif(split_part(args, ':', 4), '') IS NOT NULL THEN 'inferred_from_arguments' END AS tool_kind_source,
    CASE WHEN coalesce(getvariable('show_content'), false) THEN left(arguments_text, 1000) END AS arguments_shown,
    CASE WHEN coalesce(getvariable('show_content'), false) THEN left(result_text, 1000) END AS result_shown
FROM judged;

-- A framework's tool span around a call our decorator recorded too (pydantic-ai's execute_tool
-- span around an instrumented tool, one of our integrations inside a traced framework) is the
-- same call: our span, its child, tells it, so the framework's is no tool call of its own
-- (around_ours; observe_tool_spans skips it the same way), and the view leaves its tool_name
-- (gen_ai.tool.name, read for every span) empty so the call is not counted twice.
UPDATE peer_spans SET is_tool_call = false, around_ours = true, tool_name = NULL, transport = NULL, outcome = NULL,
                      error_type_source = NULL,
                      run_id = NULL, agent_id = NULL, call_id = NULL, tool_kind = NULL, tool_kind_source = NULL,
                      result_status = NULL, arguments_hash = NULL, arguments_keyed = false, arguments_shown = NULL,
                      result_shown = NULL
FROM (
    SELECT DISTINCT o.trace_id, o.parent_span_id
    FROM spans_base o
    JOIN (SELECT trace_id, span_id FROM peer_spans WHERE is_tool_call) p
      ON o.trace_id = p.trace_id AND o.parent_span_id = p.span_id
    WHERE o.transport IS NOT NULL
) ours
WHERE peer_spans.trace_id = ours.trace_id AND peer_spans.span_id = ours.parent_span_id;

-- OpenInference writes a tool span without the model's call id: the LLM span that asked for the
-- call has it (llm.output_messages.{i}.message.tool_calls.{j}.tool_call.id, with the function
-- name beside it). A tool span is matched to its parent when that is an LLM span, else to the
-- latest LLM span of its trace that ended before it started and asked for a tool of its name
-- (LangGraph puts the model and the tools in sibling nodes, so the LLM span is a cousin); the
-- k-th tool span of a name matched to an LLM span takes the k-th call of that name in it.
UPDATE peer_spans SET call_id = oi_call_ids.call_id, call_id_source = 'parent LLM span'
FROM (
WITH oi_tools AS (
    SELECT trace_id, span_id, parent_span_id, start_time_unix_nano, tool_name
    FROM peer_spans WHERE span_format = 'openinference' AND is_tool_call AND call_id IS NULL
),
oi_llm_calls AS (
    SELECT trace_id, span_id AS llm_span_id, parent_span_id AS llm_parent_id, end_time_unix_nano AS llm_end,
           CAST(m['i'] AS INTEGER) AS i, CAST(m['j'] AS INTEGER) AS j,
           max(v) FILTER (WHERE m['what'] = 'tool_call.id') AS call_id,
           max(v) FILTER (WHERE m['what'] = 'tool_call.function.name') AS function_name
    FROM (
        SELECT trace_id, span_id, parent_span_id, end_time_unix_nano, v,
               regexp_extract(k, '^llm\.output_messages\.([0-9]+)\.message\.tool_calls\.([0-9]+)\.(tool_call\.id|tool_call\.function\.name)$',
                              ['i', 'j', 'what']) AS m
        FROM (SELECT trace_id, span_id, parent_span_id, end_time_unix_nano,
                     unnest(attribute_keys) AS k, unnest(attribute_values) AS v
              FROM spans_base
              WHERE transport IS NULL AND trace_id IN (SELECT trace_id FROM oi_tools)
                AND peer_plain(attribute_values[list_position(attribute_keys, 'openinference.span.kind')]) = 'LLM')
    )
    WHERE m['i'] <> ''
    GROUP BY ALL
),
oi_assigned AS (
    SELECT t.trace_id, t.span_id, t.tool_name, t.start_time_unix_nano, l.llm_span_id
    FROM oi_tools t
    JOIN (SELECT DISTINCT trace_id, llm_span_id, llm_parent_id, llm_end, function_name FROM oi_llm_calls) l
      ON l.trace_id = t.trace_id AND l.function_name = t.tool_name
     AND (l.llm_span_id = t.parent_span_id OR l.llm_end <= t.start_time_unix_nano)
    QUALIFY row_number() OVER (PARTITION BY t.trace_id, t.span_id
                               ORDER BY l.llm_span_id = t.parent_span_id DESC, l.llm_end DESC, l.llm_span_id) = 1
),
oi_call_ids AS (
    SELECT a.trace_id, a.span_id, c.call_id
    FROM (SELECT *, row_number() OVER (PARTITION BY trace_id, llm_span_id, tool_name
                                       ORDER BY start_time_unix_nano, span_id) AS k FROM oi_assigned) a
    JOIN (SELECT *, row_number() OVER (PARTITION BY trace_id, llm_span_id, function_name ORDER BY i, j) AS k
          FROM oi_llm_calls WHERE call_id IS NOT NULL) c
      ON c.trace_id = a.trace_id AND c.llm_span_id = a.llm_span_id AND c.function_name = a.tool_name AND c.k = a.k
)
SELECT * FROM oi_call_ids
) oi_call_ids
WHERE peer_spans.trace_id = oi_call_ids.trace_id AND peer_spans.span_id = oi_call_ids.span_id;

-- OpenLLMetry (traceloop) names no conversation on a tool span: its run is the workflow span
-- around it (@workflow, traceloop.span.kind = 'workflow'), found by walking up the tool span's
-- parents within its trace (an @agent or @task span may sit between them), at most 64 levels.
-- The workflow span's id is the run id; a tool span with no workflow above it keeps its
-- gen_ai.conversation.id (newer traceloop-sdk releases copy the session id there), else the trace id.
UPDATE peer_spans SET run_id = workflows.workflow_span_id, run_source = 'workflow span'
FROM (
WITH RECURSIVE tools AS MATERIALIZED (
    SELECT trace_id, span_id, parent_span_id
    FROM peer_spans
    WHERE span_format = 'traceloop' AND is_tool_call AND run_id IS NULL AND parent_span_id IS NOT NULL
),
-- The spans of those tools' traces, each with whether it is a workflow span, worked out once:
-- every step up joins this, not every span read.
ancestors AS MATERIALIZED (
    SELECT b.trace_id, b.span_id, b.parent_span_id,
           peer_plain(b.attribute_values[list_position(b.attribute_keys, 'traceloop.span.kind')]) = 'workflow'
               AS is_workflow
    FROM spans_base b
    WHERE b.trace_id IN (SELECT trace_id FROM tools)
),
up(trace_id, span_id, ancestor_id, depth, workflow_span_id) AS (
    SELECT trace_id, span_id, parent_span_id, 0, CAST(NULL AS VARCHAR)
    FROM tools
    UNION ALL
    SELECT u.trace_id, u.span_id, b.parent_span_id, u.depth + 1, CASE WHEN b.is_workflow THEN b.span_id END
    FROM up u JOIN ancestors b ON b.trace_id = u.trace_id AND b.span_id = u.ancestor_id
    WHERE u.workflow_span_id IS NULL AND u.depth < 64
)
SELECT trace_id, span_id, workflow_span_id FROM up WHERE workflow_span_id IS NOT NULL
) workflows
WHERE peer_spans.trace_id = workflows.trace_id AND peer_spans.span_id = workflows.span_id;

-- The `spans` view: every span once, with `attributes` (computed only when a query selects it).
-- Our own spans keep what they recorded; a peer tool span (a row of peer_spans that is a tool
-- call) fills only what its span left empty: tool_name, run_id (the format's conversation or
-- session id, OpenLLMetry's workflow span, else the trace id), agent_id, transport (error when the status is ERROR, error.type
-- is set, gen_ai.tool.status is error or the span recorded an exception event), readback ('unknown': nothing read the state back),
-- outcome (from the recorded result; a transport error gives the error type's token, error.type's
-- or else the first exception event's exception.type, or 'error') and
-- the kind. `tool_kind` is filled where the attributes decide it, else for a peer tool call from
-- its name and then its arguments; `tool_kind_source` says where it came from: 'recorded',
-- 'inferred' (the span's attributes), 'inferred_from_name', 'inferred_from_arguments',
-- 'ambiguous' (attributes of more than one kind) or 'undecided' (nothing decides it).
-- `span_format` is 'outcome-telemetry' for our spans (they carry tool.transport), the peer
-- format of a peer tool call, else NULL (not a tool call). start_time and end_time are made from
-- the nanosecond columns (the same values) rather than read from the spans a second time.
CREATE OR REPLACE TEMP VIEW spans AS
    SELECT * EXCLUDE (raised, inferred, rd, wr, dl, pv, p_trace_id, p_span_id, p_format, p_tool_name, p_call_id, p_run_id,
                      p_agent_id, p_transport, p_outcome, p_result_status, p_arguments_hash, p_arguments_keyed,
                      p_kind, p_kind_source, p_arguments_shown, p_result_shown, p_around_ours)
             REPLACE (coalesce(p_run_id, run_id) AS run_id,
                      CASE WHEN NOT p_around_ours THEN coalesce(tool_name, p_tool_name) END AS tool_name,
                      coalesce(agent_id, p_agent_id) AS agent_id,
                      coalesce(transport, p_transport) AS transport,
                      coalesce(readback, CASE WHEN p_format IS NOT NULL THEN 'unknown' END) AS readback,
                      coalesce(outcome, p_outcome) AS outcome,
                      coalesce(tool_kind, inferred, p_kind) AS tool_kind,
                      make_timestamp_ns(CAST(start_time_unix_nano AS BIGINT)) AS start_time,
                      make_timestamp_ns(CAST(end_time_unix_nano AS BIGINT)) AS end_time),
           CASE WHEN transport IS NOT NULL THEN 'outcome-telemetry' ELSE p_format END AS span_format,
           CASE WHEN tool_kind IS NOT NULL THEN 'recorded' WHEN inferred IS NOT NULL THEN 'inferred'
                WHEN CAST(rd AS INT) + CAST(wr AS INT) + CAST(dl AS INT) + CAST(pv AS INT) > 1 THEN 'ambiguous'
                WHEN p_kind IS NOT NULL THEN p_kind_source
                ELSE 'undecided' END AS tool_kind_source,
           p_result_status AS result_status,
           p_arguments_hash AS arguments_hash,
           coalesce(p_arguments_keyed, false) AS arguments_keyed,
           coalesce(p_call_id, attribute_values[list_position(attribute_keys, 'gen_ai.tool.call.id')]) AS tool_call_id,
           p_arguments_shown AS arguments_shown,
           p_result_shown AS result_shown,
           otlp_attributes(attribute_keys, attribute_values, attribute_arrays) AS attributes
    FROM (
        SELECT *, inferred_tool_kind(rd, wr, dl, pv) AS inferred
        FROM (
            SELECT b.*,
                   b.state_version_read IS NOT NULL AND b.state_version_expected IS NULL
                       AND b.state_version_written IS NULL AS rd,
                   b.state_version_expected IS NOT NULL OR b.state_version_written IS NOT NULL AS wr,
                   b.delegation_task_id IS NOT NULL OR b.delegation_origin_task_id IS NOT NULL
                       OR b.delegation_root_task_id IS NOT NULL OR b.delegation_hop IS NOT NULL AS dl,
                   b.policy_version IS NOT NULL AS pv,
                   p.trace_id AS p_trace_id, p.span_id AS p_span_id,
                   CASE WHEN p.is_tool_call THEN p.span_format END AS p_format,
                   p.tool_name AS p_tool_name, p.call_id AS p_call_id, p.run_id AS p_run_id, p.agent_id AS p_agent_id,
                   p.transport AS p_transport, p.outcome AS p_outcome, p.result_status AS p_result_status,
                   p.arguments_hash AS p_arguments_hash, p.arguments_keyed AS p_arguments_keyed,
                   p.tool_kind AS p_kind, p.tool_kind_source AS p_kind_source,
                   p.arguments_shown AS p_arguments_shown, p.result_shown AS p_result_shown,
                   coalesce(p.around_ours, false) AS p_around_ours
            FROM spans_base b
            LEFT JOIN peer_spans p ON p.trace_id = b.trace_id AND p.span_id = b.span_id
                                  AND (p.is_tool_call OR p.around_ours)
        )
    );

-- Clock skew per service, filled after load (telemetry/forensics/_evidence.py): how far a
-- service's clock is off against the services whose spans are its parents, and the bound within
-- which the order of its spans against another service's is uncertain.
CREATE TEMP TABLE IF NOT EXISTS clock_skew (service_name VARCHAR, relative_to VARCHAR, pairs BIGINT,
                                            violations BIGINT, offset_ns BIGINT, uncertainty_ns BIGINT);

-- order_uncertain(service_a, t_a, service_b, t_b): true when two spans of different services are
-- closer in time than those services' detected skew, so which came first is not known.
CREATE OR REPLACE TEMP MACRO order_uncertain(svc_a, t_a, svc_b, t_b) AS
    coalesce(svc_a, '') <> coalesce(svc_b, '')
    AND abs(CAST(t_a AS HUGEINT) - CAST(t_b AS HUGEINT)) <= (
        SELECT coalesce(sum(uncertainty_ns), 0) FROM clock_skew
        WHERE service_name IN (coalesce(svc_a, ''), coalesce(svc_b, '')));

-- silent_unconfirmed(span_format, silent_failure, transport, outcome, error_type): one of our spans
-- (it carries tool.transport) written without tool.silent_failure (before the attribute existed, or
-- by another writer of our conventions) that the decorator's rule may make a silent failure:
-- transport ok and an outcome decided not ok, that is not a guard's refusal or a pause (both are
-- handed to the caller) nor an exception (an error.type other than the outcome names the
-- exception the caller got). The third part of the rule, that the result did not itself report
-- the failure, is recorded by tool.silent_failure alone: a told failure (an error envelope with
-- the same outcome) looks the same without it. So the questions judge these spans unknown.
CREATE OR REPLACE TEMP MACRO silent_unconfirmed(fmt, silent, transport, outcome, error_type) AS
    coalesce(silent IS NULL AND fmt = 'outcome-telemetry' AND transport = 'ok'
             AND outcome NOT IN ('ok', 'forced', 'rejected_stale_version', 'stale_policy', 'constraint_missing',
                                 'duplicate_request', 'plan_expired', 'plan_binding_moved', 'in_progress',
                                 'deferred', 'approval_required')
             AND coalesce(error_type, outcome) = outcome, false);

-- Delegation tasks (accepted delegation spans; a task retried or recorded twice counts once: its
-- latest span), scoped to a run like everything else. A table: the chain views below and the
-- questions read it several times, and it is small beside the spans. Only tasks with more than
-- one span (found by a hash of run and task: equal hashes of different tasks only send both to
-- the exact ranking) are ranked; the rest are kept as they are.
CREATE OR REPLACE TEMP TABLE delegation_tasks AS
    WITH accepted AS (
        SELECT run_id, agent_id, tool_name, start_time, trace_id, span_id, delegation_task_id,
               delegation_origin_task_id, delegation_root_task_id, delegation_hop, constraints_carried,
               constraints_waived, start_time_unix_nano AS t, hash(run_id, delegation_task_id) AS h
        FROM spans
        WHERE delegation_task_id IS NOT NULL AND coalesce(outcome, 'ok') = 'ok'
    ),
    repeated AS (
        SELECT h FROM accepted GROUP BY h HAVING count(*) > 1
    )
    SELECT * EXCLUDE (t, h) FROM accepted WHERE h NOT IN (SELECT h FROM repeated)
    UNION ALL
    SELECT * EXCLUDE (t, h) FROM (
        SELECT * FROM accepted WHERE h IN (SELECT h FROM repeated)
        QUALIFY row_number() OVER (PARTITION BY run_id, delegation_task_id ORDER BY t DESC, span_id) = 1
    );

-- One row per chain (run, root task): whether its root registration is in the evidence, and the
-- baseline the chain is judged against: the constraints carried at the root's hop, else (root_seen
-- false, or a root without a hop) at the earliest hop present (baseline_hop), by every task there.
CREATE OR REPLACE TEMP TABLE delegation_chains AS
    WITH chains AS (
        SELECT run_id, delegation_root_task_id AS root_task_id,
               bool_or(delegation_task_id = delegation_root_task_id) AS root_seen,
               coalesce(min(delegation_hop) FILTER (WHERE delegation_task_id = delegation_root_task_id),
                        min(delegation_hop)) AS baseline_hop
        FROM delegation_tasks
        WHERE delegation_root_task_id IS NOT NULL
        GROUP BY run_id, delegation_root_task_id
    ),
    baselines AS (
        SELECT t.run_id, t.delegation_root_task_id AS root_task_id,
               list_distinct(flatten(list(t.constraints_carried))) AS baseline_constraints
        FROM delegation_tasks t
        JOIN chains ch ON ch.run_id = t.run_id AND ch.root_task_id = t.delegation_root_task_id
                      AND t.delegation_hop = ch.baseline_hop
        GROUP BY t.run_id, t.delegation_root_task_id
    )
    SELECT ch.run_id, ch.root_task_id, ch.root_seen, ch.baseline_hop, b.baseline_constraints
    FROM chains ch LEFT JOIN baselines b USING (run_id, root_task_id);

-- Gaps: a task whose parent (delegation.origin_task_id) is not in the evidence of its run, while
-- the task is not at its chain's baseline hop. Nothing can be said about what the missing hop
-- carried, so the chain is reported, not joined past.
CREATE OR REPLACE TEMP VIEW delegation_gaps AS
    SELECT t.run_id, t.delegation_root_task_id AS root_task_id,
           t.delegation_origin_task_id AS missing_task_id, t.delegation_task_id AS task_id,
           t.delegation_hop AS hop, t.trace_id, t.span_id
    FROM delegation_tasks t
    JOIN delegation_chains ch ON ch.run_id = t.run_id AND ch.root_task_id = t.delegation_root_task_id
    WHERE t.delegation_task_id <> t.delegation_root_task_id
      AND t.delegation_origin_task_id IS NOT NULL
      AND coalesce(t.delegation_hop > ch.baseline_hop, true)
      AND NOT EXISTS (SELECT 1 FROM delegation_tasks p
                      WHERE p.run_id = t.run_id AND p.delegation_task_id = t.delegation_origin_task_id);
