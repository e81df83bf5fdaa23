"""Why a cell is slower than native: small documented rules over the resource model
(:mod:`hvbench.analysis.resources`), and a verdict per cell.

Pure. Each :class:`Rule` names the evidence (metrics) it needs and abstains when one is
missing; its thresholds are the named constants below, justified in
``docs/diagnosis.md``. A rule that fires returns a :class:`Finding`: a score (how
strongly the evidence points at it, used to pick the dominant cause), the evidence in
numbers next to native, the share of the gap it explains where that can be computed,
the fix as a configuration change, and whether it would carry over to KVM. Platform
settings (cache mode, bus, backend) only name the fix and the cause; a rule never
fires on a setting alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hvbench.analysis.resources import CellModel, derive, disk_device, flat_definition
from hvbench.analysis.summaries import TextTable, fmt_value

__all__ = [
    "DIAGNOSIS_HEADERS",
    "DIAGNOSIS_TITLE",
    "RULES",
    "Finding",
    "Rule",
    "Verdict",
    "diagnose",
    "diagnose_all",
    "diagnosis_table",
    "explain_lines",
    "shown",
    "verdict_json",
]

# -- thresholds (docs/diagnosis.md says why each is what it is) -------------------------
#: A host request below this share of native's size has been split on the way.
REQ_SHRINK_RATIO = 0.5
#: Native requests smaller than this (sectors) cannot meaningfully shrink.
REQ_MIN_NATIVE_SECTORS = 16.0
#: Fewer requests in flight than this on average: the device waits for the next one.
QUEUE_IDLE = 1.0
#: A device busier than this is not idle behind its submitter.
UTIL_IDLE_PCT = 70.0
#: At least this share of the guest's per-I/O latency spent above the device.
ADDED_LATENCY_SHARE = 0.5
#: Host writes per workload write this many times native's: metadata of a growing file.
GROWTH_WRITE_RATIO = 1.3
#: Host bytes per workload byte this many times native's: the image copies or zero-fills
#: around each first write (qcow2 writes whole clusters, 64 kB by default, for 4 kB).
GROWTH_BYTES_RATIO = 2.0
#: Allocations whose blocks are all written before the guest starts (no growth).
GROWN_ALLOCATIONS = ("full",)
#: A cell at most this share of the throughput of the sibling differing only in the
#: suspected setting: that setting costs throughput.
SIBLING_SLOWER_RATIO = 0.85
#: Host flushes per host write from which writes are being made durable one by one (the
#: host merges the guest's writes, so one flush per guest write shows as fewer per
#: host write) ...
FLUSH_PER_WRITE = 0.1
#: ... and at least this many times native's (which flushes only at the end).
FLUSH_VS_NATIVE = 5.0
#: Native flushes per write below this: the workload itself does not flush.
NATIVE_FLUSH_PER_WRITE = 0.1
#: Host device bytes per workload byte below this share of native's: a cache served it.
DEVICE_SHARE_CACHED = 0.5
#: A guest this much faster than native (%) was served by a cache.
CACHED_FASTER_PCT = 120.0
#: Or at least this % of native with the device moving under DEVICE_SHARE_CACHED of
#: native's bytes per workload byte.
CACHED_NEAR_NATIVE_PCT = 90.0
#: CPU per I/O (or per byte) of an emulated device this many times its virtio sibling's.
EMULATED_COST_RATIO = 1.3
#: Or throughput at most this share of the virtio sibling's.
EMULATED_THROUGHPUT_RATIO = 0.8
#: A thread busier than this (% of one core) is saturated.
SATURATED_PCT = 85.0
#: vCPU run-queue wait above this %: another runnable thread holds the core.
WAIT_PCT = 30.0
#: A link carrying at least this % of its shaped rate is the limit.
LINK_SATURATED_PCT = 85.0
#: Main loop CPU above this % with user-mode networking: slirp is doing the work.
SLIRP_MAIN_PCT = 20.0
#: Or throughput below this share of the same guest's on tap.
SLIRP_THROUGHPUT_RATIO = 0.5
#: An I/O limit: throughput below this % of native ...
LIMIT_BELOW_NATIVE_PCT = 70.0
#: ... with the device below this utilisation ...
LIMIT_DEVICE_IDLE_PCT = 50.0
#: ... the vCPUs mostly waiting (below this utilisation) ...
LIMIT_VCPU_IDLE_PCT = 50.0
#: ... the time added above the device per I/O at least this many times the CPU QEMU
#: spends per I/O (the request waits rather than being processed) ...
LIMIT_WAIT_RATIO = 2.0
#: ... and throughput flat over the repetitions (CoV at most this %).
LIMIT_FLAT_COV_PCT = 10.0
#: A configured limit within this share of the throughput is the one measured.
LIMIT_MATCH = 0.15
#: Under TCG, vCPUs busier than this are emulating, not waiting for I/O.
TCG_VCPU_PCT = 50.0

#: Scores: a specific cause outranks a generic one, and emulation is named dominant only
#: when nothing more specific fired (it is always there under TCG).
SCORE_SPECIFIC = 2.0
SCORE_GENERIC = 1.0
SCORE_TCG = 0.8

EMULATED_BUSES = ("ide", "ahci", "lsi-scsi")
EMULATED_NICS = ("e1000", "rtl8139")
VIRTIO_BUSES = ("virtio-blk", "virtio-scsi")


@dataclass(frozen=True)
class Finding:
    """A rule that fired on a cell."""

    rule: str
    title: str
    score: float
    evidence: tuple[str, ...]
    fix: str
    carries_to_kvm: bool
    #: % of the gap to native this cause explains, where computable.
    share_pct: float | None = None
    #: The measured effect of the fix: a sibling cell differing only in that setting.
    effect: str | None = None


@dataclass(frozen=True)
class Hit:
    """What a rule's check returns when it fires."""

    score: float
    evidence: tuple[str, ...]
    share_pct: float | None = None
    fix: str | None = None


