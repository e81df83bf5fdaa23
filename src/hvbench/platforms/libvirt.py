"""LibvirtPlatform: a guest run by libvirt, the way clouds run them.

Two modes, one class:

- **defined**: hvbench renders the platform's :class:`VmSpec` as domain XML
  (:mod:`hvbench.model.libvirt_xml`), stages the bundled image where libvirt's QEMU user
  can read it (a directory of hvbench's own under libvirt's images directory), defines,
  starts and undefines the domain (so it runs *transient*: it vanishes when destroyed;
  libvirt's define and start are timed apart from the guest's boot) and talks to the
  guest agent through libvirt (``qemuAgentCommand``). ``stop()`` asks the guest to power off,
  destroys the domain after a timeout, and removes the staged files.
- **existing**: ``domain = "NAME"`` measures a running domain of the user's as it is.
  hvbench reads its XML into the run's record, checks that its guest agent answers and
  that fio and iperf3 are there, and runs workloads on the disk the user named (its
  target, such as ``vdb``) or in a directory inside the guest. It never starts, stops,
  defines, undefines or changes that domain.

hvbench's domains are named ``hvbench-<pid>-...`` and carry an owner element in
hvbench's XML namespace; :func:`cleanup_orphaned_domains` destroys only those whose
owner process is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from hvbench.errors import AgentError, GuestBootError, GuestError, HostError, SpecError
from hvbench.host import trace
from hvbench.host.commands import run
from hvbench.host.paths import make_owned_dir, remove_orphaned_dirs
from hvbench.host.started import StartStop
from hvbench.image.builder import RECOMMENDED_CMDLINE, GuestImage, find_image
from hvbench.model.libvirt_xml import (
    DOMAIN_PREFIX,
    DomainPlan,
    build_domain_xml,
    check_libvirt_spec,
    io_settings,
    owner_pid,
)
from hvbench.model.qemu_argv import disk_serial
from hvbench.model.spec import PREALLOCATION, NicSpec, VmSpec
from hvbench.platforms.agent import GuestAgent
from hvbench.platforms.base import ExecResult
from hvbench.platforms.guest_disk import PROBE_SCRIPT, disk_usage, parse_probe
from hvbench.platforms.qemu import (
    AccelChoice,
    devices_with_serial,
    disk_host_path,
    existing_source,
    fixed_accel,
)
from hvbench.platforms.registry import REGISTRY, ProcessRegistry

# libvirt's bindings are imported where a function talks to libvirt: every command
# imports this module through the libvirt platform kind, few connect to libvirtd.
if TYPE_CHECKING:
    import libvirt

DEFAULT_URI = "qemu:///system"
#: Where libvirt's QEMU user may read images (Debian's libvirt images directory).
IMAGES_DIR = Path("/var/lib/libvirt/images")
#: Where the local libvirtd keeps each running QEMU's pid file.
_PID_DIR = Path("/run/libvirt/qemu")
QEMU_USER = "libvirt-qemu"
DEFAULT_BOOT_TIMEOUT = 90.0
_SHUTDOWN_WAIT = 10.0
_AGENT_TIMEOUT = 10
#: Tools an existing domain needs for hvbench's workloads.
GUEST_TOOLS = ("fio", "iperf3")
_TAP_PREFIX = "hvb-l"
_VCPU_COMM = re.compile(r"^CPU (\d+)/(TCG|KVM)$")
#: Host-side metrics a remote URI cannot give, and why.
REMOTE_MISSING = {
    "qemu_threads": "QEMU runs on the remote host: its threads cannot be sampled here",
    "host_disk": "the remote host's disks and CPUs cannot be sampled here: no host disk "
                 "or host CPU metrics are recorded",
    "host_nic": "the remote host's NICs (taps) cannot be sampled here",
}


def _quiet(_ctx: object, _err: object) -> None:
    """libvirt prints every error to stderr by default; hvbench raises them instead."""


def is_local(uri: str) -> bool:
    """Whether ``uri`` names the libvirtd on this host (no transport, no host name)."""
    return re.match(r"^[a-z0-9]+:///", uri) is not None or "+unix://" in uri


def connect(uri: str) -> libvirt.virConnect:
    """A connection to libvirt at ``uri``. Raises :class:`HostError` with libvirt's own
    words and the fix when libvirtd does not answer (libvirt's own connect timeout)."""
    import libvirt  # noqa: PLC0415 - deferred

    # Every libvirt object hvbench uses comes from this connection: the first one
    # silences libvirt's own error printing (setting it again changes nothing).
    libvirt.registerErrorHandler(_quiet, None)
    try:
        return libvirt.open(uri)
    except libvirt.libvirtError as exc:
        raise HostError(
            f"libvirt at {uri} is not reachable: {exc}. Start libvirtd (`systemctl start "
            "libvirtd`, or `virtlogd -d && libvirtd -d` without a service manager) or "
            "give the platform another uri") from exc


class LibvirtAgent(GuestAgent):
    """The guest agent of a libvirt domain, reached through ``qemuAgentCommand``: the
    same commands as :class:`GuestAgent` (exec, files), over libvirt instead of a
    socket of hvbench's own."""

    def __init__(self, domain: libvirt.virDomain) -> None:
        super().__init__(Path(f"libvirt:{domain.name()}"))
        self._domain = domain

    def connect(self, deadline: float, alive: Callable[[], bool]) -> None:
        """Ping the agent until it answers or ``deadline`` (``time.monotonic``) passes.
        Raises :class:`AgentError` at the deadline or when the domain is gone."""
        last = ""
        while True:
            if not alive():
                raise AgentError("the domain stopped before its guest agent answered")
            try:
                self.execute("guest-ping", timeout=2)
                return
            except AgentError as exc:
                last = str(exc)
            if time.monotonic() >= deadline:
                raise AgentError(f"the guest agent did not answer in time ({last})")
            time.sleep(0.1)

    def execute(self, command: str, arguments: Mapping[str, Any] | None = None,
                timeout: float = 10.0) -> Any:
        """One agent command through libvirt; its ``return`` value. Raises
        :class:`AgentError` with libvirt's text when libvirt or the agent refuse it or
        no reply comes within ``timeout`` seconds."""
        import libvirt  # noqa: PLC0415 - deferred
        import libvirt_qemu  # noqa: PLC0415 - deferred

        message: dict[str, Any] = {"execute": command}
        if arguments:
            message["arguments"] = dict(arguments)
        try:
            reply = libvirt_qemu.qemuAgentCommand(
                self._domain, json.dumps(message), max(1, int(timeout)), 0)
        except libvirt.libvirtError as exc:
            raise AgentError(f"guest agent {command} failed: {exc}") from exc
        if reply is None:
            raise AgentError(f"guest agent {command}: no reply")
        decoded = json.loads(reply)
        if "error" in decoded:
            error = decoded["error"]
            raise AgentError(f"guest agent {command} failed: {error.get('desc', error)}")
        return decoded.get("return")

    def close(self) -> None:
        """Nothing to close: libvirt owns the channel."""

    def shutdown(self) -> None:
        """Ask the guest to power off (no reply comes on success)."""
        with contextlib.suppress(AgentError):
            self.execute("guest-shutdown", {"mode": "powerdown"}, timeout=5)



class LibvirtTarget(Protocol):
    """What a libvirt platform reads of its spec (the libvirt kind's, in
    :mod:`hvbench.kinds.libvirt`): where libvirt runs, and either the VM hvbench
    defines or the user's existing domain with the disk or directory to measure."""

    @property
    def uri(self) -> str: ...
    @property
    def vm(self) -> VmSpec | None: ...
    @property
    def domain(self) -> str | None: ...
    @property
    def disk(self) -> str | None: ...
    @property
    def path(self) -> str | None: ...
    @property
    def destroy_contents(self) -> bool: ...
    @property
    def existing(self) -> bool: ...

    def model_dump(self, *, mode: str = "python") -> dict[str, Any]:
        """The spec as the store dumps it (``mode = "json"``)."""
        ...


class LibvirtPlatform(StartStop):
    """A libvirt guest: a transient domain hvbench defines, or the user's own.

    ``boot_timeout`` bounds ``start()`` for a defined domain (after libvirt defined it:
    its start to the agent's first answer, :class:`GuestBootError` after it). Raises
    :class:`HostError` when libvirtd is unreachable and :class:`SpecError` for an
    existing domain that is not there, not running, or lacks the named disk, agent or
    tools, or whose disk is in use (see :meth:`_check_contents`).
    """

    kind = "libvirt"
    is_guest = True

    def __init__(self, spec: LibvirtTarget, *, name: str,
                 accel_choice: AccelChoice | None = None, image: GuestImage | None = None,
                 boot_timeout: float = DEFAULT_BOOT_TIMEOUT,
                 registry: ProcessRegistry = REGISTRY) -> None:
        self.spec = spec
        self.name = name if spec.domain is None else spec.domain
        self._accel_choice = accel_choice
        self._image = image
        self.boot_timeout = boot_timeout
        self._registry = registry
        self._conn: libvirt.virConnect | None = None
        self._domain: libvirt.virDomain | None = None
        self._agent: LibvirtAgent | None = None
        self._stage: Path | None = None
        self._xml = ""
        self._pid: int | None = None
        self._taps: tuple[str | None, ...] = ()
        self._device: str | None = None
        #: What each benchmark disk opens on this host (image files, devices, exports).
        self._disk_images: tuple[str, ...] = ()
        self.accel: str | None = None
        self.accel_reason = ""
        self.timings: dict[str, float] = {}

    # -- start -----------------------------------------------------------------------
    def start(self) -> None:
        """Start (defined) or attach to (existing) the domain; see the class."""
        if self._domain is not None:
            raise GuestError(f"guest {self.name} is already started")
        started = time.monotonic()
        try:
            self._conn = connect(self.spec.uri)
            if self.spec.vm is None:
                self._attach_existing()
            else:
                self._create(self.spec.vm, started)
        except BaseException:
            # Nothing is left behind: a created domain is destroyed, staged files go.
            self.stop()
            raise
        self.timings["boot_s"] = time.monotonic() - started
        # An existing domain is attached, not booted: its boot_s is the attach.
        trace.record("boot", self.timings["boot_s"], ["libvirt"], platform=self.name,
                     attached=int(self.spec.vm is None))

    def _create(self, vm: VmSpec, started: float) -> None:
        check_libvirt_spec(vm)
        image = self._image or find_image()
        if image is None:
            raise HostError("no guest image is built yet: run `hvbench image build`")
        choice = self._accel_choice or fixed_accel(vm)
        if choice is None:
            raise HostError(f"guest {self.name}: accel=auto was not decided before the "
                            "guest was built (hvbench.platforms.accel.choose_accel)")
        self.accel, self.accel_reason = choice.accel, choice.reason
        plan = self._plan(vm, choice, image)
        self._disk_images = plan.disk_images
        self._xml = build_domain_xml(plan)
        self.timings["prepared_s"] = time.monotonic() - started
        self._define_and_start()
        # The XML libvirt completed (addresses, defaults) is what ran: keep that.
        self._xml = self._require_domain().XMLDesc(0)
        self._pid = self._read_pid()
        self._agent = LibvirtAgent(self._require_domain())
        booting = time.monotonic()
        try:
            self._agent.connect(started + self.boot_timeout + self.timings["define_s"],
                                self.is_running)
        except AgentError as exc:
            raise GuestBootError(f"guest {self.name} did not boot: {exc}",
                                 argv=self.argv or [], exit_status=None,
                                 console_tail=self.console_tail() or "") from exc
        self.timings["guest_boot_s"] = time.monotonic() - booting
        self.timings["agent_s"] = time.monotonic() - started
        self._attach_taps()

    def _define_and_start(self) -> None:
        """``defineXML``, then ``create``, then ``undefine``: the running domain is
        transient (it vanishes when destroyed) as a ``createXML`` one would be, while
        libvirt's time to define it (where a capability re-probe lands, see
        :func:`libvirt_start_facts`) and to start it are timed apart
        (``timings["define_s"]``, ``["start_s"]``). Raises :class:`GuestBootError`
        with libvirt's words."""
        import libvirt  # noqa: PLC0415 - deferred

        conn = self._require_conn()
        try:
            t0 = time.monotonic()
            self._domain = conn.defineXML(self._xml)
            self._registry.add(self)
            self.timings["define_s"] = time.monotonic() - t0
            t0 = time.monotonic()
            self._domain.create()
            self.timings["start_s"] = time.monotonic() - t0
            self._domain.undefine()
        except libvirt.libvirtError as exc:
            raise GuestBootError(f"libvirt refused domain {self.name}: {exc}",
                                 argv=[], exit_status=None,
                                 console_tail=self.console_tail() or "") from exc

    def _require_domain(self) -> libvirt.virDomain:
        if self._domain is None:
            raise GuestError(f"guest {self.name}: no libvirt domain")
        return self._domain

    def boot_phases(self) -> dict[str, float]:
        """The phases of the last start of a domain hvbench defined, as stored metrics:
        libvirt's own define and start times, then firmware and kernel to the agent's
        first answer; empty for an existing domain (attached, not booted)."""
        names = {"define_s": "libvirt_define_s", "start_s": "libvirt_start_s",
                 "guest_boot_s": "guest_boot_s"}
        return {metric: self.timings[key] for key, metric in names.items()
                if key in self.timings}

    def _plan(self, vm: VmSpec, choice: AccelChoice, image: GuestImage) -> DomainPlan:
        stage = make_owned_dir(IMAGES_DIR, f"{self.name}-")
        self._stage = stage
        # mkdtemp makes it private; libvirt's QEMU user must traverse it.
        stage.chmod(0o755)
        kernel, initrd, root = (
            _stage_file(p, stage) for p in (image.kernel, image.initrd, image.rootfs))
        disks = tuple(self._create_disk(vm, i, stage) for i in range(len(vm.disks)))
        tag = os.urandom(2).hex()
        self._taps = tuple(f"{_TAP_PREFIX}{tag}{i}" if n.backend == "tap" else None
                           for i, n in enumerate(vm.nics))
        macs = tuple(n.mac or f"52:54:01:{tag[:2]}:{tag[2:]}:{i:02x}"
                     for i, n in enumerate(vm.nics))
        return DomainPlan(
            spec=vm, accel=choice.accel, name=self.name, owner_pid=os.getpid(),
            kernel=kernel, initrd=initrd, kernel_cmdline=RECOMMENDED_CMDLINE,
            root_disk=root, console_log=str(stage / "console.log"), disk_images=disks,
            tap_names=self._taps, macs=macs)

    @staticmethod
    def _create_disk(vm: VmSpec, index: int, stage: Path) -> str:
        disk = vm.disks[index]
        # A host block device or an NBD export: libvirt opens it as it is (a <disk
        # type='block'> or type='network'); only image files are created here.
        existing = existing_source(disk, f"libvirt guest disk {index}")
        if existing is not None:
            return existing
        path = stage / f"disk{index}.{disk.format}"
        prealloc = PREALLOCATION[disk.allocation]
        run(["qemu-img", "create", "-q", "-f", disk.format, "-o", f"preallocation={prealloc}",
             str(path), str(disk.size)], timeout=600, what=f"creating benchmark disk {index}")
        _give_to_qemu(path)
        return str(path)

    def _attach_existing(self) -> None:
        import libvirt  # noqa: PLC0415 - deferred

        conn = self._require_conn()
        name = self.spec.domain or ""
        try:
            domain = conn.lookupByName(name)
        except libvirt.libvirtError as exc:
            raise SpecError(f"domain {name!r} is not defined at {self.spec.uri} (its "
                            f"domains: {_domain_names(conn)}): {exc}") from exc
        if not domain.isActive():
            raise SpecError(f"domain {name!r} is not running: hvbench never starts or "
                            f"changes your domains; start it (virsh start {name}) first")
        self._domain = domain
        self._xml = domain.XMLDesc(0)
        self._pid = self._read_pid()
        self._check_disk()
        agent = LibvirtAgent(domain)
        try:
            agent.connect(time.monotonic() + 10, self.is_running)
        except AgentError as exc:
            raise SpecError(
                f"domain {name!r}: its guest agent does not answer ({exc}): install and "
                "start qemu-guest-agent in the guest and give the domain a channel "
                "<channel type='unix'><target type='virtio' "
                "name='org.qemu.guest_agent.0'/></channel>") from exc
        self._agent = agent
        self._check_tools()
        self._check_contents()

    def _check_disk(self) -> None:
        target = self.spec.disk
        if target is None:
            return
        disks = [d for d in io_settings(self._xml)["disks"] if d["device"] == "disk"]
        if target not in {d["target"] for d in disks}:
            raise SpecError(f"domain {self.name!r} has no disk {target} (its disks: "
                            f"{', '.join(d['target'] for d in disks) or 'none'})")

    def _check_contents(self) -> None:
        """Refuse the named disk when it is read-only, or holds what the guest uses (a
        mounted file system, swap, its root, a stacked device) or what is on it cannot
        be checked, unless the study set ``destroy_contents``. Raises
        :class:`SpecError` in one line naming the disk and what is on it."""
        target = self.spec.disk
        if target is None:
            return
        what = f"domain {self.name!r} disk {target}"
        if self._disk_facts(target)["readonly"] == "yes":
            raise SpecError(f"{what} is read-only in the domain's XML: hvbench's disk "
                            "workloads write; name a writable disk")
        allowed = "name another disk, or set destroy_contents = true on the platform if " \
                  "its contents may be destroyed"
        try:
            used = self.disk_usage(target)
        except GuestError as exc:
            if self.spec.destroy_contents:
                return
            reason = (str(exc).strip().splitlines() or ["no reason given"])[0]
            raise SpecError(f"{what}: what is on it could not be checked through the "
                            f"guest agent ({reason}); refused: {allowed}") from exc
        if used and not self.spec.destroy_contents:
            raise SpecError(f"{what} holds {'; '.join(used)}: hvbench's disk workloads "
                            f"would destroy it; {allowed}")

    def disk_usage(self, target: str) -> list[str]:
        """What the guest uses on its disk ``target`` (mounted file systems, swap, its
        root, stacked devices), in words, asked through the agent
        (:mod:`hvbench.platforms.guest_disk`, up to 30 s); empty when nothing. Raises
        :class:`GuestError` when the guest cannot tell (no such device, a command or
        file read the agent refuses)."""
        device = self._existing_device(target)
        self._device = device
        probe = self.exec(["sh", "-c", PROBE_SCRIPT, "probe", device], timeout=30)
        if not probe.ok:
            raise GuestError(f"the disk probe exited with {probe.exit_code}: "
                             f"{probe.stderr.decode(errors='replace').strip()}")
        devices = parse_probe(probe.text())
        if not devices.parts:
            raise GuestError(f"{device} has no entry under /sys/class/block")
        tables = [self.read_file(p).decode(errors="replace")
                  for p in ("/proc/1/mountinfo", "/proc/self/mountinfo")]
        return disk_usage(devices, tables, self.read_file("/proc/swaps").decode(
            errors="replace"))

    def _disk_facts(self, target: str) -> dict[str, str]:
        return next(d for d in io_settings(self._xml)["disks"] if d["target"] == target)

    def _check_tools(self) -> None:
        script = "; ".join(f"command -v {t} >/dev/null || echo {t}" for t in GUEST_TOOLS)
        missing = self.exec(["sh", "-c", script], timeout=30).text().split()
        if missing:
            raise SpecError(f"domain {self.name!r} lacks {', '.join(missing)}: install "
                            f"{' and '.join(missing)} in the guest (hvbench runs its "
                            "workloads there)")

    def _attach_taps(self) -> None:
        # libvirt enslaves a type='bridge' NIC's tap itself; only bring it up if needed.
        for tap in self._taps:
            if tap is not None and is_local(self.spec.uri):
                run(["ip", "link", "set", tap, "up"], what="bringing the tap up")

    def _read_pid(self) -> int | None:
        """QEMU's pid from the local libvirtd's pid file; None for a remote URI."""
        if not is_local(self.spec.uri):
            return None
        try:
            return int((_PID_DIR / f"{self.name}.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def _require_conn(self) -> libvirt.virConnect:
        if self._conn is None:
            raise GuestError(f"guest {self.name}: not connected to libvirt")
        return self._conn

    # -- state -----------------------------------------------------------------------
    def is_running(self) -> bool:
        if self._domain is None:
            return False
        import libvirt  # noqa: PLC0415 - deferred

        try:
            return bool(self._domain.isActive())
        except libvirt.libvirtError:
            return False

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def argv(self) -> list[str] | None:
        """QEMU's command line as libvirt started it (local URIs); None remotely."""
        if self._pid is None:
            return None
        with contextlib.suppress(OSError):
            raw = Path(f"/proc/{self._pid}/cmdline").read_bytes()
            return [part.decode(errors="replace") for part in raw.split(b"\0") if part]
        return None

    @property
    def domain_xml(self) -> str:
        """The domain's XML as libvirt reports it (after start)."""
        return self._xml

    @property
    def tap_names(self) -> tuple[str | None, ...]:
        return self._taps if is_local(self.spec.uri) else tuple(None for _ in self._taps)

    @property
    def nics(self) -> tuple[NicSpec, ...]:
        return self.spec.vm.nics if self.spec.vm is not None else ()

    @property
    def vhost(self) -> bool | None:
        return None

    def vcpu_threads(self) -> dict[int, int]:
        """vCPU index -> host thread id, from QEMU's thread names (``CPU 0/TCG``); empty
        for a remote URI."""
        if self._pid is None:
            return {}
        threads: dict[int, int] = {}
        for task in Path(f"/proc/{self._pid}/task").glob("*"):
            with contextlib.suppress(OSError, ValueError):
                match = _VCPU_COMM.match((task / "comm").read_text().strip())
                if match:
                    threads[int(match.group(1))] = int(task.name)
        return threads

    def console_tail(self, lines: int = 40) -> str | None:
        if self._stage is None:
            return None
        with contextlib.suppress(OSError):
            text = (self._stage / "console.log").read_text(errors="replace")
            return "\n".join(text.splitlines()[-lines:])
        return None

    @property
    def on_this_host(self) -> bool:
        """False behind a remote URI: this machine's samplers do not see its QEMU."""
        return is_local(self.spec.uri)

    def missing_metrics(self) -> dict[str, str]:
        """Host-side metrics this platform cannot give, and why (a remote URI's)."""
        return {} if is_local(self.spec.uri) else dict(REMOTE_MISSING)

    def describe(self) -> dict[str, Any]:
        vm = self.spec.vm
        return {
            "kind": self.kind, "name": self.name, "uri": self.spec.uri,
            "existing": self.spec.existing, "spec": self.spec.model_dump(mode="json"),
            "label": vm.label() if vm is not None else f"domain {self.spec.domain}",
            "accel": self.accel, "accel_reason": self.accel_reason,
            "qemu_argv": self.argv, "timings": dict(self.timings),
            "boot_phases": self.boot_phases(), "domain_xml": self._xml,
            "io": io_settings(self._xml) if self._xml else {},
            "missing_metrics": self.missing_metrics(),
        }

    # -- commands in the guest ---------------------------------------------------------
    def _require_agent(self) -> LibvirtAgent:
        if self._agent is None or not self.is_running():
            raise GuestError(f"guest {self.name} is not running")
        return self._agent

    def exec(self, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None,
             env: Mapping[str, str] | None = None) -> ExecResult:
        """Run ``argv`` in the guest through libvirt's agent channel; raises as
        :meth:`GuestAgent.run` does (``GuestTimeoutError`` after ``timeout`` s)."""
        return self._require_agent().run(argv, timeout=timeout, stdin=stdin, env=env)

    def write_file(self, path: str, data: bytes) -> None:
        self._require_agent().write_file(path, data)

    def read_file(self, path: str) -> bytes:
        return self._require_agent().read_file(path)

    def scratch_dir(self) -> str:
        return self.spec.path or "/tmp"

    def host_storage(self) -> str | None:
        """Where hvbench's first benchmark disk lands on this host (see
        :class:`~hvbench.platforms.base.HostStorage`); None for an existing domain,
        whose storage hvbench did not choose."""
        vm = self.spec.vm
        if vm is None or not vm.disks:
            return None
        return disk_host_path(vm.disks[0],
                              self._disk_images[0] if self._disk_images else None)

    def bench_disk(self) -> str | None:
        """The benchmark disk's device node: hvbench's first disk (by its serial), the
        existing domain's named disk, or None for an existing domain's ``path``.
        Raises :class:`GuestError` when the guest does not show it."""
        if self._device is not None:
            return self._device
        if self.spec.vm is not None:
            found = devices_with_serial(self, disk_serial(0))
            if not found:
                raise GuestError(f"guest {self.name} shows no disk {disk_serial(0)}")
            self._device = found[0]
        elif self.spec.disk is not None:
            self._device = self._existing_device(self.spec.disk)
        return self._device

    def _existing_device(self, target: str) -> str:
        disk = self._disk_facts(target)
        # A serial finds the disk whatever name the guest gave it; without one, the
        # guest's name usually follows the target's (vdb is the second virtio disk).
        found = devices_with_serial(self, disk["serial"]) if disk["serial"] else []
        device = found[0] if found else f"/dev/{target}"
        if not self.exec(["test", "-b", device], timeout=10).ok:
            raise GuestError(f"domain {self.name}: disk {target} is not {device} in the "
                             "guest; give the disk a <serial> so hvbench can find it")
        return device

    # -- stop ------------------------------------------------------------------------
    def stop(self) -> None:
        """A defined domain: agent power-off, up to 10 s, then ``destroy`` (the transient
        domain vanishes), and the staged files removed. An existing domain is only let
        go. Safe twice; never raises for a domain already gone."""
        import libvirt  # noqa: PLC0415 - deferred

        try:
            if self._domain is not None and self.spec.vm is not None:
                self._power_off(self._domain)
        finally:
            if self._domain is not None:
                self._registry.discard(self)
            self._domain = None
            self._agent = None
            if self._stage is not None:
                shutil.rmtree(self._stage, ignore_errors=True)
                self._stage = None
            if self._conn is not None:
                with contextlib.suppress(libvirt.libvirtError):
                    self._conn.close()
                self._conn = None

    def _power_off(self, domain: libvirt.virDomain) -> None:
        import libvirt  # noqa: PLC0415 - deferred

        if self._agent is not None and self.is_running():
            self._agent.shutdown()
            deadline = time.monotonic() + _SHUTDOWN_WAIT
            while self.is_running() and time.monotonic() < deadline:
                time.sleep(0.05)
        if self.is_running():
            with contextlib.suppress(libvirt.libvirtError):
                domain.destroy()
        # Defined but not (or not yet) made transient: a failed start leaves no definition.
        with contextlib.suppress(libvirt.libvirtError):
            if domain.isPersistent():
                domain.undefine()


def check_existing_domain(spec: LibvirtTarget, *, name: str) -> None:
    """Attach to the existing domain ``spec`` names and let it go again: it is defined
    and running, has the named disk, its agent answers, fio and iperf3 are there, and
    the disk is one hvbench may write (:meth:`LibvirtPlatform.start`). Nothing in the
    domain is changed; agent commands time out after 10-30 s each. Raises
    :class:`SpecError` (one line naming the domain or disk and what exists or is on it)
    and :class:`HostError` when libvirt does not answer."""
    platform = LibvirtPlatform(spec, name=name)
    try:
        platform.start()
    finally:
        platform.stop()


def _stage_file(source: Path | None, stage: Path) -> str:
    """``source`` hard-linked (or copied, across filesystems) into ``stage``, readable
    by libvirt's QEMU user. Raises :class:`HostError` when the image lacks the file."""
    if source is None:
        raise HostError("the guest image has no root filesystem; rebuild it")
    target = stage / source.name
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
    target.chmod(0o644)
    return str(target)


def _give_to_qemu(path: Path) -> None:
    """Let libvirt's QEMU user write ``path`` (domains run without relabelling)."""
    with contextlib.suppress(KeyError, PermissionError):
        user = pwd.getpwnam(QEMU_USER)
        os.chown(path, user.pw_uid, user.pw_gid)


def _domain_names(conn: libvirt.virConnect) -> str:
    """The names of the domains at ``conn``, for an error message."""
    import libvirt  # noqa: PLC0415 - deferred

    try:
        return ", ".join(sorted(d.name() for d in conn.listAllDomains(0))) or "none"
    except libvirt.libvirtError:
        return "unknown"


def _pid_alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def cleanup_orphaned_domains(uri: str = DEFAULT_URI, *, dry_run: bool = False) -> list[str]:
    """Destroy the domains hvbench created (name prefix *and* owner element) whose owner
    process is gone, and remove such owners' staged directories. Any other domain is
    never touched. Returns what was removed (``dry_run``: what would be, nothing
    changed); empty when libvirtd does not answer."""
    removed: list[str] = []
    with contextlib.suppress(HostError):
        conn = connect(uri)
        try:
            removed += _destroy_orphans(conn, dry_run=dry_run)
        finally:
            conn.close()
    removed += [str(p) for p in remove_orphaned_dirs(IMAGES_DIR, dry_run=dry_run)]
    return removed


def _destroy_orphans(conn: libvirt.virConnect, *, dry_run: bool) -> list[str]:
    import libvirt  # noqa: PLC0415 - deferred

    removed = []
    for domain in conn.listAllDomains(0):
        with contextlib.suppress(libvirt.libvirtError):
            if not domain.name().startswith(DOMAIN_PREFIX):
                continue
            pid = owner_pid(domain.XMLDesc(0))
            if pid is None or _pid_alive(pid):
                continue
            persistent = domain.isPersistent()
            if persistent and not domain.name().startswith(f"{DOMAIN_PREFIX}{pid}-"):
                # hvbench's domains are persistent only between define and start, and
                # then named after their owner: any other persistent one is not its.
                continue
            if domain.isActive() and not dry_run:
                domain.destroy()
            if persistent and not dry_run:
                domain.undefine()
            removed.append(f"libvirt domain {domain.name()}")
    return removed


def libvirt_facts(uri: str = DEFAULT_URI) -> dict[str, Any]:
    """For ``hvbench doctor``: whether libvirt answers at ``uri`` (and the usual local
    URIs), its version, and the domains there with their state. Never raises."""
    found: dict[str, Any] = {"uris": {}}
    # Not qemu:///session: connecting to it would autostart a session daemon.
    for candidate in dict.fromkeys((uri, DEFAULT_URI)):
        found["uris"][candidate] = _uri_facts(candidate)
    return found


def _uri_facts(uri: str) -> dict[str, Any]:
    import libvirt  # noqa: PLC0415 - deferred

    try:
        conn = connect(uri)
    except HostError as exc:
        return {"reachable": False, "error": str(exc).split(". Start")[0]}
    try:
        domains = {d.name(): ("running" if d.isActive() else "shut off")
                   for d in conn.listAllDomains(0)}
        return {"reachable": True, "version": conn.getLibVersion(), "domains": domains}
    except libvirt.libvirtError as exc:
        return {"reachable": True, "error": str(exc)}
    finally:
        conn.close()
