"""A deterministic crew of scripted agents that forces each failure story, guarded and legacy.

No model is in the loop: each scenario is a script of tool calls against real tools (the
guarded primitives, and "legacy" unguarded versions of the same tools), so a run is replayable
from its seed and the simulator knows exactly what it injected (the manifest). ``make demo``
runs it; the end-to-end tests check that forensics finds exactly what the manifest says.
"""

from ._alerting import samples_from_registry, would_fire
from ._manifest import Expected, Incident, Manifest, score
from ._runner import CrewResult, run_crew
from ._scenarios import SCENARIOS

__all__ = [
    "SCENARIOS",
    "CrewResult",
    "Expected",
    "Incident",
    "Manifest",
    "run_crew",
    "samples_from_registry",
    "score",
    "would_fire",
]
