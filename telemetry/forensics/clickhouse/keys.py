"""Which span attributes a ClickHouse read fetches, and which spans it takes for tool spans.

Two sources, one list: every key the span typing in the packaged ``queries/spans.sql`` reads (so
a question that starts reading a new attribute is fetched without another change), and the keys
other instrumentations write (:data:`PEER_KEYS`, from the "traces written by other
instrumentations" names of ``telemetry.conventions``), so that peer tool spans read from
ClickHouse carry what the forensics reads on them from files.

A span is a tool span when it has one of :attr:`AttributeKeys.tool_keys` (ours, and the few peer
keys only tool spans carry) or a peer format marks it one (:data:`PEER_TOOL_MARKERS`, e.g.
``openinference.span.kind = TOOL``). The other peer keys (a session id, ``input.value``, a span
kind that says ``LLM``) are on every span of their format and make no span a tool span.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache

from ... import conventions as c
from ...runtime.resources import data_file

__all__ = [
    "NOT_TOOL_KEYS",
    "PEER_KEYS",
    "PEER_KEY_PREFIXES",
    "PEER_TOOL_KEYS",
    "PEER_TOOL_MARKERS",
    "RUN_KEYS",
    "TOOL_NAMESPACES",
    "AttributeKeys",
    "attribute_keys",
]

RUN_KEYS = (c.GEN_AI_CONVERSATION_ID,)
"""The attribute that names a run; a span without it belongs to the run named by its trace id.
(The same rule as ``run_id`` in ``queries/spans.sql``: the two must name the same runs, or a run
the window picks is read in part.)"""

NOT_TOOL_KEYS = frozenset({c.GEN_AI_CONVERSATION_ID, c.GEN_AI_AGENT_ID, c.ERROR_TYPE})
"""Keys the questions read that non-tool spans also carry (a chat span, an HTTP error): having
only these does not make a span a tool span."""

PEER_KEYS: tuple[str, ...] = (
    c.GEN_AI_OPERATION_NAME,
    c.GEN_AI_TOOL_CALL_ARGUMENTS, c.GEN_AI_TOOL_CALL_RESULT, c.GEN_AI_TOOL_STATUS,
    c.OPENINFERENCE_SPAN_KIND, c.OI_TOOL_NAME, c.OI_INPUT_VALUE, c.OI_OUTPUT_VALUE, c.OI_SESSION_ID,
    c.OI_TOOL_CALL_ID,
    c.TRACELOOP_SPAN_KIND, c.TRACELOOP_ENTITY_NAME, c.TRACELOOP_ENTITY_INPUT, c.TRACELOOP_ENTITY_OUTPUT,
    c.TRACELOOP_WORKFLOW_NAME,
    c.LANGFUSE_OBSERVATION_TYPE, c.LANGFUSE_OBSERVATION_INPUT, c.LANGFUSE_OBSERVATION_OUTPUT,
    c.LANGFUSE_SESSION_ID,
    c.MLFLOW_SPAN_TYPE, c.MLFLOW_SPAN_INPUTS, c.MLFLOW_SPAN_OUTPUTS, c.MLFLOW_TRACE_REQUEST_ID,
)
"""The attribute keys other instrumentations write that forensics reads on their spans (the
OpenTelemetry GenAI conventions, OpenInference, OpenLLMetry, Langfuse, MLflow), fetched whether or
not ``spans.sql`` reads them itself (every key it reads is fetched in any case)."""

PEER_KEY_PREFIXES: tuple[str, ...] = (c.OI_LLM_OUTPUT_MESSAGES + ".",)
"""Keys fetched by prefix: OpenInference flattens an LLM span's output messages, tool calls
included, into ``llm.output_messages.{i}.message.tool_calls.{j}.tool_call.id`` and the like."""

PEER_TOOL_KEYS = frozenset({c.GEN_AI_TOOL_CALL_ARGUMENTS, c.GEN_AI_TOOL_CALL_RESULT, c.GEN_AI_TOOL_STATUS,
                            c.OI_TOOL_NAME, c.OI_TOOL_CALL_ID})
"""Peer keys only a tool span carries: having one makes a span a tool span."""

TOOL_NAMESPACES = ("tool.", "state.", "delegation.", "objective.", "policy.", "idempotency.", "plan.")
"""Where the keys our decorator and guards write on a tool span live: a key read from one of them
makes a span a tool span (``gen_ai.tool.name`` and ``gen_ai.tool.call.id`` too). A key read from
anywhere else (``code.function``, ``gen_ai.agent.name``, a peer format's session id) does not, so
``spans.sql`` may read any attribute without every span that carries it becoming a tool span."""


def _spellings(value: str) -> tuple[str, ...]:
    """A marker value as written: as the convention spells it, in lower or upper case, and as a
    JSON string (MLflow stores every attribute JSON-encoded)."""
    plain = (value, value.lower(), value.upper())
    return tuple(dict.fromkeys(plain + tuple(json.dumps(v) for v in plain)))


PEER_TOOL_MARKERS: dict[str, tuple[str, ...]] = {
    c.GEN_AI_OPERATION_NAME: _spellings(c.OPERATION_EXECUTE_TOOL),
    c.OPENINFERENCE_SPAN_KIND: _spellings(c.OPENINFERENCE_KIND_TOOL),
    c.TRACELOOP_SPAN_KIND: _spellings(c.TRACELOOP_KIND_TOOL),
    c.LANGFUSE_OBSERVATION_TYPE: _spellings(c.LANGFUSE_KIND_TOOL),
    c.MLFLOW_SPAN_TYPE: _spellings(c.MLFLOW_KIND_TOOL),
}
"""A peer format's span-kind attribute and the values that make a span a tool span."""

_READ = re.compile(r"\b(attribute_values|attribute_arrays)\[list_position\(attribute_keys, '([^']+)'\)\]")


@dataclass(frozen=True)
class AttributeKeys:
    """The span attribute keys fetched, in order, which of them are arrays, the key prefixes
    fetched, and what makes a span a tool span."""

    keys: tuple[str, ...]
    arrays: frozenset[str]
    prefixes: tuple[str, ...] = PEER_KEY_PREFIXES

    @property
    def tool_keys(self) -> tuple[str, ...]:
        """Keys whose presence makes a span a tool span (the peer format markers aside)."""
        exact = PEER_TOOL_KEYS | {c.GEN_AI_TOOL_NAME, c.GEN_AI_TOOL_CALL_ID}
        return tuple(k for k in self.keys
                     if k not in NOT_TOOL_KEYS and (k in exact or k.startswith(TOOL_NAMESPACES)))

    @property
    def markers(self) -> dict[str, tuple[str, ...]]:
        """Keys whose value makes a span a tool span, and those values."""
        return dict(PEER_TOOL_MARKERS)


@lru_cache(maxsize=1)
def attribute_keys() -> AttributeKeys:
    """The keys the packaged ``spans.sql`` reads (the one place that says what our questions
    read), then the peer keys it does not read itself."""
    text = data_file("queries", "spans.sql").read_text(encoding="utf-8")
    keys: list[str] = []
    arrays: set[str] = set()
    for column, key in _READ.findall(text):
        if key not in keys:
            keys.append(key)
        if column == "attribute_arrays":
            arrays.add(key)
    keys += [k for k in PEER_KEYS if k not in keys]
    return AttributeKeys(tuple(keys), frozenset(arrays))
