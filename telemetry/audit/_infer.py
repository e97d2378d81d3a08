"""Reading a tool's intent from its name and its JSON Schema, when nothing declares it.

Every function here looks only at names, types and descriptions, so it works the same for a
Python function (schema built from its signature) and for an MCP tool (its listed
``inputSchema``). The checks say when an answer rests on these inferences.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from .. import conventions as c
from .._tool_kinds import (
    CREATE_PREFIXES,
    DELEGATE_WORDS,
    DELETE_WORDS,
    KEY_NAMES,
    OVERWRITE_WORDS,
    POLICY_VERSION,
    READ_PREFIXES,
    SEND_WORDS,
    VERSION_NAMES,
    is_key_parameter,
    is_version_parameter,
    name_says,
    words,
)

# The name and parameter rules live in telemetry._tool_kinds, below the audit and forensics (which
# infers the kind of other instrumentations' tool spans with them); re-exported here for the
# audit's own modules.
__all__ = [
    "BULK_PARAMETERS", "BULK_WORDS", "BYPASS_NAMES", "BYPASS_PREFIXES", "CONSTRAINT_NAMES", "CREATE_PREFIXES",
    "DELEGATE_WORDS", "DELETE_WORDS", "ENUM_NAMES", "ENUM_TEXT", "GENERIC_NAMES", "ID_HINT", "KEY_NAMES",
    "METADATA_NAMES", "OVERWRITE_WORDS", "POLICY_VERSION", "READ_PREFIXES", "SEND_WORDS", "VERSION_NAMES", "Param",
    "infer_kind", "is_bulk", "is_bypass", "is_create_only", "is_delete", "key_params", "mentioned", "parameters",
    "version_params", "words",
]

BULK_WORDS: Final = ("bulk", "batch", "all", "collection", "many", "mass", "every", "broadcast", "reprice", "each")
BULK_PARAMETERS: Final = ("collection", "predicate", "filter", "filters", "query", "where", "segment", "selector", "target_predicate")
BYPASS_NAMES: Final = ("force", "overwrite", "bypass", "no_verify", "unsafe", "allow_stale", "ignore_version")
BYPASS_PREFIXES: Final = ("skip_", "ignore_", "bypass_", "force_")
CONSTRAINT_NAMES: Final = ("constraints", "constraint_ids", "carried_constraints")
METADATA_NAMES: Final = frozenset({"agent_id", "agent", "actor", "caller", "conversation_id", "session_id", "trace_id", "span_id"})
"""Optional parameters that say who asked, not what is written."""
ENUM_NAMES: Final = frozenset({
    "status", "state", "mode", "kind", "type", "level", "priority", "severity", "category", "sort", "sort_by",
    "order", "order_by", "direction", "format", "unit", "channel", "role", "action", "visibility", "tier", "plan",
})
ENUM_TEXT: Final = re.compile(r"\bone of\b|\beither\b|`[\w-]+`\s*(?:,\s*`[\w-]+`\s*)*,?\s*or\s*`[\w-]+`|\w+\|\w+", re.IGNORECASE)
GENERIC_NAMES: Final = frozenset({
    "run", "get", "do", "search", "execute", "call", "query", "process", "handle", "update", "set", "list",
    "fetch", "tool", "action", "invoke", "send", "write", "read", "delete", "create", "find",
})
ID_HINT: Final = re.compile(r"e\.g\.|for example|format|pattern|uuid|prefix|returned|from |like |such as|looks like", re.IGNORECASE)


@dataclass(frozen=True)
class Param:
    """One top-level parameter of a tool's input schema, ``$ref`` and ``Optional`` resolved."""

    name: str
    schema: dict[str, Any]
    required: bool
    types: frozenset[str]
    description: str

    @property
    def is_string(self) -> bool:
        return "string" in self.types

    @property
    def is_number(self) -> bool:
        """Only a number (or null): a union with strings or objects is free-form data, not a count."""
        return bool(self.types & {"integer", "number"}) and self.types <= {"integer", "number", "null"}

    @property
    def is_boolean(self) -> bool:
        return self.types == frozenset({"boolean"}) or self.types == frozenset({"boolean", "null"})

    @property
    def is_array(self) -> bool:
        return "array" in self.types


