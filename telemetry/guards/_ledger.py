"""The delegation guard's ledger rows and its partition rule, apart from the tools that use them.

A :class:`Ledger` is one task's stored record; :func:`check_partition` is the whole rule a
delegation must pass; the ``parse_*`` functions turn model-supplied lists into typed tuples and
describe every malformed item (naming it) instead of raising, because a tool answers a model
with an envelope, not an exception.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import conventions as c

from ._checks import show
from .envelope import refusal

MAX_ID_LENGTH = 128
MAX_TEXT_LENGTH = 4_096
"""Longest constraint text, waiver reason or acceptance check, in characters."""


def normalize_text(text: str) -> str:
    """``text`` with every whitespace run as one space and no leading or trailing space."""
    return " ".join(text.split())


@dataclass(frozen=True)
class Ledger:
    """One task: where it sits in its chain and the constraints it must honour."""

    task_id: str
    origin_task_id: str | None
    root_task_id: str
    hop: int
    objective: str
    constraints: tuple[tuple[str, str], ...]
    """``(id, text)`` pairs in ledger order."""

    @classmethod
    def load(cls, conn: sqlite3.Connection, task_id: str) -> Ledger | None:
        """The stored task ``task_id``, or None."""
        row = conn.execute(
            "SELECT task_id, origin_task_id, root_task_id, hop, objective FROM delegation_tasks WHERE task_id = ?",
            (task_id,),
        ).fetchone()
        if row is None:
            return None
        items = conn.execute(
            "SELECT constraint_id, text FROM delegation_constraints WHERE task_id = ? ORDER BY position",
            (task_id,),
        ).fetchall()
        return cls(
            row["task_id"],
            row["origin_task_id"],
            row["root_task_id"],
            int(row["hop"]),
            row["objective"],
            tuple((item["constraint_id"], item["text"]) for item in items),
        )

    def insert(self, conn: sqlite3.Connection, agent_id: str | None, created_at: str) -> None:
        """Store this task and its ledger (inside the caller's write transaction)."""
        conn.execute(
            "INSERT INTO delegation_tasks (task_id, origin_task_id, root_task_id, hop, objective, agent_id, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (self.task_id, self.origin_task_id, self.root_task_id, self.hop, self.objective, agent_id, created_at),
        )
        conn.executemany(
            "INSERT INTO delegation_constraints (task_id, position, constraint_id, text) VALUES (?, ?, ?, ?)",
            [(self.task_id, i, cid, text) for i, (cid, text) in enumerate(self.constraints)],
        )

    def as_fields(self) -> dict[str, Any]:
        """The task as envelope fields."""
        return {
            "task_id": self.task_id,
            "origin_task_id": self.origin_task_id,
            "root_task_id": self.root_task_id,
            "hop": self.hop,
            "objective": self.objective,
            "constraints": [{"id": cid, "text": text} for cid, text in self.constraints],
        }


@dataclass(frozen=True)
class LedgerProblem:
    """Why a delegation is refused: the outcome code, one reason per rule broken, and the
    origin ids that were neither carried verbatim nor waived."""

    code: str
    reasons: list[str]
    missing: list[str]


def _items(value: Any, name: str, problems: list[str]) -> list[Mapping[str, Any]]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        problems.append(f"{name} must be a list of objects, got {value!r}")
        return []
    good: list[Mapping[str, Any]] = []
    for i, item in enumerate(value):
        if isinstance(item, Mapping):
            good.append(item)
        else:
            problems.append(f"{name}[{i}] must be an object, got {item!r}")
    return good


def _text(
    item: Mapping[str, Any], key: str, where: str, problems: list[str], limit: int = MAX_TEXT_LENGTH
) -> str | None:
    value = item.get(key)
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{where} needs a non-empty string {key!r}, got {show(value)}")
        return None
    if len(value) > limit:
        problems.append(f"{where}: {key} {value[:40]!r}... is longer than {limit} characters")
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        problems.append(f"{where}: {key} contains characters that are not valid Unicode text (a lone surrogate)")
        return None
    return value


def _id_pairs(value: Any, name: str, field: str, label: str) -> tuple[list[tuple[str, str]], list[str]]:
    """``[{"id", field}]`` as ``(id, field)`` pairs, each id once, and a description of each bad item.

    ``label`` names an item once its id is known (for example "the waiver of 'C3'"), so a
    message points at the constraint rather than at a list position.
    """
    problems: list[str] = []
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for i, item in enumerate(_items(value, name, problems)):
        where = f"{name}[{i}]"
        cid = _text(item, "id", where, problems, MAX_ID_LENGTH)
        if cid is not None and label:
            where = label.format(id=cid)
        second = _text(item, field, where, problems)
        if cid is None or second is None:
            continue
        if cid in seen:
            problems.append(f"{name} lists constraint id {cid!r} twice")
            continue
        seen.add(cid)
        pairs.append((cid, second))
    return pairs, problems


def parse_constraints(value: Any, name: str) -> tuple[list[tuple[str, str]], list[str]]:
    """``[{"id", "text"}]`` as ``(id, text)`` pairs, and a description of each bad item."""
    return _id_pairs(value, name, "text", "")


def parse_waivers(value: Any) -> tuple[list[tuple[str, str]], list[str]]:
    """``[{"id", "reason"}]`` as ``(id, reason)`` pairs; an empty reason is a problem."""
    return _id_pairs(value, "waived_constraints", "reason", "the waiver of {id!r}")


def parse_criteria(value: Any) -> tuple[list[tuple[str, str]], list[str]]:
    """``[{"check", "constraint_id"}]`` as ``(check, constraint_id)`` pairs."""
    problems: list[str] = []
    pairs: list[tuple[str, str]] = []
    for i, item in enumerate(_items(value, "acceptance_criteria", problems)):
        check = _text(item, "check", f"acceptance_criteria[{i}]", problems)
        cited = item.get("constraint_id")
        if not isinstance(cited, str) or not cited.strip():
            problems.append(
                f"acceptance criterion {i} ({check!r}) cites no constraint id; give it the "
                f"constraint_id of the carried constraint it checks"
            )
            continue
        if check is not None:
            pairs.append((check, cited))
    return pairs, problems


def check_partition(
    origin: Ledger,
    carried: list[tuple[str, str]],
    waivers: list[tuple[str, str]],
    criteria: list[tuple[str, str]],
    shape_problems: list[str],
) -> LedgerProblem | None:
    """None when the hand-off partitions ``origin``'s ledger into carried and waived; else why not.

    Malformed input is reported alone (``invalid_argument``), since a partial parse would make
    up missing ids. A dropped or reworded constraint is ``constraint_missing``; unknown ids, ids
    both carried and waived, and criteria citing no carried id are ``invalid_argument``.
    """
    if shape_problems:
        return LedgerProblem(c.OUTCOME_INVALID_ARGUMENT, shape_problems, [])
    ledger = dict(origin.constraints)
    carried_ids = [cid for cid, _ in carried]
    waived_ids = [cid for cid, _ in waivers]
    accounted = set(carried_ids) | set(waived_ids)
    missing = [cid for cid in ledger if cid not in accounted]
    altered = [cid for cid, text in carried if cid in ledger and normalize_text(text) != normalize_text(ledger[cid])]
    unknown = [cid for cid in carried_ids + waived_ids if cid not in ledger]
    both = [cid for cid in carried_ids if cid in set(waived_ids)]
    carried_set = set(carried_ids) - set(both)
    uncited = [(check, cid) for check, cid in criteria if cid not in carried_set]
    reasons: list[str] = []
    if missing:
        reasons.append(
            f"constraint ids {missing} are neither carried nor waived; carry each in constraints with "
            f"its text verbatim, or waive it in waived_constraints with a reason"
        )
    if altered:
        texts = ", ".join(f"{cid}={ledger[cid]!r}" for cid in altered)
        reasons.append(f"the text of constraint ids {altered} was altered; carry it verbatim: {texts}")
    if unknown:
        reasons.append(
            f"constraint ids {unknown} are not in the ledger of task {origin.task_id!r} "
            f"(it has {list(ledger)}); a hand-off cannot add or rename constraints"
        )
    if both:
        reasons.append(f"constraint ids {both} are both carried and waived; choose one")
    for check, cid in uncited:
        reasons.append(
            f"acceptance criterion {check!r} cites {cid!r}, which is not a carried constraint id "
            f"(carried: {sorted(carried_set)})"
        )
    if not reasons:
        return None
    code = c.OUTCOME_CONSTRAINT_MISSING if missing or altered else c.OUTCOME_INVALID_ARGUMENT
    return LedgerProblem(code, reasons, missing + altered)


@dataclass(frozen=True)
class Handoff:
    """A ``delegate`` call's arguments, parsed; ``problems`` are the shape errors found on the way
    (reported together with the partition's, so one refusal names everything to fix)."""

    subtask: str
    origin_task_id: str
    agent_id: str
    child_id: str
    carried: list[tuple[str, str]]
    waivers: list[tuple[str, str]]
    criteria: list[tuple[str, str]]
    problems: list[str]


def parse_handoff(
    subtask: Any,
    origin_task_id: Any,
    constraints: Any,
    acceptance_criteria: Any,
    waived_constraints: Any,
    agent_id: Any,
    task_id: Any,
) -> Handoff | dict[str, Any]:
    """Validate ``delegate``'s arguments without touching the store: the parsed hand-off, or the
    refusal for an origin id that cannot name a task (nothing else can be checked without one)."""
    shape: list[str] = []
    if not isinstance(subtask, str) or not subtask.strip():
        shape.append(f"subtask must be a non-empty string, got {subtask!r}")
    if not isinstance(agent_id, str) or not agent_id:
        shape.append(f"agent_id must be a non-empty string, got {agent_id!r}")
    if task_id is not None and (not isinstance(task_id, str) or not task_id.strip()):
        shape.append(f"task_id must be a non-empty string or omitted, got {task_id!r}")
    if not isinstance(origin_task_id, str) or not origin_task_id:
        return refusal(
            c.OUTCOME_INVALID_ARGUMENT,
            f"origin_task_id must be the id of a registered task, got {origin_task_id!r}",
            retry=True,
        )
    carried, more = parse_constraints(constraints, "constraints")
    shape += more
    waivers, more = parse_waivers(waived_constraints)
    shape += more
    criteria, more = parse_criteria(acceptance_criteria)
    shape += more
    child_id = task_id if task_id is not None else "task-" + uuid.uuid4().hex[:16]
    return Handoff(subtask, origin_task_id, agent_id, child_id, carried, waivers, criteria, shape)


def write_child(conn: sqlite3.Connection, origin: Ledger, request: Handoff, created_at: str) -> Ledger:
    """Store the accepted child task, its waivers and its criteria (inside the caller's transaction)."""
    hop = origin.hop + 1
    chosen = {cid for cid, _ in request.carried}  # the origin's verbatim text, in ledger order
    kept = tuple((cid, text) for cid, text in origin.constraints if cid in chosen)
    child = Ledger(request.child_id, request.origin_task_id, origin.root_task_id, hop, request.subtask, kept)
    child.insert(conn, request.agent_id, created_at)
    conn.executemany(
        "INSERT INTO delegation_waivers (task_id, constraint_id, reason, hop, agent_id) VALUES (?, ?, ?, ?, ?)",
        [(request.child_id, wid, reason, hop, request.agent_id) for wid, reason in request.waivers],
    )
    conn.executemany(
        "INSERT INTO delegation_criteria (task_id, position, check_text, constraint_id) VALUES (?, ?, ?, ?)",
        [(request.child_id, i, check, cid) for i, (check, cid) in enumerate(request.criteria)],
    )
    return child
