"""The evidence a failed repetition keeps from a running guest: each read is one titled
block, and a read that fails is that block's text instead of an error (the real guest
path is tests/integration/test_cpu_kind.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hvbench.errors import GuestError
from hvbench.platforms.base import ExecResult
from hvbench.platforms.evidence import AGENT_TIMEOUT_S, failure_evidence

DEVICE = "/machine/peripheral-anon/device[1]/virtio-backend"


class FakeGuest:
    """QMP with one virtio-net device of two queues; the agent answers per program."""

    def __init__(self, *, qmp_fails: bool = False, silent: Sequence[str] = ()) -> None:
        self.qmp_fails = qmp_fails
        self.silent = set(silent)
        self.timeouts: list[float] = []

    def qmp(self, command: str, **arguments: object) -> Any:
        if self.qmp_fails:
            raise GuestError("guest vm has no QMP connection")
        if command == "x-query-virtio":
            return [{"name": "virtio-blk", "path": "/blk"}, {"name": "virtio-net",
                                                             "path": DEVICE}]
        if command == "x-query-virtio-status":
            return {"status": "ok", "isr": 0, "broken": False, "num-vqs": 2}
        return {"queue-index": arguments["queue"], "last-avail-idx": 7, "used-idx": 5,
                "vring-desc": 123, "vring-num": 256}

    def exec(self, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None,
             env: Mapping[str, str] | None = None) -> ExecResult:
        self.timeouts.append(timeout)
        if argv[0] in self.silent:
            raise GuestError(f"guest command {argv[0]!r} did not finish in time")
        out = {"cat": b"  eth0: 10 1 0 0\n", "grep": b" 29: 4 PCI-MSI virtio2-input.0\n"}
        return ExecResult(tuple(argv), 0, out.get(argv[0], b"<4>NETDEV WATCHDOG\n"), b"", 0.1)


def test_every_block_is_titled_and_the_queues_keep_their_indices_not_addresses() -> None:
    guest = FakeGuest()
    text = failure_evidence(guest, with_nics=True)
    assert text.count("\n[") == 3 and text.startswith("[kernel warnings")
    assert "NETDEV WATCHDOG" in text and "eth0: 10" in text and "virtio2-input.0" in text
    assert f"{DEVICE} queue 1: queue-index=1, last-avail-idx=7, used-idx=5, vring-num=256" \
        in text
    assert "vring-desc" not in text and "/blk" not in text
    assert guest.timeouts == [AGENT_TIMEOUT_S] * 3


def test_a_read_that_fails_is_its_blocks_text_and_the_others_are_still_read() -> None:
    text = failure_evidence(FakeGuest(qmp_fails=True, silent=["sh"]), with_nics=True)
    assert "[kernel warnings and errors (dmesg, levels 0-4)]\ncould not be read: " \
        "GuestError: guest command 'sh' did not finish in time" in text
    assert "could not be read: GuestError: guest vm has no QMP connection" in text
    assert "eth0: 10" in text


def test_without_nics_only_the_kernel_is_read() -> None:
    guest = FakeGuest()
    text = failure_evidence(guest, with_nics=False)
    assert text == "[kernel warnings and errors (dmesg, levels 0-4)]\n<4>NETDEV WATCHDOG"
    assert len(guest.timeouts) == 1
