"""Ground truth: what a crew run injected, and how to score forensics against it.

Each :class:`Incident` is one forced failure (or one refused attempt at it) with the findings it
must produce: for each forensics question, the column values that identify its row and the
row's verdict (a legacy story's harm happened; a guarded story's was prevented). Scoring is
strict both ways: every expected finding must be matched by at least one row with that verdict
(recall), and every row every question returned must be explained by some expected finding
(precision). Background traffic expects nothing, so anything it makes a question report is a
false positive.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import conventions as c


@dataclass(frozen=True)
class Expected:
    """A row ``question`` must return: every ``match`` column equals the given value, and its
    verdict is ``verdict`` (``happened``, ``prevented`` or ``unknown``; None, as in a manifest
    written before verdicts, matches any)."""

    question: str
    match: Mapping[str, Any]
    verdict: str | None = None

    def matches(self, question: str, row: Mapping[str, Any]) -> bool:
        return (question == self.question and (self.verdict is None or row.get("verdict") == self.verdict)
                and all(_same(row.get(k), v) for k, v in self.match.items()))


def _same(found: Any, wanted: Any) -> bool:
    if isinstance(wanted, (list, tuple)):
        return isinstance(found, (list, tuple)) and list(found) == list(wanted)
    return found == wanted or (found is not None and str(found) == str(wanted))


@dataclass
class Incident:
    """One scenario's run in one mode: what it did, what the agents were told, what must be found."""

    scenario: str
    mode: str
    run_id: str
    story: str
    steps: list[str] = field(default_factory=list)
    told: list[str] = field(default_factory=list)
    expected: list[Expected] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    """The outcome codes of the refusal envelopes the agents were handed, in order."""
    facts: dict[str, Any] = field(default_factory=dict)
    """Measured facts of the run (e.g. how many charges the card saw), for tests and the report."""

    def expect(self, question: str, verdict: str, **match: Any) -> None:
        """Expect a row of ``question`` with ``verdict`` whose ``match`` columns have these values."""
        if verdict not in c.VERDICTS:
            raise ValueError(f"verdict {verdict!r} is not one of {', '.join(c.VERDICTS)}")
        self.expected.append(Expected(question, match, verdict))


@dataclass
class Manifest:
    """Everything one crew run injected."""

    seed: int
    incidents: list[Incident] = field(default_factory=list)
    background_runs: list[str] = field(default_factory=list)

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2, default=str))

    @staticmethod
    def read(path: Path) -> Manifest:
        data = json.loads(path.read_text())
        incidents = [
            Incident(**{**i, "expected": [Expected(e["question"], e["match"], e.get("verdict"))
                                          for e in i["expected"]]})
            for i in data["incidents"]
        ]
        return Manifest(seed=data["seed"], incidents=incidents, background_runs=data.get("background_runs", []))

    def expected(self) -> list[tuple[Incident, Expected]]:
        return [(incident, e) for incident in self.incidents for e in incident.expected]


@dataclass
class Score:
    """How forensics did against the manifest."""

    found: list[tuple[str, str, Expected]]
    missed: list[tuple[str, str, Expected]]
    unexplained: list[tuple[str, dict[str, Any]]]

    @property
    def recall(self) -> float:
        total = len(self.found) + len(self.missed)
        return len(self.found) / total if total else 1.0

    @property
    def precision(self) -> float:
        explained = sum(1 for _ in self.found)
        total = explained + len(self.unexplained)
        return explained / total if total else 1.0


def score(manifest: Manifest, findings: Mapping[str, Iterable[Mapping[str, Any]]]) -> Score:
    """Compare every question's rows with the manifest's expected findings."""
    expected = manifest.expected()
    rows = {q: [dict(r) for r in found] for q, found in findings.items()}
    found, missed = [], []
    for incident, e in expected:
        if any(e.matches(e.question, row) for row in rows.get(e.question, [])):
            found.append((incident.scenario, incident.mode, e))
        else:
            missed.append((incident.scenario, incident.mode, e))
    unexplained = [
        (question, row)
        for question, question_rows in rows.items()
        for row in question_rows
        if not any(e.matches(question, row) for _, e in expected)
    ]
    return Score(found, missed, unexplained)
