"""Which shipped alerts would fire for a finished run, decided by Prometheus' own rule engine.

A run (a crew demo, a test, a batch job) ends with counters in a prometheus-client registry.
:func:`would_fire` replays those final values as a scrape history in a temporary
``promtool test rules`` file and reports the alerts promtool says are firing at the end. The
alert logic lives only in the rules file; nothing here re-implements it.

The replay shape (see docs/alerts.md, "Which alerts would fire"): the target is up throughout;
every series sits at 0 for :data:`QUIET_MINUTES`, then rises at a steady rate to its final
value over the last ``minutes`` minutes, and the alerts are evaluated at that last sample. It
answers "had this run's traffic happened in the last ``minutes`` minutes of an otherwise quiet
hour, what would the alerts page show now?": a burst stays a burst, so spike and count
thresholds see it as one, and an alert whose ``for:`` is longer than the window stays pending.

Example::

    with telemetry.testing.capture() as cap:
        run_the_crew()
    for alert in would_fire(samples_from_registry(cap.registry)):
        print(alert.severity, alert.name, alert.tool, alert.summary)
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

from .. import conventions as c
from ..exceptions import ConfigurationError
from ..runtime._resources import data_dir

__all__ = [
    "DEFAULT_MINUTES",
    "FiringAlert",
    "QUIET_MINUTES",
    "SampleLike",
    "alert_names",
    "parse_promtool_report",
    "replay_document",
    "samples_from_registry",
    "would_fire",
]

DEFAULT_MINUTES = 15
"""The default replay window: long enough for the 1m, 2m, 5m and 10m ``for:`` of the alerts a
run can trip, short enough that a burst still looks like one to the 5m-versus-1h spike test."""
QUIET_MINUTES = 60
"""Zero history before the run, as long as the longest window an alert compares a rate against."""
MIN_MINUTES, MAX_MINUTES = 2, 1440
REPLAY_JOB = "outcome-telemetry-replay"
REPLAY_INSTANCE = "replay"
PROMTOOL_TIMEOUT = 120.0
"""Seconds ``promtool test rules`` may take before :func:`would_fire` gives up."""
SHIPPED_RULES = "outcome-telemetry.rules.yml"

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ALERT_LINE = re.compile(r"""^\s*(?:-\s*)?alert:\s*(["']?)([^"'#\s]+)\1\s*(?:#.*)?$""", re.MULTILINE)


class SampleLike(Protocol):
    """A final value of one series: ``prometheus_client.samples.Sample`` has this shape."""

    @property
    def name(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, str]: ...

    @property
    def value(self) -> float: ...


@dataclass(frozen=True)
class FiringAlert:
    """One alert promtool reported firing: its name, severity, labels and annotations.

    ``labels`` are the alert's labels without ``alertname`` (``tool``, ``outcome``,
    ``severity``...); ``summary`` is the rendered ``summary`` annotation ("" when absent).
    """

    name: str
    severity: str
    labels: Mapping[str, str] = field(hash=False)
    summary: str = ""
    annotations: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)

    @property
    def tool(self) -> str | None:
        """The ``tool`` label, when the alert is per tool."""
        return self.labels.get(c.LABEL_TOOL)


# --- reading a run ---------------------------------------------------------------------------

_OUR_SAMPLE_NAMES = frozenset(c.METRIC_LABELS) | frozenset(
    name + suffix for name in c.METRIC_LABELS if not name.endswith("_total") for suffix in c.HISTOGRAM_SUFFIXES
)


def samples_from_registry(registry: CollectorRegistry) -> list[SampleLike]:
    """The final value of every outcome-telemetry series in ``registry`` (``Runtime.registry``).

    Only the metrics of ``telemetry/conventions.py`` are kept (counters and the duration
    histogram's buckets, sum and count; not ``_created`` timestamps, nor other libraries'
    gauges, which a steady-rise replay would misrepresent).
    """
    return [sample for metric in registry.collect() for sample in metric.samples if sample.name in _OUR_SAMPLE_NAMES]


# --- the replay ------------------------------------------------------------------------------


def alert_names(rules: str | os.PathLike[str]) -> list[str]:
    """The alert names a rule file defines, in file order.

    Read from the ``alert:`` lines, as every rule file writes them, so the package needs no
    YAML parser at run time; promtool itself validates the file when the replay runs.
    """
    path = Path(rules)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read the rules file {str(path)!r}: {exc}") from exc
    names = list(dict.fromkeys(m.group(2) for m in _ALERT_LINE.finditer(text)))
    if not names:
        raise ConfigurationError(f"the rules file {str(path)!r} defines no alerts (no 'alert:' lines); pass a Prometheus rule file")
    return names


def _quote(value: str) -> str:
    """A PromQL double-quoted string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _selector(name: str, labels: Mapping[str, str]) -> str:
    inner = ", ".join(f"{key}={_quote(value)}" for key, value in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def _checked(sample: SampleLike) -> tuple[str, dict[str, str], float]:
    """(name, labels, value) of one sample, refusing what no counter can hold."""
    name, labels, value = sample.name, dict(sample.labels), float(sample.value)
    if not isinstance(name, str) or not _METRIC_NAME.fullmatch(name):
        raise ConfigurationError(f"sample name {name!r} is not a Prometheus metric name")
    for key in labels:
        if not _LABEL_NAME.fullmatch(key) or key.startswith("__"):
            raise ConfigurationError(f"sample {name}: label name {key!r} is not a Prometheus label name")
    if not math.isfinite(value) or value < 0:
        raise ConfigurationError(
            f"sample {_selector(name, labels)} has value {value!r}; only counters and histograms "
            f"(finite, not negative) can be replayed"
        )
    return name, labels, value


def replay_document(
    samples: Iterable[SampleLike],
    *,
    rules: str | os.PathLike[str],
    alerts: Sequence[str],
    minutes: int = DEFAULT_MINUTES,
) -> dict[str, Any]:
    """The promtool rule-test document :func:`would_fire` runs (JSON, which YAML includes).

    Each series is 0 for :data:`QUIET_MINUTES` minutes, then rises by ``final / minutes`` a
    minute to its final value; ``up`` is 1 throughout for every (job, instance) the samples
    carry (``job``/``instance`` are added when absent). One ``alert_rule_test`` per alert at
    the last minute expects nothing, so promtool lists every alert that fires.
    """
    if isinstance(minutes, bool) or not isinstance(minutes, int) or not MIN_MINUTES <= minutes <= MAX_MINUTES:
        raise ConfigurationError(
            f"minutes={minutes!r}: the replay window must be a whole number of minutes from "
            f"{MIN_MINUTES} (the shortest for: needs two evaluations) to {MAX_MINUTES}"
        )
    end = QUIET_MINUTES + minutes
    series: dict[str, str] = {}
    targets: set[tuple[str, str]] = set()
    for sample in samples:
        name, labels, value = _checked(sample)
        labels.setdefault(c.LABEL_JOB, REPLAY_JOB)
        labels.setdefault(c.LABEL_INSTANCE, REPLAY_INSTANCE)
        targets.add((labels[c.LABEL_JOB], labels[c.LABEL_INSTANCE]))
        key = _selector(name, labels)
        if key in series:
            raise ConfigurationError(f"series {key} appears twice in the samples; pass each series' final value once")
        rise = " ".join(repr(value * step / minutes) for step in range(1, minutes + 1))
        series[key] = f"0x{QUIET_MINUTES} {rise}"
    if not targets:
        targets.add((REPLAY_JOB, REPLAY_INSTANCE))
    for job, instance in sorted(targets):
        up = _selector(c.PROMETHEUS_UP, {c.LABEL_JOB: job, c.LABEL_INSTANCE: instance})
        series[up] = f"1x{end}"
    return {
        "rule_files": [str(Path(rules).resolve())],
        "evaluation_interval": "1m",
        "tests": [
            {
                "name": f"replay of a run as its last {minutes} minutes",
                "interval": "1m",
                "input_series": [{"series": key, "values": values} for key, values in series.items()],
                "alert_rule_test": [{"eval_time": f"{end}m", "alertname": alert, "exp_alerts": []} for alert in alerts],
            }
        ],
    }


# --- promtool's report -----------------------------------------------------------------------
# promtool 2.42 prints, on stderr, for each alert_rule_test whose alerts differ from exp:
#     alertname: ToolStaleSends, time: 1h15m,
#         exp:[],
#         got:[
#             0:
#               Labels:{alertname="ToolStaleSends", severity="warning", tool="send_update"}
#               Annotations:{description="...", summary="..."}
#             ]
# Label and annotation values are Go strconv.Quote strings. Every other line is a header we
# know; a line we do not know means promtool failed for another reason, and we say so.

_HEADER = re.compile(r"^alertname: (.+), time: \S+?,?$")
_KNOWN = re.compile(r"^(FAILED:|name: .*|exp:\[\],?|got:\[|\d+:|\]|Unit Testing: .*|SUCCESS)$")
_GO_ESCAPE = re.compile(r"""\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3}|[abfnrtv\\'"])""")
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"'}
_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(, |\})')


