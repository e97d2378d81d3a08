"""Crew traces for the watch tests: one legacy and one guarded run of the scripted crew, real spans."""

from __future__ import annotations

from pathlib import Path

import pytest

from telemetry.demo._runner import run_crew


@pytest.fixture(scope="session")
def legacy_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The legacy crew's trace files (lost updates, a dropped constraint, a double charge, ...)."""
    out = tmp_path_factory.mktemp("legacy")
    return run_crew(out, modes=["legacy"]).traces_dir


@pytest.fixture(scope="session")
def guarded_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The guarded crew's trace files: every failure refused or recovered."""
    out = tmp_path_factory.mktemp("guarded")
    return run_crew(out, modes=["guarded"]).traces_dir
