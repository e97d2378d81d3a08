"""Fixtures for the alerting tests: the external Prometheus tools, skipped or required.

On a user's machine a missing ``promtool`` or ``prometheus`` skips the tests that need it; with
``CI=true`` (as ``.ci/run`` sets) a missing tool fails them, so CI can never pass by skipping.
"""

from __future__ import annotations

import os
import shutil

import pytest


def require_tool(name: str) -> str:
    """Return the path of ``name`` on PATH; skip without it, fail without it when CI=true."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is required when CI=true but is not on PATH; install Debian's prometheus package")
        pytest.skip(f"{name} is not installed (Debian: apt-get install prometheus)")
    return path


@pytest.fixture(scope="session")
def promtool() -> str:
    """Path of ``promtool``."""
    return require_tool("promtool")


@pytest.fixture(scope="session")
def prometheus_binary() -> str:
    """Path of the ``prometheus`` server."""
    return require_tool("prometheus")
