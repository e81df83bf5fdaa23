"""Network interface counters from /proc/net/dev, and rates over a window (pure).

/proc/net/dev has two header lines, then one line per interface of the reader's
network namespace: ``name:`` and 16 counters, 8 received then 8 transmitted::

    bytes packets errs drop fifo frame compressed multicast    (receive)
    bytes packets errs drop fifo colls carrier compressed      (transmit)

Directions are the interface's own: on the root-namespace end of a lab veth, ``rx`` is
what the lab host sent and ``tx`` what it received.

Metrics of interface ``<if>`` (names relative to the monitor, ``net`` by default;
``<if>`` is the interface's name or the label the caller gave it):
``<if>.rx_mbit_s``, ``<if>.tx_mbit_s`` (10^6 bit/s of frame bytes as the kernel counts
them: Ethernet header included, FCS and preamble not), ``<if>.rx_pps``,
``<if>.tx_pps`` (packets/s; a GSO packet counts once), ``<if>.rx_drop_s``,
``<if>.tx_drop_s``, ``<if>.rx_err_s``, ``<if>.tx_err_s`` (per second), and the totals
``<if>.rx_bytes``, ``<if>.tx_bytes`` over the window.

Over a window, each interface's deltas are summed over the consecutive samples in which
it appears, divided by the time those intervals cover: an interface that vanishes
mid-window (the tap of a stopped guest) keeps the numbers of its lifetime and does not
disturb the others; a counter that goes backwards (the interface was re-created under
the same name) restarts from zero.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from itertools import pairwise
from typing import NamedTuple

NET_METRICS = ("rx_mbit_s", "tx_mbit_s", "rx_pps", "tx_pps", "rx_drop_s", "tx_drop_s",
               "rx_err_s", "tx_err_s", "rx_bytes", "tx_bytes")
_FIELDS = 16


class NetDevCounters(NamedTuple):
    """The 16 counters of one /proc/net/dev line."""

    rx_bytes: int
    rx_packets: int
    rx_errs: int
    rx_drop: int
    rx_fifo: int
    rx_frame: int
    rx_compressed: int
    rx_multicast: int
    tx_bytes: int
    tx_packets: int
    tx_errs: int
    tx_drop: int
    tx_fifo: int
    tx_colls: int
    tx_carrier: int
    tx_compressed: int


#: One decoded sample: (time, {interface: counters}).
NetSnapshot = tuple[float, Mapping[str, NetDevCounters]]


def parse_net_dev(text: str, only: Collection[str] | None = None) -> dict[str, NetDevCounters]:
    """Every interface's counters in a /proc/net/dev text (or only those in ``only``).

    Raises ValueError for a line that has a name but not 16 integer counters.
    """
    out: dict[str, NetDevCounters] = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        name = name.strip()
        if not sep or not name or "|" in line or (only is not None and name not in only):
            continue
        values = rest.split()
        if len(values) != _FIELDS:
            raise ValueError(f"{name}: expected {_FIELDS} counters, got {len(values)}")
        out[name] = NetDevCounters(*map(int, values))
    return out


def _delta(a: NetDevCounters, b: NetDevCounters) -> NetDevCounters:
    """b - a; from zero if the counters went backwards (a re-created interface)."""
    if b.rx_bytes < a.rx_bytes or b.tx_bytes < a.tx_bytes:
        return b
    return NetDevCounters(*(max(y - x, 0) for x, y in zip(a, b, strict=True)))


def rates(d: NetDevCounters, seconds: float) -> dict[str, float]:
    """The metrics of counter deltas ``d`` over ``seconds`` (> 0)."""
    return {
        "rx_mbit_s": d.rx_bytes * 8 / 1e6 / seconds,
        "tx_mbit_s": d.tx_bytes * 8 / 1e6 / seconds,
        "rx_pps": d.rx_packets / seconds,
        "tx_pps": d.tx_packets / seconds,
        "rx_drop_s": d.rx_drop / seconds,
        "tx_drop_s": d.tx_drop / seconds,
        "rx_err_s": d.rx_errs / seconds,
        "tx_err_s": d.tx_errs / seconds,
        "rx_bytes": float(d.rx_bytes),
        "tx_bytes": float(d.tx_bytes),
    }


def interface_window(snaps: Sequence[NetSnapshot], name: str) -> tuple[NetDevCounters, float]:
    """Interface ``name``'s summed deltas and the seconds they cover, over the
    consecutive pairs of ``snaps`` in which it appears."""
    total = [0] * _FIELDS
    seconds = 0.0
    for (ta, a), (tb, b) in pairwise(snaps):
        if name in a and name in b and tb > ta:
            total = [t + d for t, d in zip(total, _delta(a[name], b[name]), strict=True)]
            seconds += tb - ta
    return NetDevCounters(*total), seconds


def window_metrics(snaps: Sequence[NetSnapshot],
                   interfaces: Mapping[str, str]) -> dict[str, float]:
    """``<label>.<metric>`` for each interface of ``interfaces`` (name -> label) seen
    in two consecutive samples."""
    out: dict[str, float] = {}
    for name, label in interfaces.items():
        counters, seconds = interface_window(snaps, name)
        if seconds > 0:
            out |= {f"{label}.{k}": v for k, v in rates(counters, seconds).items()}
    return out


def absent_interfaces(snaps: Sequence[NetSnapshot], interfaces: Sequence[str],
                      t0: float) -> list[str]:
    """Human notes on interfaces missing from some samples: never seen, or vanished
    (with the time, seconds since ``t0``, of the last sample that had them)."""
    notes = []
    for name in interfaces:
        seen = [t for t, counters in snaps if name in counters]
        if not seen:
            notes.append(f"{name}: not found")
        elif snaps and seen[-1] < snaps[-1][0]:
            notes.append(f"{name}: vanished after {seen[-1] - t0:.3f} s")
    return notes