@dataclass(frozen=True)
class Rule:
    """One cause: the workload kinds it applies to, the evidence it needs (metric
    names; ``native:NAME`` for the native cell's), its check, the fix, and the
    platform setting (flat key) and values that remove it, to cite a sibling cell."""

    name: str
    title: str
    kinds: frozenset[str]
    evidence: tuple[str, ...]
    check: Callable[[CellModel], Hit | None]
    fix: str
    carries_to_kvm: bool
    knob: str | None = None
    better: tuple[Any, ...] = ()

    def missing(self, cell: CellModel) -> list[str]:
        """The evidence the cell lacks."""
        out = []
        for name in self.evidence:
            value = cell.native(name[7:]) if name.startswith("native:") else cell.get(name)
            if value is None:
                out.append(name)
        return out


@dataclass(frozen=True)
class Verdict:
    """The diagnosis of one cell."""

    workload: str
    phase: str
    platform: str
    pct_of_native: float | None
    dominant: Finding | None
    contributing: tuple[Finding, ...] = ()
    #: (rule, the evidence it lacked) of the rules that abstained.
    abstained: tuple[tuple[str, tuple[str, ...]], ...] = ()
    tcg: bool = False
    native: bool = False

    @property
    def cell(self) -> str:
        """``platform/workload/phase``: what ``--cell`` patterns match."""
        return f"{self.platform}/{self.workload}/{self.phase}"

    def why(self) -> str:
        """The short text of the report's Why row: the dominant rule (``+N`` more)."""
        if self.native:
            return "baseline"
        if self.dominant is None:
            return "-"
        more = f" +{len(self.contributing)}" if self.contributing else ""
        return self.dominant.rule + more


# -- helpers --------------------------------------------------------------------------


def _n(value: float | None) -> str:
    return "-" if value is None else fmt_value(value)


def _vs(cell: CellModel, metric: str, label: str, unit: str = "") -> str:
    """``label X unit vs Y natively`` (or without native)."""
    tail = f" {unit}" if unit else ""
    native = cell.native(metric)
    text = f"{label} {_n(cell.get(metric))}{tail}"
    return text if native is None else f"{text} vs {_n(native)}{tail} natively"


def _pct_of_native(cell: CellModel) -> float | None:
    if cell.main is None:
        return None
    value, native = cell.values.get(cell.main), cell.native_values.get(cell.main)
    if value is None or not native:
        return None
    return 100.0 * value / native


def _is_write(cell: CellModel) -> bool:
    w_s = _disk(cell, "w_s") or 0.0
    return w_s > (_disk(cell, "r_s") or 0.0)


def _disk(cell: CellModel, key: str) -> float | None:
    found = [v for m, v in sorted(cell.values.items())
             if m.startswith("host.disk.") and m.endswith(f".{key}")]
    return max(found) if found else None


def _virtio_sibling(cell: CellModel, key: str, virtio: Sequence[str]
                    ) -> tuple[str, Mapping[str, float]] | None:
    """The sibling platform with a virtio device, preferring one that differs from
    the cell in nothing else."""
    mine = _flat(cell)
    best: tuple[int, str, Mapping[str, float]] | None = None
    for name, (flat, values) in sorted(cell.siblings.items()):
        if flat.get(key) not in virtio:
            continue
        diff = sum(1 for k in set(flat) | set(mine) if flat.get(k) != mine.get(k))
        if best is None or diff < best[0]:
            best = (diff, name, values)
    return None if best is None else (best[1], best[2])


def _flat(cell: CellModel) -> dict[str, Any]:
    return flat_definition(cell.platform_def)


def _gap_share(cell: CellModel, ceiling: float) -> float | None:
    """% of the gap to native explained by a ceiling on the headline at ``ceiling``."""
    if cell.main is None:
        return None
    value, native = cell.values.get(cell.main), cell.native_values.get(cell.main)
    if value is None or native is None or native <= value or ceiling >= native:
        return None
    return min(100.0, 100.0 * (native - max(ceiling, value)) / (native - value) + 0.0)


