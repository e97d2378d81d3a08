"""Guarded tool primitives: refuse the coordination failure at call time, on the record.

Each guard is a tool instrumented with ``@instrument_tool``; a refusal is a recoverable
envelope (see :mod:`telemetry.guards.envelope`), never an exception, and is counted.
"""

# Write-safety guards: version-bound state, idempotency keys, plans, scoped inventory.
# Coordination guards: constraint-carrying delegation, versioned objectives, guarded sends.
from .delegation import AcceptanceCriterion, Constraint, Delegations, Waiver, carried_ids, record_handoff
from .envelope import refusal, success
from .idempotency import IdempotencyKeys
from .inventory import ScopedTools, ToolRegistry
from .objectives import Objectives, guarded_send
from .plans import Action, Planner, PlanWriter, Transform
from .postgres import PostgresStore
from .sqlite import SQLiteStore
from .state import ABSENT_VERSION, DEFAULT_CHANGE_RETENTION, JSONValue, StateStore
from .store import Store, StoreBusy, StoreDisconnected, StoreUnavailable, open_store

__all__ = [
    "ABSENT_VERSION",
    "AcceptanceCriterion",
    "Action",
    "Constraint",
    "DEFAULT_CHANGE_RETENTION",
    "Delegations",
    "IdempotencyKeys",
    "JSONValue",
    "Objectives",
    "PlanWriter",
    "Planner",
    "PostgresStore",
    "SQLiteStore",
    "ScopedTools",
    "StateStore",
    "Store",
    "StoreBusy",
    "StoreDisconnected",
    "StoreUnavailable",
    "ToolRegistry",
    "Transform",
    "Waiver",
    "carried_ids",
    "guarded_send",
    "open_store",
    "record_handoff",
    "refusal",
    "success",
]
