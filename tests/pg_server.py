"""A throwaway PostgreSQL server for the tests and benchmarks: Debian's binaries, a temporary
cluster, one free loopback port, run as the ``postgres`` user, stopped (or killed) at the end.

``initdb`` refuses to run as root, and so does the server, so both run through ``runuser -u
postgres`` when this process is root; the cluster lives in a temporary folder owned by that user.
The server listens on 127.0.0.1 only, with its Unix socket in the same folder.

``PG_BIN`` names another folder of PostgreSQL binaries; ``OUTCOME_TELEMETRY_PG_DSN`` skips the
start-up and uses an existing server (the tests then create and drop their own schemas in it).
"""

from __future__ import annotations

import atexit
import glob
import itertools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

START_SECONDS = 30.0
INSTALL_HINT = "install PostgreSQL (Debian: apt-get install postgresql) or set PG_BIN to its bin folder"


class NoPostgres(RuntimeError):
    """PostgreSQL's binaries are not on this machine (the message says what to install)."""


def find_bin() -> Path:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``; raises :class:`NoPostgres`."""
    named = os.environ.get("PG_BIN")
    candidates = [named] if named else sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    on_path = shutil.which("pg_ctl")
    if on_path and not named:
        candidates.append(str(Path(on_path).parent))
    for folder in candidates:
        if folder and (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    raise NoPostgres(f"no PostgreSQL binaries (initdb, pg_ctl) found: {INSTALL_HINT}")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """A running cluster: ``dsn`` reaches its ``postgres`` database as the ``postgres`` user."""

    bin: Path
    folder: Path
    port: int
    _as_postgres: list[str] = field(default_factory=list)
    _watchdog: subprocess.Popen[bytes] | None = None

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self._as_postgres, *argv], check=check, capture_output=True, text=True, timeout=120)

    def start(self, **settings: str) -> None:
        data = self.folder / "data"
        self._run(str(self.bin / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                  "--locale=C.UTF-8", "--no-sync")
        options = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.folder}'",
            "max_connections": "200",
            "shared_buffers": "64MB",
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            **settings,
        }
        with open(data / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.writelines(f"{name} = {value}\n" for name, value in options.items())
        self.resume()
        atexit.register(self.stop)
        self._watch_parent()

    def resume(self) -> None:
        """Start the (initialised) cluster and wait until it accepts connections."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-l", str(self.folder / "server.log"),
                  "-w", "-t", str(int(START_SECONDS)), "start")

    def halt(self) -> None:
        """Stop the server at once (``immediate``: as a crash would), keeping the cluster to resume."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate", "-w", "-t", "20",
                  "stop", check=False)

    def _watch_parent(self) -> None:
        """A watchdog that stops the server when this process dies without running atexit (killed)."""
        script = (
            f"while kill -0 {os.getpid()} 2>/dev/null; do sleep 1; done; "
            f"{' '.join(self._as_postgres)} {self.bin / 'pg_ctl'} -D {self.folder / 'data'} -m immediate stop "
            f">/dev/null 2>&1; rm -rf {self.folder}"
        )
        # Kept, and reaped by stop(): a Popen dropped while its process runs is a ResourceWarning.
        self._watchdog = subprocess.Popen(["sh", "-c", script], start_new_session=True, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.folder / "data" / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop(self) -> None:
        """Stop the server fast; kill it when that fails; remove the cluster."""
        pid = self.postmaster_pid()
        if pid is not None:
            done = self._run(str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate", "-w",
                             "-t", "20", "stop", check=False)
            if done.returncode != 0:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        shutil.rmtree(self.folder, ignore_errors=True)
        if self._watchdog is not None:  # the server it watches for is gone: end it (our own child)
            self._watchdog.kill()
            self._watchdog.wait(timeout=20)
            self._watchdog = None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join((self.folder / "server.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"


def start_server(**settings: str) -> Server:
    """Initialise and start a fresh cluster on a free loopback port; raises :class:`NoPostgres`."""
    bin_folder = find_bin()
    folder = Path(tempfile.mkdtemp(prefix="ot-pg-"))
    as_postgres: list[str] = []
    if os.geteuid() == 0:
        runuser = shutil.which("runuser")
        if runuser is None:
            raise NoPostgres("running as root needs runuser (util-linux) to start PostgreSQL as the postgres user")
        shutil.chown(folder, user="postgres")
        as_postgres = [runuser, "-u", "postgres", "--"]
    os.chmod(folder, 0o700)
    server = Server(bin_folder, folder, free_port(), as_postgres)
    try:
        server.start(**settings)
    except subprocess.CalledProcessError as exc:
        tail = server.log_tail()
        server.stop()
        raise RuntimeError(f"PostgreSQL did not start: {exc.stderr or exc.stdout}\n{tail}") from exc
    return server


_schemas = itertools.count()


def fresh_postgres_url(dsn: str) -> str:
    """A URL of an empty schema of its own on ``dsn``'s server, so a test sees no other test's rows."""
    from telemetry.guards._postgres import schema_dsn

    return schema_dsn(dsn, f"t{os.getpid()}_{next(_schemas)}", reset=True)