# -- the checks -----------------------------------------------------------------------


def _request_shrunk(cell: CellModel) -> Hit | None:
    size, native = cell.get("res.disk.req_sectors"), cell.native("res.disk.req_sectors")
    share, native_share = cell.get("res.disk.device_share"), cell.native("res.disk.device_share")
    if share is not None and native_share:
        share /= native_share
    if size is None or native is None or native < REQ_MIN_NATIVE_SECTORS:
        return None
    if share is not None and share < DEVICE_SHARE_CACHED:
        return None  # the device did not carry the I/O: its request sizes say nothing
    if size >= REQ_SHRINK_RATIO * native:
        return None
    return Hit(SCORE_GENERIC + min(native / max(size, 1.0) / 4.0, 1.5),
               (_vs(cell, "res.disk.req_sectors", "host avgrq-sz", "sectors"),))


def _few_in_flight(cell: CellModel) -> Hit | None:
    queue, util = cell.get("res.disk.queue"), cell.get("res.disk.util_pct")
    lat, added = cell.get("lat_mean_ms"), cell.get("res.disk.added_latency_ms")
    if queue is None or util is None or lat is None or added is None or lat <= 0:
        return None
    if queue >= QUEUE_IDLE or util >= UTIL_IDLE_PCT or added < ADDED_LATENCY_SHARE * lat:
        return None
    share = None
    native_lat, native_added = cell.native("lat_mean_ms"), cell.native("res.disk.added_latency_ms")
    if native_lat is not None and native_added is not None and lat > native_lat:
        # Synchronous I/O: throughput is 1/latency, so the gap is the latency grown.
        share = max(0.0, min(100.0, 100.0 * (added - native_added) / (lat - native_lat)))
    return Hit(SCORE_GENERIC + added / lat,
               (_vs(cell, "res.disk.queue", "host avgqu-sz"),
                _vs(cell, "res.disk.util_pct", "host %util", "%"),
                f"guest latency {_n(lat)} ms = device await "
                f"{_n(cell.get('res.disk.await_ms'))} ms + {_n(added)} ms added per I/O"
                + ("" if native_lat is None else f" (native {_n(native_lat)} ms)")),
               share)


def _flush_per_write(cell: CellModel) -> Hit | None:
    ratio, native = cell.get("res.disk.flush_per_write"), cell.native("res.disk.flush_per_write")
    if ratio is None or not _is_write(cell) or ratio < FLUSH_PER_WRITE:
        return None
    if native is not None and (native >= NATIVE_FLUSH_PER_WRITE
                               or ratio < FLUSH_VS_NATIVE * native):
        return None
    cache = cell.setting("disk.cache")
    named = f" (cache={cache})" if cache else ""
    return Hit(SCORE_SPECIFIC + min(3.0 * ratio, 1.0),
               (_vs(cell, "res.disk.flush_per_write", f"host flushes per write{named}"),
                _vs(cell, "host.disk." + _dev(cell) + ".f_await_ms", "flush await", "ms")))


def _dev(cell: CellModel) -> str:
    return disk_device(cell.values) or "?"


def _growth_possible(cell: CellModel) -> str | None:
    """Why the cell's image can grow under a write phase (None: it cannot)."""
    allocation, fmt = cell.setting("disk.allocation"), cell.setting("disk.format")
    if not _is_write(cell) or allocation == "full" or allocation is None:
        return None
    if allocation == "sparse":
        what = "clusters and file blocks" if fmt == "qcow2" else "file blocks"
        return f"image {fmt}, sparse: {what} are allocated on first write"
    return (f"image {fmt}, preallocated (fallocate): its unwritten extents are converted "
            "on first write")


def _image_growth(cell: CellModel) -> Hit | None:
    why = _growth_possible(cell)
    if why is None:
        return None
    size, native = cell.get("res.disk.req_sectors"), cell.native("res.disk.req_sectors")
    flushes = cell.get("res.disk.flush_per_write") or 0.0
    native_flushes = cell.native("res.disk.flush_per_write") or 0.0
    shrunk = size is not None and native is not None and size < REQ_SHRINK_RATIO * native
    journal = flushes >= NATIVE_FLUSH_PER_WRITE > native_flushes
    writes, native_writes = cell.get("res.disk.writes_per_io"), cell.native(
        "res.disk.writes_per_io")
    amplified = writes is not None and native_writes is not None and \
        writes >= GROWTH_WRITE_RATIO * native_writes
    share, native_share = cell.get("res.disk.device_share"), cell.native(
        "res.disk.device_share")
    copied = share is not None and native_share is not None and native_share > 0 and \
        share >= GROWTH_BYTES_RATIO * native_share
    slower = _slower_than_sibling(cell, "disk.allocation", GROWN_ALLOCATIONS)
    if cell.setting("disk.allocation") == "preallocated":
        # Converting a reserved extent neither splits requests nor copies data: only a
        # fully written sibling can show what it costs.
        shrunk = journal = amplified = copied = False
    if not (shrunk or journal or amplified or copied or slower):
        return None
    evidence = [why]
    if shrunk:
        evidence.append(_vs(cell, "res.disk.req_sectors", "host avgrq-sz", "sectors"))
    if journal:
        evidence.append(_vs(cell, "res.disk.flush_per_write",
                            "host flushes per write (allocation metadata)"))
    if amplified:
        evidence.append(_vs(cell, "res.disk.writes_per_io",
                            "host writes per guest write (allocation metadata)"))
    if copied:
        evidence.append(_vs(cell, "res.disk.device_share",
                            "host bytes written per guest byte (allocation copies and "
                            "zero-fills)"))
    if slower:
        evidence.append(slower)
    found = shrunk + journal + amplified + copied + bool(slower)
    return Hit(SCORE_SPECIFIC + 0.6 + 0.4 * min(found, 3), tuple(evidence))


