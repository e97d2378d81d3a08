"""The built wheel, installed into fresh venvs: with no source tree in sight it imports, finds its
data files and exports; installed with no extras (the core tier) it runs the decorator, the
runtime, the guards and every command's ``--help``, and every command that needs an extra names
it in one line (exit 2).

The wheel is built once for the module. The core tier gets a fresh venv of its own (pip may
reach PyPI for the four core dependencies; its cache makes that quick). Each extra is checked
in the dev environment (its modules import, its commands parse), because a fresh venv per extra
costs a minute or more of downloads each (grpcio, chdb, pyarrow ...); set
``OUTCOME_TELEMETRY_EXTRA_VENVS=1`` to install the wheel with each extra into a fresh venv of its
own instead (``all``, ``crewai``, ``google-adk`` and ``strands-agents`` excluded: ``make test-crewai``
and ``make test-adk-strands`` build theirs).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 300

CORE_DISTRIBUTIONS = {"outcome-telemetry", "opentelemetry-api", "opentelemetry-sdk",
                      "opentelemetry-semantic-conventions", "prometheus-client", "typing-extensions",
                      "importlib-metadata", "zipp", "deprecated", "wrapt"}
"""What a plain install may bring: ours, the OpenTelemetry API and SDK (with what they depend on,
by version), prometheus-client and typing-extensions. No duckdb, no grpcio, no OTLP exporter."""

EXTRA_PACKAGES = {"forensics": "forensics", "mcp": "mcp"}
"""Our public packages that need an extra, and the extra their ImportError names."""
INTEGRATIONS = {"pydantic_ai": "pydantic-ai", "langchain": "langchain", "openai_agents": "openai-agents",
                "crewai": "crewai", "llama_index": "llama-index", "agno": "agno",
                "google_adk": "google-adk", "strands_agents": "strands-agents"}
"""``telemetry.integrations`` modules, each its framework's extra."""

EXTRA_MODULES: dict[str, list[str]] = {
    "forensics": ["duckdb", "telemetry.forensics", "telemetry.forensics._cli", "telemetry.forensics.watch._cli"],
    "otlp": ["opentelemetry.exporter.otlp.proto.http.trace_exporter"],
    "otlp-grpc": ["opentelemetry.exporter.otlp.proto.grpc.trace_exporter"],
    "postgres": ["psycopg"],
    "clickhouse": ["clickhouse_connect", "pyarrow", "telemetry.forensics.clickhouse"],
    "chdb": ["chdb", "pyarrow", "telemetry.forensics.clickhouse"],
    "mcp": ["telemetry.mcp"],
    "audit": ["pydantic", "mcp", "duckdb", "telemetry.audit._cli"],
    "demo": ["duckdb", "pydantic", "telemetry.demo._cli"],
    "pydantic-ai": ["telemetry.integrations.pydantic_ai"],
    "langchain": ["telemetry.integrations.langchain"],
    "openai-agents": ["telemetry.integrations.openai_agents"],
    "crewai": ["telemetry.integrations.crewai"],
    "llama-index": ["telemetry.integrations.llama_index"],
    "agno": ["telemetry.integrations.agno"],
    "google-adk": ["telemetry.integrations.google_adk"],
    "strands-agents": ["telemetry.integrations.strands_agents"],
    "peers": ["openinference.instrumentation.langchain", "openinference.instrumentation.openai_agents",
              "openinference.instrumentation.llama_index", "openinference.instrumentation.agno",
              "openinference.instrumentation.pydantic_ai", "traceloop.sdk", "logfire", "langfuse", "mlflow"],
}
"""What each extra makes importable: the test fails when pyproject gains an extra this lacks."""
TEST_ONLY = {"peers"}
"""Extras for the test suite, not users: installed with make's constraints file (constraints/dev.txt),
without which pip's resolver gives up on the peers' OpenTelemetry instrumentation packages."""
NOT_IN_DEV = {"crewai", "google-adk", "strands-agents"}
"""Extras the dev environment cannot hold (CrewAI pins mcp<2; ``make test-crewai`` covers it; Google
ADK pins an older OpenTelemetry SDK and Strands an older mcp: ``make test-adk-strands`` covers them)."""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(REPO)],
        check=True, capture_output=True, timeout=TIMEOUT,
    )
    return next(dist.glob("outcome_telemetry-*.whl"))


def _venv(where: Path) -> Path:
    """A fresh venv without pip (ensurepip costs seconds): this environment's pip installs into it."""
    venv.create(where, with_pip=False)
    return where / "bin" / "python"


