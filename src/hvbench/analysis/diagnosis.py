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

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from hvbench.analysis.resources import CellModel, WorkloadClass, derive, disk_device
from hvbench.analysis.summaries import fmt_value
from hvbench.errors import SpecError
from hvbench.model import settings
from hvbench.model.platform import kind_spec
from hvbench.model.spec import vm_spec_from_mapping
from hvbench.model.workload import workload_intent

__all__ = [
    "OUTCOMES",
    "RULES",
    "Change",
    "Finding",
    "Rule",
    "Verdict",
    "apply_changes",
    "change_text",
    "diagnose",
    "diagnose_all",
    "needs_flatness",
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
#: A device whose await is at least this many times native's is slowed by what else it
#: serves (the same factor as LIMIT_WAIT_RATIO: twice the unloaded time per request).
DEVICE_SLOWED_RATIO = 2.0
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
#: CPU per I/O (or per byte) of an emulated device this many times its virtio sibling's.
EMULATED_COST_RATIO = 1.3
#: Or throughput at most this share of the virtio sibling's: the line every rule draws
#: for a sibling that differs in one setting (:data:`SIBLING_SLOWER_RATIO`, beyond the
#: run-to-run noise of fio results here), and beyond the cell's own repetition noise.
EMULATED_THROUGHPUT_RATIO = SIBLING_SLOWER_RATIO
#: A thread busier than this (% of one core) is saturated.
SATURATED_PCT = 85.0
#: A workload's own CPU (% of one CPU) up to which it can be one thread's: the
#: sampled figure's noise above 100 (fio and iperf3 divide CPU time by their own
#: elapsed time, which they measure a little short of the CPU's).
ONE_THREAD_MAX_PCT = 105.0
#: vCPU run-queue wait above this %: another runnable thread holds the core.
WAIT_PCT = 30.0
#: Host CPU (% of one core) that processes outside the cell must use for a vCPU's
#: run-queue wait to be their contention: below it, the cores the vCPU waited for
#: were held by the cell itself (QEMU's other threads, its storage daemons, its own
#: load generator on the host). 30 % is the line bench/diagnosis_accuracy.py draws
#: between a quiet host and a busy one (QUIET_CORES 0.3), and ten times the host
#: sampler's own cost (bench/sampler_cost.py).
CONTENDER_PCT = 30.0
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
#: cpu-quota: the QEMU process used at least this share of its cgroup's CPU quota. The
#: kernel enforces a quota exactly per CFS period (a group that used it is throttled
#: until the next period), so a capped process sits at 100 %; the margin covers the CPU
#: sampler (clock-tick counters over a repetition of a few seconds: a few % at 1 s).
CPU_QUOTA_USE = 0.9
#: The workload itself asked for fewer requests in flight than this (one at a time:
#: a synchronous engine, iodepth 1): a device idle behind it is the workload's pattern.
ASKED_FEW_DEPTH = 2.0
#: Requests that reached a layer below this share of what the workload asked (and of
#: what native's device held) were lost on the way.
DELIVERED_SHARE = 0.5
#: The cell's QEMU moved less than this share of the host device's bytes: the
#: device-wide request size, queue and utilisation are mostly someone else's.
CELL_SHARE_MINE = 0.5
#: Within this % of native there is no gap to explain (the run-to-run spread of
#: single-repetition fio results here is about 5-10 %).
NEAR_NATIVE_PCT = 90.0
#: Device bytes per workload byte below this (no native to compare with) on a
#: workload that asked for O_DIRECT: a cache answered.
DEVICE_SHARE_ABSOLUTE = 0.5
#: The workload moved data during at least this share of the monitor window before
#: the device's bytes per workload byte are read (the device rates are window means).
WINDOW_COVERED = 0.5
#: A derived metric this many times native's (or 1/this) is unusual: beyond the
#: repetition noise of the monitor metrics in the fixtures (CoV <= 15 %) many times over.
UNUSUAL_FACTOR = 1.5
#: How many of the metrics furthest from native an ``unexplained`` verdict lists.
UNUSUAL_SHOWN = 3

#: Scores: a specific cause outranks a generic one, and emulation is named dominant only
#: when nothing more specific fired (it is always there under TCG).
SCORE_SPECIFIC = 2.0
SCORE_GENERIC = 1.0
SCORE_TCG = 0.8
#: A cost that buys nothing (polling without gain) is not what limits the throughput:
#: it ranks below every throughput cause, so it is dominant only when nothing else is.
SCORE_COST = 0.5
#: Polling "burns" CPU when its iothread uses at least this many points of one core
#: more than the same platform with polling off ...
POLL_EXTRA_CPU_PCT = 10.0
#: ... while its headline is at most this much above it (or within the repetitions'
#: CoV, when that is larger): adaptive polling is published to move IOPS a few percent.
POLL_GAIN_PCT = 5.0

EMULATED_BUSES = ("ide", "ahci", "lsi-scsi")
EMULATED_NICS = ("e1000", "rtl8139")
VIRTIO_BUSES = ("virtio-blk", "virtio-scsi")


#: One configuration change of a fix: a flat platform key (``disk.bus``, ``nic.model``,
#: ``vcpus``, ``accel``) or a workload key (``workload.iodepth``) and its new value
#: (None: remove the setting).
Change = tuple[str, Any]

#: A verdict's outcome: a named cause, no cause found for a real gap, a cell whose
#: number did not measure the device, near native (nothing to explain), the baseline.
OUTCOMES = ("cause", "unexplained", "not-a-device-measurement", "near-native", "baseline")


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
    #: The fix as configuration changes that validate for this platform (empty: the
    #: fix is outside the study file: the host, the workload's job file, hardware).
    changes: tuple[Change, ...] = ()


@dataclass(frozen=True)
class Hit:
    """What a rule's check returns when it fires."""

    score: float
    evidence: tuple[str, ...]
    share_pct: float | None = None
    fix: str | None = None
    #: The configuration changes of this cell's fix (None: the rule's own).
    changes: tuple[Change, ...] | None = None
    #: A symptom rule's finding placed outside the guest by measurements at both ends
    #: (the guest's own requests whole, the host's shrunk): a busy emulated vCPU acts
    #: in the guest and cannot explain it, so it is not ranked below ``tcg-emulation``.
    placed: bool = False


@dataclass(frozen=True)
class Rule:
    """One cause: the workload kinds it applies to, the evidence it needs (metric
    names; ``native:NAME`` for the native cell's), its check, the fix, and the
    platform setting (flat key) and values that remove it, to cite a sibling cell."""

    name: str
    title: str
    kinds: frozenset[WorkloadClass]
    evidence: tuple[str, ...]
    check: Callable[[CellModel], Hit | None]
    fix: str
    carries_to_kvm: bool
    knob: str | None = None
    better: tuple[Any, ...] = ()
    #: The fix's configuration changes for a cell's platform (None: none in a study).
    changes: Callable[[CellModel], tuple[Change, ...]] | None = None
    #: A symptom (requests shrunk, requests lost on the way) that a busy emulated vCPU
    #: causes under TCG: ranked below ``tcg-emulation`` when that fires.
    symptom: bool = False
    #: Why the cause cannot occur on a cell's platform (None: it can), e.g. a storage
    #: daemon's saturation on a platform without one. Such a rule is not applicable,
    #: which differs from abstaining for want of evidence the platform could give.
    inapplicable: Callable[[CellModel], str | None] | None = None

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
    #: One of :data:`OUTCOMES`.
    outcome: str = "near-native"
    #: ``not-a-device-measurement``: why the device was not what was measured.
    validity: tuple[str, ...] = ()
    #: ``unexplained``: the metrics furthest from native, furthest first.
    unusual: tuple[str, ...] = ()
    #: (rule, why the cause cannot occur on this platform) of the rules not applied.
    not_applicable: tuple[tuple[str, str], ...] = ()

    @property
    def cell(self) -> str:
        """``platform/workload/phase``: what ``--cell`` patterns match."""
        return f"{self.platform}/{self.workload}/{self.phase}"

    def why(self) -> str:
        """The short text of the report's Why row: the outcome, or the dominant rule
        (``+N`` more)."""
        if self.native:
            return "baseline"
        if self.outcome == "not-a-device-measurement":
            return "not a device measurement"
        if self.outcome == "unexplained":
            return "unexplained"
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


def _limit(cell: CellModel, name: str, default: float) -> float:
    """Threshold ``name``: calibrated on the run's host (``hvbench calibrate``,
    :mod:`hvbench.analysis.calibration`) when it was, else ``default``."""
    return cell.thresholds.get(name, default)


def _is_write(cell: CellModel) -> bool:
    """Whether the cell's I/O is mostly writes: from the guest's benchmark disk when the
    guest was sampled (the cell's I/O alone), else from the host device, whose counts
    are device-wide (another process's reads there can outnumber the cell's writes)."""
    share = cell.get("res.guest.write_share")
    if share is not None:
        return share > 0.5
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
    return settings.flat(cell.platform_def)


def _gap_share(cell: CellModel, ceiling: float) -> float | None:
    """% of the gap to native explained by a ceiling on the headline at ``ceiling``."""
    if cell.main is None:
        return None
    value, native = cell.values.get(cell.main), cell.native_values.get(cell.main)
    if value is None or native is None or native <= value or ceiling >= native:
        return None
    return min(100.0, 100.0 * (native - max(ceiling, value)) / (native - value) + 0.0)


# -- fixes as configuration changes ---------------------------------------------------

#: Cache modes that open the image with O_DIRECT (aio=native needs one).
_DIRECT_CACHES = ("none", "directsync")


def apply_changes(platform: Mapping[str, Any], changes: Sequence[Change]) -> dict[str, Any]:
    """The ``vm`` mapping of a platform definition with the platform settings of
    ``changes`` applied (:func:`hvbench.model.settings.with_setting`; ``disk.*`` to the
    benchmark disk, ``nic.*`` to the first NIC, whose traffic the finding measured;
    other keys to the VM); workload keys are left out, and so are device settings of a
    guest without such a device."""
    vm: dict[str, Any] = dict(settings.vm_of(platform))
    for key, value in changes:
        if key.startswith("workload."):
            continue
        if settings.lookup(key).per_device and not settings.values(platform, key):
            continue
        vm = settings.with_setting(vm, key, value, index=0)
    vm["disks"], vm["nics"] = [dict(d) for d in vm.get("disks") or []], [
        dict(n) for n in vm.get("nics") or []]
    return vm


def _validates(platform: Mapping[str, Any], changes: Sequence[Change]) -> bool:
    # The same platform and fix recur in every phase of a run: validate each once.
    return _validates_json(json.dumps(apply_changes(platform, changes), sort_keys=True,
                                      default=str))


@lru_cache(maxsize=1024)
def _validates_json(vm: str) -> bool:
    try:
        vm_spec_from_mapping(json.loads(vm), "fix")
    except SpecError:
        return False
    return True


def _fit(cell: CellModel, wanted: Sequence[Change]) -> tuple[Change, ...]:
    """``wanted`` made valid for the cell's platform: the prerequisites hvbench's own
    validator asks for are added (an iothread or several queues need a virtio bus,
    aio=native an O_DIRECT cache mode), settings already in place are dropped, and a
    change the platform still refuses (an NBD disk has no aio=native) is left out."""
    kind = kind_spec(settings.get(cell.platform_def, "kind"))
    # Fixes to the guest's settings only for a guest verify can re-run with them.
    if kind is None or not kind.RERUNS_WITH_FIX or not settings.vm_of(cell.platform_def):
        return tuple(c for c in wanted if c[0].startswith("workload."))
    flat = _flat(cell)
    changes: list[Change] = []
    keys = {k for k, _ in wanted}
    bus = dict(wanted).get("disk.bus", flat.get("disk.bus"))
    if ("disk.iothread" in keys or "disk.queues" in keys) and bus not in VIRTIO_BUSES:
        changes.append(("disk.bus", "virtio-blk"))
    cache = dict(wanted).get("disk.cache", flat.get("disk.cache"))
    if dict(wanted).get("disk.aio") == "native" and cache not in _DIRECT_CACHES:
        changes.append(("disk.cache", "none"))
    changes += [c for c in wanted if c not in changes]
    changes = [(k, v) for k, v in changes if k.startswith("workload.") or (
        _present(cell, k) and flat.get(k) != v)]
    kept: list[Change] = []
    for change in changes:
        if change[0].startswith("workload.") or _validates(cell.platform_def, [*kept, change]):
            kept.append(change)
    return tuple(kept)


def _present(cell: CellModel, key: str) -> bool:
    """Whether the cell's guest has what platform setting ``key`` applies to (a disk
    setting needs a disk)."""
    return not settings.lookup(key).per_device or bool(settings.values(cell.platform_def, key))


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def change_text(changes: Sequence[Change]) -> str:
    """Changes as a study file writes them: ``disk = { bus = "virtio-blk", iothread =
    true }``, ``vcpus = 2``, ``workload: iodepth = 16`` (keys of the study's
    ``[[workload]]``); a removed key as
    ``disk: remove bps_limit``."""
    groups: dict[str, list[str]] = {}
    plain: list[str] = []
    for key, value in changes:
        group, _, name = key.partition(".")
        if not name:
            plain.append(f"{group} = {_toml(value)}")
        elif value is None:
            plain.append(f"{group}: remove {name}")
        else:
            groups.setdefault(group, []).append(f"{name} = {_toml(value)}")
    out = [f"workload: {', '.join(items)}" if group == "workload"
           else f"{group} = {{ {', '.join(items)} }}" for group, items in groups.items()]
    return "; ".join(out + plain)


def _path_changes(cell: CellModel) -> tuple[Change, ...]:
    """A shorter path per request: the disk on an iothread with native AIO."""
    return _fit(cell, [("disk.iothread", True), ("disk.aio", "native")])


def _more_vcpus(cell: CellModel) -> tuple[Change, ...]:
    vcpus = cell.setting("vcpus")
    return _fit(cell, [("vcpus", (vcpus if isinstance(vcpus, int) else 1) + 1)])


def _kvm(cell: CellModel) -> tuple[Change, ...]:
    return _fit(cell, [("accel", "kvm")])


def _changes_to(*wanted: Change) -> Callable[[CellModel], tuple[Change, ...]]:
    def changes(cell: CellModel) -> tuple[Change, ...]:
        return _fit(cell, wanted)
    return changes


def _whole_requests(cell: CellModel) -> tuple[Change, ...]:
    bus = cell.setting("disk.bus")
    wanted: list[Change] = [] if bus in VIRTIO_BUSES else [("disk.bus", "virtio-blk")]
    return _fit(cell, [*wanted, ("disk.allocation", "full"), ("disk.aio", "native")])


def _deeper(cell: CellModel) -> tuple[Change, ...]:
    """More in flight from the workload itself, then a shorter path."""
    wanted = list(workload_intent(cell.workload_def).deeper)
    return _fit(cell, [*wanted, ("disk.iothread", True), ("disk.aio", "native")])


def _uncached(cell: CellModel) -> tuple[Change, ...]:
    return _fit(cell, [("disk.cache", "none"), *workload_intent(cell.workload_def).uncached])


# -- attribution and layers -----------------------------------------------------------


def _device_is_mine(cell: CellModel) -> bool:
    """The host device's request size can be read as the cell's: its QEMU moved most of
    the device's bytes, or attribution was not sampled. (A low device-wide queue or
    utilisation needs no attribution: the cell's own share of it is lower still.)"""
    share = cell.get("res.disk.cell_share")
    return share is None or share >= CELL_SHARE_MINE


def _busiest_vcpu(cell: CellModel) -> float | None:
    """The busiest vCPU thread's utilisation (the mean over vCPUs where a stored run
    has no per-thread figure): a workload that keeps one vCPU of several busy is as
    bound by it as a one-vCPU guest's."""
    busiest = cell.get("res.vcpu.max_util_pct")
    return busiest if busiest is not None else cell.get("res.vcpu.util_pct")


def _one_of_several(cell: CellModel) -> tuple[float, float, float] | None:
    """(busiest, whole guest, vCPUs) when one thread was saturated on a guest with
    several vCPUs and the guest's CPU as a whole was not: the busiest vCPU thread, the
    guest's busiest CPU or the workload's own thread (:func:`_workload_thread`) at
    :data:`SATURATED_PCT`, the guest's aggregate CPU (else the mean over vCPU threads)
    below it. The workload then runs on one thread: a vCPU more would idle like the
    ones the guest has."""
    threads = cell.get("qemu.vcpu.threads") or 1.0
    if threads <= 1.0:
        return None
    levels = [v for v in (_busiest_vcpu(cell), cell.get("res.guest.cpu_max_busy_pct"),
                          _workload_thread(cell)) if v is not None]
    whole = cell.get("res.guest.cpu_busy_pct")
    whole = whole if whole is not None else cell.get("res.vcpu.util_pct")
    if not levels or max(levels) < SATURATED_PCT or whole is None or whole >= SATURATED_PCT:
        return None
    return max(levels), whole, threads


def _workload_thread(cell: CellModel) -> float | None:
    """The workload's own thread's CPU in a guest (fio's job: usr+sys; iperf3's
    process, one thread up to iperf3 3.15), which a thread moving between vCPUs
    spreads over them: each vCPU half busy, the thread at 97 %. None on the bare host,
    and above :data:`ONE_THREAD_MAX_PCT` (a process using more than one CPU is not
    one thread)."""
    cpu = None if cell.is_native else cell.get("res.workload.cpu_pct")
    return cpu if cpu is not None and cpu <= ONE_THREAD_MAX_PCT else None


def _one_thread_fix(found: tuple[float, float, float], spread: str) -> str:
    busiest, whole, threads = found
    return (f"one thread was saturated ({_n(busiest)} % of a CPU) while the guest's "
            f"{_n(threads)} vCPUs were {_n(whole)} % busy as a whole: the workload runs on "
            f"one thread and more vCPUs would stay idle; {spread}")


def _vcpu_text(cell: CellModel, *, mean: bool = False) -> str | None:
    """The vCPU threads' load as evidence: the busiest thread, and the mean when the
    guest has several vCPUs and they differ (``mean``: the mean first)."""
    busiest, avg = _busiest_vcpu(cell), cell.get("res.vcpu.util_pct")
    if busiest is None:
        return None
    threads = cell.get("qemu.vcpu.threads") or 1.0
    if threads <= 1.0 or avg is None or abs(busiest - avg) < 1.0:
        return f"vCPUs {_n(busiest)} % busy"
    if mean:
        return f"vCPUs {_n(avg)} % busy (the busiest of {_n(threads)}: {_n(busiest)} %)"
    return f"the busiest of {_n(threads)} vCPUs {_n(busiest)} % busy (mean {_n(avg)} %)"


def _vcpu_emulating(cell: CellModel) -> bool:
    """Under TCG, the vCPUs busy emulating: the mean over vCPU threads (what the
    guest's CPU as a whole spent), not the busiest: a symptom is ranked below
    emulation only when emulation took the guest's CPU, not one vCPU's."""
    util = cell.get("res.vcpu.util_pct")
    return cell.accelerator == "tcg" and util is not None and util >= TCG_VCPU_PCT


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
    if size >= REQ_SHRINK_RATIO * native or not _device_is_mine(cell):
        return None
    evidence = [_vs(cell, "res.disk.req_sectors", "host avgrq-sz", "sectors")]
    asked = cell.get("res.workload.block_sectors")
    if asked is not None:
        evidence.insert(0, f"the workload asked {_n(asked)} sectors per request")
    guest = cell.get("res.guest.req_sectors")
    if guest is not None and guest < REQ_SHRINK_RATIO * native:
        return None  # the guest's own block layer already sent them small
    score = SCORE_GENERIC + min(native / max(size, 1.0) / 4.0, 1.5)
    if guest is not None:
        evidence.append(f"guest avgrq-sz {_n(guest)} sectors: shrunk between the guest's "
                        "block layer and the host device")
        score += 0.5  # measured at both ends of the path it names
    # With the guest's requests measured whole, the split happened below the guest,
    # where a busy emulated vCPU does not act (docs/diagnosis.md: the planted cells
    # with busy vCPUs kept their request size from the guest to the host).
    return Hit(score, tuple(evidence), placed=guest is not None)


def _asked(cell: CellModel) -> str:
    depth = cell.get("res.workload.depth")
    source = "fio's mean depth" if "depth_mean" in cell.values else "its definition"
    return f"the workload asked {_n(depth)} in flight ({source})"


def _few_in_flight(cell: CellModel) -> Hit | None:
    queue, util = cell.get("res.disk.queue"), cell.get("res.disk.util_pct")
    lat, added = cell.get("lat_mean_ms"), cell.get("res.disk.added_latency_ms")
    depth = cell.get("res.workload.depth")
    if queue is None or util is None or lat is None or added is None or lat <= 0 or \
            depth is None:
        return None
    # Only when the workload itself asked for few: requests it asked for that never
    # reached the device are another cause (depth-not-delivered and its layers).
    if depth >= ASKED_FEW_DEPTH or queue >= QUEUE_IDLE or util >= UTIL_IDLE_PCT or \
            added < ADDED_LATENCY_SHARE * lat:
        return None
    share = None
    native_lat, native_added = cell.native("lat_mean_ms"), cell.native("res.disk.added_latency_ms")
    if native_lat is not None and native_added is not None and lat > native_lat:
        # Synchronous I/O: throughput is 1/latency, so the gap is the latency grown.
        share = max(0.0, min(100.0, 100.0 * (added - native_added) / (lat - native_lat)))
    return Hit(SCORE_GENERIC + added / lat,
               (_asked(cell), _vs(cell, "res.disk.queue", "host avgqu-sz"),
                _vs(cell, "res.disk.util_pct", "host %util", "%"),
                f"guest latency {_n(lat)} ms = device await "
                f"{_n(cell.get('res.disk.await_ms'))} ms + {_n(added)} ms added per I/O"
                + ("" if native_lat is None else f" (native {_n(native_lat)} ms)")),
               share)


def _undelivered(cell: CellModel) -> tuple[float, float] | None:
    """(asked, host queue) when the workload asked for several requests in flight and
    the host device held under :data:`DELIVERED_SHARE` of them (and of what native's
    device held), the device not busy; else None."""
    depth, queue = cell.get("res.workload.depth"), cell.get("res.disk.queue")
    util = cell.get("res.disk.util_pct")
    if depth is None or queue is None or util is None or depth < ASKED_FEW_DEPTH or \
            util >= UTIL_IDLE_PCT:
        return None
    native = cell.native("res.disk.queue")
    reference = depth if native is None else min(depth, native)
    if queue >= DELIVERED_SHARE * reference:
        return None
    return depth, queue


def _depth_not_delivered(cell: CellModel) -> Hit | None:
    """Requests asked for, not at the host device, and no guest-side evidence to say
    where they were lost: a symptom, placed by neither layer."""
    found = _undelivered(cell)
    if found is None or cell.get("res.guest.queue") is not None:
        return None
    return Hit(SCORE_GENERIC + min(found[0] / max(found[1], 0.1) / 16.0, 0.5),
               (_asked(cell), _vs(cell, "res.disk.queue", "host avgqu-sz"),
                "no guest-side sample: whether the guest could not submit them or the "
                "virtualization path held them is undecided"))


def _lost_in_path(cell: CellModel) -> Hit | None:
    found, guest = _undelivered(cell), cell.get("res.guest.queue")
    if found is None or guest is None or guest < DELIVERED_SHARE * found[0]:
        return None
    return Hit(SCORE_SPECIFIC + 0.5,
               (_asked(cell), f"the guest block layer held {_n(guest)}",
                _vs(cell, "res.disk.queue", "the host device held") +
                ": lost in the virtualization path"))


def _guest_submit(cell: CellModel) -> Hit | None:
    found, guest = _undelivered(cell), cell.get("res.guest.queue")
    if found is None or guest is None or guest >= DELIVERED_SHARE * found[0]:
        return None
    busy, vcpu, job = cell.get("res.guest.cpu_busy_pct"), _busiest_vcpu(cell), \
        _workload_thread(cell)
    cpu = ", ".join(text for text in (
        None if busy is None else f"guest CPU {_n(busy)} % busy",
        _vcpu_text(cell),
        None if job is None else f"the workload's own thread {_n(job)} % of a CPU") if text)
    evidence = (_asked(cell), f"the guest block layer held {_n(guest)}: the guest could "
                "not submit them" + (f" ({cpu})" if cpu else ""),
                _vs(cell, "res.disk.queue", "host avgqu-sz"))
    one = _one_of_several(cell)
    if one is not None:
        # The submitting thread is the limit: another vCPU would idle like the others.
        return Hit(SCORE_SPECIFIC + 0.3, evidence, changes=(), fix=_one_thread_fix(
            one, "submit from more threads (fio numjobs, a job per vCPU) or make each "
            "submission cheaper"))
    guest_max = cell.get("res.guest.cpu_max_busy_pct")
    if any(v is not None and v >= SATURATED_PCT for v in (busy, vcpu, guest_max)):
        return Hit(SCORE_SPECIFIC + 0.3, evidence)  # the rule's own fix: more vCPUs
    return Hit(SCORE_SPECIFIC + 0.3, evidence, fix=_SPARE_CPU_FIX, changes=())


#: guest-submit-bound's fix when the guest's CPU had time to spare: more vCPUs would
#: not submit faster, and what held the requests in the guest (its queue limits, its
#: I/O scheduler) is not sampled, so the fix says where to look and names no change
#: (native ran the same workload definition and delivered its depth, so the
#: definition itself is not the cause).
_SPARE_CPU_FIX = ("the guest's CPU had time to spare, so more vCPUs would not submit faster; "
                  "what held the requests back in the guest is not measured: read its "
                  "queue limits (/sys/block/<dev>/queue/nr_requests, the virtio queue "
                  "size) and its I/O scheduler (/sys/block/<dev>/queue/scheduler)")


def _device_contended(cell: CellModel) -> bool:
    """Whether the host device was busy enough to slow the cell: %util at least
    :data:`UTIL_IDLE_PCT`, or its await at least :data:`DEVICE_SLOWED_RATIO` times
    native's (a device that serves requests in parallel, an SSD or a virtual disk, is
    slowed by others long before its %util, the time with any request in flight, is
    high)."""
    util = cell.get("res.disk.util_pct")
    await_ms, native = cell.get("res.disk.await_ms"), cell.native("res.disk.await_ms")
    return (util is not None and util >= UTIL_IDLE_PCT) or (
        await_ms is not None and native is not None and native > 0
        and await_ms >= DEVICE_SLOWED_RATIO * native)


def _shared_device(cell: CellModel) -> Hit | None:
    share = cell.get("res.disk.cell_share")
    pct = _pct_of_native(cell)
    # Only a busy device slows the cell: others' I/O on an idle device is no cause.
    if share is None or share >= CELL_SHARE_MINE or not _device_contended(cell) \
            or (pct is not None and pct >= NEAR_NATIVE_PCT):
        return None
    dev = _dev(cell)
    total = sum(cell.values.get(f"host.disk.{dev}.{k}", 0.0) for k in ("r_kb_s", "w_kb_s"))
    return Hit(SCORE_SPECIFIC + (1.0 - share),
               (f"{_share_who(cell)} moved {_n(100.0 * share)} % of host device {dev}'s "
                f"{_n(total)} kB/s: others moved {_n(100.0 * (1.0 - share))} %",
                _vs(cell, "res.disk.util_pct", "device %util", "%"),
                _vs(cell, "res.disk.await_ms", "device await", "ms")))


def _share_who(cell: CellModel) -> str:
    """Who the cell's share was measured for, and from what (the source it came from,
    :data:`~hvbench.analysis.resources.SHARE_SOURCES`)."""
    if cell.get("res.disk.cell_share_source") == 0.0:
        return "the cell's cgroup (its io statistics against diskstats)"
    return "the cell's QEMU (/proc/PID/io against diskstats)"


def _flush_per_write(cell: CellModel) -> Hit | None:
    ratio, native = cell.get("res.disk.flush_per_write"), cell.native("res.disk.flush_per_write")
    if ratio is None or not _is_write(cell) or \
            ratio < _limit(cell, "FLUSH_PER_WRITE", FLUSH_PER_WRITE):
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
    # The same guest with a fully written image is the closer baseline: the bare host's
    # file system journals its own writes, which no guest image adds or removes.
    full = _full_sibling_writes(cell)
    amplified_vs_full = writes is not None and full is not None and \
        writes >= GROWTH_WRITE_RATIO * full[1]
    share, native_share = cell.get("res.disk.device_share"), cell.native(
        "res.disk.device_share")
    copied = share is not None and native_share is not None and native_share > 0 and \
        share >= GROWTH_BYTES_RATIO * native_share
    slower = _slower_than_sibling(cell, "disk.allocation", GROWN_ALLOCATIONS)
    if cell.setting("disk.allocation") == "preallocated":
        # Converting a reserved extent neither splits requests nor copies data: only a
        # fully written sibling can show what it costs.
        shrunk = journal = amplified = amplified_vs_full = copied = False
    if not (shrunk or journal or amplified or amplified_vs_full or copied or slower):
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
    if amplified_vs_full and full is not None:
        evidence.append(f"host writes per guest write {_n(writes)} vs {_n(full[1])} on "
                        f"{full[0]} ({_flat_value(cell, full[0], 'disk.allocation')}), "
                        "the same otherwise")
    if copied:
        evidence.append(_vs(cell, "res.disk.device_share",
                            "host bytes written per guest byte (allocation copies and "
                            "zero-fills)"))
    if slower:
        evidence.append(slower)
    found = shrunk + journal + (amplified or amplified_vs_full) + copied + bool(slower)
    return Hit(SCORE_SPECIFIC + 0.6 + 0.4 * min(found, 3), tuple(evidence))


def _full_sibling_writes(cell: CellModel) -> tuple[str, float] | None:
    """The sibling differing only in ``allocation = "full"``, and its host writes per
    guest write (None: no such sibling, or not measured)."""
    sibling = _only_differs(cell, "disk.allocation", GROWN_ALLOCATIONS)
    if sibling is None:
        return None
    writes = derive(sibling[1], native=False).get("res.disk.writes_per_io")
    return None if writes is None else (sibling[0], writes)


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
    return (f"{main} {_n(cell.values[main])} vs {_n(theirs)} on {name} "
            f"({_flat_value(cell, name, key)}), "
            "the same otherwise")


def _flat_of(cell: CellModel, sibling: str) -> Mapping[str, Any]:
    return cell.siblings[sibling][0]


def _uncached_opens(cell: CellModel) -> list[str]:
    """The images QEMU opened through the host page cache (no O_DIRECT in the flags of
    its file descriptor, /proc/PID/fdinfo) under a workload that asked for O_DIRECT."""
    if not cell.workload_def.get("direct"):
        return []
    return [f"QEMU opened {img.get('path')} without O_DIRECT (fdinfo flags "
            f"{img.get('flags')}): the guest's O_DIRECT stops at the host page cache"
            for img in cell.host_config.get("images") or []
            if isinstance(img, Mapping) and img.get("o_direct") is False]


def _window_covered(cell: CellModel) -> float | None:
    """The share of the monitor window the workload was moving data: its bytes
    (``file_size`` of its definition) at its throughput, over ``phase_wall_s``; None
    when either is unknown. Device rates are window averages: a 25 ms phase in a 1 s
    window says nothing about how many bytes the device moved for it."""
    size, rate = cell.workload_def.get("file_size"), cell.values.get("mb_s")
    wall = cell.values.get("phase_wall_s")
    if not isinstance(size, int | float) or not rate or not wall:
        return None
    return size / 1e6 / rate / wall


def _share_readable(cell: CellModel) -> bool:
    """Device bytes per workload byte mean something for this cell: the workload
    filled at least :data:`WINDOW_COVERED` of the window (when that is known), and
    native's device, with O_DIRECT, moved at least :data:`DEVICE_SHARE_CACHED` of its
    workload's bytes (else the window, not a cache, sets both ratios)."""
    covered = _window_covered(cell)
    if covered is not None and covered < WINDOW_COVERED:
        return False
    native = cell.native("res.disk.device_share")
    return native is None or native >= DEVICE_SHARE_CACHED


def _cache_evidence(cell: CellModel) -> list[str]:
    """Why the host device is not what the cell measured (empty: it is, as far as the
    evidence goes): the device moved far fewer bytes per workload byte than natively
    (or, without native, than the workload moved with O_DIRECT), the cell beat the
    bare host, or QEMU opened the image through the page cache. Whatever the
    throughput: a slow cell served by a cache measured the cache too."""
    share, native = cell.get("res.disk.device_share"), cell.native("res.disk.device_share")
    pct = _pct_of_native(cell)
    cache = cell.setting("disk.cache")
    named = f" (cache={cache})" if cache else ""
    out = []
    if share is not None and not _share_readable(cell):
        share = None
    if share is not None and native is not None and share / native < DEVICE_SHARE_CACHED:
        out.append(f"the host device moved {_n(100.0 * share / native)} % of the bytes per "
                   f"workload byte it moved natively{named}")
    elif share is not None and native is None and cell.workload_def.get("direct") and \
            share < DEVICE_SHARE_ABSOLUTE:
        out.append(f"the host device moved {_n(share)} bytes per byte of O_DIRECT I/O"
                   f"{named}")
    if pct is not None and pct >= CACHED_FASTER_PCT:
        out.append(f"{_n(pct)} % of native: faster than the bare host's device")
    return out + _uncached_opens(cell)


def _page_cache(cell: CellModel) -> Hit | None:
    evidence = _cache_evidence(cell)
    if not evidence:
        return None
    cache = cell.setting("disk.cache")
    where = "the host page cache" if cache in ("writeback", "unsafe") else "a page cache"
    return Hit(SCORE_SPECIFIC + 1.0,
               (*evidence, f"{where} served the guest: the device is not what was measured"))


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
    noise = (cell.main_cov_pct or 0.0) / 100.0
    slower = tput is not None and tput <= min(EMULATED_THROUGHPUT_RATIO, 1.0 - noise)
    if (ratio is None or ratio < EMULATED_COST_RATIO) and not slower:
        return None
    evidence = [f"{settings.lookup(key).key}={model}: {cost.split('.')[1].replace('_', ' ')} "
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
    return f"{settings.lookup(key).key}={_flat_of(cell, sibling).get(key)}"


def _emulated_disk(cell: CellModel) -> Hit | None:
    return _emulated(cell, "disk.bus", EMULATED_BUSES, VIRTIO_BUSES, "res.cpu_ms_per_io")


def _emulated_nic(cell: CellModel) -> Hit | None:
    return _emulated(cell, "nic.model", EMULATED_NICS, ("virtio-net",), "res.cpu_ms_per_mb")


def _vcpu_saturated(cell: CellModel) -> Hit | None:
    """The guest's vCPUs had no time to spare: their host threads busy, or the guest's
    own CPU accounting (sampled inside it) busy; either at :data:`SATURATED_PCT`. The
    guest's view decides where the host threads' share understates it (a TCG vCPU
    thread also halts and wakes between the guest's busy spells). Each is read on the
    busiest vCPU or CPU; on a guest with several, also the workload's own thread
    (:func:`_workload_thread`), which the guest may move between vCPUs: then the fix
    is more threads, not more vCPUs (:func:`_one_of_several`)."""
    util, guest = _busiest_vcpu(cell), cell.get("res.guest.cpu_busy_pct")
    guest_max = cell.get("res.guest.cpu_max_busy_pct")
    levels = [v for v in (util, guest, guest_max) if v is not None and v >= SATURATED_PCT]
    if util is None:
        return None
    demand = _runnable_demand(cell)
    tcg = cell.accelerator == "tcg"
    # Under TCG a busy vCPU is emulating: that is the TCG rule's finding.
    score = SCORE_TCG if tcg else SCORE_SPECIFIC
    evidence = [f"{_vcpu_text(cell)}"
                + (f", {_n(cell.get('res.cpu_ms_per_req'))} CPU ms per request"
                   if cell.get("res.cpu_ms_per_req") is not None else "")]
    if guest is not None:
        evidence.append(f"the guest's own CPU {_n(guest)} % busy (its /proc/stat)"
                        + (f", its busiest CPU {_n(guest_max)} %"
                           if guest_max is not None and guest_max - guest >= 1.0 else ""))
    if demand is not None:
        levels.append(demand)
        evidence.append(_demand_text(cell, demand))
    one = _one_of_several(cell)
    job = _workload_thread(cell)
    if one is not None and job is not None and job >= SATURATED_PCT:
        # A thread the guest moves between vCPUs: no vCPU saturated, the thread is.
        levels.append(job)
        evidence.append(f"the workload's own thread {_n(job)} % of a CPU")
    if not levels:
        return None
    hit_score = score + (max(levels) - SATURATED_PCT) / 100.0
    if one is None:
        return Hit(hit_score, tuple(evidence))
    return Hit(hit_score, tuple(evidence), changes=(), fix=_one_thread_fix(
        one, "spread the work over more threads (fio numjobs; several iperf3 processes, "
        "since one runs all its streams in one thread before iperf3 3.16; more server "
        "workers) or do less work per I/O in the guest"))


def _runnable_demand(cell: CellModel) -> float | None:
    """The busiest vCPU thread's runnable share (running or waiting for a core) when it
    reached :data:`SATURATED_PCT`: the guest always had work and never halted, whatever
    share of a core the host gave it. None when others made it wait
    (:func:`_others_contended`, :func:`_host_contention`'s finding): the guest would
    have run had they not held the cores."""
    runnable = cell.get("res.vcpu.runnable_pct")
    if runnable is None or runnable < SATURATED_PCT or _others_contended(cell):
        return None
    return runnable


def _demand_text(cell: CellModel, runnable: float) -> str:
    wait = cell.get("res.vcpu.wait_pct")
    text = f"the vCPU thread runnable {_n(runnable)} % of the window (it did not halt)"
    if wait is None:
        return text
    held = _own_cores_text(cell) if _self_contended(cell) else _others_text(cell)
    return f"{text}, {_n(wait)} % waiting for a core: {held}"


def _main_loop(cell: CellModel) -> Hit | None:
    found = [(cls, v) for cls in ("main", "iothread")
             if (v := cell.get(f"res.{cls}.util_pct")) is not None and v >= SATURATED_PCT]
    if not found:
        return None
    cls, util = max(found, key=lambda item: item[1])
    label = "QEMU main loop" if cls == "main" else "iothread"
    return Hit(SCORE_SPECIFIC + (util - SATURATED_PCT) / 50.0,
               (f"{label} {_n(util)} % of one core",))


def _daemon_saturated(cell: CellModel) -> Hit | None:
    util = cell.get("res.daemon.util_pct")
    if util is None or util < SATURATED_PCT:
        return None
    evidence = [f"storage daemon iothread {_n(util)} % of one core"]
    execs = [v for name, v in cell.values.items()
             if name.startswith("qsd") and name.endswith(".iothread.exec_per_s")]
    if execs:
        evidence.append(f"{_n(max(execs))} executions/s")
    return Hit(SCORE_SPECIFIC + (util - SATURATED_PCT) / 50.0, tuple(evidence))


def _no_storage_daemon(cell: CellModel) -> str | None:
    backend = cell.setting("disk.backend")
    return None if backend == "vhost-user" else f"disk.backend is {backend or 'not set'}, " \
        "not vhost-user: no storage daemon"


def _no_polling(cell: CellModel) -> str | None:
    """Why the cell's disk does not poll (None: it does). An iothread polls with
    ``poll_max_ns`` unset (QEMU's adaptive default) or above 0."""
    if not cell.setting("disk.iothread"):
        return "no iothread: nothing polls"
    poll = cell.setting("disk.poll_max_ns")
    return None if poll is None or poll > 0 else "poll_max_ns = 0: the iothread does not poll"


def _polling_without_gain(cell: CellModel) -> Hit | None:
    """The iothread polls, the sibling with ``poll_max_ns = 0`` (otherwise the same)
    was measured, and polling cost CPU without raising the headline beyond noise.
    Without that sibling there is no evidence what polling buys: no finding. Cells that
    do not poll never get here (:func:`_no_polling` makes the rule not applicable)."""
    sibling = _only_differs(cell, "disk.poll_max_ns", (0,))
    main = cell.main
    if sibling is None or main is None or main not in cell.values:
        return None
    name, theirs = sibling
    mine_cpu, their_cpu = cell.values.get("qemu.iothread.cpu_pct"), \
        theirs.get("qemu.iothread.cpu_pct")
    rate = theirs.get(main)
    if mine_cpu is None or their_cpu is None or not rate:
        return None
    extra, gain = mine_cpu - their_cpu, 100.0 * (cell.values[main] / rate - 1.0)
    noise = max(POLL_GAIN_PCT, cell.main_cov_pct or 0.0)
    if extra < POLL_EXTRA_CPU_PCT or gain > noise:
        return None
    poll = cell.setting("disk.poll_max_ns")
    setting = "QEMU's default" if poll is None else f"poll_max_ns={poll}"
    return Hit(SCORE_COST, (
        f"iothread {_n(mine_cpu)} % of a core polling ({setting}) vs {_n(their_cpu)} % on "
        f"{name} (poll_max_ns=0), the same otherwise",
        f"{main} {_n(cell.values[main])} vs {_n(rate)} there ({gain:+.1f} %, within "
        f"{noise:.0f} %)"))


def _self_contended(cell: CellModel) -> bool:
    """The vCPU waited for cores the cell itself held: processes outside it (not its
    QEMU, storage daemons or load generator) used under :data:`CONTENDER_PCT` of a
    core. Unknown (a stored run without the host's CPU): not self-contended."""
    others = cell.get("res.host.others_cpu_pct")
    return others is not None and others < _limit(cell, "CONTENDER_PCT", CONTENDER_PCT)


def _others_contended(cell: CellModel) -> bool:
    """The busiest-waiting vCPU waited at least :data:`WAIT_PCT` for cores that
    processes outside the cell held (not :func:`_self_contended`)."""
    wait = cell.get("res.vcpu.wait_pct")
    return wait is not None and wait >= _limit(cell, "WAIT_PCT", WAIT_PCT) \
        and not _self_contended(cell)


def _others_text(cell: CellModel) -> str:
    return f"processes outside the cell used {_n(cell.get('res.host.others_cpu_pct'))} % " \
        "of a core"


def _own_cores_text(cell: CellModel) -> str:
    """Who held the cores a self-contended vCPU waited for, as evidence."""
    parts = []
    qemu, vcpu = cell.get("qemu.total.cpu_pct"), cell.get("qemu.vcpu.cpu_pct")
    if qemu is not None and vcpu is not None:
        parts.append(f"QEMU's other threads {_n(max(qemu - vcpu, 0.0))} %")
    load = cell.get("res.host.load_cpu_pct")
    if load is not None:
        parts.append(f"the cell's own load generator {_n(load)} %")
    parts.append(f"other processes {_n(cell.get('res.host.others_cpu_pct'))} %")
    return (f"the host's cores were held by the cell itself ({', '.join(parts)} of a "
            f"core, host {_n(cell.get('res.host.cpu_busy_pct'))} % busy)")


def _host_contention(cell: CellModel) -> Hit | None:
    wait, limit = cell.get("res.vcpu.wait_pct"), _limit(cell, "WAIT_PCT", WAIT_PCT)
    if wait is None or not _others_contended(cell):
        # Without others on the host the wait is the cell's own threads and load
        # generator sharing too few cores: no neighbour to move, no weight to raise.
        return None
    evidence = [f"vCPU run-queue wait {_n(wait)} % (runnable, not running"
                + (", the vCPU that waited most)" if (cell.get("qemu.vcpu.threads") or 1.0) > 1.0
                   else ")"),
                f"host CPU busy {_n(cell.get('res.host.cpu_busy_pct'))} %"]
    others = cell.get("res.host.others_cpu_pct")
    if others is not None:
        load = cell.get("res.host.load_cpu_pct")
        evidence.append(f"{_others_text(cell)} (attribution: the host's busy time less "
                        "QEMU's, its storage daemons'" + (
                            f" and its load generator's {_n(load)} %"
                            if load is not None else "") + ")")
    execs = cell.get("qemu.vcpu.exec_per_s")
    if execs is not None:
        evidence.append(f"{_n(execs)} executions/s, "
                        f"{_n(cell.get('qemu.vcpu.cpu_ms_per_exec'))} ms CPU per execution")
    score = SCORE_SPECIFIC + min((wait - limit) / 40.0, 1.0)
    scenario = cell.setting("scenario")
    alone = _only_differs(cell, "scenario", (None,)) if scenario else None
    alone_wait = None if alone is None else alone[1].get(
        "qemu.vcpu.max_wait_pct", alone[1].get("qemu.vcpu.wait_pct"))
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
    limit = _limit(cell, "LINK_SATURATED_PCT", LINK_SATURATED_PCT)
    if util is None or util < limit or cell.link_mbit is None:
        return None
    main = cell.main
    share = _gap_share(cell, cell.link_mbit) if main == "mbit_s" else None
    return Hit(SCORE_SPECIFIC + 1.0 + (util - limit) / 100.0,
               (f"link at {_n(util)} % of its shaped {_n(cell.link_mbit)} Mbit/s",), share)


def _shared_link(cell: CellModel) -> Hit | None:
    share, busy = cell.get("res.net.cell_share"), cell.get("res.net.link_busy_pct")
    pct = _pct_of_native(cell)
    # As for a device: only a link busy with everyone's traffic slows the cell.
    if share is None or share >= CELL_SHARE_MINE or busy is None \
            or busy < _limit(cell, "LINK_SATURATED_PCT", LINK_SATURATED_PCT) \
            or (pct is not None and pct >= NEAR_NATIVE_PCT):
        return None
    who = ("its tap's bytes" if cell.get("res.net.cell_share_source") == 0.0
           else "its workload's rate")
    total = cell.get("res.net.link_busy_mbit") or 0.0
    return Hit(SCORE_SPECIFIC + (1.0 - share),
               (f"the cell moved {_n(100.0 * share)} % of the link's {_n(total)} Mbit/s "
                f"({who} against the link's own counters): others moved "
                f"{_n(100.0 * (1.0 - share))} %",
                f"link at {_n(busy)} % of its shaped {_n(cell.link_mbit or 0.0)} Mbit/s "
                "with everyone's traffic while the cell ran"))


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
    fired = main_cpu >= _limit(cell, "SLIRP_MAIN_PCT", SLIRP_MAIN_PCT)
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


def _cgroup_limits(cell: CellModel) -> list[Mapping[str, Any]]:
    """The I/O limits the host configuration evidence found on the QEMU process's
    cgroups (blkio throttle v1, io.max v2)."""
    limits = cell.host_config.get("io_limits") or []
    return [lim for lim in limits if isinstance(lim, Mapping)]


def _limit_bytes(cell: CellModel, limit: Mapping[str, Any]) -> float | None:
    """A cgroup limit in bytes/s: a bps limit as it is, an I/O-per-second limit at the
    cell's own bytes per I/O (its throughput over its I/O rate); None when that is not
    measured."""
    value, kind = limit.get("value"), str(limit.get("kind", ""))
    if not isinstance(value, int | float):
        return None
    if "bps" in kind:
        return float(value)
    rate, mb_s = cell.values.get("iops"), cell.values.get("mb_s")
    return float(value) * mb_s * 1e6 / rate if rate and mb_s else None


def _limited_mb_s(cell: CellModel) -> float | None:
    """The throughput a limit is compared with: the median of the repetitions (a limit
    caps each repetition; one slowed further by something else must not move the
    figure off the cap, as it moves the mean), else the mean."""
    if cell.main == "mb_s" and cell.main_median is not None:
        return cell.main_median
    return cell.values.get("mb_s")


def _named_limit(cell: CellModel) -> tuple[str, str, float | None] | None:
    """(evidence, fix, bytes/s) of the limit actually found, closest to the measured
    throughput: QEMU's own ``bps_limit`` or a cgroup limit of the QEMU process."""
    measured = _limited_mb_s(cell)
    found: list[tuple[str, str, float | None]] = []
    limit = cell.setting("disk.bps_limit")
    if isinstance(limit, int | float) and limit > 0:
        found.append((f"the configured bps_limit {_n(limit / 1e6)} MB/s",
                      "raise or remove bps_limit on the disk (QEMU -drive "
                      "throttling.bps-total; libvirt <iotune><total_bytes_sec>)", float(limit)))
    for lim in _cgroup_limits(cell):
        path, value = lim.get("path"), lim.get("value")
        unit = " B/s" if "bps" in str(lim.get("kind", "")) else " I/O per s"
        found.append((f"cgroup limit {path}: {lim.get('device')} {value}{unit} on the QEMU "
                      "process", f"raise or remove the cgroup limit on the QEMU process: "
                      f"write \"{lim.get('device')} {lim.get('remove', '0')}\" to {path}",
                      _limit_bytes(cell, lim)))
    if not found:
        return None

    def distance(item: tuple[str, str, float | None]) -> float:
        return math.inf if item[2] is None or not measured else abs(measured * 1e6 - item[2])

    return min(found, key=distance)


def _held(cell: CellModel, *, waiting: bool = True) -> bool:
    """io-limit's evidence but flatness: slow, nobody on the path busy, requests held
    (``waiting``: and the time added per I/O is not QEMU's CPU work per I/O)."""
    pct = _pct_of_native(cell)
    util, vcpu = cell.get("res.disk.util_pct"), _busiest_vcpu(cell)
    if cell.kind != "disk" or pct is None or util is None or vcpu is None:
        return False
    wait = cell.get("res.vcpu.wait_pct") or 0.0
    added, cost = cell.get("res.disk.added_latency_ms"), cell.get("res.cpu_ms_per_io")
    # A vCPU waiting for a core is not waiting for I/O: that is contention. A request
    # whose added latency is QEMU's CPU work per I/O is being processed, not held.
    processed = added is None or cost is None or added < LIMIT_WAIT_RATIO * cost
    return not (pct >= LIMIT_BELOW_NATIVE_PCT or util >= LIMIT_DEVICE_IDLE_PCT or
                vcpu >= LIMIT_VCPU_IDLE_PCT or wait >= _limit(cell, "WAIT_PCT", WAIT_PCT) or
                (waiting and processed))


def needs_flatness(cell: CellModel) -> bool:
    """Whether the cell's verdict turns on its within-repetition flatness (every other
    condition of ``io-limit`` holds and no series was read yet): the report reads the
    10 Hz series of those cells only."""
    return not cell.is_native and cell.series_cov_pct is None and _held(cell)


def _matching_limit(cell: CellModel) -> tuple[str, str, float | None, bool] | None:
    """The limit found (:func:`_named_limit`) and whether the measured throughput is
    within :data:`LIMIT_MATCH` of it."""
    named = _named_limit(cell)
    if named is None:
        return None
    measured = _limited_mb_s(cell)
    value = named[2]
    matched = value is not None and bool(measured) and \
        abs((measured or 0.0) * 1e6 - value) <= LIMIT_MATCH * value
    return (*named, matched)


def _io_limit(cell: CellModel) -> Hit | None:
    pct = _pct_of_native(cell)
    flat_cov = cell.get("res.series_cov_pct")
    added, cost = cell.get("res.disk.added_latency_ms"), cell.get("res.cpu_ms_per_io")
    found = _matching_limit(cell)
    waiting = added is not None and cost is not None and added >= LIMIT_WAIT_RATIO * cost
    # A configured limit that the throughput sits at identifies the limiter by itself:
    # at a throttled few I/Os per second, QEMU's CPU per I/O (its vCPUs' idle-loop
    # emulation divided by those few I/Os) can pass for work on each request.
    if not _held(cell, waiting=not (found is not None and found[3])):
        return None
    flat = flat_cov is not None and flat_cov <= LIMIT_FLAT_COV_PCT
    # A limiter shows as throughput flat within the repetition, or as a limit in the
    # configuration that the throughput sits at; a phase too short for three whole
    # seconds of series has only the second kind of evidence, and without either the
    # held requests are unexplained, never "flat" from one repetition's mean.
    if not flat and (found is None or not found[3]):
        return None
    shape = (f"flat within the repetition (CoV {_n(flat_cov)} % of 1 s bins of the "
             "device's throughput)" if flat else "no series long enough to show flatness")
    evidence = [f"{_n(pct)} % of native, {shape}",
                _vs(cell, "res.disk.util_pct", "host %util", "%"),
                f"{_vcpu_text(cell)}, blocked {_n(cell.get('qemu.vcpu.blocked_pct'))} %; "
                f"{_n(added)} ms added per I/O above the device against {_n(cost)} ms of QEMU "
                "CPU per I/O" + (": requests wait between guest and device"
                                 if waiting else "")]
    if found is None:
        where = ("no limit in QEMU's configuration or the QEMU process's cgroups"
                 if cell.host_config else "no limit in QEMU's configuration, and the host "
                 "configuration (cgroups) was not recorded with this run")
        evidence.append(f"{where}: the limiter is unidentified")
        return Hit(SCORE_SPECIFIC + 0.5, tuple(evidence),
                   fix="find the limiter outside QEMU's configuration: the QEMU process's "
                       "cgroup (blkio.throttle.*, io.max), the storage below the host "
                       "device", changes=())
    text, fix, value, matched = found
    evidence.append(f"limit found: {text}")
    share, score = None, SCORE_SPECIFIC + 1.0
    if matched and value is not None:
        median = cell.main == "mb_s" and cell.main_median is not None
        evidence[-1] += (f" = the throughput {_n(_limited_mb_s(cell))} MB/s"
                         + (" (median of the repetitions)" if median else ""))
        share, score = _gap_share(cell, value / 1e6), SCORE_SPECIFIC + 1.5
    changes = _fit(cell, [("disk.bps_limit", None)]) if text.startswith("the configured") \
        else ()
    return Hit(score, tuple(evidence), share, fix=fix, changes=changes)


def _quota_of(cell: CellModel) -> tuple[float, str, str] | None:
    """(quota in % of one CPU, where and what it is, the fix) of a CPU quota on the QEMU
    process's cgroup (v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``, v2 ``cpu.max``),
    None when it has none (v1 -1, v2 ``max``) or it was not recorded."""
    cpu = cell.host_config.get("cpu")
    if not isinstance(cpu, Mapping):
        return None
    quota, period, both = (cpu.get("cpu.cfs_quota_us"), cpu.get("cpu.cfs_period_us"),
                           cpu.get("cpu.max"))
    if isinstance(quota, Mapping) and isinstance(period, Mapping):
        q, p = str(quota.get("value", "")), str(period.get("value", ""))
        if q.isdigit() and p.isdigit() and int(p) > 0:
            return (100.0 * int(q) / int(p), f"{quota.get('path')} {q} per "
                    f"cpu.cfs_period_us {p}", f"write -1 to {quota.get('path')}")
    if isinstance(both, Mapping):
        fields = str(both.get("value", "")).split()
        if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit() \
                and int(fields[1]) > 0:
            return (100.0 * int(fields[0]) / int(fields[1]),
                    f"{both.get('path')} {fields[0]} {fields[1]}",
                    f"write \"max {fields[1]}\" to {both.get('path')}")
    return None


def _cpu_quota(cell: CellModel) -> Hit | None:
    """The QEMU process's cgroup has a CPU quota and QEMU used (nearly) all of it: the
    quota caps the vCPUs, whatever they run (emulation under TCG included). Its use is
    all its threads' (the quota counts the whole group): at least that much of the
    group's."""
    found = _quota_of(cell)
    used = cell.get("qemu.total.cpu_pct")
    if used is None:
        used = cell.get("qemu.vcpu.cpu_pct")
    if found is None or used is None or used < CPU_QUOTA_USE * found[0]:
        return None
    quota, where, remove = found
    vcpu = cell.get("qemu.vcpu.cpu_pct")
    evidence = (f"CPU quota on the QEMU process's cgroup: {where} = {_n(quota)} % of one "
                "CPU",
                f"QEMU used {_n(used)} % of a core ({_n(100.0 * used / quota)} % of the "
                f"quota), its vCPU threads {_n(vcpu)} %",
                f"vCPU run-queue wait {_n(cell.get('res.vcpu.wait_pct'))} % (throttled "
                "threads wait for the next period)")
    return Hit(SCORE_SPECIFIC + 2.0, evidence, fix="raise or remove the CPU quota on the "
               f"QEMU process's cgroup: {remove}", changes=())


def _tcg(cell: CellModel) -> Hit | None:
    if cell.accelerator != "tcg":
        return None
    if not _vcpu_emulating(cell):
        return None
    return Hit(SCORE_TCG, (f"accelerator tcg: {_vcpu_text(cell, mean=True)} emulating "
                           "the guest",))


# Workload classes (:data:`~hvbench.analysis.resources.WorkloadClass`), not kinds.
_DISK: frozenset[WorkloadClass] = frozenset({"disk"})
_NET: frozenset[WorkloadClass] = frozenset({"network", "web"})
_ALL: frozenset[WorkloadClass] = frozenset({"disk", "network", "web", "other"})

#: Every rule, in the order ``docs/diagnosis.md`` lists them.
RULES: tuple[Rule, ...] = (
    Rule("request-size-shrunk", "request size shrunk on the way to the device", _DISK,
         ("res.disk.req_sectors", "native:res.disk.req_sectors"), _request_shrunk,
         "keep guest requests whole: a virtio bus, a fully allocated image, aio=native "
         "(libvirt <driver cache='none' io='native'/>)", True,
         changes=_whole_requests, symptom=True),
    Rule("few-in-flight", "the workload keeps few requests in flight and the device "
         "idles between them", _DISK,
         ("res.workload.depth", "res.disk.queue", "res.disk.util_pct", "lat_mean_ms",
          "res.disk.added_latency_ms"), _few_in_flight,
         "the workload asked for one request at a time: issue more at once (fio iodepth "
         "with an asynchronous engine) or shorten the path per request (libvirt <driver "
         "iothread='1' io='native'/>)", True, changes=_deeper),
    Rule("depth-not-delivered", "requests the workload asked for did not reach the "
         "device (where they were lost is undecided)", _DISK,
         ("res.workload.depth", "res.disk.queue", "res.disk.util_pct"), _depth_not_delivered,
         "sample the guest's block layer to place the loss; meanwhile a shorter path per "
         "request (libvirt <driver iothread='1' io='native'/>)", True,
         changes=_path_changes, symptom=True),
    Rule("lost-in-virt-path", "requests in flight in the guest lost in the virtualization "
         "path", _DISK, ("res.workload.depth", "res.guest.queue", "res.disk.queue",
                         "res.disk.util_pct"), _lost_in_path,
         "more requests through the path at once: the disk on an iothread with native AIO "
         "(libvirt <driver iothread='1' io='native'/>)", True, changes=_path_changes),
    Rule("guest-submit-bound", "the guest could not submit the requests the workload "
         "asked for", _DISK, ("res.workload.depth", "res.guest.queue", "res.disk.queue",
                              "res.disk.util_pct"), _guest_submit,
         "more guest CPU to submit with (libvirt <vcpu>)", True, changes=_more_vcpus,
         symptom=True),
    Rule("shared-device", "the host device is busy with other users' I/O", _DISK,
         ("res.disk.cell_share",), _shared_device,
         "measure on a device nobody else uses, or move the other users' I/O off it: not "
         "a setting of the guest", True),
    Rule("flush-per-write", "a flush per write (write-through or directsync cache)", _DISK,
         ("res.disk.flush_per_write",), _flush_per_write,
         "cache=none (QEMU -drive cache=none; libvirt <driver cache='none'/>); the guest "
         "still flushes when it asks to", True, "disk.cache", ("none", "writeback"),
         changes=_changes_to(("disk.cache", "none"))),
    Rule("image-growth", "image growth on first write (sparse file or qcow2 allocation)",
         _DISK, ("res.disk.req_sectors",), _image_growth,
         "qemu-img create -o preallocation=full; libvirt: a volume with <allocation> "
         "equal to its <capacity>, or virsh vol-create --prealloc-metadata for qcow2 "
         "metadata only", True, "disk.allocation", GROWN_ALLOCATIONS,
         changes=_changes_to(("disk.allocation", "full"))),
    Rule("host-page-cache", "a page cache served the guest (the device is not what was "
         "measured)", _DISK, ("res.disk.device_share",), _page_cache,
         "open the image with O_DIRECT so the host device is measured (libvirt <driver "
         "cache='none'/>), and O_DIRECT in the guest", True, "disk.cache",
         ("none", "directsync"), changes=_uncached),
    Rule("emulated-controller", "emulated disk controller (CPU per I/O far above virtio)",
         _DISK, ("res.cpu_ms_per_io",), _emulated_disk,
         "QEMU -device virtio-blk-pci; libvirt <target bus='virtio'/>",
         True, "disk.bus", VIRTIO_BUSES, changes=_changes_to(("disk.bus", "virtio-blk"))),
    Rule("emulated-nic", "emulated NIC (CPU per byte far above virtio)", _NET,
         ("res.cpu_ms_per_mb",), _emulated_nic,
         "QEMU -device virtio-net-pci; libvirt <model type='virtio'/>", True, "nic.model",
         ("virtio-net",), changes=_changes_to(("nic.model", "virtio-net"))),
    Rule("vcpu-saturated", "guest vCPU saturated (CPU-bound)", _ALL,
         ("res.vcpu.util_pct",), _vcpu_saturated,
         "more vCPUs (libvirt <vcpu>), or less work per I/O in the guest",
         True, "vcpus", changes=_more_vcpus),
    Rule("main-loop-saturated", "QEMU main loop or iothread saturated", _ALL,
         ("res.main.util_pct",), _main_loop,
         "move device I/O off the main loop: an iothread for the disk (libvirt "
         "<iothreads>, <driver iothread='1'/>), vhost=on for tap NICs", True,
         "disk.iothread", (True,), changes=_changes_to(("disk.iothread", True))),
    Rule("storage-daemon-saturated", "the vhost-user storage daemon's iothread saturated",
         _DISK, ("res.daemon.util_pct",), _daemon_saturated,
         "more queues on the export (disk.queues) or fewer disks per daemon; "
         "poll_max_ns = 0 if the busy time is polling (its CPU then buys no I/O)", True,
         "disk.queues", inapplicable=_no_storage_daemon),
    Rule("polling-without-gain", "iothread polling burns CPU without a throughput gain",
         _DISK, ("res.iothread.util_pct",), _polling_without_gain,
         "poll_max_ns = 0 (QEMU -object iothread,poll-max-ns=0): the polling core's time "
         "buys no I/O here; keep polling only where it measurably raises the rate", True,
         "disk.poll_max_ns", (0,), changes=_changes_to(("disk.poll_max_ns", 0)),
         inapplicable=_no_polling),
    Rule("host-cpu-contention", "host CPU contention (run-queue wait, neighbours, "
         "weights)", _ALL, ("res.vcpu.wait_pct",), _host_contention,
         "give the guest its own core (pin: libvirt <vcpupin>, taskset) or a larger CPU "
         "weight (cgroup cpu.weight; libvirt <shares>), or fewer busy neighbours", True),
    Rule("link-saturated", "link saturated", _NET, ("res.net.link_util_pct",), _link,
         "a faster link ([[lab.host]] rate) or less traffic sharing it", True),
    Rule("shared-link", "the lab link is busy with other users' traffic", _NET,
         ("res.net.cell_share", "res.net.link_busy_pct"), _shared_link,
         "measure on a link nobody else uses (a [[lab.host]] of its own), or move the "
         "other traffic off it: not a setting of the guest", True),
    Rule("user-mode-networking", "user-mode networking (slirp)", _NET,
         ("qemu.main.cpu_pct",), _user_net,
         "QEMU -netdev tap,vhost=on; libvirt <interface type='bridge'>", True,
         "nic.backend", ("tap",), changes=_changes_to(("nic.backend", "tap"))),
    Rule("io-limit", "an I/O limit between guest and device", _DISK,
         ("res.disk.util_pct", "res.vcpu.util_pct", "res.disk.added_latency_ms",
          "res.cpu_ms_per_io", "native:mb_s"), _io_limit,
         "raise or remove the limit found", True, "disk.bps_limit", (None,)),
    # No required evidence: without a quota in the host configuration (every cell of a
    # host that sets none) there is nothing to abstain on; with one, _cpu_quota reads
    # QEMU's CPU itself and does not fire without it.
    Rule("cpu-quota", "a CPU quota on the QEMU process caps the guest", _ALL,
         (), _cpu_quota,
         "raise or remove the CPU quota on the QEMU process's cgroup", True),
    Rule("tcg-emulation", "emulation (TCG) dominating", _ALL, ("res.vcpu.util_pct",), _tcg,
         "a host where KVM works: under TCG every guest instruction is emulated", False,
         "accel", ("kvm",), changes=_kvm),
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
    return (f"{_flat_value(cell, name, rule.knob)} on {name}: "
            f"{cell.main} {_n(after)} vs {_n(before)}{delta}")


def _finding(cell: CellModel, rule: Rule, hit: Hit) -> Finding:
    tcg = cell.accelerator == "tcg"
    carries = rule.carries_to_kvm and not (tcg and rule.name in _TCG_ARTEFACTS)
    changes = hit.changes if hit.changes is not None else (
        rule.changes(cell) if rule.changes is not None else ())
    return Finding(rule.name, rule.title, round(hit.score, 3), hit.evidence,
                   hit.fix or rule.fix, carries, hit.share_pct, _effect(cell, rule), changes)


def _below_emulation(finding: Finding) -> Finding:
    """A symptom of a vCPU busy emulating, ranked under ``tcg-emulation`` and not
    claimed to carry over to KVM: the busy vCPU is the cause until KVM shows otherwise."""
    return replace(finding, score=min(finding.score, round(SCORE_TCG - 0.1, 3)),
                   carries_to_kvm=False,
                   evidence=(*finding.evidence, "the vCPU is busy emulating (TCG): "
                             "likely a consequence of emulation, not measured under KVM"))


def _unusual(cell: CellModel) -> tuple[str, ...]:
    """The derived metrics furthest from native's (by the factor between them)."""
    ranked = []
    for name, value in cell.derived.items():
        native = cell.native(name)
        if native is None or value <= 0 or native <= 0 or not name.startswith("res."):
            continue
        ranked.append((abs(math.log(value / native)), name, value, native))
    ranked.sort(key=lambda item: (-item[0], item[1]))
    return tuple(f"{name} {_n(value)} vs {_n(native)} natively ({value / native:.2g}x)"
                 for factor, name, value, native in ranked[:UNUSUAL_SHOWN]
                 if factor >= math.log(UNUSUAL_FACTOR))


def _outcome(cell: CellModel, dominant: Finding | None, pct: float | None
             ) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """(outcome, validity evidence, unusual evidence) of a diagnosed cell."""
    validity = tuple(_cache_evidence(cell)) if cell.kind == "disk" else ()
    if validity:
        return "not-a-device-measurement", validity, ()
    if dominant is not None:
        return "cause", (), ()
    if pct is not None and pct < NEAR_NATIVE_PCT:
        return "unexplained", (), _unusual(cell)
    return "near-native", (), ()


def diagnose(cell: CellModel, rules: Iterable[Rule] = RULES) -> Verdict:
    """The verdict of one cell: every rule that applies to its kind is checked; the
    highest score is the dominant cause, the others contribute; a symptom of a vCPU
    busy emulating ranks under ``tcg-emulation``. The outcome says whether the cell
    measured the device at all, and whether a gap to native stayed unexplained.
    Native cells are the baseline and are not diagnosed."""
    pct = _pct_of_native(cell)
    tcg = cell.accelerator == "tcg"
    if cell.is_native:
        return Verdict(cell.workload, cell.phase, cell.platform, pct, None, tcg=tcg,
                       native=True, outcome="baseline")
    found: list[Finding] = []
    abstained: list[tuple[str, tuple[str, ...]]] = []
    not_applicable: list[tuple[str, str]] = []
    symptoms = {r.name for r in rules if r.symptom}
    placed: set[str] = set()
    for rule in rules:
        if cell.kind not in rule.kinds:
            continue
        why_not = rule.inapplicable(cell) if rule.inapplicable is not None else None
        if why_not is not None:
            not_applicable.append((rule.name, why_not))
            continue
        missing = rule.missing(cell)
        if missing:
            abstained.append((rule.name, tuple(missing)))
            continue
        hit = rule.check(cell)
        if hit is not None:
            found.append(_finding(cell, rule, hit))
            if hit.placed:
                placed.add(rule.name)
    if any(f.rule == "tcg-emulation" for f in found) and _vcpu_emulating(cell):
        found = [_below_emulation(f) if f.rule in symptoms - placed else f for f in found]
    found.sort(key=lambda f: -f.score)
    dominant = found[0] if found else None
    outcome, validity, unusual = _outcome(cell, dominant, pct)
    return Verdict(cell.workload, cell.phase, cell.platform, pct, dominant,
                   tuple(found[1:]), tuple(abstained), tcg, outcome=outcome,
                   validity=validity, unusual=unusual, not_applicable=tuple(not_applicable))


def diagnose_all(cells: Iterable[CellModel]) -> list[Verdict]:
    """:func:`diagnose` of every cell."""
    return [diagnose(c) for c in cells]
