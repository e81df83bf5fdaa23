"""A scenario at run time: the neighbours of a measured guest, the guests started on
demand during its measurement, and the CPU cgroups that weight them.

:class:`ScenarioRun` is started once per (repetition, platform, scenario) group, after
the target guest booted, and stopped when the group ends (on success, failure and
Ctrl-C; a ``kill -9`` leaves guests that die with hvbench, cgroups and labs that
``hvbench cleanup`` removes). :meth:`ScenarioRun.monitors` wraps a cell's phase monitors
so that every measured window also

- samples each neighbour's QEMU threads (monitor ``nb<i>``) and, through the lab's NIC
  sampler, its tap (``nb<i>-tap0``);
- counts what each network neighbour's load generator achieved in the window;
- starts the scenario's on-demand guests and times their start-up;
- starts staged cpu and net neighbours' load (``start_after_s``) and records when;
- turns the target's NIC (or disk) traffic into 1 s buckets, and reports the dip.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hvbench.analysis.stats import dip_metrics, one_second_buckets
from hvbench.errors import CommandError, HostError, HvbenchError
from hvbench.host.cgroups import CpuCgroups, GroupSettings, qemu_thread_groups
from hvbench.host.paths import make_owned_dir, work_dir
from hvbench.host.started import StartStop
from hvbench.image.builder import find_image
from hvbench.image.system_image import write_raw_image
from hvbench.model.rates import is_relative, offered_rate
from hvbench.model.scenario import NeighbourSpec, ScenarioSpec, StartOnDemandSpec
from hvbench.model.spec import NicSpec, VmSpec
from hvbench.model.study import Cell, Variant, guest_vm, rate_reference
from hvbench.model.workload import WorkloadSpec
from hvbench.monitors.sampler import Monitor, MonitorResult, ThreadCpuSampler
from hvbench.monitors.session import GuestSamplerFactory, PhaseMonitors
from hvbench.platforms.accel import choose_accel
from hvbench.platforms.base import Platform
from hvbench.platforms.qemu import QemuPlatform
from hvbench.run.lab_session import LabSession, lab_guest_endpoint
from hvbench.workloads import iperf3, web
from hvbench.workloads.endpoints import Endpoint, ServerHandle, start_server

#: The length of one load-generator run: a neighbour's load is a chain of these, so
#: each window's share is counted from complete runs of the tool itself.
LOAD_CHUNK_S = 2.0
#: A run of the chain still going this long after it started (s) has stopped: a run is
#: LOAD_CHUNK_S plus its tool's start and end (about a second under TCG here), so a
#: run this overdue moved nothing for most of it (seen: a neighbour's iperf3 run that
#: sat for a whole window with the neighbour's tap at 0 bytes/s, while the completed
#: run before it gave the window a rate).
OVERDUE_S = LOAD_CHUNK_S + 10.0
#: The raw-output kind of what an overdue neighbour's guest could tell at the window's
#: end (:meth:`~hvbench.platforms.qemu.QemuPlatform.failure_evidence`, per neighbour).
NEIGHBOUR_EVIDENCE_KIND = "neighbour-evidence"
NEIGHBOUR_PORT = 5301
NEIGHBOUR_WEB_PORT = 8180
#: The neighbour roles whose load ``start_after_s`` stages.
STAGED_ROLES = ("cpu", "net")


@dataclass
class LoadRecord:
    """One load-generator run: when it ran (monotonic) and what it achieved."""

    started: float
    ended: float
    value: float


class ChainedLoad:
    """Runs ``once()`` back to back in a thread until stopped; each call returns the
    achieved rate of that run. ``rate_between(t0, t1)`` weights each run by its overlap
    with the window. Errors end the chain and are kept (reported with the window)."""

    def __init__(self, name: str, once: Callable[[], float]) -> None:
        self.name = name
        self._once = once
        self.records: list[LoadRecord] = []
        self.error: str | None = None
        self._running_since: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"load-{self.name}",
                                        daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self._running_since = started
            try:
                value = self._once()
            except HvbenchError as exc:
                if not self._stop.is_set():
                    self.error = str(exc).splitlines()[0]
                return
            finally:
                self._running_since = None
            self.records.append(LoadRecord(started, time.monotonic(), value))

    def overdue_at(self, t: float) -> float | None:
        """How long the run in progress at ``t`` had been running, when that is more
        than :data:`OVERDUE_S` (the load stopped, whatever the completed runs say);
        None otherwise."""
        since = self._running_since
        if since is None or t - since <= OVERDUE_S:
            return None
        return t - since

    def rate_between(self, t0: float, t1: float) -> float | None:
        """The overlap-weighted mean rate of the runs inside [t0, t1]; None if none."""
        weight = total = 0.0
        for rec in list(self.records):
            overlap = min(rec.ended, t1) - max(rec.started, t0)
            if overlap > 0:
                weight += overlap
                total += overlap * rec.value
        return total / weight if weight > 0 else None

    def stop(self, timeout: float = LOAD_CHUNK_S * 4 + 30) -> None:
        """Let the current run finish (it is short) and end the chain. Safe twice."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None


