"""Schema lint: what a model cannot tell from a tool's name, schema and descriptions.

The schema is the whole contract the model reads. Each rule finds one way it leaks: a number with
no bounds, a free string that is really a small set, a parameter nobody described, a name that
competes with its neighbours, an optional knob that changes what is written, a guard switch, a
hand-off with no constraint list, an id with no hint of its shape. Every finding names the
parameter and says what to write instead.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

from .. import conventions as c
from . import _infer as infer
from ._infer import Param
from ._model import Finding, ToolModel
from ._rules import finding

MANY_TOOLS: Final = 5
"""A surface with at least this many tools makes a generic name ambiguous."""


def _bounded(p: Param) -> bool:
    s = p.schema
    has_low = "minimum" in s or "exclusiveMinimum" in s
    has_high = "maximum" in s or "exclusiveMaximum" in s
    return has_low and has_high


def _has_set(p: Param) -> bool:
    return "enum" in p.schema or "const" in p.schema or "enum" in p.types


def _is_id(name: str) -> bool:
    lowered = name.lower()
    return lowered == "id" or lowered.endswith("_id")


def lint(model: ToolModel, kind: str, surface: Collection[str]) -> list[Finding]:
    """Every schema finding for ``model`` taken as ``kind``, among ``surface`` (every audited tool name)."""
    name, description = model.name, model.description.strip()
    params = infer.parameters(model.input_schema)
    out: list[Finding] = []
    if not description:
        out.append(finding("SCH203", name, "the tool has no description: the model sees only its name",
                            "describe what it does, what it returns, and what to do with each error"))
    elif len(description.split()) < 2:
        out.append(finding("SCH204", name, f"the tool's description is one word ({description[:40]!r})",
                            "say what it does, what it returns, and what it does not do"))
    if name.lower() in infer.GENERIC_NAMES and len(surface) >= MANY_TOOLS:
        out.append(finding("SCH205", name, f"{name!r} is a bare verb among {len(surface)} tools",
                            f"name the noun: e.g. {name.lower()}_support_tickets, not {name!r}"))
    if kind == c.KIND_DELEGATE and not any(p.is_array and p.name.lower() in infer.CONSTRAINT_NAMES for p in params):
        out.append(finding("SCH208", name, "a hand-off with no constraint list: the constraints travel as free text "
                            "and get paraphrased away", "take constraints: list of {id, text} carried verbatim and "
                            "waived_constraints with reasons, as telemetry.guards.Delegations.delegate does"))
    for p in params:
        out.extend(_param_findings(model, kind, p, description))
    return out


def _param_findings(model: ToolModel, kind: str, p: Param, tool_description: str) -> list[Finding]:
    name = model.name
    out: list[Finding] = []
    if infer.is_bypass(p):
        out.append(finding("SCH200", name, f"boolean {p.name!r} lets a caller switch the guard off",
                            "remove it; make forcing a separate operator-only tool with the operator's identity", p.name))
    if p.is_number and not _bounded(p):
        out.append(finding("SCH201", name, f"{p.name!r} is a number with no minimum and maximum",
                            "bound it: Annotated[int, Field(ge=..., le=...)] (minimum/maximum in the schema)", p.name))
    if p.is_string and not _has_set(p) and (
        p.name.lower() in infer.ENUM_NAMES or (p.description and infer.ENUM_TEXT.search(p.description))
    ):
        out.append(finding("SCH202", name, f"{p.name!r} is a free string, but its name or description implies a "
                            f"small set", "make it an enum: Literal['a', 'b', ...] lists the values in the schema", p.name))
    if not p.description and not infer.mentioned(p.name, tool_description):
        out.append(finding("SCH203", name, f"{p.name!r} has no description and the tool's description does not "
                            f"mention it", "describe it: Annotated[..., Field(description='...')] or a sentence "
                            "in the docstring naming it", p.name))
    elif p.description and len(p.description.split()) < 2:
        out.append(finding("SCH204", name, f"{p.name!r} is described in one word ({p.description[:40]!r})",
                            "say what the value is, where it comes from, and its format", p.name))
    if (kind != c.KIND_READ and not p.required and p.name.lower() not in infer.METADATA_NAMES
            and not infer.is_bypass(p)):
        out.append(finding("SCH206", name, f"optional {p.name!r} changes what this {kind} does when given",
                            f"make {p.name!r} required, or split the tool by intent so each call has one shape", p.name))
    if p.is_string and _is_id(p.name) and not _has_set(p) and "pattern" not in p.schema and "format" not in p.schema \
            and not (p.description and infer.ID_HINT.search(p.description)):
        out.append(finding("SCH209", name, f"id {p.name!r} has no format hint (no pattern, format or example)",
                            "add a pattern (e.g. Field(pattern=r'^task-[0-9a-f]{16}$')) or say in its description where the id comes from", p.name))
    return out
