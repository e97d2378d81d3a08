"""The shipped alert rules and dashboard, located the way the package locates them.

Every alerting test reads the files through ``telemetry.runtime._resources.data_dir`` so it checks what a
user gets, installed or from a checkout.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from telemetry.runtime._resources import data_dir

RULES_GLOB = "*.rules.yml"
DASHBOARD_NAME = "outcome-telemetry.json"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "alerts.md"


def rule_files() -> list[Path]:
    """The shipped Prometheus rule files."""
    return sorted(data_dir("alerts").glob(RULES_GLOB))


def unit_test_files() -> list[Path]:
    """The shipped promtool unit-test files."""
    return sorted((data_dir("alerts") / "tests").glob("*.yml"))


def rules() -> list[dict[str, Any]]:
    """Every rule (recording and alerting) of every shipped rule file."""
    found: list[dict[str, Any]] = []
    for path in rule_files():
        for group in yaml.safe_load(path.read_text())["groups"]:
            found.extend(group["rules"])
    return found


def alert_rules() -> list[dict[str, Any]]:
    return [rule for rule in rules() if "alert" in rule]


def dashboard_path() -> Path:
    return data_dir("dashboards") / DASHBOARD_NAME


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(dashboard_path().read_text())
    return loaded


def panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, rows' nested panels included, rows themselves excluded."""
    found: list[dict[str, Any]] = []
    for panel in board["panels"]:
        if panel.get("type") == "row":
            found.extend(panel.get("panels", []))
        else:
            found.append(panel)
    return found


def panel_queries(board: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL as written) for every target of every panel."""
    return [(panel["title"], target["expr"]) for panel in panels(board) for target in panel.get("targets", [])]


def variable_queries(board: dict[str, Any]) -> list[str]:
    """The PromQL of every query-type template variable."""
    found = []
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            found.append(query["query"] if isinstance(query, dict) else query)
    return found


def as_promql(expr: str, tool: str = ".*", rate_interval: str = "30s", range_: str = "5m") -> str:
    """Replace the Grafana variables a panel uses, as Grafana would before querying."""
    return (
        expr.replace("$__rate_interval", rate_interval)
        .replace("$__range", range_)
        .replace("$tool", tool)
        .replace("${tool}", tool)
    )
