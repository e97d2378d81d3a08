"""Scoped tool inventory: a credential sees only the tools its scopes allow.

Register each instrumented tool with the scopes it requires; ``inventory(scopes)`` then lists
the tools a credential holding ``scopes`` may use, and leaves the others out entirely. A tool
outside the scopes is *absent*, not denied: it is not listed, ``get`` returns None for it exactly
as for a name that was never registered, so a model cannot learn of, or argue its way into, a
tool it was not given. Each entry carries the tool's annotations (the MCP hint names
``readOnlyHint``, ``destructiveHint``, ``idempotentHint``, taken from ``@instrument_tool``).

Scopes come from the credential, on the server side, never from the model: ``scoped(scopes)``
binds them once and gives the agent a ``list_tools`` tool with no scopes parameter at all::

    registry = ToolRegistry()
    registry.register(state.read_state, scopes=["state:read"])
    registry.register(state.write_state, scopes=["state:write"])
    tools = registry.scoped(credential.scopes)   # e.g. ["state:read"]
    agent_tools = tools.callables()              # {"read_state": <bound method>}
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .. import conventions as c
from ..exceptions import ConfigurationError, GuardError
from ..instrument import SPEC_ATTRIBUTE, ToolSpec, instrument_tool
from ._envelope import success

__all__ = ["ScopedTools", "ToolRegistry"]


@dataclass(frozen=True)
class _Entry:
    name: str
    tool: Callable[..., Any]
    spec: ToolSpec
    scopes: frozenset[str]
    description: str

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "kind": self.spec.kind,
            "annotations": {wire: getattr(self.spec, hint) for hint, (_attribute, wire) in c.MCP_HINTS.items()},
            "required_scopes": sorted(self.scopes),
        }


def _scope_set(scopes: Iterable[str], what: str) -> frozenset[str]:
    if isinstance(scopes, str):
        raise GuardError(f"{what} takes a list of scope names, not one string: pass [{scopes!r}]")
    found = frozenset(scopes)
    bad = [s for s in found if not isinstance(s, str) or not s.strip()]
    if bad:
        raise GuardError(f"{what}: scope names must be non-empty strings, got {bad!r}")
    return found


class ToolRegistry:
    """Every tool a server offers, each with the scopes a credential needs to see it."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def register(
        self, tool: Callable[..., Any], *, scopes: Iterable[str], name: str | None = None, description: str | None = None
    ) -> None:
        """Offer ``tool`` (an ``@instrument_tool`` function or bound method) to credentials holding
        every scope in ``scopes`` (an empty list offers it to every credential).

        ``name`` defaults to the tool's instrumented name, ``description`` to the first
        paragraph of its docstring.
        """
        spec = getattr(tool, SPEC_ATTRIBUTE, None)
        if not isinstance(spec, ToolSpec):
            raise ConfigurationError(
                f"{getattr(tool, '__name__', tool)!r} is not instrumented: decorate it with @instrument_tool "
                f"(its hints become the inventory's annotations)"
            )
        tool_name = spec.name if name is None else name
        if not isinstance(tool_name, str) or not tool_name:
            raise ConfigurationError(f"a tool name must be a non-empty string, got {tool_name!r}")
        if tool_name in self._entries:
            raise ConfigurationError(f"a tool named {tool_name!r} is already registered; pass name= to register another")
        text = description if description is not None else (inspect.getdoc(tool) or "").split("\n\n")[0]
        self._entries[tool_name] = _Entry(tool_name, tool, spec, _scope_set(scopes, "register"), " ".join(text.split()))

    def inventory(self, scopes: Iterable[str]) -> list[dict[str, Any]]:
        """The entries a credential holding ``scopes`` may use, by name; the rest are absent."""
        held = _scope_set(scopes, "inventory")
        return [e.describe() for e in sorted(self._entries.values(), key=lambda e: e.name) if e.scopes <= held]

    def scoped(self, scopes: Iterable[str]) -> ScopedTools:
        """The registry as one credential sees it (scopes fixed here, server-side)."""
        return ScopedTools(self, _scope_set(scopes, "scoped"))

    def _allowed(self, name: str, held: frozenset[str]) -> _Entry | None:
        entry = self._entries.get(name)
        return entry if entry is not None and entry.scopes <= held else None


class ScopedTools:
    """What one credential may use: list it, look tools up, hand them to an agent framework."""

    def __init__(self, registry: ToolRegistry, scopes: frozenset[str]) -> None:
        self._registry = registry
        self.scopes = scopes

    @instrument_tool(name="list_tools", kind=c.KIND_READ)
    def list_tools(self) -> dict[str, Any]:
        """List the tools you may call, with what each does and whether it changes anything.

        ``annotations.readOnlyHint`` true means the tool only reads; ``destructiveHint`` true
        means its changes may not be undoable; ``idempotentHint`` false means calling it twice
        may act twice. Tools not listed here do not exist for you.
        """
        return success(tools=self._registry.inventory(self.scopes))

    def inventory(self) -> list[dict[str, Any]]:
        """What ``list_tools`` returns under ``tools``, without calling (and recording) the tool."""
        return self._registry.inventory(self.scopes)

    def get(self, name: str) -> Callable[..., Any] | None:
        """The tool named ``name`` if these scopes allow it, else None (also for unknown names)."""
        if not isinstance(name, str):
            return None
        entry = self._registry._allowed(name, self.scopes)
        return entry.tool if entry is not None else None

    def callables(self) -> dict[str, Callable[..., Any]]:
        """``{name: tool}`` of every allowed tool, to wire into an agent framework."""
        return {e["name"]: self._registry._entries[e["name"]].tool for e in self._registry.inventory(self.scopes)}

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None
