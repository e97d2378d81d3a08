"""The failure stories, each a deterministic script, each runnable guarded or legacy.

A scenario takes the world, the mode, a seeded random generator and the run id, drives scripted
agents through real tool calls, and returns the :class:`Incident`: what happened, what each agent
was told, and the forensics rows the run must produce. Guarded, the failure is refused at call
time and the agent recovers (re-read, redo, retry); legacy, it goes through "green".
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from .. import conventions as c
from ..guards import ABSENT_VERSION, AcceptanceCriterion, Constraint, Waiver
from ..instrument import agent
from ._manifest import Incident
from ._world import CATALOG, PROMO_POLICY, REFUND_POLICY, REVIEW_SECONDS, World

GUARDED, LEGACY = "guarded", "legacy"
HAPPENED, PREVENTED = c.VERDICT_HAPPENED, c.VERDICT_PREVENTED
"""The verdicts a story's rows carry: a legacy story's harm happened, a guarded one's was prevented."""
MODES = (GUARDED, LEGACY)

Scenario = Callable[[World, str, random.Random, str], Incident]


def _told(incident: Incident, who: str, result: Any) -> None:
    """Record what a tool told an agent (the refusal message, or the success message)."""
    if not isinstance(result, dict):
        return
    if result.get("message"):
        incident.told.append(f"{who}: {result['message']}")
    if result.get("ok") is False:
        incident.refusals.append(str(result.get("error")))


# --- 1. split-brain ------------------------------------------------------------------------------


def split_brain(w: World, mode: str, rng: random.Random, run: str) -> Incident:
    key = f"plan/{rng.choice(['launch', 'migration', 'pricing'])}-{rng.randrange(100, 999)}"
    a, b = "builder-a", "builder-b"
    inc = Incident("split_brain", mode, run, "two builders read-modify-write one plan from different baselines")
    if mode == LEGACY:
        with agent("planner", run):
            w.kv.set(key, ["draft"])
        with agent(b, run):
            b_view = w.kv.get(key)
        with agent(a, run):
            w.kv.set(key, w.kv.get(key) + ["a: add rollback step"])
            w.kv.get(key)
        with agent(b, run):
            w.kv.set(key, b_view + ["b: add load test"])
            final = w.kv.get(key)
        inc.steps += [f"{b} read {key} (baseline r0)", f"{a} read, appended a step and wrote r1",
                      f"{b} wrote from r0: ok, and {a}'s step is gone"]
        inc.facts["a_step_survived"] = "a: add rollback step" in final
        inc.expect("divergent_reads", HAPPENED, run_id=run, state_key=key, writer_agent=b, lost_update=True)
        inc.expect("lost_updates", HAPPENED, run_id=run, state_key=key, kind="same_baseline", agent_id=b)
        inc.expect("lost_updates", HAPPENED, run_id=run, state_key=key, kind="stale_baseline", agent_id=b)
        return inc
    with agent("planner", run):
        w.state.write_state(key, ["draft"], ABSENT_VERSION, "planner")
    with agent(b, run):
        b_view = w.state.read_state(key, b)
    with agent(a, run):
        a_view = w.state.read_state(key, a)
        w.state.write_state(key, a_view["value"] + ["a: add rollback step"], a_view["version"], a)
        w.state.read_state(key, a)
    with agent(b, run):
        refused = w.state.write_state(key, b_view["value"] + ["b: add load test"], b_view["version"], b)
        _told(inc, b, refused)
        fresh = w.state.read_state(key, b)  # re-read, redo against the current value, retry
        retried = w.state.write_state(key, fresh["value"] + ["b: add load test"], fresh["version"], b)
        final = w.state.read_state(key, b)["value"]
    inc.steps += [f"{b} wrote from a stale version: {refused['error']}", f"{b} re-read, redid, retried: ok={retried['ok']}"]
    inc.facts["a_step_survived"] = "a: add rollback step" in final
    inc.facts["b_step_survived"] = "b: add load test" in final
    inc.expect("divergent_reads", PREVENTED, run_id=run, state_key=key, writer_agent=b,
               write_outcome=c.OUTCOME_REJECTED_STALE_VERSION)
    inc.expect("contention", PREVENTED, state_key=key)
    inc.expect("guard_refusals", PREVENTED, run_id=run, tool_name="write_state", reason=c.OUTCOME_REJECTED_STALE_VERSION,
               recovered=True)
    return inc