def _resolve(schema: Any, defs: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    if not isinstance(schema, dict):
        return {}
    ref = schema.get("$ref")
    if isinstance(ref, str) and depth < 8:
        name = ref.rsplit("/", 1)[-1]
        target = defs.get(name)
        if isinstance(target, dict):
            merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
            return _resolve(merged, defs, depth + 1)
    return schema


def _branches(schema: dict[str, Any], defs: dict[str, Any]) -> list[dict[str, Any]]:
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return [_resolve(o, defs) for o in options]
    return [schema]


def _types(branches: list[dict[str, Any]]) -> frozenset[str]:
    found: set[str] = set()
    for branch in branches:
        kind = branch.get("type")
        if isinstance(kind, str):
            found.add(kind)
        elif isinstance(kind, list):
            found.update(k for k in kind if isinstance(k, str))
        elif "enum" in branch or "const" in branch:
            found.add("enum")
    return frozenset(found)


def parameters(schema: dict[str, Any]) -> list[Param]:
    """The top-level parameters of a JSON Schema object, in declaration order."""
    if not isinstance(schema, dict):
        return []
    props = schema.get("properties")
    if not isinstance(props, dict):
        return []
    defs_raw = schema.get("$defs", schema.get("definitions", {}))
    defs = defs_raw if isinstance(defs_raw, dict) else {}
    required_raw = schema.get("required", [])
    required = {r for r in required_raw if isinstance(r, str)} if isinstance(required_raw, list) else set()
    out = []
    for name, raw in props.items():
        if not isinstance(name, str):
            continue
        resolved = _resolve(raw, defs)
        branches = _branches(resolved, defs)
        merged: dict[str, Any] = {}
        for branch in branches:
            if branch.get("type") != "null":
                merged = {**branch, **merged}
        merged = {**merged, **{k: v for k, v in resolved.items() if k not in ("anyOf", "oneOf")}}
        text = merged.get("description")
        out.append(Param(name, merged, name in required, _types(branches), text if isinstance(text, str) else ""))
    return out


def is_bypass(param: Param) -> bool:
    """A boolean that switches a guard off (``force``, ``overwrite``, ``skip_*`` ...)."""
    lowered = param.name.lower()
    return param.is_boolean and (lowered in BYPASS_NAMES or lowered.startswith(BYPASS_PREFIXES))


def version_params(params: list[Param]) -> list[Param]:
    """Parameters that carry a version a write was built on."""
    return [p for p in params if is_version_parameter(p.name)]


def key_params(params: list[Param]) -> list[Param]:
    """Parameters named like an idempotency key."""
    return [p for p in params if is_key_parameter(p.name)]


def infer_kind(name: str, params: list[Param]) -> tuple[str, str]:
    """``(kind, why)`` from the name alone; an unknown tool is taken to write, like the decorator does."""
    said = name_says(name)
    if said is not None:
        return said, f"inferred from the name {name!r}"
    return c.KIND_WRITE, f"inferred: {name!r} does not read as a read, so it is taken to write"




def is_create_only(name: str) -> bool:
    """The name has a verb that makes a new object and none that changes an existing one."""
    parts = words(name)
    return any(w in CREATE_PREFIXES for w in parts) and not any(w in OVERWRITE_WORDS for w in parts)


def is_bulk(name: str, params: list[Param]) -> str | None:
    """Why the tool looks like it changes many objects per call, or None."""
    parts = words(name)
    hit = next((w for w in parts if w in BULK_WORDS), None)
    if hit is not None:
        return f"the name says {hit!r}"
    for p in params:
        if p.name.lower() in BULK_PARAMETERS:
            return f"parameter {p.name!r} selects a set of objects"
        if p.is_array and p.name.lower().endswith(("ids", "keys")):
            return f"parameter {p.name!r} takes many ids"
    return None


def is_delete(name: str) -> str | None:
    hit = next((w for w in words(name) if w in DELETE_WORDS), None)
    return None if hit is None else f"the name says {hit!r}"


def mentioned(param: str, description: str) -> bool:
    """The tool's description talks about ``param`` by name."""
    return re.search(rf"(?<![\w]){re.escape(param)}(?![\w])", description) is not None
