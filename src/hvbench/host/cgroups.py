"""CPU cgroups for guests: weights, pinning and quotas of groups of QEMU threads.

Seed 003 §6 tuned Xen's credit scheduler (weights Dom0:Dom1:Dom2 = 0.5:1:1 ... 2:1:1).
The analog here: each guest's vCPU threads, and the host-side I/O threads of every
guest (QEMU main loops, iothreads, thread-pool workers: what Dom0 did for Xen guests),
go into cgroups hvbench creates under a parent ``hvbench-<tag>``.

Both cgroup versions are handled, whichever holds the cpu controller:

- **v1** (``cpu`` hierarchy): ``cpu.shares`` = 1024 x ratio; quota through
  ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``; pinning in the separate ``cpuset``
  hierarchy (``cpuset.cpus`` and ``cpuset.mems`` must be set before a task may join);
  usage from ``cpuacct.usage``. A thread is moved by writing its TID to ``tasks``.
- **v2** (unified): ``cpu.weight`` = 100 x ratio; ``cpu.max``; ``cpuset.cpus``; usage
  from ``cpu.stat``. Threads of one process may only sit in different cgroups of a
  *threaded* subtree: the parent is a domain with ``+cpu +cpuset`` in its
  ``cgroup.subtree_control``, the groups are ``threaded``; a process joins the parent
  (``cgroup.procs``) before its threads are written to ``cgroup.threads``.

Every path is written to an owner record (``<work_dir>/cgroups-<tag>.json``) *before*
it is created, so :func:`cleanup_orphaned_cgroups` can remove the cgroups of an hvbench
killed by ``kill -9``.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hvbench.errors import HostError, RootRequiredError
from hvbench.host import facts
from hvbench.host.paths import work_dir

CgroupVersion = Literal[1, 2]
PREFIX = "hvbench-"
RECORD_PREFIX = "cgroups-"
CFS_PERIOD_US = 100_000
#: Thread names of QEMU's vCPU threads (``CPU 0/TCG``, ``CPU 1/KVM``).
_VCPU_COMM_SUFFIXES = ("/TCG", "/KVM")


@dataclass(frozen=True)
class CgroupSupport:
    """Where the CPU controllers live; ``version`` None (with ``reason``) when absent."""

    version: CgroupVersion | None
    cpu_root: Path | None = None
    cpuset_root: Path | None = None
    cpuacct_root: Path | None = None
    reason: str = ""


def detect_cpu_cgroups(mounts_text: str | None = None, root: Path = Path("/")
                       ) -> CgroupSupport:
    """Which cgroup version holds the cpu controller, from /proc/self/mounts.

    A v1 ``cpu`` hierarchy wins (then the controller cannot be in v2); else a cgroup2
    mount whose ``cgroup.controllers`` lists ``cpu``."""
    text = mounts_text if mounts_text is not None else _read(Path("/proc/self/mounts"))
    v1: dict[str, Path] = {}
    v2: list[Path] = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        mount = root / fields[1].lstrip("/")
        if fields[2] == "cgroup":
            for option in fields[3].split(","):
                v1.setdefault(option, mount)
        elif fields[2] == "cgroup2":
            v2.append(mount)
    if "cpu" in v1:
        return CgroupSupport(1, v1["cpu"], v1.get("cpuset"), v1.get("cpuacct", v1["cpu"]))
    for mount in v2:
        if "cpu" in _read(mount / "cgroup.controllers").split():
            return CgroupSupport(2, mount, mount, mount)
    return CgroupSupport(None, reason="no cgroup hierarchy holds the cpu controller "
                         "(no v1 cpu mount, no cgroup2 mount listing cpu)")


def weight_to_shares(ratio: float) -> int:
    """cgroup v1 ``cpu.shares`` of a relative weight (1.0 -> 1024)."""
    return max(2, min(262144, round(1024 * ratio)))


def weight_to_v2(ratio: float) -> int:
    """cgroup v2 ``cpu.weight`` of a relative weight (1.0 -> 100)."""
    return max(1, min(10000, round(100 * ratio)))


@dataclass(frozen=True)
class GroupSettings:
    """One group: relative weight, CPUs to pin to (``"0"``, ``"0-1"``), quota in % of
    one CPU."""

    weight: float = 1.0
    cpus: str | None = None
    quota_pct: float | None = None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as exc:
        raise HostError(f"cannot write {value!r} to {path}: {exc.strerror}") from exc


def qemu_thread_groups(pid: int, vcpu_tids: Iterable[int]) -> tuple[list[int], list[int]]:
    """A QEMU process's threads split into (vCPU threads, the rest: main loop,
    iothreads, workers). ``vcpu_tids`` come from QMP; thread names are the fallback."""
    known = set(vcpu_tids)
    vcpus, others = [], []
    for task in sorted(Path(f"/proc/{pid}/task").glob("[0-9]*")):
        tid = int(task.name)
        comm = _read(task / "comm").strip()
        if tid in known or comm.endswith(_VCPU_COMM_SUFFIXES):
            vcpus.append(tid)
        else:
            others.append(tid)
    return vcpus, others


class CpuCgroups:
    """The cgroups of one run under ``hvbench-<tag>``: ``start()``, ``add_group()``,
    ``move_threads()``, ``stop()`` (safe twice; moves what is left back to the root
    and removes every directory). Raises :class:`RootRequiredError` without root,
    :class:`HostError` when the host lacks CPU cgroups or refuses a write."""

    def __init__(self, tag: str, support: CgroupSupport | None = None,
                 registry_dir: Path | None = None) -> None:
        self.tag = tag
        self._support = support
        self._registry_dir = registry_dir
        self.groups: dict[str, GroupSettings] = {}
        self.written: dict[str, dict[str, str]] = {}
        self._created: list[Path] = []
        self._record: Path | None = None

    def __enter__(self) -> CpuCgroups:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def support(self) -> CgroupSupport:
        if self._support is None:
            self._support = detect_cpu_cgroups()
        return self._support

    def _roots(self) -> list[Path]:
        s = self.support
        roots = [s.cpu_root, s.cpuset_root, s.cpuacct_root]
        return list(dict.fromkeys(r for r in roots if r is not None))

    def start(self) -> None:
        if self._support is None and not facts.is_root():
            raise RootRequiredError("CPU cgroups")
        if self.support.version is None:
            raise HostError(f"CPU weights need cgroups: {self.support.reason}")
        parents = [root / f"{PREFIX}{self.tag}" for root in self._roots()]
        self._write_record(parents)
        for parent in parents:
            self._mkdir(parent)
        if self.support.version == 2 and self.support.cpu_root is not None:
            _write(self.support.cpu_root / "cgroup.subtree_control", "+cpu +cpuset")
            _write(parents[0] / "cgroup.subtree_control", "+cpu +cpuset")
        elif self.support.cpuset_root is not None:
            self._inherit_cpuset(self.support.cpuset_root / f"{PREFIX}{self.tag}")

    def _write_record(self, paths: list[Path]) -> None:
        directory = self._registry_dir or work_dir()
        self._record = directory / f"{RECORD_PREFIX}{self.tag}.json"
        self._record.write_text(json.dumps({"pid": os.getpid(), "version": self.support.version,
                                            "paths": [str(p) for p in paths]}))

    def _mkdir(self, path: Path) -> None:
        try:
            path.mkdir()
        except FileExistsError:
            pass
        except OSError as exc:
            raise HostError(f"cannot create cgroup {path}: {exc.strerror}") from exc
        self._created.append(path)

    def _inherit_cpuset(self, path: Path) -> None:
        """v1 cpuset: a new cgroup starts empty; copy the parent's CPUs and nodes."""
        for name in ("cpuset.cpus", "cpuset.mems"):
            value = _read(path.parent / name).strip()
            if value:
                _write(path / name, value)

    def _group_dirs(self, name: str) -> list[Path]:
        return [root / f"{PREFIX}{self.tag}" / name for root in self._roots()]

    def add_group(self, name: str, settings: GroupSettings) -> None:
        """Create group ``name`` and write its weight, quota and CPUs."""
        paths = self._group_dirs(name)
        for path in paths:
            self._mkdir(path)
        self.groups[name] = settings
        self.written[name] = (self._configure_v2(paths[0], settings)
                              if self.support.version == 2 else self._configure_v1(name, settings))

    def _configure_v1(self, name: str, settings: GroupSettings) -> dict[str, str]:
        s = self.support
        out: dict[str, str] = {}
        cpu = (s.cpu_root or Path("/")) / f"{PREFIX}{self.tag}" / name
        out["cpu.shares"] = str(weight_to_shares(settings.weight))
        if settings.quota_pct is not None:
            out["cpu.cfs_period_us"] = str(CFS_PERIOD_US)
            out["cpu.cfs_quota_us"] = str(max(1000, round(CFS_PERIOD_US * settings.quota_pct
                                                          / 100)))
        for key, value in out.items():
            _write(cpu / key, value)
        if s.cpuset_root is not None:
            cpuset = s.cpuset_root / f"{PREFIX}{self.tag}" / name
            self._inherit_cpuset(cpuset)
            if settings.cpus is not None:
                _write(cpuset / "cpuset.cpus", settings.cpus)
                out["cpuset.cpus"] = settings.cpus
        return out

    def _configure_v2(self, path: Path, settings: GroupSettings) -> dict[str, str]:
        _write(path / "cgroup.type", "threaded")
        out = {"cpu.weight": str(weight_to_v2(settings.weight))}
        if settings.quota_pct is not None:
            quota = max(1000, round(CFS_PERIOD_US * settings.quota_pct / 100))
            out["cpu.max"] = f"{quota} {CFS_PERIOD_US}"
        if settings.cpus is not None:
            out["cpuset.cpus"] = settings.cpus
        for key, value in out.items():
            _write(path / key, value)
        return out

    def move_threads(self, name: str, tids: Iterable[int]) -> None:
        """Move threads into group ``name``; threads gone meanwhile are skipped."""
        for tid in tids:
            if not Path(f"/proc/{tid}").exists():
                continue
            if self.support.version == 2:
                self._move_v2(name, tid)
            else:
                for path in self._group_dirs(name):
                    self._move_one(path / "tasks", tid)

    def _move_v2(self, name: str, tid: int) -> None:
        parent = self._group_dirs(name)[0].parent
        tgid = _tgid(tid)
        if tgid is not None and str(tgid) not in _read(parent / "cgroup.procs").split():
            # The whole process joins the threaded subtree first (v2 moves processes
            # into a domain; only then may its threads be spread over threaded groups).
            self._move_one(parent / "cgroup.procs", tgid)
        self._move_one(parent / name / "cgroup.threads", tid)

    @staticmethod
    def _move_one(path: Path, tid: int) -> None:
        try:
            path.write_text(str(tid))
        except ProcessLookupError:
            return
        except OSError as exc:
            if Path(f"/proc/{tid}").exists():
                raise HostError(f"cannot move thread {tid} into {path.parent}: "
                                f"{exc.strerror}") from exc

    def usage_s(self, name: str) -> float:
        """CPU seconds the group's threads used since it was created."""
        s = self.support
        if s.version == 2:
            for line in _read(self._group_dirs(name)[0] / "cpu.stat").splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
            return 0.0
        root = s.cpuacct_root or s.cpu_root or Path("/")
        text = _read(root / f"{PREFIX}{self.tag}" / name / "cpuacct.usage").strip()
        return int(text) / 1e9 if text else 0.0

    def describe(self) -> dict[str, Any]:
        """The version, paths and values written, for the stored result."""
        return {"version": self.support.version, "tag": self.tag,
                "paths": [str(p) for p in self._created],
                "groups": {name: {"weight": g.weight, "cpus": g.cpus, "quota_pct": g.quota_pct,
                                  "written": self.written.get(name, {})}
                           for name, g in self.groups.items()}}

    def stop(self) -> None:
        """Move every task left back to the root cgroup and remove the directories,
        children first; remove the owner record. Raises :class:`HostError` at the end
        if a directory could not be removed."""
        failed = remove_cgroup_dirs(self._created)
        self._created.clear()
        if self._record is not None and not failed:
            self._record.unlink(missing_ok=True)
            self._record = None
        if failed:
            raise HostError(f"could not remove cgroups: {', '.join(failed)}")


