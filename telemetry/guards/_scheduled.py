"""Send at, never now: a high-impact send is scheduled with a review window, then fired.

A broadcast or a customer message has no undo. :meth:`ScheduledSends.schedule_send` guards such
a tool (stacked under ``@instrument_tool(kind="send")``, as every guard is) so that calling it
sends nothing: the call is checked (its ``policy_version`` must be current), stored with its
arguments, and answered with a ``scheduled_id`` and the time it fires. Inside the window a
reviewer reads it (``get_scheduled_send``), cancels it (``cancel_scheduled_send``, with a reason)
or approves it (``approve_scheduled_send``: someone other than the scheduling agent; it then
fires at the next pass). The window is the operator's, fixed per tool: a model cannot choose 0.

Firing is explicit: a worker calls :meth:`ScheduledSends.fire_due`. Each due send is claimed in
one write transaction (status ``scheduled``/``approved`` to ``firing``, conditional on the
status), so of two workers, on two hosts, exactly one fires it; a cancel is the same kind of
conditional update, so a send is either cancelled or fired, never both. The fire calls the
instrumented tool again, so it is a span of the same tool: the guard checks the policy version
a second time (:meth:`~telemetry.guards.Objectives.admit_send`), and a policy superseded during
the window refuses the send as ``stale_policy`` (a counted guard refusal) whose envelope is
stored on the scheduled send for the agent to read and redo.

A process that fires must reach the tool: by its importable name (``module:function``, as
pickle and task queues find functions) or through :meth:`ScheduledSends.register`.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from .. import conventions as c
from ..exceptions import ConfigurationError
from ..instrument import SPEC_ATTRIBUTE, agent, current_agent, current_call, instrument_tool
from ..runtime import _containment as _safe
from . import _schedule_firing as fire
from . import _schedule_store as rows
from . import _validation as validation
from ._envelope import busy_refusal, refusal, refuse_when_busy, success
from ._objectives import POLICY_VERSION_PARAMETER, Objectives
from ._schedule_firing import MAX_REVIEW_SECONDS, SCHEDULE_ATTRIBUTE, ScheduleSpec
from ._store import StoreBusy, require_store
from ._validation import BadInput

__all__ = ["MAX_REVIEW_SECONDS", "SCHEDULE_ATTRIBUTE", "ScheduleSpec", "ScheduledSends"]

F = TypeVar("F", bound=Callable[..., Any])


class ScheduledSends:
    """Scheduled sends in a guard store, checked against ``objectives`` at schedule and at fire time.

    ``clock`` returns seconds since the epoch (default ``time.time``); every process sharing the
    store must use the same clock. See the module docstring for the whole life of a send.
    """

    def __init__(self, store: Any, objectives: Objectives, *, clock: Callable[[], float] = time.time) -> None:
        self.store = require_store(store, "ScheduledSends")
        if not isinstance(objectives, Objectives):
            raise ConfigurationError(f"ScheduledSends needs an Objectives instance, got {validation.show(objectives)}")
        if objectives.store is not self.store:
            raise ConfigurationError("ScheduledSends and its Objectives must share one store (the fire's policy check "
                                     "and its claim are ordered by that store's write lock)")
        if not callable(clock):
            raise ConfigurationError(f"clock must be a function returning seconds since the epoch, got {validation.show(clock)}")
        self.objectives = objectives
        self.clock = clock
        self._tools: dict[str, Callable[..., Any]] = {}
        self.store.ensure_schema(rows.SCHEMA_NAME, rows.DDL)

    def _now(self) -> float:
        now = self.clock()
        if isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now):
            raise ConfigurationError(f"the clock returned {validation.show(now)}, not a finite number of seconds")
        return float(now)

    # --- the guard ---------------------------------------------------------------------------

    def schedule_send(
        self, *, policy_task_id: str, review_seconds: float, agent_parameter: str = "agent_id"
    ) -> Callable[[F], F]:
        """Make a send tool schedule instead of send. Stack it under ``@instrument_tool(kind="send")``::

            @instrument_tool(kind="send")
            @sends.schedule_send(policy_task_id="refund-policy", review_seconds=600)
            def broadcast_push(segment: str, body: str, policy_version: str) -> dict: ...

        The tool must be a plain function (not a method, generator or coroutine) taking a
        required ``policy_version``; its arguments must be JSON values (they are stored until it
        fires). ``review_seconds`` is the window, from 0 to :data:`MAX_REVIEW_SECONDS`.
        """
        if not isinstance(policy_task_id, str) or validation.text_problem("policy_task_id", policy_task_id):
            raise ConfigurationError(f"schedule_send needs policy_task_id, the policy's task id; got {validation.show(policy_task_id)}")
        window = fire.review_window(review_seconds)

        def decorate(func: F) -> F:
            label = getattr(func, "__name__", repr(func))
            if hasattr(func, SPEC_ATTRIBUTE):
                raise ConfigurationError(f"{label!r} is already instrumented: put @schedule_send below "
                                         f"@instrument_tool(kind=\"send\") (closest to def) so each event is on a span")
            if not inspect.isfunction(func) or inspect.iscoroutinefunction(func) or inspect.isgeneratorfunction(func) \
                    or inspect.isasyncgenfunction(func):
                raise ConfigurationError(f"schedule_send guards plain synchronous functions, not {label!r} "
                                         f"({type(func).__name__}): a fire runs it later, in a worker")
            signature = inspect.signature(func)
            params = list(signature.parameters.values())
            if params and params[0].name in ("self", "cls"):
                raise ConfigurationError(f"{label}{signature} is a method: a scheduled send stores its arguments "
                                         f"as JSON, and {params[0].name!r} is not one; guard a module-level function")
            param = signature.parameters.get(POLICY_VERSION_PARAMETER)
            if param is None or param.default is not inspect.Parameter.empty:
                raise ConfigurationError(f"{label}{signature} must take a required {POLICY_VERSION_PARAMETER!r} "
                                         f"parameter (no default): the fire checks it against the current policy")
            spec = ScheduleSpec(f"{func.__module__}:{func.__qualname__}", policy_task_id, window, agent_parameter)

            @functools.wraps(func)
            def guarded(*args: Any, **kwargs: Any) -> Any:
                firing = fire.firing.get()
                if firing is not None and firing.row["scope"] == spec.scope:
                    return self._fire_body(func, spec, firing, args, kwargs)
                return self._schedule(spec, signature, args, kwargs)

            setattr(guarded, SCHEDULE_ATTRIBUTE, spec)
            return guarded  # type: ignore[return-value]

        return decorate

    def _schedule(self, spec: ScheduleSpec, signature: inspect.Signature, args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> dict[str, Any]:
        bound = signature.bind(*args, **kwargs)  # a call that does not bind raises as the plain tool would
        bound.apply_defaults()
        call = current_call()
        agent_id = bound.arguments.get(spec.agent_parameter)
        ctx = current_agent()
        try:
            version = validation.text(POLICY_VERSION_PARAMETER, bound.arguments[POLICY_VERSION_PARAMETER])
            if agent_id is None:
                agent_id = ctx.agent_id if ctx is not None and ctx.agent_id else None
            else:
                agent_id = validation.text(spec.agent_parameter, agent_id)
            arguments = validation.canonical_payload("arguments", dict(bound.arguments))
        except BadInput as bad:
            return bad.envelope
        now = self._now()
        fires_at = now + spec.review_seconds
        scheduled_id = "sch_" + secrets.token_hex(10)
        tool = call.tool_name if call.is_recording() else spec.scope.rsplit(".", 1)[-1].rsplit(":", 1)[-1]
        call.set_attributes({
            c.SCHEDULE_ID: scheduled_id, c.SCHEDULE_EVENT: c.SCHEDULE_SCHEDULED, c.SCHEDULE_TOOL: tool,
            c.SCHEDULE_WINDOW_SECONDS: spec.review_seconds, c.SCHEDULE_FIRES_AT: rows.iso(fires_at),
            c.OBJECTIVE_TASK_ID: spec.policy_task_id, c.POLICY_VERSION: version, c.GEN_AI_AGENT_ID: agent_id,
        })
        try:
            with self.store.transaction() as conn:
                stale = rows.policy_refusal(conn, spec.policy_task_id, version, call)
                if stale is not None:
                    return stale
                rows.insert(conn, scheduled_id=scheduled_id, scope=spec.scope, tool=tool, arguments=arguments,
                            policy_task_id=spec.policy_task_id, policy_version=version, agent_id=agent_id,
                            conversation_id=ctx.conversation_id if ctx is not None else None,
                            window=spec.review_seconds, scheduled_at=now, fires_at=fires_at)
        except StoreBusy as busy:
            return busy_refusal(busy)
        stored = self.store.query_one("SELECT arguments, status FROM guard_scheduled_sends WHERE scheduled_id = ?",
                                      (scheduled_id,))
        call.set_readback(stored is not None and stored["arguments"] == arguments)
        return success(
            scheduled_id=scheduled_id, status=rows.SCHEDULED, tool=tool, fires_at=rows.iso(fires_at),
            review_window_seconds=spec.review_seconds,
            message=f"Nothing was sent yet. It is scheduled as {scheduled_id} and fires at {rows.iso(fires_at)} unless "
            f"cancelled; a reviewer may cancel or approve it until then. Do not send it again: read its status "
            f"with get_scheduled_send({scheduled_id!r}).",
        )

    def _fire_body(self, func: Callable[..., Any], spec: ScheduleSpec, firing: fire.Firing, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Any:
        """Inside the tool's span at fire time: check the policy again, then run the body (or refuse)."""
        row = firing.row
        call = current_call()
        call.set_attributes({
            c.SCHEDULE_ID: row["scheduled_id"], c.SCHEDULE_TOOL: row["tool"],
            c.SCHEDULE_WINDOW_SECONDS: float(row["window_seconds"]), c.SCHEDULE_FIRES_AT: rows.iso(row["fires_at"]),
            c.GEN_AI_AGENT_ID: row["agent_id"],
        })
        try:
            verdict = self.objectives.admit_send(spec.policy_task_id, row["policy_version"], agent_id=row["agent_id"],
                                                 tool=row["tool"])
        except StoreBusy as busy:  # not admitted, not sent: the claim is released and a later pass retries
            firing.verdict = busy_refusal(busy)
            return firing.verdict
        if verdict is not None:
            call.set_attribute(c.SCHEDULE_EVENT, c.SCHEDULE_REFUSED_AT_FIRE)
            firing.verdict = verdict
            return verdict
        call.set_attribute(c.SCHEDULE_EVENT, c.SCHEDULE_FIRED)
        firing.admitted = True
        return func(*args, **kwargs)

    # --- firing ------------------------------------------------------------------------------

    def register(self, tool: F) -> F:
        """Let this process fire ``tool`` (a scheduled-send tool) when its name cannot be imported
        (a function defined inside another, a test's tool); returns it unchanged."""
        spec = getattr(tool, SCHEDULE_ATTRIBUTE, None)
        if not isinstance(spec, ScheduleSpec):
            raise ConfigurationError(f"{validation.show(tool)} is not guarded by schedule_send; register the "
                                     f"@instrument_tool wrapper of a tool decorated with it")
        self._tools[spec.scope] = tool
        return tool

    def _resolve(self, scope: str) -> Callable[..., Any] | None:
        if scope not in self._tools:
            found = fire.by_name(scope)
            if found is None:
                return None
            self._tools[scope] = found
        return self._tools[scope]

    def fire_due(self, *, limit: int = 100, worker: str | None = None) -> list[dict[str, Any]]:
        """Fire every send whose time has come (at most ``limit``), each exactly once across workers.

        Returns one record per send this call handled: ``scheduled_id``, ``tool``, ``status``
        (``fired``, ``refused``, ``failed``, or ``unresolved`` when this process cannot reach the
        tool: it stays scheduled for a worker that can) and ``outcome``. A send another worker
        claimed first is not in the list.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ConfigurationError(f"limit must be a whole number from 1 to 10000, got {validation.show(limit)}")
        now = self._now()
        handled: list[dict[str, Any]] = []
        for scheduled_id, scope in rows.due(self.store, now, limit):
            tool = self._resolve(scope)
            if tool is None:
                handled.append({"scheduled_id": scheduled_id, "tool": scope, "status": rows.UNRESOLVED, "outcome": None})
                continue
            row = rows.claim(self.store, scheduled_id, now, worker)
            if row is not None:
                handled.append(self._fire(row, tool))
        return handled

    def _fire(self, row: Mapping[str, Any], tool: Callable[..., Any]) -> dict[str, Any]:
        firing = fire.Firing(row)
        args, kwargs = fire.call_arguments(inspect.signature(tool), json.loads(row["arguments"]))
        token = fire.firing.set(firing)
        result: Any = None
        failure: BaseException | None = None
        try:
            if row["agent_id"]:
                with agent(row["agent_id"], conversation_id=row["conversation_id"]):
                    result = tool(*args, **kwargs)
            else:
                result = tool(*args, **kwargs)
        except Exception as exc:  # the body failed (or the store under the check): recorded, the loop goes on
            failure = exc
        finally:
            fire.firing.reset(token)
        status, outcome, stored = fire.verdict(firing, result, failure)
        try:
            rows.finish(self.store, row["scheduled_id"], status, outcome, stored, self._now())
        except Exception as exc:
            _safe.report(c.STAGE_GUARD, f"recording the fire of scheduled send {row['scheduled_id']}", exc)
        return {"scheduled_id": row["scheduled_id"], "tool": row["tool"], "status": status, "outcome": outcome}

    # --- the review tools --------------------------------------------------------------------

    @instrument_tool(name=c.TOOL_GET_SCHEDULED_SEND, kind=c.KIND_READ)
    @refuse_when_busy
    def get_scheduled_send(self, scheduled_id: str) -> dict[str, Any]:
        """A scheduled send: ``status`` (``scheduled``, ``approved``, ``firing``, ``fired``,
        ``refused``, ``cancelled``, ``failed``), ``fires_at``, the ``arguments`` it will be sent
        with, who reviewed it and why, and, once fired or refused, ``outcome`` and ``result``
        (a refusal's envelope: re-read the policy, redraft, and call the send tool again)."""
        try:
            scheduled_id = validation.text("scheduled_id", scheduled_id)
        except BadInput as bad:
            return bad.envelope
        row = self.store.query_one("SELECT * FROM guard_scheduled_sends WHERE scheduled_id = ?", (scheduled_id,))
        if row is None:
            return _not_found(scheduled_id)
        current_call().set_attributes({c.SCHEDULE_ID: scheduled_id, c.SCHEDULE_TOOL: row["tool"]})
        return success(**rows.public(row))

    @instrument_tool(name=c.TOOL_CANCEL_SCHEDULED_SEND, kind=c.KIND_WRITE, idempotent=True)
    @refuse_when_busy
    def cancel_scheduled_send(self, scheduled_id: str, reason: str, agent_id: str) -> dict[str, Any]:
        """Cancel a scheduled send before it fires; ``reason`` says why (required). Refused once
        it fired, was refused or is firing (``status`` says which); cancelling twice is a no-op."""
        return self._review(scheduled_id, agent_id, reason, cancel=True)

    @instrument_tool(name=c.TOOL_APPROVE_SCHEDULED_SEND, kind=c.KIND_WRITE, idempotent=True)
    @refuse_when_busy
    def approve_scheduled_send(self, scheduled_id: str, agent_id: str) -> dict[str, Any]:
        """Approve a scheduled send: it fires at the next firing pass instead of at the end of its
        window. The agent that scheduled it cannot approve it (review needs a second pair of eyes)."""
        return self._review(scheduled_id, agent_id, None, cancel=False)

    def _review(self, scheduled_id: Any, agent_id: Any, reason: Any, *, cancel: bool) -> dict[str, Any]:
        problems = validation.Problems(c.TOOL_CANCEL_SCHEDULED_SEND if cancel else c.TOOL_APPROVE_SCHEDULED_SEND)
        scheduled_id = problems.text("scheduled_id", scheduled_id)
        agent_id = problems.text("agent_id", agent_id)
        if cancel:
            reason = problems.text("reason", reason, limit=validation.MAX_TEXT_LENGTH)
        if problems:
            return problems.refusal()
        call = current_call()
        call.set_attributes({c.SCHEDULE_ID: scheduled_id, c.GEN_AI_AGENT_ID: agent_id})
        event = c.SCHEDULE_CANCELLED if cancel else c.SCHEDULE_APPROVED
        with self.store.transaction() as conn:
            row = conn.execute("SELECT * FROM guard_scheduled_sends WHERE scheduled_id = ?", (scheduled_id,)).fetchone()
            if row is None:
                return _not_found(scheduled_id)
            call.set_attributes({c.SCHEDULE_TOOL: row["tool"], c.SCHEDULE_WINDOW_SECONDS: float(row["window_seconds"]),
                                 c.SCHEDULE_FIRES_AT: rows.iso(float(row["fires_at"]))})
            now = self._now()
            answer = rows.review(conn, row, agent_id, reason, cancel=cancel, now=now)
        if answer.get(c.ENVELOPE_OK) and not answer.get("already"):
            call.set_attribute(c.SCHEDULE_EVENT, event)
            if cancel:
                call.set_attribute(c.SCHEDULE_IN_WINDOW, now <= float(row["fires_at"]))
            else:
                call.set_attribute(c.SCHEDULE_FIRES_AT, answer["fires_at"])
            call.set_readback(rows.status_of(self.store, scheduled_id) == answer["status"])
        return answer

    # --- operator reads ----------------------------------------------------------------------

    def pending(self) -> list[dict[str, Any]]:
        """Every send not fired or cancelled yet (``scheduled``, ``approved``, ``firing``), by fire
        time: what a reviewer looks at. A ``firing`` row whose worker died stays so (the send may or
        may not have gone out): an operator checks the channel and closes it by hand."""
        with self.store.read() as conn:
            found = conn.execute(
                "SELECT * FROM guard_scheduled_sends WHERE status IN (?, ?, ?) ORDER BY fires_at, scheduled_id",
                (rows.SCHEDULED, rows.APPROVED, rows.FIRING),
            ).fetchall()
        return [rows.public(r) for r in found]


def _not_found(scheduled_id: str) -> dict[str, Any]:
    return refusal(c.OUTCOME_NOT_FOUND, f"there is no scheduled send {scheduled_id!r}; pass the scheduled_id the send "
                   f"tool returned", retry=False, scheduled_id=scheduled_id)
