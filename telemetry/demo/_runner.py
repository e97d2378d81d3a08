"""Run the crew: every chosen scenario in every chosen mode, with the real exporter and metrics.

Each mode gets its own world (its own SQLite file) so the guarded and legacy stories never see
each other's state; every scenario gets its own run id (``gen_ai.conversation.id``) so forensics
groups its spans. ``--agents`` and ``--steps`` add healthy background traffic (agents updating
their own keys), which must produce no finding at all: it is what makes precision measurable,
and how benchmarks get large, realistic trace sets.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from prometheus_client import CollectorRegistry

from ..guards import PostgresStore, SQLiteStore, Store
from ..guards._postgres import schema_dsn
from ..guards._state import ABSENT_VERSION
from ..guards._store import SERVER_SCHEMES
from ..instrument import agent
from ..runtime import Runtime, configure
from ._manifest import Incident, Manifest
from ._scenarios import LEGACY, MODES, SCENARIOS
from ._world import World

__all__ = ["CrewResult", "run_crew", "stderr_progress"]

Progress = Callable[[str], None]


@dataclass
class CrewResult:
    """Where a run's evidence went, and what it injected."""

    out_dir: Path
    traces_dir: Path
    manifest_path: Path
    manifest: Manifest
    seconds: float = 0.0
    runtime: Runtime | None = None
    """The still-running runtime when ``keep_runtime`` was asked for (``--serve``)."""
    registry: CollectorRegistry | None = None
    """The run's metric registry (still readable after the runtime shut down)."""

    @property
    def samples(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Final metric samples of the run: (name, sorted labels) to value."""
        if self.registry is None:
            return {}
        return {(s.name, tuple(sorted(s.labels.items()))): s.value for m in self.registry.collect() for s in m.samples}

    def sample(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels``."""
        return sum(v for (n, ls), v in self.samples.items() if n == name and labels.items() <= dict(ls).items())


def _background(world: World, mode: str, run: str, agents: int, steps: int, say: Progress) -> None:
    """Healthy traffic: each agent updates its own key, reading before every write."""
    report_every = max(1, steps // 10)
    for step in range(steps):
        if step and step % report_every == 0:
            say(f"{mode:8} background: step {step:,} of {steps:,}")
        for i in range(agents):
            name, key = f"worker-{i:03d}", f"notes/worker-{i:03d}"
            with agent(name, run):
                if mode == LEGACY:
                    notes = world.kv.get(key) or []
                    world.kv.set(key, (notes + [f"step {step}"])[-5:])
                else:
                    seen = world.state.read_state(key, name)
                    value = ((seen["value"] or []) + [f"step {step}"])[-5:]
                    world.state.write_state(key, value, seen["version"] if seen["exists"] else ABSENT_VERSION, name)


def run_crew(
    out_dir: Path,
    *,
    scenarios: Iterable[str] | None = None,
    modes: Iterable[str] = MODES,
    seed: int = 7,
    agents: int = 0,
    steps: int = 0,
    metrics_port: int | None = None,
    progress: Progress | None = None,
    keep_runtime: bool = False,
    store: str | None = None,
) -> CrewResult:
    """Run the crew into ``out_dir`` (traces/, one SQLite file per mode, manifest.json).

    The previous run's trace files and databases in ``out_dir`` are replaced. ``store``, a
    ``postgresql://`` URL, runs the guards on that server instead, in one schema per mode
    (``outcome_telemetry_demo_guarded`` and ``_legacy``), each dropped and created afresh.
    """
    if store is not None and not store.startswith(SERVER_SCHEMES):
        raise ValueError(f"--store must be a postgresql:// URL (without it the demo uses SQLite files), got {store!r}")
    chosen = list(scenarios) if scenarios is not None else list(SCENARIOS)
    unknown = [s for s in chosen if s not in SCENARIOS]
    if unknown:
        raise ValueError(f"unknown scenario(s) {unknown}; choose from {', '.join(SCENARIOS)}")
    chosen_modes = list(modes)
    bad_modes = [m for m in chosen_modes if m not in MODES]
    if bad_modes:
        raise ValueError(f"unknown mode(s) {bad_modes}; choose from {', '.join(MODES)}")
    if agents < 0 or steps < 0:
        raise ValueError(f"--agents and --steps must be zero or more, got {agents} and {steps}")
    say = progress or (lambda message: None)
    out_dir.mkdir(parents=True, exist_ok=True)
    traces = out_dir / "traces"
    # A run replaces the previous run in the same folder: run ids repeat for a seed, and old
    # trace files would be counted again.
    for old in traces.glob("*.jsonl") if traces.is_dir() else ():
        old.unlink()
    started = time.perf_counter()
    manifest = Manifest(seed=seed)
    rt = configure(service_name="crew", traces_dir=traces, metrics_port=metrics_port)
    try:
        for mode in chosen_modes:
            world = World(_fresh_store(out_dir, mode, store), random.Random(f"{seed}/{mode}/world"))
            for name in chosen:
                run = f"{mode}-{name}-s{seed}"
                say(f"{mode:8} {name}")
                incident: Incident = SCENARIOS[name](world, mode, random.Random(f"{seed}/{mode}/{name}"), run)
                manifest.incidents.append(incident)
            if agents and steps:
                run = f"{mode}-background-s{seed}"
                say(f"{mode:8} background: {agents} agents x {steps} steps")
                _background(world, mode, run, agents, steps, say)
                manifest.background_runs.append(run)
            world.store.close()
    finally:
        if not keep_runtime:
            rt.shutdown()
    manifest_path = out_dir / "manifest.json"
    manifest.write(manifest_path)
    elapsed = time.perf_counter() - started
    return CrewResult(out_dir, traces, manifest_path, manifest, elapsed, rt if keep_runtime else None, rt.registry)


def _fresh_store(out_dir: Path, mode: str, server: str | None) -> Store:
    """An empty store for one mode: a new SQLite file in ``out_dir``, or a new schema on ``server``."""
    if server is not None:
        return PostgresStore(schema_dsn(server, f"outcome_telemetry_demo_{mode}", reset=True))
    db = out_dir / f"{mode}.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    return SQLiteStore(db)


def stderr_progress(stream: TextIO | None = None) -> Progress:
    """A progress callback printing one line per step to ``stream`` (default: ``sys.stderr`` as it is then)."""
    return lambda message: print(f"  running {message}", file=sys.stderr if stream is None else stream, flush=True)