def _install(python: Path, *requirements: str, no_deps: bool = False) -> None:
    """pip install into ``python``'s venv; skipped (outside CI) when no package index answers."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--disable-pip-version-check",
         *(["--no-deps"] if no_deps else []), *requirements],
        capture_output=True, text=True, timeout=TIMEOUT,
    )
    if done.returncode != 0:
        offline = any(word in done.stderr for word in ("NewConnectionError", "Network is unreachable",
                                                        "Temporary failure in name resolution"))
        if offline and os.environ.get("CI", "").lower() not in ("1", "true", "yes"):
            pytest.skip(f"no package index reachable for a fresh venv: {done.stderr.strip().splitlines()[-1]}")
        raise AssertionError(done.stderr)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PROMETHEUS_MULTIPROC_DIR")
            and not k.startswith("OTEL_")}


def _run(cwd: Path, *argv: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT,
                          env=_env())


@pytest.mark.slow
def test_wheel_installs_and_exports(wheel: Path, tmp_path: Path) -> None:
    """Install the wheel with no source tree in sight, and record a span to a file."""
    python = _venv(tmp_path / "venv")
    _install(python, str(wheel), no_deps=True)
    # The dependencies come from the test environment's site-packages, read as a plain path entry
    # (so its editable-install hook for the source tree is not processed).
    site = Path(subprocess.check_output([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    script = (
        "import telemetry, pathlib, sys\n"
        "from telemetry.runtime._resources import data_dir\n"
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
    out = _run(run_dir, python, "-c", script)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"
    cli = _run(run_dir, tmp_path / "venv" / "bin" / "outcome-telemetry", "--help")
    assert cli.returncode == 0 and "outcome-telemetry" in cli.stdout


CORE_SCRIPT = r"""
import atexit, gc, json, pathlib, pkgutil, sys, importlib, threading
hooks = []
_register = atexit.register
def _noting(func, *args, **kwargs):
    hooks.append(f"{getattr(func, '__module__', '')}.{getattr(func, '__qualname__', func)}")
    return _register(func, *args, **kwargs)
atexit.register = _noting
import telemetry, telemetry.instrument, telemetry.runtime, telemetry.guards, telemetry.testing
from opentelemetry.sdk.trace import TracerProvider
at_import = {"atexit": [h for h in hooks if not h.startswith("logging.")],
             "providers": sum(isinstance(o, TracerProvider) for o in gc.get_objects()),
             "threads": threading.active_count()}
atexit.register = _register
library = sorted(m for m in sys.modules if m.split(".")[0] in ("telemetry", "duckdb", "grpc", "anyio", "pydantic", "mcp"))
extra_packages, integrations = json.loads(sys.argv[1]), json.loads(sys.argv[2])
imported, refused = [], {}
for info in pkgutil.iter_modules(telemetry.__path__, "telemetry."):
    short = info.name.split(".")[1]
    if short.startswith("_"):
        continue
    try:
        importlib.import_module(info.name)
        imported.append(info.name)
    except ImportError as exc:
        refused[short] = str(exc)
for name in integrations:
    try:
        importlib.import_module("telemetry.integrations." + name)
        imported.append("telemetry.integrations." + name)
    except ImportError as exc:
        refused["integrations." + name] = str(exc)

from telemetry.guards import SQLiteStore, StateStore
store = StateStore(SQLiteStore(pathlib.Path("guards.sqlite")))
with telemetry.configure(service_name="core", traces_dir="traces") as rt:
    @telemetry.instrument_tool(kind="write", readback=lambda call, result: True)
    def save(key: str, value: str) -> dict:
        return {"ok": True}
    save("k", "v")
    written = store.write_state("plan", "draft", expected_version="absent")
    assert written["ok"], written
    store.store.close()
files = sorted(p.name for p in pathlib.Path("traces").glob("*.jsonl"))
otlp = {}
for protocol in ("grpc", None):
    try:
        telemetry.configure(otlp_endpoint="http://127.0.0.1:4318", otlp_protocol=protocol, traces_dir=None).shutdown()
        otlp[str(protocol)] = "configured"
    except telemetry.ConfigurationError as exc:
        otlp[str(protocol)] = str(exc)
