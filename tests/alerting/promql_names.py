"""Pull the metric names, label names and label matchers out of a PromQL expression.

The names test needs every name an alert rule or a dashboard panel uses, so it can check each one
against ``telemetry/conventions.py``. A regex over the raw text would take a label name inside a
string, a duration or a function for a metric; this tokenises PromQL (strings, comments,
durations, Grafana ``$variables``) and walks the tokens with enough grammar to tell a metric from
a function, a keyword or a label. An identifier followed by ``(`` that is not a known function is
an error, so a typo cannot slip through as a "metric".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

AGGREGATORS = frozenset(
    "sum min max avg group stddev stdvar count count_values bottomk topk quantile".split()
)
FUNCTIONS = frozenset(
    """abs absent absent_over_time ceil changes clamp clamp_max clamp_min day_of_month day_of_week
    day_of_year days_in_month delta deriv exp floor histogram_count histogram_fraction
    histogram_quantile histogram_sum holt_winters hour idelta increase irate label_join
    label_replace ln log2 log10 minute month predict_linear rate resets round scalar sgn sort
    sort_desc sqrt time timestamp vector year avg_over_time min_over_time max_over_time
    sum_over_time count_over_time quantile_over_time stddev_over_time stdvar_over_time
    last_over_time present_over_time acos acosh asin asinh atan atanh cos cosh sin sinh tan tanh
    deg pi rad start end label_values query_result""".split()
)
"""PromQL functions of Prometheus 2.42, plus Grafana's template-query functions."""
LABEL_LIST_KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
OPERATOR_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "atan2"})
NUMBER_WORDS = frozenset({"inf", "nan"})
MATCH_OPS = frozenset({"=", "!=", "=~", "!~"})

_TOKEN = re.compile(
    r"""
      (?P<space>\s+)
    | (?P<comment>\#[^\n]*)
    | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
    | (?P<variable>\$\{[^}]+\}|\$[A-Za-z_][A-Za-z0-9_]*|\[\[[^\]]+\]\])
    | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?:(?:ms|[smhdwy])(?:\d+(?:ms|[smhdwy]))*)?)
    | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
    | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=,@])
    | (?P<open>[({\[])
    | (?P<close>[)}\]])
    """,
    re.VERBOSE,
)


@dataclass
class Selector:
    """One vector selector: its metric name (None for ``{__name__=...}``-less forms) and matchers."""

    metric: str | None
    matchers: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass
class Names:
    """Everything an expression names."""

    metrics: set[str] = field(default_factory=set)
    labels: set[str] = field(default_factory=set)
    selectors: list[Selector] = field(default_factory=list)


