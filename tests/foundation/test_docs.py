"""What the docs list is what the code has: alerts, questions, options, outcomes, metrics, benchmark figures.

Each doc below lists names the code defines. Rather than counting them in prose (a count drifts
the day a name is added), the docs list them in tables, and these tests read each table and
compare it with the code, so adding an alert, a question or an option without its row fails here.
The runbook sections of docs/alerts.md are checked by tests/alerting/test_alerts_promtool.py.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

import telemetry
from telemetry import conventions as c
from telemetry.forensics._questions import QUESTION_NAMES
from telemetry.instrument import ToolOptions

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


def tables(text: str) -> list[list[list[str]]]:
    """Every Markdown table in ``text``: a list of rows (the header first), each a list of cells."""
    found: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in text.splitlines() + [""]:
        stripped = line.strip()
        if stripped.startswith("|") and stripped.endswith("|"):
            if not re.fullmatch(r"\|[\s:|-]+\|", stripped):
                current.append([cell.strip() for cell in re.split(r"(?<!\\)\|", stripped.strip("|"))])
        elif current:
            found.append(current)
            current = []
    return found


def table(text: str, *header: str) -> list[list[str]]:
    """The rows (header left out) of the one table whose header starts with ``header``."""
    matching = [t for t in tables(text) if tuple(cell.lower() for cell in t[0][: len(header)]) == header]
    assert len(matching) == 1, f"expected one table headed {header}, found {len(matching)}"
    return matching[0][1:]


def names(cell: str) -> list[str]:
    """The backticked names of a cell (``a``, ``b``), or the cell itself when it has none."""
    quoted = re.findall(r"`([^`]+)`", cell)
    return quoted or [cell.strip()]


def section(text: str, heading: str) -> str:
    """The text under ``heading`` (a whole heading line) up to the next heading of its level or above."""
    level = len(heading) - len(heading.lstrip("#"))
    found = re.search(rf"^{re.escape(heading)}\n(.*?)(?=^#{{1,{level}}} |\Z)", text, re.S | re.M)
    assert found, f"no {heading!r} section"
    return found.group(1)


def read(name: str) -> str:
    return (REPO / name).read_text(encoding="utf-8")


# --- docs/alerts.md ------------------------------------------------------------------------------


def shipped_alerts() -> dict[str, tuple[set[str], set[str]]]:
    """Every alert of the shipped rule files: name -> (its ``for:`` values, its severities)."""
    found: dict[str, tuple[set[str], set[str]]] = {}
    for path in sorted((REPO / "alerts").glob("*.rules.yml")):
        for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    durations, severities = found.setdefault(rule["alert"], (set(), set()))
                    durations.add(str(rule.get("for", "none")))
                    severities.add(rule["labels"][c.LABEL_SEVERITY])
    return found


def test_the_alert_tables_list_every_shipped_alert_with_its_for_and_severity() -> None:
    """docs/alerts.md's thresholds table and its at-a-glance table each have one row per alert of
    the rule file, and say the ``for:`` and severity the rule file says."""
    shipped = shipped_alerts()
    assert shipped, "no alert in alerts/*.rules.yml"
    text = read("docs/alerts.md")
    thresholds = table(text, "alert", "fires when", "for", "severity")
    glance = table(text, "alert", "severity", "what it means", "do first")
    for rows in (thresholds, glance):
        listed = [names(row[0])[0] for row in rows]
        assert sorted(listed) == sorted(shipped), "docs/alerts.md lists other alerts than the rule file"
    for name, _fires_when, duration, severity in thresholds:
        durations, severities = shipped[names(name)[0]]
        assert {duration} == durations, f"{name}: docs say for {duration}, the rules {sorted(durations)}"
        assert severities <= set(re.findall(r"\w+", severity)), f"{name}: docs say {severity!r}, the rules {severities}"
    for name, severity, *_ in glance:
        assert shipped[names(name)[0]][1] <= set(re.findall(r"\w+", severity)), f"{name}: severity {severity!r}"


# --- docs/forensics.md ---------------------------------------------------------------------------


def test_the_question_table_lists_every_question() -> None:
    """docs/forensics.md's table of questions has one row per registered question."""
    rows = table(read("docs/forensics.md"), "question", "finds")
    listed = [names(row[0])[0] for row in rows]
    assert sorted(listed) == sorted(QUESTION_NAMES)


def test_every_question_has_its_sql_file_and_no_sql_file_is_unregistered() -> None:
    """queries/ holds one SQL file per question and the schema, nothing else."""
    files = {path.stem for path in (REPO / "queries").glob("*.sql")}
    assert files == set(QUESTION_NAMES) | {"spans"}


# --- docs/configuration.md -----------------------------------------------------------------------


def test_the_configure_table_lists_every_argument() -> None:
    """Every parameter of ``configure()`` has a row, and every row names a parameter."""
    rows = table(read("docs/configuration.md"), "argument", "default", "meaning")
    listed = [name for row in rows for name in names(row[0])]
    assert sorted(listed) == sorted(inspect.signature(telemetry.configure).parameters)


def test_the_instrument_tool_table_lists_every_option() -> None:
    """Every option of ``@instrument_tool`` (a ``ToolOptions`` field) has a row."""
    rows = table(read("docs/configuration.md"), "parameter", "meaning")
    listed = [name for row in rows for name in names(row[0])]
    assert sorted(listed) == sorted(f.name for f in dataclasses.fields(ToolOptions))


