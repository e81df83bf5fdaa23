"""Pure translation of a :class:`VmSpec` plus launch paths into a QEMU argv.

No process is started here, so every bus, cache mode and NIC mapping is unit-testable.
Disks carry the serial ``hvb-d<N>`` so the guest can find them whatever bus they sit on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from hvbench.model.spec import DiskSpec, NicSpec, VmSpec, nbd_uri_parts, source_kind
from hvbench.model.storage_daemon import vhost_user_queues, vhost_user_slot

AGENT_PORT_NAME = "org.qemu.guest_agent.0"
ResolvedAccel = Literal["kvm", "tcg"]

NIC_DEVICES = {"virtio-net": "virtio-net-pci", "e1000": "e1000", "rtl8139": "rtl8139"}
#: The guest driver each NIC model binds to (as /sys/class/net/*/device/driver names it).
NIC_DRIVERS = {"virtio-net": "virtio_net", "e1000": "e1000", "rtl8139": ("8139cp", "8139too")}
#: The CPU model for ``cpu = "auto"``. Under TCG, qemu64 rather than max: every feature
#: max adds is emulated slowly anyway, and the guest kernel spends ~0.3 s of boot patching
#: alternative instructions for them.
DEFAULT_CPU = {"kvm": "host", "tcg": "qemu64"}
ROOT_SERIAL = "hvb-root"
#: Modules the guest loads for each bus and NIC model (``hvbench.drivers=``), so its
#: init binds only the devices the spec declares instead of probing every controller.
BUS_MODULES = {
    "virtio-blk": ("virtio_blk",),
    "virtio-scsi": ("virtio_scsi", "sd_mod"),
    "nvme": ("nvme",),
    "ide": ("ata_piix", "sd_mod"),
    "ahci": ("ahci", "sd_mod"),
    "lsi-scsi": ("sym53c8xx", "sd_mod"),
}
NIC_MODULES = {"virtio-net": ("virtio_net",), "e1000": ("e1000",), "rtl8139": ("8139cp",)}
#: The guest driver of each disk controller.
DISK_DRIVERS = {
    "virtio-blk": "virtio_blk",
    "virtio-scsi": "virtio_scsi",
    "nvme": "nvme",
    "ide": "ata_piix",
    "ahci": "ahci",
    "lsi-scsi": "sym53c8xx",
}


@dataclass(frozen=True)
class LaunchPlan:
    """Everything besides the spec that the argv depends on: resolved paths and names."""

    spec: VmSpec
    accel: ResolvedAccel
    name: str
    kernel: str
    initrd: str
    kernel_cmdline: str
    qmp_socket: str
    agent_socket: str
    console_log: str
    disk_images: tuple[str, ...]
    #: One entry per NIC: the tap interface name (tap backend) or None.
    tap_names: tuple[str | None, ...]
    macs: tuple[str, ...]
    vhost: bool = False
    qemu_binary: str = "qemu-system-x86_64"
    #: The image's read-only root filesystem, attached as a virtio disk (serial
    #: ``hvb-root``) that the guest overlays with tmpfs; None for an initramfs-only image.
    root_disk: str | None = None
    #: The root disk's image format: ``raw`` (the bundled squashfs image, or a copy of
    #: it) or ``qcow2`` (a converted copy, or a copy-on-write overlay over a base image).
    root_format: str = "raw"
    #: The host's TSC rate (kHz), handed to a TCG ``microvm`` guest; see :func:`tsc_cmdline`.
    host_tsc_khz: int | None = None
    #: Per benchmark disk, the storage daemon's vhost-user socket (``backend =
    #: "vhost-user"``) or None.
    vhost_user_sockets: tuple[str | None, ...] = ()
    #: Per shared directory (``spec.filesystems``), its virtiofsd's socket.
    virtiofs_sockets: tuple[str, ...] = ()


def disk_serial(index: int) -> str:
    """The serial number QEMU gives benchmark disk ``index`` (seen by the guest)."""
    return f"hvb-d{index}"


def _opt_escape(value: str) -> str:
    # QEMU option values use ',' as separator; a literal comma is written ',,'.
    return value.replace(",", ",,")


def _virtio(plan: LaunchPlan, device: str) -> str:
    # microvm has no PCI bus: virtio devices sit on virtio-mmio transports instead.
    return f"{device}-device" if plan.spec.machine == "microvm" else f"{device}-pci"


def _machine_args(plan: LaunchPlan) -> list[str]:
    spec = plan.spec
    if spec.machine == "microvm":
        # isa-serial carries the console; ACPI lets the kernel find the virtio-mmio
        # transports without virtio_mmio.device= command-line entries.
        machine = "microvm,acpi=on,isa-serial=on,rtc=on,x-option-roms=off"
    else:
        machine = spec.machine
    accel = ["-accel", "kvm"] if plan.accel == "kvm" else ["-accel", "tcg,thread=multi"]
    cpu = plan.spec.cpu if plan.spec.cpu != "auto" else DEFAULT_CPU[plan.accel]
    memory: list[str] = []
    if spec.shares_memory:
        # A vhost-user backend maps the guest's RAM: it must be a shareable file (memfd).
        memory = ["-object", f"memory-backend-memfd,id=mem0,size={spec.memory_mib}M,share=on"]
        machine += ",memory-backend=mem0"
    return [
        *memory, "-machine", machine, *accel, "-cpu", cpu,
        "-smp", str(spec.vcpus), "-m", f"{spec.memory_mib}M",
    ]


def _base_args(plan: LaunchPlan) -> list[str]:
    return [
        plan.qemu_binary,
        # debug-threads names QEMU's threads ("CPU 0/TCG", "IO iothread0"), which the
        # host CPU sampler uses to classify them.
        "-name", f"{plan.name},debug-threads=on",
        *_machine_args(plan),
        "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
        "-chardev", f"file,id=console0,path={_opt_escape(plan.console_log)}",
        "-serial", "chardev:console0",
        "-qmp", f"unix:{_opt_escape(plan.qmp_socket)},server=on,wait=off",
        "-chardev",
        f"socket,id=agent0,path={_opt_escape(plan.agent_socket)},server=on,wait=off",
        "-device", f"{_virtio(plan, 'virtio-serial')},id=vserial0",
        "-device", f"virtserialport,bus=vserial0.0,chardev=agent0,name={AGENT_PORT_NAME}",
        "-kernel", plan.kernel, "-initrd", plan.initrd,
        "-append", plan.kernel_cmdline + clock_cmdline(plan.spec, plan.accel)
        + tsc_cmdline(plan) + driver_cmdline(plan.spec)
        + nic_cmdline(plan.spec.nics, plan.macs) + plan.spec.kernel_cmdline(),
    ]


def drive_source(disk: DiskSpec, image: str) -> str:
    """The ``-drive`` options naming where disk blocks live: an image file, a whole
    host block device (QEMU's ``host_device`` protocol, named explicitly so a path
    that is not a block device fails instead of being opened as a file), or QEMU's
    own NBD client connected to a resolved ``nbd://`` export (the host initiator).
    Raises ValueError for an ``nbd:HOST`` source the run has not resolved."""
    kind = source_kind(disk.source)
    if kind == "device":
        return f"driver=raw,file.driver=host_device,file.filename={_opt_escape(image)}"
    if kind == "nbd-uri":
        address, port, export = nbd_uri_parts(image)
        return (f"driver={disk.format},file.driver=nbd,file.server.type=inet,"
                f"file.server.host={address},file.server.port={port},file.export={export}")
    if kind == "nbd-host":
        raise ValueError(f"disk source {disk.source}: the lab's NBD server was not "
                         "resolved to an address before the guest was built")
    return f"file={_opt_escape(image)}"


def _drive_args(disk: DiskSpec, index: int, image: str) -> list[str]:
    # An image file keeps format= after the id (the order runs have always stored).
    fmt = f"format={disk.format}," if source_kind(disk.source) == "image" else ""
    drive = (
        f"{drive_source(disk, image)},if=none,id=drive{index},{fmt}"
        f"cache={disk.cache},aio={disk.aio}"
    )
    if disk.discard:
        drive += ",discard=unmap"
    if disk.detect_zeroes != "off":
        drive += f",detect-zeroes={disk.detect_zeroes}"
    if disk.bps_limit is not None:
        drive += f",throttling.bps-total={disk.bps_limit}"
    args = ["-drive", drive]
    if disk.iothread:
        poll = f",poll-max-ns={disk.poll_max_ns}" if disk.poll_max_ns is not None else ""
        args += ["-object", f"iothread,id=iothread{index}{poll}"]
    return args


def _disk_device_args(plan: LaunchPlan, disk: DiskSpec, index: int, slot: int) -> list[str]:
    """Device arguments for disk ``index``; ``slot`` is its position on its own bus."""
    common = f"drive=drive{index},serial={disk_serial(index)}"
    iothread = f",iothread=iothread{index}" if disk.iothread else ""
    if disk.bus == "virtio-blk":
        queues = f",num-queues={disk.queues}" if disk.queues is not None else ""
        queues += f",queue-size={disk.queue_size}" if disk.queue_size is not None else ""
        return ["-device", f"{_virtio(plan, 'virtio-blk')},{common}{iothread}{queues}"]
    if disk.bus == "virtio-scsi":
        queues = f",num_queues={disk.queues}" if disk.queues is not None else ""
        if disk.queue_size is not None:
            queues += f",virtqueue_size={disk.queue_size}"
        # One controller per disk, so each disk can have its own iothread.
        return [
            "-device", f"{_virtio(plan, 'virtio-scsi')},id=vscsi{index}{iothread}{queues}",
            "-device", f"scsi-hd,bus=vscsi{index}.0,{common}",
        ]
    if disk.bus == "nvme":
        # One controller per disk; with drive= on the controller QEMU 7.2 gives it
        # namespace 1 (the guest's /dev/nvmeXn1), and the serial is the controller's.
        queues = f",max_ioqpairs={disk.queues}" if disk.queues is not None else ""
        return ["-device", f"nvme,id=nvme{index},{common}{queues}"]
    if disk.bus == "ide":
        # pc has PIIX IDE built in (buses ide.0/ide.1); q35 gets a PIIX3 IDE controller.
        bus = f"ide.{slot // 2}" if plan.spec.machine == "pc" else f"pide0.{slot // 2}"
        return ["-device", f"ide-hd,bus={bus},unit={slot % 2},{common}"]
    if disk.bus == "ahci":
        return ["-device", f"ide-hd,bus=ahci0.{slot},{common}"]
    return ["-device", f"scsi-hd,bus=lsi0.0,scsi-id={slot},{common}"]


def _controller_args(spec: VmSpec) -> list[str]:
    """Shared controllers for the emulated buses, added once when any disk uses them."""
    buses = {d.bus for d in spec.disks if not d.guest_attached}
    args: list[str] = []
    if "ide" in buses and spec.machine != "pc":
        args += ["-device", "piix3-ide,id=pide0"]
    if "ahci" in buses:
        args += ["-device", "ahci,id=ahci0"]
    if "lsi-scsi" in buses:
        args += ["-device", "lsi53c895a,id=lsi0"]
    return args


def _vhost_user_args(plan: LaunchPlan, disk: DiskSpec, index: int) -> list[str]:
    """The chardev to the storage daemon's socket and the vhost-user-blk device, at a
    fixed PCI slot (the guest finds it there: the daemon, not QEMU, answers its serial
    request)."""
    sockets = plan.vhost_user_sockets
    socket = sockets[index] if index < len(sockets) else None
    if socket is None:
        raise ValueError(f"disk {index}: backend vhost-user: no storage daemon socket "
                         "was planned")
    # Both sides the same count: QEMU refuses a device with more queues than the
    # daemon's export serves.
    options = f",num-queues={vhost_user_queues(disk, plan.spec.vcpus)}"
    options += f",queue-size={disk.queue_size}" if disk.queue_size is not None else ""
    return ["-chardev", f"socket,id=vhu{index},path={_opt_escape(socket)}",
            "-device", f"vhost-user-blk-pci,id=vhu-blk{index},chardev=vhu{index},"
                       f"addr={vhost_user_slot(index):#x}{options}"]


def _disks_args(plan: LaunchPlan) -> list[str]:
    args = _controller_args(plan.spec)
    per_bus: dict[str, int] = {}
    for index, (disk, image) in enumerate(zip(plan.spec.disks, plan.disk_images, strict=True)):
        if disk.guest_attached:
            continue  # the guest's nbd-client attaches it over the NIC
        if disk.backend == "vhost-user":
            args += _vhost_user_args(plan, disk, index)
            continue
        slot = per_bus.get(disk.bus, 0)
        per_bus[disk.bus] = slot + 1
        args += _drive_args(disk, index, image)
        args += _disk_device_args(plan, disk, index, slot)
    return args


def fs_tag(index: int) -> str:
    """The virtio-fs tag of shared directory ``index`` (what the guest mounts)."""
    return f"hvbfs{index}"


def guest_share_mount(index: int) -> str:
    """Where the guest mounts shared directory ``index``."""
    return f"/mnt/{fs_tag(index)}"


def _filesystems_args(plan: LaunchPlan) -> list[str]:
    """A chardev to each virtiofsd's socket and its vhost-user-fs device."""
    if len(plan.virtiofs_sockets) != len(plan.spec.filesystems):
        raise ValueError("a shared directory has no planned virtiofsd socket")
    args: list[str] = []
    for index, socket in enumerate(plan.virtiofs_sockets):
        args += ["-chardev", f"socket,id=vfs{index},path={_opt_escape(socket)}",
                 "-device", f"{_virtio(plan, 'vhost-user-fs')},chardev=vfs{index},"
                            f"tag={fs_tag(index)}"]
    return args


