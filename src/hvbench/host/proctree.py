"""Finding and stopping a whole process tree, including children that left their
process group or session (fio forks its jobs into their own session).

hvbench makes itself a *child subreaper* (``PR_SET_CHILD_SUBREAPER``): a process whose
parent dies is re-parented to hvbench instead of init, so every process hvbench started,
directly or not, stays a descendant of hvbench and can be found by walking the ppid
chains of ``/proc/*/stat``. Only descendants are ever signalled, never anything else.

Stopping a tree: SIGSTOP every member (a stopped process cannot fork a new one), walk
again until no new member appears, then SIGKILL them all. Killed members that became
hvbench's children are reaped here (no Popen owns them); the tree's root is left to its
Popen. :func:`wait_gone` bounds the wait: a process in uninterruptible I/O (state D)
outlives SIGKILL for a while, and is named rather than waited for.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
PROC = Path("/proc")
#: Rounds of "stop what is new" before the kill: a tree that keeps forking is bounded.
FREEZE_ROUNDS = 20
#: How long :func:`kill_descendants` waits for killed processes to vanish, seconds.
GONE_WAIT_S = 2.0
#: Polling interval of :func:`wait_gone`, seconds.
GONE_POLL_S = 0.02


@dataclass(frozen=True)
class ProcInfo:
    """One process as ``/proc/PID/stat`` describes it."""

    pid: int
    ppid: int
    state: str
    comm: str


def is_subreaper() -> bool:
    """Whether the calling process is a child subreaper now (False when unknown)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        flag = ctypes.c_int(0)
        if int(libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0)) != 0:
            return False
    except (OSError, AttributeError):
        return False
    return flag.value != 0


def become_subreaper(enable: bool = True) -> bool:
    """Make the calling process a child subreaper (``enable=False``: no longer one), so
    orphaned descendants re-parent to it. True on success (Linux >= 3.4); never
    raises."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, int(enable), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _load_prctl() -> Callable[..., int] | None:
    try:
        return cast("Callable[..., int]", ctypes.CDLL(None, use_errno=True).prctl)
    except (OSError, AttributeError):
        return None


#: libc's prctl, resolved once at import in the parent: the child between fork and exec
#: must not dlopen (a thread of the parent may have held the loader's lock at the fork,
#: and the child would wait for it forever, a frozen copy of hvbench).
_PRCTL = _load_prctl()
#: The pid of the process that last forked (set in the parent just before each fork):
#: the child compares it with its parent after PR_SET_PDEATHSIG.
_FORKER = os.getpid()


def _note_forker() -> None:
    global _FORKER  # noqa: PLW0603 - written in the parent, read in the forked child
    _FORKER = os.getpid()


os.register_at_fork(before=_note_forker)


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    """Runs in the child before exec: if the thread that started it dies (even by
    SIGKILL of hvbench), the child gets ``signum`` (SIGKILL by default; a child that
    must stop what it started itself asks for a signal it handles).

    PR_SET_PDEATHSIG follows the *thread* that forked: start processes from a thread
    that lives as long as they should (the main thread, in hvbench). A parent that died
    between the fork and this call sends nothing, so the child checks that its parent
    is still the process that forked it and, if not, sends itself ``signum``."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
    if os.getppid() != _FORKER:
        os.kill(os.getpid(), signum)