def _tgid(tid: int) -> int | None:
    for line in _read(Path(f"/proc/{tid}/status")).splitlines():
        if line.startswith("Tgid:"):
            return int(line.split()[1])
    return None


def _evacuate(path: Path) -> None:
    """Move the tasks of cgroup ``path`` to the hierarchy's root."""
    root = path
    while (root.parent / "cgroup.procs").exists() and root.parent != root:
        root = root.parent
    for name, target in (("tasks", "tasks"), ("cgroup.threads", "cgroup.procs"),
                         ("cgroup.procs", "cgroup.procs")):
        for tid in _read(path / name).split():
            with contextlib.suppress(OSError):
                (root / target).write_text(tid)


def remove_cgroup_dirs(paths: Iterable[Path]) -> list[str]:
    """Remove cgroup directories (deepest first), emptying each; returns the failures."""
    failed = []
    for path in sorted(set(paths), key=lambda p: len(p.parts), reverse=True):
        if not path.is_dir():
            continue
        for child in sorted((c for c in path.iterdir() if c.is_dir()),
                            key=lambda p: len(p.parts), reverse=True):
            _evacuate(child)
            with contextlib.suppress(OSError):
                child.rmdir()
        _evacuate(path)
        try:
            path.rmdir()
        except OSError as exc:
            failed.append(f"{path} ({exc.strerror})")
    return failed


def cleanup_orphaned_cgroups(registry_dir: Path | None = None) -> list[str]:
    """Remove the cgroups recorded by hvbench processes that are gone (``kill -9``);
    returns what was removed."""
    directory = registry_dir or work_dir()
    removed: list[str] = []
    for record in sorted(directory.glob(f"{RECORD_PREFIX}*.json")):
        try:
            data = json.loads(record.read_text())
            pid = int(data["pid"])
            paths = [Path(p) for p in data["paths"]]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if Path(f"/proc/{pid}").exists():
            continue
        existing = [p for p in paths if p.is_dir()]
        for parent in existing:
            existing += [c for c in parent.iterdir() if c.is_dir()]
        if not remove_cgroup_dirs(existing):
            record.unlink(missing_ok=True)
            removed += [f"cgroup {p}" for p in existing]
    return removed
