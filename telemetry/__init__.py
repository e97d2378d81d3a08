"""outcome-telemetry: transport, state and intent success for LLM agent tool calls.

The public face; implementation lives in the private-by-convention modules beside this one.
"""

from .call import Call, Readback, current_call
from .context import AgentContext, agent, current_agent, current_tool_call_id, tool_call_id
from .decorator import instrument_tool
from .exceptions import ConfigurationError, ForensicsInputError, GuardError, TelemetryError
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
    "tool_call_id",
]

__version__ = "0.1.0"
