"""The metric catalogue: every metric a workload, monitor, the runner or a scenario
stores, declared once with its unit, label, direction and role in the reports.

Pure data and look-ups; the report, ``hvbench compare``, ``hvbench check`` and the
scenario tables read it instead of keeping their own lists of names.

A name is exact (``mb_s``) or a pattern whose ``<placeholders>`` stand for one dotted
part (``host.disk.<dev>.util_pct``), a number (``<i>``, ``<k>``, ``<n>``) or, for a
network interface's label, any text (``net.<if>.rx_mbit_s``). :func:`lookup` tries the
exact names first, then the patterns in declaration order, so a specific entry
(``qemu.vcpu.cpu_pct``, shown in the phase tables) wins over the pattern it also
matches (``qemu.<class>.cpu_pct``).

Roles in the reports (the numbers are positions, lowest first):

- ``main``: the headline (throughput) metric of a phase is the present one with the
  lowest rank; its ``short`` label heads the tables and charts;
- ``detail``: the rows under the headline in the terminal's phase tables;
- ``vs_native``: shown in % of the native platform (a boot time has no native);
- ``vs_alone``: compared with the platform alone in the scenario degradation table
  (besides the headline, which always is unless it is a boot time);
- ``direction``: ``higher`` or ``lower`` is better, or ``neutral`` (CPU %, sizes,
  counts): what ``hvbench compare`` calls better or worse, and the sign of a
  degradation.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Literal

from hvbench.errors import HvbenchError

__all__ = [
    "Direction",
    "Layer",
    "MetricSpec",
    "catalogue",
    "detail_metrics",
    "direction_of",
    "host_load_metrics",
    "is_known",
    "latency_spec",
    "lookup",
    "main_metric",
    "main_metrics",
    "metric_spec",
    "register_metrics",
    "register_producers",
    "short_label",
    "unknown_metrics",
    "vs_alone_metrics",
]

Direction = Literal["higher", "lower", "neutral"]
#: Who stores the metric: a workload's parser, a host monitor's window summary, the
#: runner itself, or a scenario (neighbours, on-demand starts, the dip).
Layer = Literal["workload", "monitor", "runner", "scenario", "derived"]


@dataclass(frozen=True)
class MetricSpec:
    """One metric (or family of metrics, when ``name`` is a pattern)."""

    name: str
    unit: str
    label: str
    direction: Direction
    layer: Layer
    #: What stores it: a tool (``fio``, ``iperf3``, ``httperf``, ...), a workload's own
    #: phase timer (``workload``), a monitor (``diskstats``, ``host.cpu``, ``threads``,
    #: ``netdev``), the ``runner``, a ``scenario``.
    producer: str
    #: Short label (headline rows, degradation table, charts); default: ``label``.
    short: str = ""
    vs_native: bool = False
    main: int | None = None
    detail: int | None = None
    vs_alone: int | None = None
    #: The CPU (% of one core) of the cell's own load generator or peer on the host (a
    #: web cell's httperf, a network cell's iperf3 server in a lab host): the cell's
    #: work, not another user's, when the host's CPU is attributed.
    host_load: bool = False

    @property
    def short_label(self) -> str:
        """:attr:`short`, else :attr:`label`."""
        return self.short or self.label

    @property
    def is_pattern(self) -> bool:
        """True when :attr:`name` has placeholders."""
        return "<" in self.name


#: The layer each producer belongs to (a kind package adds its tools' with
#: :func:`register_metrics`).
_LAYERS: dict[str, Layer] = {
    # A phase's own timer, whichever workload kind ran it.
    "workload": "workload",
    "diskstats": "monitor",
    "host.cpu": "monitor",
    "threads": "monitor",
    "netdev": "monitor",
    "guest": "monitor",
    "runner": "runner",
    "scenario": "scenario",
    "resources": "derived",
}


def _m(
    name: str,
    unit: str,
    label: str,
    direction: Direction,
    producer: str,
    *,
    short: str = "",
    vs_native: bool = False,
    main: int | None = None,
    detail: int | None = None,
    vs_alone: int | None = None,
    host_load: bool = False,
) -> MetricSpec:
    return MetricSpec(
        name,
        unit,
        label,
        direction,
        _LAYERS[producer],
        producer,
        short=short,
        vs_native=vs_native,
        main=main,
        detail=detail,
        vs_alone=vs_alone,
        host_load=host_load,
    )


_THREAD_CLASS_METRICS = (
    ("cpu_pct", "%", "CPU % (of one core)"),
    ("max_cpu_pct", "%", "busiest thread's CPU % (of one core)"),
    ("run_pct", "%", "on-CPU %"),
    ("wait_pct", "%", "run-queue wait %"),
    ("max_wait_pct", "%", "longest-waiting thread's run-queue wait %"),
    ("max_runnable_pct", "%", "most runnable thread's running or waiting %"),
    ("blocked_pct", "%", "blocked %"),
    ("exec_per_s", "1/s", "executions/s"),
    ("cpu_ms_per_exec", "ms", "CPU ms per execution"),
    ("vol_cs_per_s", "1/s", "voluntary context switches/s"),
    ("invol_cs_per_s", "1/s", "involuntary context switches/s"),
    ("cs_per_s", "1/s", "context switches/s"),
    ("wakeups_per_s", "1/s", "wake-ups/s"),
    ("threads", "count", "threads"),
)
_HOST_CPU_METRICS = ("busy", "user", "system", "irq", "iowait", "steal", "idle")
_DISK_METRICS = (
    ("r_s", "1/s", "r/s"),
    ("w_s", "1/s", "w/s"),
    ("d_s", "1/s", "d/s"),
    ("f_s", "1/s", "f/s"),
    ("r_kb_s", "kB/s", "rkB/s"),
    ("w_kb_s", "kB/s", "wkB/s"),
    ("d_kb_s", "kB/s", "dkB/s"),
    ("r_mb_s", "MB/s", "rMB/s"),
    ("w_mb_s", "MB/s", "wMB/s"),
    ("rrqm_s", "1/s", "rrqm/s"),
    ("wrqm_s", "1/s", "wrqm/s"),
    ("drqm_s", "1/s", "drqm/s"),
    ("rrqm_pct", "%", "%rrqm"),
    ("wrqm_pct", "%", "%wrqm"),
    ("drqm_pct", "%", "%drqm"),
    ("r_await_ms", "ms", "r_await ms"),
    ("w_await_ms", "ms", "w_await ms"),
    ("d_await_ms", "ms", "d_await ms"),
    ("f_await_ms", "ms", "f_await ms"),
    ("rareq_sz_kb", "kB", "rareq-sz"),
    ("wareq_sz_kb", "kB", "wareq-sz"),
    ("dareq_sz_kb", "kB", "dareq-sz"),
    ("aqu_sz", "", "aqu-sz"),
)
_NET_METRICS = (
    ("rx_mbit_s", "Mbit/s", "rx Mbit/s"),
    ("tx_mbit_s", "Mbit/s", "tx Mbit/s"),
    ("rx_pps", "1/s", "rx packets/s"),
    ("tx_pps", "1/s", "tx packets/s"),
    ("rx_drop_s", "1/s", "rx drops/s"),
    ("tx_drop_s", "1/s", "tx drops/s"),
    ("rx_err_s", "1/s", "rx errors/s"),
    ("tx_err_s", "1/s", "tx errors/s"),
    ("rx_bytes", "bytes", "rx bytes"),
    ("tx_bytes", "bytes", "tx bytes"),
)


def _latency(
    name: str,
    label: str,
    producer: str,
    *,
    short: str = "",
    detail: int | None = None,
    vs_alone: int | None = None,
) -> MetricSpec:
    return _m(name, "ms", label, "lower", producer, short=short, detail=detail, vs_alone=vs_alone)


#: What a kind package builds its slice of the catalogue with.
metric_spec = _m
latency_spec = _latency


def _workload_metrics() -> list[MetricSpec]:
    return [
        # -- shared by workload kinds: a disk's fio, a lifecycle's image copy and a
        # propagation's transfer each store their rate as mb_s (kinds cannot share a
        # slice: they never import each other) ------------------------------------------
        _m("mb_s", "MB/s", "MB/s", "higher", "workload", vs_native=True, main=0),
    ]


def _self_timed_metrics() -> list[MetricSpec]:
    return [
        # -- phases a workload times itself (the self-booting kinds' steps) ----------------
        _m("duration_s", "s", "duration s", "neutral", "workload"),
        _m("size_bytes", "bytes", "image bytes", "neutral", "workload"),
    ]


def _runner_metrics() -> list[MetricSpec]:
    return [
        _m("boot_s", "s", "boot s", "lower", "runner", main=5),
        # The phases of a libvirt guest's start, timed apart (they add up to nearly
        # boot_s; hvbench's own staging of the image files is the rest).
        _m("libvirt_define_s", "s", "libvirt define s (libvirt's own time)", "lower",
           "runner", short="libvirt define s", detail=40),
        _m("libvirt_start_s", "s", "libvirt start s (libvirt's own time)", "lower",
           "runner", short="libvirt start s", detail=41),
        _m("guest_boot_s", "s", "guest boot s (firmware and kernel to the agent)", "lower",
           "runner", short="guest boot s", detail=42),
        _m("phase_wall_s", "s", "phase wall-clock s", "lower", "runner"),
        # A max-rate phase's host and guest evidence covers its chosen probe only.
        _m("evidence_window_s", "s", "evidence window s (the probe the metrics are of)",
           "neutral", "runner"),
        _m("vhost", "bool", "vhost-net in use", "neutral", "runner"),
        _m("cache_dropped.<which>", "bool", "page cache dropped", "neutral", "runner"),
    ]


def _host_monitor_metrics() -> list[MetricSpec]:
    out = [
        _m(
            "host.disk.<dev>.avgrq_sz",
            "sectors",
            "host avgrq-sz (sectors)",
            "neutral",
            "diskstats",
            short="avgrq-sz",
            detail=15,
        ),
        _m(
            "host.disk.<dev>.avgqu_sz",
            "",
            "host avgqu-sz",
            "neutral",
            "diskstats",
            short="avgqu-sz",
            detail=16,
        ),
        _m(
            "host.disk.<dev>.util_pct",
            "%",
            "host %util",
            "neutral",
            "diskstats",
            short="%util",
            detail=17,
        ),
    ]
    out += [
        _m(
            f"host.disk.<dev>.{key}",
            unit,
            f"host {label}",
            "lower" if key.endswith("_ms") else "neutral",
            "diskstats",
            short=label,
        )
        for key, unit, label in _DISK_METRICS
    ]
    out += [
        _m(f"host.cpu.{key}_pct", "%", f"host CPU {key} %", "neutral", "host.cpu")
        for key in _HOST_CPU_METRICS
    ]
    out += [
        _m(f"host.cpu.cpu<n>.{key}_pct", "%", f"host CPU <n> {key} %", "neutral", "host.cpu")
        for key in _HOST_CPU_METRICS
    ]
    return out


def _net_monitor_metrics() -> list[MetricSpec]:
    out = [
        _m(
            "net.guest-tap0.rx_mbit_s",
            "Mbit/s",
            "host tap rx Mbit/s (guest sends)",
            "neutral",
            "netdev",
            detail=18,
        ),
        _m(
            "net.guest-tap0.tx_mbit_s",
            "Mbit/s",
            "host tap tx Mbit/s (guest receives)",
            "neutral",
            "netdev",
            detail=19,
        ),
    ]
    return out + [
        _m(f"net.<if>.{key}", unit, label, "neutral", "netdev") for key, unit, label in _NET_METRICS
    ]


def _guest_monitor_metrics() -> list[MetricSpec]:
    """The guest sampler's (:mod:`hvbench.monitors.guest`): the host monitors' names
    under ``guest.``, and the guest device's ``await_ms`` (all requests)."""
    out = [
        _m("guest.disk.<dev>.avgqu_sz", "", "guest avgqu-sz (requests in flight)", "neutral",
           "guest", short="guest avgqu-sz"),
        _m("guest.disk.<dev>.avgrq_sz", "sectors", "guest avgrq-sz (sectors)", "neutral",
           "guest", short="guest avgrq-sz"),
        _m("guest.disk.<dev>.await_ms", "ms", "guest device await ms", "lower", "guest",
           short="guest await ms"),
        _m("guest.disk.<dev>.util_pct", "%", "guest device %util", "neutral", "guest",
           short="guest %util"),
    ]
    out += [
        _m(f"guest.disk.<dev>.{key}", unit, f"guest {label}",
           "lower" if key.endswith("_ms") else "neutral", "guest", short=f"guest {label}")
        for key, unit, label in _DISK_METRICS
    ]
    out += [
        _m(f"guest.cpu.{key}_pct", "%", f"guest CPU {key} %", "neutral", "guest")
        for key in _HOST_CPU_METRICS
    ]
    out.append(_m("guest.cpu.max_busy_pct", "%", "guest's busiest CPU busy % (steal excluded)",
                  "neutral", "guest"))
    return out + [
        _m(f"guest.net.<if>.{key}", unit, f"guest {label}", "neutral", "guest")
        for key, unit, label in _NET_METRICS
    ]


