"""The resource model of a cell: utilisation and saturation of every resource on its
I/O path, computed from the monitor metrics already stored with each phase.

Pure: phase summaries and cell definitions in, :class:`CellModel` out. The derived
numbers are catalogue metrics (``res.*`` in :mod:`hvbench.analysis.metrics`); the
rules of :mod:`hvbench.analysis.diagnosis` read them, next to those of the native cell
of the same workload phase.

Resources: the guest's vCPU threads, QEMU's main loop, its iothreads and worker
threads, the host CPU, the host block device (diskstats, as iostat) and the NIC or
shaped link (netdev). A resource whose metrics were not stored is absent from the
model, and every rule reading it abstains.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from hvbench.analysis.layers import latency_layers
from hvbench.analysis.metrics import host_load_metrics
from hvbench.analysis.summaries import PhaseStats
from hvbench.model import settings
from hvbench.model.platform import is_host_kind
from hvbench.model.workload import workload_intent

__all__ = [
    "KIND_CLASSES",
    "PHASE_CLASSES",
    "CellModel",
    "WorkloadClass",
    "asked_depth",
    "build_models",
    "cell_model",
    "derive",
    "disk_device",
    "intent",
    "phase_settings",
    "register_kind_class",
    "with_flatness",
    "workload_class",
]

#: Sectors of diskstats are 512 bytes.
SECTOR_KB = 0.5
#: Throughput metrics and the bytes per unit (MB/s and Mbit/s), to get bytes/s.
_BYTES_PER_S = {"mb_s": 1e6, "mbit_s": 1e6 / 8}


#: What the diagnosis rules are written for: a phase's I/O is a disk's, a network
#: stream's, a web server's, or none of them. Classes, not workload kinds: a kind maps
#: its phases onto them (:func:`register_kind_class`; lifecycle's ``create`` is disk
#: I/O), so a new kind needs no rule of its own to be diagnosed.
WorkloadClass = Literal["disk", "network", "web", "other"]

#: The diagnosis class of each stored workload kind: which rules apply to its phases,
#: apart from the exceptions in :data:`PHASE_CLASSES`. Each kind package of
#: :mod:`hvbench.kinds` adds its own with :func:`register_kind_class`.
KIND_CLASSES: dict[str, WorkloadClass] = {}
#: For a cell whose definition names no kind this version knows: metrics only a kind of
#: that class stores, tried in the order the kinds registered them (disk's first).
_CLASS_EVIDENCE: list[tuple[frozenset[str], WorkloadClass]] = []


def register_kind_class(kind: str, cls: WorkloadClass, evidence: Sequence[str] = (),
                        phases: Mapping[str, WorkloadClass] | None = None) -> None:
    """Workload kind ``kind``'s phases are of diagnosis class ``cls``; ``evidence``: the
    metrics only that class stores (what classes an old stored cell without a kind);
    ``phases``: the kind's phases whose class is another one (phase -> class)."""
    KIND_CLASSES[kind] = cls
    PHASE_CLASSES.update({(kind, phase): other for phase, other in (phases or {}).items()})
    guess = (frozenset(evidence), cls)
    if evidence and guess not in _CLASS_EVIDENCE:
        _CLASS_EVIDENCE.append(guess)
#: Phases whose class is not their kind's. ``boot`` (the runner's boot time of every
#: guest cell) measures the guest's boot, not the workload. A kind package adds its own
#: (:func:`register_kind_class` ``phases``: lifecycle's ``create``, propagation's
#: ``transfer``).
PHASE_CLASSES: dict[tuple[str | None, str], WorkloadClass] = {
    (None, "boot"): "other",
}


