"""A target's own code never decides how the audit ends: a ``sys.exit()`` at import, its own
argparse, its prints, a ``--timeout`` that would wait forever, and a SIGTERM to the audit while its
``--mcp-stdio`` server runs. And SARIF locations are URIs a scanning UI can open.

Each runs the real command in a subprocess (an exit there is the process's, as in CI), from a
folder holding the target modules (the audit resolves ``module:attribute`` from its cwd).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

import audit_support  # noqa: F401  (skips without the extra, fails in CI)
from audit_support import run_cli

REPO = Path(__file__).resolve().parents[2]
BOUND_SECONDS = 120  # only a hang reaches it

CRITICAL = '''
from telemetry import instrument_tool

@instrument_tool(kind="write")
def overwrite(key: str, value: str) -> dict:
    """Overwrite a key with a value, whatever it holds now."""
    return {"ok": True}

TOOLS = [overwrite]
'''

EXITS = '''
import sys

def harmless(key: str) -> str:
    """Get the value of one key."""
    return ""

TOOLS = [harmless]
sys.exit(0)
'''

SCRIPT = '''
import argparse

parser = argparse.ArgumentParser(description="a tool server that parses its flags at import")
parser.add_argument("--db", default="crew.sqlite")
ARGS = parser.parse_args()
print("serving", ARGS.db)  # on stdout, where the audit writes its JSON

from telemetry import instrument_tool

@instrument_tool(kind="write")
def overwrite(key: str, value: str) -> dict:
    """Overwrite a key with a value, whatever it holds now."""
    return {"ok": True}

TOOLS = [overwrite]
'''

REQUIRED = '''
import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--db", required=True)
parser.parse_args()
'''

HUNG_SERVER = '''
import os, sys, time
with open(sys.argv[1], "w") as out:
    out.write(str(os.getpid()))
time.sleep(3600)  # never reads stdin, never answers initialize
'''

STUBBORN_SERVER = '''
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # ignores SIGTERM, and starts a process of its own
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
with open(sys.argv[1] + ".tmp", "w") as out:
    out.write(f"{os.getpid()} {helper.pid}")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(3600)
'''


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name, text in (("critical", CRITICAL), ("exits", EXITS), ("script", SCRIPT), ("required", REQUIRED),
                       ("hung_server", HUNG_SERVER), ("stubborn_server", STUBBORN_SERVER)):
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
    return tmp_path


def _audit(folder: Path, *args: str, timeout: float = BOUND_SECONDS,
           python: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, *python, "-m", "telemetry.cli", "audit", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=folder, env=env)


def test_a_target_calling_sys_exit_at_import_fails_the_gate_by_name(folder: Path) -> None:
    """`sys.exit(0)` in one target's module, beside a target with critical findings: exit 2 naming
    the exiting target, never exit 0 with no output (a gate passed on an audit not done)."""
    result = _audit(folder, "critical:TOOLS", "exits:TOOLS", "--fail-on", "critical")
    assert result.returncode == 2, (result.returncode, result.stdout[-500:], result.stderr[-2000:])
    assert "'exits:TOOLS'" in result.stderr and "SystemExit(0)" in result.stderr, result.stderr
    assert "__main__" in result.stderr  # what to do about it
    alone = _audit(folder, "exits:TOOLS", "--fail-on", "never")
    assert alone.returncode == 2 and "SystemExit(0)" in alone.stderr, alone.stderr


def test_a_target_parsing_its_flags_at_import_sees_none_of_the_audits(folder: Path) -> None:
    """A module that runs argparse at import neither reads nor rejects the audit's flags (it sees
    its own name alone), its prints go to stderr, and the audit's JSON and exit status are the
    audit's: 1 for the critical finding."""
    result = _audit(folder, "script:TOOLS", "--format", "json", "--fail-on", "critical")
    assert result.returncode == 1, (result.returncode, result.stderr[-2000:])
    document = json.loads(result.stdout)  # nothing of the target's on stdout
    assert [t["name"] for t in document["tools"]] == ["overwrite"]
    assert "serving crew.sqlite" in result.stderr
    assert "unrecognized arguments" not in result.stderr


def test_a_target_whose_argparse_gives_up_is_a_named_target_error(folder: Path) -> None:
    """A module whose argparse exits (a required flag): exit 2 with the audit's own line naming the
    target, after whatever its parser printed."""
    result = _audit(folder, "required:anything", "--format", "sarif")
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("outcome-telemetry audit: error: target 'required:anything'") and "SystemExit(2)" in last
    assert result.stdout == ""


def test_a_timeout_of_inf_is_refused_not_a_wait_forever(folder: Path) -> None:
    """`--timeout inf` (or nan, or 0) against a server that never answers: refused at once, exit 2,
    before the MCP SDK is even imported (the refusal is the argument's, not the server's)."""
    command = f"{shlex.quote(sys.executable)} hung_server.py {shlex.quote(str(folder / 'pid'))}"
    for value in ("inf", "nan", "0"):
        result = _audit(folder, "--mcp-stdio", command, "--timeout", value, timeout=60, python=("-X", "importtime"))
        assert result.returncode == 2, (value, result.stderr[-2000:])
        refusal = [line for line in result.stderr.splitlines() if not line.startswith("import time:")]
        assert refusal == [f"outcome-telemetry audit: error: --timeout must be a finite number of seconds above 0, "
                           f"got {float(value)}"], (value, refusal)
        imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}
        assert "telemetry.audit._mcp_listing" in imported and "mcp" not in imported, (value, sorted(imported)[:50])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purpose (its parent has not reaped it yet)
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0] != "Z"
    except OSError:
        return False


