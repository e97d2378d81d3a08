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
from .runtime import Runtime, active_runtime, configure, observe_tool_spans

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
    "observe_tool_spans",
    "register_result_shape",
    "tool_call_id",
]


def __getattr__(name: str) -> str:
    """``__version__``: the installed distribution's version, whose one source is pyproject.toml.

    Read from the package metadata when first asked, not at import, and kept.
    """
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("outcome-telemetry")
    except PackageNotFoundError:  # a source tree that was never installed
        found = "0+unknown"
    globals()["__version__"] = found
    return found
