"""Every metric, label, label value, rule and alert name in alerts/ and dashboards/ is in conventions.py."""

from __future__ import annotations

import re
from typing import Any

import pytest

from telemetry import conventions as c
from telemetry.forensics import QUESTION_NAMES

import shipped
from promql_names import extract

ALL_METRIC_LABELS = {**c.METRIC_LABELS, **c.WATCH_METRIC_LABELS}
HISTOGRAMS = {name for name in c.METRIC_LABELS if not name.endswith("_total")} | {c.METRIC_WATCH_PASS_DURATION}
RAW_METRICS = set(ALL_METRIC_LABELS) | {h + s for h in HISTOGRAMS for s in c.HISTOGRAM_SUFFIXES}
TARGET_LABELS = (c.LABEL_JOB, c.LABEL_INSTANCE)
LABEL_VALUES: dict[str, frozenset[str]] = {
    c.LABEL_TRANSPORT: frozenset(c.TRANSPORT_VALUES),
    c.LABEL_READBACK: frozenset(c.READBACK_VALUES),
    c.LABEL_OUTCOME: c.OUTCOMES | {c.OUTCOME_OTHER},
    c.LABEL_REASON: c.REFUSAL_OUTCOMES,
    c.LABEL_QUESTION: frozenset(QUESTION_NAMES),
}
"""Label values a matcher may name; ``tool`` values come from the user (only ``$tool`` is allowed)."""


def allowed_labels(metric: str) -> set[str]:
    """The labels a series of ``metric`` carries: its own, the target's, ``le`` on buckets."""
    if metric in ALL_METRIC_LABELS:
        return set(ALL_METRIC_LABELS[metric]) | set(TARGET_LABELS)
    for histogram in HISTOGRAMS:
        if metric.startswith(histogram) and metric[len(histogram):] in c.HISTOGRAM_SUFFIXES:
            extra = {c.LABEL_LE} if metric.endswith("_bucket") else set()
            return set(ALL_METRIC_LABELS[histogram]) | set(TARGET_LABELS) | extra
    if metric == c.PROMETHEUS_UP:
        return set(TARGET_LABELS)
    return {c.LABEL_TOOL, c.LABEL_OUTCOME}  # recording rules aggregate to these at most


def all_expressions() -> list[tuple[str, str]]:
    """(where, PromQL) for every rule expression, panel target and template variable."""
    found = [(rule.get("alert") or rule["record"], str(rule["expr"])) for rule in shipped.rules()]
    board = shipped.dashboard()
    found += [(f"panel {title!r}", expr) for title, expr in shipped.panel_queries(board)]
    found += [("variable", query) for query in shipped.variable_queries(board)]
    return found


def check_names(where: str, expr: str) -> list[str]:
    """Problems with the names ``expr`` uses; empty when all is in conventions.py."""
    problems = []
    names = extract(expr)
    known_metrics = RAW_METRICS | set(c.RECORDING_RULES) | {c.PROMETHEUS_UP}
    known_labels = {value for key, value in vars(c).items() if key.startswith("LABEL_")}
    for metric in names.metrics - known_metrics:
        problems.append(f"{where}: metric {metric!r} is not defined in telemetry/conventions.py")
    for label in names.labels - known_labels:
        problems.append(f"{where}: label {label!r} is not defined in telemetry/conventions.py")
    for selector in names.selectors:
        for label, op, value in selector.matchers:
            if selector.metric and label not in allowed_labels(selector.metric):
                problems.append(f"{where}: {selector.metric} has no label {label!r}")
            if value.startswith("$"):
                continue
            if label == c.LABEL_TOOL:
                problems.append(f"{where}: tool names are the user's; match them with $tool, not {value!r}")
            values = set(value.split("|")) if op in ("=~", "!~") else {value}
            unknown = values - LABEL_VALUES.get(label, frozenset())
            if unknown:
                problems.append(f"{where}: {label} value(s) {sorted(unknown)} are not in telemetry/conventions.py")
            if label == c.LABEL_OUTCOME and op == "!~" and values != c.NOT_BAD_OUTCOMES:
                problems.append(
                    f"{where}: the bad-outcome exclusion {sorted(values)} differs from "
                    f"conventions.NOT_BAD_OUTCOMES {sorted(c.NOT_BAD_OUTCOMES)}"
                )
    return problems


def test_every_name_in_rules_and_dashboards_is_in_conventions() -> None:
    """No metric, label, label value or rule name in alerts/ or dashboards/ is missing from conventions.py."""
    problems = [p for where, expr in all_expressions() for p in check_names(where, expr)]
    assert not problems, "\n".join(problems)


