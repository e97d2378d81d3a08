"""The span-format layer's Python side: the options that shape it and the functions DuckDB calls.

``queries/spans.sql`` reads tool calls that other instrumentations wrote (``peer_spans``, then the
``spans`` view). Three things there need Python, and are registered on the connection here:

- ``peer_result(text)``: a recorded result judged by :func:`telemetry.envelopes.read_recorded`
  (the rules a live result meets; the frameworks' wrappers unwrapped), after the shapes given
  with ``--result-shape``; its status is judged, text, absent, too_large or malformed;
- ``peer_arguments(text)``: a hash of the arguments (parsed and dumped again with sorted keys),
  whether they carry an idempotency key, and the kind their parameter names say;
- ``peer_name_kind(name)``: the kind a tool's name says (:mod:`telemetry._tool_kinds`, the audit's rules).

Each runs once per peer tool span while ``peer_spans`` is built (the name and result functions
remembering the verdicts of short texts they have seen: tool names, ``{"ok": true}``), never per
question and never for our own spans. Every text is hostile: parsed with the standard JSON parser
only, bounded in size, and any failure is a status, never an exception into DuckDB.
``--tool-spans`` selectors are inserted into ``tool_span_selection`` with bound values.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import importlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import duckdb

from .. import conventions as c
from .._tool_kinds import is_key_parameter, kind_from_name, kind_from_parameters
from ..envelopes import (
    RECORDED_ABSENT,
    RECORDED_JUDGED,
    RECORDED_TEXT,
    RECORDED_TOO_LARGE,
    read_recorded,
    unwrap_recorded,
)
from ..envelopes._json_text import json_or_text
from ..exceptions import ForensicsInputError

__all__ = [
    "RESULT_STATUSES",
    "PeerOptions",
    "ResultShape",
    "ToolSpanSelector",
    "add_arguments",
    "arguments_facts",
    "arguments_of",
    "install",
    "judge_result",
    "load_result_shape",
    "options_from",
    "parse_tool_spans",
]

ResultShape = Callable[[Any], str | None]
"""``shape(result) -> outcome code | None``: None when the result is not of this shape."""

RESULT_STATUSES = (RECORDED_JUDGED, RECORDED_TEXT, RECORDED_ABSENT, RECORDED_TOO_LARGE, c.RESULT_MALFORMED)
"""The values of ``result_status``: how a peer tool call's recorded result was read."""

_MAX_GLOB = 256
_TOKEN = re.compile(r"[a-z][a-z0-9_]{0,63}")
_MAPPING_KEYS = frozenset({"match", "tool_name", "arguments", "result", "call_id", "run", "agent"})


@dataclass(frozen=True)
class ToolSpanSelector:
    """Which spans no format marks are tool calls (format ``selected``), and where their facts are.

    ``name``: a span-name glob (``*``, ``?``, ``[...]``); ``attribute``/``value``: an attribute
    the span must have (its value matching the glob ``value`` when given). ``tool_name`` is the attribute holding the
    tool's name (default: ``code.function``, else the span name); ``arguments`` one attribute
    holding the arguments, or several whose values make an object (default: the attributes
    logfire's ``logfire.json_schema`` lists); ``result`` the attribute holding the result
    (default: logfire's ``return``).
    """

    name: str | None = None
    attribute: str | None = None
    value: str | None = None
    tool_name: str | None = None
    arguments: tuple[str, ...] = ()
    result: str | None = None
    call_id: str | None = None
    run: str | None = None
    agent: str | None = None

    def matches(self, name: str, attributes: Mapping[str, Any]) -> bool:
        """Whether a span of this name and attributes is selected (the SQL's rule, for tests and docs)."""
        if self.name is not None and not fnmatch.fnmatchcase(name, self.name):
            return False
        if self.attribute is not None:
            if self.attribute not in attributes:
                return False
            value = attributes[self.attribute]
            if self.value is not None and not (isinstance(value, str) and fnmatch.fnmatchcase(value, self.value)):
                return False
        return True


