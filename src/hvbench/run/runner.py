"""The study runner: cells x repetitions, each measurement committed as it finishes.

Order: each repetition shuffles its platforms, then each platform's workloads, from the
study seed (drift spreads over all cells; the order is recorded). A guest boots once
per platform and repetition and runs that platform's workloads in a row; a workload
failure marks that cell failed with the guest's console log, the guest is rebooted if
it died, and the study goes on. ``--resume RUN`` skips every (cell, repetition) already
stored as ok, so an interrupted study (even by ``kill -9``) finishes without redoing or
duplicating anything.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from hvbench import __version__
from hvbench.errors import GuestError, HostError, HvbenchError, SpecError
from hvbench.host import facts
from hvbench.host.cgroups import cleanup_orphaned_cgroups
from hvbench.host.paths import remove_orphaned_dirs, work_dir
from hvbench.model.study import (
    SELF_BOOTING_KINDS,
    Cell,
    DiskWorkloadSpec,
    LifecycleWorkloadSpec,
    NetworkWorkloadSpec,
    PropagationWorkloadSpec,
    QemuPlatformSpec,
    Study,
    cell_order,
)
from hvbench.model.study import parse_study as parse_study_text
from hvbench.monitors.session import PhaseMonitors, monitors_for
from hvbench.netlab.lab import cleanup_orphaned_labs
from hvbench.platforms.base import Platform
from hvbench.platforms.native import NativePlatform
from hvbench.platforms.qemu import QemuPlatform
from hvbench.run.lab_session import (
    LabSession,
    MeasuredPhase,
    run_network_cell,
    run_propagation_cell,
    run_web_cell,
    web_ports,
)
from hvbench.run.scenario import ScenarioRun
from hvbench.store.sqlite import (
    CellRecord,
    MeasurementRecord,
    RawRecord,
    SampleRecord,
    Store,
)
from hvbench.workloads import disk, lifecycle
from hvbench.workloads.outcome import PhaseOutcome

LOCK_NAME = "hvbench-run.lock"


def load_study(path: Path) -> Study:
    """Read, parse and expand a study file; check that every job file it names exists.

    Raises :class:`SpecError` (exit code 2) naming the file, field and expectation.
    """
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the study file: {exc.strerror}") from exc
    study = parse_study_text(text, str(path), facts.memory_bytes() or 0)
    for variant in study.workloads:
        spec = variant.spec
        if isinstance(spec, DiskWorkloadSpec) and spec.job_file:
            disk.job_file_text(spec, str(path))
    return study


def git_commit() -> str | None:
    """The commit of the hvbench source tree, when it runs from a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        done = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


# -- the lock ----------------------------------------------------------------------------
class RunLock:
    """One study at a time per host: an flock on a file in the work directory.

    The holder's run id, pid and study are written into the file, so a refused second
    study can name the running one. The kernel drops the lock when the holder dies,
    even by ``kill -9``.
    """

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_NAME
        self._file: TextIO | None = None

    def acquire(self, run_id: str, study: str) -> None:
        """Take the lock or raise :class:`HostError` naming the running study."""
        while True:
            handle = self.path.open("a+")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as exc:
                handle.seek(0)
                holder = handle.read().strip() or "unknown"
                handle.close()
                raise HostError(f"another study is running on this host: {holder} "
                                f"(lock {self.path}); wait for it or stop it") from exc
            # The holder unlinks the file on release; if that happened between our open
            # and our flock, we hold a lock on a dead file: retry on the new one.
            if self._same_file(handle):
                break
            handle.close()
        self._file = handle
        self.describe(run_id, study)

    def _same_file(self, handle: TextIO) -> bool:
        try:
            return self.path.stat().st_ino == os.fstat(handle.fileno()).st_ino
        except FileNotFoundError:
            return False

    def describe(self, run_id: str, study: str) -> None:
        """Rewrite what the lock file says about its holder."""
        if self._file is None:
            return
        self._file.seek(0)
        self._file.truncate()
        self._file.write(json.dumps({"run": run_id, "pid": os.getpid(), "study": study}))
        self._file.flush()

    def remove_stale(self) -> bool:
        """Remove the lock file when no live process holds it (its holder was killed
        by ``kill -9``: the kernel dropped the lock, the file stayed). True if removed."""
        try:
            handle = self.path.open("r")
        except FileNotFoundError:
            return False
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # a live study holds it (possibly this process)
            if self._same_file(handle):
                self.path.unlink(missing_ok=True)
                return True
        return False

    def release(self) -> None:
        """Unlink and unlock (safe to call twice)."""
        if self._file is not None:
            self.path.unlink(missing_ok=True)
            self._file.close()
            self._file = None


