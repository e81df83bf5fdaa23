"""Pure translation of a :class:`VmSpec` into libvirt domain XML, and back to facts.

The same declared axes as :mod:`hvbench.model.qemu_argv` (machine, vCPUs, memory, disk
bus, cache, io, format, iothreads, NIC model and backend), so one configuration measured
through ``kind = "qemu"`` and ``kind = "libvirt"`` is the same guest. Domains hvbench
creates carry an ``<hvb:owner>`` element in :data:`OWNER_NS` under ``<metadata>``: the
one mark ``hvbench cleanup`` trusts. :func:`io_settings` reads any domain's XML (the
user's own too) into the I/O facts a report shows.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any

from hvbench.errors import SpecError
from hvbench.model.qemu_argv import (
    AGENT_PORT_NAME,
    DEFAULT_CPU,
    ROOT_SERIAL,
    ResolvedAccel,
    clock_cmdline,
    disk_serial,
    driver_cmdline,
    nic_cmdline,
    user_subnet,
)
from hvbench.model.spec import DiskSpec, NicSpec, VmSpec, nbd_uri_parts, source_kind

#: hvbench's own XML namespace for the ownership element of the domains it creates.
OWNER_NS = "https://hvbench.dev/xmlns/owner/1"
OWNER_PREFIX = "hvb"
#: The raw-output kind under which a run keeps a domain's XML.
DOMAIN_XML_KIND = "libvirt-domain-xml"
#: The raw-output kind of the host metrics a platform could not give (JSON: metric ->
#: why), e.g. a domain behind a remote URI.
MISSING_METRICS_KIND = "missing-metrics"
#: Every domain hvbench creates is named ``hvbench-<pid>-...``.
DOMAIN_PREFIX = "hvbench-"

_BUS = {"virtio-blk": "virtio", "virtio-scsi": "scsi", "ide": "ide", "ahci": "sata",
        "lsi-scsi": "scsi"}
_TARGET_PREFIX = {"virtio": "vd", "scsi": "sd", "sata": "sd", "ide": "hd"}
_NIC_MODEL = {"virtio-net": "virtio", "e1000": "e1000", "rtl8139": "rtl8139"}


@dataclass(frozen=True)
class DomainPlan:
    """Everything besides the spec that the domain XML depends on."""

    spec: VmSpec
    accel: ResolvedAccel
    name: str
    owner_pid: int
    kernel: str
    initrd: str
    kernel_cmdline: str
    root_disk: str
    console_log: str
    disk_images: tuple[str, ...]
    tap_names: tuple[str | None, ...]
    macs: tuple[str, ...]
    emulator: str = "/usr/bin/qemu-system-x86_64"


def check_libvirt_spec(spec: VmSpec) -> None:
    """Refuse what libvirt cannot express the way hvbench declares it. Raises
    :class:`SpecError` naming the axis."""
    _check_libvirt_vm(spec)
    for index, disk in enumerate(spec.disks):
        if disk.guest_attached:
            raise SpecError(f"disk {index}: initiator guest: a guest that attaches its own "
                            "NBD or AoE disk is offered on kind = \"qemu\" only")
        if disk.bus == "nvme":
            raise SpecError(f"disk {index}: bus nvme: libvirt 9 has no emulated NVMe disk "
                            "bus (its <disk type='nvme'> is a host controller); use "
                            "kind = \"qemu\"")
        if disk.backend == "vhost-user":
            raise SpecError(f"disk {index}: backend vhost-user: hvbench starts the "
                            "storage daemon for kind = \"qemu\" guests only")
        if disk.poll_max_ns is not None:
            raise SpecError(f"disk {index}: poll_max_ns: libvirt 9 sets iothread polling "
                            "only on a running domain (virsh iothreadset); use kind = "
                            "\"qemu\"")
        if disk.queue_size is not None and disk.bus == "virtio-scsi":
            raise SpecError(f"disk {index}: queue_size: libvirt 9 has no virtio-scsi "
                            "virtqueue size; use kind = \"qemu\"")
        if disk.bus == "ide" and spec.machine != "pc":
            raise SpecError(f"disk {index}: bus ide: libvirt offers IDE on machine pc only")
    for index, nic in enumerate(spec.nics):
        if nic.backend == "tap" and not nic.bridge:
            raise SpecError(f"nic {index}: a tap NIC through libvirt needs bridge = \"BR\" "
                            "(libvirt attaches it to that bridge)")
        if nic.forwards:
            raise SpecError(f"nic {index}: forwards: libvirt's user-mode NICs take no "
                            "port forwards; use backend = \"tap\" on a bridge")


def _check_libvirt_vm(spec: VmSpec) -> None:
    if spec.machine == "microvm":
        raise SpecError("machine microvm: libvirt has no microvm machine type; use q35 or pc")
    if spec.host_limits is not None:
        raise SpecError("host_limits: hvbench puts kind = \"qemu\" guests into a cgroup of "
                        "its own; libvirt keeps its domains in its own cgroups (set "
                        "<blkiotune>/<cputune> in the domain), so use kind = \"qemu\"")
    if spec.filesystems:
        raise SpecError("filesystems: virtio-fs shares (hvbench's own virtiofsd) are "
                        "offered on kind = \"qemu\" only")


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    element = ET.SubElement(parent, tag, attrs)
    if text is not None:
        element.text = text
    return element


def _target_names(disks: tuple[DiskSpec, ...]) -> list[str]:
    """Target device names per disk; ``vda`` is the root disk, so virtio starts at vdb."""
    used = {"vd": 1, "sd": 0, "hd": 0}
    names = []
    for disk in disks:
        prefix = _TARGET_PREFIX[_BUS[disk.bus]]
        names.append(prefix + chr(ord("a") + used[prefix]))
        used[prefix] += 1
    return names


def _os(root: ET.Element, plan: DomainPlan) -> None:
    os_el = _sub(root, "os")
    _sub(os_el, "type", "hvm", arch="x86_64", machine=plan.spec.machine)
    _sub(os_el, "kernel", plan.kernel)
    _sub(os_el, "initrd", plan.initrd)
    cmdline = plan.kernel_cmdline + clock_cmdline(plan.spec, plan.accel) \
        + driver_cmdline(plan.spec) + nic_cmdline(
        plan.spec.nics, plan.macs) + plan.spec.kernel_cmdline()
    _sub(os_el, "cmdline", cmdline)
    features = _sub(root, "features")
    _sub(features, "acpi")
    cpu_model = plan.spec.cpu if plan.spec.cpu != "auto" else DEFAULT_CPU[plan.accel]
    if cpu_model == "host":
        _sub(root, "cpu", mode="host-passthrough")
    else:
        cpu = _sub(root, "cpu", mode="custom", match="exact", check="none")
        _sub(cpu, "model", cpu_model, fallback="forbid")


def _disk(devices: ET.Element, disk: DiskSpec, index: int, *, image: str, target: str,
          iothread: int | None, controller: int | None) -> None:
    kind = source_kind(disk.source)
    disk_type = {"device": "block", "nbd-uri": "network"}.get(kind, "file")
    if kind == "nbd-host":
        raise SpecError(f"disk {index}: source {disk.source}: the lab's NBD server was not "
                        "resolved to an address before the domain was defined")
    element = _sub(devices, "disk", type=disk_type, device="disk")
    driver = {"name": "qemu", "type": disk.format, "cache": disk.cache, "io": disk.aio}
    if iothread is not None and disk.bus == "virtio-blk":
        driver["iothread"] = str(iothread)
    if disk.queues is not None and disk.bus == "virtio-blk":
        driver["queues"] = str(disk.queues)
    if disk.queue_size is not None:
        driver["queue_size"] = str(disk.queue_size)
    if disk.discard:
        driver["discard"] = "unmap"
    if disk.detect_zeroes != "off":
        driver["detect_zeroes"] = disk.detect_zeroes
    _sub(element, "driver", **driver)
    if kind == "device":
        _sub(element, "source", dev=image)
    elif kind == "nbd-uri":
        # libvirt's own NBD client settings: QEMU in the host opens the export.
        address, port, export = nbd_uri_parts(image)
        source = _sub(element, "source", protocol="nbd", name=export)
        _sub(source, "host", name=address, port=str(port))
    else:
        _sub(element, "source", file=image)
    bus = _BUS[disk.bus]
    target_attrs = {"dev": target, "bus": bus}
    _sub(element, "target", **target_attrs)
    if disk.bps_limit is not None:
        iotune = _sub(element, "iotune")
        _sub(iotune, "total_bytes_sec", str(disk.bps_limit))
    _sub(element, "serial", disk_serial(index))
    if controller is not None:
        # One SCSI controller per disk (as the qemu argv does), so each can have its
        # own iothread.
        _sub(element, "address", type="drive", controller=str(controller), bus="0",
             target="0", unit="0")


def _scsi_controllers(spec: VmSpec) -> dict[int, int]:
    """Disk index -> its SCSI controller's index: numbered without gaps, since libvirt
    fills a gap with a default (LSI) controller the qemu guest does not have."""
    scsi = [i for i, d in enumerate(spec.disks) if d.bus in ("virtio-scsi", "lsi-scsi")]
    return {index: n for n, index in enumerate(scsi)}


def _controllers(devices: ET.Element, spec: VmSpec, iothreads: dict[int, int]) -> None:
    for index, number in _scsi_controllers(spec).items():
        disk = spec.disks[index]
        model = "virtio-scsi" if disk.bus == "virtio-scsi" else "lsilogic"
        controller = _sub(devices, "controller", type="scsi", index=str(number), model=model)
        attrs = {}
        if index in iothreads and disk.bus == "virtio-scsi":
            attrs["iothread"] = str(iothreads[index])
        if disk.queues is not None and disk.bus == "virtio-scsi":
            attrs["queues"] = str(disk.queues)
        if attrs:
            _sub(controller, "driver", **attrs)


def _nic(devices: ET.Element, nic: NicSpec, index: int, mac: str, tap: str | None) -> None:
    if nic.backend == "user":
        element = _sub(devices, "interface", type="user")
        _sub(element, "mac", address=mac)
        _sub(element, "ip", family="ipv4", address=f"{user_subnet(index)}.0", prefix="24")
    else:
        element = _sub(devices, "interface", type="bridge")
        _sub(element, "mac", address=mac)
        _sub(element, "source", bridge=nic.bridge or "")
        if tap is not None:
            _sub(element, "target", dev=tap)
    _sub(element, "model", type=_NIC_MODEL[nic.model])
    if nic.queues is not None:
        # name="qemu": QEMU's own virtio-net backend (this host has no vhost-net).
        _sub(element, "driver", name="qemu", queues=str(nic.queues))


def _devices(root: ET.Element, plan: DomainPlan, iothreads: dict[int, int]) -> None:
    devices = _sub(root, "devices")
    _sub(devices, "emulator", plan.emulator)
    rootdisk = _sub(devices, "disk", type="file", device="disk")
    _sub(rootdisk, "driver", name="qemu", type="raw")
    _sub(rootdisk, "source", file=plan.root_disk)
    _sub(rootdisk, "target", dev="vda", bus="virtio")
    _sub(rootdisk, "readonly")
    _sub(rootdisk, "serial", ROOT_SERIAL)
    controllers = _scsi_controllers(plan.spec)
    for index, (disk, image, target) in enumerate(zip(
            plan.spec.disks, plan.disk_images, _target_names(plan.spec.disks), strict=True)):
        _disk(devices, disk, index, image=image, target=target,
              iothread=iothreads.get(index), controller=controllers.get(index))
    _controllers(devices, plan.spec, iothreads)
    for index, (nic, mac, tap) in enumerate(zip(
            plan.spec.nics, plan.macs, plan.tap_names, strict=True)):
        _nic(devices, nic, index, mac, tap)
    # The console goes to a pty whose output virtlogd (root) writes to the log file.
    serial = _sub(devices, "serial", type="pty")
    _sub(serial, "log", file=plan.console_log, append="off")
    _sub(serial, "target", port="0")
    channel = _sub(devices, "channel", type="unix")
    _sub(channel, "target", type="virtio", name=AGENT_PORT_NAME)
    # Like QEMU's -nodefaults: no USB controller or balloon that the qemu guest lacks.
    _sub(devices, "controller", type="usb", model="none")
    _sub(devices, "memballoon", model="none")


def build_domain_xml(plan: DomainPlan) -> str:
    """The domain XML for ``plan`` (pure). Raises :class:`SpecError` for what libvirt
    cannot express (:func:`check_libvirt_spec`)."""
    check_libvirt_spec(plan.spec)
    ET.register_namespace(OWNER_PREFIX, OWNER_NS)
    root = ET.Element("domain", type="kvm" if plan.accel == "kvm" else "qemu")
    _sub(root, "name", plan.name)
    metadata = _sub(root, "metadata")
    ET.SubElement(metadata, f"{{{OWNER_NS}}}owner", pid=str(plan.owner_pid))
    _sub(root, "memory", str(plan.spec.memory_mib), unit="MiB")
    _sub(root, "vcpu", str(plan.spec.vcpus))
    wanted = [i for i, d in enumerate(plan.spec.disks) if d.iothread]
    iothreads = {index: n + 1 for n, index in enumerate(wanted)}
    if iothreads:
        _sub(root, "iothreads", str(len(iothreads)))
    _os(root, plan)
    # No relabelling: hvbench makes the files readable (and its disks writable) by
    # libvirt's QEMU user itself, and a relabel would chown the image cache's inodes.
    for event in ("on_poweroff", "on_reboot", "on_crash"):
        _sub(root, event, "destroy")
    _devices(root, plan, iothreads)
    _sub(root, "seclabel", type="none", model="dac")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"


def tiny_domain_xml(name: str, owner: int, accel: ResolvedAccel = "tcg",
                    emulator: str = "/usr/bin/qemu-system-x86_64") -> str:
    """The smallest domain libvirt will start (pure): 32 MiB, one vCPU, no disk, NIC,
    USB or balloon, hvbench's owner element; started paused it runs no guest code.
    ``hvbench doctor`` times libvirt's own define and start with it."""
    ET.register_namespace(OWNER_PREFIX, OWNER_NS)
    root = ET.Element("domain", type="kvm" if accel == "kvm" else "qemu")
    _sub(root, "name", name)
    metadata = _sub(root, "metadata")
    ET.SubElement(metadata, f"{{{OWNER_NS}}}owner", pid=str(owner))
    _sub(root, "memory", "32", unit="MiB")
    _sub(root, "vcpu", "1")
    os_el = _sub(root, "os")
    _sub(os_el, "type", "hvm", arch="x86_64", machine="pc")
    devices = _sub(root, "devices")
    _sub(devices, "emulator", emulator)
    _sub(devices, "controller", type="usb", model="none")
    _sub(devices, "memballoon", model="none")
    _sub(root, "seclabel", type="none", model="dac")
    return ET.tostring(root, encoding="unicode") + "\n"


