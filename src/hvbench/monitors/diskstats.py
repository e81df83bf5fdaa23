"""/proc/diskstats -> the extended device statistics of sysstat's ``iostat -x``.

Pure functions only (no I/O): :func:`parse_diskstats` turns /proc/diskstats text into
:class:`DiskCounters`, :func:`iostat_metrics` turns two of them into rates. The names
and definitions follow sysstat 12.6 (Debian 12), over an interval of ``ms`` milliseconds
between the two snapshots, with ``Δx`` the growth of counter ``x``:

====================  =============  =====================================================
our name              iostat -x      definition
====================  =============  =====================================================
``r_s`` ``w_s``       r/s w/s        Δcompleted requests / s
``d_s`` ``f_s``       d/s f/s        discards, flushes (kernel >= 4.18 / 5.5, else 0)
``r_kb_s`` ...        rkB/s ...      Δsectors / 2 / s (kB = 1024 bytes), also ``d_kb_s``
``r_mb_s`` ``w_mb_s`` rMB/s (-m)     Δsectors / 2048 / s (MB = 1024 kB, as iostat -m)
``rrqm_s`` ...        rrqm/s ...     Δmerged requests / s (``wrqm_s``, ``drqm_s``)
``rrqm_pct`` ...      %rrqm ...      Δmerged / (Δmerged + Δcompleted) x 100 (0 if none)
``r_await_ms`` ...    r_await ...    Δms spent / Δcompleted (0 with no request); also
                                     ``w_``, ``d_``, ``f_await_ms``
``rareq_sz_kb`` ...   rareq-sz ...   Δsectors / Δcompleted / 2 (kB per request)
``avgrq_sz``          avgrq-sz       classic (sysstat < 12): (Δrsec + Δwsec) / (Δr + Δw),
                                     in 512-byte sectors
``avgqu_sz``          aqu-sz         Δtime-in-queue ms (weighted) / ms
``aqu_sz``            aqu-sz         the same value under iostat's current name
``util_pct``          %util          Δio_ticks ms / ms x 100, capped at 100
====================  =============  =====================================================

Every metric is 0 when its denominator is 0 (no requests, or no time elapsed): an idle
interval reports zeros, never NaN. The counters are 64-bit in the kernel (on 64-bit
hosts), so wraparound is not handled; a counter that goes backwards (the device was
removed and re-added) yields negative deltas, which are clamped to 0.
"""

from __future__ import annotations

from dataclasses import dataclass

#: /proc/diskstats counts 512-byte sectors whatever the device's logical block size.
SECTOR_BYTES = 512
#: The metric names :func:`iostat_metrics` returns, in a stable order.
DISK_METRICS = (
    "r_s", "w_s", "d_s", "f_s",
    "r_kb_s", "w_kb_s", "d_kb_s", "r_mb_s", "w_mb_s",
    "rrqm_s", "wrqm_s", "drqm_s", "rrqm_pct", "wrqm_pct", "drqm_pct",
    "r_await_ms", "w_await_ms", "d_await_ms", "f_await_ms",
    "rareq_sz_kb", "wareq_sz_kb", "dareq_sz_kb",
    "avgrq_sz", "avgqu_sz", "aqu_sz", "util_pct",
)
# A line is "major minor name" followed by at least 11 counters (kernels since 2.6.25);
# 4.18 added 4 discard counters and 5.5 two flush counters.
_MIN_FIELDS = 14


@dataclass(frozen=True, slots=True)
class DiskCounters:
    """The cumulative counters of one block device (Documentation/admin-guide/iostats).

    Times are in milliseconds, sizes in 512-byte sectors. The discard and flush
    counters are 0 on kernels that do not report them.
    """

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
    discards: int = 0
    discard_merges: int = 0
    discard_sectors: int = 0
    discard_ms: int = 0
    flushes: int = 0
    flush_ms: int = 0


_COUNTER_NAMES = tuple(DiskCounters.__dataclass_fields__)


def parse_diskstats_line(line: str) -> tuple[str, DiskCounters] | None:
    """(device name, counters) of one /proc/diskstats line; None for a line that has no
    extended statistics (partitions on kernels before 2.6.25) or is blank.

    Raises ValueError when a counter is not an integer (the text is not diskstats).
    """
    fields = line.split()
    if len(fields) < _MIN_FIELDS:
        return None
    # Newer kernels may append counters we do not know yet: take the 17 we do.
    values = [int(v) for v in fields[3:20]]
    return fields[2], DiskCounters(*values)


def parse_diskstats(text: str) -> dict[str, DiskCounters]:
    """Every device of a /proc/diskstats snapshot, by name (ValueError on garbage)."""
    out: dict[str, DiskCounters] = {}
    for line in text.splitlines():
        parsed = parse_diskstats_line(line)
        if parsed is not None:
            out[parsed[0]] = parsed[1]
    return out


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else 0.0


def _direction(prefix: str, deltas: tuple[int, int, int, int],
               seconds: float) -> dict[str, float]:
    """The per-direction metrics (reads, writes or discards) from the deltas of their
    (completed, merged, sectors, ms) counters."""
    ios, merges, sectors, ms = deltas
    return {
        f"{prefix}_s": _ratio(ios, seconds),
        f"{prefix}_kb_s": _ratio(sectors / 2, seconds),
        f"{prefix}rqm_s": _ratio(merges, seconds),
        f"{prefix}rqm_pct": _ratio(merges * 100.0, merges + ios),
        f"{prefix}_await_ms": _ratio(ms, ios),
        f"{prefix}areq_sz_kb": _ratio(sectors / 2, ios),
    }


def iostat_metrics(a: DiskCounters, b: DiskCounters, seconds: float) -> dict[str, float]:
    """The ``iostat -x`` metrics (see the module docstring) of the interval from
    snapshot ``a`` to snapshot ``b``, taken ``seconds`` apart. Never raises: a zero or
    negative interval gives zeros."""
    if seconds <= 0:
        return dict.fromkeys(DISK_METRICS, 0.0)
    d = {name: max(0, getattr(b, name) - getattr(a, name)) for name in _COUNTER_NAMES}
    out: dict[str, float] = {}
    for prefix, kind in (("r", "read"), ("w", "write"), ("d", "discard")):
        # The counters are named reads/writes/discards, then <kind>_merges etc.
        counts = (d[f"{kind}s"], d[f"{kind}_merges"], d[f"{kind}_sectors"], d[f"{kind}_ms"])
        out |= _direction(prefix, counts, seconds)
    ms = seconds * 1000.0
    queue = _ratio(d["queue_ms"], ms)
    out |= {
        "f_s": _ratio(d["flushes"], seconds),
        "f_await_ms": _ratio(d["flush_ms"], d["flushes"]),
        "r_mb_s": out["r_kb_s"] / 1024.0,
        "w_mb_s": out["w_kb_s"] / 1024.0,
        "avgrq_sz": _ratio(d["read_sectors"] + d["write_sectors"], d["reads"] + d["writes"]),
        "avgqu_sz": queue,
        "aqu_sz": queue,
        "util_pct": min(100.0, _ratio(d["io_ms"] * 100.0, ms)),
    }
    return {name: out[name] for name in DISK_METRICS}

