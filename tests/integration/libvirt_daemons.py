"""libvirtd and virtlogd for the libvirt tests, where no service manager runs them.

:func:`running_daemons` starts ``virtlogd -d`` and ``libvirtd -d`` only when they are not
running already, and on exit stops only the daemons it started (by the pid each wrote),
never one that was there before.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

DAEMONS = ("virtlogd", "libvirtd")
START_WAIT_S = 15.0
STOP_WAIT_S = 15.0


def _pid_of(name: str) -> int | None:
    """The running daemon's pid (from its pid file, if that process lives)."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(Path(f"/run/{name}.pid").read_text().strip())
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        if comm == name:
            return pid
    found = subprocess.run(["pgrep", "-x", name], capture_output=True, text=True,
                           check=False).stdout.split()
    return int(found[0]) if found else None


def _start(name: str) -> int:
    # A clean environment: the daemon outlives the test that started it, so it must not
    # inherit that test's TMPDIR or work directory.
    env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")}
    subprocess.run([name, "-d"], env=env, check=True, timeout=30)
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        pid = _pid_of(name)
        if pid is not None and Path(f"/run/{name}.pid").exists():
            return pid
        time.sleep(0.1)
    raise RuntimeError(f"{name} -d did not write /run/{name}.pid in {START_WAIT_S:g} s")


def _wait_socket(deadline: float) -> None:
    sock = Path("/run/libvirt/libvirt-sock")
    while not sock.exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def _stop(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        stat = Path(f"/proc/{pid}/stat")
        with contextlib.suppress(OSError):
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return
        time.sleep(0.1)


@contextlib.contextmanager
def running_daemons() -> Iterator[list[str]]:
    """Yield the names of the daemons this started (empty when both were running)."""
    started: list[tuple[str, int]] = []
    try:
        for name in DAEMONS:
            if _pid_of(name) is None:
                started.append((name, _start(name)))
        _wait_socket(time.monotonic() + START_WAIT_S)
        yield [name for name, _ in started]
    finally:
        for _name, pid in reversed(started):
            _stop(pid)
