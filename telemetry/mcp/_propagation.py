"""Client side: carry the current trace context to the server in a request's ``_meta``.

The SDK's JSON-RPC client already injects W3C ``traceparent``/``tracestate`` into every request's
``_meta`` (SEP-414) from its ``MCP send`` CLIENT span, and the server's ``OpenTelemetryMiddleware``
extracts it, so an agent span that is current around ``session.call_tool`` is already the
ancestor of the server's spans. :func:`trace_meta` is for the other cases: a caller that does not
go through the SDK's client (raw JSON-RPC, another framework, a queued call), or a call made
where the agent's span is no longer current (pass ``context=`` captured earlier). It also writes
who is calling: the agent, run and tool-call id of the enclosing ``telemetry.agent()`` /
``telemetry.tool_call_id()`` block (or a framework integration's), under
``outcome-telemetry/agent_id``, ``/conversation_id`` and ``/tool_call_id``, which an instrumented
server records on its span.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import propagate
from opentelemetry.context import Context

from .. import conventions as c
from ..instrument import current_agent, current_tool_call_id


def trace_meta(meta: Mapping[str, Any] | None = None, *, context: Context | None = None) -> dict[str, Any]:
    """A copy of ``meta`` with the trace context of ``context`` (default: the current one) injected.

    Uses the process's global propagator, the same one the SDK's server extracts with (W3C trace
    context and baggage unless ``OTEL_PROPAGATORS`` says otherwise). Without a valid span in the
    context no trace context is added; the caller's agent, run and tool-call id are added when
    set (keys already in ``meta`` are kept). Example::

        result = await session.call_tool("write_state", args, meta=trace_meta())
    """
    if meta is not None and not isinstance(meta, Mapping):
        raise TypeError(f"trace_meta takes the request's _meta mapping (or None), got {meta!r}")
    carrier = dict(meta or {})
    propagate.inject(carrier, context=context)
    agent, call_id = current_agent(), current_tool_call_id()
    for key, value in ((c.MCP_META_AGENT_ID, agent.agent_id if agent is not None else None),
                       (c.MCP_META_CONVERSATION_ID, agent.conversation_id if agent is not None else None),
                       (c.MCP_META_TOOL_CALL_ID, call_id)):
        if value:
            carrier.setdefault(key, value)
    return carrier
