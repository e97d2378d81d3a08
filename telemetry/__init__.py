"""outcome-telemetry: transport, state and intent success for LLM agent tool calls.

The public face. The per-call path lives in :mod:`telemetry.instrument`, the exporting runtime in
:mod:`telemetry.runtime`; :mod:`telemetry.guards`, :mod:`telemetry.forensics` and
:mod:`telemetry.mcp` are public packages of their own (see ``docs/architecture.md``).
"""

from .exceptions import ConfigurationError, ForensicsInputError, GuardError, TelemetryError
from .instrument import (
    AgentContext,
    Call,
    Readback,
    agent,
    current_agent,
    current_call,
    current_tool_call_id,
    instrument_tool,
    register_result_shape,
    tool_call_id,
)
from .runtime import Runtime, active_runtime, configure

__all__ = [
    "AgentContext",
    "Call",
    "ConfigurationError",
    "ForensicsInputError",
    "GuardError",
    "Readback",
    "Runtime",
    "TelemetryError",
    "active_runtime",
    "agent",
    "configure",
    "current_agent",
    "current_call",
    "current_tool_call_id",
    "instrument_tool",
    "register_result_shape",
    "tool_call_id",
]

__version__ = "0.1.0"
