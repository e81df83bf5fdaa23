"""BackgroundProcess: one long-running external program (a server, a transfer client),
started and stopped with the same habits as :class:`~hvbench.platforms.qemu.QemuPlatform`.

``__init__`` only stores; ``start()`` spawns the program in its own session with
``PR_SET_PDEATHSIG=SIGKILL`` (so even ``kill -9`` of hvbench takes it down), its output
going to a log file in a private directory, registers it in
:data:`~hvbench.platforms.registry.REGISTRY` and waits until a readiness check passes;
``stop()`` goes soft to hard (SIGTERM to the process group, then SIGKILL), unregisters
it and removes the log directory. It is safe to call twice and is a context manager.

A process may run inside a network namespace: its argv is then prefixed with
``ip netns exec NS``, which enters the namespace and *execs* the program (same pid).

A client that runs to completion (a transfer) uses the same class: its output can go to
a file the caller keeps (``output``), its stdout into a pipe read by a second process
(``pipe_stdout``, ``stdin``), and :meth:`BackgroundProcess.wait` waits for its exit
within a timeout; ``stop()`` still ends it soft to hard if it has not exited.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from hvbench.errors import CommandError, GuestTimeoutError, HostError, RootRequiredError, tail
from hvbench.host import facts, interrupt, proctree, trace
from hvbench.host.commands import require_tool
from hvbench.host.paths import make_owned_dir
from hvbench.host.proctree import die_with_parent
from hvbench.host.started import StartStop
from hvbench.platforms.base import ExecResult
from hvbench.platforms.registry import REGISTRY, ProcessRegistry

_CLONE_NEWNET = 0x40000000
#: How long stop() waits after SIGTERM before SIGKILL, seconds.
TERM_WAIT_S = 3.0
#: How long a killed command's output pipes are still read, seconds.
PIPE_WAIT_S = 1.0
#: Interval between two readiness checks, seconds.
READY_POLL_S = 0.02
#: connect() timeout of :func:`tcp_port_open`, seconds.
CONNECT_TIMEOUT_S = 0.2
NETNS_DIR = Path("/run/netns")


def _join_then_die(procs: Sequence[Path]) -> Callable[[], None]:
    """A preexec function: write the child's pid to each of ``procs`` (one per v1
    hierarchy), then :func:`~hvbench.host.proctree.die_with_parent`. Runs between fork
    and exec: it only writes files."""
    def prepare() -> None:
        for path in procs:
            with path.open("w") as handle:
                handle.write(str(os.getpid()))
        die_with_parent()
    return prepare


def netns_argv(argv: Sequence[str], netns: str | None) -> list[str]:
    """``argv`` as run inside network namespace ``netns`` (unchanged when None)."""
    return ["ip", "netns", "exec", netns, *argv] if netns else list(argv)


def run_in_group(
    argv: Sequence[str],
    *,
    timeout: float,
    stdin: bytes | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    what: str = "command",
    cgroup_procs: Path | Sequence[Path] | None = None,
) -> ExecResult:
    """Run ``argv`` to completion in its own session (with PR_SET_PDEATHSIG=SIGKILL),
    capturing stdout and stderr, as :meth:`NativePlatform.exec` does. With
    ``cgroup_procs`` (a cgroup's ``cgroup.procs``, or several) the child joins them before
    it execs, so all it does, and all its children, are charged there; a failed join
    fails the start (:class:`OSError` from Popen, raised as
    :class:`~hvbench.errors.HostError`).

    On timeout (or Ctrl-C, SIGTERM) the whole process group is killed; a timeout raises
    :class:`GuestTimeoutError` naming ``what``. A non-zero exit is not an error: it is in
    the result.
    """
    started = time.monotonic()
    full_env = {**os.environ, **env} if env else None
    joins = [cgroup_procs] if isinstance(cgroup_procs, Path) else list(cgroup_procs or ())
    prepare = _join_then_die(joins) if joins else die_with_parent
    # Not `with Popen`: its exit waits for the process without a bound.
    try:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env, cwd=cwd,
            start_new_session=True, preexec_fn=prepare,  # noqa: PLW1509
        )
    except subprocess.SubprocessError as exc:
        # Popen reports a failing preexec_fn so; the only one that can fail is the join.
        where = ", ".join(str(path.parent) for path in joins) or "(none)"
        raise HostError(f"{what}: could not join cgroup {where}: {exc}") from exc
    try:
        out, err = _communicate(proc, stdin, started + timeout)
    except BaseException as exc:
        _kill_command_tree(proc)
        if isinstance(exc, subprocess.TimeoutExpired):
            raise GuestTimeoutError(
                f"{what}: {' '.join(argv)!r} did not finish in {timeout:g} s"
            ) from exc
        raise
    result = ExecResult(tuple(argv), proc.returncode, out, err, time.monotonic() - started)
    trace.record("host-exec", result.seconds, argv)
    return result


def _communicate(proc: subprocess.Popen[bytes], stdin: bytes | None,
                 deadline: float) -> tuple[bytes, bytes]:
    """``proc.communicate`` until ``deadline`` (then :class:`TimeoutExpired`). Once
    ``proc`` has exited, descendants still holding its output pipes open (fio's job
    processes, in a session of their own) get :data:`PIPE_WAIT_S` to let go, then are
    killed: the output is complete, nothing is worth waiting for."""
    exited_at: float | None = None
    while True:
        now = time.monotonic()
        try:
            return proc.communicate(stdin, timeout=max(0.0, min(PIPE_WAIT_S, deadline - now)))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise
        if proc.poll() is None:
            continue
        if exited_at is None:
            exited_at = time.monotonic()
        elif time.monotonic() - exited_at >= PIPE_WAIT_S:
            open_pipes = [p for p in (proc.stdout, proc.stderr) if p and not p.closed]
            proctree.kill_strays([holder for pipe in open_pipes
                                  for holder in proctree.pipe_holders(pipe.fileno())])


def _kill_command_tree(proc: subprocess.Popen[bytes]) -> None:
    """Kill ``proc``'s whole tree (also members in another session, such as fio's
    jobs) and collect it, waiting at most :data:`PIPE_WAIT_S` for its output pipes: a
    survivor holding them (uninterruptible I/O) must not make hvbench wait."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proctree.stop_tree(proc.pid)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=PIPE_WAIT_S)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=PIPE_WAIT_S)


