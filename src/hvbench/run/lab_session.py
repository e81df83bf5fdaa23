"""A study's net lab for one run, and the network and web cells that use it.

:class:`LabSession` owns the :class:`~hvbench.netlab.lab.NetLab` of a study (its bridge
and namespace hosts), the root namespace as an endpoint (the seeds' driver domain), and
the wiring of every guest NIC into the lab:

- a ``tap`` NIC without a bridge joins the lab bridge and gets the next guest address;
- a ``user`` (slirp) NIC reaches the lab through QEMU's NAT, and servers in such a guest
  are reached through forwards that listen on the lab's own bridge address.

For propagation workloads it also owns the image repositories (one per repository lab
host, servers started for every method the study uses there) and the node's directory,
all in one owned directory under the work directory, removed before the lab stops.

:func:`run_network_cell` and :func:`run_web_cell` run one cell's phases between the
platform's endpoint and its peer, with the monitors around each measured phase;
:func:`run_propagation_cell` propagates one image from the repository to the node.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hvbench.errors import HostError, HvbenchError, RootRequiredError
from hvbench.host import facts
from hvbench.host.paths import make_owned_dir, work_dir
from hvbench.model.lab import LabHostSpec
from hvbench.model.spec import NicSpec, VmSpec
from hvbench.model.study import (
    NATIVE_SERVER_HOST,
    Cell,
    NativePlatformSpec,
    NetworkWorkloadSpec,
    PropagationWorkloadSpec,
    QemuPlatformSpec,
    Study,
    WebWorkloadSpec,
)
from hvbench.monitors.sampler import MonitorResult
from hvbench.monitors.session import PhaseMonitors
from hvbench.netlab.lab import NetLab
from hvbench.platforms.base import Platform
from hvbench.platforms.native import NativePlatform
from hvbench.platforms.qemu import QemuPlatform
from hvbench.workloads.endpoints import (
    Endpoint,
    host_endpoint,
    lab_endpoint,
)
from hvbench.workloads.iperf3 import run_iperf3
from hvbench.workloads.outcome import PhaseOutcome
from hvbench.workloads.propagation import run_propagation
from hvbench.workloads.repository import ImageRepository
from hvbench.workloads.web import run_web_phase, serve_web

#: What a server in a guest or netns binds to: every address of its own namespace.
ANY_ADDRESS = "0.0.0.0"  # noqa: S104 - inside a guest or a lab namespace only


@dataclass
class MeasuredPhase:
    """One measured phase of a network or web cell, ready for the store."""

    outcome: PhaseOutcome
    wall_s: float
    monitors: MonitorResult


class LabSession:
    """The lab of one run: ``start()`` builds it, ``stop()`` removes it (safe twice).

    Raises :class:`RootRequiredError` without root (namespaces, bridges and taps need
    it) and whatever :meth:`NetLab.start` raises; nothing is left when it does.
    ``stop()`` stops the image repositories (their servers, images and the node's cached
    bases) and removes the session's propagation directory before the lab goes.
    """

    def __init__(self, study: Study) -> None:
        if study.lab is None:
            raise HvbenchError("internal: a LabSession needs a study with a lab")
        self.study = study
        self.lab = NetLab(study.lab)
        self.host = NativePlatform(name="host")
        self._guest_ips: dict[str, str] = {}
        #: Image repositories by lab host name (propagation workloads).
        self.repositories: dict[str, ImageRepository] = {}
        self._propagation_dir: Path | None = None
        self._guest_numbers = itertools.count(1)

    def __enter__(self) -> LabSession:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if not facts.is_root():
            raise RootRequiredError("the net lab of a network or web study")
        try:
            self.lab.start()
            if self._needs_native_server():
                self.lab.add_host(LabHostSpec(name=NATIVE_SERVER_HOST))
            self.host.start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        try:
            self._stop_repositories()
        finally:
            try:
                self.host.stop()
            finally:
                self.lab.stop()

    def _stop_repositories(self) -> None:
        """Stop every repository, then remove the propagation directory; the first
        error is raised after everything was tried."""
        errors: list[OSError | HvbenchError] = []
        for repo in reversed(list(self.repositories.values())):
            try:
                repo.stop()
            except (OSError, HvbenchError) as exc:  # raised below, after the rest
                errors.append(exc)
        self.repositories.clear()
        directory, self._propagation_dir = self._propagation_dir, None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
        if errors:
            raise errors[0]

    def _needs_native_server(self) -> bool:
        return any(isinstance(c.platform.spec, NativePlatformSpec)
                   and isinstance(c.workload.spec, WebWorkloadSpec) for c in self.study.cells)

    # -- guests ----------------------------------------------------------------------
    def guest_spec(self, vm: VmSpec, key: str, web_ports: Sequence[int] = ()) -> VmSpec:
        """``vm`` with its NICs wired into the lab. ``key`` names the guest (its platform
        variant, or that plus ``-peer``): each key keeps one address and MAC for the
        whole run, so the lab's neighbour caches stay right across reboots and a long
        study never runs out of addresses."""
        nics = tuple(self._wire(nic, f"{key}#{i}", web_ports if i == 0 else ())
                     for i, nic in enumerate(vm.nics))
        return vm.model_copy(update={"nics": nics})

    def _address(self, key: str) -> str:
        if key not in self._guest_ips:
            self._guest_ips[key] = self.lab.allocate_address()
        return self._guest_ips[key]

    def _wire(self, nic: NicSpec, key: str, web_ports: Sequence[int]) -> NicSpec:
        if nic.backend == "tap" and nic.bridge is None:
            address = self._address(key)
            return nic.model_copy(update={
                "bridge": self.lab.bridge, "address": f"{address}/{self.lab.prefix_len}",
                "mac": nic.mac or mac_for(address)})
        if nic.backend == "user" and web_ports:
            forwards = tuple(f"tcp:{free_port(self.lab.host_address)}:{p}" for p in web_ports)
            return nic.model_copy(update={"forwards": (*nic.forwards, *forwards),
                                          "forward_address": self.lab.host_address})
        return nic

    # -- propagation -----------------------------------------------------------------
    def _propagation_root(self) -> Path:
        """The session's owned directory for repositories and the node (created on
        first use, under the work directory: ``hvbench cleanup`` removes it after a
        ``kill -9``)."""
        if self._propagation_dir is None:
            self._propagation_dir = make_owned_dir(work_dir(), "propagation-lab-")
        return self._propagation_dir

    def node_dir(self) -> Path:
        """Where the node (this host's root namespace) puts fetched images, overlays
        and its guests' run files; removed when the session stops."""
        path = self._propagation_root() / "node"
        path.mkdir(mode=0o700, exist_ok=True)
        return path

    def repository_methods(self, host: str) -> list[str]:
        """Every propagation method the study's workloads fetch from lab host ``host``."""
        return sorted({v.spec.method for v in self.study.workloads
                       if isinstance(v.spec, PropagationWorkloadSpec)
                       and v.spec.repository == host})

    def repository(self, spec: PropagationWorkloadSpec) -> ImageRepository:
        """The image repository on lab host ``spec.repository``, started (on first use)
        with the servers of every method the study uses there, and ``spec.method``'s.

        Its node cache (``overlay``'s verified bases) is a directory of the session, one
        per repository host; it lives until :meth:`stop`. Raises :class:`HostError`
        (the lab lacks that host), what :meth:`ImageRepository.start` raises (a server
        does not listen within 15 s: :class:`CommandError`; a missing program:
        :class:`ToolMissingError`)."""
        repo = self.repositories.get(spec.repository)
        if repo is None:
            host = self.lab.host(spec.repository)
            root = self._propagation_root()
            repo = ImageRepository(host, root, node_cache=root / f"node-cache-{host.name}")
            self.repositories[spec.repository] = repo
        repo.start([*self.repository_methods(spec.repository), spec.method])
        return repo

    def guest_name(self, cell: Cell) -> str:
        """A guest name unique in this process: pid, a counter and the platform."""
        return f"hvbench-{os.getpid()}-p{next(self._guest_numbers)}-{cell.platform_name[:16]}"

    # -- endpoints -------------------------------------------------------------------
    def root_endpoint(self, executor: Platform | None = None) -> Endpoint:
        """The root namespace (the host, the seeds' driver domain) on the lab."""
        return host_endpoint(executor or self.host, self.lab.host_address)

    def lab_endpoint(self, name: str) -> Endpoint:
        """Lab host ``name``. Raises :class:`HostError` for a host the lab lacks."""
        return lab_endpoint(self.lab.host(name))

    def platform_endpoint(self, platform: Platform) -> Endpoint:
        """Where a cell's platform sits on the lab."""
        if isinstance(platform, QemuPlatform):
            return lab_guest_endpoint(platform, self.lab.host_address)
        return self.root_endpoint(platform)

    def interfaces(self, *platforms: Platform) -> dict[str, str]:
        """The root-namespace interfaces to sample, each with the stable label its
        metrics carry (device names are random per lab and per boot): ``lab-bridge``,
        the lab host's name for its veth, ``guest-tap<N>`` for the platform's taps and
        ``peer-tap<N>`` for a peer guest's."""
        labels = {self.lab.bridge: "lab-bridge"}
        labels |= {host.veth: name for name, host in self.lab.hosts.items()}
        for role, platform in zip(("guest", "peer"), platforms, strict=False):
            if isinstance(platform, QemuPlatform):
                labels |= {tap: f"{role}-tap{i}" for i, tap in enumerate(platform.tap_names)
                           if tap is not None}
        return labels


def lab_guest_endpoint(guest: QemuPlatform, lab_address: str) -> Endpoint:
    """A guest's endpoint: its tap address, or for a user-mode NIC the lab address with
    the guest's forwards. Raises :class:`HostError` if its first NIC has no address."""
    if not guest.spec.nics:
        raise HostError(f"guest {guest.name} has no NIC")
    nic = guest.spec.nics[0]
    if nic.backend == "user":
        forwards = {int(g): int(h) for _, h, g in (f.split(":") for f in nic.forwards)}
        return Endpoint(guest.name, "guest", guest, lab_address, ANY_ADDRESS,
                        forwards=forwards)
    if nic.address is None:
        raise HostError(f"guest {guest.name}: its tap NIC has no address on the lab")
    return Endpoint(guest.name, "guest", guest, nic.address.split("/")[0], ANY_ADDRESS)


def mac_for(address: str) -> str:
    """A locally administered MAC derived from a lab address (one address, one MAC)."""
    octets = [int(part) for part in address.split(".")]
    return "52:54:00:{:02x}:{:02x}:{:02x}".format(*octets[1:])


def free_port(address: str) -> int:
    """A TCP port nobody listens on at ``address`` now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def web_ports(study: Study, platform_name: str) -> list[int]:
    """The ports of every web workload that runs on platform ``platform_name``."""
    ports = [c.workload.spec.port for c in study.cells
             if c.platform.name == platform_name and isinstance(c.workload.spec, WebWorkloadSpec)]
    return sorted(set(ports))


class MonitorWindow(contextlib.AbstractContextManager["MonitorWindow"]):
    """Host monitors and a wall clock around exactly the measured part of a phase;
    discarded if it raises."""

    def __init__(self, monitors: PhaseMonitors) -> None:
        self.monitors = monitors
        self.wall_s = 0.0
        self.result = MonitorResult()
        self._started = 0.0

    def __enter__(self) -> MonitorWindow:
        self.monitors.start()
        self._started = time.monotonic()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if exc_type is not None:
            self.monitors.abort()
            return
        self.wall_s = time.monotonic() - self._started
        self.result = self.monitors.stop()


@contextlib.contextmanager
def _peer(session: LabSession, spec: NetworkWorkloadSpec, platform: Platform,
          cell: Cell) -> Iterator[tuple[Endpoint, list[Platform]]]:
    """The peer endpoint of a network cell; boots (and stops) a second guest for
    ``peer = "guest"``."""
    if spec.peer == "host":
        yield session.root_endpoint(), []
    elif spec.peer == "guest":
        platform_spec = cell.platform.spec
        if not isinstance(platform_spec, QemuPlatformSpec) or \
                not isinstance(platform, QemuPlatform):
            raise HvbenchError(f"cell {cell.name}: peer = guest needs a guest platform")
        vm = session.guest_spec(platform_spec.vm, f"{cell.platform.name}-peer")
        with QemuPlatform(vm, name=f"{platform.name[:24]}-peer") as peer:
            yield lab_guest_endpoint(peer, session.lab.host_address), [peer]
    else:
        yield session.lab_endpoint(spec.peer), []


def run_network_cell(session: LabSession, platform: Platform, cell: Cell,
                     monitors_for: Any) -> list[MeasuredPhase]:
    """iperf3 between the platform (client) and its peer (server).

    ``monitors_for(platforms)`` makes the phase monitors once the peer is up (so a peer
    guest's taps are sampled too). Raises what the workload raises.
    """
    spec = cell.workload.spec
    if not isinstance(spec, NetworkWorkloadSpec):
        raise HvbenchError(f"cell {cell.name}: not a network workload")
    client = session.platform_endpoint(platform)
    with _peer(session, spec, platform, cell) as (server, extra):
        monitors: PhaseMonitors = monitors_for([platform, *extra])
        window = MonitorWindow(monitors)
        outcome = run_iperf3(spec, client, server, window=window)
        return [MeasuredPhase(outcome, window.wall_s, window.result)]


def run_web_cell(session: LabSession, platform: Platform, cell: Cell,
                 monitors_for: Any) -> list[MeasuredPhase]:
    """A web server on the platform (natively: in the lab host ``native``), httperf on
    the workload's client host; one measured phase per file size."""
    spec = cell.workload.spec
    if not isinstance(spec, WebWorkloadSpec):
        raise HvbenchError(f"cell {cell.name}: not a web workload")
    server = (session.lab_endpoint(NATIVE_SERVER_HOST) if isinstance(platform, NativePlatform)
              else session.platform_endpoint(platform))
    client = session.lab_endpoint(spec.client)
    monitors: PhaseMonitors = monitors_for([platform])
    out: list[MeasuredPhase] = []
    with serve_web(spec, server):
        for kb in spec.file_kb:
            window = MonitorWindow(monitors)
            with window:
                outcome = run_web_phase(spec, kb, client, server)
            out.append(MeasuredPhase(outcome, window.wall_s, window.result))
    return out


def run_propagation_cell(session: LabSession, vm: VmSpec, cell: Cell,
                         monitors: PhaseMonitors) -> list[MeasuredPhase]:
    """Propagate one image from the cell's repository to the node and boot it as
    ``vm`` (its NICs wired into the lab); one :class:`MeasuredPhase` per phase of the
    workload. ``monitors`` (the lab's interfaces, among them the repository host's
    veth: see :meth:`LabSession.interfaces`) sample the window from just before the
    request to the client's exit; that window's result and length go with the
    ``transfer`` phase, the other phases carry their own duration and no samples.

    Bounded by the workload's ``timeout_s``. Raises what :meth:`LabSession.repository`
    and :func:`~hvbench.workloads.propagation.run_propagation` raise
    (:class:`CommandError`, :class:`ImageError`, :class:`GuestBootError`, ...);
    nothing of the repetition stays behind (the repository stays for the next one).
    """
    spec = cell.workload.spec
    if not isinstance(spec, PropagationWorkloadSpec):
        raise HvbenchError(f"cell {cell.name}: not a propagation workload")
    repo = session.repository(spec)
    guest_vm = session.guest_spec(vm, f"{cell.platform.name}-propagation")
    window = MonitorWindow(monitors)
    outcomes = run_propagation(spec, guest_vm, repo=repo, node_dir=session.node_dir(),
                               window=window, name=session.guest_name(cell))
    out: list[MeasuredPhase] = []
    for outcome in outcomes:
        if outcome.phase == "transfer":
            out.append(MeasuredPhase(outcome, window.wall_s, window.result))
        else:
            duration = outcome.metrics.get("duration_s", (0.0, "s"))[0]
            out.append(MeasuredPhase(outcome, duration, MonitorResult()))
    return out