@dataclass
class PeerOptions:
    """What shapes the layer for one load: ``--tool-spans``, ``--result-shape``, ``--show-content``."""

    tool_spans: tuple[ToolSpanSelector, ...] = ()
    result_shapes: tuple[ResultShape, ...] = ()
    show_content: bool = False
    shape_failures: int = 0
    """Times a ``--result-shape`` function raised (the built-in rules then decided)."""


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value or len(value) > _MAX_GLOB:
        raise ForensicsInputError(f"--tool-spans: {where} must be a non-empty string of at most {_MAX_GLOB} characters")
    return value


def _selector(data: Any, where: str) -> ToolSpanSelector:
    if not isinstance(data, Mapping):
        raise ForensicsInputError(f"--tool-spans {where}: each selector is a JSON object like "
                                  '{"match": {"name": "agent.tools.*"}, "tool_name": "code.function"}')
    unknown = sorted(set(data) - _MAPPING_KEYS)
    if unknown:
        raise ForensicsInputError(f"--tool-spans {where}: unknown key(s) {', '.join(map(repr, unknown))}; "
                                  f"the keys are {', '.join(sorted(_MAPPING_KEYS))}")
    match = data.get("match")
    if not isinstance(match, Mapping) or not match or set(match) - {"name", "attribute"}:
        raise ForensicsInputError(f'--tool-spans {where}: "match" must be an object with "name" (a span-name glob) '
                                  'and/or "attribute" ("key" or "key=value")')
    name = _text(match["name"], f'{where} "match.name"') if "name" in match else None
    attribute = value = None
    if "attribute" in match:
        key, sep, wanted = _text(match["attribute"], f'{where} "match.attribute"').partition("=")
        attribute, value = _text(key, f'{where} "match.attribute" key'), (wanted if sep else None)
    arguments = data.get("arguments", ())
    if isinstance(arguments, str):
        arguments = (arguments,)
    if not isinstance(arguments, (list, tuple)):
        raise ForensicsInputError(f'--tool-spans {where}: "arguments" is an attribute name or a list of them')
    keys = {k: (_text(data[k], f'{where} "{k}"') if data.get(k) is not None else None)
            for k in ("tool_name", "result", "call_id", "run", "agent")}
    return ToolSpanSelector(name=name, attribute=attribute, value=value,
                            arguments=tuple(_text(a, f'{where} "arguments"') for a in arguments), **keys)


def parse_tool_spans(text: str) -> tuple[ToolSpanSelector, ...]:
    """``--tool-spans SELECTOR``: a span-name glob (``'agent.tools.*'``), or the path of a JSON file
    holding one selector object or a list of them (see :class:`ToolSpanSelector` and
    docs/peer-traces.md)."""
    path = Path(text)
    if text.lower().endswith(".json") or path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ForensicsInputError(f"--tool-spans {text!r}: cannot read it as a JSON file ({exc})") from None
        items = data if isinstance(data, list) else [data]
        if not items:
            raise ForensicsInputError(f"--tool-spans {text!r}: the file holds no selector")
        return tuple(_selector(item, f"{text!r} #{n}") for n, item in enumerate(items, 1))
    return (ToolSpanSelector(name=_text(text, "the span-name glob")),)


def load_result_shape(spec: str) -> ResultShape:
    """``--result-shape module:function``: import ``function(result) -> outcome code | None``."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ForensicsInputError(f"--result-shape {spec!r}: give it as module:function, e.g. myapp.shapes:func_result")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module: any failure to import it is an input error
        raise ForensicsInputError(f"--result-shape {spec!r}: cannot import {module_name!r} ({type(exc).__name__}: {exc})") from None
    target: Any = module
    for part in attribute.split("."):
        target = getattr(target, part, None)
    if not callable(target):
        raise ForensicsInputError(f"--result-shape {spec!r}: {module_name} has no callable {attribute!r}")
    shape: ResultShape = target
    return shape


def _outcome_code(code: Any) -> str:
    """A shape's answer as an outcome code (an odd one becomes ``tool_error``, never free text)."""
    text = str(code).strip().lower()
    return text if _TOKEN.fullmatch(text) else c.OUTCOME_TOOL_ERROR