def caps_have_kvm(capabilities_xml: str) -> bool:
    """Whether libvirt's host capabilities offer ``kvm`` domains, i.e. its probe of
    QEMU found KVM (pure). False for XML that does not parse."""
    try:
        root = ET.fromstring(capabilities_xml)  # noqa: S314 - libvirt's own XML
    except ET.ParseError:
        return False
    return root.find("guest/arch/domain[@type='kvm']") is not None


def owner_pid(domain_xml: str) -> int | None:
    """The pid in a domain's hvbench owner element; None for a domain hvbench did not
    create (no such element, or XML that does not parse)."""
    try:
        root = ET.fromstring(domain_xml)  # noqa: S314 - libvirt's own XML of a domain
    except ET.ParseError:
        return None
    element = root.find(f"metadata/{{{OWNER_NS}}}owner")
    if element is None:
        return None
    try:
        return int(element.get("pid", ""))
    except ValueError:
        return None


def io_settings(domain_xml: str) -> dict[str, Any]:
    """The I/O facts of a domain (disks: target, bus, source, format, cache, io,
    iothread; NICs: type, model, source; the iothread count), from its XML. Raises
    :class:`SpecError` when the XML does not parse."""
    try:
        root = ET.fromstring(domain_xml)  # noqa: S314 - libvirt's own XML of a domain
    except ET.ParseError as exc:
        raise SpecError(f"domain XML does not parse: {exc}") from exc
    disks = [_disk_facts(d) for d in root.findall("devices/disk")]
    nics = [_nic_facts(n) for n in root.findall("devices/interface")]
    return {
        "name": root.findtext("name", ""),
        "type": root.get("type", ""),
        "machine": _attr(root, "os/type", "machine"),
        "iothreads": int(root.findtext("iothreads", "0") or 0),
        "disks": disks,
        "nics": nics,
    }