def workload_class(metrics: Mapping[str, Any], workload: Mapping[str, Any] | None = None,
                   phase: str | None = None) -> WorkloadClass:
    """The :data:`WorkloadClass` of a workload's phase from
    its stored definition's ``kind`` (:data:`KIND_CLASSES`, :data:`PHASE_CLASSES`)."""
    kind = (workload or {}).get("kind")
    if isinstance(kind, str) and kind in KIND_CLASSES:
        return PHASE_CLASSES.get((None, phase or ""),
                                 PHASE_CLASSES.get((kind, phase or ""), KIND_CLASSES[kind]))
    # The metric guess is only for old stored runs whose definitions lack a kind this
    # version knows, and for callers that have no definition of the cell. Every cell
    # hvbench has stored carries its workload spec's kind (the field is as old as the
    # study parser), so this is no second source of truth.
    return next((cls for names, cls in _CLASS_EVIDENCE if not names.isdisjoint(metrics)),
                "other")


@dataclass(frozen=True)
class CellModel:
    """What one platform's phase of one workload looked like to the host."""

    workload: str
    phase: str
    platform: str
    #: Its :data:`WorkloadClass` (which rules apply).
    kind: WorkloadClass
    #: The headline metric (``mb_s``, ``mbit_s``, ``max_rate_rps`` ...), if any.
    main: str | None
    #: Means of every stored metric of the cell and of the native cell (empty: none).
    values: Mapping[str, float]
    native_values: Mapping[str, float]
    #: CoV % of the headline over the repetitions (None: one repetition).
    main_cov_pct: float | None
    #: The cell's platform and workload definitions as stored.
    platform_def: Mapping[str, Any]
    workload_def: Mapping[str, Any]
    accelerator: str | None = None
    #: The shaped rate of the link the workload crosses, Mbit/s (None: not shaped).
    link_mbit: float | None = None
    #: Derived ``res.*`` metrics of the cell and of the native cell.
    derived: dict[str, float] = field(default_factory=dict)
    native_derived: dict[str, float] = field(default_factory=dict)
    #: The other platforms of the same phase: name -> (their settings,
    #: :func:`hvbench.model.settings.flat`, and metric means).
    siblings: Mapping[str, tuple[Mapping[str, Any], Mapping[str, float]]] = field(
        default_factory=dict)
    #: CoV % of the throughput series *within* a repetition (1 s bins of the 10 Hz
    #: device series, the median over repetitions; None: no series long enough). A CoV
    #: over the repetitions says nothing about flatness, and nothing at all at n = 1.
    series_cov_pct: float | None = None
    #: What the host's configuration held for the cell's QEMU process and its devices
    #: (cgroup limits, queue settings, O_DIRECT), read at cell start; empty: not read.
    host_config: Mapping[str, Any] = field(default_factory=dict)
    #: Diagnosis thresholds calibrated on the run's host (``hvbench calibrate``): name ->
    #: value; a threshold not here keeps its default.
    thresholds: Mapping[str, float] = field(default_factory=dict)
    #: The headline's median over the repetitions (None: not known, e.g. a model
    #: built from means only).
    main_median: float | None = None

    @property
    def is_native(self) -> bool:
        """True for the bare-host platform."""
        return is_host_kind(settings.get(self.platform_def, "kind"))

    def get(self, metric: str) -> float | None:
        """A stored or derived metric of the cell."""
        if metric in self.derived:
            return self.derived[metric]
        return self.values.get(metric)

    def native(self, metric: str) -> float | None:
        """The same metric of the native cell (None without one)."""
        if metric in self.native_derived:
            return self.native_derived[metric]
        return self.native_values.get(metric)

    def setting(self, name: str) -> Any:
        """A platform setting of the cell (``disk.cache``: its benchmark disk's,
        ``nic.model``: its first NIC's; :mod:`hvbench.model.settings`). Raises
        :class:`~hvbench.errors.SpecError` for an unknown name."""
        return settings.get(self.platform_def, name)