def _thread_metrics() -> list[MetricSpec]:
    out = [
        _m("qemu.vcpu.cpu_pct", "%", "QEMU vCPU threads CPU %", "neutral", "threads", detail=20),
        _m(
            "qemu.vcpu.wait_pct", "%", "QEMU vCPU run-queue wait %", "neutral", "threads", detail=21
        ),
        _m("qemu.vcpu.blocked_pct", "%", "QEMU vCPU blocked %", "neutral", "threads", detail=22),
        _m(
            "qemu.vcpu.exec_per_s", "1/s", "QEMU vCPU executions/s", "neutral", "threads", detail=23
        ),
        # cpu_ms_per_exec ends with neither _ms nor a throughput: no direction.
        _m(
            "qemu.vcpu.cpu_ms_per_exec",
            "ms",
            "QEMU vCPU ms per execution",
            "neutral",
            "threads",
            detail=24,
        ),
        _m("qemu.main.cpu_pct", "%", "QEMU main loop CPU %", "neutral", "threads", detail=25),
        _m("qemu.vhost.cpu_pct", "%", "vhost-net threads CPU %", "neutral", "threads", detail=26),
        _m("qemu.total.cpu_pct", "%", "QEMU process CPU %", "neutral", "threads", detail=27),
        _m("qemu.io.read_kb_s", "kB/s", "QEMU process block reads kB/s (/proc/PID/io)",
           "neutral", "threads"),
        _m("qemu.io.write_kb_s", "kB/s", "QEMU process block writes kB/s (/proc/PID/io)",
           "neutral", "threads"),
        *(_m(f"cgroup.io.{key}", unit, f"the cell's cgroup {what} (io statistics)",
             "neutral", "threads")
          for key, unit, what in (("read_kb_s", "kB/s", "block reads kB/s"),
                                  ("write_kb_s", "kB/s", "block writes kB/s"),
                                  ("r_s", "r/s", "block reads/s (v2 only)"),
                                  ("w_s", "w/s", "block writes/s (v2 only)"))),
    ]
    # The target's QEMU (``qemu``), a scenario neighbour's (``nb<i>``), the
    # lifecycle's idle guests (``qemu<i>``), a vhost-user disk's qemu-storage-daemon
    # (``qsd<i>``) and a share's virtiofsd (``vfs<i>``).
    for who in ("qemu", "nb<i>", "qemu<i>", "qsd<i>", "vfs<i>"):
        # Before the <class> pattern, which would also match it.
        out.append(_m(f"{who}.total.wakeups_known", "flag",
                      f"{who} nr_wakeups read (0: the kernel keeps no schedstats)",
                      "neutral", "threads"))
        out += [
            _m(f"{who}.<class>.{key}", unit, f"{who} <class> {label}", "neutral", "threads")
            for key, unit, label in _THREAD_CLASS_METRICS
        ]
    return out