@dataclass
class Neighbour:
    """One neighbour guest, its role's server and its load generator."""

    label: str
    spec: NeighbourSpec
    guest: QemuPlatform
    servers: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    load: ChainedLoad | None = None
    #: A staged net neighbour's one load-generator run: each window chains it anew
    #: from its ``start_after_s`` (the group's chain is ``load``).
    chunk: Callable[[], float] | None = None
    #: A web neighbour's offered requests/s, and the measured maximum it is a share of
    #: (None for an absolute rate).
    offered: float | None = None
    rate_ref: float | None = None


class ScenarioRun(StartStop):
    """The scenario of one group: ``start()`` boots neighbours, starts their roles and
    applies CPU weights; ``stop()`` undoes all of it (safe twice, never raises for
    what is already gone).

    Raises :class:`GuestBootError` if a neighbour does not boot (console in the
    error), :class:`HostError` for cgroups the host cannot make, and what the
    neighbours' servers raise.
    """

    def __init__(self, spec: ScenarioSpec, name: str, target: Platform, *,
                 session: LabSession | None, key: str, cell: Cell | None = None,
                 workloads: Sequence[Variant[WorkloadSpec]] = ()) -> None:
        self.spec = spec
        self.name = name
        self.target = target
        self.session = session
        self.key = key
        #: The group's first cell: what identical guests copy (platform and workload).
        self.cell = cell
        #: The study's workloads: where a relative rate's reference is found.
        self.workloads = workloads
        #: The measured maxima relative neighbour rates take a share of (set by the
        #: runner before :meth:`start`; see :class:`~hvbench.run.cells.base.CellContext`).
        self.rate_refs: Mapping[str, Mapping[int, float]] = {}
        self.neighbours: list[Neighbour] = []
        self.cgroups: CpuCgroups | None = None
        self._scratch: Path | None = None
        self._ondemand_image: Path | None = None

    def start(self) -> None:
        try:
            index = 0
            for spec in self.spec.neighbours:
                for _ in range(spec.count):
                    self.neighbours.append(self._boot_neighbour(spec, index))
                    index += 1
            for spec, vm in self._identical():
                self.neighbours.append(self._boot_neighbour(spec, index, vm))
                index += 1
            for neighbour in self.neighbours:
                self._start_role(neighbour)
            if self.spec.weights is not None:
                self._apply_weights()
        except BaseException:
            self.stop()
            raise

    def _identical(self) -> list[tuple[NeighbourSpec, VmSpec]]:
        """``identical - 1`` copies of the target: its platform's vCPUs, memory, machine
        and NIC model, serving the target's web workload (file size, rate, client and
        reply timeout)."""
        count = self.spec.identical
        if count is None:
            return []
        cell = self.cell
        vm = guest_vm(cell.platform.spec) if cell is not None else None
        if cell is None or vm is None:
            raise HvbenchError(f"internal: scenario {self.name}: identical guests copy "
                               "the group's qemu platform")
        # A fixed-rate web workload with one file size (checked when parsed).
        site = cell.workload.spec.served_load()
        if site is None:
            raise HvbenchError(f"internal: scenario {self.name}: workload "
                               f"{cell.workload.name} serves nothing to copy")
        model = vm.nics[0].model if vm.nics else "virtio-net"
        copy = VmSpec(machine=vm.machine, vcpus=vm.vcpus, memory_mib=vm.memory_mib,
                      cpu=vm.cpu, mitigations=vm.mitigations, kernel_args=vm.kernel_args,
                      accel=vm.accel, clocksource=vm.clocksource,
                      nics=(NicSpec(model=model, backend="tap"),))
        spec = NeighbourSpec(role="net", load="web", client=site.client,
                             file_kb=site.file_kb, rate=site.rate, rate_of=site.rate_of,
                             reply_timeout_s=site.reply_timeout_s, vcpus=vm.vcpus,
                             memory_mib=vm.memory_mib)
        return [(spec, copy)] * (count - 1)

    def _boot_neighbour(self, spec: NeighbourSpec, index: int,
                        vm: VmSpec | None = None) -> Neighbour:
        vm = vm or spec.vm()
        if self.session is not None and vm.nics:
            vm = self.session.guest_spec(vm, f"{self.key}-nb{index}")
        guest = QemuPlatform(vm, name=f"{self.target.name[:20]}-nb{index}",
                             accel_choice=choose_accel(vm))
        guest.launch()
        return Neighbour(f"nb{index}", spec, guest)

    # -- roles ---------------------------------------------------------------------
    def _start_role(self, nb: Neighbour) -> None:
        if nb.spec.role == "cpu":
            if nb.spec.start_after_s is None:  # staged: started in each window instead
                _background(nb.guest, stress_argv(nb.spec))
        elif nb.spec.role == "disk":
            device = nb.guest.disk_device(0)
            _background(nb.guest, ["fio", "--name=neighbour", f"--filename={device}",
                                   f"--rw={nb.spec.rw}", f"--bs={nb.spec.block_size}",
                                   f"--iodepth={nb.spec.iodepth}", "--ioengine=libaio",
                                   "--direct=1", "--time_based", "--runtime=86400"])
        elif nb.spec.role == "net":
            self._start_net_role(nb)

    def _start_net_role(self, nb: Neighbour) -> None:
        if self.session is None:
            raise HvbenchError(f"scenario {self.name}: a network neighbour needs the lab")
        server = lab_guest_endpoint(nb.guest, self.session.lab.host_address)
        client = self.session.lab_endpoint(nb.spec.client)
        if nb.spec.load == "web":
            rate, nb.rate_ref = self._offered(nb)
            nb.offered = rate
            site = web.StaticSite(file_kb=(nb.spec.file_kb,), port=NEIGHBOUR_WEB_PORT)
            nb.servers.enter_context(web.serve_web(site, server))
            chunk = _web_chunk(site, rate, nb.spec.reply_timeout_s, client, server)
        else:
            argv = iperf3.server_argv(server.bind_address, NEIGHBOUR_PORT)
            handle: ServerHandle = start_server(server, argv, name=f"iperf3-{nb.label}",
                                                port=NEIGHBOUR_PORT)
            nb.servers.callback(handle.stop)
            chunk = _iperf3_chunk(nb.spec, client, server)
        if nb.spec.start_after_s is not None:  # staged: chained in each window instead
            nb.chunk = chunk
            return
        nb.load = ChainedLoad(nb.label, chunk)
        nb.load.start()

    def _offered(self, nb: Neighbour) -> tuple[float, float | None]:
        """A web neighbour's requests/s and the maximum a relative rate takes a share of.
        Raises :class:`HvbenchError` when that maximum was not measured."""
        if not is_relative(nb.spec.rate):
            return float(nb.spec.rate), None
        ref = rate_reference(self.workloads, nb.spec.rate_of, f"scenario {self.name}")
        return offered_rate(nb.spec.rate, ref.name, nb.spec.file_kb, self.rate_refs,
                            f"scenario {self.name}: {nb.label}")

    # -- weights -------------------------------------------------------------------
    def _apply_weights(self) -> None:
        weights = self.spec.weights
        if weights is None:
            return
        cgroups = CpuCgroups(cgroup_tag(self.key))
        self.cgroups = cgroups
        cgroups.start()
        quota = weights.target_quota_pct
        cgroups.add_group("io", GroupSettings(weight=weights.io, cpus=weights.cpus))
        cgroups.add_group("target", GroupSettings(weight=weights.target, cpus=weights.cpus,
                                                  quota_pct=quota))
        cgroups.add_group("neighbours", GroupSettings(weight=weights.neighbours,
                                                      cpus=weights.cpus))
        self._place(self.target, "target")
        for nb in self.neighbours:
            self._place(nb.guest, "neighbours")

    def _place(self, guest: Platform, group: str) -> None:
        if self.cgroups is None or guest.pid is None:
            return
        vcpus, others = qemu_thread_groups(guest.pid, guest.vcpu_threads().values())
        self.cgroups.move_threads(group, vcpus)
        self.cgroups.move_threads("io", others)

    # -- windows -------------------------------------------------------------------
    def interfaces(self) -> dict[str, str]:
        """The neighbours' taps, labelled ``nb<i>-tap<j>``, for the NIC sampler."""
        out: dict[str, str] = {}
        for nb in self.neighbours:
            out |= {tap: f"{nb.label}-tap{j}" for j, tap in enumerate(nb.guest.tap_names)
                    if tap is not None}
        return out

    def monitors(self, inner: PhaseMonitors) -> PhaseMonitors:
        """``inner`` plus this scenario's activity around every measured window."""
        extra = [ThreadCpuSampler(nb.guest.pid, set(nb.guest.vcpu_threads().values()),
                                  name=nb.label)
                 for nb in self.neighbours if nb.guest.pid is not None]
        return ScenarioMonitors(self, [*inner.monitors, *extra], inner.hz, inner.guest)

    def ondemand_image(self, spec: StartOnDemandSpec) -> Path | None:
        """The system image on-demand guests copy before booting (made once)."""
        if spec.image_size is None:
            return None
        if self._ondemand_image is None:
            image = find_image()
            if image is None:
                raise HostError("no guest image is built yet: run `hvbench image build`")
            self._scratch = make_owned_dir(work_dir(), "ondemand-")
            self._ondemand_image = self._scratch / "base.raw"
            write_raw_image(image, spec.image_size, self._ondemand_image)
        return self._ondemand_image

    def place_ondemand(self, guest: QemuPlatform) -> None:
        """Put a guest started on demand into the neighbours' cgroups."""
        with contextlib.suppress(HvbenchError):
            self._place(guest, "neighbours")

    def stop(self) -> None:
        for nb in self.neighbours:
            if nb.load is not None:
                nb.load.stop()
        try:
            for nb in reversed(self.neighbours):
                with contextlib.suppress(Exception):
                    nb.servers.close()
                nb.guest.stop()
        finally:
            self.neighbours.clear()
            # The scratch copies go first: a cgroup that stays busy raises below.
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)
                self._scratch = self._ondemand_image = None
            cgroups, self.cgroups = self.cgroups, None
            if cgroups is not None:
                cgroups.stop()

    def describe(self) -> dict[str, Any]:
        """What was set up, for the stored result."""
        return {
            "scenario": self.name, "spec": self.spec.model_dump(mode="json"),
            "neighbours": [{"label": nb.label, "role": nb.spec.role, "pid": nb.guest.pid,
                            "qemu_argv": nb.guest.argv} for nb in self.neighbours],
            "cgroups": self.cgroups.describe() if self.cgroups else None,
        }


