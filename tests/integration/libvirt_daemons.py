"""libvirtd and virtlogd for the libvirt tests, where no service manager runs them.

:func:`running_daemons` starts ``virtlogd -d`` and ``libvirtd -d`` only when they are not
running already. A daemon that was there before any test session started it is never
stopped. Daemons a test session started are shared by every session on the machine:
each holds a shared lock on :data:`USERS_LOCK` while it uses them, and the one that
leaves last (no other holder) stops those that a session started (their pids are noted
in :data:`STARTED_DIR`), so no session stops a daemon another one still uses.

A libvirtd the tests start runs its guests' QEMU as root: it reads a private copy of
``/etc/libvirt/qemu.conf`` with ``user``/``group`` = root, bind-mounted over the real
one in a mount namespace of its own (the host's file is never written). On this host
libvirt's QEMU user cannot open ``/dev/kvm`` while its capability probe found KVM, so a
stock daemon finds its cached capabilities stale at every look-up and probes QEMU again:
32-51 s per define here, 0.02 s with a QEMU user that can open it (docs/libvirt.md,
"start timing"). Guests run under TCG either way; the user only changes that check.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

DAEMONS = ("virtlogd", "libvirtd")
START_WAIT_S = 15.0
STOP_WAIT_S = 15.0
#: Held shared by every test session using the daemons, exclusively while one decides
#: to start or stop them.
USERS_LOCK = Path("/run/lock" if Path("/run/lock").is_dir() else "/tmp") / \
    "hvbench-test-libvirtd.lock"
#: NAME.pid: a daemon a test session started (whoever leaves last stops it).
STARTED_DIR = Path("/run/hvbench-test-daemons")


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


#: The libvirt QEMU driver's configuration a started libvirtd sees instead of the host's.
QEMU_CONF = Path("/etc/libvirt/qemu.conf")
#: Mount the private copy (``$1``) over :data:`QEMU_CONF`, then become libvirtd; run by
#: ``unshare --mount`` so the mount exists only in the daemon's namespace.
_PRIVATE_CONF_SCRIPT = f'mount --bind "$1" {QEMU_CONF} && exec libvirtd -d'
#: A ``user`` or ``group`` setting of qemu.conf (not a commented one).
_USER_LINE = re.compile(r"^\s*(user|group)\s*=")


def _private_qemu_conf() -> Path:
    """The host's qemu.conf with QEMU run as root (see the module docstring)."""
    STARTED_DIR.mkdir(parents=True, exist_ok=True)
    conf = STARTED_DIR / "qemu.conf"
    host = QEMU_CONF.read_text() if QEMU_CONF.is_file() else ""
    # The host's own user and group lines are dropped, not overridden: libvirt reads
    # the first entry of a repeated key.
    kept = [line for line in host.splitlines() if not _USER_LINE.match(line)]
    conf.write_text("\n".join([*kept, "# hvbench tests: QEMU as root",
                               'user = "root"', 'group = "root"', ""]))
    return conf


def _argv(name: str) -> list[str]:
    if name != "libvirtd" or not QEMU_CONF.is_file():
        return [name, "-d"]
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            _PRIVATE_CONF_SCRIPT, "sh", str(_private_qemu_conf())]


def _start(name: str) -> int:
    # A clean environment: the daemon outlives the test that started it, so it must not
    # inherit that test's TMPDIR or work directory.
    env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")}
    subprocess.run(_argv(name), env=env, check=True, timeout=30)
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


def _started_by_tests() -> list[tuple[str, int]]:
    """(name, pid) of the running daemons a test session started, newest last."""
    found = []
    for name in DAEMONS:
        with contextlib.suppress(OSError, ValueError):
            pid = int((STARTED_DIR / f"{name}.pid").read_text())
            if _pid_of(name) == pid:
                found.append((name, pid))
    return found


def _stop_if_last(handle: IO[str]) -> None:
    """Stop the daemons test sessions started when no other session holds the users'
    lock (this one's shared hold is given up first, then taken back exclusively)."""
    fcntl.flock(handle, fcntl.LOCK_UN)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return  # another session still uses them: the last one out stops them
    try:
        for name, pid in reversed(_started_by_tests()):
            _stop(pid)
            (STARTED_DIR / f"{name}.pid").unlink(missing_ok=True)
        (STARTED_DIR / "qemu.conf").unlink(missing_ok=True)
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def running_daemons() -> Iterator[list[str]]:
    """Yield the names of the daemons this started (empty when both were running).

    Raises:
        RuntimeError: a daemon did not write its pid file within :data:`START_WAIT_S`.
    """
    started: list[str] = []
    with USERS_LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            for name in DAEMONS:
                if _pid_of(name) is None:
                    pid = _start(name)
                    STARTED_DIR.mkdir(parents=True, exist_ok=True)
                    (STARTED_DIR / f"{name}.pid").write_text(str(pid))
                    started.append(name)
            _wait_socket(time.monotonic() + START_WAIT_S)
        finally:
            # From exclusive (deciding) to shared (using): others may join now.
            fcntl.flock(handle, fcntl.LOCK_SH)
        try:
            yield started
        finally:
            _stop_if_last(handle)
