"""What is on a disk inside a guest hvbench did not create, before it writes to it.

An existing libvirt domain's disk (``disk = "vdb"``) may hold the guest's root or a
mounted file system of the operator's. hvbench asks the guest itself, through its
agent, using kernel interfaces only (the bundled tools lsblk and findmnt are not in
every guest): :data:`PROBE_SCRIPT` prints, one line each, the device's and its
partitions' and holders' (device-mapper, md, LVM) kernel names and ``MAJOR:MINOR``
numbers from ``/sys/class/block``, and the device the kernel command line's ``root=``
names. :func:`disk_usage` (pure) matches those against the mount tables
(``/proc/1/mountinfo`` and the agent's own ``/proc/self/mountinfo``) and ``/proc/swaps``
and says, in words, what is on the disk.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: Run as ``sh -c PROBE_SCRIPT probe DEVICE`` in the guest (POSIX sh, busybox too).
#: Output lines: ``part NAME MAJ:MIN`` (the device and its partitions), ``holder NAME
#: MAJ:MIN`` (what stacks on them) and ``root PATH`` (``root=`` resolved).
PROBE_SCRIPT = r"""
dev=$(readlink -f "$1"); name=${dev##*/}; sys=/sys/class/block/$name
for p in "$sys" "$sys/$name"*; do
  [ -f "$p/dev" ] && echo "part ${p##*/} $(cat "$p/dev")"
done
for h in "$sys"/holders/* "$sys/$name"*/holders/*; do
  [ -f "$h/dev" ] && echo "holder ${h##*/} $(cat "$h/dev")"
done
for arg in $(cat /proc/cmdline); do
  case $arg in
    root=UUID=*) echo "root $(readlink -f "/dev/disk/by-uuid/${arg#root=UUID=}")" ;;
    root=PARTUUID=*) echo "root $(readlink -f "/dev/disk/by-partuuid/${arg#root=PARTUUID=}")" ;;
    root=LABEL=*) echo "root $(readlink -f "/dev/disk/by-label/${arg#root=LABEL=}")" ;;
    root=/*) echo "root $(readlink -f "${arg#root=}")" ;;
  esac
done
true
"""


@dataclass(frozen=True)
class GuestDevices:
    """A guest disk as :data:`PROBE_SCRIPT` found it: name -> ``MAJOR:MINOR`` of the
    disk and its partitions, of the devices that hold them, and the ``root=`` device."""

    parts: dict[str, str]
    holders: dict[str, str]
    root: str | None


def parse_probe(text: str) -> GuestDevices:
    """:data:`PROBE_SCRIPT`'s output (pure). Unknown lines are ignored."""
    parts: dict[str, str] = {}
    holders: dict[str, str] = {}
    root = None
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[0] in ("part", "holder"):
            (parts if fields[0] == "part" else holders)[fields[1]] = fields[2]
        elif len(fields) == 2 and fields[0] == "root":
            root = fields[1]
    return GuestDevices(parts, holders, root)


def _mounts(numbers: dict[str, str], mountinfos: Iterable[str]) -> list[str]:
    """``MOUNTPOINT (FSTYPE on NAME)`` for each mount whose device (mountinfo field 3)
    is one of ``numbers`` (name -> ``MAJ:MIN``); each point once."""
    by_number = {number: name for name, number in numbers.items()}
    found: dict[str, str] = {}
    for table in mountinfos:
        for line in table.splitlines():
            fields = line.split()
            if len(fields) < 5 or fields[2] not in by_number or " - " not in line:
                continue
            fstype = line.split(" - ", 1)[1].split()[0]
            point = fields[4]
            what = "the guest's root file system /" if point == "/" else point
            found.setdefault(point, f"{what} ({fstype} on {by_number[fields[2]]})")
    return [found[p] for p in sorted(found)]


def _swaps(names: Iterable[str], swaps: str) -> list[str]:
    wanted = set(names)
    used = [line.split()[0] for line in swaps.splitlines()[1:] if line.split()]
    return [f"swap on {u.rsplit('/', 1)[-1]}" for u in used if u.rsplit("/", 1)[-1] in wanted]


def disk_usage(devices: GuestDevices, mountinfos: Iterable[str], swaps: str) -> list[str]:
    """What on the probed disk is in use, in words (pure): mounted file systems (the
    root named as such), swap, devices stacked on it, the kernel's ``root=``. Empty
    when the guest shows none of these."""
    numbers = {**devices.parts, **devices.holders}
    used = _mounts(numbers, mountinfos)
    used += _swaps(numbers, swaps)
    used += [f"{name} (device-mapper, md or LVM) stacked on it"
             for name in sorted(devices.holders)]
    root = devices.root.rsplit("/", 1)[-1] if devices.root else None
    if root in numbers and not any(u.startswith("the guest's root") for u in used):
        used.append(f"the guest's root device {root} (kernel root=)")
    return used