def _only_differs(cell: CellModel, key: str, better: Sequence[Any]
                  ) -> tuple[str, Mapping[str, float]] | None:
    """The sibling platform that differs from the cell only in ``key``, set to one of
    ``better``."""
    mine = _flat(cell)
    for name, (flat, values) in sorted(cell.siblings.items()):
        keys = {k for k in set(flat) | set(mine) if flat.get(k) != mine.get(k)}
        if keys == {key} and flat.get(key) in better:
            return name, values
    return None


def _slower_than_sibling(cell: CellModel, key: str, better: Sequence[Any]) -> str | None:
    """Evidence text when the sibling differing only in ``key`` is measurably faster
    (the cell reaches at most :data:`SIBLING_SLOWER_RATIO` of its throughput)."""
    sibling = _only_differs(cell, key, better)
    main = cell.main
    if sibling is None or main is None or main not in cell.values:
        return None
    name, values = sibling
    theirs = values.get(main)
    if not theirs or cell.values[main] > SIBLING_SLOWER_RATIO * theirs:
        return None
    setting = f"{key.rsplit('.', maxsplit=1)[-1]}={_flat_of(cell, name).get(key)}"
    return (f"{main} {_n(cell.values[main])} vs {_n(theirs)} on {name} ({setting}), "
            "the same otherwise")


def _flat_of(cell: CellModel, sibling: str) -> Mapping[str, Any]:
    return cell.siblings[sibling][0]


def _page_cache(cell: CellModel) -> Hit | None:
    share, native = cell.get("res.disk.device_share"), cell.native("res.disk.device_share")
    pct = _pct_of_native(cell)
    if share is None or native is None or pct is None or native <= 0:
        return None
    relative = share / native
    # Faster than the bare host can only come from a cache; a device that moved far
    # fewer bytes per workload byte than natively, at native speed, is the same sign.
    if not (pct >= CACHED_FASTER_PCT or (relative < DEVICE_SHARE_CACHED
                                         and pct >= CACHED_NEAR_NATIVE_PCT)):
        return None
    cache = cell.setting("disk.cache")
    where = "the host page cache" if cache in ("writeback", "unsafe") else "a page cache"
    return Hit(SCORE_SPECIFIC + 1.0,
               (f"{_n(pct)} % of native; the host device moved {_n(relative * 100)} % of "
                f"the bytes per workload byte it moved natively: {where} served the "
                "guest, the device is not what was measured"
                + (f" (cache={cache})" if cache else ""),))


def _emulated(cell: CellModel, key: str, emulated: Sequence[str], virtio: Sequence[str],
              cost: str) -> Hit | None:
    model = cell.setting(key)
    if model not in emulated:
        return None
    sibling = _virtio_sibling(cell, key, virtio)
    mine = cell.get(cost)
    if sibling is None or mine is None:
        return None
    name, values = sibling
    theirs = derive(values, native=False).get(cost)
    ratio = None if not theirs else mine / theirs
    main = cell.main
    tput = None
    if main and main in values and values[main] > 0 and main in cell.values:
        tput = cell.values[main] / values[main]
    if (ratio is None or ratio < EMULATED_COST_RATIO) and (
            tput is None or tput > EMULATED_THROUGHPUT_RATIO):
        return None
    evidence = [f"{key.split('.')[1]}={model}: {cost.split('.')[1].replace('_', ' ')} "
                f"{_n(mine)} vs {_n(theirs)} on {name} ({_flat_value(cell, name, key)})"]
    if tput is not None and main is not None:
        evidence.append(f"{main} {_n(cell.values[main])} vs {_n(values[main])} on {name}")
    evidence += _queue_vs(cell, name, values)
    strength = max((ratio or 1.0) - 1.0, 0.0 if tput is None else 1.0 - tput)
    return Hit(SCORE_SPECIFIC + min(strength, 1.5), tuple(evidence))