def _scenario_metrics() -> list[MetricSpec]:
    return [
        _m("nb<i>.load.replies_per_s", "replies/s", "load replies/s", "neutral", "scenario"),
        _m("nb<i>.load.goodput_mbit_s", "Mbit/s", "load goodput Mbit/s", "neutral", "scenario"),
        _m("nb<i>.load.file_kb", "kB", "load file size kB", "neutral", "scenario"),
        _m("nb<i>.cpu.started_at_s", "s", "load started at s", "neutral", "scenario"),
        _m("nb<i>.net.started_at_s", "s", "load started at s", "neutral", "scenario"),
        _m("nb<i>.load.offered_rps", "req/s", "load offered req/s", "neutral", "scenario"),
        _m("nb<i>.load.rate_ref_rps", "req/s", "load max req/s its rate is a share of",
           "neutral", "scenario"),
        _m("ondemand.<k>.asked_at_s", "s", "asked for at s", "neutral", "scenario"),
        _m("ondemand.<k>.startup_s", "s", "start-up s", "neutral", "scenario"),
        _m("dip.baseline", "", "dip baseline", "neutral", "scenario"),
        _m("dip.depth_pct", "%", "dip depth %", "neutral", "scenario"),
        _m("dip.length_s", "s", "dip length s", "neutral", "scenario"),
        _m("dip.min_normalized", "", "lowest normalized", "neutral", "scenario"),
    ]