# -- running -----------------------------------------------------------------------------
@dataclass
class CellResult:
    """What one (cell, repetition) produced, ready for the store."""

    measurements: list[MeasurementRecord] = field(default_factory=list)
    samples: list[SampleRecord] = field(default_factory=list)
    raw: list[RawRecord] = field(default_factory=list)


@dataclass(frozen=True)
class PlannedItem:
    repetition: int  # -1 for warm-up
    cell: Cell
    position: int


ProgressHook = Callable[[PlannedItem, str], None]


def make_platform(cell: Cell, session: LabSession | None = None,
                  web_ports: Sequence[int] = ()) -> Platform:
    """The platform of ``cell``; a guest's NICs are wired into the lab, if any."""
    spec = cell.platform.spec
    if isinstance(spec, QemuPlatformSpec):
        vm = (session.guest_spec(spec.vm, cell.platform.name, web_ports)
              if session is not None else spec.vm)
        return QemuPlatform(vm, name=f"hvbench-{os.getpid()}-{cell.platform_name[:20]}")
    return NativePlatform(name=cell.platform.name)


def net_cell_result(phases: list[MeasuredPhase]) -> CellResult:
    """The store's records of a network or web cell's measured phases."""
    out = CellResult()
    for measured in phases:
        outcome = measured.outcome
        out.measurements += _phase_records(outcome.phase, outcome.metrics, measured.wall_s,
                                           measured.monitors.summary)
        out.samples += [SampleRecord(outcome.phase, monitor, t, values)
                        for monitor, t, values in measured.monitors.rows()]
        out.samples += [SampleRecord(outcome.phase, outcome.raw_kind.split("-")[0], t, values)
                        for t, values in outcome.series]
        out.raw.append(RawRecord(outcome.phase, outcome.raw_kind, outcome.raw))
    return out


def propagation_cell_result(phases: list[MeasuredPhase]) -> CellResult:
    """The store's records of a propagation cell: as :func:`net_cell_result` (each
    phase's metrics and wall time; the monitors' summary and series, and the transfer's
    progress series, with ``transfer``), but the raw document, which every phase
    carries, is stored once, under phase ``propagation``."""
    out = net_cell_result(phases)
    out.raw = [RawRecord("propagation", phases[0].outcome.raw_kind, phases[0].outcome.raw)
               ] if phases else []
    return out


def _phase_records(phase: str, metrics: Mapping[str, tuple[float, str]], wall_s: float,
                   monitor_summary: Mapping[str, float],
                   caches_dropped: Mapping[str, bool] | None = None) -> list[MeasurementRecord]:
    records = [MeasurementRecord(phase, m, v, u) for m, (v, u) in metrics.items()]
    records.append(MeasurementRecord(phase, "phase_wall_s", wall_s, "s"))
    records += [MeasurementRecord(phase, name, value, "")
                for name, value in monitor_summary.items()]
    for which, dropped in (caches_dropped or {}).items():
        records.append(MeasurementRecord(phase, f"cache_dropped.{which}", float(dropped),
                                         "bool"))
    return records