@pytest.fixture
def server_pid(folder: Path) -> Iterator[Path]:
    """Where the hung server writes its pid; it is killed at the end if still there."""
    path = folder / "pid"
    yield path
    for pid in (int(p) for p in (path.read_text().split() if path.exists() else [])):
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_an_audit_killed_by_sigterm_stops_its_stdio_server(folder: Path, server_pid: Path) -> None:
    """SIGTERM to an audit waiting on a hung --mcp-stdio server (started in a session of its own,
    so no terminal signal reaches it): the audit stops the server before it ends, and ends as
    killed by SIGTERM."""
    command = f"{shlex.quote(sys.executable)} hung_server.py {shlex.quote(str(server_pid))}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    log = folder / "audit.log"  # a file, not a pipe: the server inherits the audit's stderr
    with open(log, "w") as output:
        audit = subprocess.Popen([sys.executable, "-m", "telemetry.cli", "audit", "--mcp-stdio", command,
                                  "--timeout", "600"], cwd=folder, env=env, stdout=output, stderr=output)
    try:
        deadline = time.monotonic() + BOUND_SECONDS
        while not (server_pid.exists() and server_pid.read_text()) and time.monotonic() < deadline:
            assert audit.poll() is None, log.read_text()
            time.sleep(0.05)
        pid = int(server_pid.read_text())
        time.sleep(0.5)  # the client is now waiting for initialize
        audit.send_signal(signal.SIGTERM)
        audit.wait(timeout=BOUND_SECONDS)
    finally:
        if audit.poll() is None:
            audit.kill()
            audit.wait()
    assert audit.returncode in (-signal.SIGTERM, 128 + signal.SIGTERM), (audit.returncode, log.read_text()[-2000:])
    assert not _alive(pid), "the --mcp-stdio server outlived the audit"


@pytest.mark.parametrize("server", ["hung_server", "stubborn_server"])
def test_an_audit_killed_by_sigkill_takes_its_stdio_server_with_it(folder: Path, server_pid: Path, server: str) -> None:
    """SIGKILL to an audit waiting on a hung --mcp-stdio server: no code of the audit runs, yet the
    server (in a session of its own) ends too, and so does a process it started, even when it
    ignores SIGTERM (SIGKILL follows the grace)."""
    command = f"{shlex.quote(sys.executable)} {server}.py {shlex.quote(str(server_pid))}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    log = folder / "audit.log"
    with open(log, "w") as output:
        audit = subprocess.Popen([sys.executable, "-m", "telemetry.cli", "audit", "--mcp-stdio", command,
                                  "--timeout", "600"], cwd=folder, env=env, stdout=output, stderr=output)
    try:
        deadline = time.monotonic() + BOUND_SECONDS
        while not (server_pid.exists() and server_pid.read_text()) and time.monotonic() < deadline:
            assert audit.poll() is None, log.read_text()
            time.sleep(0.05)
        pids = [int(p) for p in server_pid.read_text().split()]
        assert all(_alive(p) for p in pids)
        audit.kill()
        audit.wait(timeout=BOUND_SECONDS)
        deadline = time.monotonic() + 30  # the poll, the grace, then SIGKILL: a few seconds
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        if audit.poll() is None:
            audit.kill()
            audit.wait()
    assert audit.returncode == -signal.SIGKILL
    assert not [p for p in pids if _alive(p)], f"the --mcp-stdio server outlived the audit: {log.read_text()[-2000:]}"


def test_a_stdio_command_that_is_no_program_is_named(folder: Path) -> None:
    result = _audit(folder, "--mcp-stdio", "no-such-mcp-server --port 1", timeout=60)
    assert result.returncode == 2
    assert "'no-such-mcp-server' is no program" in result.stderr, result.stderr


def test_sarif_uris_are_percent_encoded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A tool in `my tools#1/x.py`: the artifact URI is `my%20tools%231/x.py`, which resolves
    against SRCROOT to that file (unencoded, `#1/x.py` parses as a fragment)."""
    package = tmp_path / "my tools#1"
    package.mkdir()
    (package / "sarifapp.py").write_text(textwrap.dedent(CRITICAL))
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("sarifapp", None)
    try:
        code, out, _err = run_cli(capsys, "sarifapp:TOOLS", "--format", "sarif")
    finally:
        sys.modules.pop("sarifapp", None)
    assert code == 1
    run = json.loads(out)["runs"][0]
    artifact = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": "my%20tools%231/sarifapp.py", "uriBaseId": "SRCROOT"}
    resolved = urlsplit(urljoin(run["originalUriBaseIds"]["SRCROOT"]["uri"], artifact["uri"]))
    assert resolved.fragment == "" and Path(unquote(resolved.path)) == (package / "sarifapp.py").resolve()
