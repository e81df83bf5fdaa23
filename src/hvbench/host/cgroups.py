"""CPU cgroups for guests: weights, pinning and quotas of groups of QEMU threads.

Seed 003 §6 tuned Xen's credit scheduler (weights Dom0:Dom1:Dom2 = 0.5:1:1 ... 2:1:1).
The analog here: each guest's vCPU threads, and the host-side I/O threads of every
guest (QEMU main loops, iothreads, thread-pool workers: what Dom0 did for Xen guests),
go into cgroups hvbench creates under a parent ``hvbench-<tag>`` (see docs/cgroups.md).

Both cgroup versions are handled, whichever holds the cpu controller:

- **v1** (``cpu`` hierarchy): ``cpu.shares`` = 1024 x ratio; quota through
  ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``; pinning in the separate ``cpuset``
  hierarchy (``cpuset.cpus`` and ``cpuset.mems`` must be set before a task may join);
  usage from ``cpuacct.usage``. A thread is moved by writing its TID to ``tasks`` of
  every hierarchy.
- **v2** (unified): ``cpu.weight`` = 100 x ratio; ``cpu.max``; ``cpuset.cpus``; usage
  from ``cpu.stat``. Threads of one process may only sit in different cgroups of a
  *threaded* subtree: the parent is a domain with ``+cpu +cpuset`` in its
  ``cgroup.subtree_control``, the groups are ``threaded``; a process joins the parent
  (``cgroup.procs``) before its threads are written to ``cgroup.threads``.

Every path is written to an owner record (``<work_dir>/cgroups-<tag>.json``, with the
owner's pid and start time) *before* it is created, so :func:`cleanup_orphaned_cgroups`
can remove the cgroups of an hvbench killed by ``kill -9``, and only those.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import stat
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hvbench.errors import HostError, HvbenchError, RootRequiredError
from hvbench.host import facts
from hvbench.host.paths import work_dir
from hvbench.host.started import StartStop
from hvbench.model.spec import HostLimitsSpec

CgroupVersion = Literal[1, 2]
#: cgroup v1 throttle file and cgroup v2 ``io.max`` key of each I/O limit.
IO_LIMIT_FILES = {"read_bps": ("blkio.throttle.read_bps_device", "rbps"),
                  "write_bps": ("blkio.throttle.write_bps_device", "wbps"),
                  "read_iops": ("blkio.throttle.read_iops_device", "riops"),
                  "write_iops": ("blkio.throttle.write_iops_device", "wiops")}
#: Name prefix of every cgroup hvbench creates (directly under a hierarchy's root).
PREFIX = "hvbench-"
RECORD_PREFIX = "cgroups-"
#: CFS period for quotas, µs (the kernel's default; quotas are a share of it).
CFS_PERIOD_US = 100_000
#: The kernel refuses CFS quotas below 1 ms.
MIN_QUOTA_US = 1000
#: How long stop() keeps retrying an rmdir that fails with EBUSY, seconds: a v2 cgroup
#: stays populated for a moment after its last task exited.
RMDIR_WAIT_S = 2.0
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_CPU_LIST = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")


@dataclass(frozen=True)
class CgroupSupport:
    """Where the CPU controllers live; ``version`` None when absent. ``reason`` says why
    (not) available, e.g. that the cpu controller is bound to v1 and not to cgroup2."""

    version: CgroupVersion | None
    cpu_root: Path | None = None
    cpuset_root: Path | None = None
    cpuacct_root: Path | None = None
    reason: str = ""


# -- detection ---------------------------------------------------------------------
def _unescape(field: str) -> str:
    r"""A /proc/mounts field with its octal escapes (``\040`` for a space) decoded."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _parse_mounts(text: str, root: Path) -> tuple[dict[str, Path], list[Path]]:
    """({v1 controller: mount point}, [cgroup2 mount points]), paths under ``root``."""
    v1: dict[str, Path] = {}
    v2: list[Path] = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        mount = root / _unescape(fields[1]).lstrip("/")
        if fields[2] == "cgroup":
            # The controllers are among the options ("rw,relatime,cpu,cpuacct"); the
            # first mount of a hierarchy wins (later ones are usually bind mounts).
            for option in fields[3].split(","):
                v1.setdefault(option, mount)
        elif fields[2] == "cgroup2":
            v2.append(mount)
    return v1, v2


def _proc_cgroups_cpu(text: str) -> tuple[int, bool] | None:
    """(hierarchy id, enabled) of the cpu controller in /proc/cgroups; None if unknown.
    Hierarchy 0 means not bound to a v1 hierarchy (so available to cgroup2)."""
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[0] == "cpu" and fields[1].isdigit():
            return int(fields[1]), fields[3] == "1"
    return None


def detect_cpu_cgroups(mounts_text: str | None = None, root: Path = Path("/"), *,
                       cgroups_text: str | None = None) -> CgroupSupport:
    """Which cgroup version holds the cpu controller.

    Reads ``<root>/proc/self/mounts`` (or ``mounts_text``) and ``<root>/proc/cgroups``
    (or ``cgroups_text``; optional, it only sharpens the reason): a v1 ``cpu`` hierarchy
    wins (the controller is then unavailable to cgroup2), else a cgroup2 mount whose
    ``cgroup.controllers`` lists ``cpu``. Mount points are returned under ``root``, so a
    fake tree can be detected. Raises nothing: an unusable host gives version None."""
    if mounts_text is None:
        mounts_text = facts.read_text(root / "proc/self/mounts") or ""
    if cgroups_text is None:
        cgroups_text = facts.read_text(root / "proc/cgroups") or ""
    v1, v2 = _parse_mounts(mounts_text, root)
    cpu = _proc_cgroups_cpu(cgroups_text)
    if cpu is not None and not cpu[1]:
        return CgroupSupport(None, reason="the cpu controller is disabled in this kernel "
                             "(/proc/cgroups; cgroup_disable=cpu?)")
    if "cpu" in v1:
        v2_note = (f"; cgroup2 at {', '.join(map(str, v2))} cannot have the cpu controller"
                   " (it is bound to v1)") if v2 else ""
        return CgroupSupport(1, v1["cpu"], v1.get("cpuset"), v1.get("cpuacct"),
                             reason=f"cgroup v1: cpu controller at {v1['cpu']}{v2_note}")
    for mount in v2:
        controllers = (facts.read_text(mount / "cgroup.controllers") or "").split()
        if "cpu" in controllers:
            cpuset = mount if "cpuset" in controllers else None
            return CgroupSupport(2, mount, cpuset, mount,
                                 reason=f"cgroup v2: cpu controller at {mount}")
    bound = cpu is not None and cpu[0] != 0
    why = ("the cpu controller is bound to a cgroup v1 hierarchy that is not mounted"
           if bound else "no cgroup hierarchy holds the cpu controller "
           "(no v1 cpu mount, no cgroup2 mount listing cpu)")
    return CgroupSupport(None, reason=why)