def test_the_names_check_catches_unknown_names() -> None:
    """The check fails on a made-up metric, a made-up label, a wrong value and a stale exclusion list."""
    assert check_names("x", 'rate(tool_callz_total[5m])')
    assert check_names("x", 'sum by (agent) (rate(tool_calls_total[5m]))')
    assert check_names("x", 'tool_calls_total{outcome="sucess"}')
    assert check_names("x", 'tool_stale_sends_total{outcome="ok"}')
    assert check_names("x", 'tool_calls_total{tool="write_state"}')
    assert check_names("x", 'tool_calls_total{transport="ok", outcome!~"ok|forced"}')
    assert not check_names("x", 'sum by (tool, le) (rate(tool_call_duration_seconds_bucket{tool=~"$tool"}[5m]))')


def test_recording_rules_and_alerts_match_conventions_exactly() -> None:
    """The rule file records exactly conventions.RECORDING_RULES and alerts exactly conventions.ALERTS."""
    records = [rule["record"] for rule in shipped.rules() if "record" in rule]
    alerts = [rule["alert"] for rule in shipped.alert_rules() if rule["alert"] not in c.WATCH_ALERTS]
    assert sorted(records) == sorted(c.RECORDING_RULES) and len(set(records)) == len(records)
    assert sorted(alerts) == sorted(c.ALERTS) and len(set(alerts)) == len(alerts)
    watch = {rule["alert"] for rule in shipped.alert_rules()} - set(c.ALERTS)
    assert watch == set(c.WATCH_ALERTS)


def test_alert_labels_are_convention_names() -> None:
    """Alert labels are only `severity`, with a value defined in conventions.py."""
    for rule in shipped.alert_rules():
        labels: dict[str, Any] = rule["labels"]
        assert set(labels) == {c.LABEL_SEVERITY}, rule["alert"]
        assert labels[c.LABEL_SEVERITY] in (c.SEVERITY_CRITICAL, c.SEVERITY_WARNING), rule["alert"]


@pytest.mark.parametrize(
    ("expr", "metrics", "labels"),
    [
        (
            'sum by (tool, outcome) (rate(tool_calls_total{transport="ok", outcome!~"ok|forced"}[$__rate_interval]))',
            {"tool_calls_total"},
            {"tool", "outcome", "transport"},
        ),
        (
            "tool:intent_error:ratio_rate1h > on () group_left () (14.4 * outcome_telemetry:intent_slo:error_budget)",
            {"tool:intent_error:ratio_rate1h", "outcome_telemetry:intent_slo:error_budget"},
            set(),
        ),
        (
            '# a comment naming not_a_metric{fake="x"}\nmax_over_time(rate(a_total{l="}by(x)"}[5m])[1h:1m] offset 5m)',
            {"a_total"},
            {"l"},
        ),
        (
            'label_replace(up @ end(), "dst", "$1", "src", "(.*)") and ignoring (le) count_values("v", b)',
            {"up", "b"},
            {"dst", "src", "le", "v"},
        ),
        ("label_values(tool_calls_total, tool)", {"tool_calls_total"}, {"tool"}),
        ('{__name__="c_total", job="j"} / 1e3 > Inf', {"c_total"}, {"job"}),
    ],
)
def test_promql_extractor_reads_names_correctly(expr: str, metrics: set[str], labels: set[str]) -> None:
    """The PromQL name extractor skips strings, comments, keywords and functions, and reads labels."""
    names = extract(expr)
    assert names.metrics == metrics and names.labels == labels


def test_promql_extractor_refuses_unknown_functions() -> None:
    """An identifier called like a function that PromQL lacks is an error, not a metric."""
    with pytest.raises(ValueError, match="ratee"):
        extract("ratee(tool_calls_total[5m])")


def test_recording_rule_levels_name_the_labels_they_keep() -> None:
    """Recording rules follow level:metric:operations, the level naming the `by (...)` labels kept."""
    wrong = []
    for rule in shipped.rules():
        name = rule.get("record")
        kept = re.search(r"\bby\s*\(([^)]*)\)", rule.get("expr", "")) if name else None
        if kept is None:  # the SLO constants aggregate nothing
            continue
        level = "_".join(label.strip() for label in kept.group(1).split(","))
        if name.split(":")[0] != level:
            wrong.append(f"{name} keeps ({kept.group(1)}): its level should be {level}")
    assert not wrong, wrong
