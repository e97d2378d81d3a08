"""The answers for one tool, from what it declares (or, failing that, its name and parameters).

A yes needs evidence: when nothing shows that a tool is ``scoped``, ``idempotent``,
``version_bound``, ``previewable``, ``readback_verified``, ``semantically_observable`` (instrumented)
or has ``actionable_errors`` (errors a model can act on), the answer is no, and its evidence says
what was missing. Each no comes with the finding that carries its code and severity, and a fix that
names the part of this toolkit that turns it into a yes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from .. import conventions as c
from . import _infer as infer
from . import _model as m
from ._infer import Param
from ._rules import no, not_applicable, yes

Check = Callable[[m.ToolModel, str, list[Param], Collection[str]], tuple[m.Answer, list[m.Finding]]]


def decide_kind(model: m.ToolModel) -> tuple[str, str, str]:
    """``(kind, basis text, basis)``: declared when a declaration says it, else inferred (and said so)."""
    if model.declared_kind is not None:
        return model.declared_kind, f"declared by {model.kind_source}", m.FROM_DECLARATION
    kind, why = infer.infer_kind(model.name, infer.parameters(model.input_schema))
    return kind, why, m.FROM_INFERENCE


def scoped(model: m.ToolModel, kind: str, params: list[Param], surface: Collection[str]) -> tuple[m.Answer, list[m.Finding]]:
    if model.scopes:
        return yes(m.SCOPED, f"served through a scoped inventory: only credentials holding {', '.join(model.scopes)} see it")
    if model.scopes is not None and kind == c.KIND_READ:
        return yes(m.SCOPED, "in a scoped inventory with no scope required: a read every credential may use")
    fix = ("register it in a telemetry.guards.ToolRegistry with scopes=[...] and give each agent "
           "registry.scoped(credential_scopes), so tools outside its scopes are absent, not denied")
    if model.scopes is not None:
        return no(m.SCOPED, "AUD101", model.name, "registered with no scopes: every credential sees this write", fix)
    return no(m.SCOPED, "AUD101", model.name, "nothing declares which credentials may see it (no scoped inventory, no "
              "_meta outcome-telemetry/scopes)", fix)


def _required_string(p: Param) -> bool:
    return p.required and p.is_string and not p.is_number


def idempotent(model: m.ToolModel, kind: str, params: list[Param], surface: Collection[str]) -> tuple[m.Answer, list[m.Finding]]:
    if kind == c.KIND_READ:
        return not_applicable(m.IDEMPOTENT, "a read changes nothing, so a retry is safe")
    by_name = {p.name: p for p in params}
    fix = ("take a required idempotency_key and guard the tool with telemetry.guards.IdempotencyKeys(store)."
           "idempotent() below @instrument_tool; or declare idempotent=True if a repeat has no further effect")
    if model.idempotency_key is not None:
        key = by_name.get(model.idempotency_key)
        if key is not None and not key.required:
            return no(m.IDEMPOTENT, "AUD102", model.name, f"the idempotency key {key.name!r} is optional: a retry without "
                      f"it writes again", f"make {key.name!r} required (no default)", parameter=key.name)
        return yes(m.IDEMPOTENT, f"IdempotencyKeys deduplicates on {model.idempotency_key!r}: a retry returns the first outcome")
    if model.idempotent is True:
        return yes(m.IDEMPOTENT, "declared idempotent (idempotent=True / idempotentHint): a repeat has no further effect")
    versions = [p for p in infer.version_params(params) if _required_string(p)]
    if versions and kind == c.KIND_WRITE:
        return yes(m.IDEMPOTENT, f"compare-and-set on {versions[0].name!r}: a retry with the same version is refused "
                   f"as stale, so it cannot apply twice")
    keys = infer.key_params(params)
    if keys:
        key = keys[0]
        if not key.required:
            return no(m.IDEMPOTENT, "AUD102", model.name, f"{key.name!r} is optional: a retry without it writes again",
                      f"make {key.name!r} required and deduplicate on it (IdempotencyKeys.idempotent)",
                      parameter=key.name, basis=m.FROM_INFERENCE)
        if model.source is not None:
            return no(m.IDEMPOTENT, "AUD102", model.name, f"takes {key.name!r}, but no idempotency guard deduplicates on it",
                      f"decorate it with IdempotencyKeys(store).idempotent(key_param={key.name!r}) below "
                      f"@instrument_tool", parameter=key.name)
        return yes(m.IDEMPOTENT, f"takes a required {key.name!r} (inferred from its name: a listing cannot show that the "
                   f"server deduplicates on it; --traces can)", m.FROM_INFERENCE)
    optional = [p.name for p in params if p.name in ("task_id", "id") and not p.required]
    why = "nothing makes a retry safe: no idempotency key, no version to compare, not declared idempotent"
    if optional:
        why = f"{optional[0]!r} is optional: a retry without it creates a second object"
    return no(m.IDEMPOTENT, "AUD102", model.name, why, fix, basis=m.FROM_DECLARATION if model.source else m.FROM_INFERENCE)


def version_bound(model: m.ToolModel, kind: str, params: list[Param], surface: Collection[str]) -> tuple[m.Answer, list[m.Finding]]:
    if kind == c.KIND_READ:
        return not_applicable(m.VERSION_BOUND, "a read writes nothing")
    if kind == c.KIND_DELEGATE:
        return not_applicable(m.VERSION_BOUND, "a hand-off creates a new task: what it must carry is the constraint list (see the lint)")
    bypass = [p.name for p in params if infer.is_bypass(p)]
    if bypass:
        return no(m.VERSION_BOUND, "AUD103", model.name, f"boolean {bypass[0]!r} switches the guard off: a model that was "
                  f"refused will find it", "remove it; make forcing a separate operator-only tool, like "
                  "StateStore.force_write_state", parameter=bypass[0])
    if kind == c.KIND_SEND:
        policy = next((p for p in params if p.name.lower() == infer.POLICY_VERSION), None)
        if policy is None:
            why = "no policy_version: a send drafted against a superseded policy cannot be refused"
            fix = ("take a required policy_version: str and stack telemetry.guards.guarded_send("
                   "objectives, policy_task_id=...) under @instrument_tool(kind=\"send\")")
            return no(m.VERSION_BOUND, "SCH207", model.name, why, fix)
        return _version_param(model, policy, "policy version")
    if "plan_id" in {p.name for p in params if p.required}:
        return yes(m.VERSION_BOUND, "commits a plan, and the plan is bound to the versions of what it matched "
                   "(a moved binding is refused)")
    versions = infer.version_params(params)
    if versions:
        return _version_param(model, versions[0], "version")
    if infer.is_create_only(model.name):
        return not_applicable(m.VERSION_BOUND, f"creates only (inferred from the name {model.name!r}): there is no earlier read to "
                              f"be stale against; if it can overwrite, it needs a required expected_version", m.FROM_INFERENCE)
    return no(m.VERSION_BOUND, "AUD103", model.name, "no version parameter: a write built on a stale read is applied",
              "take a required expected_version: str (the opaque token the read returned) and refuse a mismatch, "
              "as telemetry.guards.StateStore.write_state does")


def _version_param(model: m.ToolModel, p: Param, what: str) -> tuple[m.Answer, list[m.Finding]]:
    if not p.required:
        return no(m.VERSION_BOUND, "AUD103", model.name, f"{p.name!r} has a default, so a caller without a {what} gets through",
                  f"make {p.name!r} required (no default, no None, no 'latest')", parameter=p.name)
    if not p.is_string or p.is_number:
        return no(m.VERSION_BOUND, "AUD103", model.name, f"{p.name!r} is not a string: a number invites arithmetic on the "
                  f"{what}", f"make {p.name!r} an opaque string token", parameter=p.name)
    return yes(m.VERSION_BOUND, f"{p.name!r} is required and an opaque string: a stale {what} is refused")


def previewable(model: m.ToolModel, kind: str, params: list[Param], surface: Collection[str]) -> tuple[m.Answer, list[m.Finding]]:
    if kind == c.KIND_READ:
        return not_applicable(m.PREVIEWABLE, "a read has nothing to preview")
    names = {p.name for p in params}
    if model.review_seconds is not None:
        if model.review_seconds > 0:
            return yes(m.PREVIEWABLE, f"scheduled, never sent at once: each call waits a {model.review_seconds:g} s "
                       f"review window (ScheduledSends.schedule_send) in which it can be read, cancelled or approved")
        return no(m.PREVIEWABLE, "AUD104", model.name, "scheduled with a 0 s review window: it fires before anyone "
                  "can look", "give schedule_send a review_seconds long enough for a reviewer to read the send")
    if "plan_id" in names and infer.words(model.name)[:1] == ["commit"]:
        planners = sorted(s for s in surface if infer.words(s)[:1] in (["plan"], ["preview"]))
        pair = f" (paired with {', '.join(planners)})" if planners else ""
        return yes(m.PREVIEWABLE, f"the commit half of a plan/commit pair{pair}: it runs only what a plan showed")
    why = infer.is_bulk(model.name, params) or infer.is_delete(model.name)
    if why is None:
        return not_applicable(m.PREVIEWABLE, "one object per call (not bulk, not a delete), so no plan is needed", m.FROM_INFERENCE)
    fix = ("split it into a plan (a read that returns what would change: count, sample, bindings) and "
           "commit_plan(plan_id); telemetry.guards.Planner provides both")
    if names & {"dry_run", "preview", "plan_only"}:
        return no(m.PREVIEWABLE, "AUD104", model.name, f"{why}; a dry-run flag is optional and a model can skip it", fix,
                  basis=m.FROM_INFERENCE)
    return no(m.PREVIEWABLE, "AUD104", model.name, f"{why}, with no plan to approve before it writes", fix, basis=m.FROM_INFERENCE)


def readback_verified(model: m.ToolModel, kind: str, params: list[Param], surface: Collection[str]) -> tuple[m.Answer, list[m.Finding]]:
    if kind == c.KIND_READ:
        return not_applicable(m.READBACK_VERIFIED, "a read has no write to verify")
    if model.readback is True:
        return yes(m.READBACK_VERIFIED, model.readback_evidence)
    fix = ("pass readback=lambda call, result: <read the object from the source of truth and compare> to "
           "@instrument_tool, so every write's span says match or mismatch")
    if model.readback is False:
        return no(m.READBACK_VERIFIED, "AUD105", model.name, model.readback_evidence or "declares no read-back", fix)
    return no(m.READBACK_VERIFIED, "AUD105", model.name, "nothing declares a read-back (the listing shows no "
              "_meta outcome-telemetry/readback)", "verify each write server-side and declare it; --traces shows "
              "the read-backs its spans record")


def semantically_observable(model: m.ToolModel, kind: str, params: list[Param], surface: Collection[str]) -> tuple[m.Answer, list[m.Finding]]:
    if model.instrumented:
        return yes(m.SEMANTICALLY_OBSERVABLE, "instrumented: each call's span and counters carry the outcome and the "
                   "read-back, not only the transport")
    fix = ("decorate it with @telemetry.instrument_tool (telemetry.mcp.instrument_server(server) for an MCP "
           "server), then alert on transport ok with an outcome that is not ok")
    if model.instrumented is False:
        return no(m.SEMANTICALLY_OBSERVABLE, "AUD106", model.name, "not instrumented: a 200 that did the wrong thing looks "
                  "like any other 200", fix)
    return no(m.SEMANTICALLY_OBSERVABLE, "AUD106", model.name, "nothing shows it is instrumented (the listing cannot; "
              "--traces can)", fix)


ACTIONABLE_ERRORS_FIX = ("return failures as telemetry.guards.refusal(code, message, retry=..., retry_after_seconds=...) "
                        "envelopes (a code from your outcomes=, a retry-after on every rate limit, recovery_tool or "
                        "existing_id when there is a way out), never exception text")


def actionable_errors(model: m.ToolModel, kind: str, params: list[Param], surface: Collection[str]) -> tuple[m.Answer, list[m.Finding]]:
    if model.error_envelope is not None:
        return yes(m.ACTIONABLE_ERRORS, model.error_envelope)
    if model.source is not None or model.instrumented:
        why = "nothing declares its error results: no refusal envelope in its body, no outcome codes declared"
    else:
        why = "nothing shows what its errors say (the listing cannot; --traces can)"
    return no(m.ACTIONABLE_ERRORS, "AUD107", model.name, why, ACTIONABLE_ERRORS_FIX)


def verified_through_cache(model: m.ToolModel, kind: str, through: Collection[str],
                           cached: Collection[str]) -> tuple[m.Answer, list[m.Finding]] | None:
    """A write whose result (or tool plan) asks the caller to verify it through a read that answers
    from a cache: that verification repeats what the write just put there. None: nothing to report."""
    if kind == c.KIND_READ:
        return None
    caches = sorted(set(through) & set(cached))
    if not caches:
        return None
    return no(m.READBACK_VERIFIED, "AUD105", model.name,
              f"its result asks the caller to verify it through {', '.join(caches)}, which reads a cache: the "
              f"verification repeats what the write just put there",
              "name a read of the source of truth in verification_required (or read back server-side with readback=)",
              severity=m.CRITICAL)


CHECK_FUNCTIONS: tuple[tuple[str, Check], ...] = (
    (m.SCOPED, scoped),
    (m.IDEMPOTENT, idempotent),
    (m.VERSION_BOUND, version_bound),
    (m.PREVIEWABLE, previewable),
    (m.READBACK_VERIFIED, readback_verified),
    (m.SEMANTICALLY_OBSERVABLE, semantically_observable),
    (m.ACTIONABLE_ERRORS, actionable_errors),
)


def answer_all(model: m.ToolModel, kind: str, surface: Collection[str]) -> dict[str, tuple[m.Answer, list[m.Finding]]]:
    """The answers for ``model`` taken as ``kind``, each with the findings of its no."""
    params = infer.parameters(model.input_schema)
    return {name: check(model, kind, params, surface) for name, check in CHECK_FUNCTIONS}