# -- settings ------------------------------------------------------------------------
def _check_ratio(ratio: float) -> None:
    if not math.isfinite(ratio):
        raise ValueError(f"a CPU weight must be a finite number, not {ratio!r}")


def weight_to_shares(ratio: float) -> int:
    """cgroup v1 ``cpu.shares`` of a relative weight (1.0 -> 1024), clamped to the
    kernel's range [2, 262144]. Raises ValueError for NaN or infinity."""
    _check_ratio(ratio)
    return max(2, min(262144, round(1024 * ratio)))


def weight_to_v2(ratio: float) -> int:
    """cgroup v2 ``cpu.weight`` of a relative weight (1.0 -> 100), clamped to the
    kernel's range [1, 10000]. Raises ValueError for NaN or infinity."""
    _check_ratio(ratio)
    return max(1, min(10000, round(100 * ratio)))


def quota_us(quota_pct: float) -> int:
    """The CFS quota per :data:`CFS_PERIOD_US` of ``quota_pct`` % of one CPU (>= 1 ms)."""
    return max(MIN_QUOTA_US, round(CFS_PERIOD_US * quota_pct / 100))


@dataclass(frozen=True)
class GroupSettings:
    """One group: relative weight (1.0 = the default share), CPUs to pin to (a cpuset
    list such as ``"0"``, ``"0-1"``, ``"0,2-3"``), quota in % of one CPU (200 = two
    CPUs' worth). Raises ValueError for a non-positive weight or quota or a malformed
    CPU list."""

    weight: float = 1.0
    cpus: str | None = None
    quota_pct: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.weight) and self.weight > 0):
            raise ValueError(f"weight must be a positive number, not {self.weight!r}")
        if self.quota_pct is not None and not (math.isfinite(self.quota_pct)
                                               and self.quota_pct > 0):
            raise ValueError(f"quota_pct must be a positive number, not {self.quota_pct!r}")
        if self.cpus is not None and not _CPU_LIST.fullmatch(self.cpus):
            raise ValueError(f"cpus must be a CPU list such as '0' or '0-1', "
                             f"not {self.cpus!r}")


# -- small file helpers --------------------------------------------------------------
def _strerror(exc: OSError) -> str:
    name = errno.errorcode.get(exc.errno or 0, "")
    return f"{name}: {exc.strerror}" if name else str(exc.strerror or exc)


def _write(path: Path, value: str) -> None:
    """Write one value to a cgroup control file (one write() call, as cgroupfs wants).
    Raises HostError naming the file and the errno."""
    try:
        path.write_text(value)
    except OSError as exc:
        raise HostError(f"cannot write {value!r} to {path}: {_strerror(exc)}") from exc


def _rmdir(path: Path) -> None:
    """rmdir of a cgroup (its control files go with it on cgroupfs). A seam for tests."""
    path.rmdir()


def _check_name(kind: str, name: str) -> None:
    # Names become directory names under cgroupfs: no '/', no '..', no hidden names.
    if not _NAME.fullmatch(name):
        raise ValueError(f"cgroup {kind} {name!r}: use letters, digits, '_', '.', '-' "
                         "(at most 64, not starting with '.' or '-')")


# -- QEMU threads --------------------------------------------------------------------
def is_vcpu_name(comm: str) -> bool:
    """``CPU <n>/<accel>`` (``CPU 0/KVM``, ``CPU 12/TCG``): QEMU's vCPU threads with
    ``debug-threads=on`` (also the CPU sampler's test)."""
    head, slash, _ = comm.partition("/")
    return bool(slash) and head.startswith("CPU ") and head[4:].isdigit()


def qemu_thread_groups(pid: int, vcpu_tids: Iterable[int]) -> tuple[list[int], list[int]]:
    """A QEMU process's threads from ``/proc/<pid>/task``, split into (vCPU threads, the
    I/O side: main loop, iothreads, thread-pool workers, vhost workers and the rest).

    ``vcpu_tids`` come from QMP ``query-cpus-fast``; thread names are the fallback.
    Threads that exit while being read are left out; a process that is gone gives two
    empty lists. Raises nothing."""
    known = set(vcpu_tids)
    vcpus: list[int] = []
    others: list[int] = []
    try:
        tasks = sorted(int(t.name) for t in Path(f"/proc/{pid}/task").iterdir()
                       if t.name.isdigit())
    except OSError:
        return [], []
    for tid in tasks:
        comm = facts.read_text(f"/proc/{pid}/task/{tid}/comm")
        if comm is None:
            continue  # it exited meanwhile
        (vcpus if tid in known or is_vcpu_name(comm.strip()) else others).append(tid)
    return vcpus, others


def _tgid(tid: int) -> int | None:
    for line in (facts.read_text(f"/proc/{tid}/status") or "").splitlines():
        if line.startswith("Tgid:"):
            return int(line.split()[1])
    return None


def _v2_cgroup_of(tid: int) -> str | None:
    """The cgroup2 path of a thread (``/a/b``), from /proc/<tid>/cgroup."""
    for line in (facts.read_text(f"/proc/{tid}/cgroup") or "").splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


# -- the owner record ----------------------------------------------------------------
def _start_time(pid: int) -> int | None:
    """A process's start time (clock ticks since boot, /proc/PID/stat field 22), which
    tells a live owner from a new process that reused its pid."""
    text = facts.read_text(f"/proc/{pid}/stat")
    return int(text[text.rfind(")") + 2:].split()[19]) if text else None


def _owner_alive(data: dict[str, Any]) -> bool:
    started = _start_time(int(data["pid"]))
    recorded = data.get("start_time")
    return started is not None and (recorded is None or started == recorded)