def user_subnet(index: int) -> str:
    """The slirp subnet of user-mode NIC ``index``: 10.0.2.0/24, 10.0.3.0/24, ..."""
    return f"10.0.{2 + index}"


def _netdev_arg(plan: LaunchPlan, nic: NicSpec, index: int) -> str:
    if nic.backend == "user":
        netdev = f"user,id=net{index},net={user_subnet(index)}.0/24"
        for forward in nic.forwards:
            proto, host_port, guest_port = forward.split(":")
            # Forwards listen on loopback (or the lab's own bridge address) only: a
            # benchmark server is never exposed on the host's real interfaces.
            netdev += f",hostfwd={proto}:{nic.forward_address}:{host_port}-:{guest_port}"
        return netdev
    tap = plan.tap_names[index]
    vhost = ",vhost=on" if plan.vhost else ""
    queues = f",queues={nic.queues}" if nic.queues is not None else ""
    return f"tap,id=net{index},ifname={tap},script=no,downscript=no{vhost}{queues}"


def _mq_options(plan: LaunchPlan, nic: NicSpec) -> str:
    """``mq=on`` and the MSI-X vectors of a multiqueue virtio-net: one per queue of each
    direction, one for the control queue, one for configuration changes (virtio-mmio on
    a microvm has no MSI-X, so no vectors)."""
    if nic.queues is None:
        return ""
    if plan.spec.machine == "microvm":
        return ",mq=on"
    return f",mq=on,vectors={2 * nic.queues + 2}"