# --- 2. goal drift -------------------------------------------------------------------------------

_CONSTRAINTS = [
    ("C1", "Keep the public API backwards compatible."),
    ("C2", "No customer data leaves the EU region."),
    ("C3", "Budget is capped at 40 engineer-hours."),
    ("C4", "Ship behind a feature flag, off by default."),
]
_CHAIN = ["planner", "architect", "lead", "builder", "reviewer"]


def goal_drift(w: World, mode: str, rng: random.Random, run: str) -> Incident:
    root = f"task-{run.replace('/', '-')}"
    dropped, drop_hop = rng.choice(["C2", "C3"]), rng.choice([2, 3])
    waived = "C4"
    inc = Incident("goal_drift", mode, run, f"a 4-hop delegation where hop {drop_hop} drops constraint {dropped}")
    inc.facts.update(dropped=dropped, drop_hop=drop_hop)
    constraints = [Constraint(id=cid, text=text) for cid, text in _CONSTRAINTS]
    with agent(_CHAIN[0], run):
        w.delegations.register_task(root, "Add SSO to the admin console", constraints, _CHAIN[0])
    origin, carried = root, list(constraints)

    def criteria_for(send: list[Constraint]) -> list[AcceptanceCriterion]:
        return [AcceptanceCriterion(check=f"honours {k['id']}", constraint_id=k["id"]) for k in send]

    for hop in range(1, 5):
        who = _CHAIN[hop - 1]
        subtask = f"hop {hop}: {['design SSO', 'split the work', 'build the login flow', 'review the flow'][hop - 1]}"
        kept = [k for k in carried if not (hop == drop_hop and k["id"] == dropped)]
        with agent(who, run):
            if mode == LEGACY:
                context = subtask + ". " + " ".join(k["text"] for k in kept)
                result = w.legacy_delegation.delegate(subtask, context, origin, who)
                carried = kept
            else:
                waivers = [Waiver(id=waived, reason="review-only subtask: nothing ships from it")] if hop == 4 else []
                send = [k for k in kept if not any(k["id"] == x["id"] for x in waivers)]
                result = w.delegations.delegate(subtask, origin, send, criteria_for(send), waivers, who)
                if not result["ok"]:
                    _told(inc, who, result)
                    inc.steps.append(f"hop {hop}: {who} left out {dropped}: {result['error']}")
                    send = [k for k in carried if not any(k["id"] == x["id"] for x in waivers)]
                    result = w.delegations.delegate(subtask, origin, send, criteria_for(send), waivers, who)
                    inc.steps.append(f"hop {hop}: {who} re-delegated carrying {dropped}: ok={result['ok']}")
                carried = send
        origin = result["task_id"]
    inc.facts["final_ledger"] = [k["id"] for k in carried]
    if mode == LEGACY:
        inc.steps.append(f"hop {drop_hop}: the free-text context no longer mentions {dropped}; every hand-off said ok")
        inc.expect("constraint_loss_by_hop", HAPPENED, run_id=run, root_task_id=root, constraint_id=dropped,
                   dropped_at_hop=drop_hop)
    else:
        inc.steps.append(f"hop 4: {_CHAIN[3]} waived {waived} with a reason")
        inc.expect("guard_refusals", PREVENTED, run_id=run, tool_name=c.TOOL_DELEGATE,
                   reason=c.OUTCOME_CONSTRAINT_MISSING, recovered=True)
        # a record: the waiver took effect, by a reasoned decision (not an incident)
        inc.expect("waivers_by_hop", HAPPENED, run_id=run, root_task_id=root, constraint_id=waived, hop=4)
    return inc


# --- 3. context drift: the $32 credit ------------------------------------------------------------