def _load_record(path: Path) -> dict[str, Any] | None:
    """A record's data; None if it is missing or not a record."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    ok = (isinstance(data, dict) and isinstance(data.get("pid"), int)
          and isinstance(data.get("paths"), list))
    return data if ok else None


def _tmp_beside(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def _save_record(path: Path, data: dict[str, Any], *, exclusive: bool) -> None:
    """Write a record whole (a temp file renamed or linked into place), so a reader or a
    ``kill -9`` never sees half a record. ``exclusive``: FileExistsError if it exists."""
    tmp = _tmp_beside(path)
    try:
        tmp.write_text(json.dumps(data, indent=1))
        if exclusive:
            os.link(tmp, path)  # atomic create-if-absent, with the content already in
        else:
            tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


# -- removal -------------------------------------------------------------------------
def _root_of(path: Path, roots: Sequence[Path]) -> Path | None:
    """The hierarchy root ``path`` lies under, if ``path`` is one of hvbench's cgroups:
    its first component below the root starts with ``hvbench-``. None otherwise, and
    then it is never touched. Without recorded roots (records of older versions) the
    root is the parent of the path's first ``hvbench-`` component."""
    if not roots:
        first = next((i for i, part in enumerate(path.parts) if part.startswith(PREFIX)),
                     None)
        roots = [Path(*path.parts[:first])] if first else []
    for root in sorted(roots, key=lambda r: len(r.parts), reverse=True):
        if path.is_relative_to(root):
            below = path.relative_to(root).parts
            if below and below[0].startswith(PREFIX):
                return root
    return None


def _evacuate(path: Path, root: Path) -> None:
    """Move every task of cgroup ``path`` to its hierarchy's ``root``. v1 lists threads
    in ``tasks``; v2 threaded groups in ``cgroup.threads``, but a thread cannot leave a
    threaded subtree alone, so its TID goes to the root's ``cgroup.procs``, which moves
    its whole process. Tasks that exit meanwhile are no error."""
    for source, target in (("tasks", "tasks"), ("cgroup.threads", "cgroup.procs"),
                           ("cgroup.procs", "cgroup.procs")):
        for tid in (facts.read_text(path / source) or "").split():
            with contextlib.suppress(OSError):
                (root / target).write_text(tid)


def _remove_one(path: Path, root: Path, deadline: float) -> str | None:
    """Empty and remove one cgroup (no children left); the failure, if any."""
    while True:
        _evacuate(path, root)
        try:
            _rmdir(path)
            return None
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                return f"{path} ({_strerror(exc)})"
        time.sleep(0.05)


def _subtree(path: Path) -> list[Path]:
    """``path`` and every directory below it."""
    found = [path]
    with contextlib.suppress(OSError):
        for child in path.iterdir():
            if child.is_dir() and not child.is_symlink():
                found += _subtree(child)
    return found


def remove_cgroups(paths: Iterable[Path], roots: Sequence[Path] = ()
                   ) -> tuple[list[Path], list[str]]:
    """Remove hvbench cgroups and everything below them, deepest first, moving their
    tasks to the hierarchy root first. Paths that are not hvbench cgroups under one of
    ``roots`` (see :func:`_root_of`) are refused. Returns (removed, failures); raises
    nothing."""
    removed: list[Path] = []
    todo, failed = removal_plan(paths, roots)
    deadline = time.monotonic() + RMDIR_WAIT_S
    for path in todo:
        failure = _remove_one(path, todo[path], deadline)
        if failure is None:
            removed.append(path)
        else:
            failed.append(failure)
    return removed, failed


def removal_plan(paths: Iterable[Path], roots: Sequence[Path] = ()
                 ) -> tuple[dict[Path, Path], list[str]]:
    """What :func:`remove_cgroups` removes: every existing cgroup at or below
    ``paths``, deepest first, with its hierarchy root; and the refusals (paths that are
    not hvbench cgroups under ``roots``). Reads the filesystem only."""
    failed: list[str] = []
    todo: dict[Path, Path] = {}
    for path in paths:
        root = _root_of(path, roots)
        if root is None:
            failed.append(f"{path} (not an hvbench cgroup: left alone)")
            continue
        for found in _subtree(path) if path.is_dir() else []:
            todo[found] = root
    ordered = sorted(todo, key=lambda p: len(p.parts), reverse=True)
    return {path: todo[path] for path in ordered}, failed


