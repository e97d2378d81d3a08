"""The process's active runtime, read by every decorated call.

A module attribute rather than a context variable: one runtime serves the whole process (all
threads and tasks), and reading a module global is the cheapest check the unconfigured path can
make. ``telemetry.testing`` swaps it for the duration of a capture and puts the old one back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._setup import Runtime

active: Runtime | None = None