def _attr(element: ET.Element, path: str, key: str) -> str:
    found = element.find(path)
    return found.get(key, "") if found is not None else ""


def _disk_facts(disk: ET.Element) -> dict[str, str]:
    driver = disk.find("driver")
    target = disk.find("target")
    source = disk.find("source")
    facts = {
        "device": disk.get("device", ""),
        "target": target.get("dev", "") if target is not None else "",
        "bus": target.get("bus", "") if target is not None else "",
        "source": next((source.get(k, "") for k in ("file", "dev", "name", "volume")
                        if source is not None and source.get(k)), ""),
        "serial": disk.findtext("serial", ""),
        "readonly": "yes" if disk.find("readonly") is not None else "no",
    }
    for key in ("type", "cache", "io", "iothread"):
        facts["format" if key == "type" else key] = (
            driver.get(key, "") if driver is not None else "")
    return facts


def _nic_facts(nic: ET.Element) -> dict[str, str]:
    model = nic.find("model")
    source = nic.find("source")
    target = nic.find("target")
    return {
        "type": nic.get("type", ""),
        "model": model.get("type", "") if model is not None else "",
        "source": next((source.get(k, "") for k in ("bridge", "network", "dev")
                        if source is not None and source.get(k)), ""),
        "tap": target.get("dev", "") if target is not None else "",
        "mac": _attr(nic, "mac", "address"),
    }


def io_lines(settings: dict[str, Any]) -> list[str]:
    """One line per disk and NIC of :func:`io_settings`, for a report (pure)."""
    lines = []
    for disk in settings.get("disks", []):
        if disk.get("device") != "disk":
            continue
        lines.append(
            f"disk {disk['target']}: bus={disk['bus']} format={disk['format'] or '-'} "
            f"cache={disk['cache'] or 'default'} io={disk['io'] or 'default'} "
            f"iothread={disk['iothread'] or '-'}"
            + (" readonly" if disk.get("readonly") == "yes" else ""))
    for nic in settings.get("nics", []):
        lines.append(f"nic: type={nic['type']} model={nic['model'] or 'default'}"
                     + (f" source={nic['source']}" if nic.get("source") else ""))
    return lines
