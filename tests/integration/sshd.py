"""A throwaway OpenSSH server on a loopback port for tests: its own host key, one
client key allowed in, an OpenSSH client configuration that reaches it as ``host``
(``ssh -F config HOST``, or asyncssh with ``config=[path]``); root's ~/.ssh is never
read or written."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

#: How long sshd may take to accept connections, seconds.
START_TIMEOUT_S = 10.0
#: How long sshd and its sessions may take to exit after SIGTERM, seconds.
STOP_GRACE_S = 10.0


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (sshd's per-connection processes)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


class SshServer:
    """``sshd -D -e -f CONFIG`` on 127.0.0.1, a free port, with keys in ``root``.

    ``start()`` waits up to :data:`START_TIMEOUT_S` for the port to accept; ``stop()``
    sends SIGTERM to sshd and its per-connection processes (which outlive the listener
    otherwise), then SIGKILL after :data:`STOP_GRACE_S`; safe twice.
    """

    def __init__(self, root: Path, host: str = "127.0.0.1") -> None:
        self.root = root
        self.host = host
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.client_config = root / "ssh_config"
        self.client_key = root / "client"
        self.log = root / "sshd.log"

    def _setup(self) -> Path:
        for name in ("host", "client"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                            str(self.root / name)], check=True)
        shutil.copyfile(self.root / "client.pub", self.root / "authorized_keys")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        config = self.root / "sshd_config"
        config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.root / 'host'}\n"
            f"AuthorizedKeysFile {self.root / 'authorized_keys'}\n"
            # the key and its directories are in a pytest temp dir under world-writable /tmp
            "StrictModes no\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\n"
            f"PidFile {self.root / 'sshd.pid'}\n")
        host_key = (self.root / "host.pub").read_text().split()
        (self.root / "known_hosts").write_text(
            f"[127.0.0.1]:{self.port} {host_key[0]} {host_key[1]}\n")
        self.client_config.write_text(
            f"Host {self.host}\n  HostName 127.0.0.1\n  Port {self.port}\n  User root\n"
            f"  IdentityFile {self.client_key}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {self.root / 'known_hosts'}\n")
        return config

    def start(self) -> None:
        """Generate the keys and configurations, start sshd, wait for its port.

        Raises:
            RuntimeError: sshd exited or did not listen in time (with its log).
        """
        config = self._setup()
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                ["/usr/sbin/sshd", "-D", "-e", "-f", str(config)],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and self.process.poll() is None:
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"sshd did not listen on {self.port}: {self.log.read_text()}")

    def stop(self) -> None:
        """SIGTERM to sshd and its sessions, SIGKILL after the grace time; safe twice."""
        process, self.process = self.process, None
        if process is None:
            return
        sessions = _children(process.pid)
        process.terminate()
        try:
            process.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for pid in sessions:
            _signal(pid, 15)
        deadline = time.monotonic() + STOP_GRACE_S
        while any(Path(f"/proc/{pid}").exists() for pid in sessions) and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in sessions:
            _signal(pid, 9)

    def __enter__(self) -> SshServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _signal(pid: int, signum: int) -> None:
    """Signal ``pid`` if it is still an sshd (its pid was not reused meanwhile)."""
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/comm").read_text().strip() == "sshd":
            os.kill(pid, signum)
