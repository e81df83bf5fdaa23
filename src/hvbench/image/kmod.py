"""Pick the kernel modules the guest needs and their dependencies.

Debian's bookworm kernel ships uncompressed ``.ko`` files (CONFIG_MODULE_COMPRESS_NONE)
and builds almost every driver we need as a module, so the guest's busybox ``modprobe``
(which reads ``modules.dep`` and ``modules.alias``) can load them by device modalias as
long as ``depmod`` ran for the initramfs tree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from hvbench.errors import ImageError

#: Drivers for every device hvbench attaches, plus ext4 and the crypto modules that
#: ext4/jbd2 (crc32c) and sd_mod (t10-pi: crct10dif, crc64-rocksoft) request at load time
#: through /sbin/modprobe. Names use the module name, with either ``-`` or ``_``.
WANTED_MODULES: tuple[str, ...] = (
    # virtio transports: PCI (q35, pc) and MMIO (microvm)
    "virtio_pci",
    "virtio_mmio",
    # storage
    "virtio_blk",
    "virtio_scsi",
    "sd_mod",
    "ahci",
    "ata_piix",
    "ata_generic",
    "sym53c8xx",
    "nvme",
    # shared host directories (virtio-fs)
    "virtiofs",
    # network block devices of a guest-initiator disk (nbd-client)
    "nbd",
    # ATA over Ethernet (seed 001's EBS protocol), attached by the guest over its NIC
    "aoe",
    # network
    "virtio_net",
    "e1000",
    "8139cp",
    "8139too",
    # the guest agent's virtio-serial port
    "virtio_console",
    # file system for benchmark disks, and the checksums it and the SCSI disk driver need
    "ext4",
    "crc32c_generic",
    "crc32c_intel",
    "crct10dif_generic",
    "crct10dif_pclmul",
    "crc64_rocksoft_generic",
)

#: What the stage-1 initramfs needs to mount the root disk: the virtio transports (PCI
#: for q35/pc, MMIO for microvm), the disk driver, the root disk's file system (see
#: builder.ROOTFS_TYPE) and overlayfs for the writable layer.
STAGE1_MODULES: tuple[str, ...] = (
    "virtio_pci",
    "virtio_mmio",
    "virtio_blk",
    "squashfs",
    "overlay",
    # The guest agent's port: loaded with the root disk's drivers, in the same modprobe,
    # so stage 2 starts no modprobe of its own when the guest declares no disks or NICs.
    "virtio_console",
)


def module_name(path: str) -> str:
    """Return the kernel's name for a module file (``crc32c-intel.ko`` -> crc32c_intel)."""
    base = path.rsplit("/", 1)[-1]
    for suffix in (".ko", ".ko.xz", ".ko.zst", ".ko.gz"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    return base.replace("-", "_")


def parse_modules_dep(text: str) -> dict[str, list[str]]:
    """Parse ``modules.dep`` into ``{module path: [dependency paths]}``."""
    deps: dict[str, list[str]] = {}
    for line in text.splitlines():
        if ":" not in line:
            continue
        module, _, rest = line.partition(":")
        deps[module.strip()] = rest.split()
    return deps


def module_closure(deps: Mapping[str, list[str]], wanted: Iterable[str]) -> list[str]:
    """Return the module paths of ``wanted`` (module names) and all their dependencies.

    Raises:
        ImageError: a wanted module is not in ``modules.dep``.
    """
    by_name = {module_name(path): path for path in deps}
    result: list[str] = []
    pending: list[str] = []
    for name in wanted:
        path = by_name.get(name.replace("-", "_"))
        if path is None:
            raise ImageError(f"kernel module {name} is not in modules.dep")
        pending.append(path)
    while pending:
        path = pending.pop()
        if path in result:
            continue
        result.append(path)
        pending.extend(deps.get(path, []))
    return sorted(result)


def builtin_config(config_text: str) -> dict[str, str]:
    """Parse a kernel ``config-*`` file into ``{CONFIG_X: "y"|"m"|value}``."""
    values: dict[str, str] = {}
    for line in config_text.splitlines():
        if line.startswith("CONFIG_") and "=" in line:
            key, _, value = line.partition("=")
            values[key] = value
    return values


def kernel_release(root: Path) -> str:
    """Return the single kernel release under ``root/lib/modules``.

    Raises:
        ImageError: there is no kernel, or more than one.
    """
    modules = root / "lib" / "modules"
    releases = sorted(p.name for p in modules.iterdir()) if modules.is_dir() else []
    if len(releases) != 1:
        raise ImageError(f"expected one kernel under {modules}, found {releases or 'none'}")
    return releases[0]