def cgroup_tag(key: str) -> str:
    """A cgroup tag for a scenario's platform name (``vm@w.2`` -> ``vm-w.2-<pid>``).

    Cgroup names allow letters, digits, ``_ . -`` only; the pid keeps two hvbench
    processes running the same study apart.
    """
    safe = re.sub(r"[^A-Za-z0-9_.-]", "-", key).lstrip(".-")[:40] or "scenario"
    return f"{safe}-{os.getpid()}"


def stress_argv(spec: NeighbourSpec) -> list[str]:
    """stress-ng for a cpu neighbour: one worker per vCPU at ``cpu_load_pct``."""
    return ["stress-ng", "--cpu", str(spec.vcpus), "--cpu-load", str(spec.cpu_load_pct),
            "--timeout", "0", "--quiet"]


def _background(guest: QemuPlatform, argv: list[str]) -> int | None:
    """Start ``argv`` in the guest, detached (the guest is stopped with the scenario);
    its pid in the guest (None if the shell printed none). Raises
    :class:`CommandError` (argv, exit code, stderr) if the shell cannot start it,
    :class:`GuestError` if the guest fails (30 s timeout)."""
    script = '"$@" </dev/null >/dev/null 2>&1 & echo $!'
    result = guest.exec(["sh", "-c", script, "sh", *argv], timeout=30)
    if not result.ok:
        raise CommandError(argv, result.exit_code, result.stderr.decode(errors="replace"),
                           f"starting a neighbour's load in {guest.name}")
    text = result.stdout.decode(errors="replace").strip()
    return int(text) if text.isdigit() else None