def _nics_args(plan: LaunchPlan) -> list[str]:
    args: list[str] = []
    for index, nic in enumerate(plan.spec.nics):
        device = NIC_DEVICES[nic.model]
        if nic.model == "virtio-net":
            device = _virtio(plan, "virtio-net")
        args += ["-netdev", _netdev_arg(plan, nic, index)]
        args += ["-device",
                 f"{device},netdev=net{index},mac={plan.macs[index]}{_mq_options(plan, nic)}"]
    return args


def nic_address(nic: NicSpec, index: int) -> tuple[str | None, str | None]:
    """The guest address and gateway of NIC ``index`` (slirp defaults for user mode)."""
    if nic.backend == "user":
        subnet = user_subnet(index)
        return nic.address or f"{subnet}.15/24", nic.gateway or f"{subnet}.2"
    return nic.address, nic.gateway


def nic_cmdline(nics: Sequence[NicSpec], macs: Sequence[str]) -> str:
    """Kernel command-line words that tell the guest's init how to set each NIC up.

    Only the first NIC with a gateway gets the default route.
    """
    words: list[str] = []
    have_route = False
    for index, (nic, mac) in enumerate(zip(nics, macs, strict=True)):
        address, gateway = nic_address(nic, index)
        if address is None:
            continue
        word = f"hvbench.net={mac},{address}"
        if gateway and not have_route:
            word += f",{gateway}"
            have_route = True
        words.append(word)
    return "".join(f" {w}" for w in words)


