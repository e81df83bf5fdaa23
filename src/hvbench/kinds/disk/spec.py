"""The disk workload kind's spec (``kind = "disk"``): fio reproducing IOzone, Bonnie++ or
dd, or the user's job file, and its checks against the platforms it runs on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from hvbench.errors import SpecError
from hvbench.model.names import name_problem
from hvbench.model.spec import ByteSize, format_size
from hvbench.model.study import (
    Cell,
    Duration,
    Study,
    guest_vm,
)
from hvbench.model.workload import (
    IdentityFacts,
    StudyChecks,
    WorkloadIntent,
    WorkloadSpec,
    stored_int,
)

DiskProfile = Literal["iozone", "bonnie", "dd", "fio-job"]
#: The phases of each profile, in the order they run (later phases reuse earlier files).
PROFILE_PHASES: Mapping[str, tuple[str, ...]] = {
    "iozone": ("write", "rewrite", "read", "reread", "randread", "randwrite"),
    "bonnie": ("block-write", "block-rewrite", "block-read", "seq-create", "seq-stat",
               "seq-delete", "rand-create", "rand-stat", "rand-delete"),
    "dd": ("write", "read"),
    "fio-job": (),
}


class DiskWorkloadSpec(WorkloadSpec):
    """``kind = "disk"``: fio reproducing IOzone, Bonnie++ or dd, or the user's job file."""

    kind: Literal["disk"] = "disk"
    VALUE_LISTS: ClassVar[tuple[str, ...]] = ("phases", "host_paths")
    ORDERED_PHASES: ClassVar[tuple[str, ...]] = tuple(dict.fromkeys(
        p for phases in PROFILE_PHASES.values() for p in phases))
    profile: DiskProfile
    #: ``file``: a test file on a filesystem (the guest formats its benchmark disk);
    #: ``device``: the raw benchmark disk (natively, a file of the same size);
    #: ``filesystem``: the guest's first virtio-fs share (``filesystem = {...}`` on the
    #: platform), natively the same host directory (:func:`native_share_dir`). Each
    #: run works in a fresh subdirectory of the share, removed afterwards.
    target: Literal["file", "device", "filesystem"] = "file"
    file_size: ByteSize = 256 << 20
    #: I/O size: IOzone's record size, dd's block size, Bonnie++'s chunk size.
    record_size: ByteSize | None = None
    direct: bool = False
    allow_cached: bool = False
    ioengine: Literal["psync", "libaio", "io_uring", "sync"] = "psync"
    iodepth: int = Field(default=1, ge=1, le=1024)
    #: Bonnie++: how many zero-size files the create/stat/delete phases use.
    files: int = Field(default=1024, ge=1, le=1_000_000)
    #: fio-job: the user's job file, relative to the study file.
    job_file: str | None = None
    #: fio-job: replace every job's runtime / ramp_time (e.g. "20s"); None keeps the
    #: job file's. ``file_size`` replaces every job's size= only when the study gives
    #: it (see :meth:`file_size_given`); otherwise it only sizes jobs that have none.
    runtime: Duration | None = None
    ramp_time: Duration | None = None
    #: fio-job: host devices or paths outside the target that the job file may name
    #: natively (e.g. ["/dev/nvme1n1"]); everything else is pointed at the target.
    host_paths: tuple[str, ...] = ()
    #: A subset of the profile's phases; all by default.
    phases: tuple[str, ...] | None = None
    timeout_s: float = Field(default=1800.0, gt=0)

    @model_validator(mode="after")
    def _check(self) -> DiskWorkloadSpec:
        if self.profile == "fio-job" and not self.job_file:
            raise ValueError("profile fio-job needs job_file (path to a fio job file)")
        if self.profile != "fio-job" and self.job_file:
            raise ValueError(f"job_file is only valid with profile fio-job, not {self.profile}")
        job_only = [f for f in ("runtime", "ramp_time", "host_paths")
                    if f in self.model_fields_set]
        if self.profile != "fio-job" and job_only:
            raise ValueError(f"{job_only[0]} is only valid with profile fio-job")
        for path in self.host_paths:
            if not path.startswith("/") or name_problem(path) is not None:
                raise ValueError(f"host_paths: expected absolute paths, got {path!r}")
        known = PROFILE_PHASES[self.profile]
        for phase in self.phases or ():
            if known and phase not in known:
                raise ValueError(f"phase {phase!r} is not one of {', '.join(known)}")
        return self

    def file_size_given(self) -> bool:
        """True when the study set ``file_size`` (pydantic's ``model_fields_set``), as
        opposed to the default: only then does it replace a job file's sizes."""
        return "file_size" in self.model_fields_set

    def io_size(self) -> int:
        """The record size this profile uses when none is given."""
        if self.record_size is not None:
            return self.record_size
        return {"iozone": 16 << 20, "bonnie": 8 << 10, "dd": 64 << 10}.get(self.profile, 4096)

    def phase_list(self) -> tuple[str, ...]:
        return self.phases or PROFILE_PHASES[self.profile]

    def raw_device_bytes(self) -> int | None:
        """``file_size`` when the workload runs on the raw benchmark disk."""
        return self.file_size if self.target == "device" else None


#: fio engines that keep several requests in flight per job (iodepth applies).
ASYNC_ENGINES = ("libaio", "io_uring")