def _web_chunk_argv(site: web.StaticSite, rate: float, reply_timeout_s: float,
                    server: Endpoint) -> list[str]:
    """One httperf run of a web neighbour's chain: ``LOAD_CHUNK_S`` seconds of requests
    at ``rate``, each reply waited for ``reply_timeout_s`` (the neighbour's, as the
    target's httperf waits its workload's)."""
    address, port = server.reach(site.port)
    return web.httperf_argv(server=address, port=port, uri=web.file_uri(site.file_kb[0]),
                            rate=rate, num_conns=max(1, round(rate * LOAD_CHUNK_S)),
                            timeout_s=reply_timeout_s)


def _web_chunk(site: web.StaticSite, rate: float, reply_timeout_s: float,
               client: Endpoint, server: Endpoint) -> Callable[[], float]:
    argv = _web_chunk_argv(site, rate, reply_timeout_s, server)

    def once() -> float:
        done = client.executor.exec(argv, timeout=LOAD_CHUNK_S + reply_timeout_s + 30)
        # Counted as the target's replies_s is (HttperfResult.achieved_rps), so the
        # two sides of a comparison differ by what they served, not by the formula.
        return web.parse_httperf(done.text()).achieved_rps()
    return once


def _iperf3_chunk(spec: NeighbourSpec, client: Endpoint, server: Endpoint
                  ) -> Callable[[], float]:
    address, port = server.reach(NEIGHBOUR_PORT)
    load = iperf3.Iperf3Load(direction="tx" if spec.direction == "to-guest" else "rx",
                             duration_s=LOAD_CHUNK_S, omit_s=0, port=NEIGHBOUR_PORT,
                             protocol="tcp")
    argv = iperf3.client_argv(load, address, port, bind_address=client.bind_address)
    if spec.bitrate is not None:
        argv += ["-b", spec.bitrate]

    def once() -> float:
        done = client.executor.exec(argv, timeout=LOAD_CHUNK_S + 30)
        result = iperf3.parse_iperf3_json(done.text())
        return float(result.mbit_s)
    return once