def wants_host_tsc(spec: VmSpec, accel: ResolvedAccel) -> bool:
    """Whether the guest needs the host's TSC rate on its command line.

    Under TCG the guest's TSC runs at the host's rate. ``microvm`` has no HPET and no
    ACPI PM timer, so when the guest's PIT-based TSC calibration fails (it races the
    host scheduler under TCG) its boot stops; with the rate given there is no
    calibration. Under KVM the kvmclock gives the rate, and q35/pc have fallbacks.
    """
    return spec.machine == "microvm" and accel == "tcg"


def tsc_cmdline(plan: LaunchPlan) -> str:
    """`` tsc_early_khz=N`` when :func:`wants_host_tsc` and the host rate is known."""
    if not wants_host_tsc(plan.spec, plan.accel) or plan.host_tsc_khz is None:
        return ""
    return f" tsc_early_khz={plan.host_tsc_khz}"


#: Where a Linux guest names the clocksource it uses (read through the agent).
CURRENT_CLOCKSOURCE = "/sys/devices/system/clocksource/clocksource0/current_clocksource"
#: The raw-output kind of that text, stored with each repetition of a guest.
GUEST_CLOCKSOURCE_KIND = "guest-clocksource"
#: The kernel words of each explicit clocksource. ``tsc`` also says ``tsc=reliable``:
#: under TCG the clocksource watchdog (checking the TSC against the HPET or ACPI PM
#: timer, themselves emulated and read late) would otherwise mark the TSC unstable and
#: switch away from it in the middle of a run. ``kernel`` adds nothing.
CLOCKSOURCE_WORDS: dict[str, tuple[str, ...]] = {
    "kernel": (),
    "tsc": ("clocksource=tsc", "tsc=reliable"),
    "hpet": ("clocksource=hpet",),
    "acpi_pm": ("clocksource=acpi_pm",),
    "kvm-clock": ("clocksource=kvm-clock",),
}