def judge_result(text: str | None, options: PeerOptions | None = None) -> tuple[str, str | None]:
    """``(status, outcome)`` of a recorded result; never raises. ``status`` is one of
    :data:`RESULT_STATUSES`; ``outcome`` is None unless the result was judged."""
    if not text:
        return RECORDED_ABSENT, None
    if len(text) > c.MAX_RECORDED_RESULT_CHARS:
        return RECORDED_TOO_LARGE, None
    try:
        shapes = options.result_shapes if options is not None else ()
        if shapes:
            value, wrapper_error = unwrap_recorded(text)
            for shape in shapes:
                try:
                    code = shape(value)
                except Exception:
                    assert options is not None
                    options.shape_failures += 1
                    continue
                if code is not None:
                    outcome = _outcome_code(code)
                    if wrapper_error and outcome == c.OUTCOME_OK:
                        outcome = c.OUTCOME_TOOL_ERROR
                    return RECORDED_JUDGED, outcome
        recorded = read_recorded(text)
        if recorded.status == RECORDED_TEXT and text.lstrip()[:1] in ("{", "["):
            return c.RESULT_MALFORMED, None  # JSON cut short, or not JSON at all
        return recorded.status, (recorded.verdict.outcome if recorded.verdict is not None else None)
    except Exception:  # a wrapper built to break the reader: counted as malformed, never a crash
        return c.RESULT_MALFORMED, None


_CACHED = 8_192
_CACHED_CHARS = 1_024
"""Verdicts are remembered per connection, by text, for texts up to this long (the last
:data:`_CACHED` of them, at most 8 MB): tools return the same result again and again
(``{"ok": true}``) and carry the same few names; a long text is judged every time rather than
kept."""


def _remembered(judge: Callable[[str], str | None]) -> Callable[[str | None], str | None]:
    """``judge`` for SQL (None stays None), remembering the verdicts of the short texts seen last
    (least recently used out first: a run's calls sit together, so its repeats are near)."""
    cached = lru_cache(maxsize=_CACHED)(judge)

    def remembered(text: str | None) -> str | None:
        if text is None:
            return None
        return judge(text) if len(text) > _CACHED_CHARS else cached(text)
    return remembered


def _peer_result(options: PeerOptions | None) -> Callable[[str | None], str | None]:
    """``peer_result`` for SQL: ``status:outcome`` as one text (a struct costs DuckDB several times
    more per row than the verdict itself); ``queries/spans.sql`` splits it."""
    def peer_result(text: str) -> str:
        status, outcome = judge_result(text, options)
        return status if outcome is None else f"{status}:{outcome}"
    return _remembered(peer_result)


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""Arguments dumped again with sorted keys and no spaces: the same arguments, the same text."""


def _canonical_encoder() -> Callable[[Any], str]:
    """:data:`_CANONICAL`'s ``encode``, through the C encoder made once when there is one (the
    encoder object ``encode`` makes on every call cost as much as the dump itself). Parsed JSON
    holds no cycles and nothing JSON cannot encode, so neither check is needed."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return _CANONICAL.encode
    try:
        dump = make(None, None, json.encoder.encode_basestring, None, ":", ",", True, False, True)
    except Exception:  # another Python's C encoder: the plain one
        return _CANONICAL.encode

    def encode(value: Any) -> str:
        return "".join(dump(value, 0))
    return encode


_canonical = _canonical_encoder()
_sha256 = hashlib.sha256


def _text_hash(text: str) -> str:
    """The 16-hex-digit identity of a text (lone surrogates kept, as recorded)."""
    return _sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@lru_cache(maxsize=4096)
def _parameter_facts(names: tuple[Any, ...]) -> tuple[tuple[str, ...], str | None]:
    """(the names that are idempotency keys, the kind the names say): a tool passes the same names
    call after call, so this is worked out once per set of names."""
    text = tuple(n for n in names if isinstance(n, str))
    return tuple(n for n in text if is_key_parameter(n)), kind_from_parameters(text)


