"""Declarative description of a guest: machine, CPUs, memory, benchmark disks and NICs.

This module is at the bottom of the layer stack: it validates values and combinations
but starts no process and touches no file. Invalid combinations are rejected here,
before anything is launched, with a message that says why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from hvbench.errors import SpecError
from hvbench.model.problems import Loc, Where, problems

Machine = Literal["q35", "pc", "microvm"]
Accel = Literal["auto", "kvm", "tcg"]
#: The guest kernel's clocksource: ``auto`` is ``tsc`` under TCG and the kernel's own
#: choice under KVM; ``kernel`` is always the kernel's own choice (a stock guest's:
#: hpet under TCG, kvm-clock or tsc under KVM). See docs/design.md, "Clocksource".
Clocksource = Literal["auto", "kernel", "tsc", "hpet", "acpi_pm", "kvm-clock"]
DiskBus = Literal["virtio-blk", "virtio-scsi", "nvme", "ide", "ahci", "lsi-scsi"]
CacheMode = Literal["none", "writeback", "writethrough", "directsync", "unsafe"]
AioMode = Literal["threads", "native", "io_uring"]
ImageFormat = Literal["raw", "qcow2"]
Allocation = Literal["sparse", "preallocated", "full"]
#: ``qemu-img create -o preallocation=`` of each allocation. ``preallocated`` reserves the
#: blocks (fallocate): on ext4 and XFS they stay *unwritten* extents that the first write
#: to each converts (a journalled metadata change), so first writes still pay part of the
#: growth; ``full`` writes every byte, as the seeds' preallocated image files were.
PREALLOCATION: dict[str, str] = {"sparse": "off", "preallocated": "falloc", "full": "full"}
DetectZeroes = Literal["off", "on", "unmap"]
#: Who serves a disk's blocks: QEMU itself, or a ``qemu-storage-daemon`` per disk that
#: exports it over a vhost-user socket (``vhost-user-blk-pci`` in the guest).
DiskBackend = Literal["qemu", "vhost-user"]
NicModel = Literal["virtio-net", "e1000", "rtl8139"]
NetBackend = Literal["user", "tap"]

#: Buses a microvm can carry: it has no PCI bus, only virtio-mmio.
MICROVM_DISK_BUSES: frozenset[str] = frozenset({"virtio-blk", "virtio-scsi"})
MICROVM_NIC_MODELS: frozenset[str] = frozenset({"virtio-net"})
#: Cache modes that open the image with O_DIRECT, which Linux native AIO requires.
DIRECT_CACHE_MODES: frozenset[str] = frozenset({"none", "directsync"})
IOTHREAD_BUSES: frozenset[str] = frozenset({"virtio-blk", "virtio-scsi"})
#: Buses with several request queues: virtio-blk ``num-queues``, virtio-scsi
#: ``num_queues``, NVMe ``max_ioqpairs`` (I/O submission/completion queue pairs).
QUEUE_BUSES: frozenset[str] = frozenset({"virtio-blk", "virtio-scsi", "nvme"})
#: How many disks one controller of each emulated bus takes (IDE: 2 channels x 2 units,
#: AHCI: 6 ports, LSI 53C895A: 7 targets).
BUS_CAPACITY: Mapping[str, int] = {"ide": 4, "ahci": 6, "lsi-scsi": 7}

#: ``source`` of a whole host block device ("phy" in seed 001): an absolute /dev path.
_DEVICE_SOURCE_RE = re.compile(r"^/dev/[A-Za-z0-9][A-Za-z0-9/_.:+-]*$")
#: ``source`` of an NBD export served from a net-lab host, as a study names it
#: (``nbd:HOST``) and as the run resolves it (``nbd://ADDRESS:PORT/EXPORT``).
_NBD_HOST_RE = re.compile(r"^nbd:([a-z][a-z0-9-]{0,11})$")
_NBD_URI_RE = re.compile(r"^nbd://(\d+\.\d+\.\d+\.\d+):(\d{1,5})/([A-Za-z0-9_.-]+)$")
#: ``source`` of an ATA over Ethernet export of a net-lab host (``aoe:HOST``) and as the
#: run resolves it (``aoe://HOST/e<shelf>.<slot>``).
_AOE_HOST_RE = re.compile(r"^aoe:([a-z][a-z0-9-]{0,11})$")
_AOE_ADDRESS_RE = re.compile(r"^aoe://([a-z][a-z0-9-]{0,11})/e(\d{1,5})\.(\d{1,3})$")
SourceKind = Literal["image", "device", "nbd-host", "nbd-uri", "aoe-host", "aoe-address"]
#: The source kinds a net-lab host serves (the disk's blocks cross its link).
NETWORK_SOURCE_PREFIXES = ("nbd", "aoe")
Initiator = Literal["host", "guest"]


def source_kind(source: str | None) -> SourceKind:
    """What a disk ``source`` names: None an image file hvbench creates, ``/dev/...`` a
    host block device, ``nbd:HOST`` a lab host's NBD export, ``nbd://...`` that export
    resolved to an address, ``aoe:HOST`` a lab host's AoE export and ``aoe://HOST/eS.L``
    that export resolved to its AoE address. Raises ValueError naming the accepted
    forms."""
    if source is None:
        return "image"
    if _DEVICE_SOURCE_RE.fullmatch(source) and "/../" not in f"{source}/":
        return "device"
    if _NBD_HOST_RE.fullmatch(source):
        return "nbd-host"
    if _NBD_URI_RE.fullmatch(source):
        return "nbd-uri"
    if _AOE_HOST_RE.fullmatch(source):
        return "aoe-host"
    if _AOE_ADDRESS_RE.fullmatch(source):
        return "aoe-address"
    raise ValueError(f"source {source!r}: expected a host block device (/dev/...), an "
                     "NBD export of a lab host (nbd:HOST) or its ATA over Ethernet export "
                     "(aoe:HOST)")


def nbd_host(source: str | None) -> str | None:
    """The lab host of an ``nbd:HOST`` source; None for any other source."""
    match = _NBD_HOST_RE.fullmatch(source or "")
    return match.group(1) if match else None


def aoe_host(source: str | None) -> str | None:
    """The lab host of an ``aoe:HOST`` source; None for any other source."""
    match = _AOE_HOST_RE.fullmatch(source or "")
    return match.group(1) if match else None


def aoe_address(host: str, shelf: int, slot: int) -> str:
    """The resolved source of ``host``'s AoE export ``e<shelf>.<slot>``."""
    return f"aoe://{host}/e{shelf}.{slot}"