def _queue_vs(cell: CellModel, sibling: str, values: Mapping[str, float]) -> list[str]:
    """Evidence that the controller passed fewer requests at once than the sibling's
    (IDE has no command queuing): the host queue at most half of the sibling's."""
    mine, theirs = cell.get("res.disk.queue"), derive(values, native=False).get(
        "res.disk.queue")
    if mine is None or theirs is None or mine > 0.5 * theirs:
        return []
    return [f"host avgqu-sz {_n(mine)} vs {_n(theirs)} on {sibling}: fewer requests reach "
            "the device at once"]


def _flat_value(cell: CellModel, sibling: str, key: str) -> str:
    """``key=value`` of a sibling platform's setting."""
    return f"{key.rsplit('.', maxsplit=1)[-1]}={_flat_of(cell, sibling).get(key)}"


def _emulated_disk(cell: CellModel) -> Hit | None:
    return _emulated(cell, "disk.bus", EMULATED_BUSES, VIRTIO_BUSES, "res.cpu_ms_per_io")


def _emulated_nic(cell: CellModel) -> Hit | None:
    return _emulated(cell, "nic.model", EMULATED_NICS, ("virtio-net",), "res.cpu_ms_per_mb")


def _vcpu_saturated(cell: CellModel) -> Hit | None:
    util = cell.get("res.vcpu.util_pct")
    if util is None or util < SATURATED_PCT:
        return None
    tcg = cell.accelerator == "tcg"
    # Under TCG a busy vCPU is emulating: that is the TCG rule's finding.
    score = SCORE_TCG if tcg else SCORE_SPECIFIC
    return Hit(score + (util - SATURATED_PCT) / 100.0,
               (f"vCPU threads {_n(util)} % of a core each"
                + (f", {_n(cell.get('res.cpu_ms_per_req'))} CPU ms per request"
                   if cell.get("res.cpu_ms_per_req") is not None else ""),))


def _main_loop(cell: CellModel) -> Hit | None:
    found = [(cls, v) for cls in ("main", "iothread")
             if (v := cell.get(f"res.{cls}.util_pct")) is not None and v >= SATURATED_PCT]
    if not found:
        return None
    cls, util = max(found, key=lambda item: item[1])
    label = "QEMU main loop" if cls == "main" else "iothread"
    return Hit(SCORE_SPECIFIC + (util - SATURATED_PCT) / 50.0,
               (f"{label} {_n(util)} % of one core",))


def _host_contention(cell: CellModel) -> Hit | None:
    wait = cell.get("res.vcpu.wait_pct")
    if wait is None or wait < WAIT_PCT:
        return None
    evidence = [f"vCPU run-queue wait {_n(wait)} % (runnable, not running)",
                f"host CPU busy {_n(cell.get('res.host.cpu_busy_pct'))} %"]
    execs = cell.get("qemu.vcpu.exec_per_s")
    if execs is not None:
        evidence.append(f"{_n(execs)} executions/s, "
                        f"{_n(cell.get('qemu.vcpu.cpu_ms_per_exec'))} ms CPU per execution")
    score = SCORE_SPECIFIC + min((wait - WAIT_PCT) / 40.0, 1.0)
    scenario = cell.setting("scenario")
    alone = _only_differs(cell, "scenario", (None,)) if scenario else None
    alone_wait = None if alone is None else alone[1].get("qemu.vcpu.wait_pct")
    if alone is not None and alone_wait is not None:
        evidence.append(f"scenario {scenario}: wait {_n(wait)} % vs {_n(alone_wait)} % on "
                        f"{alone[0]} alone")
        if alone_wait < wait / 2:
            score += 0.5  # the neighbours measurably caused it
    elif scenario:
        evidence.append(f"scenario {scenario}")
    return Hit(score, tuple(evidence))


def _link(cell: CellModel) -> Hit | None:
    util = cell.get("res.net.link_util_pct")
    if util is None or util < LINK_SATURATED_PCT or cell.link_mbit is None:
        return None
    main = cell.main
    share = _gap_share(cell, cell.link_mbit) if main == "mbit_s" else None
    return Hit(SCORE_SPECIFIC + 1.0 + (util - LINK_SATURATED_PCT) / 100.0,
               (f"link at {_n(util)} % of its shaped {_n(cell.link_mbit)} Mbit/s",), share)


def _user_net(cell: CellModel) -> Hit | None:
    if cell.setting("nic.backend") != "user":
        return None
    main_cpu = cell.get("qemu.main.cpu_pct")
    if main_cpu is None:
        return None
    evidence = [f"nic backend=user (slirp in QEMU's main loop): main loop {_n(main_cpu)} % "
                "of a core"]
    tap = next(((n, v) for n, (flat, v) in sorted(cell.siblings.items())
                if flat.get("nic.backend") == "tap"), None)
    fired = main_cpu >= SLIRP_MAIN_PCT
    score = SCORE_SPECIFIC + 0.5
    if tap is not None and cell.main and tap[1].get(cell.main) and cell.main in cell.values:
        ratio = cell.values[cell.main] / tap[1][cell.main]
        evidence.append(f"{cell.main} {_n(cell.values[cell.main])} vs "
                        f"{_n(tap[1][cell.main])} on {tap[0]} (backend=tap)")
        if ratio < SLIRP_THROUGHPUT_RATIO:
            # Measured against the same guest on tap: the strongest evidence there is.
            fired, score = True, SCORE_SPECIFIC + 1.0 + (1.0 - ratio)
    if not fired:
        return None
    return Hit(score, tuple(evidence))