def arguments_facts(text: str | None) -> tuple[str, str | None, bool, str | None] | None:
    """``(status, hash, keyed, kind)`` of recorded arguments; never raises.

    The hash is of the arguments parsed and dumped again with sorted keys (a text that is not
    JSON is hashed as it is), so the same arguments recorded in another key order hash alike.
    ``keyed``: an argument named like an idempotency key has a value; ``kind``: what the
    parameter names say (:func:`telemetry._tool_kinds.kind_from_parameters`).
    """
    if text is None:
        return None
    try:
        if len(text) > c.MAX_RECORDED_RESULT_CHARS:  # never parsed; still identified
            return RECORDED_TOO_LARGE, _text_hash(text), False, None
        value = json_or_text(text)
        if type(value) is str and value is not text:  # a JSON text encoded once more
            value = json_or_text(value)
        if type(value) is str:
            status = c.RESULT_MALFORMED if value.lstrip()[:1] in ("{", "[") else RECORDED_TEXT
            canonical = value
        else:
            status = RECORDED_JUDGED
            canonical = _canonical(value)
        digest = _text_hash(canonical)
        if type(value) is not dict:
            return status, digest, False, None
        inner = value.get("kwargs")  # traceloop and langfuse record {"args": [...], "kwargs": {...}}
        scope = {**value, **inner} if type(inner) is dict else value
        keys, kind = _parameter_facts(tuple(scope))
        if not keys:  # the common case: no parameter named like an idempotency key
            return status, digest, False, kind
        return status, digest, any(scope[k] not in (None, "") for k in keys), kind
    except Exception:  # e.g. RecursionError while dumping a hostile nesting: counted, never a crash
        return c.RESULT_MALFORMED, None, False, None


def _peer_arguments(text: str | None) -> str | None:
    """``peer_arguments`` for SQL: ``status:hash:keyed:kind`` as one text (see :func:`_peer_result`);
    NULL stays NULL."""
    facts = arguments_facts(text)
    if facts is None:
        return None
    status, digest, keyed, kind = facts
    return f"{status}:{digest or ''}:{1 if keyed else 0}:{kind or ''}"


def _name_kind(name: str) -> str | None:
    if not name:
        return None
    try:
        return kind_from_name(name[:1000])
    except Exception:
        return None


def _register(con: duckdb.DuckDBPyConnection, name: str, fn: Callable[..., Any], replace: bool) -> None:
    if replace:
        try:
            con.remove_function(name)
        except Exception:  # not registered yet
            pass
    try:
        # null_handling "special": the function sees NULLs and may return one (the string spelling
        # works across DuckDB versions; the stubs only name duckdb.func.SPECIAL)
        con.create_function(name, fn, ["VARCHAR"], "VARCHAR", null_handling="special",  # type: ignore[call-overload]
                            side_effects=False)
    except duckdb.NotImplementedException:  # already registered (by install, before the loader)
        if replace:
            raise


def install(con: duckdb.DuckDBPyConnection, options: PeerOptions | None = None) -> None:
    """Register the layer's functions and selectors on ``con`` (``options``: this load's choices).

    Without ``options``, only what is missing is installed with the defaults
    (:func:`~telemetry.forensics._loading.install_macros` calls it, so every source, ClickHouse and
    ``watch`` included, has the functions); with them, everything is replaced: call it after
    ``install_macros`` (which creates ``tool_span_selection``) and before the spans are loaded.
    """
    replace = options is not None
    chosen = options if options is not None else PeerOptions()
    _register(con, "peer_result", _peer_result(chosen), replace)
    # Arguments are not remembered: nearly every call records arguments of its own, so a memory
    # would cost every call its look-up and eviction to spare the rare exact repeat its work.
    _register(con, "peer_arguments", _peer_arguments, replace)
    _register(con, "peer_name_kind", _remembered(_name_kind), replace)
    if not replace:
        return
    con.execute("DELETE FROM tool_span_selection").fetchall()
    for position, s in enumerate(chosen.tool_spans):
        con.execute("INSERT INTO tool_span_selection VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [position, s.name, s.attribute, s.value, s.tool_name, list(s.arguments), s.result, s.call_id,
                     s.run, s.agent]).fetchall()
    # Constants chosen here (a boolean, a count), never user text. The count lets the SQL leave out
    # the scans a selection needs when there is none.
    con.execute(f"SET VARIABLE show_content = {'true' if chosen.show_content else 'false'}").fetchall()
    con.execute(f"SET VARIABLE tool_span_selectors = {int(len(chosen.tool_spans))}").fetchall()