def aoe_address_parts(source: str) -> tuple[str, int, int]:
    """(host, shelf, slot) of a resolved ``aoe://HOST/eS.L`` source. Raises
    ValueError for anything else."""
    match = _AOE_ADDRESS_RE.fullmatch(source)
    if match is None:
        raise ValueError(f"source {source!r} is not a resolved AoE export")
    return match.group(1), int(match.group(2)), int(match.group(3))


def nbd_uri_parts(source: str) -> tuple[str, int, str]:
    """(address, port, export) of a resolved ``nbd://ADDRESS:PORT/EXPORT`` source.
    Raises ValueError for anything else."""
    match = _NBD_URI_RE.fullmatch(source)
    if match is None:
        raise ValueError(f"source {source!r} is not a resolved NBD export")
    return match.group(1), int(match.group(2)), match.group(3)


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(value: object) -> int:
    """Parse a byte size: an int, or a string like ``"512M"``, ``"1G"``, ``"4KiB"``.

    Raises ValueError with the accepted forms when the value is not a size.
    """
    if isinstance(value, bool):
        raise ValueError("expected a size such as 1G, 512M or a number of bytes")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        match = _SIZE_RE.match(value)
        if match:
            return int(float(match.group(1)) * _UNITS[match.group(2).upper()])
    raise ValueError(f"expected a size such as 1G, 512M or a number of bytes, got {value!r}")


