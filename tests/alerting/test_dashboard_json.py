"""The Grafana dashboard and provisioning files are importable as shipped and show what the issue lists."""

from __future__ import annotations

from typing import Any

import yaml

from telemetry import conventions as c
from telemetry.runtime._resources import data_dir

import shipped
from promql_names import extract

DS_REF = {"type": "prometheus", "uid": "${datasource}"}
MIN_SCHEMA_VERSION = 39
"""Grafana 11.0's schema version; the file uses a newer one (Grafana 12)."""
REQUIRED_PANELS = {
    "Calls by transport and outcome",
    "Silent failures, by tool and outcome",
    "Silent failures by tool",
    "Refusals by reason",
    "Spans dropped, by exporter and reason",
    "Toolkit internal errors, by stage",
    "Read-back match ratio",
    "Guard refusals by reason",
    "Constraint waivers",
    "Stale sends",
    "Idempotent replays",
    "Latency percentiles",
    "Intent SLO burn rate",
    "Masked failures, by tool and outcome",
}


def variables() -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in shipped.dashboard()["templating"]["list"]}


def test_dashboard_is_importable_as_is() -> None:
    """A stable uid, no instance id, a current schema version and no unresolved import inputs."""
    board = shipped.dashboard()
    assert board["uid"] == "outcome-telemetry" and board["id"] is None and board["title"]
    assert board["schemaVersion"] >= MIN_SCHEMA_VERSION
    assert "__inputs" not in board, "an __inputs block makes import ask questions; use the datasource variable"
    assert "${DS_" not in shipped.dashboard_path().read_text()


def test_datasource_and_tool_variables() -> None:
    """A Prometheus datasource variable and a multi-select `tool` variable read from tool_calls_total."""
    found = variables()
    assert found["datasource"]["type"] == "datasource" and found["datasource"]["query"] == "prometheus"
    tool = found["tool"]
    assert tool["type"] == "query" and tool["datasource"] == DS_REF
    assert tool["query"]["query"] == tool["definition"] == f"label_values({c.METRIC_TOOL_CALLS_TOTAL}, {c.LABEL_TOOL})"
    assert tool["multi"] and tool["includeAll"] and tool["allValue"] == ".*"


def test_every_panel_uses_the_datasource_variable() -> None:
    """Panels and their targets query through `${datasource}`, never a hard-coded data source."""
    for panel in shipped.panels(shipped.dashboard()):
        assert panel["datasource"] == DS_REF, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DS_REF, panel["title"]


def test_every_tool_selector_follows_the_tool_variable() -> None:
    """Every series a panel selects is filtered by `tool=~"$tool"` (the SLO constants, the toolkit's
    own health counters and what `outcome-telemetry watch` serves have no tool)."""
    constants = {
        c.RULE_INTENT_SLO_TARGET,
        c.RULE_INTENT_SLO_ERROR_BUDGET,
        c.METRIC_SPANS_DROPPED_TOTAL,
        c.METRIC_INTERNAL_ERRORS_TOTAL,
    }
    for title, expr in shipped.panel_queries(shipped.dashboard()):
        for selector in extract(expr).selectors:
            if selector.metric in constants or any(selector.metric.startswith(m) for m in c.WATCH_METRIC_LABELS):
                continue
            assert (c.LABEL_TOOL, "=~", "$tool") in selector.matchers, f"{title}: {selector.metric} ignores $tool"


def test_required_panels_exist() -> None:
    """The panels the issue lists are all there."""
    titles = {panel["title"] for panel in shipped.panels(shipped.dashboard())}
    assert REQUIRED_PANELS <= titles, REQUIRED_PANELS - titles


def test_counter_panels_have_exemplars_on() -> None:
    """Every target over a raw counter asks for exemplars, so a spike links to its trace."""
    counters = {name for name in c.METRIC_LABELS if name.endswith("_total")}
    checked = 0
    for panel in shipped.panels(shipped.dashboard()):
        for target in panel["targets"]:
            if extract(target["expr"]).metrics & counters and panel["type"] == "timeseries":
                assert target["exemplar"] is True, panel["title"]
                checked += 1
    assert checked >= 6


def test_panels_have_unique_ids_and_do_not_overlap() -> None:
    """Panel ids are unique and grid positions fit 24 columns without overlapping."""
    board = shipped.dashboard()
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        area = {(x, y) for x in range(grid["x"], grid["x"] + grid["w"]) for y in range(grid["y"], grid["y"] + grid["h"])}
        assert not area & cells, f"{panel['title']} overlaps another panel"
        cells |= area


def test_provisioning_files() -> None:
    """The datasource file provisions Prometheus with trace_id exemplar links; the provider loads files."""
    root = data_dir("dashboards") / "provisioning"
    datasources = yaml.safe_load((root / "datasources" / "outcome-telemetry.yml").read_text())
    assert datasources["apiVersion"] == 1
    (prometheus,) = datasources["datasources"]
    assert prometheus["type"] == "prometheus" and prometheus["url"].startswith("http")
    (link,) = prometheus["jsonData"]["exemplarTraceIdDestinations"]
    assert link["name"] == c.EXEMPLAR_TRACE_ID
    providers = yaml.safe_load((root / "dashboards" / "outcome-telemetry.yml").read_text())
    (provider,) = providers["providers"]
    assert providers["apiVersion"] == 1 and provider["type"] == "file" and provider["options"]["path"]