def context_drift(w: World, mode: str, rng: random.Random, run: str) -> Incident:
    ticket = f"T-{rng.randrange(10000, 99999)}"
    responder = "responder"
    inc = Incident("context_drift", mode, run, "the refund policy is superseded while the responder holds the old one")
    with agent("operator", run):
        published = w.objectives.publish_objective(REFUND_POLICY, "Refund up to $40 as account credit without approval.")
    with agent(responder, run):
        held = w.objectives.get_objective(REFUND_POLICY, responder)
    with agent("operator", run):
        sup = w.objectives.supersede_objective(
            REFUND_POLICY, "Credits over $10 need a supervisor's approval.", "chargeback spike on credits",
            published["version"],
        )
    inc.facts["fan_out"] = [h.get("agent_id") for h in sup.get("holders", [])]
    body = f"We have issued a $32 credit for ticket {ticket}."
    with agent(responder, run):
        if mode == LEGACY:
            w.legacy_messaging.send_customer_message(ticket, body, responder)
            inc.steps.append("the responder sent a $32 credit under the superseded policy: ok")
            inc.facts["sent_under"] = held["version"]
            inc.expect("stale_holders", HAPPENED, run_id=run, agent_id=responder, objective_task_id=REFUND_POLICY,
                       held_version=held["version"])
            return inc
        refused = w.send_customer_message(ticket, body, held["version"], responder)
        _told(inc, responder, refused)
        current = w.objectives.get_objective(REFUND_POLICY, responder)
        sent = w.send_customer_message(
            ticket, f"A $10 credit is on its way for {ticket}; a supervisor will review the rest.", current["version"], responder
        )
    inc.steps += [f"the send under the old policy was refused: {refused['error']}",
                  f"the responder re-read the policy and sent under it: ok={sent['ok']}"]
    inc.facts["sent_under"] = current["version"]
    inc.expect("stale_sends", PREVENTED, kind="refused", run_id=run, agent_id=responder, used_version=held["version"])
    inc.expect("stale_holders", PREVENTED, run_id=run, agent_id=responder, objective_task_id=REFUND_POLICY,
               held_version=held["version"])
    inc.expect("guard_refusals", PREVENTED, run_id=run, tool_name="send_customer_message",
               reason=c.OUTCOME_STALE_POLICY, recovered=True)
    return inc


# --- 4. the wrong-collection repricing ------------------------------------------------------------


def wrong_collection(w: World, mode: str, rng: random.Random, run: str) -> Incident:
    cat, pct = w.catalog, rng.choice([15, 20, 25])
    n = len(cat.target_keys)
    inc = Incident("wrong_collection", mode, run, f"put the {cat.target} collection on sale: {n} writes, all 200")
    before_target, before_other = w.prices(cat.target_keys), w.prices(cat.other_keys)
    with agent("merchandiser", run):
        if mode == LEGACY:
            result = w.reprice_collection(cat.target, pct)
            _told(inc, "merchandiser", result)
            inc.steps.append(f"{len(result['updated'])} price writes, each 200 with a matching read-back")
            inc.expect("silent_failures", HAPPENED, tool_name="legacy_reprice_collection",
                       outcome=c.OUTCOME_POSTCONDITION_FAILED)
        else:
            plan = w.planner.plan_change("apply_discount_stale_index", CATALOG, {"collection": cat.target},
                                         {"discount_pct": pct}, agent_id="merchandiser")
            inc.steps.append(f"planned: {plan['objects_matched']} objects match {cat.target}")
            committed = w.planner.commit_plan(plan["plan_id"], agent_id="merchandiser")
            _told(inc, "merchandiser", committed)
            inc.steps.append(f"commit: {committed.get('error', 'ok')} (changed {committed.get('changed_count')}, "
                             f"outside the target {committed.get('outside_target_changed_count')})")
            with agent("operator", run):
                fixed = w.planner.plan_change("apply_discount", CATALOG, {"collection": cat.target},
                                              {"discount_pct": pct}, agent_id="operator")
                redo = w.planner.commit_plan(fixed["plan_id"], agent_id="operator")
            inc.steps.append(f"the operator fixed the action, re-planned and committed: ok={redo['ok']}")
            inc.expect("plan_violations", PREVENTED, violation=c.OUTCOME_POSTCONDITION_FAILED, run_id=run,
                       plan_id=plan["plan_id"])
    inc.facts["target_changed"] = sum(now != p for now, p in zip(w.prices(cat.target_keys), before_target))
    inc.facts["other_changed"] = sum(now != p for now, p in zip(w.prices(cat.other_keys), before_other))
    return inc


# --- 5. retries after a timeout ---------------------------------------------------------------------