def format_size(size: int) -> str:
    """Render a byte count the way :func:`parse_size` reads it (``1G``, ``1536M``)."""
    for unit in ("T", "G", "M", "K"):
        if size % _UNITS[unit] == 0 and size >= _UNITS[unit]:
            return f"{size // _UNITS[unit]}{unit}"
    return str(size)


ByteSize = Annotated[int, BeforeValidator(parse_size), Field(gt=0)]
#: One guest kernel command-line word: printable, no blanks or quotes.
_KERNEL_WORD_RE = re.compile(r"^[A-Za-z0-9_.,:=/+@%-]+$")
_FORWARD_RE = re.compile(r"^(tcp|udp):(\d{1,5}):(\d{1,5})$")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DiskSpec(_Frozen):
    """One benchmark disk: its controller, host cache and AIO modes, and its image."""

    bus: DiskBus = "virtio-blk"
    cache: CacheMode = "none"
    aio: AioMode = "threads"
    format: ImageFormat = "raw"
    allocation: Allocation = "sparse"
    size: ByteSize = 1 << 30
    iothread: bool = False
    #: Request queues of a virtio disk (virtio-blk ``num-queues``, virtio-scsi
    #: ``num_queues``; libvirt ``<driver queues=>``) or an NVMe controller's I/O queue
    #: pairs (``max_ioqpairs``); None: QEMU's default.
    queues: int | None = Field(default=None, ge=1, le=16)
    #: Adaptive polling of the disk's iothread (``-object iothread,poll-max-ns=``): how
    #: long it busy-waits for new requests before sleeping; 0 turns polling off; None:
    #: QEMU's default (32 us). Needs ``iothread = true``.
    poll_max_ns: int | None = Field(default=None, ge=0, le=1_000_000_000)
    #: Descriptors per virtqueue (virtio-blk ``queue-size``, virtio-scsi
    #: ``virtqueue_size``): a power of two; None: QEMU's default (256).
    queue_size: int | None = Field(default=None, ge=4, le=1024)
    #: Pass the guest's discard (TRIM/UNMAP) requests to the image (``discard=unmap``).
    discard: bool = False
    #: QEMU's ``detect-zeroes``: look for all-zero writes and turn them into
    #: write-zeroes (``on``) or discards (``unmap``, needs ``discard = true``).
    detect_zeroes: DetectZeroes = "off"
    #: ``qemu``: QEMU's own block layer serves the disk; ``vhost-user``: a
    #: ``qemu-storage-daemon`` of its own does (its own iothread, ``aio``/``cache`` as
    #: declared) and QEMU only forwards the guest's virtqueues to it (bus virtio-blk;
    #: the guest's memory is then shared with the daemon).
    backend: DiskBackend = "qemu"
    #: QEMU I/O throttling of this disk (``throttling.bps-total``), bytes/s; None: off.
    bps_limit: ByteSize | None = None
    #: Where the disk's blocks live: None, an image file hvbench creates (``format``,
    #: ``allocation``, ``size``); ``/dev/...``, a whole host block device given to the
    #: guest ("phy" in seed 001; raw, its own size); ``nbd:HOST``, an NBD export served
    #: from net-lab host HOST over its shaped link (an image of ``format``, ``allocation``
    #: and ``size`` there), seed 001's network block storage; ``aoe:HOST``, the same
    #: served by vblade over ATA over Ethernet (raw; the guest is the initiator).
    source: str | None = None
    #: NBD sources: ``host``, QEMU's own NBD client opens the export (the initiator in
    #: the host) and gives it to the guest on ``bus``; ``guest``, the guest's own
    #: nbd-client attaches it as /dev/nbdN over the guest's first NIC (no QEMU disk:
    #: ``bus``, ``cache`` and ``aio`` do not apply).
    initiator: Initiator = "host"

    @model_validator(mode="after")
    def _check(self) -> DiskSpec:
        kind = source_kind(self.source)
        if kind == "device" and self.format != "raw":
            raise ValueError(f"source {self.source}: a host block device is given to the "
                             f"guest raw, not as format={self.format}")
        if self.initiator != "host" and not kind.startswith(NETWORK_SOURCE_PREFIXES):
            raise ValueError("initiator is only valid with an NBD or AoE source (nbd:HOST, "
                             "aoe:HOST)")
        if kind.startswith("aoe") and self.initiator != "guest":
            raise ValueError(f"source {self.source}: ATA over Ethernet is attached by the "
                             "guest's aoe driver (this host's kernel has none): set "
                             "initiator = \"guest\"")
        if kind.startswith("aoe") and self.format != "raw":
            raise ValueError(f"source {self.source}: vblade exports a raw file, not "
                             f"format={self.format}")
        if kind.startswith("nbd") and self.aio == "native":
            raise ValueError("aio=native needs a local file or device: QEMU's NBD client "
                             "is a network socket (use aio = \"threads\")")
        if self.aio == "native" and self.cache not in DIRECT_CACHE_MODES:
            raise ValueError(
                f"aio=native needs cache=none or cache=directsync (got cache={self.cache}): "
                "Linux native AIO is only asynchronous on files opened with O_DIRECT"
            )
        if self.queues is not None and self.bus not in QUEUE_BUSES:
            raise ValueError(
                f"queues needs bus virtio-blk, virtio-scsi or nvme (got bus={self.bus}): "
                "only those controllers have several request queues"
            )
        if self.iothread and self.bus not in IOTHREAD_BUSES:
            raise ValueError(
                f"iothread=true needs bus virtio-blk or virtio-scsi (got bus={self.bus}): "
                "only virtio devices can be moved to an iothread"
            )
        self._check_queue_options()
        if self.backend == "vhost-user":
            self._check_vhost_user()
        return self

    def _check_vhost_user(self) -> None:
        if self.bus != "virtio-blk":
            raise ValueError(f"backend = \"vhost-user\" needs bus virtio-blk (got "
                             f"bus={self.bus}): the guest sees a vhost-user-blk device")
        if source_kind(self.source).startswith("nbd"):
            raise ValueError("backend = \"vhost-user\" serves an image file or a host "
                             "block device, not an NBD source")
        if self.iothread:
            raise ValueError("backend = \"vhost-user\" runs the disk in the storage "
                             "daemon's own iothread: iothread = true is QEMU's (leave it "
                             "out; poll_max_ns applies to the daemon's iothread)")
        if self.bps_limit is not None:
            raise ValueError("bps_limit is QEMU's throttling: a vhost-user disk's blocks "
                             "never pass through QEMU")

    def _check_queue_options(self) -> None:
        if self.poll_max_ns is not None and not (self.iothread or self.backend == "vhost-user"):
            raise ValueError("poll_max_ns needs iothread = true (or backend = "
                             "\"vhost-user\"): adaptive polling is done by an iothread")
        if self.queue_size is not None:
            if self.bus not in IOTHREAD_BUSES:
                raise ValueError(f"queue_size needs bus virtio-blk or virtio-scsi (got "
                                 f"bus={self.bus}): only virtio disks have virtqueues")
            if self.queue_size & (self.queue_size - 1):
                raise ValueError(f"queue_size {self.queue_size}: expected a power of two "
                                 "between 4 and 1024")
        if self.detect_zeroes == "unmap" and not self.discard:
            raise ValueError("detect_zeroes = \"unmap\" needs discard = true: QEMU turns "
                             "zero writes into discards only where discards reach the image")

    def label(self) -> str:
        """A short name derived from the values, e.g. ``virtio-blk-none-raw-sparse``,
        ``lsi-scsi-none-phy-loop0``, ``virtio-blk-none-nbd-storage-raw-sparse``."""
        parts: list[str] = [self.bus, self.cache]
        kind = source_kind(self.source)
        if kind == "device" and self.source is not None:
            parts += ["phy", self.source.rsplit("/", 1)[-1]]
        else:
            if kind == "nbd-host":
                parts += ["nbd", nbd_host(self.source) or ""]
            elif kind == "aoe-host":
                parts += ["aoe", aoe_host(self.source) or ""]
            elif kind == "aoe-address" and self.source is not None:
                parts += ["aoe", aoe_address_parts(self.source)[0]]
            elif kind == "nbd-uri" and self.source is not None:
                # The run names each export after its lab host: the same label as
                # the study's nbd:HOST.
                parts += ["nbd", nbd_uri_parts(self.source)[2]]
            parts += [self.format, self.allocation]
        if self.aio != "threads":
            parts.append(f"aio-{self.aio}")
        if self.iothread:
            parts.append("iothread")
        parts += self._queue_label()
        if self.bps_limit is not None:
            parts.append(f"bps-{format_size(self.bps_limit)}")
        if self.initiator == "guest":
            parts.append("guest-initiator")
        if self.backend != "qemu":
            parts.append(self.backend)
        return "-".join(parts)

    def _queue_label(self) -> list[str]:
        """The label words of the queue, polling and discard settings that are set."""
        words = {
            f"q{self.queues}": self.queues is not None,
            f"poll{self.poll_max_ns}": self.poll_max_ns is not None,
            f"qs{self.queue_size}": self.queue_size is not None,
            "discard": self.discard,
            f"dz-{self.detect_zeroes}": self.detect_zeroes != "off",
        }
        return [word for word, present in words.items() if present]

    @property
    def guest_attached(self) -> bool:
        """The guest attaches this disk itself (an NBD or AoE export, ``initiator =
        "guest"``): QEMU gets no drive for it."""
        return (self.initiator == "guest"
                and source_kind(self.source).startswith(NETWORK_SOURCE_PREFIXES))


