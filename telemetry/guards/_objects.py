"""Object sets for plans: matching a target predicate, the set hash, the commit's writer and
the set-level postcondition read from the change log.

An object set ``S`` is the state keys ``S/{id}``; an object matches a predicate when its value
is a JSON object whose fields equal every ``field: value`` pair of the predicate.
"""

from __future__ import annotations

import json
from typing import Any, Final

from .. import conventions as c
from . import _validation as validation
from ._envelope import refusal, success
from ._state import ABSENT_VERSION, JSONValue, current_row, put
from ._store import Connection

OBJECT_SET_HASH: Final = "object_set_hash"
"""The binding every plan has: a hash of the matched objects' keys and versions."""


class PlanWriter:
    """What an action writes through during a commit; every write is logged under the plan."""

    def __init__(self, conn: Connection, plan_id: str, actor: str | None, max_value_bytes: int) -> None:
        self.plan_id = plan_id
        self._conn = conn
        self._actor = actor
        self._max_value_bytes = max_value_bytes
        self.written: dict[str, tuple[str, str]] = {}
        """key -> (version, value JSON) of every write this commit made."""

    def read(self, key: str) -> Any:
        """The current value of any key, inside the commit's transaction (None when absent).

        Use this, not ``StateStore.read_state``, from inside an action: the commit holds the
        write transaction on this thread.
        """
        row = current_row(self._conn, validation.text("key", key))
        return json.loads(row[0]) if row is not None else None

    def write(self, key: str, value: JSONValue) -> dict[str, Any]:
        """Write one object (any key: the postcondition, not this method, judges the target)."""
        key = validation.text("key", key)
        value_json = validation.json_text("value", value, max_bytes=self._max_value_bytes)
        row = current_row(self._conn, key)
        version = put(
            self._conn, key, value_json, row[1] if row else ABSENT_VERSION, actor=self._actor, change_ref=self.plan_id
        )
        assert version is not None, "the commit holds the write lock: the row cannot have moved"
        self.written[key] = (version, value_json)
        return success(key=key, version=version)


def check_predicate(predicate: Any) -> str:
    if not isinstance(predicate, dict) or not predicate:
        raise validation.invalid(
            f"target_predicate must be a non-empty object of field: value pairs, got {validation.show(predicate)}; "
            f'e.g. {{"collection": "summer-2026"}}'
        )
    for field, value in dict.items(predicate):
        if not isinstance(field, str) or not field or not (value is None or isinstance(value, (str, int, float))):
            raise validation.invalid(
                f"target_predicate entry {validation.show(field)}: {validation.show(value)} must pair a field name "
                f"with a plain value (a string, number, boolean or null)"
            )
    return validation.json_text("target_predicate", predicate, max_bytes=64 * 1024)


def _equal(found: Any, wanted: Any) -> bool:
    """JSON equality: a boolean never equals a number (Python's ``True == 1`` would let
    ``{"active": 1}`` match ``true``), and numbers compare by value (``1`` equals ``1.0``)."""
    if isinstance(found, bool) or isinstance(wanted, bool):
        return isinstance(found, bool) and isinstance(wanted, bool) and found is wanted
    return bool(found == wanted)


def match_objects(conn: Connection, object_set: str, predicate: dict[str, Any]) -> list[tuple[str, str]]:
    """``(key, version)`` of every object of the set whose fields equal the predicate, by key.

    The set is every key ``{object_set}/...``, nested ones (``{object_set}/a/b``) included."""
    low, high = object_set + "/", object_set + "0"  # "0" sorts right after "/"
    found = []
    for key, value_json, version in conn.execute(
        "SELECT key, value, version FROM guard_state WHERE key >= ? AND key < ? ORDER BY key", (low, high)
    ):
        value = json.loads(value_json)
        if isinstance(value, dict) and all(field in value and _equal(value[field], want) for field, want in predicate.items()):
            found.append((key, version))
    return found


def object_values(conn: Connection, keys: list[str]) -> list[tuple[str, Any]]:
    out = []
    for key in keys:
        row = current_row(conn, key)
        out.append((key, json.loads(row[0]) if row is not None else None))
    return out


def set_hash(targets: list[tuple[str, str]]) -> str:
    return "sha256:" + validation.digest(*(f"{key}\t{version}" for key, version in targets))


def postcondition(plan_id: str, targets: set[str], changed: set[str], *, undone: bool) -> dict[str, Any]:
    """The set-level check: exactly the planned objects changed. ``undone`` says the writes of a
    failing commit were rolled back (the message then says nothing changed)."""
    inside, outside, missing = changed & targets, sorted(changed - targets), sorted(targets - changed)
    counts: dict[str, Any] = {
        "plan_id": plan_id,
        "objects_matched": len(targets),
        "changed_count": len(inside),
        "outside_target_changed_count": len(outside),
    }
    if not outside and not missing:
        return success(**counts, message=f"Committed: the change log shows exactly the {len(targets)} planned objects changed.")
    shown = (
        f"the commit's writes returned ok, but the change log shows {len(inside)} of {len(targets)} planned objects "
        f"changed and {len(outside)} objects outside the plan changed. "
    )
    then = (
        "Every write of this commit was rolled back: nothing changed. The action is wrong, so do not retry this "
        "plan; report it to a human with the plan_id, the outside_target sample and the unchanged sample."
        if undone
        else "The writes are not undone: do not retry; report this to a human with the plan_id, the "
        "outside_target sample and the unchanged sample."
    )
    return refusal(
        c.OUTCOME_POSTCONDITION_FAILED,
        shown + then,
        retry=False,
        undone=undone,
        **counts,
        outside_target_sample=outside[:10],
        unchanged_sample=missing[:10],
    )
