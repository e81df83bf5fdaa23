"""tc argv lists that shape one end of a lab link (pure: builds lists, runs nothing).

A link is shaped on both ends (the root-namespace veth and the host's ``eth0``), each
end shaping its own egress, so both directions get the same rate, delay and loss.

Rate: ``tbf``. Its ``burst`` is 10 ms worth of the rate (at least 16 KiB): a token
bucket holding less than the data the sender hands over between two wake-ups of the
qdisc watchdog loses tokens and so rate (measured here: 1 Gbit/s with a 128 KiB
burst gave ~860 Mbit/s of TCP goodput, with 1 MiB+ 950-960). Its ``limit`` (the queue,
bytes) is 4 bursts and at least 128 KiB, which holds two 64 KiB GSO packets; TBF
accounts GSO packets by their wire length and splits those larger than the burst, so
offloads need not be turned off (no ethtool). TCP goodput then is 1448/1514 of the
rate (95.6 %: Ethernet, IP and TCP headers with timestamps).

Delay and loss: ``netem`` as the root qdisc (``handle 1:``) with the ``tbf`` as its
child (``parent 1:1``) when there is also a rate. netem counts packets: its ``limit``
covers the bytes in flight during the delay at the rate (10 Gbit/s when unshaped) at
1514 bytes a packet, 1.5-fold, at least netem's default 1000. With loss, the link's
``gso_max_segs`` is set to 1 so that netem drops single packets, not 64 KiB GSO trains.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hvbench.model.lab import LabHostSpec

BURST_SECONDS = 0.010
MIN_BURST_BYTES = 16 * 1024
LIMIT_BURSTS = 4
MIN_LIMIT_BYTES = 128 * 1024
#: Assumed rate of an unshaped link when sizing netem's queue, bits/s.
UNSHAPED_BITS = 10 * 10**9
WIRE_PACKET_BYTES = 1514
NETEM_DEFAULT_LIMIT = 1000
#: What tc prints when the kernel lacks a qdisc (here: sch_netem).
UNKNOWN_QDISC = "Specified qdisc kind is unknown"


@dataclass(frozen=True)
class TbfParams:
    """A token bucket: ``rate_bits`` per second, ``burst_bytes`` bucket size,
    ``limit_bytes`` queue length."""

    rate_bits: int
    burst_bytes: int
    limit_bytes: int


def tbf_params(rate_bits: int) -> TbfParams:
    """The tbf sizing for ``rate_bits`` (see the module docstring)."""
    burst = max(math.ceil(rate_bits / 8 * BURST_SECONDS), MIN_BURST_BYTES)
    return TbfParams(rate_bits, burst, max(LIMIT_BURSTS * burst, MIN_LIMIT_BYTES))


def netem_limit(spec: LabHostSpec) -> int:
    """netem's queue length (packets) for ``spec``'s delay at its rate."""
    rate = spec.rate_bits or UNSHAPED_BITS
    in_flight = rate / 8 * spec.delay_ms / 1000 * 1.5
    return max(NETEM_DEFAULT_LIMIT, math.ceil(in_flight / WIRE_PACKET_BYTES))


def _tc(netns: str | None) -> list[str]:
    return ["tc", "-n", netns] if netns else ["tc"]


def _ip(netns: str | None) -> list[str]:
    return ["ip", "-n", netns] if netns else ["ip"]


def _number(value: float) -> str:
    """A float for tc without exponent notation: 0.5, 12, 0.0001."""
    return f"{value:.6f}".rstrip("0").rstrip(".")


def tbf_args(params: TbfParams) -> list[str]:
    return ["tbf", "rate", f"{params.rate_bits}bit", "burst", str(params.burst_bytes),
            "limit", str(params.limit_bytes)]


def netem_args(spec: LabHostSpec) -> list[str]:
    """``netem`` and its options: delay (in whole microseconds), loss, limit."""
    args = ["netem"]
    if spec.delay_ms > 0:
        args += ["delay", f"{round(spec.delay_ms * 1000)}us"]
    if spec.loss_pct > 0:
        args += ["loss", f"{_number(spec.loss_pct)}%"]
    return [*args, "limit", str(netem_limit(spec))]


def shaping_commands(spec: LabHostSpec, dev: str, netns: str | None = None) -> list[list[str]]:
    """The commands that shape the egress of ``dev`` (inside ``netns`` if given) as
    ``spec`` says, in order; [] for an unshaped host."""
    tc = _tc(netns)
    commands: list[list[str]] = []
    if spec.loss_pct > 0:
        commands.append([*_ip(netns), "link", "set", "dev", dev, "gso_max_segs", "1"])
    rate = spec.rate_bits
    if spec.needs_netem:
        commands.append([*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:",
                         *netem_args(spec)])
        if rate is not None:
            commands.append([*tc, "qdisc", "add", "dev", dev, "parent", "1:1",
                             "handle", "10:", *tbf_args(tbf_params(rate))])
    elif rate is not None:
        commands.append([*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:",
                         *tbf_args(tbf_params(rate))])
    return commands


def link_shaping_commands(spec: LabHostSpec, root_dev: str, netns: str,
                          netns_dev: str) -> list[list[str]]:
    """Both ends of a lab host's link: ``root_dev`` in the root namespace, then
    ``netns_dev`` inside ``netns``."""
    return shaping_commands(spec, root_dev) + shaping_commands(spec, netns_dev, netns)


def netem_probe_argv() -> list[str]:
    """A command that adds netem to ``lo`` of a throwaway network namespace (it
    vanishes with the command, so a probe can leave nothing behind)."""
    return ["unshare", "--net", "tc", "qdisc", "add", "dev", "lo", "root", "netem",
            "delay", "1ms"]


def is_unknown_qdisc(output: str) -> bool:
    """True if tc's ``output`` says the kernel does not know the qdisc kind."""
    return UNKNOWN_QDISC in output