def _listed(value: object, option: str) -> list[Any]:
    """An option's values as a list (none for None); a value that is neither one of them nor a list
    of them is refused naming the option and the value, instead of failing in ``list()`` or being
    read as none (``False``, ``0``)."""
    if value is None:
        return []
    if isinstance(value, (bytes, bytearray, Mapping)) or not isinstance(value, Iterable):
        raise ForensicsInputError(f"{option} takes one value or a list of them, not {type(value).__name__} "
                                  f"{value!r:.80}")
    return list(value)


def options_from(tool_spans: None | str | ToolSpanSelector | Iterable[str | ToolSpanSelector] = None,
                 result_shapes: None | str | ResultShape | Sequence[str | ResultShape] = None,
                 show_content: bool = False) -> PeerOptions | None:
    """:class:`PeerOptions` from what ``open_traces`` and the CLI take (strings are parsed), or
    None when nothing was chosen. A value of either option that is not one of its kind, or a list
    of them, is refused by name."""
    given = [tool_spans] if isinstance(tool_spans, (str, ToolSpanSelector)) else _listed(tool_spans, "tool_spans")
    for item in given:
        if not isinstance(item, (str, ToolSpanSelector)):
            raise ForensicsInputError(f"tool_spans takes span-name globs, selector files and ToolSpanSelector "
                                      f"objects, not {type(item).__name__} {item!r:.80}")
    given_shapes = ([result_shapes] if isinstance(result_shapes, str) or callable(result_shapes)
                    else _listed(result_shapes, "result_shapes"))
    for shape in given_shapes:
        if not (isinstance(shape, str) or callable(shape)):
            raise ForensicsInputError(f"result_shapes takes module:function names and functions, not "
                                      f"{type(shape).__name__} {shape!r:.80}")
    if tool_spans is None and not given_shapes and not show_content:
        return None
    selectors: list[ToolSpanSelector] = []
    for item in given:
        selectors += parse_tool_spans(item) if isinstance(item, str) else [item]
    shapes = [load_result_shape(shape) if isinstance(shape, str) else shape for shape in given_shapes]
    return PeerOptions(tool_spans=tuple(selectors), result_shapes=tuple(shapes), show_content=bool(show_content))


def add_arguments(parser: argparse.ArgumentParser, *, content: bool = True) -> None:
    """``--tool-spans``, ``--result-shape`` (and ``--show-content`` when ``content``): the options
    ``forensics`` and ``audit --traces`` share; :func:`arguments_of` turns them into keywords."""
    parser.add_argument("--tool-spans", action="append", default=[], metavar="SELECTOR",
                        help="make spans no format marks tool calls: a span-name glob ('agent.tools.*', "
                             "logfire's 'Calling *') or a JSON selector file (docs/peer-traces.md); repeatable")
    parser.add_argument("--result-shape", action="append", default=[], metavar="MODULE:FUNCTION",
                        help="judge recorded results with FUNCTION(result) -> outcome code, or None when the "
                             "result is not its shape, before the built-in rules; repeatable")
    if content:
        parser.add_argument("--show-content", action="store_true",
                            help="let recorded arguments and results (cut to 1,000 characters) into the rows; "
                                 "without it only tool names, outcome codes and hashes are shown")


def arguments_of(args: argparse.Namespace) -> dict[str, Any]:
    """The ``open_traces``/``open_clickhouse`` keywords of :func:`add_arguments`' options."""
    return {"tool_spans": list(getattr(args, "tool_spans", None) or ()) or None,
            "result_shapes": list(getattr(args, "result_shape", None) or ()) or None,
            "show_content": bool(getattr(args, "show_content", False))}