def disk_device(values: Mapping[str, float]) -> str | None:
    """The host block device that carried the traffic (most kB/s), if sampled."""
    devices = {m.split(".")[2] for m in values if m.startswith("host.disk.")}
    if not devices:
        return None

    def traffic(dev: str) -> float:
        return sum(values.get(f"host.disk.{dev}.{k}", 0.0) for k in ("r_kb_s", "w_kb_s"))

    return max(sorted(devices), key=traffic)


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def _disk_derived(values: Mapping[str, float], out: dict[str, float]) -> None:
    dev = disk_device(values)
    if dev is None:
        return
    disk = {k.split(".", 3)[3]: v for k, v in values.items()
            if k.startswith(f"host.disk.{dev}.")}
    for key, name in (("util_pct", "util_pct"), ("avgqu_sz", "queue"),
                      ("avgrq_sz", "req_sectors")):
        if key in disk:
            out[f"res.disk.{name}"] = disk[key]
    r_s, w_s = disk.get("r_s", 0.0), disk.get("w_s", 0.0)
    if r_s + w_s > 0:
        await_ms = (disk.get("r_await_ms", 0.0) * r_s + disk.get("w_await_ms", 0.0) * w_s) / (
            r_s + w_s)
        out["res.disk.await_ms"] = await_ms
        lat = values.get("lat_mean_ms")
        if lat is not None:
            out["res.disk.added_latency_ms"] = max(lat - await_ms, 0.0)
    writes = _ratio(w_s, values.get("iops")) if w_s > 0 else None
    if writes is not None:
        out["res.disk.writes_per_io"] = writes
    flushes = _ratio(disk.get("f_s"), w_s)
    if flushes is not None:
        out["res.disk.flush_per_write"] = flushes
    kb_s = disk.get("r_kb_s", 0.0) + disk.get("w_kb_s", 0.0)
    measured = values.get("mb_s")
    if measured is not None and measured > 0:
        # Host device bytes per byte the workload moved: far below 1, the page cache
        # served the workload, not the device.
        out["res.disk.device_share"] = kb_s / 1000.0 / measured


def _thread_derived(values: Mapping[str, float], out: dict[str, float]) -> None:
    vcpu, threads = values.get("qemu.vcpu.cpu_pct"), values.get("qemu.vcpu.threads")
    if vcpu is not None:
        out["res.vcpu.util_pct"] = vcpu / max(threads or 1.0, 1.0)
        # The mean hides one saturated vCPU among idle ones (a single-threaded
        # workload in a 2-vCPU guest is at 50 %); runs stored before the busiest
        # thread was sampled fall back to the mean.
        out["res.vcpu.max_util_pct"] = values.get("qemu.vcpu.max_cpu_pct",
                                                  out["res.vcpu.util_pct"])
    for cls in ("main", "iothread", "worker"):
        cpu = values.get(f"qemu.{cls}.cpu_pct")
        if cpu is not None:
            count = values.get(f"qemu.{cls}.threads") or 1.0
            # The main loop is one thread; iothreads and workers: the busiest thread
            # (the mean where it was not sampled).
            out[f"res.{cls}.util_pct"] = cpu if cls == "main" else values.get(
                f"qemu.{cls}.max_cpu_pct", cpu / max(count, 1.0))
    _daemon_derived(values, out)
    # The vCPU that waited most for a core: one starved vCPU of several is contention
    # for what runs on it. Runs stored before it was sampled: all vCPUs' wait summed
    # (the same for one vCPU).
    wait = values.get("qemu.vcpu.max_wait_pct", values.get("qemu.vcpu.wait_pct"))
    if wait is not None:
        out["res.vcpu.wait_pct"] = wait
    runnable = _runnable(values)
    if runnable is not None:
        out["res.vcpu.runnable_pct"] = runnable
    busy = values.get("host.cpu.busy_pct")
    if busy is not None:
        out["res.host.cpu_busy_pct"] = busy
    cores = sum(1 for m in values if m.startswith("host.cpu.cpu") and m.endswith(".busy_pct"))
    qemu = values.get("qemu.total.cpu_pct")
    load = _host_load(values)
    if load is not None:
        out["res.host.load_cpu_pct"] = load
    if busy is not None and qemu is not None and cores:
        # Host CPU (in % of one core) not spent by this cell: other processes
        # (neighbours, other users of the machine, the kernel's own work). The guest's
        # storage daemons serve it and its load generator drives it: not "others".
        daemons = sum(v for m, v in values.items() if _is_daemon(m, "total.cpu_pct"))
        out["res.host.others_cpu_pct"] = max(busy * cores - qemu - daemons - (load or 0.0),
                                             0.0)


