"""The two sides of a network workload, and servers started on either of them.

An :class:`Endpoint` is a place that runs commands (the host's root namespace, a lab
network namespace, or a guest) plus the addresses others use to reach it. Servers are
started with :func:`start_server`:

- host / netns: a :class:`~hvbench.platforms.process.BackgroundProcess` (``ip netns
  exec NS`` prefix for a netns), ready once its port accepts a TCP connection;
- guest: a fixed ``sh`` script run through the guest agent starts the program in the
  background with its output in a file under /tmp (so ``guest-exec`` returns at once),
  prints its pid and polls ``netstat -ltn`` in the guest until the port listens. No
  shell text is built from values: the program's argv, the log path and the numbers are
  the script's positional parameters.
"""

from __future__ import annotations

import ipaddress
import math
import re
import secrets
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from hvbench.errors import CommandError, GuestError, SpecError
from hvbench.host.started import StopOnExit
from hvbench.platforms.base import ExecResult
from hvbench.platforms.process import BackgroundProcess, tcp_listening, tcp_port_open

EndpointKind = Literal["host", "netns", "guest"]
#: Interval of the guest-side readiness and stop polls, microseconds (busybox usleep).
_GUEST_POLL_US = 50_000
#: How long a guest server gets after SIGTERM before SIGKILL, seconds (whole seconds of
#: the guest's uptime clock, so up to one more).
GUEST_TERM_WAIT_S = 3.0
#: Extra time the agent call gets beyond the script's own deadline, seconds.
_AGENT_SLACK_S = 10.0
_NAME_RE = re.compile(r"[^A-Za-z0-9_.-]+")