def tokenize(expr: str) -> list[tuple[str, str]]:
    """Split ``expr`` into (kind, text) tokens, dropping whitespace and comments."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(expr):
        match = _TOKEN.match(expr, pos)
        if match is None:
            raise ValueError(f"cannot tokenise PromQL at {expr[pos:pos + 20]!r} in {expr!r}")
        kind = match.lastgroup or ""
        if kind not in ("space", "comment"):
            tokens.append((kind, match.group()))
        pos = match.end()
    return tokens


def _unquote(text: str) -> str:
    if text.startswith("`"):
        return text[1:-1]
    return bytes(text[1:-1], "utf-8").decode("unicode_escape")


def _call_args(tokens: list[tuple[str, str]], open_index: int) -> tuple[list[list[tuple[str, str]]], int]:
    """Split the tokens of a call whose ``(`` is at ``open_index`` into its top-level arguments."""
    args: list[list[tuple[str, str]]] = [[]]
    depth = 0
    index = open_index
    while index < len(tokens):
        kind, text = tokens[index]
        if kind == "open":
            depth += 1
            if depth == 1:
                index += 1
                continue
        elif kind == "close":
            depth -= 1
            if depth == 0:
                return args, index
        elif depth == 1 and text == ",":
            args.append([])
            index += 1
            continue
        args[-1].append(tokens[index])
        index += 1
    raise ValueError("unbalanced parentheses")


def extract(expr: str) -> Names:
    """Return the metrics, labels and selectors ``expr`` uses; raise ValueError on nonsense."""
    names = Names()
    _walk(tokenize(expr), names)
    return names


def _walk(tokens: list[tuple[str, str]], names: Names) -> None:
    index = 0
    while index < len(tokens):
        kind, text = tokens[index]
        following = tokens[index + 1] if index + 1 < len(tokens) else ("", "")
        if kind == "open" and text == "[":
            # A range or subquery: durations and Grafana variables only, nothing to name.
            while tokens[index] != ("close", "]"):
                index += 1
        elif kind == "open" and text == "{":
            index = _selector(tokens, index, None, names)
        elif kind == "ident":
            lowered = text.lower()
            if lowered in LABEL_LIST_KEYWORDS:
                if following == ("open", "("):
                    args, end = _call_args(tokens, index + 1)
                    for arg in args:
                        for arg_kind, label in arg:
                            if arg_kind != "ident":
                                raise ValueError(f"{text}(...) holds {label!r}, not a label name")
                            names.labels.add(label)
                    index = end
            elif lowered in AGGREGATORS:
                # `agg (args) by (labels)` or `agg by (labels) (args)`: read the labels first.
                call_at = index + 1
                if tokens[call_at][0] == "ident" and tokens[call_at][1].lower() in LABEL_LIST_KEYWORDS:
                    args, end = _call_args(tokens, call_at + 1)
                    names.labels.update(label for arg in args for _, label in arg)
                    call_at = end + 1
                index = _function(tokens, call_at - 1, lowered, names)
                continue
            elif lowered in OPERATOR_KEYWORDS or lowered in NUMBER_WORDS:
                pass
            elif following == ("open", "("):
                if text not in FUNCTIONS:
                    raise ValueError(f"unknown PromQL function {text!r}")
                index = _function(tokens, index, text, names)
                continue
            else:
                if following == ("open", "{"):
                    index = _selector(tokens, index + 1, text, names)
                else:
                    names.selectors.append(Selector(text))
                names.metrics.add(text)
        index += 1


def _function(tokens: list[tuple[str, str]], index: int, name: str, names: Names) -> int:
    """Walk a call's arguments, taking label names from the string arguments that hold them."""
    args, end = _call_args(tokens, index + 1)
    string_labels = {"label_replace": (1, 3), "label_join": (1,) + tuple(range(3, len(args)))}
    for position, arg in enumerate(args):
        if position in string_labels.get(name, ()):
            (kind, text), = arg
            if kind != "string":
                raise ValueError(f"{name}() argument {position + 1} must be a label name string")
            names.labels.add(_unquote(text))
        elif name == "count_values" and position == 0:
            names.labels.add(_unquote(arg[0][1]))
        elif name == "label_values" and position == len(args) - 1 and len(args) == 2:
            names.labels.add(arg[0][1])
        elif name == "label_values" and len(args) == 1:
            names.labels.add(arg[0][1])
        else:
            _walk(arg, names)
    return end + 1


def _selector(tokens: list[tuple[str, str]], index: int, metric: str | None, names: Names) -> int:
    """Read the matchers of ``{...}`` starting at ``index``; return the index of ``}``."""
    selector = Selector(metric)
    index += 1
    while tokens[index] != ("close", "}"):
        kind, text = tokens[index]
        if text == ",":
            index += 1
            continue
        if kind != "ident" or tokens[index + 1][1] not in MATCH_OPS:
            raise ValueError(f"bad label matcher near {text!r}")
        op = tokens[index + 1][1]
        value_kind, value = tokens[index + 2]
        if value_kind != "string":
            raise ValueError(f"label {text!r} must be matched against a string, not {value!r}")
        value = _unquote(value)
        if text == "__name__":
            if op != "=":
                raise ValueError(f"__name__{op}{value!r} matches metric names by pattern; name them")
            selector.metric = value
            names.metrics.add(value)
        else:
            names.labels.add(text)
            selector.matchers.append((text, op, value))
        index += 3
    names.selectors.append(selector)
    return index