def _runnable(values: Mapping[str, float]) -> float | None:
    """The most runnable vCPU thread's running-or-waiting share (%); for runs stored
    before it was sampled, a one-vCPU guest's 100 - blocked (the same thread)."""
    found = values.get("qemu.vcpu.max_runnable_pct")
    if found is not None:
        return found
    blocked = values.get("qemu.vcpu.blocked_pct")
    if blocked is None or (values.get("qemu.vcpu.threads") or 1.0) > 1.0:
        return None
    return 100.0 - blocked


def _host_load(values: Mapping[str, float]) -> float | None:
    """The cell's own load generator's CPU on the host (% of one core): the catalogue's
    host-load metrics the phase stored, summed; None when it stored none."""
    found = [values[m] for m in host_load_metrics() if m in values]
    return sum(found) if found else None


def _is_daemon(metric: str, suffix: str) -> bool:
    """Whether ``metric`` is a storage daemon's (``qsd<N>.<suffix>``)."""
    head, _, rest = metric.partition(".")
    return head.startswith("qsd") and head[3:].isdigit() and rest == suffix


def _daemon_derived(values: Mapping[str, float], out: dict[str, float]) -> None:
    """``res.daemon.util_pct``: the busiest storage daemon iothread (% of one core);
    ``res.daemon.cpu_pct``: all the guest's storage daemons together."""
    busiest = [v for m, v in values.items() if _is_daemon(m, "iothread.cpu_pct")]
    if busiest:
        out["res.daemon.util_pct"] = max(busiest)
    totals = [v for m, v in values.items() if _is_daemon(m, "total.cpu_pct")]
    if totals:
        out["res.daemon.cpu_pct"] = sum(totals)


def _cpu_pct(values: Mapping[str, float], native: bool) -> float | None:
    """CPU % (of one core) spent to move the cell's I/O: QEMU's process on a guest
    platform; on the bare host, the host CPU busy % times the core count is not
    attributable to the workload, so the workload's own CPU (fio, iperf3)."""
    if not native:
        qemu = values.get("qemu.total.cpu_pct")
        # A vhost-user disk's blocks are moved by its storage daemon, not QEMU.
        daemons = sum(v for m, v in values.items() if _is_daemon(m, "total.cpu_pct"))
        return qemu + daemons if qemu is not None else None
    return _workload_cpu(values)


def _workload_cpu(values: Mapping[str, float]) -> float | None:
    """The workload's own CPU where the platform runs it, % of one CPU: fio's (first)
    job, one thread; iperf3's process, one thread up to iperf3 3.15."""
    return values.get("cpu_pct", values.get("cpu_platform_pct"))


def _cost_derived(values: Mapping[str, float], native: bool, out: dict[str, float]) -> None:
    cpu = _cpu_pct(values, native)
    if cpu is None:
        return
    cpu_ms_per_s = cpu * 10.0
    for metric, scale in _BYTES_PER_S.items():
        rate = values.get(metric)
        if rate is not None and rate > 0:
            out["res.cpu_ms_per_mb"] = cpu_ms_per_s / (rate * scale / 1e6)
    iops = values.get("iops")
    if iops is not None and iops > 0:
        out["res.cpu_ms_per_io"] = cpu_ms_per_s / iops
    replies = values.get("replies_s", values.get("max_rate_rps"))
    if replies is not None and replies > 0:
        out["res.cpu_ms_per_req"] = cpu_ms_per_s / replies


def _net_derived(values: Mapping[str, float], link_mbit: float | None,
                 out: dict[str, float]) -> None:
    rate = values.get("mbit_s", values.get("net_mbit_s"))
    if rate is None:
        tap = [values.get(f"net.guest-tap0.{k}", 0.0) for k in ("rx_mbit_s", "tx_mbit_s")]
        rate = max(tap) if any(tap) else None
    if rate is not None and link_mbit:
        out["res.net.link_util_pct"] = 100.0 * rate / link_mbit