def intent(workload: Mapping[str, Any]) -> WorkloadIntent:
    """What a stored disk definition asks of the I/O path: ``iodepth`` requests in
    flight with an asynchronous engine, else one; ``record_size`` bytes each; deeper
    with libaio at depth 16, uncached with ``direct`` when it is not already. A user's
    job file says none of it (its job file does)."""
    profile = workload.get("profile")
    if profile == "fio-job":
        return WorkloadIntent()
    engine_async = workload.get("ioengine") in ASYNC_ENGINES
    size = workload.get("record_size")
    return WorkloadIntent(
        depth=float(workload.get("iodepth") or 1) if engine_async else 1.0,
        request_bytes=float(size) if isinstance(size, int | float) else None,
        # A definition older than profiles has no profile to deepen.
        deeper=(("workload.ioengine", "libaio"), ("workload.iodepth", 16))
        if profile is not None else (),
        uncached=() if workload.get("direct") else (("workload.direct", True),))


def identity(workload: Mapping[str, Any]) -> IdentityFacts:
    """A stored disk definition's identity fact: its test file's size."""
    return IdentityFacts(file_size=stored_int(workload.get("file_size")))


def default_name(entry: Mapping[str, Any]) -> str:
    """A disk entry's name: its profile's."""
    profile = entry.get("profile", "disk")
    return profile if isinstance(profile, str) else "disk"


def check_cache_rule(cell: Cell, host_memory_bytes: int) -> None:
    """Seed 000's rule: a buffered test file smaller than 2 x the platform's RAM measures
    the page cache. Refused unless the workload sets ``allow_cached = true``."""
    workload = cell.workload.spec
    if not isinstance(workload, DiskWorkloadSpec) or workload.direct or workload.allow_cached:
        return
    if workload.profile == "fio-job":
        return  # the user's job file decides its own caching
    platform = cell.platform.spec
    vm = guest_vm(platform)
    ram = vm.memory_mib << 20 if vm is not None else host_memory_bytes
    limit = platform.memory_limit_mib()
    if limit is not None:
        # The native side's page cache is bounded by its memory cgroup.
        ram = limit << 20
    if workload.file_size < 2 * ram:
        raise SpecError(
            f"cell {cell.name}: file_size {format_size(workload.file_size)} is smaller than "
            f"2 x the platform's RAM ({format_size(ram)}): buffered results would measure "
            "the page cache. Set direct = true, a larger file_size, or allow_cached = true"
        )


def check_native_source_cell(cell: Cell, path: str) -> None:
    """A native platform with a disk source measures it raw: its disk workloads need
    ``target = "device"`` (hvbench formats no host device). Raises :class:`SpecError`."""
    platform, workload = cell.platform.spec, cell.workload.spec
    device = platform.host_device()
    if device is not None and \
            isinstance(workload, DiskWorkloadSpec) and workload.target != "device":
        raise SpecError(f"{path}: cell {cell.name}: disk.source {device}: the "
                        "host measures its device raw: set target = \"device\" (hvbench "
                        "makes no file system on a host device)")


def _is_share_cell(cell: Cell) -> bool:
    workload = cell.workload.spec
    return isinstance(workload, DiskWorkloadSpec) and workload.target == "filesystem"


def check_filesystem_cell(cell: Cell, path: str) -> None:
    """A ``target = "filesystem"`` disk workload runs on a guest's first virtio-fs
    share: every guest it runs on declares one (a qemu platform: hvbench's virtiofsd
    serves QEMU only). Raises :class:`SpecError` naming the platform and the field."""
    if not _is_share_cell(cell):
        return
    platform = cell.platform.spec
    where = f"{path}: platform {cell.platform.name}: workload {cell.workload.name}"
    if not platform.IS_HOST and not platform.SERVES_SHARES:
        raise SpecError(f"{where}: target = \"filesystem\" needs a virtio-fs share, "
                        "which hvbench serves to kind = \"qemu\" guests only; expected "
                        "kind = \"qemu\" with filesystem = { cache = \"auto\" }")
    vm = guest_vm(platform)
    if vm is not None and not vm.filesystems:
        raise SpecError(f"{where}: target = \"filesystem\" runs on the guest's first "
                        "shared directory; expected filesystem = { cache = \"auto\" } "
                        "(or filesystems = [...]) on the platform")


def native_share_dir(study: Study, workload: str) -> str | None:
    """The host directory where the native side of ``target = "filesystem"`` workload
    ``workload`` runs: the ``source`` the study's guests share (the first shared
    directory of every declared guest that has one: ``--only`` may leave no guest cell
    in this invocation, the directory is still theirs); None when they name none: then
    hvbench makes each guest's share in the work directory and the host runs in a
    directory of its own there, on the same filesystem. Raises :class:`SpecError` when
    the guests share different directories (the host runs on one)."""
    sources: dict[str | None, str] = {}
    for platform in study.platforms:
        vm = guest_vm(platform.spec)
        if vm is not None and vm.filesystems:
            sources.setdefault(vm.filesystems[0].source, platform.name)
    if len(sources) > 1:
        named = ", ".join(f"{name} ({source or 'none: in the work directory'})"
                          for source, name in sources.items())
        raise SpecError(f"{study.path}: workload {workload}: target = \"filesystem\": the "
                        f"guests share different directories ({named}); expected one "
                        "filesystem.source for all, which the host measures natively")
    return next(iter(sources), None)


def check_cell(cell: Cell, checks: StudyChecks) -> None:
    """Every check of a disk cell (the cache rule, a native device's target, a share's)."""
    check_cache_rule(cell, checks.host_memory_bytes)
    check_native_source_cell(cell, checks.path)
    check_filesystem_cell(cell, checks.path)


def check_study(study: Study) -> None:
    """The host measures one shared directory for every ``target = "filesystem"`` cell."""
    for cell in study.cells:
        if _is_share_cell(cell) and cell.platform.spec.IS_HOST:
            native_share_dir(study, cell.workload.name)
