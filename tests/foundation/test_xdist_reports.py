"""A failing test whose report holds a lone surrogate is reported as a failure under pytest-xdist.

Without the hook in ``tests/xdist_reports.py`` the worker crashes while sending the report, and
CI shows an internal error naming the test instead of its failure (this happened once: a property
test's oracle was wrong, and the run ended with a crashed worker). The test runs a real pytest
with two xdist workers in a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent


def _run(folder: Path, with_hook: bool) -> subprocess.CompletedProcess[str]:
    folder.mkdir()
    (folder / "test_hostile.py").write_text(
        'def test_fails_on_a_lone_surrogate():\n    value = "\\ud800x"\n    print(value)\n    assert value == "y"\n',
        encoding="utf-8")
    conftest = f"import sys\nsys.path.insert(0, {str(TESTS)!r})\n"
    if with_hook:
        conftest += "from xdist_reports import pytest_runtest_makereport  # noqa: F401\n"
    (folder / "conftest.py").write_text(conftest, encoding="utf-8")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "xdist.plugin", "-n", "2", "-q", "-p", "no:cacheprovider",
                           "test_hostile.py"], cwd=folder, env=env, capture_output=True, text=True, timeout=120)


def test_a_lone_surrogate_in_a_failure_is_reported_as_the_failure(tmp_path: Path) -> None:
    result = _run(tmp_path / "with", with_hook=True)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "1 failed" in result.stdout and "INTERNALERROR" not in result.stdout + result.stderr
    assert "\\ud800x" in result.stdout  # the value, escaped, in the failure's captured output


def test_without_the_hook_the_worker_crashes(tmp_path: Path) -> None:
    """What the hook prevents, so the test above keeps meaning something on a later xdist."""
    result = _run(tmp_path / "without", with_hook=False)
    assert "INTERNALERROR" in result.stdout + result.stderr and "1 failed" not in result.stdout