def _guest_derived(values: Mapping[str, float], out: dict[str, float]) -> None:
    """The guest's own CPU and block layer (``guest.cpu.*``, ``guest.disk.<dev>.*``,
    sampled inside the guest when the run had the guest sampler): for the block layer
    the device holding the most in flight. The CPU is derived for every kind (a
    network or web guest has no benchmark disk but its CPU is sampled all the same)."""
    busy = values.get("guest.cpu.busy_pct")
    if busy is not None:
        # Steal is time the guest wanted but its host did not give (counted busy by
        # the guest's /proc/stat): the guest's own work is the rest.
        out["res.guest.cpu_busy_pct"] = max(0.0, busy - values.get("guest.cpu.steal_pct", 0.0))
    busiest = values.get("guest.cpu.max_busy_pct")
    if busiest is not None:
        out["res.guest.cpu_max_busy_pct"] = busiest
    devices = {m.split(".")[2] for m in values
               if m.startswith("guest.disk.") and m.count(".") == 3}
    if not devices:
        return
    dev = max(sorted(devices), key=lambda d: values.get(f"guest.disk.{d}.avgqu_sz", -1.0))
    for key, name in (("avgqu_sz", "queue"), ("avgrq_sz", "req_sectors"),
                      ("await_ms", "await_ms")):
        value = values.get(f"guest.disk.{dev}.{key}")
        if value is not None:
            out[f"res.guest.{name}"] = value
    reads, writes = (values.get(f"guest.disk.{dev}.{k}") for k in ("r_s", "w_s"))
    if reads is not None and writes is not None and reads + writes > 0:
        out["res.guest.write_share"] = writes / (reads + writes)


def asked_depth(values: Mapping[str, float], workload: Mapping[str, Any]) -> float | None:
    """How many requests the workload itself kept in flight: fio's own mean of its
    iodepth distribution when stored (``depth_mean``), else what its kind reads in the
    definition (:class:`~hvbench.model.workload.WorkloadIntent` ``depth``); None when
    neither says."""
    depth = values.get("depth_mean")
    if depth is not None:
        return depth
    return workload_intent(workload).depth if workload else None


def intent(values: Mapping[str, float], workload: Mapping[str, Any]) -> dict[str, float]:
    """What the workload asked for: ``res.workload.depth`` (:func:`asked_depth`) and
    ``res.workload.block_sectors`` (the request size its kind reads in the definition)."""
    out: dict[str, float] = {}
    depth = asked_depth(values, workload)
    if depth is not None:
        out["res.workload.depth"] = depth
    size = workload_intent(workload).request_bytes if workload else None
    if size is not None and size > 0:
        out["res.workload.block_sectors"] = size / 512.0
    return out


def derive(values: Mapping[str, float], *, native: bool,
           link_mbit: float | None = None) -> dict[str, float]:
    """The ``res.*`` metrics of one cell's metric means."""
    out: dict[str, float] = {}
    _disk_derived(values, out)
    _thread_derived(values, out)
    _cost_derived(values, native, out)
    _net_derived(values, link_mbit, out)
    _guest_derived(values, out)
    _share_derived(values, out)
    job = _workload_cpu(values)
    if job is not None:
        out["res.workload.cpu_pct"] = job
    if not native:
        out |= latency_layers(values, out.get("res.disk.await_ms"))
    return out


#: Where a cell's own bytes come from, preferred first: its cgroup's io statistics
#: (everything charged to the cell's cgroup: child processes, writeback), then the
#: QEMU process's /proc/PID/io. The value of ``res.disk.cell_share_source``.
SHARE_SOURCES = ("cgroup.io", "qemu.io")


def _share_derived(values: Mapping[str, float], out: dict[str, float]) -> None:
    """The cell's own share of the host device's bytes over the device's kB/s in the
    same window, from the first of :data:`SHARE_SOURCES` that was sampled;
    ``res.disk.cell_share_source`` is its index there."""
    dev = disk_device(values)
    if dev is None:
        return
    for index, source in enumerate(SHARE_SOURCES):
        mine = [values.get(f"{source}.{k}") for k in ("read_kb_s", "write_kb_s")]
        if all(v is None for v in mine):
            continue
        total = sum(values.get(f"host.disk.{dev}.{k}", 0.0) for k in ("r_kb_s", "w_kb_s"))
        if total > 0:
            out["res.disk.cell_share"] = min(sum(v or 0.0 for v in mine) / total, 1.0)
            out["res.disk.cell_share_source"] = float(index)
        return


