"""End to end on loopback: an instrumented process, a real Prometheus with the shipped rules, its HTTP API.

The instrumented process (``instrumented_app.py``) uses the real package and serves /metrics on a
free 127.0.0.1 port; Prometheus (Debian's ``prometheus``) scrapes it and evaluates the shipped
rule file, unchanged, every :data:`STEP` seconds. Prometheus applies its scrape targets only about
5 s after it starts, whatever the interval; a short interval keeps the wait after that small.
Both processes are stopped in ``finally``, die with the test process even when it is killed
outright (``children.spawn``), and every wait has a deadline.
"""

from __future__ import annotations

import json
import re
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from telemetry import conventions as c

import children
import shipped

APP = Path(__file__).with_name("instrumented_app.py")
DEADLINE = 90.0
"""Seconds the whole scenario may take before the test fails."""
STEP = 0.25
"""Seconds between Prometheus' scrapes, between its rule evaluations, and between our polls."""
GOOD_TOOLS = {"read_state", "write_state", "charge_card"}
BAD_TOOL = "set_price"
EXPECTED_ALERTS = {
    (c.ALERT_SILENT_FAILURE, BAD_TOOL),
    (c.ALERT_READBACK_MISMATCH, "update_record"),
    (c.ALERT_GUARD_REFUSALS_HIGH, "claim_row"),
    (c.ALERT_STALE_SENDS, "send_update"),
    (c.ALERT_CONSTRAINT_WAIVER_SPIKE, "delegate_task"),
    (c.ALERT_INTENT_BUDGET_BURN_FAST, BAD_TOOL),
    (c.ALERT_MASKED_FAILURES, "peer_refund"),
}
"""(alert, tool) pairs the app's misbehaving tools must drive to pending or firing."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop(proc: subprocess.Popen[Any]) -> None:
    """Stop a child we started: SIGTERM, then SIGKILL after 10 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextmanager
def instrumented_app(traces_dir: Path, port: int) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Start the instrumented process serving /metrics on ``port``; yield it and its host:port
    once /metrics is up."""
    # stderr goes to a file, not a pipe nobody reads (a chatty app would block on a full pipe).
    errors = traces_dir.parent / "instrumented_app.stderr"
    with errors.open("w") as sink:
        proc = children.spawn(
            [sys.executable, str(APP), "--traces-dir", str(traces_dir), "--seconds", str(DEADLINE + 30),
             "--metrics-port", str(port)],
            stdout=subprocess.PIPE,
            stderr=sink,
            text=True,
        )
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready and proc.stdout is not None, "the instrumented app printed nothing within 30 s"
        line = proc.stdout.readline()
        assert line, f"the instrumented app exited: {errors.read_text()}"
        url = urllib.parse.urlsplit(json.loads(line)["metrics_url"])
        yield proc, url.netloc
    finally:
        stop(proc)


@contextmanager
def prometheus(binary: str, workdir: Path, target: str) -> Iterator[str]:
    """Start Prometheus scraping ``target`` with the shipped rules; yield its base URL when ready."""
    port = free_port()
    config = {
        "global": {"scrape_interval": f"{STEP * 1000:.0f}ms", "evaluation_interval": f"{STEP * 1000:.0f}ms"},
        "rule_files": [str(path) for path in shipped.rule_files()],
        "scrape_configs": [{"job_name": "outcome-telemetry", "static_configs": [{"targets": [target]}]}],
    }
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    log = (workdir / "prometheus.log").open("w")
    proc = children.spawn(
        [
            binary,
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--enable-feature=exemplar-storage",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, f"prometheus exited: {(workdir / 'prometheus.log').read_text()}"
            try:
                with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "prometheus was not ready within 30 s"
            time.sleep(0.2)
        yield base
    finally:
        stop(proc)
        log.close()


def api(base: str, path: str, **params: str) -> Any:
    """GET a Prometheus API path; return its `data`, failing on an API error."""
    url = f"{base}{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return body["data"]


def panel_results(base: str, *, watch: bool = False) -> dict[str, int]:
    """Number of series each dashboard panel query returns right now, keyed by panel and query:
    the panels on what ``outcome-telemetry watch`` serves with ``watch``, the others without."""
    counts = {}
    for title, expr in shipped.panel_queries(shipped.dashboard()):
        if any(name in expr for name in c.WATCH_METRIC_LABELS) != watch:
            continue
        counts[f"{title}: {expr}"] = len(api(base, "/api/v1/query", query=shipped.as_promql(expr))["result"])
    return counts


@pytest.mark.slow
def test_shipped_rules_and_dashboard_against_a_real_prometheus(prometheus_binary: str, tmp_path: Path) -> None:
    """Against real scrapes: every panel returns data, the silent-failure alert (and each other alert)
    goes pending/firing for its tool, no alert names an all-good tool, rules evaluate cleanly,
    and counter exemplars carry trace ids found in the exported spans."""
    traces = tmp_path / "traces"
    seen_alerts: list[dict[str, Any]] = []
    # Prometheus first: it applies its targets about 5 s after it starts, and the app's start-up
    # fits in that wait. The first scrapes before the app is up just find the target down.
    port = free_port()
    with prometheus(prometheus_binary, tmp_path, f"127.0.0.1:{port}") as base, instrumented_app(traces, port) as (app, target):
        deadline = time.monotonic() + DEADLINE
        while True:
            alerts = api(base, "/api/v1/alerts")["alerts"]
            seen_alerts.extend(alerts)
            raised = {
                (a["labels"]["alertname"], a["labels"].get(c.LABEL_TOOL))
                for a in seen_alerts
                if a["state"] in ("pending", "firing")
            }
            counts = panel_results(base)
            if EXPECTED_ALERTS <= raised and all(counts.values()):
                break
            if time.monotonic() > deadline:
                empty = [query for query, n in counts.items() if not n]
                pytest.fail(
                    f"after {DEADLINE:.0f} s: alerts never raised: {sorted(EXPECTED_ALERTS - raised)}; "
                    f"panels with no data: {empty}"
                )
            time.sleep(STEP)

        groups = api(base, "/api/v1/rules")["groups"]
        evaluated = [rule for group in groups for rule in group["rules"]]
        assert len(evaluated) == len(shipped.rules())
        unhealthy = [(rule["name"], rule.get("lastError")) for rule in evaluated if rule["health"] != "ok"]
        assert not unhealthy, unhealthy

        now = time.time()
        exemplars = api(
            base,
            "/api/v1/query_exemplars",
            query=f'{c.METRIC_TOOL_CALLS_TOTAL}{{{c.LABEL_TOOL}="{BAD_TOOL}"}}',
            start=str(now - 300),
            end=str(now),
        )
        trace_ids = {e["labels"][c.EXEMPLAR_TRACE_ID] for series in exemplars for e in series["exemplars"]}
        assert trace_ids and all(re.fullmatch(r"[0-9a-f]{32}", t) for t in trace_ids), exemplars

        stop(app)  # SIGTERM: the app shuts its runtime down, flushing every span to its file
        assert app.returncode == 0

    noisy = {(a["labels"]["alertname"], a["labels"].get(c.LABEL_TOOL)) for a in seen_alerts if a["labels"].get(c.LABEL_TOOL) in GOOD_TOOLS}
    assert not noisy, f"alerts raised for all-good tools: {sorted(noisy)}"
    spans_text = "".join(path.read_text() for path in traces.glob("*.jsonl"))
    assert any(t in spans_text for t in trace_ids), "no exemplar trace id is in the exported spans"
