"""The per-call path: ``@instrument_tool``, the call it records, and the agent context.

Everything a decorated call does lives here: the decision made once at decoration time
(:mod:`._spec`), the wrappers for the four function kinds (:mod:`._decorator`), the call object a
tool body can talk to (:mod:`._call`), the agent and tool-call-id context (:mod:`._context`), how a
result or exception is classified (:mod:`._classify`, with the team's shapes from
:func:`register_result_shape`), and the span and counters written for each
call (``_recorder``). It reads the active runtime but never configures one, and it knows nothing
of guards or forensics.
"""

from ..envelopes import ShapeClassifier, register_result_shape
from ._call import NO_CALL, Call, Readback, current_call
from ._classify import ResultClass, classify_result
from ._context import AgentContext, agent, current_agent, current_tool_call_id, framework_context, tool_call_id
from ._decorator import SPEC_ATTRIBUTE, instrument_tool, instrument_with
from ._spec import OutcomeFn, ReadbackFn, ToolOptions, ToolSpec

__all__ = [
    "AgentContext",
    "Call",
    "NO_CALL",
    "OutcomeFn",
    "Readback",
    "ReadbackFn",
    "ResultClass",
    "SPEC_ATTRIBUTE",
    "ShapeClassifier",
    "ToolOptions",
    "ToolSpec",
    "agent",
    "classify_result",
    "current_agent",
    "current_call",
    "current_tool_call_id",
    "framework_context",
    "instrument_tool",
    "instrument_with",
    "register_result_shape",
    "tool_call_id",
]
