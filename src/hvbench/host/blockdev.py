"""Host block devices a study gives whole to a guest or measures natively ("phy").

hvbench only ever opens the device a study names, and only after :func:`device_problem`
found it free: a block device that is neither mounted itself, nor holds a mounted
partition, nor is used by swap, device-mapper/md/LVM (``holders``) or held open
exclusively by anyone else (the kernel's ``O_EXCL`` claim, which a mount of any of its
partitions also takes). Writing benchmark data to such a device would destroy a file
system, so the check comes before the guest boots and again just before it starts.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from hvbench.errors import HostError

_SYS_BLOCK = Path("/sys/class/block")


def _dev_numbers(path: Path) -> set[str]:
    """``MAJOR:MINOR`` of the device and of each of its partitions (from sysfs)."""
    found: set[str] = set()
    for entry in [path, *path.iterdir()] if path.is_dir() else []:
        with contextlib.suppress(OSError):
            if entry == path or (entry / "partition").is_file():
                found.add((entry / "dev").read_text().strip())
    return found


def _mounts_of(numbers: set[str], mountinfo: str) -> list[str]:
    """The mount points in ``mountinfo`` (``/proc/self/mountinfo`` text) whose source
    device is one of ``numbers`` (field 3 is ``MAJOR:MINOR``)."""
    points = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[2] in numbers:
            points.append(fields[4])
    return points


def _in_swap(real: str, names: set[str]) -> bool:
    with contextlib.suppress(OSError):
        for line in Path("/proc/swaps").read_text().splitlines()[1:]:
            used = line.split()[0] if line.split() else ""
            if used == real or used.rsplit("/", 1)[-1] in names:
                return True
    return False


def _usage(real: str, numbers: set[str], sysdir: Path) -> str | None:
    """Why the device (``numbers``: its and its partitions' ``MAJOR:MINOR``) is busy,
    from the mount table, sysfs holders and the swap list; None when none uses it."""
    mountinfo = ""
    with contextlib.suppress(OSError):
        mountinfo = Path("/proc/self/mountinfo").read_text()
    mounted = _mounts_of(numbers, mountinfo)
    if mounted:
        return f"is mounted (or holds a mounted partition) at {', '.join(sorted(mounted))}"
    names = {sysdir.name}
    if sysdir.is_dir():
        names |= {p.name for p in sysdir.iterdir() if (p / "partition").is_file()}
    holders = sorted(h.name for n in names for h in (_SYS_BLOCK / n / "holders").glob("*"))
    if holders:
        return f"is in use by {', '.join(holders)} (device-mapper, md or LVM)"
    if _in_swap(real, names):
        return "is in use as swap"
    return None


def _exclusive_open(real: str) -> str | None:
    """Open ``real`` read-only with ``O_EXCL`` and close it: the kernel refuses
    (EBUSY) while anyone holds it (a mount of it or of a partition, a claim)."""
    try:
        fd = os.open(real, os.O_RDONLY | os.O_EXCL | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            return "is in use (the kernel refuses an exclusive open: mounted or claimed)"
        return f"cannot be opened: {exc.strerror}"
    os.close(fd)
    return None


def device_problem(device: str) -> str | None:
    """Why ``device`` may not be given to a benchmark (None: it is free).

    Reads sysfs, /proc/self/mountinfo and /proc/swaps, then opens the device read-only
    with ``O_EXCL`` (closed at once; nothing is written). Never raises.
    """
    try:
        info = Path(device).stat()
    except OSError as exc:
        return f"cannot be opened: {exc.strerror}"
    if not stat.S_ISBLK(info.st_mode):
        return "is not a block device"
    real = os.path.realpath(device)
    sysdir = _SYS_BLOCK / real.rsplit("/", 1)[-1]
    numbers = {f"{os.major(info.st_rdev)}:{os.minor(info.st_rdev)}"}
    if not (sysdir / "partition").is_file():
        # A whole disk: a mount of any of its partitions makes it busy too. (For a
        # partition only its own use counts: the rest of its disk is not ours.)
        numbers |= _dev_numbers(sysdir)
    return _usage(real, numbers, sysdir) or _exclusive_open(real)


def device_size(device: str) -> int:
    """The size of block device ``device`` in bytes (sysfs ``size`` x 512). Raises
    :class:`HostError` when sysfs does not tell it."""
    name = os.path.realpath(device).rsplit("/", 1)[-1]
    try:
        return int((_SYS_BLOCK / name / "size").read_text().strip()) * 512
    except (OSError, ValueError) as exc:
        raise HostError(f"cannot read the size of block device {device}: {exc}") from exc


def require_free_device(device: str, what: str) -> None:
    """Raise :class:`HostError` (one line: ``what``, the device and why) unless
    :func:`device_problem` finds ``device`` free."""
    problem = device_problem(device)
    if problem is not None:
        raise HostError(f"{what}: {device} {problem}; hvbench refuses a device in use")