# -- the monitors of a window ------------------------------------------------------------
class ScenarioMonitors(PhaseMonitors):
    """Phase monitors that also run the scenario's per-window activity."""

    def __init__(self, run: ScenarioRun, monitors: list[Monitor], hz: float,
                 guest: GuestSamplerFactory | None = None) -> None:
        super().__init__(monitors, hz, guest)
        self.run = run
        self._t0 = 0.0
        self._ondemand: OnDemandStarts | None = None
        self._stages: StagedLoads | None = None

    def start(self) -> None:
        super().start()
        self._t0 = time.monotonic()
        spec = self.run.spec.start
        if spec is not None:
            self._ondemand = OnDemandStarts(self.run, spec, self._t0)
            self._ondemand.start()
        staged = [nb for nb in self.run.neighbours
                  if nb.spec.role in STAGED_ROLES and nb.spec.start_after_s is not None]
        if staged:
            # The samplers' own t0: the marks share the stored series' time axis.
            origin = self._set.t0 if self._set is not None else self._t0
            self._stages = StagedLoads(staged, origin)
            self._stages.start()

    def stop(self, focus: tuple[float, float] | None = None) -> MonitorResult:
        t1 = time.monotonic()
        ondemand, self._ondemand = self._ondemand, None
        stages, self._stages = self._stages, None
        if ondemand is not None:
            ondemand.join()
        if stages is not None:
            stages.join()
        try:
            # Inside the try: a sampler that fails to stop must not leave the window's
            # staged chains and on-demand guests running into the group's next windows.
            result = super().stop(focus)
            self._add_loads(result, self._t0, t1)
            if ondemand is not None:
                ondemand.add_to(result)
            if stages is not None:
                stages.add_to(result)
        finally:
            if ondemand is not None:
                ondemand.stop_guests()
            if stages is not None:
                stages.stop_loads()
        return result

    def abort(self) -> None:
        ondemand, self._ondemand = self._ondemand, None
        stages, self._stages = self._stages, None
        if ondemand is not None:
            ondemand.join()
            ondemand.stop_guests()
        if stages is not None:
            stages.join()
            stages.stop_loads()
        super().abort()

    def _add_loads(self, result: MonitorResult, t0: float, t1: float) -> None:
        for nb in self.run.neighbours:
            if nb.load is None:
                continue
            rate = nb.load.rate_between(t0, t1)
            unit = "replies_per_s" if nb.spec.load == "web" else "goodput_mbit_s"
            overdue = nb.load.overdue_at(t1)
            if overdue is not None:
                # The completed runs' rate is not the window's: no rate, and why.
                rate = None
                result.errors[f"{nb.label}.load"] = (
                    f"its load generator's run of {LOAD_CHUNK_S:g} s had not finished "
                    f"after {overdue:.0f} s when the window ended: the neighbour's load "
                    "stopped during the window, so it has no rate (the neighbour's "
                    f"state then: raw output {NEIGHBOUR_EVIDENCE_KIND})")
                # Read now, while the run still hangs: what the guest can tell of it.
                evidence = nb.guest.failure_evidence()
                previous = result.raw.get(NEIGHBOUR_EVIDENCE_KIND, "")
                result.raw[NEIGHBOUR_EVIDENCE_KIND] = \
                    f"{previous}[{nb.label}]\n{evidence or '(guest not running)'}\n"
            if rate is not None:
                result.summary[f"{nb.label}.load.{unit}"] = rate
                if nb.spec.load == "web":
                    result.summary[f"{nb.label}.load.file_kb"] = float(nb.spec.file_kb)
            if nb.offered is not None:
                result.summary[f"{nb.label}.load.offered_rps"] = nb.offered
            if nb.rate_ref is not None:
                result.summary[f"{nb.label}.load.rate_ref_rps"] = nb.rate_ref
            if nb.load.error and overdue is None:
                result.errors[f"{nb.label}.load"] = nb.load.error