def _io_limit(cell: CellModel) -> Hit | None:
    pct = _pct_of_native(cell)
    util, vcpu = cell.get("res.disk.util_pct"), cell.get("res.vcpu.util_pct")
    if pct is None or util is None or vcpu is None:
        return None
    flat = cell.main_cov_pct is None or cell.main_cov_pct <= LIMIT_FLAT_COV_PCT
    wait = cell.get("res.vcpu.wait_pct") or 0.0
    added, cost = cell.get("res.disk.added_latency_ms"), cell.get("res.cpu_ms_per_io")
    # A vCPU waiting for a core is not waiting for I/O: that is contention. A request
    # whose added latency is QEMU's CPU work per I/O is being processed, not held.
    if pct >= LIMIT_BELOW_NATIVE_PCT or util >= LIMIT_DEVICE_IDLE_PCT or \
            vcpu >= LIMIT_VCPU_IDLE_PCT or wait >= WAIT_PCT or not flat or \
            added is None or cost is None or added < LIMIT_WAIT_RATIO * cost:
        return None
    evidence = [f"{_n(pct)} % of native, flat (CoV {_n(cell.main_cov_pct)} %)",
                _vs(cell, "res.disk.util_pct", "host %util", "%"),
                f"vCPUs {_n(vcpu)} % busy, blocked {_n(cell.get('qemu.vcpu.blocked_pct'))} %; "
                f"{_n(added)} ms added per I/O above the device against {_n(cost)} ms of QEMU "
                "CPU per I/O: requests wait between guest and device"]
    limit = cell.setting("disk.bps_limit")
    share, score = None, SCORE_SPECIFIC + 0.5
    measured = cell.values.get("mb_s")
    if isinstance(limit, int | float) and limit > 0 and measured and \
            abs(measured * 1e6 - limit) <= LIMIT_MATCH * limit:
        evidence.append(f"= the configured bps_limit {_n(limit / 1e6)} MB/s")
        share, score = _gap_share(cell, limit / 1e6), SCORE_SPECIFIC + 1.5
    return Hit(score, tuple(evidence), share)


def _tcg(cell: CellModel) -> Hit | None:
    if cell.accelerator != "tcg":
        return None
    util = cell.get("res.vcpu.util_pct")
    if util is None or util < TCG_VCPU_PCT:
        return None
    return Hit(SCORE_TCG, (f"accelerator tcg: vCPUs {_n(util)} % busy emulating the guest",))


_DISK = frozenset({"disk"})
_NET = frozenset({"network", "web"})
_ALL = frozenset({"disk", "network", "web", "other"})

