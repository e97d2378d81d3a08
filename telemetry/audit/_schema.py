"""The JSON Schema a model would see for a Python tool, built from its signature as the MCP SDK does.

The MCP SDK's ``MCPServer`` turns a function's signature into a pydantic model (one field per
parameter, the default kept, an unannotated parameter typed as a string) and publishes that
model's JSON Schema as the tool's ``inputSchema``. This module does the same with pydantic's
``create_model``, so the lint reads the schema a client would get, not a guess. Pydantic comes
with the ``audit`` extra (and with ``mcp``); without it the audit says what to install.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

from .._extras import require
from ..exceptions import AuditTargetError

__all__ = ["input_schema", "signature_of"]

_SKIPPED = frozenset({"self", "cls"})


def _pydantic() -> Any:
    return require("pydantic", extra="audit", needed_for="auditing Python tools (their JSON Schema)",
                   error=AuditTargetError)


def signature_of(func: Callable[..., Any]) -> inspect.Signature:
    """The signature a caller sees (bound methods without ``self``; string annotations evaluated)."""
    try:
        return inspect.signature(func, eval_str=True)
    except NameError:
        return inspect.signature(func)


def input_schema(func: Callable[..., Any], name: str) -> tuple[dict[str, Any], list[str]]:
    """``(schema, notes)``: the tool's input schema, and what could not be expressed in it."""
    pydantic = _pydantic()
    notes: list[str] = []
    try:
        sig = signature_of(func)
    except (TypeError, ValueError) as exc:
        raise AuditTargetError(f"cannot read the signature of tool {name!r}: {exc}") from exc
    fields: dict[str, Any] = {}
    wire_names: dict[str, str] = {}  # field name -> the parameter name clients send
    raw: dict[str, Any] = {}  # parameter name -> its annotation, before any alias
    for param in sig.parameters.values():
        if param.name in _SKIPPED:
            continue
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            notes.append(f"*{param.name} is not in the schema: a model cannot see what it accepts")
            continue
        annotation: Any = param.annotation
        if annotation is inspect.Parameter.empty:
            annotation = Annotated[Any, pydantic.WithJsonSchema({"title": param.name, "type": "string"})]
        field_name = param.name
        raw[param.name] = annotation
        if hasattr(pydantic.BaseModel, field_name):  # e.g. ``schema``: alias it, as the SDK does
            annotation = Annotated[annotation, pydantic.Field(alias=param.name)]
            field_name = f"field_{param.name}"
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[field_name] = (annotation, default)
        wire_names[field_name] = param.name
    config = pydantic.ConfigDict(arbitrary_types_allowed=True)
    try:
        model = pydantic.create_model(f"{name}Arguments", __config__=config, **fields)
        schema: dict[str, Any] = model.model_json_schema(by_alias=True)
        return schema, notes
    except Exception as exc:  # pydantic raises several kinds for a type it cannot express
        notes.append(f"pydantic cannot express every parameter type as JSON Schema ({type(exc).__name__}); "
                     f"those parameters are listed without a type")
    properties: dict[str, Any] = {}
    required = []
    for field_name, (_annotated, default) in fields.items():
        wire = wire_names[field_name]
        try:
            properties[wire] = pydantic.TypeAdapter(raw[wire]).json_schema()
        except Exception:
            properties[wire] = {}
        if default is ...:
            required.append(wire)
    return {"type": "object", "properties": properties, "required": required}, notes