def phase_means(stats: PhaseStats) -> dict[str, dict[str, float]]:
    """platform -> its metric means in one phase (every platform in one pass)."""
    out: dict[str, dict[str, float]] = {p: {} for p in stats.platforms}
    for metric, per in stats.metrics.items():
        for platform, summary in per.items():
            out.setdefault(platform, {})[metric] = summary.mean
    return out


def phase_settings(stats: PhaseStats,
                   definitions: Mapping[tuple[str, str],
                                        tuple[Mapping[str, Any], Mapping[str, Any]]]
                   ) -> dict[str, dict[str, Any]]:
    """platform -> its settings (:func:`hvbench.model.settings.flat`) for every
    platform of one phase."""
    return {p: settings.flat(definitions.get((p, stats.workload), ({}, {}))[0])
            for p in stats.platforms}


def cell_model(stats: PhaseStats, platform: str, native: str | None,
               definitions: Mapping[tuple[str, str], tuple[Mapping[str, Any], Mapping[str, Any]]],
               *, accelerator: str | None = None,
               link_rates: Mapping[str, float] | None = None,
               flat: Mapping[tuple[str, str, str], float] | None = None,
               host_configs: Mapping[str, Mapping[str, Any]] | None = None,
               means: Mapping[str, Mapping[str, float]] | None = None,
               platform_settings: Mapping[str, Mapping[str, Any]] | None = None
               ) -> CellModel:
    """The model of ``platform`` in one phase. ``definitions``: (platform, workload) ->
    (platform definition, workload definition); ``link_rates``: lab host -> Mbit/s of
    its shaped link; ``flat``: (workload, phase, platform) -> the within-repetition
    CoV % of its throughput series; ``host_configs``: platform -> the host
    configuration read at its cell start; ``means``: :func:`phase_means` of ``stats``
    when the caller has it (a matrix's every cell reads every sibling's), and
    ``platform_settings`` likewise :func:`phase_settings`."""
    means = means if means is not None else phase_means(stats)
    values = dict(means.get(platform, {}))
    platform_def, workload_def = definitions.get((platform, stats.workload), ({}, {}))
    native_values = dict(means.get(native, {})) if native and native != platform else {}
    link = _link_rate(workload_def, link_rates or {})
    main = stats.throughput_metric()
    summary = stats.metrics[main].get(platform) if main and main in stats.metrics else None
    cov = summary.cov_pct if summary is not None else None
    native_def = definitions.get((native, stats.workload), ({}, {}))[0] if native else {}
    derived = derive(values, native=is_host_kind(settings.get(platform_def, "kind")),
                     link_mbit=link)
    derived.update(intent(values, workload_def))
    derived.update(link_share(values, _link_host(workload_def, link_rates or {}), link))
    series_cov = (flat or {}).get((stats.workload, stats.phase, platform))
    if series_cov is not None:
        derived["res.series_cov_pct"] = series_cov
    if platform_settings is None:
        platform_settings = phase_settings(stats, definitions)
    siblings = {p: (platform_settings[p], means.get(p, {}))
                for p in stats.platforms if p != platform}
    return CellModel(
        workload=stats.workload, phase=stats.phase, platform=platform,
        kind=workload_class(stats.metrics, workload_def, stats.phase), main=main, values=values,
        native_values=native_values, main_cov_pct=cov, platform_def=platform_def,
        workload_def=workload_def, accelerator=accelerator, link_mbit=link,
        derived=derived,
        native_derived=derive(native_values,
                              native=is_host_kind(settings.get(native_def, "kind")),
                              link_mbit=link) if native_values else {},
        siblings=siblings,
        series_cov_pct=series_cov,
        host_config=(host_configs or {}).get(platform, {}),
        main_median=summary.median if summary is not None else None)


