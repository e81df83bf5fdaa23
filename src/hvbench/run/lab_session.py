"""A study's net lab for one run, and the network and web cells that use it.

:class:`LabSession` owns the :class:`~hvbench.netlab.lab.NetLab` of a study (its bridge
and namespace hosts), the root namespace as an endpoint (the seeds' driver domain), and
the wiring of every guest NIC into the lab:

- a ``tap`` NIC without a bridge joins the lab bridge and gets the next guest address;
- a ``user`` (slirp) NIC reaches the lab through QEMU's NAT, and servers in such a guest
  are reached through forwards that listen on the lab's own bridge address.

For network block storage (a disk ``source = "nbd:HOST"``) it owns one NBD server per
lab host named so (:class:`~hvbench.workloads.nbd.NbdServer`), started when the first
guest or native platform naming it is built, and resolves the source to the export's
``nbd://`` address. An ATA over Ethernet source (``aoe:HOST``, guests only) gets a
vblade per lab host (:class:`~hvbench.workloads.aoe.AoeServer`), one shelf each, and
resolves to ``aoe://HOST/e<shelf>.0``.

For propagation workloads it also owns the image repositories (one per repository lab
host, servers started for every method the study uses there) and the node's directory,
all in one owned directory under the work directory, removed before the lab stops.

The cells that use it are in :mod:`hvbench.run.cells` (propagation) and
:mod:`hvbench.kinds` (network, web).
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
from collections.abc import Sequence
from pathlib import Path

from hvbench.errors import HostError, HvbenchError, RootRequiredError
from hvbench.host import facts
from hvbench.host.paths import make_owned_dir, work_dir
from hvbench.host.started import StartStop
from hvbench.model.lab import LabHostSpec
from hvbench.model.spec import DiskSpec, NicSpec, VmSpec, aoe_address, aoe_host, nbd_host
from hvbench.model.study import (
    NATIVE_SERVER_HOST,
    Cell,
    Study,
    nbd_exports,
)
from hvbench.netlab.lab import NetLab
from hvbench.platforms.base import Platform
from hvbench.platforms.native import NativePlatform
from hvbench.workloads.aoe import AoeServer
from hvbench.workloads.endpoints import Endpoint, host_endpoint, lab_endpoint
from hvbench.workloads.nbd import NbdServer
from hvbench.workloads.repository import ImageRepository

#: What a server in a guest or netns binds to: every address of its own namespace.
ANY_ADDRESS = "0.0.0.0"  # noqa: S104 - inside a guest or a lab namespace only


class LabSession(StartStop):
    """The lab of one run: ``start()`` builds it, ``stop()`` removes it (safe twice).

    Raises :class:`RootRequiredError` without root (namespaces, bridges and taps need
    it) and whatever :meth:`NetLab.start` raises; nothing is left when it does.
    ``stop()`` stops the image repositories (their servers, images and the node's cached
    bases) and removes the session's propagation directory before the lab goes.
    ``native_server``: the lab gains the host ``native`` where a server of a workload
    on the host runs (see :func:`hvbench.run.cells.registry.needs_native_server`).
    """

    def __init__(self, study: Study, *, native_server: bool = False) -> None:
        if study.lab is None:
            raise HvbenchError("internal: a LabSession needs a study with a lab")
        self.study = study
        self.native_server = native_server
        self.lab = NetLab(study.lab)
        self.host = NativePlatform(name="host")
        self._guest_ips: dict[str, str] = {}
        #: Image repositories by lab host name (propagation workloads).
        self.repositories: dict[str, ImageRepository] = {}
        self._propagation_dir: Path | None = None
        self._guest_numbers = itertools.count(1)
        #: NBD servers by lab host name, and the export each serves.
        self.nbd_servers: dict[str, NbdServer] = {}
        self._nbd_exports = nbd_exports(study.platforms)
        #: AoE servers by lab host name, and the export each serves.
        self.aoe_servers: dict[str, AoeServer] = {}
        self._aoe_exports = nbd_exports(study.platforms, aoe_host)
        self._storage_dir: Path | None = None

    def start(self) -> None:
        if not facts.is_root():
            raise RootRequiredError("the net lab of a network or web study")
        try:
            self.lab.start()
            if self.native_server:
                self.lab.add_host(LabHostSpec(name=NATIVE_SERVER_HOST))
            self.host.start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        try:
            self._stop_repositories()
            self._stop_nbd()
        finally:
            try:
                self.host.stop()
            finally:
                self.lab.stop()

    def _stop_repositories(self) -> None:
        """Stop every repository, then remove the propagation directory; the first
        error is raised after everything was tried."""
        directory, self._propagation_dir = self._propagation_dir, None
        _stop_all(list(self.repositories.values()), directory)
        self.repositories.clear()

    def _stop_nbd(self) -> None:
        """Stop every NBD server (each removes its image), then the storage directory;
        the first error is raised after everything was tried."""
        directory, self._storage_dir = self._storage_dir, None
        _stop_all([*self.nbd_servers.values(), *self.aoe_servers.values()], directory)
        self.nbd_servers.clear()
        self.aoe_servers.clear()

    # -- network block storage ---------------------------------------------------------
    def resolve_source(self, source: str | None) -> str | None:
        """A disk source as a platform opens it: ``nbd:HOST`` becomes the ``nbd://``
        address of HOST's export, whose server starts on first use (see
        :meth:`NbdServer.start` for what it raises; :class:`HostError` for a host the
        lab lacks); any other source is returned unchanged."""
        host = nbd_host(source)
        if host is None:
            return self._resolve_aoe(source)
        server = self.nbd_servers.get(host)
        if server is None:
            server = NbdServer(self.lab.host(host), self._nbd_exports.get(host, DiskSpec()),
                               self._storage())
            server.start()
            self.nbd_servers[host] = server
        return server.uri

    def _storage(self) -> Path:
        if self._storage_dir is None:
            self._storage_dir = make_owned_dir(work_dir(), "storage-lab-")
        return self._storage_dir

    def _resolve_aoe(self, source: str | None) -> str | None:
        """``aoe:HOST`` as its AoE address, HOST's vblade started on first use (shelf:
        the order of first use, so every export on the bridge has its own address);
        any other source unchanged. Raises what :meth:`AoeServer.start` raises."""
        host = aoe_host(source)
        if host is None:
            return source
        server = self.aoe_servers.get(host)
        if server is None:
            export = self._aoe_exports.get(host, DiskSpec())
            server = AoeServer(self.lab.host(host), self._storage(), export.size,
                               shelf=len(self.aoe_servers))
            server.start()
            self.aoe_servers[host] = server
        return aoe_address(host, server.shelf, server.slot)

    # -- guests ----------------------------------------------------------------------
    def guest_spec(self, vm: VmSpec, key: str, web_ports: Sequence[int] = ()) -> VmSpec:
        """``vm`` with its NICs wired into the lab and its NBD disk sources resolved
        (:meth:`resolve_source`). ``key`` names the guest (its platform variant, or that
        plus ``-peer``): each key keeps one address and MAC for the whole run, so the
        lab's neighbour caches stay right across reboots and a long study never runs
        out of addresses."""
        nics = tuple(self._wire(nic, f"{key}#{i}", web_ports if i == 0 else ())
                     for i, nic in enumerate(vm.nics))
        disks = tuple(d.model_copy(update={"source": self.resolve_source(d.source)})
                      if nbd_host(d.source) or aoe_host(d.source) else d for d in vm.disks)
        return vm.model_copy(update={"nics": nics, "disks": disks})

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

    def repository(self, name: str, methods: Sequence[str]) -> ImageRepository:
        """The image repository on lab host ``name``, started (on first use) with the
        servers of ``methods`` (every method the study fetches from there).

        Its node cache (``overlay``'s verified bases) is a directory of the session, one
        per repository host; it lives until :meth:`stop`. Raises :class:`HostError`
        (the lab lacks that host), what :meth:`ImageRepository.start` raises (a server
        does not listen within 15 s: :class:`CommandError`; a missing program:
        :class:`ToolMissingError`)."""
        repo = self.repositories.get(name)
        if repo is None:
            host = self.lab.host(name)
            root = self._propagation_root()
            repo = ImageRepository(host, root, node_cache=root / f"node-cache-{host.name}")
            self.repositories[name] = repo
        repo.start(list(methods))
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
        """Where a cell's platform sits on the lab: a guest at its own NIC's address,
        the host in the root namespace."""
        if platform.is_guest:
            return lab_guest_endpoint(platform, self.lab.host_address)
        return self.root_endpoint(platform)

    def server_endpoint(self, platform: Platform) -> Endpoint:
        """Where a server of a workload on ``platform`` runs: in a guest itself; for
        the host, in the lab host ``native`` (so its traffic crosses a veth as a
        guest's crosses its tap). Raises :class:`HostError` without that host."""
        if platform.is_guest:
            return self.platform_endpoint(platform)
        return self.lab_endpoint(NATIVE_SERVER_HOST)

    def interfaces(self, *platforms: Platform) -> dict[str, str]:
        """The root-namespace interfaces to sample, each with the stable label its
        metrics carry (device names are random per lab and per boot): ``lab-bridge``,
        the lab host's name for its veth, ``guest-tap<N>`` for the platform's taps and
        ``peer-tap<N>`` for a peer guest's."""
        labels = {self.lab.bridge: "lab-bridge"}
        labels |= {host.veth: name for name, host in self.lab.hosts.items()}
        for role, platform in zip(("guest", "peer"), platforms, strict=False):
            labels |= {tap: f"{role}-tap{i}" for i, tap in enumerate(platform.tap_names)
                       if tap is not None}
        return labels


def lab_guest_endpoint(guest: Platform, lab_address: str) -> Endpoint:
    """A guest's endpoint: its tap address, or for a user-mode NIC the lab address with
    the guest's forwards. Raises :class:`HostError` if its first NIC has no address."""
    if not guest.nics:
        raise HostError(f"guest {guest.name} has no NIC")
    nic = guest.nics[0]
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


def _stop_all(servers: Sequence[ImageRepository | NbdServer | AoeServer],
              directory: Path | None
              ) -> None:
    """Stop ``servers`` in reverse order, then remove ``directory``; the first error is
    raised after everything was tried."""
    errors: list[OSError | HvbenchError] = []
    for server in reversed(servers):
        try:
            server.stop()
        except (OSError, HvbenchError) as exc:  # raised below, after the rest
            errors.append(exc)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)
    if errors:
        raise errors[0]
