"""A private, throwaway PostgreSQL server: for the store's tests, the fleet tests and
``bench/store_commit.py`` (and to try the team store on one machine).

``initdb`` in a new temporary directory, then ``postgres`` as a child process listening
on a unix socket in that directory only (no TCP port: nothing else on the machine can
reach it, and no port can collide), stopped and removed by :meth:`PostgresServer.stop`.
PostgreSQL refuses to run as root: as root, both run as the ``postgres`` user (Debian's
package creates it) and the directory is handed to that user.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from functools import partial
from pathlib import Path

import psycopg

from hvbench.errors import HostError
from hvbench.host.proctree import die_with_parent
from hvbench.host.started import StartStop

#: Where Debian installs the server programs (they are not on PATH).
BINDIR_ROOT = "/usr/lib/postgresql"
#: The user the server runs as when hvbench runs as root.
SERVER_USER = "postgres"
#: The superuser initdb creates, and the database every server has.
SUPERUSER = "hvbench"
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
#: The port number only names the socket file (``.s.PGSQL.5432``): no TCP listener.
PORT = 5432


class PostgresError(HostError):
    """The private PostgreSQL server cannot be found, initialised or started."""


def postgres_bindir() -> Path:
    """The directory of ``initdb`` and ``postgres``: Debian's newest version under
    /usr/lib/postgresql, else what ``pg_config --bindir`` says.

    Raises:
        PostgresError: no PostgreSQL server is installed.
    """
    found = sorted(Path(BINDIR_ROOT).glob("*/bin"),
                   key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    for candidate in reversed(found):
        if (candidate / "initdb").is_file():
            return candidate
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True,
                             check=True, timeout=10).stdout.strip()
        if out and (Path(out) / "initdb").is_file():
            return Path(out)
    raise PostgresError("no PostgreSQL server programs (initdb, postgres) under "
                        f"{BINDIR_ROOT}/*/bin or pg_config --bindir: install Debian's "
                        "postgresql package")


class PostgresServer(StartStop):
    """One private PostgreSQL server in its own temporary directory.

    ``durable=False`` turns fsync off (tests: faster, and a crash of the test machine
    loses nothing that matters); the benchmark keeps it on, as a team server would.
    """

    def __init__(self, *, durable: bool = True) -> None:
        self.durable = durable
        self.directory: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._user = SERVER_USER if os.geteuid() == 0 else None

    @property
    def socket_dir(self) -> Path:
        if self.directory is None:
            raise PostgresError("the PostgreSQL server is not started")
        return self.directory

    def url(self, database: str = "postgres") -> str:
        """The ``postgresql://`` URL of ``database`` on this server."""
        return f"postgresql://{SUPERUSER}@/{database}?host={self.socket_dir}&port={PORT}"

    def start(self) -> None:
        """initdb, start the server, wait until it accepts connections.

        Raises:
            PostgresError: no server programs, initdb failed, or the server did not
                become ready (the message quotes its log).
        """
        bindir = postgres_bindir()
        # /tmp, not TMPDIR: the server user must be able to reach the directory.
        self.directory = Path(tempfile.mkdtemp(prefix="hvbench-pg-", dir="/tmp"))
        data = self.directory / "data"
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            os.chown(self.directory, entry.pw_uid, entry.pw_gid)
        initdb = subprocess.run(
            [str(bindir / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust",
             "--no-locale", "-E", "UTF8", "--no-sync"],
            capture_output=True, text=True, check=False, user=self._user, timeout=120)
        if initdb.returncode != 0:
            raise PostgresError(f"initdb failed ({initdb.returncode}): "
                                f"{initdb.stderr.strip()[-800:]}")
        log = self.directory / "server.log"
        with log.open("wb") as handle:
            if self._user is not None:
                entry = pwd.getpwnam(self._user)
                os.chown(log, entry.pw_uid, entry.pw_gid)
            self._process = subprocess.Popen(
                [str(bindir / "postgres"), "-D", str(data), "-k", str(self.directory),
                 "-p", str(PORT), "-c", "listen_addresses=",
                 "-c", f"fsync={'on' if self.durable else 'off'}",
                 "-c", "max_connections=50"],
                stdout=handle, stderr=subprocess.STDOUT, user=self._user,
                # immediate shutdown if the process that started it dies (kill -9)
                preexec_fn=partial(die_with_parent, signal.SIGQUIT),  # noqa: PLW1509
                start_new_session=True)
        self._wait_ready(log)

    def _wait_ready(self, log: Path) -> None:


        deadline = time.monotonic() + READY_TIMEOUT_S
        last = ""
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                break
            try:
                with psycopg.connect(host=str(self.socket_dir), port=PORT, user=SUPERUSER,
                                     dbname="postgres", connect_timeout=2):
                    return
            except psycopg.OperationalError as exc:
                last = str(exc).strip()
            time.sleep(0.1)
        tail = log.read_text(errors="replace")[-800:] if log.exists() else ""
        raise PostgresError(f"the private PostgreSQL server did not accept connections "
                            f"within {READY_TIMEOUT_S:g} s ({last}); its log: {tail}")

    def create_database(self, name: str) -> str:
        """Create database ``name`` and return its URL."""


        with psycopg.connect(host=str(self.socket_dir), port=PORT, user=SUPERUSER,
                             dbname="postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')  # name chosen by the caller, quoted
        return self.url(name)

    def stop(self) -> None:
        """Fast shutdown (SIGINT: clients disconnected, no checkpoint wait), SIGKILL to
        its process group after :data:`STOP_TIMEOUT_S`, then remove the directory.
        Safe twice."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGINT)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        directory, self.directory = self.directory, None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