class StagedLoads:
    """Starts the load of cpu and net neighbours with ``start_after_s`` during one
    window, each that many seconds after ``t0`` (the samplers' start), in a thread:
    stress-ng in a cpu neighbour, a new chain of its load generator for a net one.
    Records when each really ran (``nb<i>.<role>.started_at_s``, seconds since ``t0``:
    for stress-ng after the guest agent confirmed the start, for a chain when its first
    run began) and stops them when the window ends, so that the next window starts idle
    again."""

    def __init__(self, neighbours: list[Neighbour], t0: float) -> None:
        self.neighbours = sorted(neighbours, key=lambda nb: nb.spec.start_after_s or 0.0)
        self.t0 = t0
        self.started: list[tuple[Neighbour, float, int | None]] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="stages", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        try:
            for nb in self.neighbours:
                due = self.t0 + (nb.spec.start_after_s or 0.0)
                if self._stop.wait(max(0.0, due - time.monotonic())):
                    return
                if nb.spec.role == "net":
                    self._chain(nb)
                    continue
                pid = _background(nb.guest, stress_argv(nb.spec))
                self.started.append((nb, time.monotonic() - self.t0, pid))
                if pid is None:  # then it runs on into the group's next windows
                    self.error = f"{nb.label}: no pid of stress-ng, it cannot be stopped"
        except HvbenchError as exc:
            self.error = str(exc).splitlines()[0]

    def _chain(self, nb: Neighbour) -> None:
        if nb.chunk is None:
            raise HvbenchError(f"internal: {nb.label}: a staged net neighbour has no load")
        nb.load = ChainedLoad(nb.label, nb.chunk)
        self.started.append((nb, time.monotonic() - self.t0, None))
        nb.load.start()

    def join(self) -> None:
        """End the waiting for stages the window did not reach (they are left out)."""
        self._stop.set()
        self._thread.join()

    def add_to(self, result: MonitorResult) -> None:
        """The stage marks of the window; a start the agent confirmed only after the
        window's last sample began no stage in it and is left out."""
        for nb, at, _ in self.started:
            if at < result.seconds:
                result.summary[f"{nb.label}.{nb.spec.role}.started_at_s"] = at
        if self.error:
            result.errors["stages"] = self.error

    def stop_loads(self) -> None:
        """SIGTERM each started stress-ng (it stops its workers) and end each chain
        (its current run finishes); a guest that does not answer is stopped with the
        scenario anyway."""
        for nb, _, pid in self.started:
            if nb.spec.role == "net" and nb.load is not None:
                nb.load.stop()
                nb.load = None
            elif pid is not None:
                with contextlib.suppress(HvbenchError):
                    nb.guest.exec(["sh", "-c", 'kill "$1"', "sh", str(pid)], timeout=30)
        self.started.clear()