def resolved_clocksource(spec: VmSpec, accel: ResolvedAccel) -> str:
    """The clocksource setting a guest boots with: ``auto`` is ``tsc`` under TCG (what
    hvbench's guests always used there; the TCG analogue of a KVM guest's kvm-clock: a
    TSC read, no emulated device access) and ``kernel`` under KVM (the kernel's own
    choice, a stock KVM guest's); any other value is itself."""
    if spec.clocksource == "auto":
        return "tsc" if accel == "tcg" else "kernel"
    return spec.clocksource


def clock_cmdline(spec: VmSpec, accel: ResolvedAccel) -> str:
    """The kernel words of the guest's clocksource (a leading blank, or empty)."""
    return "".join(f" {w}" for w in CLOCKSOURCE_WORDS[resolved_clocksource(spec, accel)])


def driver_cmdline(spec: VmSpec) -> str:
    """``hvbench.drivers=a,b``: the modules for the declared disks and NICs, in order."""
    modules: list[str] = []
    disk_modules = [m for d in spec.disks if not d.guest_attached for m in BUS_MODULES[d.bus]]
    fs_modules = ["virtiofs"] if spec.filesystems else []
    for name in disk_modules + [
        m for n in spec.nics for m in NIC_MODULES[n.model]
    ] + fs_modules:
        if name not in modules:
            modules.append(name)
    return f" hvbench.drivers={','.join(modules)}" if modules else " hvbench.drivers="


def _root_disk_args(plan: LaunchPlan) -> list[str]:
    if plan.root_disk is None:
        return []
    drive = f"file={_opt_escape(plan.root_disk)},if=none,id=sysroot,"
    drive += f"format={plan.root_format},readonly=on"
    return ["-drive", drive,
            "-device", f"{_virtio(plan, 'virtio-blk')},drive=sysroot,serial={ROOT_SERIAL}"]


def build_qemu_argv(plan: LaunchPlan) -> list[str]:
    """The complete QEMU argv for ``plan`` (pure; raises nothing for a validated spec)."""
    return [*_base_args(plan), *_root_disk_args(plan), *_disks_args(plan), *_nics_args(plan),
            *_filesystems_args(plan)]


def io_args(plan: LaunchPlan) -> list[str]:
    """The benchmark disks' and NICs' part of the argv (controllers, -drive, -object
    iothread, -device, -netdev): the I/O configuration as a command-line fragment."""
    return [*_disks_args(plan), *_nics_args(plan), *_filesystems_args(plan)]
