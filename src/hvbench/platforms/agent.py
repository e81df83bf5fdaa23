"""A synchronous client for qemu-guest-agent over the host end of its virtio-serial port.

The agent speaks QMP-style JSON without a greeting. A virtio-serial channel may hold
stale bytes from an earlier connection, so every session starts with
``guest-sync-delimited``: the agent answers with a 0xFF byte followed by the echoed id,
and everything before that reply is discarded.
"""

from __future__ import annotations

import base64
import contextlib
import json
import random
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hvbench.errors import AgentError, GuestTimeoutError
from hvbench.host import trace
from hvbench.platforms.base import ExecResult

_SYNC_REPLY_WAIT = 0.5
_POLL_MIN, _POLL_MAX = 0.01, 0.2


class GuestAgent:
    """One connection to a guest's qemu-guest-agent socket.

    ``connect`` retries until the agent answers or the deadline passes; every later call
    takes its own timeout. Raises :class:`AgentError` on protocol errors and
    :class:`GuestTimeoutError` when a guest command outlives its timeout.
    """

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self._sock: socket.socket | None = None
        self._buffer = b""
        # True from sending a request until its reply is read. A request abandoned in
        # between (a timeout, Ctrl-C during the read) leaves its reply on the channel,
        # where the next command would take it for its own: resynchronise first.
        self._awaiting = False

    # -- connection -------------------------------------------------------------------
    def connect(self, deadline: float, alive: Callable[[], bool]) -> None:
        """Connect and synchronise, retrying until ``deadline`` (a ``time.monotonic``).

        ``alive`` is polled between tries so a dead QEMU fails fast. Raises
        :class:`AgentError` if the deadline passes first.
        """
        while True:
            if not alive():
                raise AgentError("QEMU exited before the guest agent answered")
            if time.monotonic() >= deadline:
                raise AgentError("the guest agent did not answer before the boot timeout")
            with contextlib.suppress(OSError, AgentError):
                if self._sock is None:
                    self._open()
                if self._sync(min(_SYNC_REPLY_WAIT, max(deadline - time.monotonic(), 0.01))):
                    return
            time.sleep(0.02)

    def _open(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(self.socket_path))
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self._buffer = b""

    def _sync(self, wait: float) -> bool:
        token = random.randint(1, 2**31 - 1)  # noqa: S311 - a nonce, not a secret
        self._awaiting = True
        self._send({"execute": "guest-sync-delimited", "arguments": {"id": token}})
        deadline = time.monotonic() + wait
        while True:
            try:
                reply = self._read_message(deadline)
            except GuestTimeoutError:
                return False
            if reply.get("return") == token:
                self._awaiting = False
                return True

    def _resync(self, timeout: float) -> None:
        """Discard the reply of an abandoned request; raises :class:`AgentError` when the
        agent does not echo the sync id within ``timeout`` seconds."""
        self._buffer = b""
        if not self._sync(timeout):
            raise AgentError(
                f"the guest agent did not resynchronise within {timeout:g} s "
                "after an abandoned request"
            )

    def close(self) -> None:
        """Close the connection (safe to call twice)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    # -- wire ------------------------------------------------------------------------
    def _send(self, message: Mapping[str, Any]) -> None:
        if self._sock is None:
            raise AgentError("guest agent is not connected")
        try:
            self._sock.sendall(json.dumps(message).encode() + b"\n")
        except OSError as exc:
            raise AgentError(f"guest agent connection failed: {exc}") from exc

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while True:
            # 0xFF marks the start of a guest-sync-delimited reply; it is not JSON.
            self._buffer = self._buffer.lstrip(b"\xff\n\r ")
            line, sep, rest = self._buffer.partition(b"\n")
            if sep:
                self._buffer = rest
                return self._decode(line)
            self._receive(deadline)

    def _receive(self, deadline: float) -> None:
        if self._sock is None:
            raise AgentError("guest agent is not connected")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise GuestTimeoutError("no reply from the guest agent in time")
        self._sock.settimeout(remaining)
        try:
            chunk = self._sock.recv(65536)
        except TimeoutError as exc:
            raise GuestTimeoutError("no reply from the guest agent in time") from exc
        except OSError as exc:
            raise AgentError(f"guest agent connection failed: {exc}") from exc
        if not chunk:
            raise AgentError("guest agent closed the connection")
        self._buffer += chunk

    @staticmethod
    def _decode(line: bytes) -> dict[str, Any]:
        try:
            message = json.loads(line.lstrip(b"\xff"))
        except ValueError as exc:
            raise AgentError(f"malformed reply from the guest agent: {line[:200]!r}") from exc
        if not isinstance(message, dict):
            raise AgentError(f"malformed reply from the guest agent: {line[:200]!r}")
        return message

    # -- commands --------------------------------------------------------------------
    def execute(
        self, command: str, arguments: Mapping[str, Any] | None = None, timeout: float = 10.0
    ) -> Any:
        """Run one agent command and return its ``return`` value.

        When an earlier request was abandoned before its reply came, the channel is first
        resynchronised (``guest-sync-delimited``, within the same ``timeout``). Raises
        :class:`AgentError` if the agent reports an error or cannot be resynchronised, and
        :class:`GuestTimeoutError` if no reply comes within ``timeout`` seconds.
        """
        message: dict[str, Any] = {"execute": command}
        if arguments:
            message["arguments"] = dict(arguments)
        if self._awaiting:
            self._resync(timeout)
        self._awaiting = True
        self._send(message)
        reply = self._read_message(time.monotonic() + timeout)
        self._awaiting = False
        if "error" in reply:
            error = reply["error"]
            raise AgentError(f"guest agent {command} failed: {error.get('desc', error)}")
        return reply.get("return")

    def ping(self, timeout: float = 5.0) -> None:
        """``guest-ping``; raises like :meth:`execute`."""
        self.execute("guest-ping", timeout=timeout)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Run ``argv`` in the guest with ``guest-exec`` and wait for it.

        The command runs under the guest's ``timeout -s KILL`` so it cannot outlive
        ``timeout`` there either. Raises :class:`GuestTimeoutError` after ``timeout``
        seconds, :class:`AgentError` if the agent refuses to start it.
        """
        started = time.monotonic()
        guarded = ["timeout", "-s", "KILL", str(int(timeout) + 1), *argv]
        arguments: dict[str, Any] = {
            "path": guarded[0], "arg": guarded[1:], "capture-output": True,
        }
        if stdin is not None:
            arguments["input-data"] = base64.b64encode(stdin).decode()
        if env:
            arguments["env"] = [f"{k}={v}" for k, v in env.items()]
        started_reply = self.execute("guest-exec", arguments)
        if not isinstance(started_reply, dict) or not isinstance(started_reply.get("pid"), int):
            raise AgentError(f"guest-exec of {' '.join(argv)!r} returned no pid: {started_reply!r}")
        pid = started_reply["pid"]
        status = self._wait_exec(pid, argv, started + timeout)
        result = ExecResult(
            argv=tuple(argv),
            exit_code=_exit_code(status),
            stdout=base64.b64decode(status.get("out-data", "")),
            stderr=base64.b64decode(status.get("err-data", "")),
            seconds=time.monotonic() - started,
        )
        trace.record("guest-exec", result.seconds, argv)
        return result

    def _wait_exec(self, pid: int, argv: Sequence[str], deadline: float) -> dict[str, Any]:
        interval = _POLL_MIN
        while True:
            status: dict[str, Any] = self.execute("guest-exec-status", {"pid": pid})
            if status.get("exited"):
                return status
            if time.monotonic() >= deadline:
                raise GuestTimeoutError(
                    f"guest command {' '.join(argv)!r} did not finish in time"
                )
            time.sleep(interval)
            interval = min(interval * 1.5, _POLL_MAX)

    def write_file(self, path: str, data: bytes, timeout: float = 30.0) -> None:
        """Write ``data`` to ``path`` in the guest (created or truncated)."""
        handle = self.execute("guest-file-open", {"path": path, "mode": "wb"}, timeout)
        try:
            chunk = 1 << 20  # stay far below the agent's message size limit
            for offset in range(0, len(data), chunk):
                payload = base64.b64encode(data[offset : offset + chunk]).decode()
                self.execute("guest-file-write", {"handle": handle, "buf-b64": payload}, timeout)
        finally:
            self.execute("guest-file-close", {"handle": handle}, timeout)

    def read_file(self, path: str, timeout: float = 30.0) -> bytes:
        """Read the whole file ``path`` from the guest."""
        handle = self.execute("guest-file-open", {"path": path, "mode": "rb"}, timeout)
        out = bytearray()
        try:
            while True:
                reply = self.execute(
                    "guest-file-read", {"handle": handle, "count": 1 << 20}, timeout
                )
                out += base64.b64decode(reply.get("buf-b64", ""))
                if reply.get("eof") or not reply.get("count"):
                    return bytes(out)
        finally:
            self.execute("guest-file-close", {"handle": handle}, timeout)

    def shutdown(self) -> None:
        """Ask the guest to power off. The agent sends no reply on success."""
        self._send({"execute": "guest-shutdown", "arguments": {"mode": "powerdown"}})


def _exit_code(status: Mapping[str, Any]) -> int:
    if "exitcode" in status:
        return int(status["exitcode"])
    if "signal" in status:
        return 128 + int(status["signal"])
    return -1
