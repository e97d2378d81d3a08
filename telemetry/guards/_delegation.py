"""Delegation that carries constraints: the hand-off refuses to lose one silently (goal drift).

An origin task is registered with a constraint ledger (``[{"id", "text"}]``). Every
:meth:`Delegations.delegate` from a task must partition that task's ledger: each constraint id is
either carried with its text verbatim (whitespace runs count as one space) or waived with a
non-empty reason. There is no third option, so forgetting a constraint is a refused call that
names the ids and the hop, not a paraphrase nobody notices. Each acceptance criterion must cite a
carried constraint id, so the child's definition of done traces back to the original ask.

A successful delegation creates a child task one hop deeper whose ledger is the carried set;
``delegation.root_task_id`` stays the chain's root, and waivers are stored with the hop that made
them and counted in ``tool_constraint_waivers_total``. The spans alone let forensics rebuild the
chain (``delegation.task_id``, ``.origin_task_id``, ``.root_task_id``, ``.hop``,
``.constraints.carried``, ``.constraints.waived``, ``.constraints.waiver_reasons``).

For crews that still hand off free text (``delegate(subtask, context)``),
:meth:`Delegations.legacy_handoff` (store-backed) or :func:`record_handoff` with
:func:`carried_ids` (store-free) records which root constraints' text survived into the context,
on the same attributes, so forensics can find the hop where one was lost. They never refuse.

Example::

    ledger = Delegations(SQLiteStore("crew.db"))
    ledger.register_task("T0", "Speed up the API", [{"id": "C1", "text": "Keep the API contract"}])
    ledger.delegate("Add a cache", "T0", constraints=[{"id": "C1", "text": "Keep the API contract"}],
                    acceptance_criteria=[{"check": "contract tests pass", "constraint_id": "C1"}],
                    waived_constraints=[], agent_id="planner")
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

# typing_extensions' TypedDict, not typing's: pydantic (which builds MCP tool schemas from these
# signatures) needs it before Python 3.12. It is a dependency of opentelemetry-api.
from typing_extensions import TypedDict

from .. import conventions as c
from ..exceptions import ConfigurationError
from ..instrument import current_call, instrument_tool
from . import _validation as validation
from ._envelope import refusal, refuse_when_busy, success
from ._ledger import (
    Handoff,
    Ledger,
    LedgerProblem,
    check_partition,
    normalize_text,
    parse_constraints,
    parse_handoff,
    write_child,
)
from ._store import Store, require_store
from ._validation import MAX_TEXT_LENGTH, Problems


class Constraint(TypedDict):
    """One constraint of a task's ledger: carry it with its text exactly as the origin task has it."""

    id: str
    text: str


class Waiver(TypedDict):
    """A constraint deliberately not carried to the child, and why (the reason is recorded)."""

    id: str
    reason: str


class AcceptanceCriterion(TypedDict):
    """How the child's work is checked, citing the carried constraint it verifies."""

    check: str
    constraint_id: str