class OnDemandStarts:
    """Starts the scenario's on-demand guests during one window, in a thread, and
    records when each was asked for and how long it took to answer (create ->
    agent ready); the guests are stopped when the window ends."""

    def __init__(self, run: ScenarioRun, spec: StartOnDemandSpec, t0: float) -> None:
        self.run = run
        self.spec = spec
        self.t0 = t0
        self.guests: list[QemuPlatform] = []
        self.starts: list[tuple[float, float]] = []  # (asked at, start-up seconds)
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ondemand", daemon=True)
        self._scratch: Path | None = None

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        try:
            for index in range(self.spec.count):
                due = self.t0 + self.spec.at_s + index * self.spec.interval_s
                if self._stop.wait(max(0.0, due - time.monotonic())):
                    return
                self._start_one(index)
        except HvbenchError as exc:
            self.error = str(exc).splitlines()[0]

    def _start_one(self, index: int) -> None:
        asked = time.monotonic()
        root = self._root_copy(index)
        vm = self.spec.vm()
        # Decided inside the timed start-up, where the guest used to decide it itself.
        guest = QemuPlatform(vm, name=f"{self.run.target.name[:20]}-od{index}",
                             root_disk=root, accel_choice=choose_accel(vm))
        self.guests.append(guest)
        guest.launch()
        self.starts.append((asked - self.t0, time.monotonic() - asked))
        self.run.place_ondemand(guest)

    def _root_copy(self, index: int) -> Path | None:
        """A fresh copy of the on-demand system image (the copy is part of start-up)."""
        base = self.run.ondemand_image(self.spec)
        if base is None:
            return None
        if self._scratch is None:
            self._scratch = make_owned_dir(work_dir(), "ondemand-copy-")
        dest = self._scratch / f"od{index}.raw"
        shutil.copyfile(base, dest)
        return dest

    def join(self) -> None:
        """Wait for the starts in progress (a window ends after its guests are up)."""
        self._thread.join()

    def add_to(self, result: MonitorResult) -> None:
        """Start-up times, the target's 1 s throughput buckets and the dip."""
        for index, (asked, startup) in enumerate(self.starts):
            result.summary[f"ondemand.{index}.asked_at_s"] = asked
            result.summary[f"ondemand.{index}.startup_s"] = startup
        if self.error:
            result.errors["ondemand"] = self.error
        buckets = one_second_buckets(_throughput_rows(result))
        if buckets:
            result.series["throughput"] = [(float(t), {"value": v}) for t, v in buckets]
            first = min((a for a, _ in self.starts), default=self.spec.at_s)
            result.summary |= {f"dip.{k}": v for k, v in dip_metrics(buckets, first).items()}

    def stop_guests(self) -> None:
        self._stop.set()
        self._thread.join()
        for guest in self.guests:
            guest.stop()
        self.guests.clear()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None


def _throughput_rows(result: MonitorResult) -> Iterator[tuple[float, float]]:
    """The target's traffic per sample: its first tap's rx + tx Mbit/s from the NIC
    sampler, else the host disk's read + write MB/s."""
    for t, values in result.series.get("net", []):
        if "guest-tap0.rx_mbit_s" in values:
            yield t, values["guest-tap0.rx_mbit_s"] + values.get("guest-tap0.tx_mbit_s", 0.0)
    if "net" in result.series:
        return
    for monitor, points in result.series.items():
        if monitor.startswith("host.disk."):
            for t, values in points:
                yield t, values.get("r_mb_s", 0.0) + values.get("w_mb_s", 0.0)
            return