# -- the cgroups of one run ----------------------------------------------------------
class CpuCgroups(StartStop):
    """The cgroups of one run, under a parent named ``hvbench-<tag>`` in each hierarchy
    that holds the cpu, cpuset and cpuacct controllers.

    ``__init__`` only stores; :meth:`start` creates the parents, :meth:`add_group` the
    groups, :meth:`move_threads` places threads, :meth:`stop` removes everything (safe
    twice, also after a failed start). A context manager. Not thread-safe."""

    def __init__(self, tag: str, support: CgroupSupport | None = None,
                 registry_dir: Path | None = None) -> None:
        self.tag = tag
        self._support = support
        self._registry_dir = registry_dir
        #: Settings of each group added, and the raw values written for it.
        self.groups: dict[str, GroupSettings] = {}
        self.written: dict[str, dict[str, str]] = {}
        self._created: list[Path] = []
        self._record: Path | None = None
        self._record_data: dict[str, Any] = {}
        self._started = False

    @property
    def support(self) -> CgroupSupport:
        """The detected (or given) support; detection runs on first use."""
        if self._support is None:
            self._support = detect_cpu_cgroups()
        return self._support

    @property
    def parent_name(self) -> str:
        return f"{PREFIX}{self.tag}"

    def _roots(self) -> list[Path]:
        """The distinct hierarchy roots in use: cpu first, then cpuset, cpuacct."""
        s = self.support
        roots = [s.cpu_root, s.cpuset_root, s.cpuacct_root]
        return list(dict.fromkeys(r for r in roots if r is not None))

    def _parents(self) -> list[Path]:
        return [root / self.parent_name for root in self._roots()]

    def _group_dirs(self, name: str) -> list[Path]:
        return [parent / name for parent in self._parents()]

    # -- start -----------------------------------------------------------------------
    def start(self) -> None:
        """Write the owner record, then create ``hvbench-<tag>`` in each hierarchy (v1:
        the cpuset parent gets all CPUs and memory nodes; v2: ``+cpu`` and ``+cpuset``
        enabled for its children). On failure everything created is removed again.

        Raises HostError if the host has no CPU cgroups, if the tag is in use by a live
        process, or if a directory or control file cannot be written;
        RootRequiredError without root (unless the roots given are writable: a fake
        tree); ValueError for a malformed tag."""
        _check_name("tag", self.tag)
        if self._started:
            return
        if self.support.version is None:
            raise HostError(f"CPU weights need cgroups: {self.support.reason}")
        if not facts.is_root() and not all(os.access(r, os.W_OK) for r in self._roots()):
            raise RootRequiredError("CPU cgroups")
        self._started = True
        try:
            self._claim_record()
            for parent in self._parents():
                self._mkdir(parent)
            if self.support.version == 2:
                self._enable_v2_controllers()
            elif self.support.cpuset_root is not None:
                self._inherit_cpuset(self.support.cpuset_root / self.parent_name)
        except BaseException:
            self._started = False
            with contextlib.suppress(HvbenchError):
                self.stop()
            raise

    def _claim_record(self) -> None:
        """Create the owner record ``cgroups-<tag>.json``, exclusively: a record whose
        owner is alive means another run uses the tag (HostError); a dead owner's
        cgroups are removed first."""
        directory = self._registry_dir or work_dir()
        record = directory / f"{RECORD_PREFIX}{self.tag}.json"
        pid = os.getpid()
        self._record_data = {"pid": pid, "start_time": _start_time(pid), "tag": self.tag,
                             "version": self.support.version,
                             "roots": [str(r) for r in self._roots()],
                             "paths": [str(p) for p in self._parents()]}
        for _ in range(3):
            try:
                _save_record(record, self._record_data, exclusive=True)
            except FileExistsError:
                _release_orphan(record, self.tag)
                continue
            except OSError as exc:
                raise HostError(f"cannot write the cgroup owner record {record}: "
                                f"{_strerror(exc)}") from exc
            self._record = record
            return
        raise HostError(f"cannot claim the cgroup owner record {record}")

    def _note(self, path: Path) -> None:
        """Add ``path`` to the owner record before it is created."""
        if self._record is None or str(path) in self._record_data["paths"]:
            return
        self._record_data["paths"].append(str(path))
        try:
            _save_record(self._record, self._record_data, exclusive=False)
        except OSError as exc:
            raise HostError(f"cannot update the cgroup owner record {self._record}: "
                            f"{_strerror(exc)}") from exc

    def _unnote(self, path: Path) -> None:
        """Take ``path`` out of the owner record again (it is not ours to remove)."""
        if self._record is None:
            return
        self._record_data["paths"].remove(str(path))
        with contextlib.suppress(OSError):
            _save_record(self._record, self._record_data, exclusive=False)

    def _mkdir(self, path: Path) -> None:
        self._note(path)
        try:
            path.mkdir()
        except FileExistsError as exc:
            # Not ours: another hvbench with the same tag but another work dir, or a
            # leftover nobody recorded. Never adopt it (stop() would remove it).
            self._unnote(path)
            raise HostError(f"cgroup {path} already exists (another hvbench run with tag "
                            f"{self.tag!r}, or left behind: rmdir it)") from exc
        except OSError as exc:
            raise HostError(f"cannot create cgroup {path}: {_strerror(exc)}") from exc
        self._created.append(path)

    def _v2_controllers(self) -> str:
        return "+cpu +cpuset" if self.support.cpuset_root is not None else "+cpu"

    def _enable_v2_controllers(self) -> None:
        """v2: a child only gets a controller its parent enabled in subtree_control.
        The root's is left as found afterwards (other users may rely on it)."""
        root = self.support.cpu_root or Path("/")
        wanted = self._v2_controllers()
        enabled = (facts.read_text(root / "cgroup.subtree_control") or "").split()
        if any(c.lstrip("+") not in enabled for c in wanted.split()):
            _write(root / "cgroup.subtree_control", wanted)
        _write(root / self.parent_name / "cgroup.subtree_control", wanted)

    @staticmethod
    def _inherit_cpuset(path: Path) -> dict[str, str]:
        """v1 cpuset: a new cgroup starts with no CPUs and no memory nodes, and no task
        may join it so; copy the parent's."""
        out: dict[str, str] = {}
        for name in ("cpuset.cpus", "cpuset.mems"):
            value = (facts.read_text(path.parent / name) or "").strip()
            if value:
                _write(path / name, value)
                out[name] = value
        return out

    # -- groups ----------------------------------------------------------------------
    def add_group(self, name: str, settings: GroupSettings) -> None:
        """Create group ``name`` (in each hierarchy) and write its weight, quota and CPUs.

        Raises HostError if a directory or a value cannot be written (e.g. CPUs the host
        does not have: EINVAL) or if pinning is asked for without a cpuset controller;
        ValueError for a malformed or duplicate name or before :meth:`start`."""
        _check_name("group", name)
        if self._record is None:
            raise ValueError("add_group() before start()")
        if name in self.groups:
            raise ValueError(f"cgroup group {name!r} exists already")
        if settings.cpus is not None and self.support.cpuset_root is None:
            raise HostError(f"pinning to CPUs {settings.cpus} needs the cpuset controller, "
                            "which this host's cgroups lack")
        for path in self._group_dirs(name):
            self._mkdir(path)
        self.groups[name] = settings
        self.written[name] = {}
        if self.support.version == 2:
            self._configure_v2(name, settings)
        else:
            self._configure_v1(name, settings)

    def _set(self, name: str, path: Path, value: str) -> None:
        """Write a control file of group ``name`` and remember the raw value."""
        _write(path, value)
        self.written[name][path.name] = value

    def _configure_v1(self, name: str, settings: GroupSettings) -> None:
        s = self.support
        cpu = (s.cpu_root or Path("/")) / self.parent_name / name
        self._set(name, cpu / "cpu.shares", str(weight_to_shares(settings.weight)))
        if settings.quota_pct is not None:
            self._set(name, cpu / "cpu.cfs_period_us", str(CFS_PERIOD_US))
            self._set(name, cpu / "cpu.cfs_quota_us", str(quota_us(settings.quota_pct)))
        if s.cpuset_root is not None:
            cpuset = s.cpuset_root / self.parent_name / name
            self.written[name] |= self._inherit_cpuset(cpuset)
            if settings.cpus is not None:
                self._set(name, cpuset / "cpuset.cpus", settings.cpus)

    def _configure_v2(self, name: str, settings: GroupSettings) -> None:
        path = self._group_dirs(name)[0]
        # Threaded, so the threads of one QEMU can sit in different groups (its vCPUs
        # here, its I/O threads there); the parent becomes the threaded domain.
        self._set(name, path / "cgroup.type", "threaded")
        self._set(name, path / "cpu.weight", str(weight_to_v2(settings.weight)))
        if settings.quota_pct is not None:
            self._set(name, path / "cpu.max",
                      f"{quota_us(settings.quota_pct)} {CFS_PERIOD_US}")
        if settings.cpus is not None:
            self._set(name, path / "cpuset.cpus", settings.cpus)

    # -- threads ---------------------------------------------------------------------
    def move_threads(self, name: str, tids: Iterable[int]) -> None:
        """Move threads into group ``name``. Threads that exit meanwhile are skipped.
        Threads a thread creates later start in its group (QEMU's worker pool grows on
        demand): call again to sweep new ones.

        Raises HostError if a thread that still exists cannot be moved; ValueError for
        a group that was not added."""
        if name not in self.groups or not self._created:
            raise ValueError(f"no cgroup group {name!r} (add_group() first)")
        for tid in tids:
            if not Path(f"/proc/{tid}").exists():
                continue
            if self.support.version == 2:
                self._move_v2(name, tid)
            else:
                for path in self._group_dirs(name):
                    _move_one(path / "tasks", tid)

    def _move_v2(self, name: str, tid: int) -> None:
        parent = self._parents()[0]
        inside = f"/{self.parent_name}"
        where = _v2_cgroup_of(tid)
        tgid = _tgid(tid)
        if tgid is not None and where is not None and not (
                where == inside or where.startswith(inside + "/")):
            # Its whole process joins the threaded domain first: v2 only spreads the
            # threads of a process over the threaded groups of one subtree.
            _move_one(parent / "cgroup.procs", tgid)
        _move_one(parent / name / "cgroup.threads", tid)

    # -- reading ---------------------------------------------------------------------
    def usage_s(self, name: str) -> float:
        """CPU seconds the threads of group ``name`` used since it was created (v1
        ``cpuacct.usage``, v2 ``usage_usec`` of ``cpu.stat``). Raises HostError if the
        counter cannot be read (no cpuacct hierarchy, group removed)."""
        s = self.support
        if s.version == 2:
            path = (s.cpu_root or Path("/")) / self.parent_name / name / "cpu.stat"
            for line in (facts.read_text(path) or "").splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
        elif s.cpuacct_root is not None:
            path = s.cpuacct_root / self.parent_name / name / "cpuacct.usage"
            text = (facts.read_text(path) or "").strip()
            if text.isdigit():
                return int(text) / 1e9
        else:
            raise HostError("CPU usage of a cgroup needs the cpuacct controller (v1)")
        raise HostError(f"cannot read the CPU usage of cgroup group {name!r} from {path}")

    def describe(self) -> dict[str, Any]:
        """The version, the hierarchy roots and paths, and per group the settings and
        the raw values written (``cpu.shares`` or ``cpu.weight``, quota, ``cpuset.cpus``),
        for the stored result."""
        s = self.support
        return {
            "version": s.version, "tag": self.tag, "parent": self.parent_name,
            "roots": {"cpu": _str(s.cpu_root), "cpuset": _str(s.cpuset_root),
                      "cpuacct": _str(s.cpuacct_root)},
            "paths": [str(p) for p in self._created],
            "groups": {name: {"weight": g.weight, "cpus": g.cpus, "quota_pct": g.quota_pct,
                              "written": dict(self.written.get(name, {}))}
                       for name, g in self.groups.items()},
        }

    # -- stop ------------------------------------------------------------------------
    def stop(self) -> None:
        """Move every task left back to its hierarchy's root cgroup, remove the
        directories (children first) and then the owner record. Safe to call twice and
        after a failed start. Everything is attempted; raises HostError at the end if a
        directory could not be removed (the record then stays, so a later call or
        :func:`cleanup_orphaned_cgroups` after this process ended can retry)."""
        roots = self._roots() if self._created else []
        _, failed = remove_cgroups(reversed(self._created), roots)
        self._created = [p for p in self._created if p.is_dir()]
        if failed:
            raise HostError(f"could not remove cgroups: {'; '.join(failed)}")
        if self._record is not None:
            self._record.unlink(missing_ok=True)
            self._record = None
        self._started = False