print(json.dumps({"at_import": at_import, "library": library, "imported": imported, "refused": refused, "files": files, "otlp": otlp}))
"""


@pytest.mark.slow
def test_the_core_install_runs_the_library_and_names_each_missing_extra(wheel: Path, tmp_path: Path) -> None:
    """`pip install <wheel>` with no extras: only the core dependencies; importing the library does
    nothing but define (no exit hook, no tracer provider, no thread) and imports neither the audit,
    the demo, the CLI nor DuckDB; a decorated call and a guard write a trace file; every
    package that needs an extra refuses to import naming it; every command's --help exits 0; the
    commands that need an extra exit 2 with one line naming it; OTLP export names its extra."""
    python = _venv(tmp_path / "venv")
    _install(python, str(wheel))
    dists = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "list", "--format", "json"],
                           capture_output=True, text=True, timeout=TIMEOUT, check=True)
    names = {d["name"].lower().replace("_", "-") for d in json.loads(dists.stdout)}
    assert names <= CORE_DISTRIBUTIONS | {"pip", "setuptools"}, names - CORE_DISTRIBUTIONS

    run_dir = tmp_path / "app"
    run_dir.mkdir()
    done = _run(run_dir, python, "-c", CORE_SCRIPT, json.dumps(EXTRA_PACKAGES), json.dumps(INTEGRATIONS))
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    assert facts["at_import"] == {"atexit": [], "providers": 0, "threads": 1}, facts["at_import"]  # definitions only
    assert facts["library"] and all(m.split(".")[0] == "telemetry" for m in facts["library"]), facts["library"]
    assert not [m for m in facts["library"] if m.startswith(("telemetry.demo", "telemetry.audit", "telemetry.cli",
                                                               "telemetry.forensics"))]
    assert {"telemetry.instrument", "telemetry.runtime", "telemetry.guards", "telemetry.testing", "telemetry.audit",
            "telemetry.cli", "telemetry.conventions"} <= set(facts["imported"])
    assert set(facts["refused"]) == {*EXTRA_PACKAGES, *(f"integrations.{n}" for n in INTEGRATIONS)}, facts["refused"]
    for package, extra in EXTRA_PACKAGES.items():
        assert f"[{extra}]" in facts["refused"][package], facts["refused"][package]
    assert len(facts["files"]) == 1
    assert "[otlp-grpc]" in facts["otlp"]["grpc"] and "[otlp]" in facts["otlp"]["None"], facts["otlp"]

    cli = tmp_path / "venv" / "bin" / "outcome-telemetry"
    names_listed = _run(run_dir, python, "-c", "from telemetry.cli import build_parser\n"
                        "print(' '.join(next(a for a in build_parser()._actions if a.dest == 'command').choices))")
    commands = names_listed.stdout.split()
    assert {"forensics", "watch", "audit", "demo", "quickstart", "metrics-serve", "paths"} <= set(commands)
    for name in ["", *commands]:
        shown = _run(run_dir, cli, *([name] if name else []), "--help")
        assert shown.returncode == 0 and shown.stdout.startswith("usage:") and not shown.stderr, (name, shown.stderr)
    (run_dir / "x.jsonl").write_text("")
    for argv, extra in ((["forensics", "report", "x.jsonl"], "forensics"), (["forensics", "list"], "forensics"),
                        (["watch", "x.jsonl"], "forensics"), (["audit", "--traces", "x.jsonl"], "forensics"),
                        (["demo", "--out", "d"], "demo")):
        refused = _run(run_dir, cli, *argv)
        assert refused.returncode == 2, (argv, refused.stderr)
        assert refused.stderr.count("\n") == 1 and f"[{extra}]" in refused.stderr, (argv, refused.stderr)
        assert refused.stdout == ""
    assert not (run_dir / "d").exists()
    quick = _run(run_dir, cli, "quickstart", "--out", "qs")
    assert quick.returncode == 0 and list((run_dir / "qs" / "traces").glob("*.jsonl")), quick.stderr


def _extras_of_pyproject() -> set[str]:
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return set(extras) - {"dev", "all"}


def test_every_extra_says_what_it_makes_importable() -> None:
    """pyproject's extras and this test's table agree (a new extra must say what it is for)."""
    assert _extras_of_pyproject() == set(EXTRA_MODULES)


@pytest.mark.parametrize("extra", sorted(set(EXTRA_MODULES) - NOT_IN_DEV))
def test_each_extra_imports_in_the_dev_environment(extra: str) -> None:
    """What each extra provides imports here (the dev environment holds every extra but CrewAI)."""
    for module in EXTRA_MODULES[extra]:
        importlib.import_module(module)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("OUTCOME_TELEMETRY_EXTRA_VENVS") != "1",
                    reason="a fresh venv per extra downloads a lot; OUTCOME_TELEMETRY_EXTRA_VENVS=1 runs it")
@pytest.mark.parametrize("extra", sorted(set(EXTRA_MODULES) - NOT_IN_DEV - TEST_ONLY))
def test_each_extra_in_a_fresh_venv(extra: str, wheel: Path, tmp_path: Path) -> None:
    """The wheel with one extra, in a venv of its own: what the extra provides imports."""
    python = _venv(tmp_path / "venv")
    _install(python, f"{wheel}[{extra}]")
    done = _run(tmp_path, python, "-c", "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)",
                *EXTRA_MODULES[extra])
    assert done.returncode == 0, done.stderr
