"""The layout docs/architecture.md describes holds: who may import whom, and private stays private.

Every import in ``telemetry/`` (and every import of ``telemetry`` from the tests, benchmarks
and examples) is read with :mod:`ast`, so a rule broken anywhere fails here, naming the file and
line, before it becomes a habit.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "telemetry"


@dataclass(frozen=True)
class Import:
    """One imported name: ``module`` (dotted), and ``name`` when it was ``from module import name``."""

    where: str
    importer: str
    module: str
    name: str | None


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_package(module: str) -> bool:
    return (REPO / Path(*module.split(".")) / "__init__.py").exists()


def _is_module(module: str) -> bool:
    return _is_package(module) or (REPO / Path(*module.split("."))).with_suffix(".py").exists()


def _imports(path: Path) -> Iterator[Import]:
    importer = _module_name(path)
    package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
    relative = path.relative_to(REPO)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        where = f"{relative}:{node.lineno}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(where, importer, alias.name, None)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                if module.startswith("telemetry") and _is_module(submodule):
                    yield Import(where, importer, submodule, None)  # ``from pkg import submodule``
                else:
                    yield Import(where, importer, module, alias.name)


def _sources(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (REPO / folder).rglob("*.py"))


# Read when a test first asks, not at import: collection imports this module in every test
# process, and parsing every source file there cost each of them seconds.
@functools.cache
def _library() -> list[Import]:
    """Every import in ``telemetry/``."""
    return [imp for path in _sources("telemetry") for imp in _imports(path)]


@functools.cache
def _ours() -> list[Import]:
    """Every import of ``telemetry`` anywhere: the package, the tests, benchmarks and examples."""
    everything = _library() + [imp for path in _sources("tests", "benchmarks", "examples") for imp in _imports(path)]
    return [imp for imp in everything if imp.module == "telemetry" or imp.module.startswith("telemetry.")]


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


@functools.cache
def _public_names(module: str) -> set[str] | None:
    """The module's ``__all__`` when it spells one out as a literal, else None."""
    path = REPO / Path(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return None


def _owner(imp: Import) -> str:
    """The package whose public face ``from imp.module import imp.name`` goes through."""
    return imp.module if _is_package(imp.module) else imp.module.rpartition(".")[0]


def _user_code(importer: str) -> bool:
    """The examples stand for a user's code: they may use the public face only. The package's own
    modules, its tests and its benchmarks may reach a private module of another package, through
    the names its ``__all__`` declares."""
    return _within(importer, "examples")


def _privacy_breaks(imp: Import) -> str | None:
    """Why ``imp`` reaches into private parts it may not use, or None when it does not."""
    parts = imp.module.split(".")
    for depth, part in enumerate(parts):
        owner = ".".join(parts[:depth])
        if _private(part) and not _within(imp.importer, owner) and _user_code(imp.importer):
            return f"{imp.module} is private to {owner}"
    if imp.name is None:
        return None
    if _within(imp.importer, _owner(imp)):
        return None
    if _private(imp.name):
        return f"{imp.name} is private to {imp.module}"
    public = _public_names(imp.module)
    if public is not None and imp.name not in public:
        return f"{imp.name} is not in {imp.module}.__all__"
    return None


def test_the_rule_checker_sees_a_break() -> None:
    """The checker itself: it flags a user's reach into a private module and a name outside __all__."""
    into_private = Import("x.py:1", "examples.crew", "telemetry.guards._checks", "text")
    outside_all = Import("x.py:2", "telemetry.demo._world", "telemetry.guards._state", "SCHEMA_NAME")
    inside = Import("x.py:3", "telemetry.guards._state", "telemetry.guards._checks", "text")
    assert _privacy_breaks(into_private) == "telemetry.guards._checks is private to telemetry.guards"
    assert _privacy_breaks(outside_all) == "SCHEMA_NAME is not in telemetry.guards._state.__all__"
    assert _privacy_breaks(inside) is None
    assert len(_library()) > 100  # the walk really read the package


def test_nothing_imports_another_packages_private_names() -> None:
    """Private names (a leading underscore, or left out of ``__all__``) stay in their module, and
    private modules stay out of user code (the examples)."""
    breaks = [f"{imp.where}: {why}" for imp in _ours() if (why := _privacy_breaks(imp)) is not None]
    assert not breaks, "\n".join(breaks)


def test_a_module_other_packages_import_from_says_what_it_offers() -> None:
    """A module whose names other packages import declares ``__all__``, so the rule above can hold."""
    silent = sorted(
        {
            imp.module
            for imp in _ours()
            if imp.name is not None
            and not _within(imp.importer, _owner(imp))
            and _public_names(imp.module) is None
        }
    )
    assert not silent, "no __all__ in: " + ", ".join(silent)


FORBIDDEN = [
    # (importing area, imported area, why the rule exists)
    ("telemetry.instrument", "telemetry.guards", "the decorator knows nothing of the guards built on it"),
    ("telemetry.instrument", "telemetry.forensics", "the per-call path never reads traces"),
    ("telemetry.instrument", "telemetry.mcp", "integrations build on the decorator, not the reverse"),
    ("telemetry.instrument", "telemetry.integrations", "integrations build on the decorator, not the reverse"),
    ("telemetry.forensics", "telemetry.integrations", "forensics reads exported files, never live frameworks"),
    ("telemetry.runtime", "telemetry.instrument", "the runtime exports what it is given; it does not decide outcomes"),
    ("telemetry.runtime", "telemetry.guards", "the runtime exports what it is given; it does not decide outcomes"),
    ("telemetry.forensics", "telemetry.instrument", "forensics reads exported files, never live spans"),
    ("telemetry.forensics", "telemetry.guards", "forensics reads exported files, never the guards' tables"),
    ("telemetry.guards", "telemetry.forensics", "a guard refuses at call time; it does not query traces"),
    ("telemetry.conventions", "telemetry", "conventions.py is the leaf every other module reads"),
    ("telemetry.envelopes", "telemetry.instrument", "envelope rules serve the decorator and forensics from below both"),
    ("telemetry.envelopes", "telemetry.runtime", "envelope rules serve the decorator and forensics from below both"),
    ("telemetry.envelopes", "telemetry.forensics", "envelope rules serve the decorator and forensics from below both"),
    ("telemetry._span_formats", "telemetry.instrument", "the peer formats are read by forensics and the live processor alike"),
    ("telemetry._span_formats", "telemetry.forensics", "the peer formats are read by forensics and the live processor alike"),
    ("telemetry.exceptions", "telemetry", "exceptions.py is a leaf: anything may raise its errors"),
]
LIBRARY_AREAS = [
    "telemetry.envelopes",
    "telemetry.instrument",
    "telemetry.runtime",
    "telemetry.guards",
    "telemetry.forensics",
    "telemetry.mcp",
    "telemetry.integrations",
]
ON_TOP = ["telemetry.audit", "telemetry.demo", "telemetry.cli"]
"""What reads the library without being part of it: the audit, the demo and the command line."""


@pytest.mark.parametrize(("importer", "imported", "why"), FORBIDDEN, ids=[f"{a}-{b}" for a, b, _ in FORBIDDEN])
def test_layer_rule(importer: str, imported: str, why: str) -> None:
    """One rule of the layout (see docs/architecture.md, "Rules")."""
    breaks = [
        f"{imp.where}: imports {imp.module}"
        for imp in _library()
        if _within(imp.importer, importer) and _within(imp.module, imported) and not _within(imp.module, importer)
    ]
    assert not breaks, why + ":\n" + "\n".join(breaks)


@pytest.mark.parametrize("area", LIBRARY_AREAS + ["telemetry.audit"])
def test_the_library_never_imports_what_sits_on_top(area: str) -> None:
    """The audit, the demo and the CLI sit on top: no library package depends on them (the audit
    may be imported by the demo and the CLI, never the reverse)."""
    above = [top for top in ON_TOP if not _within(area, top)]
    breaks = [
        f"{imp.where}: imports {imp.module}"
        for imp in _library()
        if _within(imp.importer, area) and any(_within(imp.module, top) for top in above)
    ]
    assert not breaks, "\n".join(breaks)
