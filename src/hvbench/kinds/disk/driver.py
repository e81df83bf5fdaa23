"""Disk workloads: fio jobs that reproduce the seeds' IOzone, Bonnie++ and dd tests.

The same job runs natively and in a guest. With ``target = "file"`` the guest formats its
first benchmark disk (ext4, with eager inode-table and journal init so no background
initialisation competes with the measurement) and the test file lives there, while the
native test file lives in the work directory, the filesystem that holds the guests'
images. With ``target = "device"`` the guest uses the raw benchmark disk and the native
side a file of the same size, allocated up front (fallocate) as a disk's blocks are,
and both are written in place.

Phase mapping (fio cannot replay IOzone or Bonnie++ byte for byte; these are the closest
equivalents, and every write phase ends with fsync as ``iozone -e`` and ``dd
conv=fdatasync`` do):

- iozone: write (new file), rewrite, read, reread (no cache drop before it: IOzone's
  re-read is a cache test), randread, randwrite; ``record_size`` default 16 MB.
- bonnie: block-write, block-rewrite (sequential read+write mix over the file: Bonnie++
  reads a chunk, dirties it and writes it back), block-read; seq-/rand- create, stat
  and delete of ``files`` zero-size files (fio's filecreate/filestat/filedelete
  engines, sequential or random file order). Chunk default 8 kB as Bonnie++.
- dd: write then read, 64 kB blocks, one outstanding request.
- fio-job: the user's job file; ``${HVBENCH_TARGET_DIR}`` and ``${HVBENCH_TARGET}``
  in it expand to the test directory and file/device (fio expands environment
  variables in job files). Each job in the output is a phase.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hvbench.errors import CommandError, HvbenchError, SpecError, stderr_tail
from hvbench.host.caches import drop_host_caches
from hvbench.host.inputs import decode_text, read_text_input
from hvbench.host.paths import work_dir
from hvbench.kinds.disk.spec import DiskWorkloadSpec
from hvbench.model.platform import PlatformSpec
from hvbench.model.qemu_argv import guest_share_mount
from hvbench.model.study import (
    disk_for,
)
from hvbench.platforms.base import BenchDisk, ExecResult, Platform, SharedDirs
from hvbench.workloads.fio import (
    OUTPUT_FORMAT,
    RAW_KIND,
    FioJob,
    FioResult,
    FioRw,
    fio_command_error,
    fio_error,
    parse_fio_json,
)
from hvbench.workloads.jobfile import (
    JobTarget,
    Overrides,
    Rewrite,
    Section,
    check_fits,
    parse_job_text,
    render_sections,
    rewrite_jobs,
    target_env,
)
from hvbench.workloads.outcome import PhaseOutcome

GUEST_MOUNT = "/mnt/hvbench"
NBD_URI_PREFIX = "nbd://"
#: Phases that must not find the data in any page cache.
COLD_PHASES = frozenset({"write", "read", "randread", "block-write", "block-read",
                         "seq-create", "rand-create"})
#: Phases that start from a fresh (deleted) test file.
FRESH_FILE_PHASES = frozenset({"write", "block-write"})
FILE_OP_ENGINES = {"create": "filecreate", "stat": "filestat", "delete": "filedelete"}


@dataclass(frozen=True)
class DiskTarget:
    """Where the test data goes on one platform."""

    path: str           # the test file, or the raw device
    directory: str      # the directory for file-op phases and job files
    device: str | None  # the guest's block device, if any
    #: A device, or the native stand-in for one (a file allocated up front): it is
    #: written in place, never deleted, as a disk is.
    raw: bool = False
    #: ``directory`` was made for this run in a shared directory (``target =
    #: "filesystem"``) and is removed with everything in it when the target is released.
    owned: bool = False




def _check(result: ExecResult, what: str) -> ExecResult:
    """``result`` if the command succeeded; else :class:`CommandError` led by the last
    lines of its stderr (mke2fs, mount, fallocate say there why they failed)."""
    if not result.ok:
        stderr = result.stderr.decode(errors="replace")
        output = (result.stdout + result.stderr).decode(errors="replace")
        raise CommandError(result.argv, result.exit_code, output, what,
                           tool_error=stderr_tail(stderr))
    return result


def _check_fio(result: ExecResult, what: str) -> ExecResult:
    """``result`` if fio succeeded; else :class:`CommandError` led by fio's own error
    lines and the error fields of its JSON."""
    if not result.ok:
        raise fio_command_error(result.argv, result.exit_code, result.text(),
                                result.stderr.decode(errors="replace"), what)
    return result


def _share_target(platform: Platform, native_dir: str | None) -> DiskTarget:
    """A fresh directory in the shared directory: in a guest its first virtio-fs mount,
    natively ``native_dir`` (the host directory the guests share) or the scratch
    directory (on the work directory's filesystem, where unnamed shares are made)."""
    if platform.is_guest:
        shares = platform.shared_dirs() if isinstance(platform, SharedDirs) else ()
        if not shares:
            raise SpecError(f"platform {platform.name}: target = \"filesystem\" needs a "
                            "shared directory: expected filesystem = { cache = \"auto\" }")
        base = shares[0][0]
    else:
        base = native_dir or platform.scratch_dir()
    directory = f"{base}/hvbench-{secrets.token_hex(4)}"
    _check(platform.exec(["mkdir", directory], timeout=60),
           "making the test directory in the shared directory")
    return DiskTarget(f"{directory}/hvbench.dat", directory, None, owned=True)


def prepare_target(platform: Platform, spec: DiskWorkloadSpec,
                   native_dir: str | None = None) -> DiskTarget:
    """Create the test location: format and mount the guest disk for ``file`` targets;
    for ``filesystem`` targets a fresh directory in the shared directory (natively in
    ``native_dir`` when given, see :func:`~hvbench.model.study.native_share_dir`).

    Raises :class:`CommandError` if mkfs, mount or mkdir fail, :class:`SpecError` for a
    ``filesystem`` target on a guest without a shared directory.
    """
    if spec.target == "filesystem":
        return _share_target(platform, native_dir)
    device = platform.bench_disk() if isinstance(platform, BenchDisk) else None
    if device is not None and not platform.is_guest:
        # The host measures the storage a guest is given: raw, never formatted.
        if spec.target != "device":
            raise SpecError(f"platform {platform.name}: disk.source {device}: the host "
                            "measures its device raw: set target = \"device\"")
        return DiskTarget(device, platform.scratch_dir(), device, raw=True)
    if device is not None:
        if spec.target == "device":
            return DiskTarget(device, platform.scratch_dir(), device, raw=True)
        # The full path: busybox (which runs guest commands) prefers its own mke2fs
        # applet, which cannot make ext4.
        _check(platform.exec(["/sbin/mke2fs", "-q", "-F", "-t", "ext4", "-E",
                              "lazy_itable_init=0,lazy_journal_init=0", device],
                             timeout=600), "formatting the guest's benchmark disk")
        _check(platform.exec(["sh", "-c", f"mkdir -p {GUEST_MOUNT} && "
                              f"mount -o noatime {device} {GUEST_MOUNT}"], timeout=60),
               "mounting the guest's benchmark disk")
        return DiskTarget(f"{GUEST_MOUNT}/hvbench.dat", GUEST_MOUNT, device)
    scratch = platform.scratch_dir()
    if spec.target == "device":
        # The native counterpart of a disk: a file whose blocks exist before the test,
        # so native writes do not pay for block allocation that a disk never does.
        path = f"{scratch}/hvbench.dev"
        _check(platform.exec(["fallocate", "-l", str(spec.file_size), path], timeout=600),
               "allocating the native test device file")
        return DiskTarget(path, scratch, None, raw=True)
    return DiskTarget(f"{scratch}/hvbench.dat", scratch, None)


def release_target(platform: Platform, target: DiskTarget) -> None:
    """Unmount the guest filesystem, remove a directory made in a shared directory
    (best effort: the guest may be gone)."""
    if target.owned:
        with contextlib.suppress(HvbenchError):
            platform.exec(["rm", "-rf", "--", target.directory], timeout=300)
        return
    if platform.is_guest and target.directory == GUEST_MOUNT:
        with contextlib.suppress(HvbenchError):
            platform.exec(["umount", GUEST_MOUNT], timeout=120)


def drop_caches(platform: Platform) -> dict[str, bool]:
    """Flush and drop the page cache in the guest (if any) and on the host.

    Returns which caches were dropped; the host's needs root.
    """
    dropped: dict[str, bool] = {}
    if platform.is_guest:
        result = platform.exec(["sh", "-c", "sync && echo 3 > /proc/sys/vm/drop_caches"],
                               timeout=300)
        dropped["guest"] = result.ok
    dropped["host"] = drop_host_caches()
    return dropped


def _file_op_job(spec: DiskWorkloadSpec, phase: str, target: DiskTarget) -> FioJob:
    order, op = phase.split("-", 1)
    directory = f"{target.directory}/bonnie-files"
    return FioJob(
        name=phase, rw="read" if op == "stat" else "write", filename=None,
        size=spec.files * 4096, bs=4096, direct=False, ioengine=FILE_OP_ENGINES[op],
        extra=(f"--directory={directory}", f"--nrfiles={spec.files}", "--filesize=4k",
               "--openfiles=1", "--create_on_open=1",
               # One name scheme for every phase, so stat and delete find what create made.
               "--filename_format=bonnie.$filenum",
               f"--file_service_type={'random' if order == 'rand' else 'sequential'}"),
    )


_BLOCK_RW: dict[str, FioRw] = {
    "write": "write", "rewrite": "write", "read": "read", "reread": "read",
    "randread": "randread", "randwrite": "randwrite",
    "block-write": "write", "block-rewrite": "rw", "block-read": "read",
}


def phase_job(spec: DiskWorkloadSpec, phase: str, target: DiskTarget) -> FioJob:
    """The fio job of one phase of a built-in profile (pure)."""
    if phase.split("-", 1)[-1] in FILE_OP_ENGINES:
        return _file_op_job(spec, phase, target)
    rw = _BLOCK_RW[phase]
    extra: list[str] = []
    if rw in ("write", "randwrite", "rw"):
        extra.append("--end_fsync=1")
    if rw == "rw":
        extra.append("--rwmixread=50")
    if not target.raw:
        extra.append("--fallocate=none")  # write phases really allocate, as the seeds did
    if target.path.startswith(NBD_URI_PREFIX):
        # The host reads an NBD export with fio's own NBD client (libnbd): this host's
        # kernel has no nbd module. A socket has no page cache, so direct does not apply.
        return FioJob(
            name=phase, rw=rw, filename=None, size=spec.file_size, bs=spec.io_size(),
            iodepth=spec.iodepth, direct=False, ioengine="nbd",
            extra=(f"--uri={target.path}", *extra),
        )
    return FioJob(
        name=phase, rw=rw, filename=target.path, size=spec.file_size, bs=spec.io_size(),
        iodepth=spec.iodepth, direct=spec.direct, ioengine=spec.ioengine, extra=tuple(extra),
    )


def metrics_of(results: list[FioResult], phase: str) -> dict[str, tuple[float, str]]:
    """Flatten fio results of one phase into stored metrics (directions summed)."""
    if not results:
        raise HvbenchError(f"fio reported no I/O for phase {phase}")
    file_op = phase.split("-", 1)[-1] in FILE_OP_ENGINES
    metrics: dict[str, tuple[float, str]] = {}
    if file_op:
        metrics["ops_s"] = (sum(r.iops for r in results), "ops/s")
    else:
        metrics["mb_s"] = (sum(r.mb_per_s for r in results), "MB/s")
        metrics["iops"] = (sum(r.iops for r in results), "IOPS")
    first = results[0]
    metrics["lat_mean_ms"] = (first.lat_mean_ms, "ms")
    for name, value in (("lat_p50_ms", first.lat_p50_ms), ("lat_p90_ms", first.lat_p90_ms),
                        ("lat_p99_ms", first.lat_p99_ms), ("lat_p999_ms", first.lat_p999_ms),
                        ("lat_p9999_ms", first.lat_p9999_ms)):
        if value is not None:
            metrics[name] = (value, "ms")
    # The workload's own view of its I/O path: what it kept in flight, and where its
    # latency went (submission, then completion).
    for name, value, unit in (("depth_mean", first.depth_mean, "requests"),
                              ("slat_mean_us", first.slat_mean_us, "us"),
                              ("clat_mean_us", first.clat_mean_us, "us")):
        if value is not None:
            metrics[name] = (value, unit)
    metrics["cpu_pct"] = (first.cpu_usr_pct + first.cpu_sys_pct, "%")
    metrics["cpu_usr_pct"] = (first.cpu_usr_pct, "%")
    metrics["cpu_sys_pct"] = (first.cpu_sys_pct, "%")
    return metrics


def before_phase(platform: Platform, spec: DiskWorkloadSpec, phase: str,
                 target: DiskTarget) -> dict[str, bool]:
    """Unmeasured set-up of a phase: delete the file for fresh-file phases, drop caches
    for cold phases. Returns which caches were dropped."""
    if phase in FRESH_FILE_PHASES and not target.raw:
        platform.exec(["rm", "-f", target.path], timeout=300)
    if phase.endswith("-create"):
        platform.exec(["sh", "-c", f"rm -rf {target.directory}/bonnie-files && "
                       f"mkdir -p {target.directory}/bonnie-files"], timeout=300)
    return drop_caches(platform) if phase in COLD_PHASES else {}


def run_phase(platform: Platform, spec: DiskWorkloadSpec, phase: str,
              target: DiskTarget) -> PhaseOutcome:
    """Run one measured phase; raises :class:`CommandError` if fio fails."""
    job = phase_job(spec, phase, target)
    result = _check_fio(platform.exec(job.argv(), timeout=spec.timeout_s),
                        f"fio phase {phase}")
    text = result.text()
    return PhaseOutcome(phase, metrics_of(parse_fio_json(text), phase), text, RAW_KIND)


def _job_target(target: DiskTarget) -> JobTarget:
    return JobTarget(target.directory, target.path, target.raw)


def _overrides(spec: DiskWorkloadSpec) -> Overrides:
    return Overrides(size=spec.file_size if spec.file_size_given() else None,
                     runtime_s=spec.runtime, ramp_s=spec.ramp_time,
                     default_size=spec.file_size)


def _parse_lines(result: ExecResult) -> list[int]:
    return [int(word) for word in result.text().split() if word.isdigit()]


def target_capacity(platform: Platform, spec: DiskWorkloadSpec, target: DiskTarget) -> int:
    """Bytes the job file can use on ``target``: the free space of the target
    filesystem (``stat -f``), the guest device's size (sysfs), or the size of the native
    stand-in for a device. Raises :class:`CommandError` if the guest cannot tell."""
    if target.raw and (target.device is None or target.path.startswith(NBD_URI_PREFIX)):
        return spec.file_size
    if target.raw and target.device is not None:
        name = target.device.rsplit("/", 1)[-1]
        done = _check(platform.exec(["cat", f"/sys/class/block/{name}/size"], timeout=30),
                      "reading the benchmark device's size")
        return sum(_parse_lines(done)) * 512
    done = _check(platform.exec(["stat", "-f", "-c", "%a %S", target.directory], timeout=30),
                  "reading the free space of the benchmark filesystem")
    numbers = _parse_lines(done)
    if len(numbers) != 2:
        raise CommandError(done.argv, done.exit_code, done.text(), "stat -f output")
    return numbers[0] * numbers[1]


def plan_job_file(platform: Platform, spec: DiskWorkloadSpec, job_text: bytes,
                  target: DiskTarget, source: str = "fio job file") -> Rewrite:
    """The job file rewritten for ``target`` on ``platform`` (every job pointed at it,
    the workload's overrides applied), checked to fit the space there.

    Raises :class:`SpecError` when a job names a host path outside the target natively
    or needs more space than the target has (both numbers named).
    """
    sections = parse_job_text(decode_text(job_text, source, "a fio job file"), source,
                              _no_include(source))
    jtarget = _job_target(target)
    native = not platform.is_guest
    rewrite = rewrite_jobs(sections, jtarget, _overrides(spec), env=target_env(jtarget),
                           native=native, host_paths=spec.host_paths, source=source)
    where = f"the target {target.directory if not target.raw else target.path} on " \
        f"{platform.name}"
    check_fits(rewrite.jobs, jtarget, target_capacity(platform, spec, target), source, where)
    return rewrite


def run_job_file(platform: Platform, spec: DiskWorkloadSpec, job_text: bytes,
                 target: DiskTarget) -> list[PhaseOutcome]:
    """The fio-job profile: the user's job file (as :func:`job_file_text` returns it),
    rewritten by :func:`plan_job_file`, one phase per job in fio's output.

    fio gets ``spec.timeout_s``. The first outcome carries the rewritten file and the
    list of changes as attachments (raw kinds ``fio-job-rewritten``, ``fio-job-changes``).
    Raises :class:`SpecError` (see :func:`plan_job_file`), :class:`CommandError` led by
    fio's own error lines if fio fails.
    """
    rewrite = plan_job_file(platform, spec, job_text, target)
    path = f"{platform.scratch_dir()}/hvbench-job.fio"
    platform.write_file(path, rewrite.text.encode())
    env = {"HVBENCH_TARGET_DIR": target.directory, "HVBENCH_TARGET": target.path}
    argv = ["fio", f"--output-format={OUTPUT_FORMAT}", path]
    text = _check_fio(platform.exec(argv, timeout=spec.timeout_s, env=env),
                      "fio job file").text()
    outcomes: dict[str, list[FioResult]] = {}
    for result in parse_fio_json(text):
        outcomes.setdefault(result.job, []).append(result)
    phases = [PhaseOutcome(name, metrics_of(results, name), text, RAW_KIND)
              for name, results in outcomes.items()]
    if phases:
        phases[0].attachments = [("fio-job-rewritten", rewrite.text),
                                 ("fio-job-changes", json.dumps(list(rewrite.changes)))]
    return phases


def _no_include(source: str) -> Callable[[str], str]:
    """Includes are inlined by :func:`job_file_text`; one left over is an error."""
    def refuse(name: str) -> str:
        raise SpecError(f"{source}: include {name}: includes must be inlined first")
    return refuse


def _job_path(spec: DiskWorkloadSpec, study_path: str) -> Path:
    if spec.job_file is None:
        raise HvbenchError("internal: no job file")
    return Path(study_path).parent / spec.job_file


def _read_includes(base: Path) -> Callable[[str], str]:
    """Reads ``include`` files relative to the including job file's directory, as fio
    does, with the same safety as the job file itself."""
    def read(name: str) -> str:
        path = base.parent / name
        return read_text_input(path, f"a fio job file included by {base.name}")
    return read


def job_file_text(spec: DiskWorkloadSpec, study_path: str) -> bytes:
    """The user's job file, relative to the study file, with its ``include`` files
    inlined (the text is copied into guests, where the includes do not exist).

    Raises :class:`SpecError` naming the file when it is missing, not a regular file,
    larger than 1 MiB, not UTF-8 text, or has a malformed section header.
    """
    path = _job_path(spec, study_path)
    try:
        text = read_text_input(path, "the fio job file")
        sections = parse_job_text(text, str(path), _read_includes(path))
    except SpecError as exc:
        raise SpecError(f"{study_path}: workload job_file: {exc}") from exc
    return render_sections(sections, f"{path}, includes inlined by hvbench").encode()


#: Bytes a filesystem keeps for itself on a guest disk (ext4 journal, inode tables):
#: the load-time estimate of a file target's space; the run measures the real one.
EXT4_OVERHEAD = 0.1
_PARSE_ONLY_TIMEOUT_S = 30.0


def _load_time_target(spec: DiskWorkloadSpec, platform: PlatformSpec | None,
                      ) -> tuple[JobTarget, int | None, bool]:
    """The target a cell will use, the space it will have (None: unknown) and whether it
    runs natively (so it does without a platform), as far as they are known before
    anything starts."""
    if platform is not None and platform.attached():
        where = platform.attached_path() or GUEST_MOUNT
        return JobTarget(where, f"{where}/hvbench.dat", spec.target == "device"), None, False
    native = platform is None or platform.IS_HOST
    if spec.target == "filesystem":
        # The share's free space is the host directory's, known only once the study
        # resolves it: the run checks it (plan_job_file, stat -f on the target).
        where = str(work_dir()) if native else guest_share_mount(0)
        return JobTarget(where, f"{where}/hvbench.dat", False), None, native
    if platform is not None and not native:
        disk = disk_for(platform)
        size = disk.size if disk is not None else None
        if spec.target == "device":
            return JobTarget(GUEST_MOUNT, "<the guest disk hvb-d0>", True), size, False
        usable = int(size * (1 - EXT4_OVERHEAD)) if size is not None else None
        return JobTarget(GUEST_MOUNT, f"{GUEST_MOUNT}/hvbench.dat", False), usable, False
    scratch = str(work_dir())
    if spec.target == "device":
        return JobTarget(scratch, f"{scratch}/hvbench.dev", True), spec.file_size, True
    return JobTarget(scratch, f"{scratch}/hvbench.dat", False), \
        shutil.disk_usage(scratch).free, True


#: fio's answers (exit status, stdout, stderr) to rewritten job files this process had it
#: parse, keyed by the text with its scratch directory replaced by :data:`_SCRATCH_MARK`:
#: the cells of a study that share a job file (and a reload of the same study) start fio
#: once, not once per cell (about 0.2 s each). fio's parse depends only on that text.
_fio_answers: dict[str, tuple[int, str, str]] = {}
_FIO_ANSWERS_KEPT = 256
_SCRATCH_MARK = "\0hvbench-parse-scratch\0"


def _fio_parse_only(sections: list[Section], spec: DiskWorkloadSpec, source: str) -> None:
    """fio's own reading of the rewritten file (``fio --parse-only``), against a
    temporary directory so options that check their paths find one. Raises
    :class:`SpecError` with fio's words if fio refuses it, or if it does not answer in
    30 s; a host without fio skips the check (the run will say fio is missing). The
    same rewritten text is given to fio once per process (:data:`_fio_answers`)."""
    if shutil.which("fio") is None:
        return
    with tempfile.TemporaryDirectory(prefix="hvb-parse-") as scratch:
        target = JobTarget(scratch, f"{scratch}/hvbench.dat", spec.target == "device")
        rewrite = rewrite_jobs(sections, target, _overrides(spec), env=target_env(target),
                               native=False, source=source)
        key = rewrite.text.replace(scratch, _SCRATCH_MARK)
        answer = _fio_answers.get(key)
        if answer is None:
            answer = _run_fio_parse_only(Path(scratch), rewrite.text, source)
            if len(_fio_answers) >= _FIO_ANSWERS_KEPT:
                _fio_answers.clear()
            _fio_answers[key] = answer
    returncode, stdout, stderr = answer
    if returncode != 0:
        said = fio_error("", stderr).replace("\n", "; ") or stdout.strip()[-300:]
        raise SpecError(f"{source}: fio refuses the job file: {said}")


def _run_fio_parse_only(scratch: Path, text: str, source: str) -> tuple[int, str, str]:
    """``fio --parse-only`` of ``text`` written into ``scratch``: (exit status, stdout,
    stderr). Raises :class:`SpecError` if fio does not answer in 30 s."""
    job = scratch / "job.fio"
    job.write_text(text)
    try:
        done = subprocess.run(["fio", "--parse-only", str(job)], capture_output=True,
                              text=True, timeout=_PARSE_ONLY_TIMEOUT_S, check=False,
                              cwd=scratch)
    except subprocess.TimeoutExpired as exc:
        raise SpecError(f"{source}: fio --parse-only did not answer in "
                        f"{_PARSE_ONLY_TIMEOUT_S:g} s") from exc
    return done.returncode, done.stdout, done.stderr


def check_job_file(spec: DiskWorkloadSpec, study_path: str,
                   platform: PlatformSpec | None = None) -> list[str]:
    """Check a fio-job workload before anything boots; returns the changes hvbench will
    make on ``platform`` (native when None).

    Reads the job file (see :func:`job_file_text`), has fio parse it (``fio
    --parse-only``, 30 s timeout), rewrites it for the target the cell will use and
    checks that the jobs fit: natively the free space of the work directory or the
    ``file_size`` of a device stand-in, in a guest its first disk (less about 10 % for
    ext4 on file targets). Raises :class:`SpecError`, one line naming the study and the
    job file: unreadable file, fio's refusal, a job naming a host path outside the
    target natively (unless in ``host_paths``), or the numbers when the jobs do not fit.
    """
    source = f"{study_path}: workload job_file {spec.job_file}"
    text = job_file_text(spec, study_path).decode()
    sections = parse_job_text(text, source, _no_include(source))
    _fio_parse_only(sections, spec, source)
    target, available, native = _load_time_target(spec, platform)
    rewrite = rewrite_jobs(sections, target, _overrides(spec), env=target_env(target),
                           native=native, host_paths=spec.host_paths, source=source)
    if available is not None:
        where = "the work directory's filesystem" if native and not target.device else \
            ("the native device stand-in (file_size)" if native else "the guest's disk")
        check_fits(rewrite.jobs, target, available, source, where)
    return list(rewrite.changes)