def _str(path: Path | None) -> str | None:
    return str(path) if path is not None else None


def _move_one(path: Path, tid: int) -> None:
    """Write one TID (or TGID) to a cgroup's tasks/procs/threads file."""
    try:
        path.write_text(str(tid))
    except ProcessLookupError:
        return  # ESRCH: it exited between the check and the write
    except OSError as exc:
        if Path(f"/proc/{tid}").exists():
            raise HostError(f"cannot move thread {tid} into {path.parent} ({path.name}): "
                            f"{_strerror(exc)}") from exc


def _release_orphan(record: Path, tag: str) -> list[str]:
    """Remove the cgroups of ``record`` if its owner is gone, then the record; returns
    what was removed. Raises HostError if its owner is alive (the tag is in use) or if
    a cgroup cannot be removed."""
    data = _load_record(record)
    if data is None:
        raise HostError(f"{record} is not a cgroup owner record: remove it")
    if _owner_alive(data):
        raise HostError(f"cgroups {PREFIX}{tag} are in use by process {data['pid']} "
                        f"(owner record {record})")
    roots = [Path(r) for r in data.get("roots", [])]
    removed, failed = remove_cgroups([Path(p) for p in data["paths"]], roots)
    if failed:
        raise HostError(f"could not remove orphaned cgroups: {'; '.join(failed)}")
    record.unlink(missing_ok=True)
    return [f"cgroup {p}" for p in removed]


