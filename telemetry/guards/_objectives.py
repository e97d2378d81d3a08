"""Versioned objectives and guarded sends: an outward action refuses a superseded policy.

Context drift is a freshness failure: an agent acts on a copy of the objective (a refund policy,
say) that was corrected after it read it. This module makes freshness part of the protocol:

- :meth:`Objectives.publish_objective` stores a task's objective and returns an opaque version
  token (a string to carry, never a number to compute with);
- :meth:`Objectives.get_objective` returns the current text and version with its age, and
  registers the reader as a holder of that version, so the correction fan-out builds itself;
- :meth:`Objectives.supersede_objective` stores a new version and returns the holders of older
  versions: exactly the agents to tell;
- :func:`guarded_send` guards a send-style tool that takes ``policy_version`` (stacked under
  ``@instrument_tool(kind="send")``, as every guard is): a send against a
  superseded version is refused as ``stale_policy`` with the current policy in the envelope
  (counted in ``tool_stale_sends_total``), so the agent re-reads, redrafts and retries.

Atomicity: the check and the record of an accepted send happen in one exclusive write
transaction, and a supersession is another, so they are totally ordered by the store's write lock
across threads, processes and hosts. "Superseded before the send's check" means the supersession
committed before the send's transaction took the lock; such a send is always refused. A send
whose check committed first is accepted against the version current at that instant (its row
in ``objective_sends`` is the record), even if the tool body then runs after the supersession
commits: the check is the send's linearization point, and a supersession's fan-out can rely on
no new acceptance of the old version ever appearing after it returns.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import math
import secrets
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timezone
from typing import Any, ParamSpec, TypeVar, cast

from .. import conventions as c
from ..exceptions import ConfigurationError
from ..instrument import NO_CALL, SPEC_ATTRIBUTE, Call, current_agent, current_call, instrument_tool
from . import _validation as validation
from ._envelope import busy_refusal, refusal, refuse_when_busy, success
from ._store import Store, StoreBusy, require_store
from ._validation import MAX_ID_LENGTH, MAX_TEXT_LENGTH, Problems

__all__ = ["Objectives", "guarded_send"]

P = ParamSpec("P")
R = TypeVar("R")

POLICY_VERSION_PARAMETER = "policy_version"
"""The parameter a guarded send must take (required, no default)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objective_versions (
    task_id       TEXT NOT NULL,
    seq           INTEGER NOT NULL,
    version       TEXT NOT NULL UNIQUE,
    text          TEXT NOT NULL,
    reason        TEXT,
    published_at  TEXT NOT NULL,
    superseded_at TEXT,
    PRIMARY KEY (task_id, seq)
);
CREATE TABLE IF NOT EXISTS objective_holders (
    task_id  TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    version  TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    read_at  TEXT NOT NULL,
    PRIMARY KEY (task_id, agent_id)
);
CREATE TABLE IF NOT EXISTS objective_sends (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id         TEXT NOT NULL,
    version         TEXT NOT NULL,
    current_version TEXT NOT NULL,
    agent_id        TEXT,
    tool            TEXT NOT NULL,
    accepted        INTEGER NOT NULL,
    checked_at      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS objective_sends_version ON objective_sends(task_id, version, accepted);
"""

_CURRENT = "SELECT seq, version, text, published_at FROM objective_versions WHERE task_id = ? ORDER BY seq DESC LIMIT 1"


def _check(tool: str, **texts: Any) -> dict[str, Any] | None:
    """The ``invalid_argument`` refusal naming every bad text argument, or None. An argument
    whose name ends in ``_id`` or ``_version`` is an id (MAX_ID_LENGTH), any other a free text."""
    problems = Problems(tool)
    for name, value in texts.items():
        limit = MAX_ID_LENGTH if name.endswith(("_id", "_version")) else MAX_TEXT_LENGTH
        problems.text(name, value, limit=limit)
    return problems.refusal() if problems else None


def _on_task(task_id: str, attributes: Mapping[str, Any] | None = None) -> Call:
    """The current call, with ``objective.task_id`` (and ``attributes``) on its span."""
    call = current_call()
    call.set_attributes({c.OBJECTIVE_TASK_ID: task_id, **(attributes or {})})
    return call


def _version_readback(call: Any, result: Any) -> bool | None:
    """State success of a publication: the returned version is stored with the text sent."""
    if not isinstance(result, Mapping) or not result.get(c.ENVELOPE_OK):
        return None
    self: Objectives = call.arguments["self"]
    with self.store.read() as conn:
        row = conn.execute(
            "SELECT text FROM objective_versions WHERE task_id = ? AND version = ?",
            (call.arguments["task_id"], result["version"]),
        ).fetchone()
    return row is not None and row["text"] == call.arguments["text"]


class Objectives:
    """Each task's objective as a chain of versions, with holders and a send log.

    ``clock`` returns the current time (UTC, for ``as_of``); ``new_version`` makes version
    tokens (default: 16 random hex digits; a simulator may pass a seeded one).
    """

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], datetime] | None = None,
        new_version: Callable[[], str] | None = None,
    ) -> None:
        self.store = require_store(store, "Objectives")
        self._clock = clock or (lambda: datetime.now(timezone.utc))
        self._new_version = new_version or (lambda: secrets.token_hex(8))
        store.ensure_schema("objectives", _SCHEMA)

    def _now(self) -> str:
        return self._clock().isoformat()

    def _token(self) -> str:
        token = self._new_version()
        if not isinstance(token, str) or not token:
            raise ConfigurationError(f"new_version must return a non-empty string, got {token!r}")
        return token

    @staticmethod
    def _not_found(task_id: str) -> dict[str, Any]:
        return refusal(
            c.OUTCOME_NOT_FOUND,
            f"no objective is published for task {task_id!r}; publish it with publish_objective first",
            retry=False,
            task_id=task_id,
        )

    # --- the tools -------------------------------------------------------------------------

    # Idempotent: publishing a second time is refused (supersede_objective changes an objective).
    @instrument_tool(name=c.TOOL_PUBLISH_OBJECTIVE, kind=c.KIND_WRITE, idempotent=True, readback=_version_readback,
                     readback_timeout=math.inf)  # in this thread: the store's own timeouts bound its read
    @refuse_when_busy
    def publish_objective(self, task_id: str, text: str) -> dict[str, Any]:
        """Publish a task's first objective; returns its ``version``. A second publication of the
        same task is refused: a correction is :meth:`supersede_objective`, with a reason."""
        bad = _check(c.TOOL_PUBLISH_OBJECTIVE, task_id=task_id, text=text)
        if bad is not None:
            return bad
        call = _on_task(task_id)
        with self.store.transaction() as conn:
            row = conn.execute(_CURRENT, (task_id,)).fetchone()
            if row is not None:
                return refusal(
                    c.OUTCOME_INVALID_ARGUMENT,
                    f"task {task_id!r} already has an objective (version {row['version']!r}); "
                    f"change it with supersede_objective(task_id, text, reason, expected_version)",
                    retry=False,
                    task_id=task_id,
                    current_version=row["version"],
                )
            version, as_of = self._token(), self._now()
            conn.execute(
                "INSERT INTO objective_versions (task_id, seq, version, text, published_at) VALUES (?, 1, ?, ?, ?)",
                (task_id, version, text, as_of),
            )
        call.set_attribute(c.OBJECTIVE_VERSION, version)
        return success(task_id=task_id, version=version, as_of=as_of)

    @instrument_tool(name=c.TOOL_GET_OBJECTIVE, kind=c.KIND_READ)
    @refuse_when_busy
    def get_objective(self, task_id: str, agent_id: str) -> dict[str, Any]:
        """The current objective, registering ``agent_id`` as a holder of its version.

        Returns ``objective``, ``version``, ``as_of`` (when this version was published),
        ``superseded`` (the copy this agent held before this read has been superseded;
        ``previous_version`` names it) and ``refresh_required`` (drop work drafted against any
        earlier copy and redo it against this one). Both flags are false on a first read.
        """
        bad = _check(c.TOOL_GET_OBJECTIVE, task_id=task_id, agent_id=agent_id)
        if bad is not None:
            return bad
        call = _on_task(task_id, {c.GEN_AI_AGENT_ID: agent_id})
        with self.store.transaction() as conn:
            row = conn.execute(_CURRENT, (task_id,)).fetchone()
            if row is None:
                return self._not_found(task_id)
            held = conn.execute(
                "SELECT version, seq FROM objective_holders WHERE task_id = ? AND agent_id = ?", (task_id, agent_id)
            ).fetchone()
            conn.execute(
                "INSERT INTO objective_holders (task_id, agent_id, version, seq, read_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (task_id, agent_id) DO UPDATE SET version = excluded.version, seq = excluded.seq, "
                "read_at = excluded.read_at",
                (task_id, agent_id, row["version"], row["seq"], self._now()),
            )
        stale = held is not None and int(held["seq"]) < int(row["seq"])
        call.set_attribute(c.OBJECTIVE_VERSION, row["version"])
        fields: dict[str, Any] = {
            "objective": row["text"],
            "version": row["version"],
            "as_of": row["published_at"],
            "superseded": stale,
            "refresh_required": stale,
        }
        if stale:
            fields["previous_version"] = held["version"]
        return success(**fields)

    @instrument_tool(name=c.TOOL_SUPERSEDE_OBJECTIVE, kind=c.KIND_WRITE, readback=_version_readback,
                     readback_timeout=math.inf)  # in this thread: the store's own timeouts bound its read
    @refuse_when_busy
    def supersede_objective(self, task_id: str, text: str, reason: str, expected_version: str) -> dict[str, Any]:
        """Replace a task's objective; returns the new ``version`` and ``holders``: every agent
        holding an older version (``[{"agent_id", "version"}]``), the correction fan-out list.

        ``expected_version`` is the version you are correcting (from ``publish_objective`` or
        ``get_objective``). If someone superseded it since, nothing changes and the refusal
        (``rejected_stale_version``) carries ``current_version`` and ``current_text``: read them,
        decide whether your correction still applies, and retry with that version. Two
        corrections can never silently overwrite each other.
        """
        bad = _check(
            c.TOOL_SUPERSEDE_OBJECTIVE, task_id=task_id, text=text, reason=reason, expected_version=expected_version
        )
        if bad is not None:
            return bad
        call = _on_task(task_id)
        with self.store.transaction() as conn:
            row = conn.execute(_CURRENT, (task_id,)).fetchone()
            if row is None:
                return self._not_found(task_id)
            if row["version"] != expected_version:
                call.set_attribute(c.OBJECTIVE_CURRENT_VERSION, row["version"])
                return refusal(
                    c.OUTCOME_REJECTED_STALE_VERSION,
                    f"objective {task_id!r} is at version {row['version']!r}, not {expected_version!r}: it was "
                    f"superseded since you read it, and nothing changed. Read current_text, decide whether your "
                    f"correction still applies, and retry with expected_version={row['version']!r}.",
                    retry=True,
                    task_id=task_id,
                    current_version=row["version"],
                    current_text=row["text"],
                )
            version, now, seq = self._token(), self._now(), int(row["seq"]) + 1
            conn.execute(
                "UPDATE objective_versions SET superseded_at = ? WHERE task_id = ? AND seq = ?",
                (now, task_id, row["seq"]),
            )
            conn.execute(
                "INSERT INTO objective_versions (task_id, seq, version, text, reason, published_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (task_id, seq, version, text, reason, now),
            )
            holders = [
                {"agent_id": h["agent_id"], "version": h["version"]}
                for h in conn.execute(
                    "SELECT agent_id, version FROM objective_holders WHERE task_id = ? AND seq < ? ORDER BY agent_id",
                    (task_id, seq),
                )
            ]
        call.set_attributes(
            {
                c.OBJECTIVE_VERSION: version,
                c.OBJECTIVE_PREVIOUS_VERSION: row["version"],
                c.OBJECTIVE_STALE_HOLDERS: len(holders),
            }
        )
        return success(task_id=task_id, version=version, previous_version=row["version"], as_of=now, holders=holders)

    # --- the send check --------------------------------------------------------------------

    def admit_send(self, task_id: str, version: Any, *, agent_id: str | None, tool: str) -> dict[str, Any] | None:
        """Check ``version`` against ``task_id``'s current one and record the verdict, atomically.

        Returns None when the send may go ahead (an accepted row is committed first), or the
        refusal envelope: ``stale_policy`` for a superseded version, ``invalid_argument`` for a
        token that was never a version of this task, ``not_found`` when nothing is published.
        Puts ``objective.task_id``, ``policy.version`` and ``policy.version.current`` on the
        current span. :func:`guarded_send` calls it; call it yourself for a custom send tool.
        """
        call = _on_task(task_id, {c.POLICY_VERSION: validation.valid_text(version)})
        problem = validation.text_problem("policy_version", version)
        if problem is not None:
            with self.store.read() as conn:
                row = conn.execute(_CURRENT, (task_id,)).fetchone()
            return refusal(
                c.OUTCOME_INVALID_ARGUMENT,
                f"{problem}: send the version string get_objective({task_id!r}, agent_id) returned",
                retry=True,
                **self._policy_fields(task_id, row),
            )
        with self.store.transaction() as conn:
            row = conn.execute(_CURRENT, (task_id,)).fetchone()
            if row is None:
                return self._not_found(task_id)
            call.set_attribute(c.POLICY_CURRENT_VERSION, row["version"])
            accepted = version == row["version"]
            conn.execute(
                "INSERT INTO objective_sends (task_id, version, current_version, agent_id, tool, accepted, checked_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (task_id, version, row["version"], agent_id, tool, int(accepted), self._now()),
            )
            if accepted:
                return None
            known = conn.execute(
                "SELECT superseded_at FROM objective_versions WHERE task_id = ? AND version = ?", (task_id, version)
            ).fetchone()
        if known is None:
            return refusal(
                c.OUTCOME_INVALID_ARGUMENT,
                f"policy_version {version!r} was never a version of {task_id!r}; pass the version "
                f"get_objective returned (current: {row['version']!r})",
                retry=True,
                **self._policy_fields(task_id, row),
            )
        return refusal(
            c.OUTCOME_STALE_POLICY,
            f"policy {task_id!r} version {version!r} was superseded at {known['superseded_at']}; "
            f"re-read it with get_objective, redraft against version {row['version']!r}, and send again",
            retry=True,
            **self._policy_fields(task_id, row),
        )

    @staticmethod
    def _policy_fields(task_id: str, row: Any) -> dict[str, Any]:
        if row is None:
            return {"task_id": task_id}
        return {
            "task_id": task_id,
            "current_version": row["version"],
            "current_policy": row["text"],
            "as_of": row["published_at"],
        }

    # --- operator reads --------------------------------------------------------------------

    def holders(self, task_id: str) -> list[dict[str, Any]]:
        """Every agent that read ``task_id``'s objective and the version it last read."""
        with self.store.read() as conn:
            rows = conn.execute(
                "SELECT agent_id, version, read_at FROM objective_holders WHERE task_id = ? ORDER BY agent_id",
                (task_id,),
            ).fetchall()
        return [dict(r) for r in rows]

    def sends(self, task_id: str) -> list[dict[str, Any]]:
        """The send log of ``task_id``'s policy, in check order: each verdict the guard gave."""
        with self.store.read() as conn:
            rows = conn.execute(
                "SELECT id, version, current_version, agent_id, tool, accepted, checked_at FROM objective_sends "
                "WHERE task_id = ? ORDER BY id",
                (task_id,),
            ).fetchall()
        return [{**dict(r), "accepted": bool(r["accepted"])} for r in rows]


def guarded_send(
    objectives: Objectives,
    *,
    policy_task_id: str,
    agent_parameter: str = "agent_id",
) -> Callable[[Callable[P, R]], Callable[P, R | dict[str, Any]]]:
    """Make a send tool refuse a superseded policy. Stack it under ``@instrument_tool(kind="send")``.

    Every guard composes the same way: the guard sits closest to ``def`` and the decorator above
    it records the call, so the refusal is on the tool's span and counted
    (``tool_stale_sends_total``). The tool must take a required ``policy_version`` parameter.
    Before its body runs, :meth:`Objectives.admit_send` checks that version against
    ``policy_task_id``'s current one; a refusal envelope is returned instead of calling the body.
    The calling agent is the ``agent_parameter`` argument when the tool has one, else the
    :func:`telemetry.agent` block::

        @instrument_tool(kind="send")
        @guarded_send(objectives, policy_task_id="refund-policy")
        def send_customer_message(ticket_id: str, body: str, policy_version: str) -> dict: ...

    Without ``@instrument_tool`` above it the guard still refuses, but nothing is recorded.
    """
    if not isinstance(objectives, Objectives):
        raise ConfigurationError(f"guarded_send needs an Objectives instance, got {objectives!r}")
    if not isinstance(policy_task_id, str) or not policy_task_id:
        raise ConfigurationError(f"guarded_send needs policy_task_id, the policy's task id; got {policy_task_id!r}")

    def decorate(func: Callable[P, R]) -> Callable[P, R | dict[str, Any]]:
        label = getattr(func, "__name__", repr(func))
        if hasattr(func, SPEC_ATTRIBUTE):
            raise ConfigurationError(
                f"{label!r} is already instrumented: put @guarded_send below @instrument_tool(kind=\"send\") "
                f"(closest to def) so a refused send is recorded on the tool's span"
            )
        if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
            raise ConfigurationError(f"guarded_send wraps functions and coroutines, not generators ({label!r})")
        signature = inspect.signature(func)
        param = signature.parameters.get(POLICY_VERSION_PARAMETER)
        if param is None or param.default is not inspect.Parameter.empty:
            raise ConfigurationError(
                f"{label}{signature} must take a required {POLICY_VERSION_PARAMETER!r} parameter (no default): "
                f"a default version would reintroduce the stale send this guard refuses"
            )
        has_agent = agent_parameter in signature.parameters

        def admit(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
            bound = signature.bind(*args, **kwargs)  # a call that does not bind raises as the plain tool would
            call = current_call()
            agent_id = bound.arguments.get(agent_parameter) if has_agent else None
            if agent_id is not None:
                problem = validation.text_problem(agent_parameter, agent_id)
                if problem is not None:
                    return validation.invalid(problem).envelope
                call.set_attribute(c.GEN_AI_AGENT_ID, agent_id)
            else:
                ctx = current_agent()
                agent_id = ctx.agent_id if ctx is not None else None
            version = bound.arguments[POLICY_VERSION_PARAMETER]
            # The span's tool name when the decorator above named the tool, else the function's.
            tool = label if call is NO_CALL else call.tool_name
            try:
                return objectives.admit_send(policy_task_id, version, agent_id=agent_id, tool=tool)
            except StoreBusy as busy:  # not admitted, not sent: the caller retries
                return busy_refusal(busy)

        guarded: Callable[..., Any]
        if inspect.iscoroutinefunction(func):
            async_func: Callable[..., Awaitable[Any]] = func

            @functools.wraps(func)
            async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                verdict = await asyncio.to_thread(admit, args, kwargs)
                return verdict if verdict is not None else await async_func(*args, **kwargs)

            guarded = guarded_async
        else:

            @functools.wraps(func)
            def guarded_sync(*args: Any, **kwargs: Any) -> Any:
                verdict = admit(args, kwargs)
                return verdict if verdict is not None else func(*args, **kwargs)

            guarded = guarded_sync
        return cast("Callable[P, R | dict[str, Any]]", guarded)

    return decorate
