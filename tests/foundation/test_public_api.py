"""The public face is deliberate: every exported name resolves, no submodule hides behind a name,
no two public classes share a name, and the API's names and signatures match the committed
snapshot (tests/foundation/public_api.txt), so a change to the face is a reviewed change.

Regenerate the snapshot after a deliberate change with
``python -m tests.foundation.test_public_api > tests/foundation/public_api.txt``.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
from pathlib import Path
from types import ModuleType

import telemetry

SNAPSHOT = Path(__file__).with_name("public_api.txt")
OPTIONAL = {"telemetry.integrations.crewai", "telemetry.integrations.google_adk", "telemetry.integrations.strands_agents"}
"""Modules that need a framework the dev environment cannot hold (CrewAI pins mcp<2, Google ADK an
older OpenTelemetry SDK, Strands an older mcp)."""


def _public_modules() -> list[ModuleType]:
    found = []
    for info in pkgutil.walk_packages(telemetry.__path__, "telemetry."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts) or info.name in OPTIONAL:
            continue
        found.append(importlib.import_module(info.name))
    return [telemetry, *found]


_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def _describe(obj: object) -> str:
    """The signature as text, without the memory addresses a default function's repr carries."""
    try:
        return _ADDRESS.sub("", str(inspect.signature(obj)))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return type(obj).__name__


def snapshot() -> str:
    """One line per public name: ``module.name signature``, for every module's ``__all__``."""
    lines = []
    for module in _public_modules():
        for name in sorted(getattr(module, "__all__", ())):
            obj = getattr(module, name)
            kind = "class" if inspect.isclass(obj) else "def" if callable(obj) else "value"
            lines.append(f"{module.__name__}.{name} {kind} {_describe(obj) if kind != 'value' else ''}".rstrip())
    return "\n".join(lines) + "\n"


def test_every_exported_name_resolves() -> None:
    """Every name in every public module's ``__all__`` exists, so ``from m import *`` never raises."""
    missing = [f"{m.__name__}.{n}" for m in _public_modules() for n in getattr(m, "__all__", ()) if not hasattr(m, n)]
    assert not missing, missing


def test_no_submodule_is_shadowed_by_a_name() -> None:
    """``import telemetry.a.b`` always gives the module b, never a function of the same name."""
    shadowed = []
    for module in _public_modules():
        if not hasattr(module, "__path__"):
            continue
        for info in pkgutil.iter_modules(module.__path__):
            value = getattr(module, info.name, None)
            if value is not None and not inspect.ismodule(value):
                shadowed.append(f"{module.__name__}.{info.name} is a {type(value).__name__}")
    assert not shadowed, shadowed


def test_no_two_public_classes_share_a_name() -> None:
    """A class name means one thing: two different public classes never share it."""
    seen: dict[str, set[str]] = {}
    for module in _public_modules():
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name, None)
            if inspect.isclass(obj):
                seen.setdefault(name, set()).add(f"{obj.__module__}.{obj.__qualname__}")
    clashes = {name: sorted(where) for name, where in seen.items() if len(where) > 1}
    assert not clashes, clashes


def test_the_public_api_matches_the_snapshot() -> None:
    """Names and signatures of the face equal the committed snapshot: a change to it is deliberate."""
    assert snapshot() == SNAPSHOT.read_text(encoding="utf-8"), (
        "the public API changed; if that is deliberate, regenerate tests/foundation/public_api.txt "
        "(see this module's docstring) and say so in CHANGELOG.md"
    )


if __name__ == "__main__":
    sys.stdout.write(snapshot())
