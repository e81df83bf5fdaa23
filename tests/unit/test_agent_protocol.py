"""GuestAgent's wire protocol against a scripted agent on a real unix socket.

The fake replays what qemu-guest-agent sends; the real agent is exercised by the
integration tests.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hvbench.errors import AgentError, GuestTimeoutError
from hvbench.platforms.agent import GuestAgent


class ScriptedAgent(threading.Thread):
    """Answers agent commands; sends stale bytes first, as a reused channel may."""

    def __init__(self, path: Path, exec_polls: int = 2, stale: bytes = b'{"return": 7}\n') -> None:
        super().__init__(daemon=True)
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(1)
        self.exec_polls = exec_polls
        self.stale = stale
        self.received: list[dict[str, Any]] = []

    def reply(self, msg: dict[str, Any]) -> bytes:  # noqa: PLR0911 - one branch per command
        cmd = msg["execute"]
        if cmd == "guest-sync-delimited":
            return b"\xff" + json.dumps({"return": msg["arguments"]["id"]}).encode() + b"\n"
        if cmd == "guest-exec":
            return b'{"return": {"pid": 42}}\n'
        if cmd == "guest-exec-status":
            self.exec_polls -= 1
            if self.exec_polls > 0:
                return b'{"return": {"exited": false}}\n'
            out = base64.b64encode(b"hello\n").decode()
            return (
                json.dumps({"return": {"exited": True, "exitcode": 3, "out-data": out}}).encode()
                + b"\n"
            )
        if cmd == "guest-bogus":
            return b'{"error": {"class": "CommandNotFound", "desc": "no such command"}}\n'
        if cmd == "guest-silent":
            return b""
        if cmd == "guest-late":
            time.sleep(0.3)  # answers after the client gave up on it
            return b'{"return": {"late": true}}\n'
        return b'{"return": {}}\n'

    def run(self) -> None:
        conn, _ = self.server.accept()
        conn.sendall(self.stale)
        buf = b""
        with conn:
            while chunk := conn.recv(4096):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    msg = json.loads(line)
                    self.received.append(msg)
                    conn.sendall(self.reply(msg))


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[tuple[GuestAgent, ScriptedAgent]]:
    path = tmp_path / "qga.sock"
    fake = ScriptedAgent(path)
    fake.start()
    client = GuestAgent(path)
    client.connect(time.monotonic() + 5, lambda: True)
    yield client, fake
    client.close()
    fake.server.close()


def test_sync_discards_stale_replies(agent: tuple[GuestAgent, ScriptedAgent]) -> None:
    client, fake = agent
    client.ping()
    assert fake.received[0]["execute"] == "guest-sync-delimited"
    assert fake.received[-1] == {"execute": "guest-ping"}


def test_exec_polls_until_exit(agent: tuple[GuestAgent, ScriptedAgent]) -> None:
    client, fake = agent
    result = client.run(["echo", "hello"], timeout=5, env={"A": "1"}, stdin=b"in")
    assert (result.exit_code, result.stdout, result.stderr) == (3, b"hello\n", b"")
    assert result.argv == ("echo", "hello")
    started = next(m for m in fake.received if m["execute"] == "guest-exec")["arguments"]
    assert started["path"] == "timeout" and started["arg"][:3] == ["-s", "KILL", "6"]
    assert started["arg"][3:] == ["echo", "hello"]
    assert started["env"] == ["A=1"] and base64.b64decode(started["input-data"]) == b"in"


def test_agent_error_is_raised(agent: tuple[GuestAgent, ScriptedAgent]) -> None:
    client, _ = agent
    with pytest.raises(AgentError, match="guest-bogus failed: no such command"):
        client.execute("guest-bogus")


def test_silence_times_out(agent: tuple[GuestAgent, ScriptedAgent]) -> None:
    client, _ = agent
    with pytest.raises(GuestTimeoutError):
        client.execute("guest-silent", timeout=0.2)


def test_an_abandoned_reply_is_not_taken_for_the_next_one(
    agent: tuple[GuestAgent, ScriptedAgent],
) -> None:
    # A request given up on (a timeout here; Ctrl-C during the read in a run) has its reply
    # arrive later; the next command must not read it as its own.
    client, fake = agent
    with pytest.raises(GuestTimeoutError):
        client.execute("guest-late", timeout=0.1)
    result = client.run(["echo", "hello"], timeout=5)
    assert (result.exit_code, result.stdout) == (3, b"hello\n")
    commands = [m["execute"] for m in fake.received]
    late = commands.index("guest-late")
    assert commands[late + 1] == "guest-sync-delimited"


def test_connect_fails_fast_when_qemu_is_dead(tmp_path: Path) -> None:
    client = GuestAgent(tmp_path / "absent.sock")
    with pytest.raises(AgentError, match="QEMU exited"):
        client.connect(time.monotonic() + 5, lambda: False)


def test_connect_respects_deadline(tmp_path: Path) -> None:
    client = GuestAgent(tmp_path / "absent.sock")
    started = time.monotonic()
    with pytest.raises(AgentError, match="did not answer"):
        client.connect(time.monotonic() + 0.3, lambda: True)
    assert time.monotonic() - started < 2