class BackgroundProcess(StartStop):
    """One external long-running process, e.g. ``iperf3 -s`` in a lab host.

    ``name`` labels it in errors and in the registry; ``netns`` runs it in that network
    namespace (root needed); ``env`` is added to hvbench's environment; ``cwd`` is its
    working directory (default: hvbench's).

    Output: stdout and stderr go to a log file in a private directory removed by
    :meth:`stop`, or to ``output`` (truncated at start; the caller's, kept after stop).
    With ``pipe_stdout`` only stderr goes there and stdout into a pipe, :attr:`stdout`,
    for the ``stdin`` of a second process (default stdin: /dev/null).
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        name: str,
        netns: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        output: Path | None = None,
        stdin: IO[bytes] | None = None,
        pipe_stdout: bool = False,
        registry: ProcessRegistry = REGISTRY,
    ) -> None:
        self.name = name
        self.netns = netns
        self._argv = list(argv)
        self._env = dict(env) if env else None
        self._cwd = cwd
        self._output = output
        self._stdin = stdin
        self._pipe_stdout = pipe_stdout
        self._registry = registry
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_dir: Path | None = None
        #: time.monotonic() just before the process was spawned (None before start).
        self.spawned_at: float | None = None
        #: The exit status of the last run once stopped (negative: killed by a signal).
        self.returncode: int | None = None

    @property
    def argv(self) -> list[str]:
        """The full argv as executed (with the ``ip netns exec NS`` prefix if any)."""
        return netns_argv(self._argv, self.netns)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def stdout(self) -> IO[bytes] | None:
        """The read end of the stdout pipe (``pipe_stdout``) while running. Hand it to
        the next process as ``stdin``, then close it: only the two processes should
        hold the pipe, so the writer sees EPIPE if the reader dies."""
        return self._proc.stdout if self._proc else None

    @property
    def log_path(self) -> Path | None:
        """The file holding the process's output: ``output`` if given, else the private
        log (None when stopped)."""
        if self._output is not None:
            return self._output
        return self._log_dir / "output.log" if self._log_dir else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the process's output ("" once stopped)."""
        path = self.log_path
        if path is None:
            return ""
        try:
            return tail(path.read_text(errors="replace"), lines)
        except OSError:
            return ""

    def start(self, ready: Callable[[], bool] | None = None, timeout: float = 10.0) -> None:
        """Start the process and poll ``ready()`` every 20 ms until it returns True
        (no ``ready``: return once spawned).

        Raises :class:`CommandError` (argv, exit status or None for a timeout, output
        tail) if the process exits before it is ready or ``timeout`` seconds pass;
        :class:`ToolMissingError` / :class:`RootRequiredError` if it cannot be started;
        :class:`HostError` if it is already running. Nothing is left behind on error.
        """
        if self._proc is not None:
            raise HostError(f"{self.name} is already running (pid {self._proc.pid})")
        self.returncode = None
        deadline = time.monotonic() + timeout
        try:
            self._spawn()
            self._wait_ready(ready, deadline, timeout)
        except BaseException:
            self.stop()
            raise

    def _spawn(self) -> None:
        if self.netns is not None:
            if not facts.is_root():
                raise RootRequiredError(f"running {self.name} in network namespace "
                                        f"{self.netns}")
            require_tool("ip")
        require_tool(self._argv[0])
        if self._output is None:
            self._log_dir = make_owned_dir(Path(tempfile.gettempdir()), "hvb-proc-")
        path = self.log_path
        if path is None:
            raise HostError(f"internal: {self.name} has no output file")
        env = {**os.environ, **self._env} if self._env else None
        with path.open("wb") as log:
            # Stamped here, after the checks and the log file, so a caller timing the
            # process (a transfer's request mark) counts the spawn and nothing before.
            self.spawned_at = time.monotonic()
            self._proc = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL if self._stdin is None else self._stdin,
                stdout=subprocess.PIPE if self._pipe_stdout else log,
                stderr=log if self._pipe_stdout else subprocess.STDOUT,
                env=env, cwd=self._cwd, start_new_session=True,
                preexec_fn=die_with_parent,  # noqa: PLW1509
            )
        self._registry.add(self)

    def _wait_ready(self, ready: Callable[[], bool] | None, deadline: float,
                    timeout: float) -> None:
        proc = self._proc
        if proc is None or ready is None:
            return
        while True:
            if ready():
                return
            status = proc.poll()
            if status is not None or time.monotonic() >= deadline:
                output = self.log_tail()
                if status is None:
                    output += f"\n(not ready after {timeout:g} s)"
                raise CommandError(self.argv, status, output, f"starting {self.name}")
            time.sleep(READY_POLL_S)

    def wait(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` seconds for the process to exit: its exit status, or
        None if it still runs (it is left running: :meth:`stop` ends it). Once stopped
        (e.g. by ``REGISTRY.stop_all()`` on Ctrl-C) the status it ended with. Raises
        :class:`HostError` if it was never started."""
        proc = self._proc
        if proc is None:
            if self.returncode is None:
                raise HostError(f"{self.name} is not started")
            return self.returncode
        try:
            return proc.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        """SIGTERM to the process group, up to :data:`TERM_WAIT_S` s, then SIGKILL;
        unregister; remove the log directory (not a caller's ``output``). Safe twice;
        never raises for a process that is already gone."""
        proc = self._proc
        try:
            if proc is not None:
                _terminate_group(proc)
        finally:
            if proc is not None:
                self._registry.discard(self)
                self.returncode = proc.returncode
                if proc.stdout is not None:
                    proc.stdout.close()
            self._proc = None
            if self._log_dir is not None:
                shutil.rmtree(self._log_dir, ignore_errors=True)
                self._log_dir = None


def _terminate_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop ``proc`` (a session leader), the rest of its process group and its
    descendants that left the group (found before the leader's exit hides them)."""
    members = proctree.descendants(proc.pid) if proc.poll() is None else []
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            # After a stop signal nobody waits for a graceful exit.
            proc.wait(timeout=0.0 if interrupt.received() else TERM_WAIT_S)
        except subprocess.TimeoutExpired:
            members += proctree.kill_tree(proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=PIPE_WAIT_S)
    # Children that ignored SIGTERM after their leader left: the group id is still
    # reserved while any member lives, so this reaches only them.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proctree.kill_strays(members)


def tcp_listening(pid: int | None, port: int) -> bool:
    """True if a socket in ``pid``'s network namespace listens on TCP ``port``, read from
    /proc/PID/net/tcp and tcp6 (state 0A), without connecting.

    A readiness check must not connect: iperf3 takes a bare connection for a test,
    then resets and re-opens its listener, and a client that connects during that
    reset sees its test stall and fail ("select failed: Bad file descriptor").
    """
    if pid is None:
        return False
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A" and \
                    int(fields[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


def tcp_port_open(address: str, port: int, netns: str | None = None) -> bool:
    """True if a TCP connect() to ``address:port`` succeeds within 0.2 s.

    Without ``netns`` the connect is made from hvbench's own (root) namespace, which
    reaches lab hosts through the lab bridge. With ``netns`` it is made from inside that
    namespace: a short-lived thread enters it with setns(2) (root needed), so no
    process is spawned per check. Never raises for an unreachable port.
    """
    if netns is None:
        return _connect(address, port)
    result: list[bool] = [False]

    def probe() -> None:
        if _enter_netns(netns):
            result[0] = _connect(address, port)

    thread = threading.Thread(target=probe, name=f"hvbench-netns-{netns}", daemon=True)
    thread.start()
    thread.join()
    return result[0]


def _enter_netns(netns: str) -> bool:
    """Move the calling thread (only) into network namespace ``netns``."""
    try:
        fd = os.open(NETNS_DIR / netns, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.setns(fd, _CLONE_NEWNET)) == 0
    finally:
        os.close(fd)


def _connect(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=CONNECT_TIMEOUT_S):
            return True
    except OSError:
        return False
