"""Every finding code, its rule name, default severity and the failure it prevents: one table.

The seven checks' noes (``AUD1xx``) and the schema lint (``SCH2xx``) share it, and so do the SARIF
rules and ``docs/audit.md``.
"""

from __future__ import annotations

from typing import Final

from . import _model as m
from ._model import CRITICAL, FROM_DECLARATION, INFO, NO, NOT_APPLICABLE, WARNING, YES, Answer, Finding

__all__ = ["RULES", "finding", "no", "not_applicable", "yes"]

def _no(check: str) -> str:
    """The rule name of a no to ``check``: the check's own name (conventions' ``AUDIT_*``), negated,
    in SARIF's kebab case (``readback_verified`` -> ``not-readback-verified``)."""
    return "not-" + check.replace("_", "-")


RULES: Final[dict[str, tuple[str, str, str]]] = {
    # code: (rule, default severity, what it prevents)
    "AUD101": (_no(m.SCOPED), WARNING, "an agent can reach tools it was never meant to have"),
    "AUD102": (_no(m.IDEMPOTENT), WARNING, "a retried write makes a second change"),
    "AUD103": (_no(m.VERSION_BOUND), CRITICAL, "a write built on a stale read is applied over a newer value"),
    "AUD104": (_no(m.PREVIEWABLE), WARNING, "a bulk or destructive write runs before anyone saw what it would touch"),
    "AUD105": (_no(m.READBACK_VERIFIED), WARNING, "a write that did not persist as sent still reports success"),
    "AUD106": (_no(m.SEMANTICALLY_OBSERVABLE), WARNING, "a 200 that did the wrong thing looks like every other 200"),
    "AUD107": (_no(m.ACTIONABLE_ERRORS), WARNING, "a model that cannot tell which failure it met retries blindly, "
               "storms a rate limit, or reads a stack trace"),
    "SCH207": ("send-without-policy-version", CRITICAL, "a message drafted against a superseded policy is sent"),
    "SCH200": ("guard-bypass", CRITICAL, "a refused model finds the switch that turns the guard off"),
    "SCH201": ("unbounded-number", WARNING, "a model sends limit=10000 or a negative amount"),
    "SCH202": ("enum-candidate", WARNING, "a model invents a value the tool does not know"),
    "SCH203": ("missing-description", WARNING, "a model guesses what a tool or parameter means"),
    "SCH204": ("one-word-description", WARNING, "a description that names a thing without its contract"),
    "SCH205": ("generic-name", WARNING, "among many tools a bare verb is picked for the wrong intent"),
    "SCH206": ("optional-changes-write", WARNING, "an optional knob changes what is written, one more axis to get wrong"),
    "SCH208": ("delegation-without-constraints", CRITICAL, "a hand-off paraphrases the constraints away"),
    "SCH209": ("id-without-format", INFO, "a model passes a name or a guess where an id is wanted"),
}


def finding(code: str, tool: str, message: str, fix: str, parameter: str | None = None,
            severity: str | None = None) -> Finding:
    """A :class:`Finding` of rule ``code`` (its default severity unless ``severity`` is given)."""
    rule, default, _prevents = RULES[code]
    return Finding(code, rule, severity or default, tool, message, fix, parameter)


def yes(check: str, why: str, basis: str = FROM_DECLARATION) -> tuple[Answer, list[Finding]]:
    """A yes to ``check``, resting on ``basis``: nothing to find."""
    return Answer(check, YES, why, None, (basis,)), []


def not_applicable(check: str, why: str, basis: str = FROM_DECLARATION) -> tuple[Answer, list[Finding]]:
    """``check`` does not apply to this tool (``why`` says so): nothing to find."""
    return Answer(check, NOT_APPLICABLE, why, None, (basis,)), []


def no(check: str, code: str, tool: str, why: str, fix: str, *, parameter: str | None = None,
       severity: str | None = None, basis: str = FROM_DECLARATION) -> tuple[Answer, list[Finding]]:
    """A no to ``check`` and the finding of rule ``code`` it raises, in the same words: the
    static checks and the trace evidence answer alike, so the table and SARIF agree."""
    return Answer(check, NO, why, fix, (basis,)), [finding(code, tool, why, fix, parameter, severity)]