def run_disk_cell(platform: Platform, cell: Cell, study: Study,
                  monitors: PhaseMonitors) -> CellResult:
    """Run every phase of a disk workload on a started platform."""
    spec = cell.workload.spec
    if not isinstance(spec, DiskWorkloadSpec):
        raise SpecError(f"cell {cell.name}: unsupported workload kind")
    out = CellResult()
    target = disk.prepare_target(platform, spec)
    try:
        if spec.profile == "fio-job":
            text = disk.job_file_text(spec, study.path)
            monitors.start()
            started = time.monotonic()
            outcomes = disk.run_job_file(platform, spec, text, target)
            _store_phase(out, outcomes, time.monotonic() - started, monitors, "job-file")
            return out
        for phase in spec.phase_list():
            dropped = disk.before_phase(platform, spec, phase, target)
            monitors.start()
            started = time.monotonic()
            outcome = disk.run_phase(platform, spec, phase, target)
            wall = time.monotonic() - started
            outcome.caches_dropped = dropped
            _store_phase(out, [outcome], wall, monitors, phase)
    finally:
        disk.release_target(platform, target)
    return out


def _store_phase(out: CellResult, outcomes: list[PhaseOutcome], wall: float,
                 monitors: PhaseMonitors, raw_phase: str) -> None:
    """Add the phases' metrics, the monitors' summary and series, and the raw output
    (stored once under ``raw_phase``: a job file's phases share one fio document)."""
    result = monitors.stop()
    for outcome in outcomes:
        out.measurements += _phase_records(outcome.phase, outcome.metrics, wall,
                                           result.summary, outcome.caches_dropped)
    out.samples += [SampleRecord(raw_phase, monitor, t, values)
                    for monitor, t, values in result.rows()]
    if outcomes:
        out.raw.append(RawRecord(raw_phase, "fio-json", outcomes[0].raw))


def environment(study: Study) -> dict[str, Any]:
    """The environment every run carries: host, QEMU, accelerator, versions."""
    qemu = facts.qemu_info()
    accel = None
    if any(isinstance(p.spec, QemuPlatformSpec) for p in study.platforms):
        from hvbench.platforms.kvm_probe import kvm_status  # noqa: PLC0415 - may boot a guest

        accel = "kvm" if kvm_status().usable else "tcg"
    return {
        **facts.host_summary(), "qemu_version": qemu.version, "qemu_package": qemu.package,
        "accelerator": accel, "hvbench_version": __version__, "git_commit": git_commit(),
        "work_dir": facts.free_disk(work_dir()),
        # Whether guests' tap NICs could use vhost-net (in-kernel virtio-net backend).
        "vhost_net": facts.vhost_net_available() if study.lab else None,
    }