#: Every rule, in the order ``docs/diagnosis.md`` lists them.
RULES: tuple[Rule, ...] = (
    Rule("request-size-shrunk", "request size shrunk on the way to the device", _DISK,
         ("res.disk.req_sectors", "native:res.disk.req_sectors"), _request_shrunk,
         "keep guest requests whole: virtio-blk or virtio-scsi (disk bus), a preallocated "
         "raw image, cache=none,aio=native (libvirt <driver cache='none' io='native'/>)",
         True),
    Rule("few-in-flight", "device idle behind too few requests in flight", _DISK,
         ("res.disk.queue", "res.disk.util_pct", "lat_mean_ms", "res.disk.added_latency_ms"),
         _few_in_flight,
         "issue more I/O at once (fio iodepth, asynchronous I/O in the guest) or shorten the "
         "path per request: iothread=true, aio=native (libvirt <driver iothread='1' "
         "io='native'/>)", True),
    Rule("flush-per-write", "a flush per write (write-through or directsync cache)", _DISK,
         ("res.disk.flush_per_write",), _flush_per_write,
         "cache=none (QEMU -drive cache=none; libvirt <driver cache='none'/>); the guest "
         "still flushes when it asks to", True, "disk.cache", ("none", "writeback")),
    Rule("image-growth", "image growth on first write (sparse file or qcow2 allocation)",
         _DISK, ("res.disk.req_sectors",), _image_growth,
         "allocation=\"full\" (qemu-img create -o preallocation=full; libvirt: a volume "
         "with <allocation> equal to its <capacity>, or virsh vol-create --prealloc-metadata "
         "for qcow2 metadata only)", True, "disk.allocation", GROWN_ALLOCATIONS),
    Rule("host-page-cache", "a page cache served the guest (the device is not what was "
         "measured)", _DISK, ("res.disk.device_share", "native:res.disk.device_share"), _page_cache,
         "cache=none so the host device is measured (libvirt <driver cache='none'/>), and "
         "O_DIRECT in the guest", True, "disk.cache", ("none", "directsync")),
    Rule("emulated-controller", "emulated disk controller (CPU per I/O far above virtio)",
         _DISK, ("res.cpu_ms_per_io",), _emulated_disk,
         "bus=\"virtio-blk\" (QEMU -device virtio-blk-pci; libvirt <target bus='virtio'/>)",
         True, "disk.bus", VIRTIO_BUSES),
    Rule("emulated-nic", "emulated NIC (CPU per byte far above virtio)", _NET,
         ("res.cpu_ms_per_mb",), _emulated_nic,
         "nic model=\"virtio-net\" (QEMU -device virtio-net-pci; libvirt <model "
         "type='virtio'/>)", True, "nic.model", ("virtio-net",)),
    Rule("vcpu-saturated", "guest vCPU saturated (CPU-bound)", _ALL,
         ("res.vcpu.util_pct",), _vcpu_saturated,
         "more vCPUs (vcpus = N; libvirt <vcpu>), or less work per I/O in the guest",
         True, "vcpus"),
    Rule("main-loop-saturated", "QEMU main loop or iothread saturated", _ALL,
         ("res.main.util_pct",), _main_loop,
         "move device I/O off the main loop: iothread=true (libvirt <iothreads>, "
         "<driver iothread='1'/>), vhost=on for tap NICs", True, "disk.iothread", (True,)),
    Rule("host-cpu-contention", "host CPU contention (run-queue wait, neighbours, "
         "weights)", _ALL, ("res.vcpu.wait_pct",), _host_contention,
         "give the guest its own core (pin: libvirt <vcpupin>, taskset) or a larger CPU "
         "weight (cgroup cpu.weight; libvirt <shares>), or fewer busy neighbours", True),
    Rule("link-saturated", "link saturated", _NET, ("res.net.link_util_pct",), _link,
         "a faster link ([[lab.host]] rate) or less traffic sharing it", True),
    Rule("user-mode-networking", "user-mode networking (slirp)", _NET,
         ("qemu.main.cpu_pct",), _user_net,
         "nic backend=\"tap\" (QEMU -netdev tap,vhost=on; libvirt <interface "
         "type='bridge'>)", True, "nic.backend", ("tap",)),
    Rule("io-limit", "an I/O limit between guest and device", _DISK,
         ("res.disk.util_pct", "res.vcpu.util_pct", "res.disk.added_latency_ms",
          "res.cpu_ms_per_io", "native:mb_s"), _io_limit,
         "raise or remove the limit: bps_limit on the disk (QEMU -drive "
         "throttling.bps-total; libvirt <iotune><total_bytes_sec>)", True, "disk.bps_limit",
         (None,)),
    Rule("tcg-emulation", "emulation (TCG) dominating", _ALL, ("res.vcpu.util_pct",), _tcg,
         "a host where KVM works (accel = \"kvm\"): under TCG every guest instruction is "
         "emulated", False, "accel", ("kvm",)),
)

#: Causes that carry over to KVM only partly or not at all when found under TCG.
_TCG_ARTEFACTS = frozenset({"tcg-emulation", "vcpu-saturated"})


def _effect(cell: CellModel, rule: Rule) -> str | None:
    """The measured effect of a rule's fix: a sibling platform of the same phase that
    differs from the cell only in ``rule.knob``, set to one of ``rule.better``."""
    if rule.knob is None or cell.main is None or cell.main not in cell.values:
        return None
    sibling = _only_differs(cell, rule.knob, rule.better)
    if sibling is None or cell.main not in sibling[1]:
        return None
    name, values = sibling
    before, after = cell.values[cell.main], values[cell.main]
    delta = "" if not before else f" ({100.0 * (after - before) / before:+.0f} %)"
    return (f"{rule.knob.split('.')[-1]}={_flat_of(cell, name).get(rule.knob)} on {name}: "
            f"{cell.main} {_n(after)} vs {_n(before)}{delta}")


def _finding(cell: CellModel, rule: Rule, hit: Hit) -> Finding:
    tcg = cell.accelerator == "tcg"
    carries = rule.carries_to_kvm and not (tcg and rule.name in _TCG_ARTEFACTS)
    return Finding(rule.name, rule.title, round(hit.score, 3), hit.evidence,
                   hit.fix or rule.fix, carries, hit.share_pct, _effect(cell, rule))