def with_flatness(model: CellModel, flat: Mapping[tuple[str, str, str], float]) -> CellModel:
    """``model`` with its within-repetition flatness from ``flat`` (see
    :func:`cell_model`), unchanged when ``flat`` has none for it."""
    cov = flat.get((model.workload, model.phase, model.platform))
    if cov is None:
        return model
    return replace(model, series_cov_pct=cov,
                   derived={**model.derived, "res.series_cov_pct": cov})


def _link_host(workload: Mapping[str, Any], rates: Mapping[str, float]) -> str | None:
    """The lab host whose link the workload's traffic crosses: its peer (``peer``,
    ``client``, ``host``), else the only shaped host."""
    for key in ("peer", "client", "host"):
        name = workload.get(key)
        if isinstance(name, str) and name:
            return name
    return next(iter(rates)) if len(rates) == 1 else None


def _link_rate(workload: Mapping[str, Any], rates: Mapping[str, float]) -> float | None:
    """The shaped rate the workload's traffic crosses (:func:`_link_host`'s)."""
    host = _link_host(workload, rates)
    return rates.get(host) if host is not None else None


def link_share(values: Mapping[str, float], host: str | None,
               link_mbit: float | None) -> dict[str, float]:
    """The cell's own share of the lab link it crosses: the cell's bytes against the
    link's own counters (the root-namespace end of host ``host``'s veth,
    ``net.<host>.*``), each in its busier direction. The cell's bytes are its tap's
    (frame bytes over the same monitor window as the veth's, as the veth counts them;
    ``res.net.cell_share_source`` 0), else the workload's own rate (payload over its
    own run, so the share reads high when the window is longer than the run; source 1).

    ``res.net.link_busy_mbit`` is what the link carried while the cell ran: the
    cell's own rate over its run divided by its share (the monitor window is longer
    than the run, so the window's mean understates a link that was full while the
    workload ran; this assumes the others' traffic was spread like the cell's), else
    the window's mean. On a shaped link ``res.net.link_busy_pct`` is that against the
    shaped rate. Empty when the link was not sampled."""
    link = [values.get(f"net.{host}.{k}") for k in ("rx_mbit_s", "tx_mbit_s")]
    if host is None or any(v is None for v in link):
        return {}
    window = max(v or 0.0 for v in link)
    tap = [values.get(f"net.guest-tap0.{k}") for k in ("rx_mbit_s", "tx_mbit_s")]
    run_rate = values.get("mbit_s", values.get("net_mbit_s"))
    own = max(v or 0.0 for v in tap) if any(v for v in tap) else None
    source = 0.0
    if own is None:
        own, source = run_rate, 1.0
    busy = window
    out: dict[str, float] = {}
    if own is not None and window > 0:
        share = own / window
        out |= {"res.net.cell_share": min(share, 1.0), "res.net.cell_share_source": source}
        if source == 0.0 and run_rate and share > 0:
            busy = run_rate / share
    out["res.net.link_busy_mbit"] = busy
    if link_mbit:
        out["res.net.link_busy_pct"] = 100.0 * busy / link_mbit
    return out


def build_models(stats: Sequence[PhaseStats], natives: Mapping[str, str | None],
                 definitions: Mapping[tuple[str, str],
                                      tuple[Mapping[str, Any], Mapping[str, Any]]],
                 *, accelerator: str | None = None,
                 link_rates: Mapping[str, float] | None = None,
                 flat: Mapping[tuple[str, str, str], float] | None = None,
                 host_configs: Mapping[str, Mapping[str, Any]] | None = None
                 ) -> list[CellModel]:
    """The model of every (phase, platform) of a run, in phase then platform order
    (``flat``, ``host_configs``: see :func:`cell_model`)."""
    out = []
    for phase in stats:
        means, platform_settings = phase_means(phase), phase_settings(phase, definitions)
        out += [cell_model(phase, p, natives.get(phase.workload), definitions,
                           accelerator=accelerator, link_rates=link_rates, flat=flat,
                           host_configs=host_configs, means=means,
                           platform_settings=platform_settings)
                for p in phase.platforms]
    return out
