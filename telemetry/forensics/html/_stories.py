"""Each question's row told as on-call reads it: what happened, to what, by whom, when.

One function per question turns a row into :class:`Story` (a sentence and the few facts a card
leads with); a question without one (added later) still gets a card from the generic story. Values
are plain text here; the card escapes them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._layout import shown

__all__ = ["STORIES", "Story", "TITLES", "story"]

Row = Mapping[str, Any]

TITLES: dict[str, str] = {
    "silent_failures": "Silent failure",
    "lost_updates": "Lost update",
    "constraint_loss_by_hop": "Constraint lost in a delegation",
    "unpersisted_writes": "Write that did not persist",
    "stale_sends": "Send under a superseded policy",
    "idempotency_conflicts": "Idempotency key reused",
    "repeated_executions": "Repeated execution",
    "masked_failures": "Failure shown green",
    "divergent_reads": "Write on a divergent read",
    "readback_mismatches": "Read-back mismatch",
    "stale_holders": "Agent acting on a superseded objective",
    "plan_violations": "Plan violation",
    "contention": "Contention on a key",
    "waivers_by_hop": "Constraint waived",
    "guard_refusals": "Guard refusal",
}
"""A card's title per question, singular (the question's name is beside it)."""


@dataclass(frozen=True)
class Story:
    """What a card leads with; empty strings are left out."""

    what: str
    subject_kind: str = ""
    subject: str = ""
    who: str = ""
    when: str = ""


def _v(row: Row, *columns: str) -> str:
    """The first of ``columns`` with a value, as one line of text ("" when none has one)."""
    for column in columns:
        value = row.get(column)
        if value is not None and value != "" and value != []:
            return shown(value)
    return ""


def _q(row: Row, column: str) -> str:
    return _v(row, column) or "?"


def _silent(r: Row) -> Story:
    return Story(f"{_q(r, 'tool_name')} told its caller success {_q(r, 'spans')} time(s) while the outcome was "
                 f"{_q(r, 'outcome')} ({_q(r, 'runs')} run(s), {_q(r, 'agents')} agent(s)).",
                 "tool", _v(r, "tool_name"), f"{_q(r, 'agents')} agent(s)", _v(r, "first_seen"))


def _lost(r: Row) -> Story:
    if r.get("kind") == "same_baseline":
        what = (f"{_q(r, 'agent_id')} wrote {_q(r, 'state_key')} on version {_q(r, 'baseline_version')}, which "
                f"{_v(r, 'earlier_agent_id') or 'another writer'} had already replaced with "
                f"{_q(r, 'newer_version')}: that change was overwritten.")
    else:
        what = (f"{_q(r, 'agent_id')} wrote {_q(r, 'state_key')} on version {_q(r, 'baseline_version')} after it "
                f"had become {_q(r, 'newer_version')}: the newer version was overwritten.")
    return Story(what, "key", _v(r, "state_key"), _v(r, "agent_id"), _v(r, "write_time"))


def _constraint(r: Row) -> Story:
    if r.get("constraint_id") is None:
        what = (f"Task {_q(r, 'dropped_task_id')} at hop {_q(r, 'dropped_at_hop')} names parent "
                f"{_q(r, 'parent_task_id')}, which is not in the evidence: what that hop carried cannot be told.")
    else:
        what = (f"{_q(r, 'dropped_by_agent')} delegated task {_q(r, 'dropped_task_id')} at hop "
                f"{_q(r, 'dropped_at_hop')} without constraint {_q(r, 'constraint_id')}, which hop "
                f"{_q(r, 'last_hop_carried')} carried (chain {_q(r, 'root_task_id')}).")
    return Story(what, "task", _v(r, "dropped_task_id"), _v(r, "dropped_by_agent"), _v(r, "delegation_time"))


def _unpersisted(r: Row) -> Story:
    return Story(f"{_q(r, 'agent_id')} wrote {_q(r, 'state_key')} as {_q(r, 'written_version')} with "
                 f"{_q(r, 'tool_name')} (read-back: {_q(r, 'readback')}), but {_q(r, 'reader_agent')} next read "
                 f"{_q(r, 'read_version')}: the write did not persist.",
                 "key", _v(r, "state_key"), _v(r, "agent_id"), _v(r, "write_time"))


def _stale_send(r: Row) -> Story:
    return Story(f"{_q(r, 'agent_id')} sent with {_q(r, 'tool_name')} under {_q(r, 'policy_task_id')} version "
                 f"{_q(r, 'used_version')} while {_q(r, 'current_version')} was current (outcome {_q(r, 'outcome')}).",
                 "policy", _v(r, "policy_task_id"), _v(r, "agent_id"), _v(r, "start_time"))


_IDEMPOTENCY = {
    "conflict_refused": "the guard refused the key reused with another payload",
    "conflict_accepted": "the key was reused with another payload and went through",
    "repeated_execution": "the same call ran again without being deduplicated",
    "replay": "the guard returned the original result instead of running it again",
}


def _idempotency(r: Row) -> Story:
    kind = _IDEMPOTENCY.get(str(r.get("kind")), _q(r, "kind"))
    return Story(f"{_q(r, 'agent_id')} called {_q(r, 'tool_name')} with idempotency key "
                 f"{_q(r, 'idempotency_key_hash')} again: {kind} (outcome {_q(r, 'outcome')}).",
                 "idempotency key", _v(r, "idempotency_key_hash"), _v(r, "agent_id"), _v(r, "start_time"))


def _repeated(r: Row) -> Story:
    return Story(f"{_q(r, 'tool_name')} ran {_q(r, 'calls')} times with the same arguments in run {_q(r, 'run_id')} "
                 f"(outcomes {_v(r, 'outcomes') or 'none recorded'}).",
                 "tool", _v(r, "tool_name"), _v(r, "agents"), _v(r, "first_at"))


def _masked(r: Row) -> Story:
    return Story(f"{_q(r, 'calls')} call(s) of {_q(r, 'tool_name')} ended {_q(r, 'outcome')} while the span status "
                 f"was {_q(r, 'status_codes')} ({_q(r, 'span_format')} spans, {_q(r, 'runs')} run(s)).",
                 "tool", _v(r, "tool_name"), "", _v(r, "first_seen"))


def _divergent(r: Row) -> Story:
    lost = ", a lost update" if r.get("lost_update") else ""
    return Story(f"{_q(r, 'writer_agent')} wrote {_q(r, 'state_key')} expecting {_q(r, 'writer_version')} while "
                 f"{_q(r, 'other_agent')} had read {_q(r, 'other_version')}; the key was "
                 f"{_q(r, 'version_at_write')} at the write (outcome {_q(r, 'write_outcome')}{lost}).",
                 "key", _v(r, "state_key"), _v(r, "writer_agent"), _v(r, "write_time"))


def _readback(r: Row) -> Story:
    return Story(f"{_q(r, 'agent_id')}'s {_q(r, 'tool_name')} on {_q(r, 'state_key')}: the read-back did not find "
                 f"what was written (outcome {_q(r, 'outcome')}).",
                 "key", _v(r, "state_key"), _v(r, "agent_id"), _v(r, "start_time"))


def _stale_holder(r: Row) -> Story:
    return Story(f"{_q(r, 'agent_id')} held {_q(r, 'objective_task_id')} version {_q(r, 'held_version')} after "
                 f"{_q(r, 'current_version')} superseded it and acted on it {_q(r, 'stale_actions')} time(s) "
                 f"({_q(r, 'accepted_stale_actions')} accepted), first with {_q(r, 'first_stale_tool')}.",
                 "objective", _v(r, "objective_task_id"), _v(r, "agent_id"), _v(r, "first_stale_action_at"))


def _plan(r: Row) -> Story:
    return Story(f"Plan {_q(r, 'plan_id')} committed by {_q(r, 'agent_id')} with {_q(r, 'tool_name')}: "
                 f"{_q(r, 'violation')} ({_q(r, 'changed_count')} changed, {_q(r, 'outside_target_changed_count')} "
                 f"outside its target, of {_q(r, 'objects_matched')} matched).",
                 "plan", _v(r, "plan_id"), _v(r, "agent_id"), _v(r, "start_time"))


def _contention(r: Row) -> Story:
    return Story(f"{_q(r, 'writes')} writes to {_q(r, 'state_key')} by {_q(r, 'agents')} agent(s) in the minute "
                 f"from {_q(r, 'bucket_start')}; {_q(r, 'rejected')} refused as stale "
                 f"(ratio {_q(r, 'rejected_ratio')}).",
                 "key", _v(r, "state_key"), f"{_q(r, 'agents')} agent(s)", _v(r, "bucket_start"))


def _waiver(r: Row) -> Story:
    return Story(f"{_q(r, 'agent_id')} waived {_q(r, 'constraint_id')} at hop {_q(r, 'hop')} (task "
                 f"{_q(r, 'task_id')}): \u201c{_q(r, 'reason')}\u201d.",
                 "task", _v(r, "task_id"), _v(r, "agent_id"), _v(r, "delegation_time"))


def _refusal(r: Row) -> Story:
    then = (f"the agent recovered with {_q(r, 'recovered_by_tool')}" if r.get("recovered")
            else "the agent did not recover")
    return Story(f"A guard refused {_q(r, 'agent_id')}'s {_q(r, 'tool_name')} ({_q(r, 'reason')}) on "
                 f"{_q(r, 'subject_kind')} {_q(r, 'subject')}; {then}.",
                 _v(r, "subject_kind").replace("_", " "), _v(r, "subject"), _v(r, "agent_id"), _v(r, "refused_at"))


STORIES: dict[str, Callable[[Row], Story]] = {
    "silent_failures": _silent, "lost_updates": _lost, "constraint_loss_by_hop": _constraint,
    "unpersisted_writes": _unpersisted, "stale_sends": _stale_send, "idempotency_conflicts": _idempotency,
    "repeated_executions": _repeated, "masked_failures": _masked, "divergent_reads": _divergent,
    "readback_mismatches": _readback, "stale_holders": _stale_holder, "plan_violations": _plan,
    "contention": _contention, "waivers_by_hop": _waiver, "guard_refusals": _refusal,
}


def story(question: str, row: Row) -> Story:
    """The row's story; a question without its own gets the generic one (its first values)."""
    tell = STORIES.get(question)
    if tell is not None:
        return tell(row)
    subject = _v(row, "state_key", "root_task_id", "task_id", "tool_name")
    return Story(f"{TITLES.get(question, question)}: " + ", ".join(
        f"{k} {shown(v)}" for k, v in list(row.items())[:4] if v is not None),
        "", subject, _v(row, "agent_id"), _v(row, "start_time", "write_time", "first_seen"))