class Executor(Protocol):
    """Anything that runs a command somewhere: a Platform, a LabHost, NativePlatform."""

    def exec(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult: ...


@runtime_checkable
class FileWriter(Protocol):
    """An executor that can also write a file where it runs (a guest platform)."""

    def write_file(self, path: str, data: bytes) -> None: ...


@dataclass(frozen=True)
class Endpoint:
    """One side of a network workload.

    ``address`` is the IPv4 others connect to; ``bind_address`` what a server there
    binds to (the root namespace binds its lab address only, never 0.0.0.0).
    ``forwards`` maps a guest port to the host port that reaches it, for user-mode
    (slirp) guests whose servers are reached through ``hostfwd`` on ``address``.
    Raises :class:`SpecError` for a malformed address or an inconsistent kind.
    """

    name: str
    kind: EndpointKind
    executor: Executor = field(compare=False)
    address: str
    bind_address: str
    netns: str | None = None
    forwards: Mapping[int, int] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        for label, value in (("address", self.address), ("bind_address", self.bind_address)):
            try:
                ipaddress.IPv4Address(value)
            except ValueError as exc:
                raise SpecError(f"endpoint {self.name}: {label}: expected an IPv4 address, "
                                f"got {value!r}") from exc
        if self.kind == "host" and ipaddress.IPv4Address(self.bind_address).is_unspecified:
            raise SpecError(f"endpoint {self.name}: the root namespace binds its lab "
                            "address, never 0.0.0.0")
        if (self.kind == "netns") != (self.netns is not None):
            raise SpecError(f"endpoint {self.name}: netns is required for kind netns "
                            "and only valid there")

    def reach(self, port: int) -> tuple[str, int]:
        """``(address, port)`` a client elsewhere connects to for a server on ``port``."""
        return self.address, self.forwards.get(port, port)

    def probe_address(self) -> str:
        """The address a readiness check uses from inside this endpoint."""
        unspecified = ipaddress.IPv4Address(self.bind_address).is_unspecified
        return "127.0.0.1" if unspecified else self.bind_address



# -- servers ---------------------------------------------------------------------------
class ServerHandle(StopOnExit):
    """A server started by :func:`start_server`, already running: ``with`` only stops
    it. ``stop()`` is safe twice."""

    name: str

    @abstractmethod
    def stop(self) -> None:
        """Stop the server; safe twice."""

    @abstractmethod
    def is_running(self) -> bool:
        """True while the server runs."""

    @abstractmethod
    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the server's output."""


class ProcessServer(ServerHandle):
    """A server in the root namespace or a lab netns: a BackgroundProcess."""

    def __init__(self, process: BackgroundProcess) -> None:
        self.name = process.name
        self.process = process

    def stop(self) -> None:
        self.process.stop()

    def is_running(self) -> bool:
        return self.process.is_running()

    def log_tail(self, lines: int = 30) -> str:
        return self.process.log_tail(lines)


def start_server(
    endpoint: Endpoint, argv: Sequence[str], *, name: str, port: int, timeout: float = 15.0
) -> ServerHandle:
    """Start ``argv`` (a server that will listen on TCP ``port``) on ``endpoint`` and
    wait up to ``timeout`` seconds until the port listens.

    Raises :class:`CommandError` (the command, and the server's log or the reason) if
    the port is already taken, the server exits early or is not ready in time;
    :class:`ToolMissingError` / :class:`RootRequiredError` if it cannot start;
    :class:`GuestError` if the guest fails. Nothing is left running when it raises.
    """
    if endpoint.kind == "guest":
        return GuestServer.start(endpoint, argv, name=name, port=port, timeout=timeout)
    address, netns = endpoint.probe_address(), endpoint.netns
    if tcp_port_open(address, port, netns):
        raise CommandError(argv, None, f"{address}:{port} already accepts connections "
                           f"on {endpoint.name} (another server?)", f"starting {name}")
    process = BackgroundProcess(argv, name=name, netns=netns)
    # Ready when its socket listens (read from /proc, never by connecting to it).
    process.start(ready=lambda: tcp_listening(process.pid, port), timeout=timeout)
    return ProcessServer(process)


# Both scripts read the guest's clock from /proc/uptime with the `read` builtin (no fork:
# forks are slow under TCG), so their deadlines hold however slow each poll is.
_GUEST_CLOCK = r"""
now() { read -r up _ </proc/uptime; t=${up%.*}; }
alive() {
    st=
    read -r _ _ st _ <"/proc/$1/stat" 2>/dev/null
    case "$st" in "" | Z | X) return 1 ;; esac
}
"""

# $1 log file, $2 port, $3 seconds to wait, then the server's argv. Exit 0: listening
# (first line "pid N"); 97: exited early; 96: not ready in time; 98: port busy.
_GUEST_START = _GUEST_CLOCK + r"""
log=$1 port=$2 wait=$3
shift 3
listening() {
    netstat -ltn 2>/dev/null | awk -v p="$port" \
        '{ n = split($4, a, ":"); if (a[n] == p) f = 1 } END { exit !f }'
}
if listening; then echo "port $port already listens in the guest"; exit 98; fi
cd /tmp || exit 1
"$@" </dev/null >"$log" 2>&1 &
pid=$!
echo "pid $pid"
now
end=$((t + wait + 1))
while [ "$t" -lt "$end" ]; do
    listening && exit 0
    if ! alive "$pid"; then
        echo "the server exited before it listened; its output:"
        tail -n 30 "$log"; rm -f "$log"; exit 97
    fi
    usleep @POLL@
    now
done
kill -9 "$pid" 2>/dev/null
echo "the server did not listen within $wait s; its output:"
tail -n 30 "$log"; rm -f "$log"
exit 96
""".replace("@POLL@", str(_GUEST_POLL_US))

# $1 pid, $2 expected command name, $3 seconds between SIGTERM and SIGKILL, $4 the log.
_GUEST_STOP = _GUEST_CLOCK + r"""
pid=$1 comm=$2 wait=$3 log=$4
mine() { read -r c <"/proc/$pid/comm" 2>/dev/null && [ "$c" = "$comm" ]; }
if alive "$pid" && mine; then
    kill -TERM "$pid" 2>/dev/null
    now
    end=$((t + wait + 1))
    while alive "$pid" && [ "$t" -lt "$end" ]; do usleep @POLL@; now; done
    alive "$pid" && kill -KILL "$pid" 2>/dev/null
fi
rm -f "$log"
exit 0
""".replace("@POLL@", str(_GUEST_POLL_US))


class GuestServer(ServerHandle):
    """A server started in a guest through its agent; known by its pid there."""

    def __init__(self, endpoint: Endpoint, argv: Sequence[str], name: str, log: str,
                 pid: int) -> None:
        self.name = name
        self.endpoint = endpoint
        self.argv = list(argv)
        self.log = log
        self.pid: int | None = pid

    @classmethod
    def start(cls, endpoint: Endpoint, argv: Sequence[str], *, name: str, port: int,
              timeout: float) -> GuestServer:
        """Start ``argv`` in the guest and wait until ``port`` listens (see
        :func:`start_server`; the agent call gets ``timeout`` + 10 s)."""
        log = f"/tmp/hvbench-{_NAME_RE.sub('_', name)}-{secrets.token_hex(3)}.log"
        wait = max(1, math.ceil(timeout))
        script = ["sh", "-c", _GUEST_START, "sh", log, str(port), str(wait), *argv]
        result = endpoint.executor.exec(script, timeout=timeout + _AGENT_SLACK_S)
        out = (result.stdout + result.stderr).decode(errors="replace")
        match = re.match(r"pid (\d+)", out)
        if not result.ok or match is None:
            raise CommandError(argv, result.exit_code, out,
                               f"starting {name} in guest {endpoint.name}")
        return cls(endpoint, argv, name, log, int(match.group(1)))

    def is_running(self) -> bool:
        """True while the server's pid lives in the guest (False once the guest is
        gone; a :class:`GuestError` from a running guest is raised)."""
        if self.pid is None:
            return False
        try:
            probe = self.endpoint.executor.exec(["kill", "-0", str(self.pid)], timeout=30)
        except GuestError:
            if _executor_alive(self.endpoint.executor):
                raise
            return False
        return probe.ok

    def log_tail(self, lines: int = 30) -> str:
        """The server's output in the guest ("" once stopped or unreadable)."""
        if self.pid is None:
            return ""
        try:
            result = self.endpoint.executor.exec(["tail", "-n", str(lines), self.log],
                                                 timeout=30)
        except GuestError:
            return ""
        return result.text() if result.ok else ""

    def stop(self) -> None:
        """SIGTERM, up to :data:`GUEST_TERM_WAIT_S` s, then SIGKILL; removes the log.

        Safe twice; raises nothing when the guest is already gone (a :class:`GuestError`
        from a guest that still runs is raised)."""
        pid, self.pid = self.pid, None
        if pid is None:
            return
        comm = self.argv[0].rsplit("/", 1)[-1][:15]
        wait = str(math.ceil(GUEST_TERM_WAIT_S))
        script = ["sh", "-c", _GUEST_STOP, "sh", str(pid), comm, wait, self.log]
        try:
            self.endpoint.executor.exec(script, timeout=GUEST_TERM_WAIT_S + _AGENT_SLACK_S)
        except GuestError:
            if _executor_alive(self.endpoint.executor):
                raise


def _executor_alive(executor: Executor) -> bool:
    """False only for an executor that says it is not running (a stopped guest)."""
    is_running = getattr(executor, "is_running", None)
    return bool(is_running()) if callable(is_running) else True


# -- endpoints from the objects that exist elsewhere -------------------------------------
class LabHostLike(Protocol):
    """What :func:`lab_endpoint` needs of a ``hvbench.netlab.lab.LabHost``."""

    name: str
    netns: str
    address: str

    def exec(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult: ...


def lab_endpoint(host: LabHostLike) -> Endpoint:
    """The endpoint of a lab host (a network namespace); servers bind its address."""
    return Endpoint(name=host.name, kind="netns", executor=host, address=host.address,
                    bind_address=host.address, netns=host.netns)


def host_endpoint(executor: Executor, address: str, *, name: str = "host") -> Endpoint:
    """The root namespace, reached (and binding) on its lab address ``address``."""
    return Endpoint(name=name, kind="host", executor=executor, address=address,
                    bind_address=address)


def guest_endpoint(platform: Executor, address: str, *, name: str,
                   reach_address: str | None = None,
                   forwards: Mapping[int, int] | None = None) -> Endpoint:
    """A guest whose NIC has ``address``. For a user-mode (slirp) guest pass
    ``reach_address`` (the host address its ``hostfwd`` listens on) and ``forwards``
    (guest port -> host port)."""
    return Endpoint(name=name, kind="guest", executor=platform,
                    address=reach_address or address, bind_address=address,
                    forwards=dict(forwards or {}))
