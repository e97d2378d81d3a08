"""The demo's two tool surfaces, guarded and legacy, for ``outcome-telemetry audit``.

``outcome-telemetry demo`` ends with one audit line comparing them: the guarded tools answer yes
where the legacy ones answer no (and a few honest noes remain on the guarded side too).
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from typing import Any

from ..exceptions import AuditTargetError
from ._world import World

__all__ = ["audit_summary", "guarded_tools", "legacy_tools"]


def guarded_tools(world: World) -> list[Any]:
    """The guarded primitives an agent of the crew calls (guards objects and guarded functions)."""
    return [world.state, world.planner, world.delegations, world.objectives, world.send_customer_message,
            world.charge_card, world.profiles.update_email, world.profiles.get_profile, world.rates.fetch_rates]


def legacy_tools(world: World) -> list[Any]:
    """The legacy counterparts: unversioned get/set, free-text hand-off, unguarded send and charge ..."""
    return [world.kv.get, world.kv.set, world.legacy_delegation.delegate, world.legacy_messaging.send_customer_message,
            world.legacy_payments.charge_card, world.profiles.legacy_update_email, world.reprice_collection,
            world.rates.legacy_fetch_rates]


def audit_summary() -> str:
    """One line: each surface's tools, yes answers of the applicable ones, critical findings."""
    from ..audit import audit_tools

    with tempfile.TemporaryDirectory(prefix="outcome-telemetry-audit-") as tmp:
        world = World(Path(tmp) / "audit.sqlite", random.Random(0), catalog_size=1)
        try:
            parts = []
            for label, tools in (("guarded", guarded_tools(world)), ("legacy", legacy_tools(world))):
                counts = (report := audit_tools(tools, label=label)).counts()
                parts.append(f"{label} {len(report.tools)} tools, {counts['yes']}/{counts['yes'] + counts['no']} yes, "
                             f"{counts['critical']} critical")
        except AuditTargetError as exc:
            return f"audit: skipped ({exc})"
        finally:
            world.store.close()
    return "audit: " + "; ".join(parts) + " (outcome-telemetry audit --help)"