#: The resource model's derived metrics (:mod:`hvbench.analysis.resources`): never
#: stored, computed from the stored ones for ``hvbench explain``. (name, unit, label);
#: the device's await and the added latency are lower-is-better, the others neutral.
_RESOURCE_METRICS = (
    ("res.disk.util_pct", "%", "host device utilisation %"),
    ("res.disk.queue", "", "host device requests in flight"),
    ("res.disk.req_sectors", "sectors", "host request size (sectors)"),
    ("res.disk.await_ms", "ms", "host device await ms (r/w weighted)"),
    ("res.disk.added_latency_ms", "ms", "latency added above the device per I/O"),
    ("res.disk.flush_per_write", "ratio", "host flushes per write"),
    ("res.disk.writes_per_io", "ratio", "host writes per workload I/O"),
    ("res.disk.device_share", "ratio", "host device bytes per workload byte"),
    ("res.vcpu.util_pct", "%", "vCPU utilisation % (per vCPU)"),
    ("res.vcpu.max_util_pct", "%", "busiest vCPU thread's utilisation %"),
    ("res.vcpu.wait_pct", "%", "vCPU run-queue wait % (the vCPU that waited most)"),
    ("res.main.util_pct", "%", "QEMU main loop utilisation %"),
    ("res.iothread.util_pct", "%", "iothread utilisation % (busiest)"),
    ("res.worker.util_pct", "%", "QEMU worker utilisation % (busiest)"),
    ("res.daemon.util_pct", "%", "storage daemon iothread utilisation % (busiest)"),
    ("res.daemon.cpu_pct", "%", "storage daemons' CPU % (of one core, all threads)"),
    ("res.host.cpu_busy_pct", "%", "host CPU busy %"),
    ("res.host.others_cpu_pct", "%", "host CPU of other processes than the guest's QEMU, "
     "its storage daemons and its own load generator (% of one core)"),
    ("res.host.load_cpu_pct", "%", "host CPU of the cell's own load generator or peer "
     "(httperf, iperf3's server; % of one core)"),
    ("res.vcpu.runnable_pct", "%", "the most runnable vCPU thread's running or waiting "
     "for a core %"),
    ("res.cpu_ms_per_mb", "ms", "CPU ms per MB moved"),
    ("res.cpu_ms_per_io", "ms", "CPU ms per I/O"),
    ("res.cpu_ms_per_req", "ms", "CPU ms per request"),
    ("res.net.link_util_pct", "%", "link utilisation % of its shaped rate"),
    ("res.net.link_busy_mbit", "Mbit/s", "the link's own rate, all users (busier direction)"),
    ("res.net.link_busy_pct", "%", "the link's own rate, all users, % of its shaped rate"),
    ("res.net.cell_share", "ratio", "share of the link's bytes the cell moved"),
    ("res.net.cell_share_source", "index", "source of the cell's link share (0 its tap, "
     "1 the workload's rate)"),
    ("res.disk.cell_share", "ratio", "share of the host device's bytes the cell moved"),
    ("res.disk.cell_share_source", "index", "source of the cell's share (0 its cgroup's "
     "io statistics, 1 /proc/PID/io)"),
    ("res.guest.queue", "", "guest block layer requests in flight"),
    ("res.guest.req_sectors", "sectors", "guest request size (sectors)"),
    ("res.guest.await_ms", "ms", "guest device await ms"),
    ("res.guest.write_share", "", "guest writes per request (share of requests)"),
    ("res.guest.cpu_busy_pct", "%", "guest CPU busy %"),
    ("res.guest.cpu_max_busy_pct", "%", "guest's busiest CPU busy %"),
    ("res.workload.depth", "", "requests in flight the workload asked for"),
    ("res.workload.cpu_pct", "%", "the workload's own CPU % on the platform (fio's job, "
     "iperf3's process)"),
    ("res.workload.block_sectors", "sectors", "request size the workload asked for"),
    ("res.series_cov_pct", "%", "CoV % of throughput within a repetition (1 s bins)"),
    ("res.lat.guest_ms", "ms", "latency in the guest (fio clat - guest device await)"),
    ("res.lat.virt_ms", "ms", "latency in the virtualization path (guest - host await)"),
    ("res.lat.device_ms", "ms", "latency in the host device (host await)"),
)


