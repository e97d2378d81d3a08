"""Guarded tool primitives: refuse the coordination failure at call time, on the record.

Each guard is a tool instrumented with ``@instrument_tool``; a refusal is a recoverable
envelope (see :mod:`telemetry.guards.envelope`), never an exception, and is counted.
"""

# Coordination guards (issue 4): constraint-carrying delegation, versioned objectives, guarded sends.
from .delegation import Delegations, carried_ids, record_handoff
from .objectives import Objectives, guarded_send

__all__ = ["Delegations", "Objectives", "carried_ids", "guarded_send", "record_handoff"]
