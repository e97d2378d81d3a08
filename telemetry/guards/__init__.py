"""Guarded tool primitives: refuse the coordination failure at call time, on the record.

Each guard is a tool instrumented with ``@instrument_tool``; a refusal is a recoverable
envelope (see :mod:`telemetry.guards._envelope`), never an exception, and is counted.
"""

# Write-safety guards: version-bound state, idempotency keys, plans, scoped inventory.
# Coordination guards: constraint-carrying delegation, versioned objectives, guarded sends,
# scheduled sends (a review window before a high-impact send fires).
from ._delegation import AcceptanceCriterion, Constraint, Delegations, Waiver, carried_ids, record_handoff
from ._envelope import refusal, refuse_when_busy, success
from ._idempotency import IdempotencyKeys
from ._inventory import ScopedTools, ToolRegistry
from ._objectives import Objectives, guarded_send
from ._plans import Action, Planner, PlanWriter, Transform
from ._postgres import PostgresStore
from ._scheduled import MAX_REVIEW_SECONDS, SCHEDULE_ATTRIBUTE, ScheduledSends, ScheduleSpec
from ._sqlite import SQLiteStore
from ._state import ABSENT_VERSION, DEFAULT_CHANGE_RETENTION, JSONValue, StateStore
from ._store import Store, StoreBusy, StoreDisconnected, StoreUnavailable, open_store
from ._verify import reads_cache, reads_cache_of, verification_required

__all__ = [
    "ABSENT_VERSION",
    "AcceptanceCriterion",
    "Action",
    "Constraint",
    "DEFAULT_CHANGE_RETENTION",
    "Delegations",
    "IdempotencyKeys",
    "JSONValue",
    "MAX_REVIEW_SECONDS",
    "Objectives",
    "PlanWriter",
    "Planner",
    "PostgresStore",
    "SCHEDULE_ATTRIBUTE",
    "SQLiteStore",
    "ScheduleSpec",
    "ScheduledSends",
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
    "reads_cache",
    "reads_cache_of",
    "record_handoff",
    "refusal",
    "refuse_when_busy",
    "success",
    "verification_required",
]