def _resource_metrics() -> list[MetricSpec]:
    # CPU per unit is a cost, not a latency: neutral like the thread metrics.
    return [_m(name, unit, label, "lower" if name.endswith("latency_ms")
               or name.endswith("await_ms") or name.startswith("res.lat.") else "neutral",
               "resources")
            for name, unit, label in _RESOURCE_METRICS]


#: Every metric the core stores, in declaration order; :func:`catalogue` adds the
#: registered kinds' slices.
_CORE: tuple[MetricSpec, ...] = (
    *_workload_metrics(),
    *_self_timed_metrics(),
    *_runner_metrics(),
    *_host_monitor_metrics(),
    *_net_monitor_metrics(),
    *_guest_monitor_metrics(),
    *_thread_metrics(),
    *_scenario_metrics(),
    *_resource_metrics(),
)

_PLACEHOLDER = re.compile(r"<(\w+)>")
#: What each placeholder matches: numbers for indexes, any text for an interface's
#: label (labels such as ``nb0-tap0`` or ``lab-bridge``), else one dotted part.
_PLACEHOLDER_RE = {"i": r"\d+", "k": r"\d+", "n": r"\d+", "if": r".+"}


def _pattern(name: str) -> re.Pattern[str]:
    parts = _PLACEHOLDER.split(name)
    regex = "".join(
        re.escape(p) if i % 2 == 0 else _PLACEHOLDER_RE.get(p, r"[^.]+")
        for i, p in enumerate(parts)
    )
    return re.compile(f"^{regex}$")