class StudyRunner:
    """Runs a study into a store. ``progress`` is told about every item as it starts
    and ends; the CLI turns that into a progress bar with ETA."""

    def __init__(self, study: Study, store: Store, *, progress: ProgressHook | None = None,
                 run_id: str | None = None, session: LabSession | None = None) -> None:
        self.study = study
        self.session = session
        self.store = store
        self.progress = progress or (lambda item, state: None)
        self.run_id = run_id
        self.failures = 0
        self.boot_s: list[float] = []
        #: The scenario of the group being run (neighbours, cgroups), if any.
        self.scenario: ScenarioRun | None = None
        #: Lifecycle repository images, written once per run and size.
        self.lifecycle_cache: lifecycle.RepositoryCache = {}

    def plan(self, cell_ids: dict[str, int]) -> list[PlannedItem]:
        """Every (repetition, cell) still to do, in run order; records each order."""
        done = self.store.done(self.run_id or "")
        items: list[PlannedItem] = []
        position = 0
        for rep in range(self.study.study.repetitions):
            order = cell_order(self.study.cells, self.study.study.seed, rep)
            self.store.record_order(self.run_id or "", rep, [c.name for c in order])
            for cell in order:
                if (cell_ids[cell.name], rep) not in done:
                    items.append(PlannedItem(rep, cell, position))
                position += 1
        return items

    def warmup_items(self) -> list[PlannedItem]:
        items = []
        for round_ in range(self.study.study.warmup):
            order = cell_order(self.study.cells, self.study.study.seed, -1 - round_)
            items += [PlannedItem(-1, cell, -1) for cell in order]
        return items

    def run(self, lock: RunLock, on_plan: Callable[[int], None] | None = None) -> RunOutcome:
        """Create (or reopen) the run and execute everything still to do. On any
        exception the run is marked interrupted and the exception propagates."""
        resume = self.run_id is not None
        run_id = self.start_run()
        lock.describe(run_id, self.study.study.name)
        try:
            ids = self.cell_ids()
            items = ([] if resume else self.warmup_items()) + self.plan(ids)
            if on_plan is not None:
                on_plan(len(items))
            self.execute(items, ids)
        except BaseException:
            self.store.set_status(run_id, "interrupted", finished_at=_now())
            raise
        finally:
            lifecycle.remove_repository(self.lifecycle_cache)
        self.store.set_status(run_id, "complete", finished_at=_now())
        return RunOutcome(run_id, self.failures, tuple(self.boot_s))

    def start_run(self) -> str:
        """Create the run (or reopen it for resume) and its cells."""
        if self.run_id is None:
            self.run_id = self.store.create_run(
                run_id=None, study_name=self.study.study.name, study_path=self.study.path,
                study_text=self.study.text, seed=self.study.study.seed,
                env=environment(self.study), hvbench_version=__version__,
                git_commit=git_commit())
        else:
            self.store.set_status(self.run_id, "running")
        return self.run_id

    def cell_ids(self) -> dict[str, int]:
        records = [CellRecord(c.name, c.platform_name, _platform_json(c),
                              c.workload.name, c.workload.spec.model_dump(mode="json"))
                   for c in self.study.cells]
        return self.store.add_cells(self.run_id or "", records)

    def execute(self, items: list[PlannedItem], cell_ids: dict[str, int]) -> None:
        """Run the items, booting each platform once per consecutive group."""
        for group in _groups(items):
            self._run_group(group, cell_ids)

    def _run_group(self, group: list[PlannedItem], cell_ids: dict[str, int]) -> None:
        """Run a group's items on one booted platform (and its scenario)."""
        platform: Platform | None = None
        self.scenario = None
        try:
            for item in group:
                if item.cell.workload.spec.kind in SELF_BOOTING_KINDS:
                    self._run_self_booting(item, cell_ids)
                    continue
                boot_s = None
                if platform is None:
                    platform = self._boot(item, cell_ids)
                    if platform is None:
                        continue
                    boot_s = self.boot_s[-1]
                alive = self._run_item(platform, item, cell_ids, boot_s)
                if not alive:
                    self._stop_platform(platform)
                    platform = None
        finally:
            if platform is not None:
                self._stop_platform(platform)

    def _stop_platform(self, platform: Platform) -> None:
        try:
            if self.scenario is not None:
                self.scenario.stop()
        finally:
            self.scenario = None
            platform.stop()

    def _boot(self, item: PlannedItem, cell_ids: dict[str, int]) -> Platform | None:
        platform = make_platform(item.cell, self.session,
                                 web_ports(self.study, item.cell.platform.name))
        self.progress(item, "booting")
        started = time.monotonic()
        try:
            platform.start()
        except GuestError as exc:
            self._record_failure(item, cell_ids, exc, platform)
            return None
        self.boot_s.append(time.monotonic() - started)
        scenario = item.cell.scenario
        if scenario is not None and isinstance(platform, QemuPlatform):
            run = ScenarioRun(scenario.spec, scenario.name, platform, session=self.session,
                              key=item.cell.platform_name)
            self.progress(item, "starting neighbours")
            try:
                run.start()
            except HvbenchError as exc:
                self._record_failure(item, cell_ids, exc, platform)
                platform.stop()
                return None
            except BaseException:
                # A bug or Ctrl-C: the target must not outlive the run either.
                platform.stop()
                raise
            self.scenario = run
        return platform

    def _run_item(self, platform: Platform, item: PlannedItem,
                  cell_ids: dict[str, int], boot_s: float | None) -> bool:
        """Run one item; returns False when the platform died and must be rebooted.

        ``boot_s``: the platform was booted for this item, in that many seconds; it is
        stored with it (phase ``boot``), so boot times are measurements too.
        """
        self.progress(item, "running")
        started = _now()
        try:
            result = self._run_cell(platform, item.cell)
        except HvbenchError as exc:
            self._record_failure(item, cell_ids, exc, platform)
            return _is_alive(platform)
        if boot_s is not None and isinstance(platform, QemuPlatform):
            result.measurements.append(MeasurementRecord("boot", "boot_s", boot_s, "s"))
        self._record_ok(item, cell_ids, result, started, platform)
        return True

    def _run_cell(self, platform: Platform, cell: Cell) -> CellResult:
        """Run one cell's workload on a started platform, monitors around each phase."""
        spec = cell.workload.spec
        scenario = self.scenario
        if isinstance(spec, DiskWorkloadSpec):
            monitors = monitors_for(platform)
            if scenario is not None:
                monitors = scenario.monitors(monitors)
            try:
                result = run_disk_cell(platform, cell, self.study, monitors)
            except BaseException:
                monitors.abort()
                raise
            return self._with_scenario(result)
        session = self.session
        if session is None:
            raise HvbenchError(f"cell {cell.name}: a network workload runs without a lab")

        def phase_monitors(platforms: list[Platform]) -> PhaseMonitors:
            labels = session.interfaces(*platforms)
            if scenario is None:
                return monitors_for(platform, interfaces=labels)
            inner = monitors_for(platform, interfaces=labels | scenario.interfaces())
            return scenario.monitors(inner)

        run = run_network_cell if isinstance(spec, NetworkWorkloadSpec) else run_web_cell
        result = net_cell_result(run(session, platform, cell, phase_monitors))
        if isinstance(platform, QemuPlatform):
            # Whether the guest's tap NICs had the in-kernel vhost-net backend.
            result.measurements += [MeasurementRecord(phase, "vhost", float(platform.vhost),
                                                      "bool") for phase in spec.phase_list()]
        return self._with_scenario(result)

    def _with_scenario(self, result: CellResult) -> CellResult:
        """Add what the scenario set up (neighbours' argv, cgroups) as a raw output."""
        if self.scenario is not None:
            result.raw.append(RawRecord("scenario", "scenario-json",
                                        json.dumps(self.scenario.describe())))
        return result

    # -- workloads that boot their own guests -------------------------------------------
    def _run_self_booting(self, item: PlannedItem, cell_ids: dict[str, int]) -> None:
        """Run a lifecycle or propagation cell: it boots (and stops) its own guests from
        the platform's VM spec, so the runner boots nothing for it."""
        self.progress(item, "running")
        started = _now()
        try:
            result = self._self_booting_result(item.cell)
        except HvbenchError as exc:
            self._record_failure(item, cell_ids, exc, None)
            return
        self._record_ok(item, cell_ids, result, started, None)

    def _record_ok(self, item: PlannedItem, cell_ids: dict[str, int], result: CellResult,
                   started: str, platform: Platform | None) -> None:
        """Commit a measured repetition (warm-up items are not stored)."""
        if item.repetition >= 0:
            self.store.record_repetition(
                run_id=self.run_id or "", cell_id=cell_ids[item.cell.name],
                repetition=item.repetition, position=item.position, status="ok",
                measurements=result.measurements, samples=result.samples, raw=result.raw,
                qemu_argv=getattr(platform, "argv", None), accel=getattr(platform, "accel", None),
                started_at=started, finished_at=_now())
        self.progress(item, "done")

    def _self_booting_result(self, cell: Cell) -> CellResult:
        platform = cell.platform.spec
        spec = cell.workload.spec
        if not isinstance(platform, QemuPlatformSpec):
            raise SpecError(f"cell {cell.name}: {spec.kind} needs a qemu platform")
        name = f"hvbench-{os.getpid()}-{cell.platform_name[:20]}"
        if isinstance(spec, LifecycleWorkloadSpec):
            outcomes = lifecycle.run_lifecycle(spec, platform.vm, name=name, scratch=work_dir(),
                                               source_cache=self.lifecycle_cache)
            return self_booting_result(outcomes)
        if isinstance(spec, PropagationWorkloadSpec):
            session = self.session
            if session is None:
                raise HvbenchError(f"cell {cell.name}: a propagation workload runs "
                                   "without a lab")
            # The lab's bridge and every lab host's veth (the repository's among them).
            monitors = monitors_for(session.host, interfaces=session.interfaces())
            try:
                phases = run_propagation_cell(session, platform.vm, cell, monitors)
            except BaseException:
                monitors.abort()
                raise
            return propagation_cell_result(phases)
        raise SpecError(f"cell {cell.name}: unsupported workload kind {spec.kind}")

    def _record_failure(self, item: PlannedItem, cell_ids: dict[str, int],
                        exc: BaseException, platform: Platform | None) -> None:
        self.failures += 1
        console = platform.console_tail(200) if isinstance(platform, QemuPlatform) else None
        if console is None and isinstance(exc, GuestError):
            console = exc.console_tail or None
        if item.repetition >= 0:
            self.store.record_repetition(
                run_id=self.run_id or "", cell_id=cell_ids[item.cell.name],
                repetition=item.repetition, position=item.position, status="failed",
                measurements=[], samples=[], raw=[], error=str(exc), console_log=console,
                qemu_argv=getattr(platform, "argv", None), accel=getattr(platform, "accel", None),
                started_at=_now(), finished_at=_now())
        self.progress(item, "failed")


