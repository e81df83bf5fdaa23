"""/proc/diskstats -> the extended statistics of sysstat's ``iostat -x``.

Definitions (sysstat 12.6, over an interval of ``ms`` milliseconds):

- ``r_s``/``w_s``: completed reads/writes per second; ``r_mb_s``/``w_mb_s``: MB/s (10^6)
- ``r_await_ms``/``w_await_ms``: ms spent per completed request (0 with no requests)
- ``rareq_sz_kb``/``wareq_sz_kb``: kB per request (sectors / requests / 2)
- ``avgrq_sz``: the classic sysstat avgrq-sz, in 512-byte sectors per request
- ``avgqu_sz``: the average queue length, aqu-sz: time-in-queue delta / ms
- ``util_pct``: the time the device had I/O in flight, io_ticks delta / ms x 100 (<= 100)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hvbench.errors import HostError

SECTOR = 512


@dataclass(frozen=True)
class DiskCounters:
    """The cumulative counters of one block device (fields 4-14 of /proc/diskstats)."""

    reads: int
    read_merges: int
    read_sectors: int
    read_ms: int
    writes: int
    write_merges: int
    write_sectors: int
    write_ms: int
    in_flight: int
    io_ms: int
    queue_ms: int


def parse_diskstats(text: str) -> dict[str, DiskCounters]:
    """Every device of a /proc/diskstats snapshot, by name."""
    out = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 14:
            continue
        out[fields[2]] = DiskCounters(*(int(v) for v in fields[3:14]))
    return out


def iostat_metrics(a: DiskCounters, b: DiskCounters, seconds: float) -> dict[str, float]:
    """The ``iostat -x`` metrics between two snapshots ``seconds`` apart."""
    ms = seconds * 1000.0
    reads, writes = b.reads - a.reads, b.writes - a.writes
    rsec, wsec = b.read_sectors - a.read_sectors, b.write_sectors - a.write_sectors
    ios = reads + writes
    return {
        "r_s": reads / seconds,
        "w_s": writes / seconds,
        "r_mb_s": rsec * SECTOR / 1e6 / seconds,
        "w_mb_s": wsec * SECTOR / 1e6 / seconds,
        "r_await_ms": (b.read_ms - a.read_ms) / reads if reads else 0.0,
        "w_await_ms": (b.write_ms - a.write_ms) / writes if writes else 0.0,
        "rareq_sz_kb": rsec / reads / 2 if reads else 0.0,
        "wareq_sz_kb": wsec / writes / 2 if writes else 0.0,
        "avgrq_sz": (rsec + wsec) / ios if ios else 0.0,
        "avgqu_sz": (b.queue_ms - a.queue_ms) / ms,
        "util_pct": min(100.0, (b.io_ms - a.io_ms) / ms * 100.0),
    }


def device_for_path(path: Path) -> str:
    """The block device (as /proc/diskstats names it) holding ``path``'s filesystem.

    A partition is reported as itself: its counters are the I/O of that filesystem.
    Raises :class:`HostError` when the filesystem has no block device (tmpfs, overlay).
    """
    dev = path.stat().st_dev
    link = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    try:
        return link.resolve(strict=True).name
    except OSError as exc:
        raise HostError(f"{path} is not on a block device (major:minor "
                        f"{os.major(dev)}:{os.minor(dev)}); no disk statistics for it") from exc