class _Index:
    """The catalogue and what is looked up in it, rebuilt when a kind adds its slice."""

    def __init__(self, specs: tuple[MetricSpec, ...]) -> None:
        self.specs = specs
        self.exact = {spec.name: spec for spec in specs if not spec.is_pattern}
        self.patterns = tuple((_pattern(spec.name), spec) for spec in specs if spec.is_pattern)
        #: Headline metrics, best first; detail rows and degradation metrics in table order.
        self.main = _ranked(specs, lambda s: s.main)
        self.detail = _ranked(specs, lambda s: s.detail)
        self.vs_alone = _ranked(specs, lambda s: s.vs_alone)
        self.host_load = tuple(spec.name for spec in specs if spec.host_load)


def _ranked(specs: Iterable[MetricSpec], rank: Callable[[MetricSpec], int | None]
            ) -> tuple[MetricSpec, ...]:
    found = [(r, s) for s in specs if (r := rank(s)) is not None]
    return tuple(s for _, s in sorted(found, key=lambda item: item[0]))


_index = [_Index(_CORE)]


def register_metrics(specs: Iterable[MetricSpec]) -> None:
    """Add a workload kind's slice to the catalogue (after the core's and the slices
    registered before it). Raises :class:`HvbenchError` for a name already declared
    (two kinds, or a kind and the core, claim one metric: a programming error)."""
    new = tuple(specs)
    known = {spec.name for spec in _index[0].specs}
    clash = sorted(known.intersection(spec.name for spec in new))
    if clash:
        raise HvbenchError(f"internal: metrics declared twice: {', '.join(clash)}")
    _index[0] = _Index((*_index[0].specs, *new))
    lookup.cache_clear()


