"""Which block device holds a path (for :class:`~hvbench.monitors.readers.DiskStatsSampler`).

The device is found from ``os.stat(path).st_dev`` (major:minor) through the
``/sys/dev/block/MAJ:MIN`` symlink, whose target's last component is the name
/proc/diskstats uses (``vda``, ``vda1``, ``nvme0n1p2``, ``dm-0``).

Choice for partitions: :func:`device_for_path` reports the partition itself, because its
counters are exactly the I/O of the filesystem holding the path; I/O to other
partitions of the same disk would blur it. :func:`whole_disk` gives the parent disk for
callers that want the physical device's view (its queue, what the hardware sees).
Device-mapper and md devices (``dm-0``, ``md0``) are reported as themselves, as iostat
shows them; their underlying disks are not resolved.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from hvbench.errors import HostError

SYS_DEV_BLOCK = Path("/sys/dev/block")
SYS_CLASS_BLOCK = Path("/sys/class/block")


def device_for_path(path: Path | str) -> str:
    """The block device (partition if any) holding ``path``'s filesystem, as named in
    /proc/diskstats. A block device node (``/dev/vda``) resolves to itself.

    Raises :class:`HostError` when ``path`` does not exist or its filesystem has no
    block device (tmpfs, overlay, NFS, a btrfs subvolume's anonymous device).
    """
    try:
        st = Path(path).stat()
    except OSError as exc:
        raise HostError(f"cannot find the block device of {path}: {exc}") from exc
    dev = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
    major, minor = os.major(dev), os.minor(dev)
    try:
        target = (SYS_DEV_BLOCK / f"{major}:{minor}").readlink()
    except OSError as exc:
        # Major 0 is the kernel's "unnamed" devices: tmpfs, overlay, btrfs subvolumes.
        raise HostError(f"{path} is not on a block device (device {major}:{minor}); "
                        "no disk statistics exist for it") from exc
    return target.name


def whole_disk(device: str) -> str:
    """The whole disk a partition belongs to (``vda1`` -> ``vda``); a device that is not
    a partition is returned unchanged. Raises :class:`HostError` if ``device`` is not
    a block device of this host."""
    node = SYS_CLASS_BLOCK / device
    if not node.exists():
        raise HostError(f"no block device named {device!r} (not in {SYS_CLASS_BLOCK})")
    # Only partitions have a "partition" attribute; their sysfs directory sits inside
    # the parent disk's directory.
    if (node / "partition").exists():
        return node.resolve().parent.name
    return device


def backing_device(path: Path | str) -> str | None:
    """Like :func:`device_for_path`, but None when ``path`` has no block device."""
    try:
        return device_for_path(path)
    except HostError:
        return None


def device_number(device: str) -> str:
    """``MAJ:MIN`` of a block device named as in /proc/diskstats (``vda`` -> ``254:0``),
    the key cgroup I/O statistics use. Raises :class:`HostError` if ``device`` is not a
    block device of this host."""
    try:
        return (SYS_CLASS_BLOCK / device / "dev").read_text().strip()
    except OSError as exc:
        raise HostError(f"no block device named {device!r} ({exc})") from exc