def read_stat(pid: int, proc: Path = PROC) -> ProcInfo | None:
    """``pid``'s ppid, state and command name; None once it is gone."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except (OSError, ValueError):
        return None
    # comm is in parentheses and may itself hold spaces or parentheses.
    open_at, close_at = text.find("("), text.rfind(")")
    fields = text[close_at + 2:].split()
    if open_at < 0 or close_at < 0 or len(fields) < 2:
        return None
    return ProcInfo(pid, int(fields[1]), fields[0], text[open_at + 1:close_at])


def all_processes(proc: Path = PROC) -> list[ProcInfo]:
    """Every process of the system (threads excluded)."""
    found = []
    for entry in proc.iterdir():
        if entry.name.isdigit():
            info = read_stat(int(entry.name), proc)
            if info is not None:
                found.append(info)
    return found


def descendants(root: int, processes: Iterable[ProcInfo] | None = None) -> list[ProcInfo]:
    """Every descendant of ``root`` (not ``root`` itself), parents before children."""
    children: dict[int, list[ProcInfo]] = {}
    for info in all_processes() if processes is None else processes:
        children.setdefault(info.ppid, []).append(info)
    found: list[ProcInfo] = []
    queue = [root]
    while queue:
        for child in children.get(queue.pop(0), []):
            found.append(child)
            queue.append(child.pid)
    return found


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _freeze(root: int, include_root: bool) -> dict[int, ProcInfo]:
    """SIGSTOP the tree under ``root`` until a walk finds no new member."""
    frozen: dict[int, ProcInfo] = {}
    if include_root:
        info = read_stat(root)
        if info is not None:
            frozen[root] = info
            _signal(root, signal.SIGSTOP)
    for _ in range(FREEZE_ROUNDS):
        new = [p for p in descendants(root) if p.pid not in frozen and p.state != "Z"]
        if not new:
            break
        for info in new:
            frozen[info.pid] = info
            _signal(info.pid, signal.SIGSTOP)
    return frozen


def kill_tree(root: int, *, include_root: bool = True) -> list[ProcInfo]:
    """SIGKILL ``root`` (with ``include_root``) and every descendant, whatever their
    process group or session; returns what was signalled. Never raises.

    Members re-parented to this process are reaped; ``root`` itself is not (its Popen
    reaps it)."""
    frozen = _freeze(root, include_root)
    for pid in frozen:
        _signal(pid, signal.SIGKILL)
        # A stopped process only acts on SIGKILL once continued on some kernels' paths.
        _signal(pid, signal.SIGCONT)
    reap(pid for pid in frozen if pid != root)
    return list(frozen.values())


def reap(pids: Iterable[int]) -> None:
    """Collect the exit status of those ``pids`` that are this process's exited
    children (orphans handed to the subreaper); others are left alone."""
    me = os.getpid()
    for pid in pids:
        info = read_stat(pid)
        if info is not None and info.ppid == me and info.state == "Z":
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def kill_strays(members: Iterable[ProcInfo], timeout: float = GONE_WAIT_S) -> None:
    """Stop the trees of those ``members`` (seen earlier as descendants of a leader
    that has since exited) that still run as descendants of this process: with the
    leader gone, they can no longer be found from it. Never raises."""
    mine = {p.pid: p for p in descendants(os.getpid())}
    for member in members:
        now = mine.get(member.pid)
        if now is not None and now.comm == member.comm:
            stop_tree(member.pid, timeout=timeout)
            reap([member.pid])


def pipe_holders(fd: int) -> list[ProcInfo]:
    """The descendants of this process that hold the other end of pipe ``fd`` (one of
    ours) open, found through ``/proc/PID/fd``: the strays that keep a command's
    output open after it exited. Never raises."""
    try:
        target = str((PROC / "self" / "fd" / str(fd)).readlink())
    except OSError:
        return []
    holders = []
    for info in descendants(os.getpid()):
        with contextlib.suppress(OSError):
            fds = (PROC / str(info.pid) / "fd").iterdir()
            if any(_link(entry) == target for entry in fds):
                holders.append(info)
    return holders


def _link(path: Path) -> str | None:
    try:
        return str(path.readlink())
    except OSError:
        return None


def wait_gone(pids: Iterable[int], timeout: float) -> list[ProcInfo]:
    """Wait up to ``timeout`` seconds for ``pids`` to exit (zombies count as exited);
    returns those still alive (e.g. in uninterruptible I/O, state D)."""
    pending = set(pids)
    deadline = time.monotonic() + timeout
    while True:
        alive = [info for info in map(read_stat, sorted(pending))
                 if info is not None and info.state not in ("Z", "X")]
        if not alive or time.monotonic() >= deadline:
            return alive
        pending = {info.pid for info in alive}
        time.sleep(GONE_POLL_S)


def stop_tree(root: int, *, include_root: bool = True,
              timeout: float = GONE_WAIT_S) -> list[ProcInfo]:
    """:func:`kill_tree`, then wait up to ``timeout`` seconds for the killed processes
    to exit and reap the orphans among them; returns the survivors (e.g. state D).
    Never raises."""
    killed = kill_tree(root, include_root=include_root)
    survivors = wait_gone([p.pid for p in killed], timeout)
    reap(p.pid for p in killed if p.pid != root)
    return survivors


def kill_descendants(timeout: float = GONE_WAIT_S) -> list[ProcInfo]:
    """SIGKILL every descendant of this process and wait up to ``timeout`` seconds for
    them to exit; returns the survivors (to be named in an error). Never raises."""
    return stop_tree(os.getpid(), include_root=False, timeout=timeout)


def describe(processes: Iterable[ProcInfo]) -> str:
    """``pid (comm, state X)`` for each process, comma separated."""
    return ", ".join(f"{p.pid} ({p.comm}, state {p.state})" for p in processes)
