"""QemuPlatform: one QEMU guest process, from a VmSpec to an agent that answers.

Lifecycle (as in QEMU's python/qemu machine class): ``__init__`` only stores settings;
``launch()`` creates the disk images, starts QEMU, connects QMP and waits for the guest
agent; ``stop()`` is safe to call twice and goes soft to hard (QMP ``quit``, SIGTERM,
SIGKILL), removing every file it created in ``finally``. Every instance is tracked in
:data:`hvbench.platforms.registry.REGISTRY` while it lives.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hvbench.errors import (
    AgentError,
    GuestBootError,
    GuestError,
    HostError,
    ImageError,
    RootRequiredError,
    stderr_tail,
    tail,
)
from hvbench.host import facts, interrupt, trace
from hvbench.host.blockdev import require_free_device
from hvbench.host.cgroups import HostLimitsCgroup, device_of
from hvbench.host.commands import require_tool, run
from hvbench.host.paths import make_owned_dir, work_dir
from hvbench.host.proctree import die_with_parent as _die_with_parent
from hvbench.host.started import StartStop
from hvbench.host.tsc import tsc_khz
from hvbench.image.builder import RECOMMENDED_CMDLINE, GuestImage, find_image
from hvbench.model.aoe import guest_attach_argv, guest_device
from hvbench.model.lab import DEFAULT_MTU
from hvbench.model.qemu_argv import (
    LaunchPlan,
    ResolvedAccel,
    build_qemu_argv,
    disk_serial,
    fs_tag,
    guest_share_mount,
    wants_host_tsc,
)
from hvbench.model.spec import (
    PREALLOCATION,
    DiskSpec,
    NicSpec,
    VmSpec,
    aoe_address_parts,
    nbd_uri_parts,
    source_kind,
)
from hvbench.model.storage_daemon import guest_pci_address, vhost_user_queues
from hvbench.platforms.agent import GuestAgent
from hvbench.platforms.base import ExecResult, Platform
from hvbench.platforms.evidence import failure_evidence
from hvbench.platforms.registry import REGISTRY, ProcessRegistry
from hvbench.platforms.socket_daemon import SocketDaemon
from hvbench.platforms.storage_daemon import StorageDaemon
from hvbench.platforms.virtiofsd import Virtiofsd

# qemu.qmp (with asyncio and ssl, ~40 ms) is imported where a guest's QMP socket is
# used: every command imports this module when the kinds register, few boot a guest.
if TYPE_CHECKING:
    from qemu.qmp.legacy import QEMUMonitorProtocol

QEMU_BINARY = "qemu-system-x86_64"
#: The guest's NBD client (Debian's nbd-client in the bundled image), and how long
#: attaching one export may take, s.
NBD_CLIENT = "/sbin/nbd-client"
GUEST_ATTACH_TIMEOUT = 60.0
TAP_PREFIX = "hvb-t"
DEFAULT_BOOT_TIMEOUT = 60.0
_QUIT_WAIT, _TERM_WAIT = 5.0, 3.0
#: How long one wait for a QMP event lasts before QEMU's exit is checked again, s.
_EVENT_SLICE_S = 0.05


@dataclass(frozen=True)
class AccelChoice:
    """The accelerator a guest runs under and why (kept with every result)."""

    accel: ResolvedAccel
    reason: str


def fixed_accel(spec: VmSpec) -> AccelChoice | None:
    """The accelerator ``spec`` names itself (``tcg``, ``kvm``); None for ``auto``,
    which :func:`hvbench.platforms.accel.choose_accel` decides before the guest is
    built. Raises :class:`HostError` when ``accel=kvm`` is requested but /dev/kvm is
    absent."""
    if spec.accel == "tcg":
        return AccelChoice("tcg", "requested accel=tcg")
    if spec.accel == "kvm":
        present, reason = facts.kvm_present()
        if not present:
            raise HostError(f"accel=kvm requested but KVM is not present: {reason}")
        return AccelChoice("kvm", "requested accel=kvm")
    return None


@functools.cache
def _aio_supported(mode: str, directory: str) -> bool:
    return facts.qemu_supports_aio(mode, QEMU_BINARY, directory)


class QemuPlatform(StartStop):
    """A guest declared by a :class:`VmSpec`, booted from the bundled (or given) image.

    ``boot_timeout`` bounds ``launch()``: QEMU start to the agent's first answer.
    Raises :class:`GuestBootError` (with argv, exit status and console tail) when the
    guest does not come up in time.

    ``accel_choice``: the accelerator, decided before the guest is built
    (:func:`hvbench.platforms.accel.choose_accel`); it is required when the spec says
    ``accel = "auto"`` (``launch()`` raises :class:`HostError` without it), since only
    the KVM probe, which itself boots a guest, can decide that.

    ``await_agent=False`` makes ``launch()`` return once QMP answers, without waiting
    for the guest agent: for boots whose initramfs has no agent (``bench/boot.py``'s
    limit boots, which watch the console instead).
    """

    kind = "qemu"
    is_guest = True
    on_this_host = True

    def __init__(
        self,
        spec: VmSpec,
        *,
        name: str | None = None,
        image: GuestImage | None = None,
        base_dir: Path | None = None,
        boot_timeout: float = DEFAULT_BOOT_TIMEOUT,
        registry: ProcessRegistry = REGISTRY,
        root_disk: Path | None = None,
        root_format: str = "raw",
        accel_choice: AccelChoice | None = None,
        await_agent: bool = True,
    ) -> None:
        self.spec = spec
        self._await_agent = await_agent
        self._accel_choice = accel_choice
        self.name = name or f"hvbench-{secrets.token_hex(3)}"
        self.boot_timeout = boot_timeout
        self._image = image
        self._base_dir = base_dir
        self._registry = registry
        #: A system image to boot instead of the bundled one's root disk (a propagated
        #: or copied image); ``root_format`` is its format (raw or qcow2).
        self._root_disk = root_disk
        self._root_format = root_format
        self._proc: subprocess.Popen[bytes] | None = None
        self._qmp: QEMUMonitorProtocol | None = None
        self._agent: GuestAgent | None = None
        self._run_dir: Path | None = None
        self._sock_dir: Path | None = None
        self._plan: LaunchPlan | None = None
        self._argv: list[str] = []
        self._devices: dict[int, str] = {}
        #: The storage daemons of the vhost-user disks, in disk order.
        self._daemons: list[StorageDaemon] = []
        #: The virtiofsd of each shared directory, in order.
        self._virtiofsds: list[Virtiofsd] = []
        #: The cgroup of ``spec.host_limits``, once the guest has booted.
        self._limits: HostLimitsCgroup | None = None
        self.accel: ResolvedAccel | None = None
        self.accel_reason = ""
        self.timings: dict[str, float] = {}

    # -- context manager ------------------------------------------------------------
    # -- launch --------------------------------------------------------------------
    def start(self) -> None:
        """Alias of :meth:`launch` (the Platform protocol's name)."""
        self.launch()

    def launch(self) -> None:
        """Create images, start QEMU and wait until the guest agent answers.

        Raises :class:`GuestBootError` after ``boot_timeout`` seconds, or if QEMU exits;
        :class:`HostError` / :class:`RootRequiredError` / :class:`ImageError` if the host
        cannot run this spec. Nothing is left behind when it raises.
        """
        if self._proc is not None:
            raise GuestError(f"guest {self.name} is already running")
        _load_qmp()  # before the clock starts: boot_s never counted this import
        started = time.monotonic()
        try:
            self._prepare()
            # Offsets from the start of launch(): what the lifecycle workload splits.
            self.timings["prepared_s"] = time.monotonic() - started
            self._start_daemons()
            self._spawn()
            self.timings["spawned_s"] = time.monotonic() - started
            self._wait_ready(started + self.boot_timeout)
        except BaseException:
            self.stop()
            raise
        self.timings["boot_s"] = time.monotonic() - started
        trace.record("boot", self.timings["boot_s"], [QEMU_BINARY], platform=self.name)
        try:
            # Before the guest attaches network storage: AoE sizes its requests to the
            # frame its interface allows when it discovers a target.
            self._match_bridge_mtu()
            self._attach_guest_disks()
            if self._await_agent:
                self._mount_shares()
            self._apply_host_limits()
        except BaseException:
            self.stop()
            raise

    def _prepare(self) -> None:
        require_tool(QEMU_BINARY)
        image = self._image or find_image()
        if image is None:
            raise ImageError("no guest image is built yet: run `hvbench image build`")
        self._check_host()
        choice = self._accel_choice or fixed_accel(self.spec)
        if choice is None:
            raise HostError(f"guest {self.name}: accel=auto was not decided before the "
                            "guest was built (hvbench.platforms.accel.choose_accel)")
        self.accel, self.accel_reason = choice.accel, choice.reason
        base = self._base_dir or work_dir()
        self._run_dir = make_owned_dir(base, f"{self.name}-")
        # Unix socket paths are limited to 108 bytes; keep them short under /tmp.
        self._sock_dir = make_owned_dir(Path(tempfile.gettempdir()), "hvb-")
        images = tuple(self._create_disk(i) for i in range(len(self.spec.disks)))
        self._plan = self._make_plan(image, images)
        self._argv = build_qemu_argv(self._plan)

    def _start_daemons(self) -> None:
        """Start the storage daemon of each vhost-user disk (before QEMU, which connects
        to their sockets at start). Raises what :meth:`StorageDaemon.start` raises."""
        plan = self._plan
        if plan is None or self._sock_dir is None:
            raise GuestError("internal: launch state missing")
        for index, disk in enumerate(self.spec.disks):
            if disk.backend != "vhost-user":
                continue
            daemon = StorageDaemon(disk, index, plan.disk_images[index], self._sock_dir,
                                   name=f"{self.name}-qsd{index}",
                                   queues=vhost_user_queues(disk, self.spec.vcpus),
                                   registry=self._registry)
            self._daemons.append(daemon)
            daemon.start()
        for index, share in enumerate(self.spec.filesystems):
            fs = Virtiofsd(share, index, self._share_dir(index), self._sock_dir,
                           name=f"{self.name}-virtiofsd{index}", registry=self._registry)
            self._virtiofsds.append(fs)
            fs.start()

    def _share_dir(self, index: int) -> Path:
        """The host directory of shared directory ``index``: its ``source``, or one made
        in the run directory (removed with it)."""
        source = self.spec.filesystems[index].source
        if source is not None:
            return Path(source)
        if self._run_dir is None:
            raise GuestError("internal: run directory missing")
        path = self._run_dir / f"share{index}"
        path.mkdir(exist_ok=True)
        return path

    def host_share(self, index: int) -> Path:
        """The host directory shared as ``spec.filesystems[index]`` (while running)."""
        return self._virtiofsds[index].directory

    def guest_share(self, index: int) -> str:
        """Where the guest has shared directory ``index`` mounted."""
        return guest_share_mount(index)

    def shared_dirs(self) -> tuple[tuple[str, Path], ...]:
        """(guest mount point, host directory) of each shared directory (while running)."""
        return tuple((guest_share_mount(d.index), d.directory) for d in self._virtiofsds)

    def _mount_shares(self) -> None:
        """Mount each shared directory in the guest (``mount -t virtiofs TAG DIR``);
        raises :class:`GuestError` with mount's own words when it fails."""
        for index in range(len(self.spec.filesystems)):
            point = guest_share_mount(index)
            done = self.exec(["sh", "-c", 'mkdir -p "$2" && mount -t virtiofs "$1" "$2"',
                              "mount", fs_tag(index), point], timeout=GUEST_ATTACH_TIMEOUT)
            if not done.ok:
                said = stderr_tail(done.stderr.decode(errors="replace")) or done.text()
                raise self._boot_error(f"guest {self.name}: could not mount shared "
                                       f"directory {index} at {point}: {said}")

    @property
    def storage_daemons(self) -> tuple[SocketDaemon, ...]:
        """The running daemons that serve this guest's I/O: the vhost-user disks'
        storage daemons (in disk order), then the shared directories' virtiofsd."""
        return (*self._daemons, *self._virtiofsds)

    def helper_processes(self) -> dict[str, tuple[int, frozenset[int]]]:
        """Host processes besides QEMU that serve this guest's I/O: ``qsd<N>`` (the
        storage daemon of disk N) -> (pid, its iothread's thread ids), and ``vfs<N>``
        (shared directory N) -> (the host pid of the child virtiofsd sandboxed itself
        in, no iothreads: its threads are its ``main`` and ``other``). The parent
        virtiofsd only waits for that child, so it is not sampled."""
        found = {f"qsd{d.index}": (d.pid, d.iothread_tids) for d in self._daemons
                 if d.pid is not None}
        for fs in self._virtiofsds:
            child = fs.worker_pid()
            if child is not None:
                found[f"vfs{fs.index}"] = (child, frozenset())
        return found

    def _check_host(self) -> None:
        needs_tap = any(n.backend == "tap" for n in self.spec.nics)
        if needs_tap and not facts.is_root():
            raise RootRequiredError("tap networking")
        base = str(self._base_dir or work_dir())
        for disk in self.spec.disks:
            if disk.aio == "io_uring" and not _aio_supported("io_uring", base):
                raise HostError(f"this QEMU ({QEMU_BINARY}) was built without aio=io_uring")

    def _create_disk(self, index: int) -> str:
        """The image file of benchmark disk ``index``, created here; or the host block
        device it names (checked free: :class:`HostError` otherwise); or its resolved
        NBD export (``nbd://``; an unresolved ``nbd:HOST`` raises :class:`HostError`)."""
        disk = self.spec.disks[index]
        if self._run_dir is None:
            raise GuestError("internal: run directory missing")
        existing = existing_source(disk, f"guest {self.name} disk {index}")
        if existing is not None:
            return existing
        path = self._run_dir / f"disk{index}.{disk.format}"
        prealloc = PREALLOCATION[disk.allocation]
        run(
            ["qemu-img", "create", "-q", "-f", disk.format, "-o", f"preallocation={prealloc}",
             str(path), str(disk.size)],
            timeout=600, what=f"creating benchmark disk {index}",
        )
        return str(path)

    def _make_plan(self, image: GuestImage, images: tuple[str, ...]) -> LaunchPlan:
        if self._run_dir is None or self._sock_dir is None or self.accel is None:
            raise GuestError("internal: launch state missing")
        tag = secrets.token_hex(2)
        nics = self.spec.nics
        taps = tuple(
            f"{TAP_PREFIX}{tag}{i}" if n.backend == "tap" else None for i, n in enumerate(nics)
        )
        macs = tuple(n.mac or f"52:54:00:{tag[:2]}:{tag[2:]}:{i:02x}" for i, n in enumerate(nics))
        return LaunchPlan(
            spec=self.spec, accel=self.accel, name=self.name,
            kernel=str(image.kernel), initrd=str(image.initrd),
            kernel_cmdline=RECOMMENDED_CMDLINE,
            qmp_socket=str(self._sock_dir / "qmp.sock"),
            agent_socket=str(self._sock_dir / "agent.sock"),
            console_log=str(self._run_dir / "console.log"),
            disk_images=images, tap_names=taps, macs=macs,
            vhost=facts.vhost_net_available(), qemu_binary=QEMU_BINARY,
            virtiofs_sockets=tuple(str(self._sock_dir / f"vfs{i}.sock")
                                   for i in range(len(self.spec.filesystems))),
            vhost_user_sockets=tuple(
                str(self._sock_dir / f"vhu{i}.sock") if d.backend == "vhost-user" else None
                for i, d in enumerate(self.spec.disks)),
            root_disk=self._root_disk_path(image), root_format=self._root_format,
            host_tsc_khz=tsc_khz() if wants_host_tsc(self.spec, self.accel) else None,
        )

    def _root_disk_path(self, image: GuestImage) -> str | None:
        if self._root_disk is not None:
            return str(self._root_disk)
        return str(image.rootfs) if image.rootfs else None

    def _spawn(self) -> None:
        if self._run_dir is None:
            raise GuestError("internal: run directory missing")
        with (self._run_dir / "qemu.log").open("wb") as log:
            self._proc = subprocess.Popen(
                self._argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                # Own session: a terminal's Ctrl-C reaches hvbench, which stops guests in
                # order, rather than killing QEMU under a running measurement.
                start_new_session=True, preexec_fn=_die_with_parent,  # noqa: PLW1509
            )
        self._registry.add(self)

    def _wait_ready(self, deadline: float) -> None:
        from qemu.qmp import QMPError  # noqa: PLC0415 - deferred

        plan = self._plan
        if plan is None:
            raise GuestError("internal: no launch plan")
        t0 = time.monotonic()
        try:
            self._qmp = _connect_qmp(Path(plan.qmp_socket), deadline, self.is_running)
            self._attach_taps(plan)
            self.timings["qmp_s"] = time.monotonic() - t0
            if not self._await_agent:
                return
            agent = GuestAgent(Path(plan.agent_socket))
            self._agent = agent
            agent.connect(deadline, self.is_running)
            self.timings["agent_s"] = time.monotonic() - t0
        except (AgentError, OSError, TimeoutError, QMPError) as exc:
            raise self._boot_error(f"guest {self.name} did not boot: {exc}") from exc

    def _apply_host_limits(self) -> None:
        """Put the QEMU process (and its storage daemons and virtiofsd) into the cgroup
        of ``spec.host_limits``, now that the guest answers: the boot ran unlimited,
        every cell runs limited. The I/O limits apply to the whole disk under each
        benchmark disk's image file or device. Raises what
        :class:`HostLimitsCgroup` raises (HostError, RootRequiredError)."""
        limits = self.spec.host_limits
        if limits is None or self._proc is None:
            return
        devices = [device_of(image) for disk, image in zip(
            self.spec.disks, self.disk_images, strict=True) if not disk.guest_attached] \
            if limits.io else []
        # The guest's name may hold characters a cgroup name may not ('@', '/').
        group = HostLimitsCgroup(f"limits-{os.getpid()}-{secrets.token_hex(3)}", limits,
                                 devices)
        self._limits = group
        group.start()
        started = time.monotonic()
        for pid in [self._proc.pid, *(p for p, _ in self.helper_processes().values())]:
            group.join(pid)
        self.timings["limits_joined_s"] = time.monotonic() - started

    def _attach_guest_disks(self) -> None:
        """Have the guest attach each disk it initiates itself (``initiator = "guest"``):
        load ``nbd`` and connect /dev/nbdN to the export with nbd-client over the
        guest's NIC (seed 001's proposal: the initiator inside the guest). Up to
        :data:`GUEST_ATTACH_TIMEOUT` s each; raises :class:`GuestError` with
        nbd-client's own words (and the console tail) when it fails."""
        if self._plan is None:
            return
        number = 0
        for index, (disk, uri) in enumerate(zip(self.spec.disks, self._plan.disk_images,
                                                strict=True)):
            if not disk.guest_attached:
                continue
            if source_kind(uri) == "aoe-address":
                _, shelf, slot = aoe_address_parts(uri)
                argv, device = guest_attach_argv(shelf=shelf, slot=slot), guest_device(
                    shelf, slot)
                client = "the aoe driver"
            else:
                address, port, export = nbd_uri_parts(uri)
                device = f"/dev/nbd{number}"
                number += 1
                argv = ["sh", "-c", 'modprobe nbd && exec "$@"', "attach",
                        NBD_CLIENT, address, str(port), device, "-N", export]
                client = "nbd-client"
            done = self.exec(argv, timeout=GUEST_ATTACH_TIMEOUT)
            if not done.ok:
                said = stderr_tail(done.stderr.decode(errors="replace")) or done.text()
                raise self._boot_error(f"guest {self.name}: disk {index}: {client} could "
                                       f"not attach {uri}: {said}")
            self._devices[index] = device

    def _attach_taps(self, plan: LaunchPlan) -> None:
        for index, tap in enumerate(plan.tap_names):
            if tap is None:
                continue
            run(["ip", "link", "set", tap, "up"], what="bringing the tap up")
            bridge = plan.spec.nics[index].bridge
            if bridge:
                mtu = bridge_mtu(bridge)
                if mtu is not None and mtu != DEFAULT_MTU:
                    # A bridge drops to the smallest MTU of its ports: the tap joins at
                    # the lab's (jumbo frames stay jumbo).
                    run(["ip", "link", "set", tap, "mtu", str(mtu)],
                        what="setting the tap's MTU to the bridge's")
                run(["ip", "link", "set", tap, "master", bridge], what="enslaving the tap")

    def _match_bridge_mtu(self) -> None:
        """Inside the guest, give each tap NIC on a bridge whose MTU is not 1500 that
        MTU (found by its MAC), so its frames are as large as the lab's. Needs the
        agent (skipped without it); a guest command of up to 60 s. Raises
        :class:`GuestBootError` with ip's own words when it fails."""
        plan = self._plan
        if plan is None or not self._await_agent:
            return
        for index, nic in enumerate(plan.spec.nics):
            mtu = bridge_mtu(nic.bridge) if nic.backend == "tap" and nic.bridge else None
            if mtu is None or mtu == DEFAULT_MTU:
                continue
            done = self.exec(["sh", "-c", _SET_MTU_BY_MAC, "mtu", plan.macs[index], str(mtu)],
                             timeout=GUEST_ATTACH_TIMEOUT)
            if not done.ok:
                said = stderr_tail(done.stderr.decode(errors="replace")) or done.text()
                raise self._boot_error(f"guest {self.name}: NIC {index}: cannot set MTU "
                                       f"{mtu}: {said}")

    def _boot_error(self, message: str) -> GuestBootError:
        status = self._proc.poll() if self._proc else None
        return GuestBootError(
            message, argv=self._argv, exit_status=status, console_tail=self.console_tail()
        )

    # -- state ---------------------------------------------------------------------
    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def argv(self) -> list[str]:
        """The QEMU argv of the last launch (kept with every result)."""
        return list(self._argv)

    @property
    def disk_images(self) -> tuple[str, ...]:
        return self._plan.disk_images if self._plan else ()

    @property
    def tap_names(self) -> tuple[str | None, ...]:
        """Per NIC, the host tap device of a tap NIC (None for user-mode NICs)."""
        return self._plan.tap_names if self._plan else ()

    @property
    def nics(self) -> tuple[NicSpec, ...]:
        """The NICs as declared (and wired into a lab by the caller)."""
        return self.spec.nics

    @property
    def vhost(self) -> bool:
        """True when the tap NICs use vhost-net (the in-kernel virtio-net backend)."""
        return bool(self._plan and self._plan.vhost)

    @property
    def console_log(self) -> Path | None:
        """The serial console's log file while the guest's run directory exists (from
        early in :meth:`launch`, before QEMU starts, until :meth:`stop`), else None.
        QEMU may not have created the file yet: readers must allow for that."""
        run_dir = self._run_dir
        return run_dir / "console.log" if run_dir is not None else None

    def console_tail(self, lines: int = 40) -> str:
        """The last lines of the serial console and of QEMU's own output."""
        if self._run_dir is None:
            return ""
        parts = []
        for name in ("console.log", "qemu.log"):
            with contextlib.suppress(OSError):
                text = (self._run_dir / name).read_text(errors="replace")
                if text.strip():
                    parts.append(f"[{name}]\n{tail(text, lines)}")
        return "\n".join(parts)

    def failure_evidence(self) -> str:
        """What the running guest can tell about a failure in it (see
        :func:`hvbench.platforms.evidence.failure_evidence`): its kernel warnings and,
        with a virtio-net NIC, its queues and counters. Empty once QEMU has exited.
        Bounded by the evidence's per-read timeouts; never raises."""
        if not self.is_running() or self._agent is None:
            return ""
        with_nics = any(n.model == "virtio-net" for n in self.spec.nics)
        return failure_evidence(self, with_nics=with_nics)

    def qmp(self, command: str, **arguments: object) -> Any:
        """Run a QMP command. Raises :class:`GuestError` when QEMU is not running."""
        if self._qmp is None:
            raise GuestError(f"guest {self.name} has no QMP connection")
        with interrupt.deferred():  # a command is short; its event loop is not left half-run
            return self._qmp.cmd(command, **arguments)

    def vcpu_threads(self) -> dict[int, int]:
        """vCPU index -> host thread id, from QMP ``query-cpus-fast``."""
        return {c["cpu-index"]: c["thread-id"] for c in self.qmp("query-cpus-fast")}

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "name": self.name, "spec": self.spec.model_dump(mode="json"),
            "label": self.spec.label(), "accel": self.accel, "accel_reason": self.accel_reason,
            "qemu_argv": self.argv, "timings": dict(self.timings), "vhost": self.vhost,
            **({"storage_daemon_argv": [d.argv for d in self._daemons]} if self._daemons
               else {}),
            **({"virtiofsd_argv": [d.argv for d in self._virtiofsds]} if self._virtiofsds
               else {}),
            # Applied once the guest answered: its boot ran unlimited.
            **({"host_limits": {**self._limits.describe(), "applied": "after boot"}}
               if self._limits is not None else {}),
        }

    # -- commands in the guest -------------------------------------------------------
    def _require_agent(self) -> GuestAgent:
        if self._agent is None or not self.is_running():
            raise self._boot_error(f"guest {self.name} is not running")
        return self._agent

    def exec(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Run ``argv`` in the guest via the agent; see :meth:`GuestAgent.run`.

        If QEMU dies meanwhile, raises :class:`GuestError` carrying the console tail.
        """
        agent = self._require_agent()
        try:
            return agent.run(argv, timeout=timeout, stdin=stdin, env=env)
        except GuestError as exc:
            if not self.is_running():
                raise self._boot_error(f"guest {self.name} died: {exc}") from exc
            raise

    def write_file(self, path: str, data: bytes) -> None:
        self._require_agent().write_file(path, data)

    def read_file(self, path: str) -> bytes:
        return self._require_agent().read_file(path)

    def scratch_dir(self) -> str:
        return "/tmp"

    def bench_disk(self) -> str | None:
        """The first benchmark disk's device node (see :meth:`disk_device`); None for a
        guest without benchmark disks."""
        return self.disk_device(0) if self.spec.disks else None

    def host_storage(self) -> str | None:
        """Where the first benchmark disk's blocks land on this host (see
        :class:`~hvbench.platforms.base.HostStorage`); without benchmark disks, the
        host directory of the first shared directory."""
        if self.spec.disks:
            images = self._plan.disk_images if self._plan is not None else ()
            return disk_host_path(self.spec.disks[0], images[0] if images else None)
        dirs = self.shared_dirs()
        return str(dirs[0][1]) if dirs else None

    def disk_device(self, index: int) -> str:
        """The guest's device node for benchmark disk ``index`` (found by its serial).

        Raises :class:`GuestError` if the guest does not show the disk.
        """
        if index in self._devices:
            return self._devices[index]
        if not 0 <= index < len(self.spec.disks):
            raise GuestError(f"guest {self.name} has {len(self.spec.disks)} benchmark "
                             f"disks: there is no disk {index}")
        if self.spec.disks[index].backend == "vhost-user":
            where = f"at PCI address {guest_pci_address(index)}"
            found = devices_at_pci(self, guest_pci_address(index))
        else:
            where = f"with serial {disk_serial(index)}"
            found = devices_with_serial(self, disk_serial(index))
        if not found:
            raise self._boot_error(f"guest {self.name} shows no disk {where}")
        self._devices[index] = found[0]
        return found[0]

    # -- stop ----------------------------------------------------------------------
    def shutdown(self, timeout: float = 30.0) -> float:
        """Power the guest off through its agent and wait until QEMU has exited; returns
        the seconds from the request to the process being gone. The run files are then
        removed as by :meth:`stop`.

        Offsets from the request land in :attr:`timings`: ``shutdown_event_s`` when QMP
        reported the guest's power-off (the ``SHUTDOWN`` event; absent if it never came,
        e.g. the QMP connection broke), ``exited_s`` (QEMU reaped, the return value) and
        ``removed_s`` (run files removed).

        Raises :class:`GuestError` (with the console tail) if the guest is not running
        or QEMU is still there after ``timeout`` seconds (it is then killed by stop()).
        """
        agent = self._require_agent()
        proc = self._proc
        if proc is None:
            raise GuestError(f"guest {self.name} is not running")
        for key in ("shutdown_event_s", "exited_s", "removed_s"):
            self.timings.pop(key, None)
        started = time.monotonic()
        agent.shutdown()
        self._await_shutdown_event(proc, started, started + timeout)
        try:
            proc.wait(timeout=max(0.0, started + timeout - time.monotonic()))
        except subprocess.TimeoutExpired as exc:
            error = self._boot_error(f"guest {self.name} did not power off within "
                                     f"{timeout:g} s")
            self.stop()
            raise error from exc
        elapsed = time.monotonic() - started
        self.timings["exited_s"] = elapsed
        self.stop()
        self.timings["removed_s"] = time.monotonic() - started
        return elapsed

    def _await_shutdown_event(self, proc: subprocess.Popen[bytes], started: float,
                              deadline: float) -> None:
        """Wait until QMP delivers the ``SHUTDOWN`` event, QEMU exits without one, or
        ``deadline`` passes; record ``timings["shutdown_event_s"]`` if it came.

        The time is QEMU's own event timestamp (wall clock, mapped onto the monotonic
        clock), so it does not depend on when this loop read the event. Never raises:
        without the event the caller still waits for QEMU's exit.
        """
        from qemu.qmp import QMPError  # noqa: PLC0415 - deferred

        qmp = self._qmp
        if qmp is None:
            return
        wall_minus_mono = time.time() - time.monotonic()
        while time.monotonic() < deadline:
            running = proc.poll() is None
            try:
                # A float waits that long; False only drains what already arrived.
                with interrupt.deferred():  # one slice at most
                    event = qmp.pull_event(wait=_EVENT_SLICE_S if running else False)
            except (TimeoutError, QMPError, OSError, EOFError):
                event = None
            if event is not None and event.get("event") == "SHUTDOWN":
                self.timings["shutdown_event_s"] = _event_offset(
                    event, wall_minus_mono, started, time.monotonic())
                return
            if event is None and not running:
                return

    def stop(self) -> None:
        """Stop QEMU (QMP quit, then SIGTERM, then SIGKILL) and remove every file.

        Safe to call twice and on a guest that never started; never raises for a guest
        that is already gone.
        """
        try:
            if self._proc is not None and self._proc.poll() is None:
                self._terminate(self._proc)
        finally:
            self._close_channels()
            if self._proc is not None:
                self._registry.discard(self)
            self._proc = None
            # After QEMU: it holds the daemons' sockets until it exits.
            daemons: list[SocketDaemon] = [*self._daemons, *self._virtiofsds]
            for daemon in reversed(daemons):
                daemon.stop()
            self._daemons.clear()
            self._virtiofsds.clear()
            for directory in (self._run_dir, self._sock_dir):
                if directory is not None:
                    shutil.rmtree(directory, ignore_errors=True)
            self._run_dir = self._sock_dir = None
            self._devices.clear()
            # Last: its processes are gone, so its directories are empty.
            if self._limits is not None:
                self._limits.stop()
                self._limits = None

    def _terminate(self, proc: subprocess.Popen[bytes]) -> None:
        steps: list[tuple[signal.Signals | None, float]] = [(signal.SIGTERM, _TERM_WAIT)]
        if self._qmp is not None:
            with contextlib.suppress(Exception):
                self._qmp.settimeout(2.0)
                self._qmp.cmd("quit")
            # Asked (QEMU may close the socket before it answers): give it time to quit.
            # Without a monitor (a boot that failed before QMP answered) nothing asked it,
            # so SIGTERM is the soft step rather than a wait for nothing.
            steps.insert(0, (None, _QUIT_WAIT))
        for sig, wait in steps:
            if sig is not None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(sig)
            try:
                proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue
        proc.kill()
        proc.wait()

    def _close_channels(self) -> None:
        if self._agent is not None:
            self._agent.close()
            self._agent = None
        if self._qmp is not None:
            with contextlib.suppress(Exception):
                self._qmp.close()
            self._qmp = None


def existing_source(disk: DiskSpec, what: str) -> str | None:
    """What a disk opens that hvbench does not create: its host block device (after
    :func:`require_free_device`) or its resolved NBD export; None for an image file.
    Raises :class:`HostError` for a device in use or an NBD source that the run's lab
    did not resolve (a study's nbd:HOST needs its [[lab.host]])."""
    kind = source_kind(disk.source)
    if disk.source is None or kind == "image":
        return None
    if kind == "device":
        require_free_device(disk.source, f"{what}: disk.source")
        return disk.source
    if kind in ("nbd-host", "aoe-host"):
        raise HostError(f"{what}: disk.source {disk.source}: no lab serves this export "
                        "(a study declares it with a [[lab.host]] of that name)")
    return disk.source


#: Sets the MTU ($2) of the guest interface with MAC $1 (values as arguments, not text).
_SET_MTU_BY_MAC = ('for d in /sys/class/net/*; do '
                   'if [ "$(cat "$d/address")" = "$1" ]; then '
                   'exec ip link set dev "${d##*/}" mtu "$2"; fi; done; '
                   'echo "no interface with MAC $1" >&2; exit 1')


def bridge_mtu(bridge: str) -> int | None:
    """The MTU of host interface ``bridge`` (sysfs); None when it is not there."""
    try:
        return int((Path("/sys/class/net") / bridge / "mtu").read_text())
    except (OSError, ValueError):
        return None


def disk_host_path(disk: DiskSpec, opened: str | None) -> str | None:
    """The host path of a disk's storage: the block device its ``source`` names, else
    ``opened`` (the image file a platform created for it; None before it did); None for
    a network export (``nbd://``, ``aoe://``: no host path holds its blocks)."""
    kind = source_kind(disk.source)
    if kind == "device":
        return disk.source
    return opened if kind == "image" else None


def devices_with_serial(guest: Platform, serial: str) -> list[str]:
    """The guest's device nodes whose disk serial ends with ``serial`` (a 30 s guest
    command; raises what :meth:`Platform.exec` raises)."""
    # virtio-blk shows the serial in /sys/block/X/serial; NVMe in the controller's
    # device/serial (padded with blanks to 20 bytes); SCSI and ATA disks in VPD page 0x80
    # after a binary header (ATA pads it with spaces): strip all that, match the suffix.
    script = (
        "for b in /sys/block/*; do "
        "s=$(cat $b/serial $b/device/serial $b/device/vpd_pg80 2>/dev/null | tr -dc "
        "'a-zA-Z0-9-'); case \"$s\" in *" + serial + ") echo /dev/${b##*/};; esac; done"
    )
    return guest.exec(["sh", "-c", script], timeout=30).text().split()


def devices_at_pci(guest: Platform, address: str) -> list[str]:
    """The guest's block devices whose device sits under PCI function ``address``
    (``0000:00:18.0``; a 30 s guest command; raises what :meth:`Platform.exec` raises)."""
    script = ("for b in /sys/block/*; do case $(readlink -f $b/device) in */" + address
              + "/*) echo /dev/${b##*/};; esac; done")
    return guest.exec(["sh", "-c", script], timeout=30).text().split()


def _event_offset(event: Mapping[str, Any], wall_minus_mono: float, started: float,
                  received: float) -> float:
    """Seconds from ``started`` (monotonic) to a QMP event, from the event's timestamp
    (``{"seconds", "microseconds"}``, wall clock); the receipt time if it has none.
    Clamped to [0, receipt]: a wall-clock step cannot put the event outside them."""
    stamp = event.get("timestamp")
    at = received
    if isinstance(stamp, Mapping):
        with contextlib.suppress(KeyError, TypeError, ValueError):
            at = float(stamp["seconds"]) + float(stamp["microseconds"]) / 1e6 - wall_minus_mono
    return min(max(at, started), received) - started


def _load_qmp() -> None:
    """Import qemu.qmp (deferred: with asyncio and ssl it costs every command that boots
    no guest about 40 ms) with stop requests held: a signal that interrupted the import
    would leave asyncio half-initialised, and the next import of it fails."""
    with interrupt.deferred():
        import qemu.qmp.legacy  # noqa: F401, PLC0415 - deferred


def _connect_qmp(path: Path, deadline: float, alive: Any) -> QEMUMonitorProtocol:
    """Connect to QEMU's QMP socket once QEMU listens on it.

    The socket file appears when QEMU binds it, a moment before it listens: a connect in
    that window is refused, so a refusal is retried (every 5 ms) until ``deadline``.
    Raises :class:`TimeoutError` at the deadline (chained from the last refusal when the
    socket was there but refused), :class:`OSError` when QEMU exits first, and the
    :class:`QMPError` of a connect that fails for another reason.
    """
    from qemu.qmp import QMPError  # noqa: PLC0415 - deferred
    from qemu.qmp.legacy import QEMUMonitorProtocol  # noqa: PLC0415 - deferred

    refusal: QMPError | None = None
    while True:
        if path.exists():
            qmp = QEMUMonitorProtocol(str(path))
            qmp.settimeout(max(deadline - time.monotonic(), 1.0))
            try:
                # A signal mid-handshake would leave qemu.qmp's task half-run, and its
                # traceback printed at exit: the stop waits for the handshake (QEMU
                # greets at once once it listens).
                with interrupt.deferred():
                    qmp.connect()
            except QMPError as exc:
                if not _refused(exc):
                    raise
                refusal = exc
            else:
                return qmp
        if not alive():
            raise OSError("QEMU exited before its QMP socket accepted a connection")
        if time.monotonic() >= deadline:
            # One error at the deadline whichever step it fell in: a loaded host can
            # pass the deadline during a refused connect as well as between two.
            what = "refused every connection" if refusal else "did not appear"
            raise TimeoutError(f"QMP socket {path} {what}") from refusal
        time.sleep(0.005)


def _refused(exc: BaseException) -> bool:
    """Whether a QMP connect failed because nobody listened yet (the cause chain holds a
    ConnectionRefusedError)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return True
        seen = getattr(seen, "exc", None) or seen.__cause__ or seen.__context__
    return False
