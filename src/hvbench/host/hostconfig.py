"""The host configuration around a QEMU process, read at cell start: the I/O and CPU
limits of its cgroups (blkio throttle v1, io.max v2, CPU quota, shares/weight, cpuset),
the queue settings of the block devices under its image files, and whether it opened
them with O_DIRECT (the flags of its file descriptors in /proc/PID/fdinfo).

This is evidence for ``hvbench explain`` (a limit found outside QEMU's configuration is
named with its cgroup path and value). Only reads; every file that cannot be read is
left out (a process that exited, a controller that is not mounted).
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["RAW_KIND", "ProcRoots", "io_stat_file", "parse_cgroup_file", "parse_io_max",
           "parse_throttle", "read_host_config"]

#: The raw-output kind the runner stores the configuration under (JSON).
RAW_KIND = "host-config"
#: O_DIRECT in the octal ``flags`` of /proc/PID/fdinfo/N (x86, arm64: 0o40000).
O_DIRECT = 0o40000
#: The access-mode bits of those flags; O_RDONLY images (the guest's root) are skipped.
O_ACCMODE = 0o3
#: Extensions of the disk images QEMU opens (``disk<N>.<format>``, users' images):
#: its log and console files are writable regular files too.
IMAGE_SUFFIXES = (".raw", ".qcow2", ".img", ".qcow", ".vmdk", ".vdi")
#: cgroup v1 throttle files and what each limits.
THROTTLE_FILES = {"blkio.throttle.read_bps_device": "read_bps",
                  "blkio.throttle.write_bps_device": "write_bps",
                  "blkio.throttle.read_iops_device": "read_iops",
                  "blkio.throttle.write_iops_device": "write_iops"}
#: io.max keys (cgroup v2) and their v1 names.
IO_MAX_KEYS = {"rbps": "read_bps", "wbps": "write_bps", "riops": "read_iops",
               "wiops": "write_iops"}


@dataclass(frozen=True)
class ProcRoots:
    """Where /proc, /sys/fs/cgroup and /sys/dev/block are (tests point them at a tree)."""

    proc: Path = Path("/proc")
    cgroup: Path = Path("/sys/fs/cgroup")
    dev_block: Path = Path("/sys/dev/block")


def parse_cgroup_file(text: str) -> dict[str, str]:
    """``/proc/PID/cgroup`` as controller -> path (v2's unified hierarchy: ``""``)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(",") if parts[1] else [""]:
            out[controller.removeprefix("name=")] = parts[2]
    return out


def parse_throttle(text: str) -> list[tuple[str, int]]:
    """A v1 throttle file: (``MAJ:MIN``, limit) per line."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out.append((parts[0], int(parts[1])))
    return out


def parse_io_max(text: str) -> list[tuple[str, str, int]]:
    """v2 ``io.max``: (``MAJ:MIN``, v1-style kind, limit) for every limit not ``max``."""
    out = []
    for line in text.splitlines():
        device, *pairs = line.split()
        for pair in pairs:
            key, _, value = pair.partition("=")
            if key in IO_MAX_KEYS and value.isdigit():
                out.append((device, IO_MAX_KEYS[key], int(value)))
    return out


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _ancestors(root: Path, path: str) -> list[Path]:
    """The cgroup directory of ``path`` under ``root`` and its parents up to the root
    (a limit on a parent applies to its children)."""
    parts = [p for p in path.split("/") if p]
    return [root.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]


def _v1_dir(roots: ProcRoots, controller: str) -> Path | None:
    for name in (controller, f"{controller},cpuacct", f"cpuacct,{controller}"):
        if (roots.cgroup / name).is_dir():
            return roots.cgroup / name
    return None


def _v2_root(roots: ProcRoots) -> Path | None:
    """The unified hierarchy: the cgroup root itself (v2), or ``unified`` (hybrid)."""
    for base in (roots.cgroup, roots.cgroup / "unified"):
        if (base / "cgroup.controllers").exists():
            return base
    return None


def _io_limits(roots: ProcRoots, groups: dict[str, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    blkio = _v1_dir(roots, "blkio")
    if blkio is not None and "blkio" in groups:
        for directory in _ancestors(blkio, groups["blkio"]):
            for name, kind in THROTTLE_FILES.items():
                for device, value in parse_throttle(_read(directory / name) or ""):
                    out.append({"path": str(directory / name), "device": device,
                                "kind": kind, "value": value, "remove": "0"})
    unified = _v2_root(roots)
    if "" in groups and unified is not None:
        for directory in _ancestors(unified, groups[""]):
            for device, kind, value in parse_io_max(_read(directory / "io.max") or ""):
                short = {v: k for k, v in IO_MAX_KEYS.items()}[kind]
                out.append({"path": str(directory / "io.max"), "device": device,
                            "kind": kind, "value": value, "remove": f"{short}=max"})
    return out


#: The cgroup I/O statistics files, preferred first: v2, then v1's throttle layer
#: (counts every bio of the group, whatever the I/O scheduler).
IO_STAT_FILES = ("io.stat", "blkio.throttle.io_service_bytes_recursive",
                 "blkio.throttle.io_service_bytes")


def _own_stat(root: Path | None, path: str | None, name: str) -> Path | None:
    """The statistics file ``name`` of the hvbench cgroup at ``path`` under ``root``, or
    of its nearest parent that has one below the ``hvbench-*`` top (v2's io controller
    is not threaded: a thread group's I/O shows in its threaded domain). None when
    the path is not one hvbench created."""
    parts = [p for p in (path or "").split("/") if p]
    if root is None or not parts or not parts[0].startswith("hvbench-"):
        return None
    for n in range(len(parts), 0, -1):
        candidate = root.joinpath(*parts[:n]) / name
        if candidate.is_file():
            return candidate
    return None


def io_stat_file(pid: int, roots: ProcRoots = ProcRoots()) -> Path | None:
    """The I/O statistics file (v2 ``io.stat``, v1
    ``blkio.throttle.io_service_bytes_recursive``) of the cgroup process ``pid`` is in,
    when that cgroup is one hvbench created (``hvbench-*``) and the io/blkio controller
    accounts it; None otherwise (a process in the user's own cgroup is not attributed
    through it: other processes may share it). Raises nothing."""
    groups = parse_cgroup_file(_read(roots.proc / str(pid) / "cgroup") or "")
    for name in IO_STAT_FILES[1:]:
        found = _own_stat(_v1_dir(roots, "blkio"), groups.get("blkio"), name)
        if found is not None:
            return found
    return _own_stat(_v2_root(roots), groups.get(""), IO_STAT_FILES[0])


def _cpu_limits(roots: ProcRoots, groups: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cpu, cpuset = _v1_dir(roots, "cpu"), _v1_dir(roots, "cpuset")
    files: list[tuple[Path | None, str, tuple[str, ...]]] = [
        (cpu, "cpu", ("cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.shares")),
        (cpuset, "cpuset", ("cpuset.cpus",))]
    unified = _v2_root(roots)
    if "" in groups and unified is not None:
        files.append((unified, "", ("cpu.max", "cpu.weight", "cpuset.cpus.effective")))
    for base, controller, names in files:
        if base is None or controller not in groups:
            continue
        directory = base.joinpath(*[p for p in groups[controller].split("/") if p])
        for name in names:
            text = _read(directory / name)
            if text is not None:
                out[name] = {"path": str(directory / name), "value": text.strip()}
    return out


def _queue(roots: ProcRoots, device: int) -> dict[str, Any]:
    """The queue settings of the block device holding a file (its whole disk's when
    it is a partition)."""
    node = roots.dev_block / f"{os.major(device)}:{os.minor(device)}"
    queue = node / "queue"
    if not queue.is_dir():
        queue = node / ".." / "queue"
    out: dict[str, Any] = {"device": f"{os.major(device)}:{os.minor(device)}"}
    with contextlib.suppress(OSError):
        out["name"] = node.resolve().name
    for name in ("scheduler", "nr_requests", "rotational"):
        text = _read(queue / name)
        if text is not None:
            out[name] = text.strip()
    return out


def _images(roots: ProcRoots, pid: int) -> list[dict[str, Any]]:
    """QEMU's writable regular files (its disk images) with their open flags."""
    out = []
    fd_dir = roots.proc / str(pid) / "fd"
    with contextlib.suppress(OSError):
        for entry in sorted(fd_dir.iterdir(), key=lambda p: int(p.name)):
            with contextlib.suppress(OSError, ValueError):
                target = str(entry.readlink())
                info = entry.stat()
                if not stat.S_ISREG(info.st_mode) or not target.endswith(IMAGE_SUFFIXES):
                    continue
                flags = _fd_flags(_read(roots.proc / str(pid) / "fdinfo" / entry.name) or "")
                if flags is None or flags & O_ACCMODE == os.O_RDONLY:
                    continue
                out.append({"path": target, "flags": oct(flags),
                            "o_direct": bool(flags & O_DIRECT), "st_dev": info.st_dev})
    return out


def _fd_flags(text: str) -> int | None:
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return int(value.strip(), 8)
    return None


def read_host_config(pid: int, roots: ProcRoots | None = None) -> dict[str, Any]:
    """The configuration around process ``pid`` (see the module docstring) as JSON-ready
    data: ``cgroups`` (controller -> path), ``io_limits`` (each with its file, device,
    kind and value), ``cpu`` (quota, period, shares or weight, cpuset), ``images``
    (path, octal flags, ``o_direct``) and ``queues`` (the devices under the images).
    Reads only; never raises for a file it cannot read (an empty result for a process
    that is gone). Takes a few milliseconds."""
    roots = roots or ProcRoots()
    groups = parse_cgroup_file(_read(roots.proc / str(pid) / "cgroup") or "")
    images = _images(roots, pid)
    devices = sorted({img.pop("st_dev") for img in images})
    return {"pid": pid, "cgroups": groups, "io_limits": _io_limits(roots, groups),
            "cpu": _cpu_limits(roots, groups), "images": images,
            "queues": [_queue(roots, d) for d in devices]}
