"""The built-in envelope rules: what a result says about itself, read from its shape alone.

Pure functions over a returned value (a live result in the decorator, a parsed recorded result in
forensics and ``observe_tool_spans``): no I/O, no import of the per-call path. Their one state is
what each result type can hold, decided once per type: an object that is not a mapping is read
through ``getattr`` only for the names its type defines (a class attribute, property, slot or
ORM column), and through its own ``__dict__`` for the others, so a lazy object's ``__getattr__``
(a proxy that loads its target, a row that fetches) never runs for names it does not have.

The rules, in order (the first that matches decides):

- a shape registered with :func:`telemetry.register_result_shape` (newest first);
- an HTTP status (an attribute ``status_code`` or a mapping key ``status_code``, an int in
  100-599; other values are not HTTP statuses and are ignored) outside 2xx
  makes transport ``error`` with outcome ``rate_limited`` (429), ``not_found`` (404),
  ``rejected_stale_version`` (409, 412), ``invalid_argument`` (400, 422) or ``error``;
- ``{"ok": false, "error": CODE}`` gives outcome CODE (``error`` when CODE is absent);
- ``{"rejected": true}`` gives ``rejected_stale_version``;
- an MCP-style ``isError: true`` (mapping key, or the ``is_error``/``isError`` attribute of an
  SDK ``CallToolResult``) gives ``tool_error``, or the code of an ``{"ok": false, "error": CODE}``
  structured result;
- ``{"success": false | 0, ...}`` (key or attribute);
- ``{"status": "error" | "failed" | "fail", ...}`` (key or attribute);
- a GraphQL response: a non-empty ``errors`` array;
- a JSON-RPC response: ``"jsonrpc"`` with an ``error`` object;
- CrewAI's ``ToolFailure`` (recognised by class, without importing crewai).

For the last five the outcome is the envelope's own code when it is a short snake_case token
(an upper-case GraphQL ``extensions.code`` is lower-cased), the HTTP mapping above when the code
is an HTTP status, the JSON-RPC mapping for the reserved JSON-RPC codes, else ``tool_error``.
Transport stays ``ok``: the call returned, and the caller can read the refusal.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from .. import conventions as c

__all__ = ["OK", "ResultClass", "builtin_result_class"]

_STATUS_OUTCOMES = {
    400: c.OUTCOME_INVALID_ARGUMENT,
    404: c.OUTCOME_NOT_FOUND,
    409: c.OUTCOME_REJECTED_STALE_VERSION,
    412: c.OUTCOME_REJECTED_STALE_VERSION,
    422: c.OUTCOME_INVALID_ARGUMENT,
    429: c.OUTCOME_RATE_LIMITED,
}
# The codes JSON-RPC 2.0 reserves for its own errors; a server's own codes become tool_error.
_JSONRPC_OUTCOMES = {
    -32700: c.OUTCOME_INVALID_ARGUMENT,  # parse error
    -32600: c.OUTCOME_INVALID_ARGUMENT,  # invalid request
    -32601: c.OUTCOME_NOT_FOUND,  # method not found
    -32602: c.OUTCOME_INVALID_ARGUMENT,  # invalid params
}
_FAILED_STATUSES = frozenset({"error", "failed", "fail"})
_CODE_KEYS = ("error_code", "code", "error")
_TOKEN = re.compile(r"[a-z][a-z0-9_]{0,63}|[A-Z][A-Z0-9_]{0,63}")
_SCALARS = (str, int, float, bytes, list, tuple)


class ResultClass(NamedTuple):
    """What a result said about itself: transport, outcome, and the HTTP status it carried."""

    transport: str
    outcome: str
    status_code: int | None

    @property
    def reported_failure(self) -> bool:
        """True when the result itself said the call failed (the caller was told)."""
        return self.outcome != c.OUTCOME_OK


OK = ResultClass(c.TRANSPORT_OK, c.OUTCOME_OK, None)


def _status_of(status: Any) -> int | None:
    """``status`` (a result's ``status_code``) as an HTTP status, or None when it is not one."""
    if isinstance(status, bool) or not isinstance(status, int):
        return None
    # Only a value an HTTP response can carry counts (an IntEnum such as HTTPStatus becomes a
    # plain int); anything else (0, negative, beyond int64) is some other "status code".
    return int(status) if 100 <= status <= 599 else None


def _code_of(value: Any) -> str | None:
    """An envelope's own code as an outcome: a snake_case token, or an HTTP status mapped."""
    if isinstance(value, str):
        return value.lower() if _TOKEN.fullmatch(value) else None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return _STATUS_OUTCOMES.get(value, c.OUTCOME_ERROR) if 400 <= value <= 599 else None
    if isinstance(value, Mapping):
        return _code_of(value.get("code"))
    return None


def _envelope_code(found: Callable[[str], Any]) -> str:
    for key in _CODE_KEYS:
        code = _code_of(found(key))
        if code is not None:
            return code
    return c.OUTCOME_TOOL_ERROR


def _failed(success: Any) -> bool:
    return success is False or (type(success) is int and success == 0)


def _failed_status(status: Any) -> bool:
    return isinstance(status, str) and status.lower() in _FAILED_STATUSES


def _graphql_code(errors: Any) -> str:
    first = errors[0]
    if isinstance(first, Mapping):
        extensions = first.get("extensions")
        code = _code_of(extensions.get("code")) if isinstance(extensions, Mapping) else None
        return code or _code_of(first.get("code")) or c.OUTCOME_TOOL_ERROR
    return c.OUTCOME_TOOL_ERROR


def _jsonrpc_code(error: Mapping[str, Any]) -> str:
    code = error.get("code")
    if type(code) is int and code in _JSONRPC_OUTCOMES:
        return _JSONRPC_OUTCOMES[code]
    return (_code_of(code) if isinstance(code, str) else None) or c.OUTCOME_TOOL_ERROR


def _structured_outcome(structured: Any) -> str:
    """An MCP error result's outcome: its structured content's envelope code, else tool_error."""
    return (_mapping_outcome(structured) if isinstance(structured, Mapping) else None) or c.OUTCOME_TOOL_ERROR


def _mapping_outcome(result: Mapping[str, Any]) -> str | None:
    """The outcome a mapping envelope reports, or None when it reports no failure."""
    get = result.get
    ok = get(c.ENVELOPE_OK)
    if ok is False:
        code = get(c.ENVELOPE_ERROR)
        return code if isinstance(code, str) and code else c.OUTCOME_ERROR
    if get(c.ENVELOPE_REJECTED) is True:
        return c.OUTCOME_REJECTED_STALE_VERSION
    if get("isError") is True:
        return _structured_outcome(get("structuredContent"))
    if _failed(get("success")) or _failed_status(get("status")):
        return _envelope_code(get)
    errors = get("errors")
    if errors and isinstance(errors, (list, tuple)):
        return _graphql_code(errors)
    if "jsonrpc" in result:
        error = get("error")
        if isinstance(error, Mapping):
            return _jsonrpc_code(error)
    return None


_PROBED = (
    "status_code", "is_error", "isError", "success", "status",
    "structured_content", "structuredContent", "error_code", "code", "error",
)
"""Every attribute the rules read from an object that is not a mapping (the first five on every
such result, the others once one of those matched)."""
_PROBED_SET = frozenset(_PROBED)
_KEPT_TYPES = 1024
"""Result types whose probe is kept; past that the table starts over (types are few in practice)."""


class _Probe(NamedTuple):
    """How a type's instances are read, decided once per type (:func:`_probe_of`).

    ``declared``: the probed names the type itself defines (a class attribute, property, slot,
    or an ORM's column descriptor): those are read with ``getattr``, as the type means them to
    be. Every other name is looked up in the instance's own ``__dict__`` only, never through
    ``getattr``: a lazy object's ``__getattr__`` (a proxy that loads its target, an ORM row that
    fetches) would otherwise run, and do its I/O, for each of five names most results lack.
    """

    declared: frozenset[str]
    tool_failure: bool


_probes: dict[type, _Probe] = {}


def _probe_of(cls: type) -> _Probe:
    found = _probes.get(cls)
    if found is None:
        try:
            classes = cls.__mro__
        except Exception:  # a metaclass hiding __mro__: read nothing through getattr
            classes = ()
        declared = frozenset(name for name in _PROBED if any(name in vars(klass) for klass in classes))
        tool_failure = cls.__name__ == "ToolFailure" and str(getattr(cls, "__module__", "")).startswith("crewai.")
        found = _Probe(declared, tool_failure)
        if len(_probes) >= _KEPT_TYPES:
            _probes.clear()
        _probes[cls] = found
    return found


def _own_attributes(result: Any) -> dict[str, Any]:
    """The instance's own ``__dict__``, read without ``getattr`` (no ``__getattr__`` runs)."""
    try:
        own = object.__getattribute__(result, "__dict__")
    except Exception:  # no __dict__ (slots, a C type), or one that will not be read
        return {}
    return own if type(own) is dict else {}


def _object_class(result: Any) -> ResultClass:
    """The verdict on an object that is not a mapping, reading only what its type can hold."""
    probe = _probe_of(type(result))
    own = _own_attributes(result)
    if not probe.declared and not probe.tool_failure and _PROBED_SET.isdisjoint(own):
        return OK  # nothing a rule reads: most objects, decided without a single getattr
    declared = probe.declared

    def found(name: str) -> Any:
        return getattr(result, name, None) if name in declared else own.get(name)

    status = _status_of(found("status_code"))
    if status is not None and not 200 <= status < 300:
        return ResultClass(c.TRANSPORT_ERROR, _STATUS_OUTCOMES.get(status, c.OUTCOME_ERROR), status)
    outcome = _object_outcome(found, probe.tool_failure)
    if outcome is not None:
        return ResultClass(c.TRANSPORT_OK, outcome, status)
    return OK if status is None else ResultClass(c.TRANSPORT_OK, c.OUTCOME_OK, status)


def _object_outcome(found: Callable[[str], Any], tool_failure: bool) -> str | None:
    """The outcome an object (not a mapping) reports, or None when it reports no failure."""
    # The wire name is isError; the mcp 2.x SDK's CallToolResult spells the attribute is_error.
    if found("is_error") is True or found("isError") is True:
        structured = found("structured_content")
        return _structured_outcome(structured if structured is not None else found("structuredContent"))
    if tool_failure:
        return _code_of(found("code")) or c.OUTCOME_TOOL_ERROR
    if _failed(found("success")) or _failed_status(found("status")):
        return _envelope_code(found)
    return None


_RULE_KEYS = {"status_code", c.ENVELOPE_OK, c.ENVELOPE_REJECTED, "isError", "success", "status", "errors", "jsonrpc"}
"""Every key whose presence can make a mapping's verdict anything but plain ``OK``: the status
rule's and each key :func:`_mapping_outcome` tests before it reads any other (the others, such as
``error`` or ``structuredContent``, are read only once one of these matched). A set, not a
frozenset: ``dict.keys() & set`` walks the smaller side."""
_OK_ONLY = {c.ENVELOPE_OK}


def builtin_result_class(result: Any) -> ResultClass:
    """The built-in rules' verdict on ``result`` (registered shapes not consulted)."""
    if type(result) is dict:
        # The common result, decided from its keys alone when none of the rules can apply: no
        # rule key at all, or only ``ok`` and it is not False (a success envelope). Any other
        # dict, and every other mapping, meets every rule below.
        present = result.keys() & _RULE_KEYS
        if not present or (present == _OK_ONLY and result[c.ENVELOPE_OK] is not False):
            return OK
    elif result is None or isinstance(result, _SCALARS):
        return OK
    elif not isinstance(result, Mapping):
        return _object_class(result)
    status = _status_of(result.get("status_code"))
    if status is not None and not 200 <= status < 300:
        return ResultClass(c.TRANSPORT_ERROR, _STATUS_OUTCOMES.get(status, c.OUTCOME_ERROR), status)
    outcome = _mapping_outcome(result)
    if outcome is not None:
        return ResultClass(c.TRANSPORT_OK, outcome, status)
    return OK if status is None else ResultClass(c.TRANSPORT_OK, c.OUTCOME_OK, status)