def cleanup_orphaned_cgroups(registry_dir: Path | None = None, *,
                             dry_run: bool = False) -> list[str]:
    """Remove the cgroups recorded by hvbench processes that are gone (``kill -9``):
    their tasks go to the hierarchy root, the directories and records are removed.
    Records of live owners are left alone; one whose cgroups cannot all be removed is
    kept for the next call. Returns what was removed (``dry_run``: the recorded cgroups
    that exist, nothing removed). Raises nothing."""
    directory = registry_dir or work_dir()
    removed: list[str] = []
    for record in sorted(directory.glob(f"{RECORD_PREFIX}*.json")):
        data = _load_record(record)
        if data is None or _owner_alive(data):
            continue
        if dry_run:
            todo, _ = removal_plan([Path(p) for p in data["paths"]],
                                   [Path(r) for r in data.get("roots", [])])
            removed += [f"cgroup {p}" for p in todo]
            continue
        with contextlib.suppress(HostError):
            removed += _release_orphan(record, str(data.get("tag", record.stem)))
    return removed


def _new_record(directory: Path | None, tag: str, roots: Sequence[Path],
                paths: Sequence[Path], **extra: Any) -> Path:
    """Create the owner record ``cgroups-<tag>.json`` of ``paths`` (before they are
    made), exclusively. Raises HostError when it exists or cannot be written."""
    record = (directory or work_dir()) / f"{RECORD_PREFIX}{tag}.json"
    data = {"pid": os.getpid(), "start_time": _start_time(os.getpid()), "tag": tag, **extra,
            "roots": [str(r) for r in roots], "paths": [str(p) for p in paths]}
    try:
        _save_record(record, data, exclusive=True)
    except OSError as exc:
        raise HostError(f"cannot write the cgroup owner record {record}: "
                        f"{_strerror(exc)}") from exc
    return record


# -- a memory limit for native commands ------------------------------------------------
def detect_memory_root(mounts_text: str | None = None, root: Path = Path("/"),
                       ) -> tuple[CgroupVersion, Path] | None:
    """(version, mount point) of the hierarchy holding the memory controller: a v1
    ``memory`` mount wins, else a cgroup2 mount whose ``cgroup.controllers`` lists it;
    None when neither does. Reads ``<root>/proc/self/mounts`` unless given. Raises
    nothing."""
    if mounts_text is None:
        mounts_text = facts.read_text(root / "proc/self/mounts") or ""
    v1, v2 = _parse_mounts(mounts_text, root)
    if "memory" in v1:
        return 1, v1["memory"]
    for mount in v2:
        if "memory" in (facts.read_text(mount / "cgroup.controllers") or "").split():
            return 2, mount
    return None


class MemoryCgroup(StartStop):
    """One memory cgroup ``hvbench-<tag>`` limited to ``limit_bytes`` (v1
    ``memory.limit_in_bytes``, v2 ``memory.max``), for the native side of a buffered
    test: the page cache of what runs in it is charged to it, so the host caches no
    more of the test file than a guest of that RAM could (seed 000's 2 x RAM rule then
    holds on both sides).

    Its block I/O is accounted too, so ``hvbench explain`` can tell the cell's share
    of the device from other users': v2 enables the io controller beside memory (its
    ``io.stat``); v1, where blkio is a hierarchy of its own, gets a group of the same
    name there (no limit, only its statistics), when blkio is mounted. Neither is an
    error when unavailable: :attr:`io_stat` is then None.

    As :class:`CpuCgroups`, the paths go to an owner record (``cgroups-<tag>.json``)
    before they are created, so :func:`cleanup_orphaned_cgroups` removes them after a
    ``kill -9``. ``start()`` raises :class:`HostError` when no hierarchy holds the
    memory controller or a file cannot be written, :class:`RootRequiredError` without
    root; ``stop()`` moves what is left to the root, removes the directories and the
    record (safe twice; :class:`HostError` if a directory stays, after
    :data:`RMDIR_WAIT_S`). A context manager."""

    def __init__(self, tag: str, limit_bytes: int, *, registry_dir: Path | None = None,
                 mounts_text: str | None = None, fs_root: Path = Path("/")) -> None:
        _check_name("tag", tag)
        if limit_bytes <= 0:
            raise ValueError(f"memory limit must be positive, not {limit_bytes}")
        self.tag = tag
        self.limit_bytes = limit_bytes
        self._registry_dir = registry_dir
        self._mounts_text = mounts_text
        self._fs_root = fs_root
        self.version: CgroupVersion | None = None
        self.path: Path | None = None
        #: v1 only: the blkio group of the same name, for its I/O statistics.
        self.blkio_path: Path | None = None
        self._root: Path | None = None
        self._blkio_root: Path | None = None
        self._record: Path | None = None

    @property
    def procs_file(self) -> Path:
        """The group's ``cgroup.procs`` (a pid written there joins). Raises
        :class:`HostError` before :meth:`start`."""
        if self.path is None:
            raise HostError(f"memory cgroup {PREFIX}{self.tag} is not started")
        return self.path / "cgroup.procs"

    @property
    def procs_files(self) -> list[Path]:
        """Every ``cgroup.procs`` a command joins: the memory group's, and on v1 the
        blkio group's. Raises :class:`HostError` before :meth:`start`."""
        extra = [self.blkio_path / "cgroup.procs"] if self.blkio_path is not None else []
        return [self.procs_file, *extra]

    @property
    def io_stat(self) -> Path | None:
        """The group's I/O statistics file (v2 ``io.stat``, v1
        ``blkio.throttle.io_service_bytes_recursive``), None when not accounted."""
        if self.blkio_path is not None:
            found = self.blkio_path / "blkio.throttle.io_service_bytes_recursive"
        elif self.path is not None and self.version == 2:
            found = self.path / "io.stat"
        else:
            return None
        return found if found.is_file() else None

    def start(self) -> None:
        if self.path is not None:
            return
        found = detect_memory_root(self._mounts_text, self._fs_root)
        if found is None:
            raise HostError("a memory limit for the native side needs the memory cgroup "
                            "controller (no v1 memory mount, no cgroup2 mount listing it)")
        version, root = found
        if not facts.is_root() and not os.access(root, os.W_OK):
            raise RootRequiredError("a memory cgroup for the native side")
        path = root / f"{PREFIX}{self.tag}"
        blkio_root = self._v1_blkio_root() if version == 1 else None
        roots, paths = [root], [path]
        if blkio_root is not None:
            roots.append(blkio_root)
            paths.append(blkio_root / path.name)
        self._write_record(version, roots, paths)
        self._root, self._blkio_root, self.version = root, blkio_root, version
        try:
            self._make(path)
            self.path = path
            if version == 2:
                self._enable_v2_memory(root)
                _write(path / "memory.max", str(self.limit_bytes))
            else:
                _write(path / "memory.limit_in_bytes", str(self.limit_bytes))
            if blkio_root is not None:
                self._make(blkio_root / path.name)
                self.blkio_path = blkio_root / path.name
        except BaseException:
            with contextlib.suppress(HvbenchError):
                self.stop()
            raise

    def _v1_blkio_root(self) -> Path | None:
        mounts = self._mounts_text
        if mounts is None:
            mounts = facts.read_text(self._fs_root / "proc/self/mounts") or ""
        return _parse_mounts(mounts, self._fs_root)[0].get("blkio")

    def _write_record(self, version: CgroupVersion, roots: list[Path],
                      paths: list[Path]) -> None:
        self._record = _new_record(self._registry_dir, self.tag, roots, paths,
                                   version=version)

    @staticmethod
    def _make(path: Path) -> None:
        try:
            path.mkdir()
        except OSError as exc:
            raise HostError(f"cannot create cgroup {path}: {_strerror(exc)}") from exc

    @staticmethod
    def _enable_v2_memory(root: Path) -> None:
        """v2: the parent must delegate the controller (``+memory`` in its
        ``cgroup.subtree_control``) before a child has ``memory.max``."""
        enabled = (facts.read_text(root / "cgroup.subtree_control") or "").split()
        if "memory" not in enabled:
            _write(root / "cgroup.subtree_control", "+memory")
        # The io controller too, for the group's io.stat (attribution only): a host
        # that does not offer it still gets its memory limit.
        offered = (facts.read_text(root / "cgroup.controllers") or "").split()
        if "io" in offered and "io" not in enabled:
            with contextlib.suppress(HostError):
                _write(root / "cgroup.subtree_control", "+io")

    def usage_bytes(self) -> int | None:
        """The group's peak memory charge (v1 ``memory.max_usage_in_bytes``, v2
        ``memory.peak`` where the kernel has it), bytes; None when unreadable."""
        if self.path is None:
            return None
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        text = (facts.read_text(self.path / name) or "").strip()
        return int(text) if text.isdigit() else None

    def describe(self) -> dict[str, Any]:
        """Version, path, the limit written and the peak charge, for the stored run."""
        return {"version": self.version, "path": _str(self.path),
                "limit_bytes": self.limit_bytes, "peak_bytes": self.usage_bytes(),
                "io_stat": _str(self.io_stat)}

    def stop(self) -> None:
        made = [(p, r) for p, r in ((self.path, self._root),
                                    (self.blkio_path, self._blkio_root))
                if p is not None and r is not None]
        if made:
            _, failed = remove_cgroups([p for p, _ in made], [r for _, r in made])
            if failed:
                raise HostError(f"could not remove cgroups: {'; '.join(failed)}")
        self.path = self.blkio_path = None
        if self._record is not None:
            self._record.unlink(missing_ok=True)
            self._record = None