def _unquote_go(body: str) -> str:
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] in "xuU":
            return chr(int(code[1:], 16))
        if code[0].isdigit():
            return chr(int(code, 8))
        return _SIMPLE_ESCAPES[code]

    return _GO_ESCAPE.sub(one, body)


def _label_set(text: str, prefix: str) -> dict[str, str] | None:
    """Parse ``Prefix:{a="x", b="y"}`` (the whole line); None when the line is not one."""
    if not text.startswith(prefix + "{"):
        return None
    rest, pos = text[len(prefix) + 1 :], 0
    found: dict[str, str] = {}
    if rest == "}" or rest == "},":
        return found
    while True:
        match = _PAIR.match(rest, pos)
        if match is None:
            return None
        found[match.group(1)] = _unquote_go(match.group(2))
        pos = match.end()
        if match.group(3) == "}":
            return found if rest[pos:] in ("", ",") else None


def parse_promtool_report(output: str) -> list[FiringAlert]:
    """The alerts a failed ``promtool test rules`` run reported getting; raises on anything else."""
    alerts: list[FiringAlert] = []
    current: str | None = None
    labels: dict[str, str] | None = None
    for raw in output.splitlines():
        line = raw.strip()
        if not line:
            continue
        header = _HEADER.match(line)
        if header:
            current, labels = header.group(1), None
            continue
        parsed = _label_set(line, "Labels:")
        if parsed is not None and current is not None:
            labels = parsed
            if parsed.get(c.LABEL_ALERTNAME, current) != current:
                raise ConfigurationError(f"promtool reported a {parsed.get(c.LABEL_ALERTNAME)} alert under {current}: {raw!r}")
            alerts.append(_alert(current, labels, {}))
            continue
        notes = _label_set(line, "Annotations:")
        if notes is not None and labels is not None:
            alerts[-1] = _alert(current or "", labels, notes)
            labels = None
            continue
        if not _KNOWN.match(line):
            raise ConfigurationError(f"promtool did not evaluate the replay; it said:\n{output.strip()}")
    return alerts