FsCache = Literal["auto", "always", "none"]


class SharedDirSpec(_Frozen):
    """A host directory shared with the guest over virtio-fs (virtiofsd +
    ``vhost-user-fs-pci``), mounted in the guest at ``/mnt/hvbfs<N>``."""

    #: The host directory (absolute); None: hvbench makes an empty one in the guest's
    #: run directory.
    source: str | None = Field(default=None, pattern=r"^/[A-Za-z0-9/_.:+-]*$")
    #: virtiofsd's ``-o cache=``: ``none`` (every access goes to the host), ``auto``
    #: (attributes cached for a second), ``always`` (the guest caches freely).
    cache: FsCache = "auto"

    def label(self) -> str:
        """``fs-<cache>``."""
        return f"fs-{self.cache}"


class NicSpec(_Frozen):
    """One NIC: the emulated model and the host backend it is connected to."""

    model: NicModel = "virtio-net"
    backend: NetBackend = "user"
    #: tap backend only: an existing bridge to enslave the tap to.
    bridge: str | None = None
    #: Guest address with prefix, e.g. ``10.0.2.15/24``. For user networking the
    #: default is QEMU's slirp address; for tap there is no default.
    address: str | None = None
    gateway: str | None = None
    #: user backend only: ``tcp:HOSTPORT:GUESTPORT`` forwards for servers in the guest.
    forwards: tuple[str, ...] = ()
    #: The NIC's MAC address; None draws a fresh one at each boot.
    mac: str | None = Field(default=None, pattern=r"^([0-9a-f]{2}:){5}[0-9a-f]{2}$")
    #: The host address the forwards listen on: loopback unless a net lab's hosts must
    #: reach the guest's servers (then the lab's own address on its bridge).
    forward_address: str = Field(default="127.0.0.1", pattern=r"^\d+\.\d+\.\d+\.\d+$")
    #: Queue pairs of a multiqueue virtio-net NIC on a tap (``queues=`` on the tap,
    #: ``mq=on`` on the device); the guest needs as many vCPUs. None: one queue.
    queues: int | None = Field(default=None, ge=1, le=16)

    @field_validator("forwards")
    @classmethod
    def _check_forwards(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            match = _FORWARD_RE.match(item)
            if not match or not all(0 < int(p) < 65536 for p in match.groups()[1:]):
                raise ValueError(f"forward {item!r}: expected tcp:HOSTPORT:GUESTPORT")
        return value

    @field_validator("address")
    @classmethod
    def _check_address(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"^\d+\.\d+\.\d+\.\d+/\d{1,2}$", value):
            raise ValueError(f"address {value!r}: expected IPv4/PREFIX such as 10.0.2.15/24")
        return value

    @model_validator(mode="after")
    def _check(self) -> NicSpec:
        if self.bridge is not None and self.backend != "tap":
            raise ValueError("bridge is only valid with backend=tap")
        if self.forwards and self.backend != "user":
            raise ValueError("forwards are only valid with backend=user")
        if self.queues is not None and (self.model != "virtio-net" or self.backend != "tap"):
            raise ValueError(f"queues needs model virtio-net on backend tap (got "
                             f"{self.model} on {self.backend}): only a tap opened with "
                             "several queues feeds a multiqueue virtio-net")
        return self

    def label(self) -> str:
        """``MODEL-BACKEND``, with ``-qN`` for a multiqueue NIC."""
        queues = f"-q{self.queues}" if self.queues is not None else ""
        return f"{self.model}-{self.backend}{queues}"


class HostLimitsSpec(_Frozen):
    """Limits hvbench puts on a guest's whole QEMU process from outside it, as an
    operator's libvirt ``<blkiotune>``/``<cputune>`` or a systemd slice would: a cgroup
    hvbench creates (v1 ``blkio.throttle.*`` and ``cpu.cfs_quota_us``, v2 ``io.max`` and
    ``cpu.max``), joined once the guest has booted, so the boot is not throttled.

    The I/O limits apply to the host block device holding each benchmark disk (the
    device under its image file, or the device a ``/dev/...`` source names). The names
    are the kernel's own (``io.max`` ``rbps``/``wbps``/``riops``/``wiops``, v1
    ``blkio.throttle.read_bps_device`` ...), spelled out; ``cpu_quota_pct`` is % of one
    CPU, as a scenario's ``target_quota_pct``."""

    #: Bytes per second the QEMU process may read from (write to) the device.
    read_bps: ByteSize | None = None
    write_bps: ByteSize | None = None
    #: Read (write) requests per second.
    read_iops: int | None = Field(default=None, gt=0)
    write_iops: int | None = Field(default=None, gt=0)
    #: CPU time of all the QEMU process's threads together, % of one CPU per CFS period
    #: (200 = two CPUs' worth; the kernel refuses less than 1 ms per 100 ms period).
    cpu_quota_pct: float | None = Field(default=None, ge=1, le=6400)

    @model_validator(mode="after")
    def _check(self) -> HostLimitsSpec:
        if all(v is None for v in (self.read_bps, self.write_bps, self.read_iops,
                                   self.write_iops, self.cpu_quota_pct)):
            raise ValueError("host_limits: expected at least one of read_bps, write_bps, "
                             "read_iops, write_iops, cpu_quota_pct")
        return self

    @property
    def io(self) -> dict[str, int]:
        """The I/O limits that are set, by their v1 name (``read_bps`` ...)."""
        found = {"read_bps": self.read_bps, "write_bps": self.write_bps,
                 "read_iops": self.read_iops, "write_iops": self.write_iops}
        return {k: v for k, v in found.items() if v is not None}

    def label(self) -> str:
        """``cg-rbps8M-cpu30``: the limits that are set."""
        words = [f"{short}{format_size(v) if 'bps' in key else v}"
                 for key, short in (("read_bps", "rbps"), ("write_bps", "wbps"),
                                    ("read_iops", "riops"), ("write_iops", "wiops"))
                 if (v := self.io.get(key)) is not None]
        if self.cpu_quota_pct is not None:
            words.append(f"cpu{self.cpu_quota_pct:g}")
        return "cg-" + "-".join(words)


class VmSpec(_Frozen):
    """A guest whose machine and whole I/O path are declared."""

    machine: Machine = "q35"
    vcpus: int = Field(default=1, ge=1, le=64)
    memory_mib: int = Field(default=512, ge=128, le=1 << 20)
    accel: Accel = "auto"
    #: QEMU CPU model; ``auto`` is ``host`` under KVM and ``qemu64`` under TCG.
    cpu: str = Field(default="auto", pattern=r"^[A-Za-z0-9_.+-]+(,[A-Za-z0-9_.+=-]+)*$")
    disks: tuple[DiskSpec, ...] = ()
    nics: tuple[NicSpec, ...] = ()
    #: Host directories shared over virtio-fs (the guest's memory is then shared).
    filesystems: tuple[SharedDirSpec, ...] = ()
    #: The guest kernel's speculative-execution mitigations. ``true`` is the
    #: distribution's default, what a cloud guest runs; ``false`` boots with
    #: ``mitigations=off``, which removes their cost from every system call and
    #: interrupt (a stock guest measured slower than a mitigations=off one).
    mitigations: bool = True
    #: The clocksource the guest kernel is told to use (see :data:`Clocksource`): every
    #: clock read of the I/O path goes through it, and under TCG an HPET or ACPI PM read
    #: is an emulated device access, a TSC read is not.
    clocksource: Clocksource = "auto"
    #: Further guest kernel command-line words (``key=value`` or flags), appended last,
    #: so they win over hvbench's own.
    kernel_args: tuple[str, ...] = ()
    #: I/O and CPU limits on the whole QEMU process from a cgroup hvbench creates
    #: (:class:`HostLimitsSpec`); None: none.
    host_limits: HostLimitsSpec | None = None

    @field_validator("kernel_args")
    @classmethod
    def _check_kernel_args(cls, words: tuple[str, ...]) -> tuple[str, ...]:
        for word in words:
            if not _KERNEL_WORD_RE.fullmatch(word):
                raise ValueError(f"kernel_args: expected command-line words without blanks, "
                                 f"quotes or control characters, got {word!r}")
        return words

    @model_validator(mode="after")
    def _check(self) -> VmSpec:
        if self.machine == "microvm":
            _check_microvm(self)
        _check_clocksource(self)
        if any(d.initiator == "guest" for d in self.disks) and not self.nics:
            raise ValueError("initiator = \"guest\" needs a NIC for the guest's initiator "
                             "(e.g. nic = { model = \"virtio-net\", backend = \"tap\" })")
        for nic in self.nics:
            if nic.queues is not None and nic.queues > self.vcpus:
                raise ValueError(f"nic queues = {nic.queues} needs vcpus >= {nic.queues} "
                                 f"(got vcpus = {self.vcpus}): the guest spreads one queue "
                                 "pair per vCPU")
        _check_host_limits(self)
        for bus, capacity in BUS_CAPACITY.items():
            count = sum(1 for d in self.disks if d.bus == bus)
            if count > capacity:
                raise ValueError(f"{count} disks on bus {bus}: one controller takes {capacity}")
        return self

    def label(self) -> str:
        """A short, stable name derived from the values (used to name cells and runs)."""
        parts = [self.machine, f"{self.vcpus}cpu", f"{self.memory_mib}M"]
        parts += [d.label() for d in self.disks]
        parts += [n.label() for n in self.nics]
        parts += [f.label() for f in self.filesystems]
        if not self.mitigations:
            parts.append("mitigations-off")
        if self.clocksource != "auto":
            parts.append(f"clock-{self.clocksource}")
        parts += self.kernel_args
        if self.host_limits is not None:
            parts.append(self.host_limits.label())
        return "_".join(parts)

    @property
    def shares_memory(self) -> bool:
        """The guest's RAM must be shared with another process (a vhost-user backend
        maps it to reach the virtqueues and buffers: a vhost-user disk's storage
        daemon, a shared directory's virtiofsd)."""
        return bool(self.filesystems) or any(d.backend == "vhost-user" for d in self.disks)

    def kernel_cmdline(self) -> str:
        """The guest kernel words this spec adds to the image's command line (a leading
        blank, or empty)."""
        words = ([] if self.mitigations else ["mitigations=off"]) + list(self.kernel_args)
        return "".join(f" {w}" for w in words)


def _check_host_limits(spec: VmSpec) -> None:
    limits = spec.host_limits
    if limits is None or not limits.io:
        return
    if not spec.disks:
        raise ValueError("host_limits: read_bps, write_bps, read_iops and write_iops limit "
                         "a benchmark disk's host device: the guest has no disk")
    for index, disk in enumerate(spec.disks):
        if source_kind(disk.source).startswith(NETWORK_SOURCE_PREFIXES):
            raise ValueError(f"host_limits: disk {index} ({disk.source}) is served over the "
                             "network, not by a host block device an I/O limit could name")


def _check_clocksource(spec: VmSpec) -> None:
    if spec.clocksource == "kvm-clock" and spec.accel != "kvm":
        raise ValueError(
            f"clocksource = \"kvm-clock\" needs accel = \"kvm\" (got {spec.accel!r}): "
            "only a KVM guest has a kvm-clock, and accel = \"auto\" may fall back to TCG"
        )
    if spec.clocksource in ("hpet", "acpi_pm") and spec.machine == "microvm":
        raise ValueError(
            f"clocksource = {spec.clocksource!r}: machine=microvm has no HPET and no ACPI "
            "PM timer (use tsc, kernel or auto)"
        )


def _check_microvm(spec: VmSpec) -> None:
    for disk in spec.disks:
        if disk.backend == "vhost-user":
            raise ValueError("machine=microvm cannot carry a vhost-user disk: hvbench "
                             "finds it by its PCI address (use q35 or pc)")
        if disk.bus not in MICROVM_DISK_BUSES:
            raise ValueError(
                f"machine=microvm cannot carry bus={disk.bus}: microvm has no PCI or ISA "
                "disk controllers, only virtio-mmio (use virtio-blk or virtio-scsi)"
            )
    for nic in spec.nics:
        if nic.model not in MICROVM_NIC_MODELS:
            raise ValueError(
                f"machine=microvm cannot carry NIC model={nic.model}: it has no PCI bus "
                "(use virtio-net)"
            )


def spec_error(exc: ValidationError, source: str | Where, *,
               model: type[BaseModel] | None = None,
               renames: Mapping[Loc, Loc] | None = None) -> SpecError:
    """Turn a pydantic error into a :class:`SpecError` with one line per problem, each
    naming the source (file and line for a :class:`Where`), the field as the input
    spells it (``renames``) and what was expected; "did you mean" for an unknown field
    of ``model`` or an unknown choice (:mod:`hvbench.model.problems`)."""
    return SpecError("\n".join(problems(exc, source, model=model, renames=renames)))


def vm_spec_from_mapping(data: Mapping[str, Any], source: str = "VmSpec") -> VmSpec:
    """Validate a mapping (from TOML or CLI options) into a :class:`VmSpec`.

    Raises :class:`SpecError` naming ``source``, the field path and what was expected.
    """
    try:
        return VmSpec.model_validate(dict(data))
    except ValidationError as exc:
        raise spec_error(exc, source, model=VmSpec) from exc
