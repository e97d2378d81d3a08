"""The tool plan: a meta tool that tells the model how each tool of the server is meant to be used.

For every tool: its kind; the discover -> call -> verify sequence (which read gives the version or
the plan the call needs, and how its effect is verified); whether a repeat is harmless and why
(a read, an idempotency key, compare-and-set on a version, a declaration); and the plan/commit
pair it belongs to. It is built from what the server already holds (each tool's ``@instrument_tool``
spec, the idempotency guard's key parameter, the parameter names, the MCP annotations), with a
:class:`ToolContract` per tool for what nothing else can say (a read that answers from a cache, a
verification tool). Opt-in: :func:`expose_tool_plan` registers the meta tool; nothing else changes.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from .. import _tool_kinds as tool_kinds
from .. import conventions as c
from ..exceptions import ConfigurationError
from ..guards import reads_cache_of
from ..guards._idempotency import KEY_PARAMETER_ATTRIBUTE
from ..instrument import SPEC_ATTRIBUTE, ToolSpec
from ._hints import hints_from_annotations

__all__ = ["ToolContract", "expose_tool_plan", "tool_plan"]

_PLAN_PARAMETER = "plan_id"


@dataclass(frozen=True)
class ToolContract:
    """What a tool's spec cannot say about how it is used; every field optional.

    ``discover``: the tool to call first (where the version, id or plan comes from);
    ``verify``: the read tool that verifies the call's effect; ``plan``: the tool whose plan this
    one commits; ``reads_cache``: this read answers from a cache (a verification through it
    proves nothing; ``telemetry.guards.reads_cache`` marks the function the same way).
    """

    discover: str | None = None
    verify: str | None = None
    plan: str | None = None
    reads_cache: bool = False


def _records(server: MCPServer) -> list[Any]:
    manager = getattr(server, "_tool_manager", None)
    if manager is None or not hasattr(manager, "list_tools"):
        raise ConfigurationError("this version of the mcp SDK keeps no tool manager on MCPServer; the tool plan "
                                 "cannot read its tools")
    return list(manager.list_tools())


def _parameters(record: Any) -> dict[str, bool]:
    """Parameter name -> required, from the tool's input schema (what a client sees)."""
    schema = getattr(record, "parameters", None) or {}
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    required = set(schema.get("required") or ()) if isinstance(schema, Mapping) else set()
    return {str(name): name in required for name in (properties or {})}


def _kind(record: Any, spec: ToolSpec | None) -> tuple[str, str]:
    if spec is not None:
        return spec.kind, "declared by @instrument_tool"
    hints = hints_from_annotations(record.annotations) if record.annotations is not None else {}
    if hints.get("read_only") is True:
        return c.KIND_READ, "MCP annotations (readOnlyHint: true)"
    kind = tool_kinds.kind_from_name(record.name)
    return (kind or c.KIND_WRITE), "inferred from the name"


def _reader_of(name: str, readers: list[str]) -> str | None:
    """The read tool about the same noun as ``name`` (``write_state`` -> ``read_state``)."""
    noun = tool_kinds.words(name)[1:]
    if not noun:
        return None
    for reader in readers:
        if tool_kinds.words(reader)[1:] == noun:
            return reader
    return None


def _idempotent(kind: str, spec: ToolSpec | None, record: Any, params: dict[str, bool]) -> dict[str, Any]:
    if kind == c.KIND_READ:
        return {"is": True, "how": c.IDEMPOTENT_BY_READ, "parameter": None}
    key = getattr(record.fn, KEY_PARAMETER_ATTRIBUTE, None)
    if isinstance(key, str):
        return {"is": True, "how": c.IDEMPOTENT_BY_KEY, "parameter": key}
    versions = [p for p, required in params.items() if required and tool_kinds.is_version_parameter(p)]
    if versions and kind == c.KIND_WRITE:
        return {"is": True, "how": c.IDEMPOTENT_BY_VERSION, "parameter": versions[0]}
    declared = spec.idempotent if spec is not None else hints_from_annotations(record.annotations).get("idempotent") \
        if record.annotations is not None else None
    if declared:
        return {"is": True, "how": c.IDEMPOTENT_BY_DECLARATION, "parameter": None}
    return {"is": False, "how": c.IDEMPOTENT_NOT, "parameter": None}