def retry_after_timeout(w: World, mode: str, rng: random.Random, run: str) -> Incident:
    order, amount = f"order-{rng.randrange(1000, 9999)}", rng.choice([3200, 4999, 12000])
    request = f"req-{run}-{order}"
    inc = Incident("retry_after_timeout", mode, run, "a charge times out after it landed, and the agent retries it")
    with agent("billing", run):
        charge = w.legacy_payments.charge_card if mode == LEGACY else w.charge_card
        charge(order, amount, request)  # landed, but the response was lost: the agent saw a timeout
        inc.steps.append("the first charge landed; its response was lost (the agent saw a timeout)")
        again = charge(order, amount, request)
        inc.steps.append(f"the agent retried with the same request id: deduplicated={again.get('deduplicated', False)}")
    charged = w.legacy_payments.charges(order) if mode == LEGACY else w.charges.get(order, 0)
    inc.facts["times_charged"] = charged
    if mode == LEGACY:
        inc.expect("idempotency_conflicts", HAPPENED, kind="repeated_execution", run_id=run,
                   tool_name="legacy_charge_card")
    else:
        inc.expect("idempotency_conflicts", PREVENTED, kind="replay", run_id=run, tool_name="charge_card")
    return inc


# --- 6. a read-back through a stale cache -------------------------------------------------------------


def stale_cache_readback(w: World, mode: str, rng: random.Random, run: str) -> Incident:
    user = f"user-{rng.randrange(100, 999)}"
    key = f"profile/{user}"
    inc = Incident("stale_cache_readback", mode, run, "a write is lost in a fail-over, and the read-back asks the cache")
    update = w.profiles.legacy_update_email if mode == LEGACY else w.profiles.update_email
    with agent("support", run):
        update(user, f"{user}@old.example")
        w.profiles.lose_next_write = True
        first = update(user, f"{user}@new.example")
        if mode == GUARDED:
            _told(inc, "support", first)
            update(user, f"{user}@new.example")
            inc.steps.append("the database read-back showed the write was lost; the agent sent it again: ok")
    with agent("auditor", run):
        seen = w.profiles.get_profile(user)["email"]
    inc.facts["database_email"] = seen
    if mode == LEGACY:
        inc.steps.append(f"the cache read-back matched; the database still says {seen}")
        inc.expect("unpersisted_writes", HAPPENED, run_id=run, state_key=key, agent_id="support")
    else:
        inc.expect("readback_mismatches", PREVENTED, run_id=run, tool_name="update_email", state_key=key)
    return inc


# --- 7. a rate-limit retry storm ----------------------------------------------------------------------


def retry_storm(w: World, mode: str, rng: random.Random, run: str) -> Incident:
    sku = f"SKU-{rng.randrange(1000, 9999)}"
    inc = Incident("retry_storm", mode, run, "the carrier's rate limit trips, and the pricing agent asks again at once")
    w.rates.trip()  # set-up: another tenant used the quota up
    before = w.rates.upstream_calls
    with agent("pricer", run):
        if mode == LEGACY:
            result, calls = w.rates.legacy_fetch_rates(sku), 1
            while "rates_cents" not in result and calls < STORM_CALLS:  # no code, no wait: it asks again at once
                result, calls = w.rates.legacy_fetch_rates(sku), calls + 1
            inc.steps.append(f"a 429 with no wait and the client's exception text; the agent asked {calls} times "
                             f"at once, each call restarting the cool-down")
            inc.expect(c.QUESTION_RETRY_TAX, run_id=run, tool_name="legacy_fetch_rates", agent_id="pricer",
                       retries=calls - 1, verdict=c.VERDICT_HAPPENED)
        else:
            result = w.rates.fetch_rates(sku)
            _told(inc, "pricer", result)
            time.sleep(result[c.ENVELOPE_RETRY_AFTER_SECONDS])  # the refusal said how long to wait
            result = w.rates.fetch_rates(sku)
            inc.steps.append(f"rate_limited with retry_after_seconds; the agent waited and asked once more: "
                             f"ok={result.get('ok')}")
    inc.facts["upstream_calls"] = w.rates.upstream_calls - before
    inc.facts["served"] = "rates_cents" in result
    return inc


STORM_CALLS = 8
"""How often the legacy agent asks before it gives up."""


# --- 8. send at, never now: a broadcast scheduled under a policy that moves inside its window ------