def register_producers(layers: Mapping[str, Layer]) -> None:
    """The layer of each tool a kind's metrics name as their producer."""
    _LAYERS.update(layers)


def catalogue() -> tuple[MetricSpec, ...]:
    """Every metric hvbench stores, in declaration order (the core's, then each kind's)."""
    return _index[0].specs


@cache
def lookup(metric: str) -> MetricSpec | None:
    """The catalogue entry of a stored metric name; None when it is not declared."""
    index = _index[0]
    found = index.exact.get(metric)
    if found is not None:
        return found
    return next((spec for regex, spec in index.patterns if regex.match(metric)), None)


def is_known(metric: str) -> bool:
    """True when the catalogue declares ``metric``."""
    return lookup(metric) is not None


def unknown_metrics(metrics: Iterable[str]) -> list[str]:
    """The distinct names the catalogue does not declare, sorted."""
    return sorted({m for m in metrics if not is_known(m)})


def direction_of(metric: str) -> Direction:
    """Which way ``metric`` is better; ``neutral`` for undeclared names."""
    spec = lookup(metric)
    return "neutral" if spec is None else spec.direction


def short_label(metric: str) -> str:
    """The short label of a declared metric, else the name itself."""
    spec = lookup(metric)
    return metric if spec is None else spec.short_label


def main_metrics() -> tuple[str, ...]:
    """The headline metric names in rank order (``mb_s`` ... ``boot_s``)."""
    return tuple(s.name for s in _index[0].main)


def main_metric(metrics: Iterable[str], *, boot: bool = True) -> str | None:
    """The present metric with the best headline rank; ``boot=False`` skips metrics
    measured before a scenario starts (``boot_s``)."""
    present = set(metrics)
    return next((s.name for s in _index[0].main
                 if s.name in present and (boot or s.layer != "runner")), None)


def detail_metrics() -> tuple[MetricSpec, ...]:
    """The entries shown under the headline in the terminal's phase tables, in order."""
    return _index[0].detail


def host_load_metrics() -> tuple[str, ...]:
    """The metrics that carry a cell's own load generator's CPU on the host
    (:attr:`MetricSpec.host_load`), in declaration order."""
    return _index[0].host_load


def vs_alone_metrics() -> tuple[str, ...]:
    """Metrics compared with alone besides the headline, in table order."""
    return tuple(s.name for s in _index[0].vs_alone)