def test_the_outcome_codes_are_the_vocabulary() -> None:
    """The outcome list names every code of ``conventions.OUTCOMES``, and only those."""
    text = section(read("docs/configuration.md"), "## Span attributes")
    found = re.search(r"^Outcome codes: (.*?)\n\n", text, re.S | re.M)
    assert found, "no 'Outcome codes:' paragraph"
    # The codes are the backticked words outside parentheses (which explain them).
    listed = set(re.findall(r"`([a-z_]+)`", re.sub(r"\([^)]*\)", "", found.group(1)))) - {"outcomes="}
    assert listed == set(c.OUTCOMES)


def test_the_readback_values_are_the_vocabulary() -> None:
    """The span attribute table gives ``tool.readback`` every value of ``READBACK_VALUES``."""
    rows = table(read("docs/configuration.md"), "attribute", "value")
    (row,) = [row for row in rows if names(row[0]) == [c.TOOL_READBACK]]
    assert set(names(row[1])) == set(c.READBACK_VALUES)


def test_the_metric_table_lists_every_metric_with_its_labels() -> None:
    """Each metric of ``conventions.METRIC_LABELS`` has a row naming its labels in order."""
    rows = table(read("docs/configuration.md"), "metric", "labels", "what it counts")
    listed = {names(row[0])[0]: row[1] for row in rows}
    assert sorted(listed) == sorted(c.METRIC_LABELS)
    for metric, labels in c.METRIC_LABELS.items():
        # A label's own values may follow it in parentheses: `exporter` (`file`, ...).
        documented = [name for name in names(re.sub(r"\([^)]*\)", "", listed[metric]))]
        assert documented == list(labels), f"{metric}: docs say {documented}, the code {list(labels)}"


# --- README.md and docs/benchmarks.md ------------------------------------------------------------


def benchmark_runner() -> ModuleType:
    """benchmarks/run.py, which writes docs/benchmarks.md (loaded from its file: not a package)."""
    spec = importlib.util.spec_from_file_location("benchmarks_run", REPO / "benchmarks" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_the_readme_keeps_its_two_commands() -> None:
    readme = read("README.md")
    assert "make demo" in readme and "make test" in readme


def test_docs_benchmarks_has_one_generated_block_of_known_rows() -> None:
    """The block run.py replaces is there once, and its rows are the rows run.py writes."""
    run = benchmark_runner()
    text = read("docs/benchmarks.md")
    assert text.count(run.BEGIN) == 1 and text.count(run.END) == 1
    rows = [cells for cells in run.table_rows(run.generated_block(text)) if len(cells) == 5][1:]
    assert rows, "the generated block has no table"
    known = {(row.benchmark, row.measure) for row in run.ROWS}
    assert {(cells[0], cells[1]) for cells in rows} <= known


def test_every_figure_in_the_readme_benchmark_table_is_the_generated_one() -> None:
    """Each row of the README's benchmark table (measure, figure, target) is a row of
    docs/benchmarks.md's generated block, so the front page cannot drift from the last run."""
    run = benchmark_runner()
    block = run.generated_block(read("docs/benchmarks.md"))
    generated = {cells[1]: (cells[2], cells[3]) for cells in run.table_rows(block) if len(cells) == 5}
    rows = run.readme_rows(read("README.md"))
    assert rows, "the README has no benchmark table"
    for measure, figure, target in rows:
        assert measure in generated, f"README row {measure!r} is not a measure of docs/benchmarks.md"
        assert (figure, target) == generated[measure], (
            f"README says {figure} ({target}) for {measure!r}; docs/benchmarks.md says {generated[measure]}"
        )
    assert run.stale_readme_rows(read("README.md"), block) == []


@pytest.mark.parametrize("figures", [{"cpu_ratio_both_exporting": 1.048}, {}])
def test_a_generated_row_shows_its_figure_or_says_it_was_not_measured(figures: dict[str, float]) -> None:
    """run.py formats a ratio as the README shows it, and a missing figure as not measured."""
    run = benchmark_runner()
    row = next(r for r in run.ROWS if r.benchmark == "decorator")
    cells = row.cells(figures)
    assert cells[2] == ("1.05x" if figures else "not measured")
    assert cells[3] == "≤ 1.10x" and cells[4] == ("yes" if figures else "")


_MODULE_PATH = re.compile(r"`((?:telemetry/)?[a-z_]+(?:/[a-z_]+)*/_?[a-z_]+\.py)`")
"""A module named by its path in backticks: ``guards/_store.py`` or ``telemetry/forensics/_dedup.py``."""


def test_every_module_a_doc_names_by_its_path_exists() -> None:
    """A module moved or renamed (issue 27 moved 80 of them to underscored names) leaves no doc
    pointing at where it was: every ``pkg/module.py`` a doc names in backticks is a file, under
    ``telemetry/`` when the path does not start elsewhere."""
    named = 0
    stale = []
    for doc in sorted([*DOCS.glob("*.md"), REPO / "README.md", REPO / "CONTRIBUTING.md"]):
        for path in _MODULE_PATH.findall(doc.read_text(encoding="utf-8")):
            named += 1
            where = [REPO / path, REPO / "telemetry" / path]
            if not any(p.is_file() for p in where):
                stale.append(f"{doc.name}: {path}")
    assert named > 20 and not stale, stale
