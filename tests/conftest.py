"""Shared test helpers: the four function kinds, and the CI rule for external tools."""

from __future__ import annotations

import os
import shutil

import pytest


def require_tool(name: str) -> str:
    """Return the path of an external tool; skip without it, except in CI where it must exist."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is required in CI (CI=true) but is not on PATH; .ci/run must install it")
        pytest.skip(f"{name} is not installed")
    return path
