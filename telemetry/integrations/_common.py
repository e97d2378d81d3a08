"""What every framework integration shares: per-tool options, hint inference, run ids.

An integration finds a framework's tools, asks :class:`Selection` for each tool's
:class:`~telemetry.instrument.ToolOptions`, and hands the tool's function to
:func:`telemetry.instrument.instrument_with` (the one place that wraps) unless it is
instrumented already. The per-call context (call id, run, agent name) comes from the framework
through :func:`telemetry.instrument.framework_context`.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from typing_extensions import TypedDict

from .. import conventions as c
from ..exceptions import ConfigurationError
from ..instrument import SPEC_ATTRIBUTE, ReadbackFn, ToolOptions, instrument_with


def hints_from(annotations: Any) -> dict[str, bool]:
    """The MCP-style hints an annotation mapping or object states (unstated ones left out).

    Frameworks carry MCP ``ToolAnnotations`` as an object (``read_only_hint``) or as metadata
    (``{"readOnlyHint": true}``); both spellings are read. Non-boolean values are ignored.
    """
    if annotations is None:
        return {}
    found: dict[str, bool] = {}
    for hint, (attribute, wire) in c.MCP_HINTS.items():
        for name in (wire, attribute):
            value = annotations.get(name) if isinstance(annotations, Mapping) else getattr(annotations, name, None)
            if isinstance(value, bool):
                found[hint] = value
                break
    return found


def is_instrumented(func: Any) -> bool:
    """True when ``func`` (or the function of a bound method) already carries a tool spec."""
    return func is not None and hasattr(func, SPEC_ATTRIBUTE)


class Choices(TypedDict, total=False):
    """The keywords every framework's ``instrument(...)`` takes, defined once for all of them.

    Each integration's ``instrument`` accepts ``**choices: Unpack[Choices]``, so a new choice is
    added here and every framework (and every type checker) sees it.
    """

    kinds: Mapping[str, str] | None
    """Tool name to ``read``/``write``/``send``/``delegate``; tools not named are inferred from
    their MCP-style hints, else ``write``."""
    readbacks: Mapping[str, ReadbackFn] | None
    """Tool name to a ``readback(call, result)`` callable for writes."""
    exceptions: Mapping[type[BaseException], str] | None
    """Exception class to outcome code, on top of the framework's defaults."""


_CHOICES = frozenset(Choices.__annotations__)


class Selection:
    """The options an ``instrument(...)`` call was given, checked once, looked up per tool.

    ``kinds`` and ``readbacks`` are keyed by the tool name the model sees; ``exceptions`` maps
    exception classes to outcome codes on top of the framework's defaults.
    """

    def __init__(self, where: str, choices: Choices, *, defaults: Mapping[type[BaseException], str]) -> None:
        unknown = sorted(set(choices) - _CHOICES)
        if unknown:  # what Python itself would say of a keyword the signature does not have
            raise TypeError(f"{where}() got an unexpected keyword argument {unknown[0]!r}")
        kinds, readbacks, exceptions = choices.get("kinds"), choices.get("readbacks"), choices.get("exceptions")
        for label, given in (("kinds", kinds), ("readbacks", readbacks), ("exceptions", exceptions)):
            if given is not None and not isinstance(given, Mapping):
                raise ConfigurationError(f"{where}: {label} must be a mapping, got {given!r}")
        self.where = where
        self.kinds = dict(kinds or {})
        self.readbacks = dict(readbacks or {})
        self.exceptions = {**defaults, **(exceptions or {})}
        self.seen: set[str] = set()

    def options(self, name: str, hints: Mapping[str, bool] | None = None, kind: str | None = None) -> ToolOptions:
        """The options for tool ``name``: its kind (given, else ``kind``) and read-back, hints inferred."""
        self.seen.add(name)
        stated = dict(hints or {})
        kind = self.kinds.get(name, kind)
        if kind is not None:
            # An explicit kind decides; hints that contradict it would be refused by build_spec.
            stated = {}
        return ToolOptions(
            name=name,
            kind=kind,
            read_only=stated.get("read_only"),
            destructive=stated.get("destructive"),
            idempotent=stated.get("idempotent"),
            readback=self.readbacks.get(name),
            exceptions=self.exceptions,
        )

    def instrument(
        self, name: str, func: Callable[..., Any], hints: Mapping[str, bool] | None = None, kind: str | None = None
    ) -> Any:
        """``func`` instrumented as tool ``name`` (``kind`` unless ``kinds`` says), or ``func`` when it already is."""
        if is_instrumented(func):
            self.seen.add(name)
            return func
        return instrument_with(func, self.options(name, hints, kind))

    def check_all_named(self, names: Iterable[str]) -> None:
        """Refuse ``kinds``/``readbacks`` entries naming no tool (a typo would go unnoticed)."""
        known = set(names) | self.seen
        unknown = sorted((set(self.kinds) | set(self.readbacks)) - known)
        if unknown:
            raise ConfigurationError(
                f"{self.where}: {', '.join(map(repr, unknown))} named in kinds/readbacks is not a tool here; "
                f"the tools are {', '.join(sorted(known)) or '(none)'}"
            )


_run_ids: dict[int, tuple[weakref.ref[Any], str]] = {}


def run_id_for(owner: Any) -> str | None:
    """One fresh id per ``owner`` (an object that lives exactly as long as one framework run).

    For frameworks that have a run but no id for it. Keyed by identity through a weak reference,
    so unhashable owners work and an id is forgotten with its owner. None when ``owner`` cannot
    be weakly referenced (the call then keeps whatever context it has).
    """
    key = id(owner)
    found = _run_ids.get(key)
    if found is not None and found[0]() is owner:
        return found[1]
    def forget(_ref: weakref.ref[Any]) -> None:
        _run_ids.pop(key, None)

    try:
        ref = weakref.ref(owner, forget)
    except TypeError:
        return None
    run_id = "run_" + uuid.uuid4().hex
    _run_ids[key] = (ref, run_id)
    return run_id