def _entry(record: Any, contract: ToolContract, readers: list[str], planners: list[str]) -> dict[str, Any]:
    spec = getattr(record.fn, SPEC_ATTRIBUTE, None)
    spec = spec if isinstance(spec, ToolSpec) else None
    kind, kind_basis = _kind(record, spec)
    params = _parameters(record)
    sequence: list[dict[str, Any]] = []
    plan_pair = None
    if kind != c.KIND_READ:
        discover, why = contract.discover, "declared"
        if _PLAN_PARAMETER in params and tool_kinds.words(record.name)[:1] == ["commit"]:
            planner = contract.plan or (planners[0] if planners else None)
            plan_pair = {"plan": planner, "commit": record.name}
            discover, why = discover or planner, f"returns the {_PLAN_PARAMETER} this call commits"
        elif discover is None and any(tool_kinds.is_version_parameter(p) for p in params):
            discover, why = _reader_of(record.name, readers), "returns the version this call must pass back unchanged"
        if discover is not None:
            sequence.append({"step": "discover", "tool": discover, "why": why})
    sequence.append({"step": "call", "tool": record.name})
    if contract.verify is not None:
        sequence.append({"step": "verify", "tool": contract.verify, "by": "caller",
                         "why": "call it and compare what the result's verification_required names"})
    elif spec is not None and spec.readback is not None:
        sequence.append({"step": "verify", "tool": None, "by": "server",
                         "why": "the server reads each write back from its source of truth (readback=)"})
    return {
        "name": record.name,
        "kind": kind,
        "kind_basis": kind_basis,
        "instrumented": spec is not None,
        "sequence": sequence,
        "idempotent": _idempotent(kind, spec, record, params),
        "plan_commit": plan_pair,
        "reads_cache": kind == c.KIND_READ and (contract.reads_cache or reads_cache_of(record.fn)),
    }


def tool_plan(server: MCPServer, contracts: Mapping[str, ToolContract] | None = None, *,
              exclude: str | None = None) -> dict[str, Any]:
    """The plan document for every tool of ``server`` (``exclude``: the meta tool itself)."""
    contracts = dict(contracts or {})
    records = [r for r in _records(server) if r.name != exclude]
    kinds = {r.name: _kind(r, getattr(r.fn, SPEC_ATTRIBUTE, None))[0] for r in records}
    readers = [n for n, k in kinds.items() if k == c.KIND_READ]
    planners = [n for n in readers if tool_kinds.words(n)[:1] in (["plan"], ["preview"])]
    tools = [_entry(r, contracts.get(r.name, ToolContract()), readers, planners) for r in records]
    return {"schema": c.PLAN_SCHEMA_ID, "tools": tools}


def _check_contracts(server: MCPServer, contracts: Mapping[str, ToolContract]) -> None:
    names = {r.name for r in _records(server)}
    for tool, contract in contracts.items():
        if not isinstance(contract, ToolContract):
            raise ConfigurationError(f"expose_tool_plan: contracts[{tool!r}] must be a telemetry.mcp.ToolContract, "
                                     f"got {contract!r:.80}")
        for field, named in (("tool", tool), ("discover", contract.discover), ("verify", contract.verify),
                             ("plan", contract.plan)):
            if named is not None and named not in names:
                raise ConfigurationError(f"expose_tool_plan: contracts[{tool!r}] names {field} {named!r}, which the "
                                         f"server does not have; its tools are {sorted(names)}")


def expose_tool_plan(server: MCPServer, contracts: Mapping[str, ToolContract] | None = None, *,
                     name: str = c.TOOL_PLAN_NAME) -> None:
    """Register the read-only meta tool ``name`` on ``server``: it returns :func:`tool_plan`.

    ``contracts`` maps a tool name to its :class:`ToolContract`; every tool it names must exist
    (a :class:`ConfigurationError` says which does not). The plan is built on each call, so tools
    registered later are in it. The meta tool's ``_meta`` carries ``outcome-telemetry/tool_plan``
    (the audit reads the plan through it).
    """
    if not isinstance(server, MCPServer):
        raise ConfigurationError(f"expose_tool_plan needs an mcp.server.mcpserver.MCPServer, got {server!r:.80}")
    declared = dict(contracts or {})
    _check_contracts(server, declared)
    if any(r.name == name for r in _records(server)):
        raise ConfigurationError(f"expose_tool_plan: the server already has a tool named {name!r}; pass name=")

    def plan() -> dict[str, Any]:
        return tool_plan(server, declared, exclude=name)

    plan.__signature__ = inspect.Signature(return_annotation=dict[str, Any])  # type: ignore[attr-defined]
    server.add_tool(
        plan,
        name=name,
        title="How to use these tools",
        description=("The plan for every tool of this server: its kind; what to call first (discover), the call, "
                     "and how to verify it; whether a retry is safe and why; its plan/commit pair. Read it before "
                     "the first write."),
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True),
        meta={c.MCP_META_TOOL_PLAN: True},
    )
