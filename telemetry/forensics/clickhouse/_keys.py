"""Which span attributes a ClickHouse read fetches, which spans it takes for tool spans, and which
run a span belongs to.

Two sources, one list: every key the span typing in the packaged ``queries/spans.sql`` reads (so
a question that starts reading a new attribute is fetched without another change), and every key
a peer format keeps a tool call under (:data:`PEER_KEYS`, from ``telemetry._span_formats``, the
one description of those formats), so that peer tool spans read from ClickHouse carry what the
forensics reads on them from files.

A span is a tool span when it has one of :attr:`AttributeKeys.tool_keys` (the keys our decorator
and guards write) or a peer format's marker says so (``openinference.span.kind = TOOL``, ...:
:data:`PEER_TOOL_MARKERS`, the format's value as written or JSON-encoded, as ``span_formats``
reads it). A peer format's other keys (a session id, ``input.value``) make no span a tool span.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache

from ... import conventions as c
from ..._span_formats import FORMATS
from ...runtime._resources import data_file

__all__ = [
    "NOT_TOOL_KEYS",
    "PEER_KEYS",
    "PEER_KEY_PREFIXES",
    "PEER_RUN_KEYS",
    "PEER_TOOL_MARKERS",
    "RUN_KEYS",
    "TOOL_NAMESPACES",
    "AttributeKeys",
    "attribute_keys",
]

RUN_KEYS = (c.GEN_AI_CONVERSATION_ID,)
"""The attribute that names a run; a span without it (and without its peer format's run key,
:data:`PEER_RUN_KEYS`) belongs to the run named by its trace id. (The rule of ``run_id`` in
``queries/spans.sql``: the two must name the same runs, or a run the window picks is read in part.)"""

NOT_TOOL_KEYS = frozenset({c.GEN_AI_CONVERSATION_ID, c.GEN_AI_AGENT_ID, c.ERROR_TYPE})
"""Keys the questions read that non-tool spans also carry (a chat span, an HTTP error): having
only these does not make a span a tool span."""

TOOL_NAMESPACES = ("tool.", "state.", "delegation.", "objective.", "policy.", "idempotency.", "plan.")
"""Where the keys our decorator and guards write on a tool span live: a key read from one of them
(or ``gen_ai.tool.name``) makes a span a tool span; a key read from anywhere else
(``code.function``, a peer format's keys) does not, so ``spans.sql`` may read any attribute
without every span that carries it becoming a tool span."""


def _spellings(value: str) -> tuple[str, ...]:
    """A marker value as written, and JSON-encoded (MLflow stores every attribute so)."""
    return (value, json.dumps(value))


PEER_TOOL_MARKERS: dict[str, tuple[str, ...]] = {fmt.marker: _spellings(fmt.marker_value) for fmt in FORMATS}
"""A peer format's marker attribute and the values that make a span a tool span."""

PEER_RUN_KEYS: tuple[tuple[str, tuple[str, ...], str], ...] = tuple(
    (fmt.marker, _spellings(fmt.marker_value), key) for fmt in FORMATS for key in fmt.run if key not in RUN_KEYS)
"""(marker, values, run key): on a peer tool span of that format, the run key's value names its run
(OpenInference's ``session.id``, ...), before the conversation id and the trace id."""

PEER_KEYS: tuple[str, ...] = tuple(dict.fromkeys(
    [key for fmt in FORMATS
     for key in (fmt.marker, *fmt.tool_name, *fmt.arguments, *fmt.result, *fmt.call_id, *fmt.run, *fmt.agent)]
    + [c.GEN_AI_TOOL_STATUS, c.TRACELOOP_WORKFLOW_NAME]))
"""Every key a peer format keeps a tool call under (its marker, name, arguments, result, call id,
run and agent), Strands' tool status and OpenLLMetry's workflow name."""

PEER_KEY_PREFIXES: tuple[str, ...] = (c.OI_LLM_OUTPUT_MESSAGES + ".",)
"""Keys fetched by prefix: OpenInference flattens an LLM span's output messages, tool calls
included, into ``llm.output_messages.{i}.message.tool_calls.{j}.tool_call.id`` and the like."""

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
        return tuple(k for k in self.keys if k not in NOT_TOOL_KEYS and (
            k == c.GEN_AI_TOOL_NAME or (k.startswith(TOOL_NAMESPACES) and k not in PEER_KEYS)))

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
