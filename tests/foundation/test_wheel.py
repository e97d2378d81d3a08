"""A non-editable wheel, installed into a fresh venv, imports, finds its data files and exports."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_installs_and_exports(tmp_path: Path) -> None:
    """Build the wheel, install it with no source tree in sight, and record a span to a file."""
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(REPO)],
        check=True, capture_output=True, timeout=300,
    )
    wheel = next(dist.glob("outcome_telemetry-*.whl"))
    env_dir = tmp_path / "venv"
    # No pip inside the fresh venv (ensurepip costs seconds): this environment's pip installs into it.
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", str(wheel)],
        check=True, timeout=300,
    )
    # The dependencies come from the test environment's site-packages, read as a plain path entry
    # (so its editable-install hook for the source tree is not processed).
    site = Path(subprocess.check_output([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    script = (
        "import telemetry, pathlib, sys\n"
        "from telemetry.runtime.resources import data_dir\n"
        "assert 'site-packages' in telemetry.__file__, telemetry.__file__\n"
        "assert (pathlib.Path(telemetry.__file__).parent / 'py.typed').exists()\n"
        "for kind in ('queries', 'dashboards', 'alerts'):\n"
        "    d = data_dir(kind); assert '_data' in str(d), d\n"
        "from importlib.metadata import entry_points\n"
        "(plugin,) = [ep for ep in entry_points(group='pytest11') if ep.name == 'outcome_telemetry']\n"
        "assert 'site-packages' in plugin.load().__file__\n"
        "rt = telemetry.configure(service_name='wheel', traces_dir='traces')\n"
        "@telemetry.instrument_tool(kind='read')\n"
        "def ping(): return 1\n"
        "ping(); rt.shutdown()\n"
        "print(len(list(pathlib.Path('traces').glob('*.jsonl'))))\n"
    )
    run_dir = tmp_path / "elsewhere"
    run_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([python, "-c", script], cwd=run_dir, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"
    cli = subprocess.run([env_dir / "bin" / "outcome-telemetry", "--help"], capture_output=True, text=True, timeout=60, env=env)
    assert cli.returncode == 0 and "outcome-telemetry" in cli.stdout