def diagnose(cell: CellModel, rules: Iterable[Rule] = RULES) -> Verdict:
    """The verdict of one cell: every rule that applies to its kind is checked; the
    highest score is the dominant cause, the others contribute. Native cells are the
    baseline and are not diagnosed."""
    pct = _pct_of_native(cell)
    tcg = cell.accelerator == "tcg"
    if cell.is_native:
        return Verdict(cell.workload, cell.phase, cell.platform, pct, None, tcg=tcg,
                       native=True)
    found: list[Finding] = []
    abstained: list[tuple[str, tuple[str, ...]]] = []
    for rule in rules:
        if cell.kind not in rule.kinds:
            continue
        missing = rule.missing(cell)
        if missing:
            abstained.append((rule.name, tuple(missing)))
            continue
        hit = rule.check(cell)
        if hit is not None:
            found.append(_finding(cell, rule, hit))
    found.sort(key=lambda f: -f.score)
    return Verdict(cell.workload, cell.phase, cell.platform, pct,
                   found[0] if found else None, tuple(found[1:]), tuple(abstained), tcg)


def diagnose_all(cells: Iterable[CellModel]) -> list[Verdict]:
    """:func:`diagnose` of every cell."""
    return [diagnose(c) for c in cells]


def _finding_json(finding: Finding) -> dict[str, Any]:
    return {"rule": finding.rule, "title": finding.title, "score": finding.score,
            "evidence": list(finding.evidence), "share_of_gap_pct": finding.share_pct,
            "fix": finding.fix, "measured_effect": finding.effect,
            "carries_to_kvm": finding.carries_to_kvm}


def verdict_json(verdict: Verdict) -> dict[str, Any]:
    """A verdict as JSON-ready data (the report's ``diagnosis`` entries)."""
    return {"cell": verdict.cell, "workload": verdict.workload, "phase": verdict.phase,
            "platform": verdict.platform, "pct_of_native": verdict.pct_of_native,
            "native": verdict.native, "tcg": verdict.tcg, "why": verdict.why(),
            "dominant": None if verdict.dominant is None else _finding_json(verdict.dominant),
            "contributing": [_finding_json(f) for f in verdict.contributing],
            "abstained": [{"rule": r, "missing": list(m)} for r, m in verdict.abstained]}


DIAGNOSIS_TITLE = "Diagnosis: the bottleneck of every cell (hvbench explain)"
DIAGNOSIS_HEADERS = ("cell", "% of native", "why", "evidence", "fix")


def shown(verdicts: Iterable[Verdict]) -> list[Verdict]:
    """The verdicts a report lists: guest cells compared with native or with a cause."""
    return [v for v in verdicts
            if not v.native and (v.dominant is not None or v.pct_of_native is not None)]


def _fix_text(finding: Finding) -> str:
    effect = f" [measured: {finding.effect}]" if finding.effect else ""
    return finding.fix + effect


def _cause_text(finding: Finding, tcg: bool) -> str:
    share = "" if finding.share_pct is None else f" ({finding.share_pct:.0f} % of the gap)"
    kvm = "" if not tcg else (" [carries to KVM]" if finding.carries_to_kvm
                              else " [TCG artefact]")
    return finding.rule + share + kvm


def diagnosis_table(verdicts: Iterable[Verdict]) -> TextTable:
    """One row per diagnosed cell: % of native, the dominant cause (and the
    contributing ones), its evidence and its fix."""
    rows = []
    for v in shown(verdicts):
        pct = "-" if v.pct_of_native is None else f"{v.pct_of_native:.1f} %"
        if v.dominant is None:
            rows.append((v.cell, pct, "-", "no rule fired", "-"))
            continue
        why = _cause_text(v.dominant, v.tcg)
        if v.contributing:
            why += "; also " + ", ".join(_cause_text(f, v.tcg) for f in v.contributing)
        rows.append((v.cell, pct, why, "; ".join(v.dominant.evidence), _fix_text(v.dominant)))
    return TextTable(DIAGNOSIS_TITLE, DIAGNOSIS_HEADERS, tuple(rows), left=1,
                     note="why: the dominant cause first; docs/diagnosis.md lists every "
                          "rule with its evidence and thresholds.")


def explain_lines(verdict: Verdict) -> list[str]:
    """The long form of one verdict (``hvbench explain``): every cause with its
    evidence, share of the gap, fix and measured effect, then the abstentions."""
    pct = "" if verdict.pct_of_native is None else f" ({verdict.pct_of_native:.1f} % of native)"
    lines = [f"{verdict.cell}{pct}"]
    if verdict.native:
        return [*lines, "  baseline (native): not diagnosed"]
    if verdict.dominant is None:
        lines.append("  no rule fired")
    for label, finding in ([("dominant", verdict.dominant)] if verdict.dominant else []) + [
            ("contributing", f) for f in verdict.contributing]:
        lines.append(f"  {label}: {_cause_text(finding, verdict.tcg)}: {finding.title}")
        lines += [f"    evidence: {e}" for e in finding.evidence]
        lines.append(f"    fix: {finding.fix}")
        if finding.effect:
            lines.append(f"    measured: {finding.effect}")
    if verdict.abstained:
        lines.append("  abstained (evidence missing): " + ", ".join(
            f"{rule} ({', '.join(missing)})" for rule, missing in verdict.abstained))
    return lines
