"""End to end on loopback: crews write traces, `outcome-telemetry watch` follows them, a real
Prometheus (Debian's) scrapes the watchers with the shipped rules and pages.

Two watchers run side by side, one on a legacy crew's trace folder and one on a guarded crew's;
both crews are started after the watchers, so the watchers see the files appear and grow. The
legacy watcher must drive ToolForensicFinding to firing for lost updates and for constraint loss,
and the guarded one must raise nothing. Every process is stopped in ``finally``; every wait has a
deadline.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from telemetry import conventions as c

import shipped
from test_alerting_e2e import api, free_port, panel_results, stop

DEADLINE = 120.0
PASS = 1.0
"""Seconds between a watcher's passes, and its settle time. Each pass runs every question, so a
shorter one costs the watchers CPU for every second of the test."""
STEP = 0.25
"""Seconds between Prometheus' scrapes, between its rule evaluations, and between our polls:
cheap, and each one shortens the wait for a page (or for its absence)."""
GUARDED_MARGIN = 2 * PASS + 2.0
"""Seconds after the guarded watcher has read every line by which any finding of it is counted:
after the settle time and the next pass, and 2 s more for a slow pass. A scrape of the watcher
taken after that, then an evaluation of the rules, would page for it."""


def _lines_read(port: int) -> float | None:
    """What a watcher's own /metrics says it has read (None while it does not answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return None
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == c.METRIC_WATCH_LINES_READ_TOTAL:
                return float(sample.value)
    return None


def _lines_in(folder: Path) -> int:
    """Complete lines in the trace files under ``folder``."""
    return sum(path.read_bytes().count(b"\n") for path in folder.rglob("*.jsonl"))


@contextmanager
def process(args: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("w") as sink:
        proc = subprocess.Popen(args, stdout=sink, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        stop(proc)


def watch(folder: Path, port: int, log: Path) -> list[str]:
    folder.mkdir(parents=True)
    return [sys.executable, "-m", "telemetry.cli", "watch", str(folder), "--metrics-port", str(port),
            "--interval", str(PASS), "--settle", str(PASS)]


@pytest.mark.slow
def test_watch_pages_for_a_legacy_crew_and_not_for_a_guarded_one(prometheus_binary: str, tmp_path: Path) -> None:
    """Lost updates and constraint loss fire ToolForensicFinding (critical) for the legacy crew's
    watcher within the deadline; the guarded crew's watcher, having read every span its finished
    crew wrote, fires nothing;
    the watch panels of the dashboard return data."""
    ports = {"legacy": free_port(), "guarded": free_port()}
    prom_port = free_port()
    config = {
        "global": {"scrape_interval": f"{STEP * 1000:.0f}ms", "evaluation_interval": f"{STEP * 1000:.0f}ms"},
        "rule_files": [str(path) for path in shipped.rule_files()],
        "scrape_configs": [{"job_name": mode, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
                           for mode, port in ports.items()],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    seen: list[dict[str, Any]] = []
    with ExitStack() as stack:
        for mode, port in ports.items():
            stack.enter_context(process(watch(tmp_path / mode / "traces", port, tmp_path / f"{mode}.log"),
                                        tmp_path / f"watch-{mode}.log"))
        stack.enter_context(process([
            prometheus_binary, f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{prom_port}",
            "--log.level=warn"], tmp_path / "prometheus.log"))
        base = f"http://127.0.0.1:{prom_port}"
        crews = {mode: stack.enter_context(process([sys.executable, "-m", "telemetry.cli", "demo", "--mode", mode,
                                                    "--out", str(tmp_path / mode), "--no-alerts"],
                                                   tmp_path / f"crew-{mode}.log"))
                 for mode in ports}
        expected = {("legacy", "lost_updates"), ("legacy", "constraint_loss_by_hop")}
        deadline = time.monotonic() + DEADLINE
        guarded_read_at = None  # wall clock, as Prometheus' timestamps are
        late_scrape_seen = None
        while True:
            fetched = time.monotonic()
            try:
                alerts = api(base, "/api/v1/alerts")["alerts"]
                scraped = api(base, "/api/v1/query", query=f'timestamp({c.PROMETHEUS_UP}{{job="guarded"}} == 1)')["result"]
            except OSError:
                alerts, scraped = [], []
            seen += [a for a in alerts if a["labels"]["alertname"] == c.ALERT_FORENSIC_FINDING]
            firing = {(a["labels"]["job"], a["labels"][c.LABEL_QUESTION]) for a in seen if a["state"] == "firing"}
            if guarded_read_at is None and crews["guarded"].poll() == 0:
                read = _lines_read(ports["guarded"])
                if read is not None and read >= _lines_in(tmp_path / "guarded" / "traces"):
                    guarded_read_at = time.time()
            # The guarded watcher has read every line of its finished crew: once Prometheus has
            # scraped it successfully GUARDED_MARGIN after that, and evaluated the rules since
            # (every STEP), a finding of it would be on the alerts page.
            if (late_scrape_seen is None and guarded_read_at is not None and scraped
                    and float(scraped[0]["value"][1]) >= guarded_read_at + GUARDED_MARGIN):
                late_scrape_seen = time.monotonic()
            if expected <= firing and late_scrape_seen is not None and fetched > late_scrape_seen + 4 * STEP:
                break
            if time.monotonic() > deadline:
                logs = "\n".join(f"{p.name}: {p.read_text()[-2000:]}" for p in sorted(tmp_path.glob("*.log")))
                pytest.fail(f"after {DEADLINE:.0f} s: firing {sorted(firing)}, guarded watcher read all at "
                            f"{guarded_read_at}, last scraped {scraped}\n{logs}")
            time.sleep(STEP)
        severities = {a["labels"][c.LABEL_SEVERITY] for a in seen
                      if a["labels"][c.LABEL_QUESTION] in ("lost_updates", "constraint_loss_by_hop")}
        assert severities == {c.SEVERITY_CRITICAL}
        assert not [a for a in seen if a["labels"]["job"] == "guarded"], "the guarded crew paged"
        empty = [query for query, n in panel_results(base, watch=True).items() if not n]
        assert not empty, f"watch panels with no data: {empty}"