def self_booting_result(outcomes: Sequence[PhaseOutcome]) -> CellResult:
    """The store's records of a lifecycle cell: each phase's metrics, its series, and
    the raw document once (every phase carries the same one)."""
    out = CellResult()
    for outcome in outcomes:
        out.measurements += [MeasurementRecord(outcome.phase, m, v, u)
                             for m, (v, u) in outcome.metrics.items()]
        out.samples += [SampleRecord(outcome.phase, "lifecycle", t, values)
                        for t, values in outcome.series]
    if outcomes:
        out.raw.append(RawRecord("lifecycle", outcomes[0].raw_kind, outcomes[0].raw))
    return out


def _is_alive(platform: Platform) -> bool:
    return platform.is_running() if isinstance(platform, QemuPlatform) else True


def _platform_json(cell: Cell) -> dict[str, Any]:
    """The platform's definition; in a scenario, with the scenario's."""
    out: dict[str, Any] = cell.platform.spec.model_dump(mode="json")
    if cell.scenario is not None:
        out = {**out, "scenario": {"name": cell.scenario.name,
                                   **cell.scenario.spec.model_dump(mode="json")}}
    return out


def _groups(items: list[PlannedItem]) -> Iterator[list[PlannedItem]]:
    group: list[PlannedItem] = []
    for item in items:
        if group and (item.repetition != group[0].repetition
                      or item.cell.platform_name != group[0].cell.platform_name):
            yield group
            group = []
        group.append(item)
    if group:
        yield group


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    failures: int
    boot_s: tuple[float, ...]