def scheduled_broadcast(w: World, mode: str, rng: random.Random, run: str) -> Incident:
    pct = rng.choice([20, 25, 30])
    segment = f"segment-{rng.choice(['lapsed', 'vip', 'all'])}-{rng.randrange(100, 999)}"
    marketer, reviewer = "marketer", "reviewer"
    inc = Incident("scheduled_broadcast", mode, run, f"a {pct}% promotion is pushed while the promo policy is about to change")
    with agent("operator", run):
        published = w.objectives.publish_objective(PROMO_POLICY, f"Promotions up to {pct}% off.")
    with agent(marketer, run):
        held = w.objectives.get_objective(PROMO_POLICY, marketer)
    body = f"{pct}% off everything this weekend!"
    if mode == LEGACY:
        with agent(marketer, run):
            sent = w.broadcast_push_now(segment, body, held["version"], marketer)
            fired = w.scheduled.fire_due()
        with agent("operator", run):
            w.objectives.supersede_objective(PROMO_POLICY, "No promotion above 15% this month.", "margin review",
                                             published["version"])
        inc.steps += [f"the push had no review window: it went out at once ({fired[0]['status']})",
                      "the promo policy changed minutes later: the customers already have the push"]
        inc.expect("scheduled_sends", kind="fired_unreviewed", verdict=c.VERDICT_HAPPENED, run_id=run,
                   schedule_id=sent["scheduled_id"])
        return inc
    with agent(marketer, run):
        push = w.broadcast_push(segment, body, held["version"], marketer)
        email = w.broadcast_push(f"{segment}-email", body, held["version"], marketer)
        _told(inc, marketer, push)
    inc.steps.append(f"two pushes scheduled with a {REVIEW_SECONDS:g} s review window; nothing sent yet")
    w.now += 60
    with agent("operator", run):
        w.objectives.supersede_objective(PROMO_POLICY, "No promotion above 15% this month.", "margin review",
                                         published["version"])
    with agent(reviewer, run):
        cancelled = w.scheduled.cancel_scheduled_send(push["scheduled_id"], "the promo policy changed", reviewer)
    inc.steps.append(f"the policy moved inside the window; the reviewer cancelled one push: {cancelled['status']}")
    w.now += REVIEW_SECONDS
    fired = w.scheduled.fire_due(worker="push-worker")
    refused = w.scheduled.get_scheduled_send(email["scheduled_id"])
    _told(inc, marketer, refused["result"])
    inc.steps.append(f"at its time the other push was refused by the guard: {fired[0]['outcome']}")
    with agent(marketer, run):
        current = w.objectives.get_objective(PROMO_POLICY, marketer)
        redo = w.broadcast_push(segment, "15% off everything this weekend!", current["version"], marketer)
    with agent(reviewer, run):
        w.scheduled.approve_scheduled_send(redo["scheduled_id"], reviewer)
    again = w.scheduled.fire_due(worker="push-worker")
    inc.steps.append(f"the marketer redrafted under the new policy; a reviewer approved; it went out: {again[0]['status']}")
    inc.facts["pushes_sent"] = len([m for m in w.outbox if m.get("segment", "").startswith(segment)])
    inc.expect("scheduled_sends", kind="cancelled", verdict=c.VERDICT_PREVENTED, run_id=run,
               schedule_id=push["scheduled_id"])
    inc.expect("scheduled_sends", kind="refused_at_fire", verdict=c.VERDICT_PREVENTED, run_id=run,
               schedule_id=email["scheduled_id"])
    inc.expect("stale_sends", PREVENTED, kind="refused", run_id=run, agent_id=marketer, used_version=held["version"])
    inc.expect("stale_holders", PREVENTED, run_id=run, agent_id=marketer, objective_task_id=PROMO_POLICY,
               held_version=held["version"])
    inc.expect("guard_refusals", PREVENTED, run_id=run, tool_name="broadcast_push", reason=c.OUTCOME_STALE_POLICY,
               recovered=True)
    return inc


SCENARIOS: dict[str, Scenario] = {
    "split_brain": split_brain,
    "goal_drift": goal_drift,
    "context_drift": context_drift,
    "wrong_collection": wrong_collection,
    "retry_after_timeout": retry_after_timeout,
    "stale_cache_readback": stale_cache_readback,
    "retry_storm": retry_storm,
    "scheduled_broadcast": scheduled_broadcast,
}
"""Scenario name to script, in the order the demo runs them."""
