"""What a QEMU guest can still tell about a repetition that failed in it.

A failed repetition keeps its console tail, but the guest kernel's own warnings (a NIC's
transmit watchdog, a hung task, a block I/O error) are not on the console: the
recommended command line has ``quiet``, which keeps warnings off it. Read after the
failure, while the guest still runs, they and the state of its virtio-net queues as
QEMU holds them (``x-query-virtio-queue-status``: the guest's avail index against
what QEMU took and returned, and whether it was signalled) tell a guest that stopped
refilling its queues from a QEMU that stopped delivering, and either from a workload's
own failure.

Every read is bounded (QMP answers at once; each agent command gets
:data:`AGENT_TIMEOUT_S`) and a read that fails is itself a line of the evidence: the
agent may be gone with the guest's kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from hvbench.errors import HvbenchError
from hvbench.platforms.base import ExecResult

#: Seconds each agent command of the evidence gets (a guest agent that stopped
#: answering costs the failure record no more than this per command).
AGENT_TIMEOUT_S = 10.0
#: Kernel log lines kept (warnings and worse, newest last).
DMESG_LINES = 25
#: The guest commands read, each with what it shows.
_GUEST_READS: tuple[tuple[str, Sequence[str]], ...] = (
    # busybox's dmesg has no level filter: -r prints each line's <level> (0-4 are
    # emergency to warning).
    ("kernel warnings and errors (dmesg, levels 0-4)",
     ["sh", "-c", f"dmesg -r | grep '^<[0-4]>' | tail -n {DMESG_LINES}"]),
)
_NIC_READS: tuple[tuple[str, Sequence[str]], ...] = (
    ("NIC counters (/proc/net/dev)", ["cat", "/proc/net/dev"]),
    ("virtio interrupts (/proc/interrupts)", ["grep", "virtio", "/proc/interrupts"]),
)


class _Guest(Protocol):
    """What the evidence reads from a guest: QMP and the agent."""

    def qmp(self, command: str, **arguments: object) -> Any: ...

    def exec(self, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None,
             env: Mapping[str, str] | None = None) -> ExecResult: ...


def failure_evidence(guest: _Guest, *, with_nics: bool) -> str:
    """The guest's kernel warnings and, with ``with_nics``, its virtio-net queues as
    QEMU has them and its own NIC counters and virtio interrupts: one titled block each.

    Never raises for what it reads: a read that fails (QMP gone, the agent silent for
    :data:`AGENT_TIMEOUT_S`) is reported as that block's text.
    """
    blocks = [_guest_block(guest, title, argv) for title, argv in _GUEST_READS]
    if with_nics:
        blocks.append(_attempt("virtio-net queues (QMP x-query-virtio-queue-status)",
                               lambda: virtio_net_queues(guest)))
        blocks += [_guest_block(guest, title, argv) for title, argv in _NIC_READS]
    return "\n".join(blocks)


def virtio_net_queues(guest: _Guest) -> str:
    """One line per virtio-net device (status, ISR, broken) and per queue (indices,
    signalled, inuse) from QEMU's QMP.

    Raises :class:`HvbenchError` (from the guest's QMP) when QEMU does not answer.
    """
    lines: list[str] = []
    for device in guest.qmp("x-query-virtio"):
        if device.get("name") != "virtio-net":
            continue
        path = device["path"]
        status = guest.qmp("x-query-virtio-status", path=path)
        lines.append(f"{path}: status {status.get('status')}, isr {status.get('isr')}, "
                     f"broken {status.get('broken')}, vqs {status.get('num-vqs')}")
        for queue in range(int(status.get("num-vqs", 0))):
            state = guest.qmp("x-query-virtio-queue-status", path=path, queue=queue)
            # The ring addresses say nothing about a stall; the indices do.
            lines.append(f"{path} queue {queue}: " + ", ".join(
                f"{k}={v}" for k, v in state.items()
                if not k.startswith("vring-") or k == "vring-num"))
    return "\n".join(lines) or "no virtio-net device"


def _guest_block(guest: _Guest, title: str, argv: Sequence[str]) -> str:
    def read() -> str:
        done = guest.exec(argv, timeout=AGENT_TIMEOUT_S)
        return done.text().rstrip() or f"(nothing; exit code {done.exit_code})"
    return _attempt(title, read)


def _attempt(title: str, read: Callable[[], str]) -> str:
    try:
        body = read()
    except (HvbenchError, OSError, KeyError, TypeError, ValueError) as exc:
        # Evidence, not a failure: what stopped the read is what it shows.
        body = f"could not be read: {type(exc).__name__}: {exc}"
    return f"[{title}]\n{body}"
