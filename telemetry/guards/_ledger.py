"""The delegation guard's ledger rows and its partition rule, apart from the tools that use them.

A :class:`Ledger` is one task's stored record; :func:`check_partition` is the whole rule a
delegation must pass; the ``parse_*`` functions turn model-supplied lists into typed tuples and
record every malformed item (naming it) in a :class:`~telemetry.guards._validation.Problems`
instead of raising, because a tool answers a model with an envelope, not an exception.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from typing import Any

from .. import conventions as c
from . import _validation as validation
from ._envelope import refusal
from ._store import Connection
from ._validation import MAX_TEXT_LENGTH, Problems, show


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
    def load(cls, conn: Connection, task_id: str) -> Ledger | None:
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

    def insert(self, conn: Connection, agent_id: str | None, created_at: str) -> None:
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
        return {**asdict(self), "constraints": [{"id": cid, "text": text} for cid, text in self.constraints]}


@dataclass(frozen=True)
class LedgerProblem:
    """Why a delegation is refused: the outcome code, one reason per rule broken, and the
    origin ids that were neither carried verbatim nor waived."""

    code: str
    reasons: list[str]
    missing: list[str]


def _id_pairs(problems: Problems, value: Any, name: str, field: str, label: str) -> list[tuple[str, str]]:
    """``[{"id", field}]`` as ``(id, field)`` pairs, each id once; each bad item is a problem.

    ``label`` names an item once its id is known (for example "the waiver of 'C3'"), so a
    message points at the constraint rather than at a list position.
    """
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for i, item in enumerate(problems.items(name, value)):
        where = f"{name}[{i}]"
        cid = problems.text(f"{where}.id", item.get("id"))
        if cid is not None and label:
            where = label.format(id=show(cid))
        second = problems.text(f"{where}.{field}", item.get(field), limit=MAX_TEXT_LENGTH)
        if cid is None or second is None:
            continue
        if cid in seen:
            problems.add(f"{name} lists constraint id {show(cid)} twice")
            continue
        seen.add(cid)
        pairs.append((cid, second))
    return pairs


def parse_constraints(problems: Problems, value: Any, name: str) -> list[tuple[str, str]]:
    """``[{"id", "text"}]`` as ``(id, text)`` pairs; each bad item is a problem."""
    return _id_pairs(problems, value, name, "text", "")


def parse_waivers(problems: Problems, value: Any) -> list[tuple[str, str]]:
    """``[{"id", "reason"}]`` as ``(id, reason)`` pairs; an empty reason is a problem."""
    return _id_pairs(problems, value, "waived_constraints", "reason", "the waiver of {id}")


def parse_criteria(problems: Problems, value: Any) -> list[tuple[str, str]]:
    """``[{"check", "constraint_id"}]`` as ``(check, constraint_id)`` pairs."""
    pairs: list[tuple[str, str]] = []
    for i, item in enumerate(problems.items("acceptance_criteria", value)):
        check = problems.text(f"acceptance_criteria[{i}].check", item.get("check"), limit=MAX_TEXT_LENGTH)
        cited = item.get("constraint_id")
        if not isinstance(cited, str) or not cited.strip():
            problems.add(
                f"acceptance criterion {i} ({show(check)}) cites no constraint id; give it the "
                f"constraint_id of the carried constraint it checks"
            )
            continue
        cited = problems.text(f"acceptance_criteria[{i}].constraint_id", cited)
        if check is not None and cited is not None:
            pairs.append((check, cited))
    return pairs


def check_partition(
    origin: Ledger,
    carried: list[tuple[str, str]],
    waivers: list[tuple[str, str]],
    criteria: list[tuple[str, str]],
    shape_problems: Problems,
) -> LedgerProblem | None:
    """None when the hand-off partitions ``origin``'s ledger into carried and waived; else why not.

    Malformed input is reported alone (``invalid_argument``), since a partial parse would make
    up missing ids. A dropped or reworded constraint is ``constraint_missing``; unknown ids, ids
    both carried and waived, and criteria citing no carried id are ``invalid_argument``.
    """
    if shape_problems:
        return LedgerProblem(c.OUTCOME_INVALID_ARGUMENT, shape_problems.found, [])
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
    (reported together with the partition's, so one refusal names everything to fix). ``subtask``
    and ``agent_id`` are None only when ``problems`` says why."""

    subtask: str | None
    origin_task_id: str
    agent_id: str | None
    child_id: str
    carried: list[tuple[str, str]]
    waivers: list[tuple[str, str]]
    criteria: list[tuple[str, str]]
    problems: Problems


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
    shape = Problems(c.TOOL_DELEGATE)
    subtask_ = shape.text("subtask", subtask, limit=MAX_TEXT_LENGTH)
    agent_id_ = shape.text("agent_id", agent_id)
    task_id_ = shape.text("task_id", task_id, optional=True)
    origin_id = validation.valid_text(origin_task_id)
    if origin_id is None:
        return refusal(
            c.OUTCOME_INVALID_ARGUMENT,
            f"{validation.text_problem('origin_task_id', origin_task_id)}; pass the id of a registered task",
            retry=True,
        )
    carried = parse_constraints(shape, constraints, "constraints")
    waivers = parse_waivers(shape, waived_constraints)
    criteria = parse_criteria(shape, acceptance_criteria)
    child_id = task_id_ if task_id_ is not None else "task-" + uuid.uuid4().hex[:16]
    return Handoff(subtask_, origin_id, agent_id_, child_id, carried, waivers, criteria, shape)


def write_child(conn: Connection, origin: Ledger, request: Handoff, created_at: str) -> Ledger:
    """Store the accepted child task, its waivers and its criteria (inside the caller's transaction)."""
    assert request.subtask is not None and request.agent_id is not None, "no shape problem: both are valid texts"
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