def resume_study(store: Store, run_id: str) -> Study:
    """The study of a stored run, parsed from the text stored with it."""
    record = store.get_run(run_id)
    return parse_study_text(record.study_text, record.study_path, facts.memory_bytes() or 0)


def run_study(study: Study, store: Store, *, resume: str | None = None,
              progress: ProgressHook | None = None,
              on_plan: Callable[[int], None] | None = None) -> RunOutcome:
    """Run (or resume) ``study`` into ``store`` under the host-wide run lock.

    Orphans of an earlier ``kill -9`` are removed first. On any exception (including
    Ctrl-C / SIGTERM) the run is marked interrupted and the exception propagates; every
    measurement finished before it is already committed. Raises :class:`HostError` if
    another study holds the lock.
    """
    lock = RunLock(work_dir())
    lock.acquire(resume or "(starting)", study.study.name)
    try:
        remove_orphans()
        with contextlib.ExitStack() as stack:
            session = stack.enter_context(LabSession(study)) if study.lab else None
            runner = StudyRunner(study, store, progress=progress, run_id=resume,
                                 session=session)
            return runner.run(lock, on_plan)
    finally:
        lock.release()


def remove_orphans() -> list[str]:
    """Remove what an hvbench killed by ``kill -9`` left: its labs (namespaces, links,
    their processes), then its scratch directories. Returns what was removed."""
    removed = cleanup_orphaned_labs()
    removed += cleanup_orphaned_cgroups()
    for parent in (work_dir(), Path(tempfile.gettempdir())):
        removed += [str(path) for path in remove_orphaned_dirs(parent)]
    lock = RunLock(work_dir())
    if lock.remove_stale():
        removed.append(f"stale run lock {lock.path}")
    return removed