# -- limits on a guest's whole QEMU process -------------------------------------------
def whole_disk(device: int, dev_block: Path = Path("/sys/dev/block")) -> str:
    """``MAJ:MIN`` of the whole disk holding device number ``device`` (a partition's
    disk: throttling is per disk; v2's io.max refuses a partition). Raises nothing: a
    device sysfs does not show is returned as it is."""
    node = f"{os.major(device)}:{os.minor(device)}"
    if (dev_block / node / "partition").exists():
        parent = (facts.read_text(dev_block / node / ".." / "dev") or "").strip()
        if re.fullmatch(r"\d+:\d+", parent):
            return parent
    return node


def device_of(path: str, dev_block: Path = Path("/sys/dev/block")) -> str:
    """``MAJ:MIN`` of the whole disk a disk source lives on: the device a block-device
    path names, or the device holding a file. Raises HostError naming the path if it
    cannot be stat'ed."""
    try:
        info = Path(path).stat()
    except OSError as exc:
        raise HostError(f"cannot stat {path} to find its host device: "
                        f"{_strerror(exc)}") from exc
    number = info.st_rdev if stat.S_ISBLK(info.st_mode) else info.st_dev
    if os.major(number) == 0:
        # tmpfs, overlayfs, a btrfs subvolume: no block device an I/O limit could name.
        raise HostError(f"host_limits: {path} is on a file system without a block device "
                        f"(device 0:{os.minor(number)}): an I/O limit needs the image on "
                        "a disk")
    return whole_disk(number, dev_block)


@dataclass(frozen=True)
class _LimitGroup:
    """One controller of a :class:`HostLimitsCgroup` (``blkio`` or ``cpu``, v1's
    names), the version that holds it and its hierarchy root."""

    controller: str
    version: CgroupVersion
    root: Path

    @property
    def v2_name(self) -> str:
        """The controller's cgroup2 name (``io`` for blkio)."""
        return "io" if self.controller == "blkio" else self.controller