__all__ = ["Delegations", "carried_ids", "normalize_text", "record_handoff"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS delegation_tasks (
    task_id        TEXT PRIMARY KEY,
    origin_task_id TEXT REFERENCES delegation_tasks(task_id),
    root_task_id   TEXT NOT NULL,
    hop            INTEGER NOT NULL,
    objective      TEXT NOT NULL,
    agent_id       TEXT,
    created_at     TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS delegation_constraints (
    task_id       TEXT NOT NULL REFERENCES delegation_tasks(task_id),
    position      INTEGER NOT NULL,
    constraint_id TEXT NOT NULL,
    text          TEXT NOT NULL,
    PRIMARY KEY (task_id, constraint_id)
);
CREATE TABLE IF NOT EXISTS delegation_waivers (
    task_id       TEXT NOT NULL REFERENCES delegation_tasks(task_id),
    constraint_id TEXT NOT NULL,
    reason        TEXT NOT NULL,
    hop           INTEGER NOT NULL,
    agent_id      TEXT,
    PRIMARY KEY (task_id, constraint_id)
);
CREATE TABLE IF NOT EXISTS delegation_criteria (
    task_id       TEXT NOT NULL REFERENCES delegation_tasks(task_id),
    position      INTEGER NOT NULL,
    check_text    TEXT NOT NULL,
    constraint_id TEXT NOT NULL,
    PRIMARY KEY (task_id, position)
);
CREATE INDEX IF NOT EXISTS delegation_tasks_root ON delegation_tasks(root_task_id, hop);
"""


def carried_ids(context: str, constraints: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ids of ``constraints`` whose text appears verbatim in free-text ``context``.

    Whitespace runs count as one space on both sides; nothing else is forgiven, because a
    paraphrase is exactly how a boundary condition gets lost.
    """
    if not isinstance(context, str):
        raise ConfigurationError(f"carried_ids: context is the hand-off's free text, not {validation.show(context)}")
    if isinstance(constraints, (str, bytes, bytearray, Mapping)) or not isinstance(constraints, Iterable):
        raise ConfigurationError("carried_ids: constraints takes a list of {'id', 'text'} mappings (the chain "
                                 f"root's), not {validation.show(constraints)}")
    items = list(constraints)
    for item in items:
        if not (isinstance(item, Mapping) and isinstance(item.get("text"), str)
                and isinstance(item.get("id"), (str, int)) and not isinstance(item.get("id"), bool)):
            raise ConfigurationError(f"carried_ids: each constraint is a mapping with an 'id' and a 'text', not "
                                     f"{validation.show(item)}")
    haystack = normalize_text(context)
    return [str(item["id"]) for item in items if normalize_text(item["text"]) in haystack]


def _text_list(name: str, value: Any) -> list[str]:
    """``value`` as a list of strings, or a ConfigurationError naming ``name``: one string would be
    recorded as its characters ("C12" carried as "C", "1", "2"), and forensics would then judge
    constraints that were never named."""
    if isinstance(value, (str, bytes, bytearray)) or not isinstance(value, Iterable):
        raise ConfigurationError(f"record_handoff: {name} takes a list of strings, not {validation.show(value)}"
                                 + (f"; pass [{value!r}]" if isinstance(value, str) else ""))
    items = list(value)
    bad = [item for item in items if not isinstance(item, str)]
    if bad:
        raise ConfigurationError(f"record_handoff: {name} takes a list of strings; {validation.show(bad[0])} is not one")
    return items


def record_handoff(
    *,
    task_id: str,
    origin_task_id: str | None,
    root_task_id: str,
    hop: int,
    carried: Sequence[str],
    waived: Sequence[str] = (),
    waiver_reasons: Sequence[str] = (),
    agent_id: str | None = None,
) -> None:
    """Put one hand-off's ``delegation.*`` attributes on the current tool span.

    The store-free half of the legacy pattern: call it inside a free-text ``delegate`` tool
    decorated with ``@instrument_tool(kind="delegate")``, with ``carried`` from
    :func:`carried_ids` against the chain root's constraints. Outside an instrumented call it
    does nothing. ``waiver_reasons`` must align with ``waived``.
    """
    carried, waived, waiver_reasons = (_text_list(name, value) for name, value in (
        ("carried", carried), ("waived", waived), ("waiver_reasons", waiver_reasons)))
    if len(waived) != len(waiver_reasons):
        raise ConfigurationError(
            f"record_handoff: {len(waived)} waived ids but {len(waiver_reasons)} reasons; give one reason per id"
        )
    call = current_call()
    call.set_attributes(
        {
            c.DELEGATION_TASK_ID: task_id,
            c.DELEGATION_ORIGIN_TASK_ID: origin_task_id,
            c.DELEGATION_ROOT_TASK_ID: root_task_id,
            c.DELEGATION_HOP: hop,
            c.DELEGATION_CONSTRAINTS_CARRIED: list(carried),
            c.DELEGATION_CONSTRAINTS_WAIVED: list(waived),
            c.DELEGATION_WAIVER_REASONS: list(waiver_reasons),
            c.GEN_AI_AGENT_ID: agent_id,
        }
    )
    if waived:
        call.add_waivers(len(waived))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def _task_readback(call: Any, result: Any) -> bool | None:
    """State success of a task-creating call: the stored ledger is the one the call reported."""
    if not isinstance(result, Mapping) or not result.get(c.ENVELOPE_OK):
        return None
    self: Delegations = call.arguments["self"]
    stored = self._ledger(str(result["task_id"]))
    return stored is not None and [cid for cid, _ in stored.constraints] == list(result["carried"])


class Delegations:
    """The constraint ledger of a crew's tasks, kept in the guards' SQLite store.

    Each public tool method is an instrumented tool (``register_task``, ``delegate``,
    ``get_task``, and ``legacy_handoff`` to be called inside a legacy tool); a refusal is an
    envelope from :func:`telemetry.guards._envelope.refusal`.
    """

    def __init__(self, store: Store) -> None:
        self.store = require_store(store, "Delegations")
        store.ensure_schema("delegation", _SCHEMA)

    # --- reading the ledger ----------------------------------------------------------------

    def _ledger(self, task_id: str) -> Ledger | None:
        with self.store.read() as conn:
            return Ledger.load(conn, task_id)

    def waivers(self, root_task_id: str) -> list[dict[str, Any]]:
        """Every waiver made in the chain rooted at ``root_task_id``, by hop: an operator's view."""
        with self.store.read() as conn:
            rows = conn.execute(
                "SELECT w.task_id, w.constraint_id, w.reason, w.hop, w.agent_id FROM delegation_waivers w "
                "JOIN delegation_tasks t ON t.task_id = w.task_id WHERE t.root_task_id = ? "
                "ORDER BY w.hop, w.task_id, w.constraint_id",
                (root_task_id,),
            ).fetchall()
        return [dict(row) for row in rows]

    @instrument_tool(name=c.TOOL_GET_TASK, kind=c.KIND_READ)
    @refuse_when_busy
    def get_task(self, task_id: str) -> dict[str, Any]:
        """A task's objective, hop, root and constraint ledger: what an agent delegates from.

        Its span carries no ``delegation.*`` attribute on purpose: forensics treats a span with
        ``delegation.task_id`` as the record of a hand-off (its latest one per task wins).
        """
        try:
            task_id = validation.text("task_id", task_id)
        except validation.BadInput as bad:
            return bad.envelope
        ledger = self._ledger(task_id)
        if ledger is None:
            return refusal(
                c.OUTCOME_NOT_FOUND,
                f"task {task_id!r} is not registered; register it with register_task or use the "
                f"task_id a delegate call returned",
                retry=False,
                task_id=task_id,
            )
        return success(**ledger.as_fields())

    # --- registering and delegating --------------------------------------------------------

    # Idempotent: the same task again with the same ledger is a no-op, a different one is refused.
    @instrument_tool(name=c.TOOL_REGISTER_TASK, kind=c.KIND_DELEGATE, idempotent=True, readback=_task_readback,
                     readback_timeout=math.inf)  # in this thread: the store's own timeouts bound its read
    @refuse_when_busy
    def register_task(
        self,
        task_id: str,
        objective: str,
        constraints: Sequence[Constraint] = (),
        agent_id: str | None = None,
    ) -> dict[str, Any]:
        """Record an origin task (hop 0, its own root) and its constraint ledger.

        Registering the same id again with the same objective and ledger is a no-op success
        (``created: false``); with a different one it is refused, so a ledger cannot be
        rewritten after agents delegated from it.
        """
        call = current_call()
        problems = Problems(c.TOOL_REGISTER_TASK)
        task_id_ = problems.text("task_id", task_id)
        objective_ = problems.text("objective", objective, limit=MAX_TEXT_LENGTH)
        parsed = parse_constraints(problems, constraints, "constraints")
        agent_id_ = problems.text("agent_id", agent_id, optional=True)
        call.set_attribute(c.GEN_AI_AGENT_ID, agent_id_)
        if problems or task_id_ is None or objective_ is None:
            return problems.refusal()
        task_id, objective, agent_id = task_id_, objective_, agent_id_
        ids = [cid for cid, _ in parsed]
        call.set_attributes(
            {
                c.DELEGATION_TASK_ID: task_id,
                c.DELEGATION_ROOT_TASK_ID: task_id,
                c.DELEGATION_HOP: 0,
                c.DELEGATION_CONSTRAINTS_CARRIED: ids,
            }
        )
        with self.store.transaction() as conn:
            existing = Ledger.load(conn, task_id)
            if existing is None:
                Ledger(task_id, None, task_id, 0, objective, tuple(parsed)).insert(conn, agent_id, _now())
                created = True
            elif existing.hop == 0 and existing.objective == objective and list(existing.constraints) == parsed:
                created = False
            else:
                return refusal(
                    c.OUTCOME_INVALID_ARGUMENT,
                    f"task {task_id!r} is already registered with a different objective or ledger "
                    f"(hop {existing.hop}); register the new task under a new task_id",
                    retry=False,
                    task_id=task_id,
                    current=existing.as_fields(),
                )
        return success(task_id=task_id, root_task_id=task_id, hop=0, carried=ids, created=created)

    @instrument_tool(name=c.TOOL_DELEGATE, kind=c.KIND_DELEGATE, readback=_task_readback,
                     readback_timeout=math.inf)  # in this thread: the store's own timeouts bound its read
    @refuse_when_busy
    def delegate(
        self,
        subtask: str,
        origin_task_id: str,
        constraints: Sequence[Constraint],
        acceptance_criteria: Sequence[AcceptanceCriterion],
        waived_constraints: Sequence[Waiver],
        agent_id: str,
        task_id: str | None = None,
    ) -> dict[str, Any]:
        """Hand ``subtask`` to a child task, carrying or waiving every constraint of the origin.

        Refused as ``constraint_missing`` when an origin constraint id is neither carried
        verbatim nor waived (or its text was altered), as ``invalid_argument`` for an unknown or
        repeated id, an empty waiver reason, or a criterion citing no carried constraint id, and
        as ``not_found`` for an unregistered origin. Each message names the ids and the hop.
        ``task_id`` names the child (default: a fresh opaque id).
        """
        call = current_call()
        call.set_attribute(c.GEN_AI_AGENT_ID, validation.valid_text(agent_id))
        request = parse_handoff(subtask, origin_task_id, constraints, acceptance_criteria, waived_constraints, agent_id, task_id)
        if not isinstance(request, Handoff):
            return request
        with self.store.transaction() as conn:
            origin = Ledger.load(conn, request.origin_task_id)
            if origin is None:
                return refusal(
                    c.OUTCOME_NOT_FOUND,
                    f"origin task {origin_task_id!r} is not registered; delegate from a task_id that "
                    f"register_task or delegate returned",
                    retry=False,
                    origin_task_id=origin_task_id,
                )
            hop = origin.hop + 1
            call.set_attributes(
                {
                    c.DELEGATION_ORIGIN_TASK_ID: origin_task_id,
                    c.DELEGATION_ROOT_TASK_ID: origin.root_task_id,
                    c.DELEGATION_HOP: hop,
                }
            )
            problem = check_partition(origin, request.carried, request.waivers, request.criteria, request.problems)
            if problem is None and Ledger.load(conn, request.child_id) is not None:
                problem = LedgerProblem(
                    c.OUTCOME_INVALID_ARGUMENT,
                    [f"task_id {request.child_id!r} already exists; omit task_id or pick a new one"],
                    [],
                )
            if problem is not None:
                return self._refuse(call, origin, hop, problem)
            child = write_child(conn, origin, request, _now())
        carried_ids_ = [cid for cid, _ in child.constraints]
        waived = [wid for wid, _ in request.waivers]
        record_handoff(
            task_id=child.task_id,
            origin_task_id=origin_task_id,
            root_task_id=origin.root_task_id,
            hop=hop,
            carried=carried_ids_,
            waived=waived,
            waiver_reasons=[reason for _, reason in request.waivers],
            agent_id=agent_id,
        )
        return success(
            task_id=child.task_id, origin_task_id=origin_task_id, root_task_id=origin.root_task_id, hop=hop,
            carried=carried_ids_, waived=waived,
        )

    @staticmethod
    def _refuse(call: Any, origin: Ledger, hop: int, problem: LedgerProblem) -> dict[str, Any]:
        call.set_attribute(c.DELEGATION_CONSTRAINTS_MISSING, problem.missing)
        return refusal(
            problem.code,
            f"delegation from task {origin.task_id!r} at hop {hop} refused: " + "; ".join(problem.reasons),
            retry=True,
            origin_task_id=origin.task_id,
            hop=hop,
            missing_ids=problem.missing,
            required_constraints=[{"id": cid, "text": text} for cid, text in origin.constraints],
        )

    # --- the legacy free-text hand-off -----------------------------------------------------

    def legacy_handoff(
        self,
        context: str,
        *,
        origin_task_id: str,
        subtask: str = "",
        task_id: str | None = None,
        agent_id: str | None = None,
    ) -> dict[str, Any]:
        """Record a free-text hand-off from ``origin_task_id``; never refuses.

        Call it inside a legacy ``delegate(subtask, context)`` tool decorated with
        ``@instrument_tool(kind="delegate")``. It checks the chain root's constraints against
        ``context`` (:func:`carried_ids`), stores a child task whose ledger is what survived, and
        puts the ``delegation.*`` attributes on the enclosing span, so the hop that lost a
        constraint is visible to forensics. Returns ``task_id``, ``hop``, ``root_task_id``,
        ``carried`` and ``dropped`` (root ids absent from the context). Raises
        :class:`ConfigurationError` for an unregistered origin: the harness, not the model, owes
        the origin task id here.
        """
        if not isinstance(context, str):
            raise ConfigurationError(f"legacy_handoff: context must be the hand-off text, got {validation.show(context)}")
        problems = Problems("legacy_handoff")
        problems.text("origin_task_id", origin_task_id)
        problems.text("task_id", task_id, optional=True)
        problems.text("agent_id", agent_id, optional=True)
        problems.text("subtask", subtask or "-", limit=MAX_TEXT_LENGTH)
        if problems:
            raise ConfigurationError("; ".join(problems.found))
        context = context.encode("utf-8", "replace").decode("utf-8")  # free text: a lone surrogate becomes "?"
        child_id = task_id if task_id is not None else "task-" + uuid.uuid4().hex[:16]
        with self.store.transaction() as conn:
            origin = Ledger.load(conn, origin_task_id)
            if origin is None:
                raise ConfigurationError(
                    f"legacy_handoff: origin task {origin_task_id!r} is not registered; register the root "
                    f"with register_task and pass the task_id each hand-off returned"
                )
            if Ledger.load(conn, child_id) is not None:
                raise ConfigurationError(f"legacy_handoff: task_id {child_id!r} already exists; pass a new one or omit it")
            root = origin if origin.hop == 0 else Ledger.load(conn, origin.root_task_id)
            assert root is not None
            carried = carried_ids(context, [{"id": cid, "text": text} for cid, text in root.constraints])
            child = Ledger(
                child_id,
                origin_task_id,
                origin.root_task_id,
                origin.hop + 1,
                subtask or context[:200] or "(empty hand-off)",
                tuple((cid, text) for cid, text in root.constraints if cid in carried),
            )
            child.insert(conn, agent_id, _now())
        record_handoff(
            task_id=child_id,
            origin_task_id=origin_task_id,
            root_task_id=origin.root_task_id,
            hop=child.hop,
            carried=carried,
            agent_id=agent_id,
        )
        dropped = [cid for cid, _ in root.constraints if cid not in carried]
        return {
            "task_id": child_id,
            "hop": child.hop,
            "root_task_id": origin.root_task_id,
            "carried": carried,
            "dropped": dropped,
        }