def _alert(name: str, labels: dict[str, str], annotations: dict[str, str]) -> FiringAlert:
    own = {k: v for k, v in labels.items() if k != c.LABEL_ALERTNAME}
    return FiringAlert(
        name=name,
        severity=own.get(c.LABEL_SEVERITY, ""),
        labels=MappingProxyType(own),
        summary=annotations.get(c.ANNOTATION_SUMMARY, ""),
        annotations=MappingProxyType(dict(annotations)),
    )


# --- the entry point -------------------------------------------------------------------------


def _promtool_path(promtool: str | os.PathLike[str] | None) -> str:
    if promtool is None:
        found = shutil.which("promtool")
        if found is None:
            raise ConfigurationError(
                "promtool is not on PATH, so the alert rules cannot be evaluated; install Debian's "
                "'prometheus' package (apt-get install prometheus), or give promtool's path "
                "(outcome-telemetry demo --promtool PATH; would_fire(..., promtool=PATH) from Python)"
            )
        return found
    path = Path(promtool)
    if not path.is_file() or not os.access(path, os.X_OK):
        raise ConfigurationError(
            f"promtool {str(path)!r} is not an executable file; give the path of promtool itself "
            f"(Debian's 'prometheus' package installs it as /usr/bin/promtool)"
        )
    return str(path)


def would_fire(
    samples: Iterable[SampleLike],
    *,
    rules: str | os.PathLike[str] | None = None,
    promtool: str | os.PathLike[str] | None = None,
    minutes: int = DEFAULT_MINUTES,
) -> list[FiringAlert]:
    """The alerts that would be firing had the run's traffic happened in the last ``minutes``.

    ``samples`` are the run's final series values (:func:`samples_from_registry`); ``rules``
    defaults to the shipped ``alerts/outcome-telemetry.rules.yml``; ``promtool`` to the one on
    PATH. Returns the firing alerts in rule-file order, then by labels. Raises
    :class:`~telemetry.ConfigurationError` when promtool is missing or cannot evaluate the rules.
    """
    rules_path = Path(rules) if rules is not None else data_dir("alerts") / SHIPPED_RULES
    names = alert_names(rules_path)
    document = replay_document(samples, rules=rules_path, alerts=names, minutes=minutes)
    binary = _promtool_path(promtool)
    with tempfile.TemporaryDirectory(prefix="outcome-telemetry-replay-") as tmp:
        test_file = Path(tmp) / "replay.test.json"
        test_file.write_text(json.dumps(document, indent=1), encoding="utf-8")
        try:
            result = subprocess.run(
                [binary, "test", "rules", str(test_file)], capture_output=True, text=True, timeout=PROMTOOL_TIMEOUT
            )
        except subprocess.TimeoutExpired as exc:
            raise ConfigurationError(f"promtool test rules took over {PROMTOOL_TIMEOUT:.0f} s on the replay of {rules_path}") from exc
    output = result.stdout + "\n" + result.stderr
    if result.returncode == 0 and "SUCCESS" in result.stdout:
        return []
    found = parse_promtool_report(output) if result.returncode == 1 else []
    if not found:
        raise ConfigurationError(f"promtool could not evaluate {rules_path} (exit {result.returncode}):\n{output.strip()}")
    order = {name: i for i, name in enumerate(names)}
    return sorted(found, key=lambda a: (order.get(a.name, len(order)), sorted(a.labels.items())))
