"""Plan-before-commit for high-blast-radius writes, with a set-level postcondition.

``plan_change`` computes what a bulk action would touch, without touching it: how many objects
match, a sample, and what the plan is bound to (a hash of the matched objects and their
versions, plus every registered binding such as the policy version, the tool schema version,
the app). A human or a policy looks at that number; ``commit_plan(plan_id)`` then runs the action
on exactly the planned objects, and refuses when the plan expired (``plan_expired``) or any
binding moved since (``plan_binding_moved``, naming which). The commit never recomputes the
target set, and the plan id is its idempotency key: a retried commit returns the first commit's
result with ``deduplicated: true`` instead of writing again.

After the writes the commit checks a set-level postcondition against the store's change log
(``guard_changes``, where every write records the plan that caused it), not by reading each
object back through the path that wrote it: ``changed_count == objects_matched`` and
``outside_target_changed_count == 0``. An action that wrote the wrong objects, each write
returning ok, ends as ``postcondition_failed`` with transport ok and read-back match: the
wrong-collection repricing, made visible. Because the check runs inside the commit's
transaction, the commit then rolls every write back (``undone: true``), so the failure is
refused rather than merely reported; ``Planner(..., undo_on_postcondition_failure=False)``
keeps the writes and only reports them.

Objects are state keys of :class:`~telemetry.guards._state.StateStore` named ``{object_set}/{id}``
whose values are JSON objects; a target predicate is a mapping of field to value that every
matched object's fields equal.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any, Final, Union

from .. import conventions as c
from ..exceptions import GuardError
from ..instrument import current_call, instrument_tool
from . import _validation as validation
from ._envelope import refusal, refuse_when_busy, success
from ._objects import (
    OBJECT_SET_HASH,
    PlanWriter,
    check_predicate,
    match_objects,
    object_values,
    postcondition,
    set_hash,
)
from ._state import JSONValue, StateStore, current_row
from ._store import Connection
from ._validation import BadInput

__all__ = ["Action", "PlanWriter", "Planner", "Transform"]

JSONScalar = Union[str, int, float, bool, None]
SCHEMA_NAME: Final = "guards.plans"
DDL: Final = """
CREATE TABLE IF NOT EXISTS guard_plans (
    plan_id       TEXT PRIMARY KEY,
    action        TEXT NOT NULL,
    object_set    TEXT NOT NULL,
    predicate     TEXT NOT NULL,
    params        TEXT NOT NULL,
    targets       TEXT NOT NULL,
    bound_to      TEXT NOT NULL,
    manifest_hash TEXT NOT NULL,
    created_by    TEXT,
    created_at    REAL NOT NULL,
    expires_at    REAL NOT NULL,
    status        TEXT NOT NULL,
    result        TEXT,
    committed_at  REAL
);
"""
_PLANNED, _COMMITTED, _FAILED = "planned", "committed", "failed"
_REPLAN = "make a new plan with plan_change and have it confirmed again"


Action = Callable[[PlanWriter, str, Any, dict[str, Any]], None]
"""``action(writer, key, value, params)``: apply the change to one matched object via ``writer``."""
Transform = Callable[[Any, dict[str, Any]], JSONValue]
"""``transform(value, params) -> new value`` for one matched object (see ``register_transform``)."""


class Planner:
    """Plans and commits bulk actions over object sets kept in a :class:`StateStore`.

    ``clock`` returns the current time in seconds since the epoch (default ``time.time``), for
    plan expiry; every process sharing a store must use the same clock.

    ``bindings`` maps a binding name to a function returning its current value (for example
    ``{"policy_version": policies.current, "tool_schema_version": lambda: "2026-07-01",
    "app": lambda: "shop"}``); each plan records them and a commit refuses when one moved.
    """

    def __init__(
        self,
        state: StateStore,
        *,
        bindings: Mapping[str, Callable[[], object]] | None = None,
        max_objects: int = 10_000,
        sample_size: int = 5,
        max_ttl_seconds: float = 24 * 3600.0,
        undo_on_postcondition_failure: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(state, StateStore):
            raise GuardError(f"Planner needs a telemetry.guards.StateStore, got {type(state).__name__}")
        self.state = state
        self.bindings = dict(bindings or {})
        for name, provider in self.bindings.items():
            if not isinstance(name, str) or not name or name == OBJECT_SET_HASH or not callable(provider):
                raise GuardError(f"binding {name!r}: use a non-empty name other than {OBJECT_SET_HASH!r} and a callable")
        for label, number, low in (("max_objects", max_objects, 1), ("sample_size", sample_size, 0)):
            if isinstance(number, bool) or not isinstance(number, int) or number < low:
                raise GuardError(f"{label} must be a whole number of at least {low}, got {number!r}")
        if isinstance(max_ttl_seconds, bool) or not isinstance(max_ttl_seconds, (int, float)) or not max_ttl_seconds > 0.1:
            raise GuardError(f"max_ttl_seconds must be a number of seconds above 0.1, got {max_ttl_seconds!r}")
        self.max_objects = max_objects
        self.sample_size = sample_size
        self.max_ttl_seconds = max_ttl_seconds
        self.undo_on_postcondition_failure = undo_on_postcondition_failure
        if not callable(clock):
            raise GuardError(f"clock must be a function returning seconds since the epoch, got {validation.show(clock)}")
        self.clock = clock
        self._actions: dict[str, Action] = {}
        state.store.ensure_schema(SCHEMA_NAME, DDL)

    def register_action(self, name: str, action: Action) -> None:
        """Make ``name`` plannable; ``action(writer, key, value, params)`` runs once per matched object."""
        if not isinstance(name, str) or not name or not callable(action):
            raise GuardError(f"register_action needs a non-empty name and a callable, got {name!r}, {action!r}")
        self._actions[name] = action

    def register_transform(self, name: str, transform: Transform) -> None:
        """The common safe case: each matched object is replaced by ``transform(value, params)``."""

        def action(writer: PlanWriter, key: str, value: Any, params: dict[str, Any]) -> None:
            writer.write(key, transform(value, params))

        self.register_action(name, action)

    # --- the tools ---------------------------------------------------------------------------

    @instrument_tool(name="plan_change", kind=c.KIND_READ)
    @refuse_when_busy
    def plan_change(
        self,
        action: str,
        object_set: str,
        target_predicate: dict[str, JSONScalar],
        params: dict[str, Any] | None = None,
        bindings: dict[str, str] | None = None,
        ttl_seconds: float = 300.0,
        agent_id: str | None = None,
    ) -> dict[str, Any]:
        """Preview a bulk change; nothing is written. Always do this before ``commit_plan``.

        ``object_set`` names a collection (its objects are keys ``{object_set}/{id}``);
        ``target_predicate`` is ``{field: value}`` that every target object must equal (e.g.
        ``{"collection": "summer-2026"}``); ``params`` go to the action (e.g. ``{"discount_pct":
        20}``). ``bindings`` are values you based the plan on (e.g. ``{"policy_version": "14"}``);
        a mismatch is refused as ``plan_binding_moved``. Returns ``plan_id``, ``objects_matched``,
        a ``sample`` of keys, ``bound_to`` and ``expires_at``: check that ``objects_matched`` and
        the sample are what was asked for, then commit before it expires.
        """
        call = current_call()
        try:
            action = self._action_name(action)
            object_set = validation.text("object_set", object_set)
            predicate_json = check_predicate(target_predicate)
            if params is not None and not isinstance(params, dict):
                raise validation.invalid(f"params must be an object of named values, got {validation.show(params)}")
            params_json = validation.json_text("params", {} if params is None else params, max_bytes=self.state.max_value_bytes)
            stated = self._stated_bindings(bindings)
            ttl = validation.number("ttl_seconds", ttl_seconds, low=0.1, high=self.max_ttl_seconds)
            agent_id = validation.optional_text("agent_id", agent_id)
        except BadInput as bad:
            return bad.envelope
        call.set_attribute(c.GEN_AI_AGENT_ID, agent_id)
        current = self._current_bindings()
        moved = {n: {"stated": v, "current": current[n]} for n, v in stated.items() if current[n] != v}
        if moved:
            return _binding_moved(None, moved, "your stated bindings are not current: re-read them and plan again")
        with self.state.store.read() as conn:
            targets = match_objects(conn, object_set, json.loads(predicate_json))
        if len(targets) > self.max_objects:
            return validation.invalid(
                f"{len(targets)} objects of {object_set!r} match; a plan holds at most {self.max_objects}: "
                f"narrow target_predicate or split the change"
            ).envelope
        bound_to = {OBJECT_SET_HASH: set_hash(targets), **current}
        plan_id = "plan_" + secrets.token_hex(8)
        now = self.clock()
        manifest = validation.digest(action, object_set, predicate_json, params_json, json.dumps(bound_to, sort_keys=True))
        with self.state.store.transaction() as conn:
            conn.execute(
                "INSERT INTO guard_plans (plan_id, action, object_set, predicate, params, targets, bound_to, "
                "manifest_hash, created_by, created_at, expires_at, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (plan_id, action, object_set, predicate_json, params_json, json.dumps(targets),
                 json.dumps(bound_to, sort_keys=True), manifest, agent_id, now, now + ttl, _PLANNED),
            )
        call.set_attributes({c.PLAN_ID: plan_id, c.PLAN_OBJECTS_MATCHED: len(targets)})
        return success(
            plan_id=plan_id,
            action=action,
            object_set=object_set,
            objects_matched=len(targets),
            sample=[key for key, _ in targets[: self.sample_size]],
            bound_to=bound_to,
            manifest_hash=manifest,
            expires_at=_iso(now + ttl),
            message=f"Nothing was written. Confirm that {len(targets)} objects is what was asked for, then call "
            f"commit_plan with plan_id={plan_id!r} before {_iso(now + ttl)}.",
        )

    # Idempotent: the plan id is the commit's key; a second commit replays the first result.
    @instrument_tool(name="commit_plan", kind=c.KIND_WRITE, idempotent=True, outcomes=(c.OUTCOME_POSTCONDITION_FAILED,))
    @refuse_when_busy
    def commit_plan(self, plan_id: str, agent_id: str | None = None) -> dict[str, Any]:
        """Run a plan made by ``plan_change`` on exactly the objects it matched.

        Refused, with nothing written, as ``plan_expired`` (make a new plan) or
        ``plan_binding_moved`` (the objects, policy or schema changed since: make a new plan and
        have it approved again). Committing the same plan twice returns the first result with
        ``deduplicated: true``. A result ``postcondition_failed`` means the writes returned ok but
        did not change exactly the planned objects; by default they were rolled back (``undone:
        true``, nothing changed): report it, do not retry this plan.
        """
        call = current_call()
        try:
            plan_id = validation.text("plan_id", plan_id)
            agent_id = validation.optional_text("agent_id", agent_id)
        except BadInput as bad:
            return bad.envelope
        call.set_attributes(
            {c.PLAN_ID: plan_id, c.GEN_AI_AGENT_ID: agent_id, c.IDEMPOTENCY_KEY_HASH: validation.digest(plan_id)[:32]}
        )
        with self.state.store.read() as conn:
            plan = conn.execute("SELECT * FROM guard_plans WHERE plan_id = ?", (plan_id,)).fetchone()
        if plan is None:
            return refusal(
                c.OUTCOME_NOT_FOUND,
                f"there is no plan {plan_id!r}. Call plan_change to make one, and pass the plan_id it returns.",
                retry=False,
                plan_id=plan_id,
            )
        targets = [(k, v) for k, v in json.loads(plan["targets"])]
        call.set_attributes({c.PLAN_OBJECTS_MATCHED: len(targets), c.IDEMPOTENCY_PAYLOAD_HASH: plan["manifest_hash"][:32]})
        if plan["status"] in (_COMMITTED, _FAILED):
            return _replay(plan["result"])
        if self.clock() > plan["expires_at"]:
            return refusal(
                c.OUTCOME_PLAN_EXPIRED,
                f"plan {plan_id} expired at {_iso(plan['expires_at'])}; nothing was written. Make a new plan with "
                f"plan_change, confirm it again, and commit that one.",
                retry=True,
                plan_id=plan_id,
                expired_at=_iso(plan["expires_at"]),
            )
        bound_to = json.loads(plan["bound_to"])
        current = self._current_bindings()
        moved = {
            name: {"planned": value, "current": current.get(name)}
            for name, value in bound_to.items()
            if name != OBJECT_SET_HASH and current.get(name) != value
        }
        if moved:
            return _binding_moved(plan_id, moved, _REPLAN)
        if plan["action"] not in self._actions:
            return validation.invalid(
                f"plan {plan_id} uses action {plan['action']!r}, which this planner has not registered (it was "
                f"planned by another process or before a restart); commit it where that action is registered",
                retry=False,
                plan_id=plan_id,
            ).envelope
        try:
            return self._commit(plan, targets, bound_to, agent_id)
        except BadInput as bad:  # the action tried to write something invalid: all rolled back
            return validation.invalid(
                f"action {plan['action']!r} of plan {plan_id} tried an invalid write, so nothing was written: "
                f"{bad.envelope[c.ENVELOPE_MESSAGE]}. The action itself is at fault: report it to a human.",
                retry=False,
            ).envelope

    def _commit(
        self, plan: Any, targets: list[tuple[str, str]], bound_to: dict[str, Any], actor: str | None
    ) -> dict[str, Any]:
        """Write the plan in one transaction (or refuse when the object set moved: nothing written)."""
        call = current_call()
        plan_id = plan["plan_id"]
        undo = self.undo_on_postcondition_failure
        with self.state.store.transaction() as conn:
            status, stored = conn.execute("SELECT status, result FROM guard_plans WHERE plan_id = ?", (plan_id,)).fetchone()
            if status in (_COMMITTED, _FAILED):  # a concurrent commit of the same plan won
                return _replay(stored)
            now_matched = match_objects(conn, plan["object_set"], json.loads(plan["predicate"]))
            now_hash = set_hash(now_matched)
            if now_hash != bound_to[OBJECT_SET_HASH]:
                moved = {OBJECT_SET_HASH: {"planned": bound_to[OBJECT_SET_HASH], "current": now_hash}}
                return _binding_moved(plan_id, moved, _REPLAN, objects_matched_now=len(now_matched))
            # The writes go under a savepoint, so a failing postcondition undoes them while the
            # verdict is recorded in the same transaction: no other commit of this plan can run
            # in between and find it still "planned".
            conn.execute("SAVEPOINT plan_writes")
            writer = PlanWriter(conn, plan_id, actor, self.state.max_value_bytes)
            action, params = self._actions[plan["action"]], json.loads(plan["params"])
            for key, value in object_values(conn, [k for k, _ in targets]):
                action(writer, key, value, params)
            changed = {
                row[0] for row in conn.execute("SELECT DISTINCT key FROM guard_changes WHERE change_ref = ?", (plan_id,))
            }
            result = postcondition(plan_id, {k for k, _ in targets}, changed, undone=undo)
            # Read back before any undo: the writes persisted as sent (state success) whether or
            # not they were the right set (intent success).
            readback = _persisted(conn, writer.written)
            failed = undo and not result[c.ENVELOPE_OK]
            if failed:
                conn.execute("ROLLBACK TO plan_writes")
            conn.execute("RELEASE plan_writes")
            conn.execute(
                "UPDATE guard_plans SET status = ?, result = ?, committed_at = ? WHERE plan_id = ?",
                (_FAILED if failed else _COMMITTED, json.dumps(result), self.clock(), plan_id),
            )
        call.set_attributes(
            {
                c.PLAN_CHANGED_COUNT: result["changed_count"],
                c.PLAN_OUTSIDE_TARGET_CHANGED_COUNT: result["outside_target_changed_count"],
            }
        )
        call.set_readback(readback)
        return result

    # --- helpers -----------------------------------------------------------------------------

    def _action_name(self, action: Any) -> str:
        name = validation.text("action", action)
        if name not in self._actions:
            known = ", ".join(sorted(self._actions)) or "none registered"
            raise validation.invalid(f"action {name!r} is not one this planner knows; use one of: {known}")
        return name

    def _stated_bindings(self, bindings: Any) -> dict[str, str]:
        if bindings is None:
            return {}
        if not isinstance(bindings, dict):
            raise validation.invalid(f"bindings must map binding names to string values, got {validation.show(bindings)}")
        problems = validation.Problems("bindings must map binding names to string values")
        for name, value in dict.items(bindings):
            if problems.text("binding name", name) is not None:
                problems.text(f"binding {name!r}", value)
        if problems:
            raise validation.BadInput(problems.refusal())
        unknown = sorted(set(bindings) - set(self.bindings))
        if unknown:
            raise validation.invalid(
                f"unknown bindings {validation.show(unknown)}; this planner binds: {sorted(self.bindings) or 'none'}"
            )
        return dict(bindings)

    def _current_bindings(self) -> dict[str, str]:
        return {name: str(provider()) for name, provider in sorted(self.bindings.items())}


def _persisted(conn: Connection, written: dict[str, tuple[str, str]]) -> bool | None:
    """Every object write of the commit persisted as sent (None when it wrote nothing)."""
    if not written:
        return None
    return all(current_row(conn, key) == (value_json, version) for key, (version, value_json) in written.items())


def _binding_moved(plan_id: str | None, moved: dict[str, Any], todo: str, **context: Any) -> dict[str, Any]:
    names = ", ".join(sorted(moved))
    current_call().set_attribute(c.PLAN_BINDING_MOVED, ",".join(sorted(moved)))
    return refusal(
        c.OUTCOME_PLAN_BINDING_MOVED,
        f"binding moved: {names}. Nothing was written; {todo}.",
        retry=True,
        plan_id=plan_id,
        binding_moved=sorted(moved),
        bindings=moved,
        **context,
    )


def _replay(stored: str) -> dict[str, Any]:
    call = current_call()
    result: dict[str, Any] = json.loads(stored)
    call.mark_replayed()
    call.set_attributes(
        {
            c.PLAN_CHANGED_COUNT: result.get("changed_count"),
            c.PLAN_OUTSIDE_TARGET_CHANGED_COUNT: result.get("outside_target_changed_count"),
        }
    )
    result[c.ENVELOPE_DEDUPLICATED] = True
    return result


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
