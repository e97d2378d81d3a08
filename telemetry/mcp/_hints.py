"""MCP tool annotations and the decorator's hints are one thing, set once.

``readOnlyHint``, ``destructiveHint`` and ``idempotentHint`` (MCP ``ToolAnnotations``) mean what
``read_only``, ``destructive`` and ``idempotent`` mean to :func:`telemetry.instrument_tool`. The
functions here read hints out of annotations, merge them with hints given to the decorator
(refusing a contradiction), and write the decided hints back into the annotations, so what a
client sees in ``tools/list`` is exactly what the span records.
"""

from __future__ import annotations

from mcp_types import ToolAnnotations

from .. import conventions as c
from ..exceptions import ConfigurationError
from ..instrument import ToolOptions, ToolSpec

_FIELDS = c.MCP_HINTS


def hints_from_annotations(annotations: ToolAnnotations | None) -> dict[str, bool]:
    """The hints an annotation object sets explicitly (unset ones are left out)."""
    if annotations is None:
        return {}
    if not isinstance(annotations, ToolAnnotations):
        raise ConfigurationError(f"annotations must be an mcp_types.ToolAnnotations, got {annotations!r}")
    found: dict[str, bool] = {}
    for hint, (field, _wire) in _FIELDS.items():
        value = getattr(annotations, field)
        if value is not None:
            found[hint] = bool(value)
    return found


def merge_hints(tool_name: str, explicit: ToolOptions, annotations: ToolAnnotations | None) -> dict[str, bool | None]:
    """Hints for the decorator: the explicit ones, filled in from the annotations.

    Raises :class:`ConfigurationError` when both say something and disagree.
    """
    annotated = hints_from_annotations(annotations)
    merged: dict[str, bool | None] = {}
    for hint, (_field, wire) in _FIELDS.items():
        given = getattr(explicit, hint)
        from_annotations = annotated.get(hint)
        if given is not None and from_annotations is not None and bool(given) != from_annotations:
            raise ConfigurationError(
                f"tool {tool_name!r}: {hint}={given!r} contradicts {wire}={from_annotations!r} in its MCP "
                f"annotations; set the hint once (telemetry.mcp.tool(server, {hint}=...) sets both)"
            )
        merged[hint] = given if given is not None else from_annotations
    return merged


def check_consistent(tool_name: str, spec: ToolSpec, annotations: ToolAnnotations | None) -> None:
    """Refuse annotations that contradict an instrumented tool's hints."""
    for hint, value in hints_from_annotations(annotations).items():
        decided = getattr(spec, hint)
        if value != decided:
            wire = _FIELDS[hint][1]
            raise ConfigurationError(
                f"tool {tool_name!r}: its MCP annotations say {wire}={value!r} but @instrument_tool decided "
                f"{hint}={decided!r} (kind={spec.kind!r}); pass {hint}={value!r} to instrument_tool, or drop "
                f"the annotation and let the decorator's hint fill it in"
            )


def annotations_for(spec: ToolSpec, base: ToolAnnotations | None = None) -> ToolAnnotations:
    """``base`` (title, openWorldHint kept) with the three hints set from ``spec``."""
    if base is None:
        return ToolAnnotations(
            read_only_hint=spec.read_only, destructive_hint=spec.destructive, idempotent_hint=spec.idempotent
        )
    decided = {field: bool(getattr(spec, hint)) for hint, (field, _wire) in _FIELDS.items()}
    return base.model_copy(update=decided)