class HostLimitsCgroup(StartStop):
    """A cgroup ``hvbench-<tag>`` holding a guest's whole QEMU process (and the helper
    processes that do its I/O) under the limits of a :class:`HostLimitsSpec`: what an
    operator's libvirt ``<blkiotune>``/``<cputune>`` or a systemd slice does to a guest.

    - **v1**: ``blkio.throttle.{read,write}_{bps,iops}_device`` (``MAJ:MIN VALUE``) in
      the blkio hierarchy, ``cpu.cfs_period_us`` / ``cpu.cfs_quota_us`` in the cpu one.
    - **v2**: ``io.max`` (``MAJ:MIN rbps=.. wbps=..``) and ``cpu.max`` (``QUOTA
      PERIOD``), with ``+io`` / ``+cpu`` enabled in the root's subtree_control.

    Each controller is taken from v1 when a v1 hierarchy holds it, else from a cgroup2
    mount that offers it. ``devices``: the ``MAJ:MIN`` the I/O limits apply to.

    As the other cgroups here, the paths go to an owner record
    (``cgroups-<tag>.json``) before they are created, so
    :func:`cleanup_orphaned_cgroups` removes them after a ``kill -9``. ``start()``
    creates and writes (HostError when a controller is missing or a file cannot be
    written, naming the file and errno; RootRequiredError without root; everything
    created is removed again on failure); :meth:`join` moves a process in; ``stop()``
    moves what is left to the root and removes the directories and the record (safe
    twice; HostError if a directory stays after :data:`RMDIR_WAIT_S`). A context
    manager."""

    def __init__(self, tag: str, limits: HostLimitsSpec, devices: Sequence[str] = (), *,
                 registry_dir: Path | None = None, mounts_text: str | None = None,
                 fs_root: Path = Path("/")) -> None:
        self.tag = tag
        self.limits = limits
        self.devices = tuple(dict.fromkeys(devices))
        self._registry_dir = registry_dir
        self._mounts_text = mounts_text
        self._fs_root = fs_root
        #: The directories made, with their controller, in creation order.
        self.groups: list[tuple[_LimitGroup, Path]] = []
        #: control file path -> the value written, for the stored description.
        self.written: dict[str, str] = {}
        self.joined: list[int] = []
        self._record: Path | None = None

    def _wanted(self) -> list[str]:
        """The controllers the limits need, as v1 names them."""
        out = ["blkio"] if self.limits.io else []
        return out + (["cpu"] if self.limits.cpu_quota_pct is not None else [])

    def _locate(self) -> list[_LimitGroup]:
        """Where each needed controller lives. Raises HostError when one is nowhere."""
        mounts = self._mounts_text
        if mounts is None:
            mounts = facts.read_text(self._fs_root / "proc/self/mounts") or ""
        v1, v2 = _parse_mounts(mounts, self._fs_root)
        found: list[_LimitGroup] = []
        for controller in self._wanted():
            if controller in v1:
                found.append(_LimitGroup(controller, 1, v1[controller]))
                continue
            v2_name = _LimitGroup(controller, 2, Path("/")).v2_name
            mount = next((m for m in v2 if v2_name in (
                facts.read_text(m / "cgroup.controllers") or "").split()), None)
            if mount is None:
                raise HostError(f"host_limits needs the {controller} cgroup controller (no "
                                f"v1 {controller} mount, no cgroup2 mount offering "
                                f"{v2_name})")
            found.append(_LimitGroup(controller, 2, mount))
        return found

    def start(self) -> None:
        _check_name("tag", self.tag)
        if self.groups or self._record is not None:
            return
        if self.limits.io and not self.devices:
            raise HostError("host_limits: no host device to apply the I/O limits to")
        located = self._locate()
        roots = list(dict.fromkeys(g.root for g in located))
        if not facts.is_root() and not all(os.access(r, os.W_OK) for r in roots):
            raise RootRequiredError("host_limits (a cgroup for the QEMU process)")
        paths = [r / f"{PREFIX}{self.tag}" for r in roots]
        self._record = _new_record(self._registry_dir, self.tag, roots, paths)
        try:
            for root, path in zip(roots, paths, strict=True):
                mine = [g for g in located if g.root == root]
                if mine[0].version == 2:
                    _enable_v2(root, [g.v2_name for g in mine])
                try:
                    path.mkdir()
                except OSError as exc:
                    raise HostError(f"cannot create cgroup {path}: "
                                    f"{_strerror(exc)}") from exc
                self.groups += [(g, path) for g in mine]
            for group, path in self.groups:
                self._configure(group, path)
        except BaseException:
            with contextlib.suppress(HvbenchError):
                self.stop()
            raise

    def _configure(self, group: _LimitGroup, path: Path) -> None:
        quota = quota_us(self.limits.cpu_quota_pct or 100.0)
        if group.controller == "blkio" and group.version == 1:
            for kind, value in self.limits.io.items():
                for device in self.devices:
                    self._set(path / IO_LIMIT_FILES[kind][0], f"{device} {value}")
        elif group.controller == "blkio":
            keys = " ".join(f"{IO_LIMIT_FILES[k][1]}={v}" for k, v in self.limits.io.items())
            for device in self.devices:
                self._set(path / "io.max", f"{device} {keys}")
        elif group.version == 1:
            self._set(path / "cpu.cfs_period_us", str(CFS_PERIOD_US))
            self._set(path / "cpu.cfs_quota_us", str(quota))
        else:
            self._set(path / "cpu.max", f"{quota} {CFS_PERIOD_US}")

    def _set(self, path: Path, value: str) -> None:
        _write(path, value)
        self.written[str(path)] = value

    def join(self, pid: int) -> None:
        """Move process ``pid`` with all its threads into the group(s) (its
        ``cgroup.procs``). A process that is gone is skipped. Raises HostError if a
        live one cannot be moved; ValueError before :meth:`start`."""
        if not self.groups:
            raise ValueError("join() before start()")
        for path in dict.fromkeys(p for _, p in self.groups):
            _move_one(path / "cgroup.procs", pid)
        self.joined.append(pid)

    def describe(self) -> dict[str, Any]:
        """The limits asked for, the devices, each directory with its controller and
        version, and every value written, for the stored platform description."""
        return {"limits": self.limits.model_dump(mode="json", exclude_none=True),
                "devices": list(self.devices), "pids": list(self.joined),
                "groups": [{"controller": g.controller, "version": g.version,
                            "path": str(p)} for g, p in self.groups],
                "written": dict(self.written)}

    def stop(self) -> None:
        made = list(dict.fromkeys((p, g.root) for g, p in self.groups))
        if made:
            _, failed = remove_cgroups([p for p, _ in made], [r for _, r in made])
            if failed:
                raise HostError(f"could not remove cgroups: {'; '.join(failed)}")
        self.groups = []
        if self._record is not None:
            self._record.unlink(missing_ok=True)
            self._record = None


def _enable_v2(root: Path, controllers: Sequence[str]) -> None:
    """v2: a child gets a controller only when its parent lists it in
    ``cgroup.subtree_control``; enable the missing ones (others' stay as found)."""
    enabled = (facts.read_text(root / "cgroup.subtree_control") or "").split()
    missing = [c for c in dict.fromkeys(controllers) if c not in enabled]
    if missing:
        _write(root / "cgroup.subtree_control", " ".join(f"+{c}" for c in missing))
