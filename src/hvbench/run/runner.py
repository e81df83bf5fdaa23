"""The study runner: cells x repetitions, each measurement committed as it finishes.

Order: each repetition shuffles its platforms, then each platform's workloads, from the
study seed (drift spreads over all cells; the order is recorded; see
:mod:`hvbench.run.plan`). A guest boots once per platform and repetition and runs that
platform's workloads in a row; a workload failure marks that cell failed with the
guest's console log, the guest is rebooted if it died, and the study goes on. Every
cell runs through its kind (:mod:`hvbench.run.cells`): the runner never looks at
workload or platform types. ``--resume RUN`` skips every (cell, repetition) already
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from hvbench import __version__
from hvbench.analysis.precision import CellPrecision, cell_precision
from hvbench.errors import GuestError, HostError, HvbenchError, SpecError
from hvbench.host import facts, interrupt
from hvbench.host.blockdev import device_size, require_free_device
from hvbench.host.cgroups import cleanup_orphaned_cgroups
from hvbench.host.hostconfig import RAW_KIND as HOST_CONFIG_KIND
from hvbench.host.hostconfig import read_host_config
from hvbench.host.inputs import read_text_input
from hvbench.host.paths import orphaned_dirs, remove_orphaned_dirs, work_dir
from hvbench.model.libvirt_xml import DOMAIN_XML_KIND, MISSING_METRICS_KIND
from hvbench.model.overrides import STUDY_OVERRIDES
from hvbench.model.qemu_argv import CURRENT_CLOCKSOURCE, GUEST_CLOCKSOURCE_KIND
from hvbench.model.spec import source_kind
from hvbench.model.study import (
    Cell,
    Study,
    base_rounds,
    keep_cells,
    raw_file_sizes,
    repetition_rule,
    with_repetitions,
)
from hvbench.model.study import parse_study as parse_study_text
from hvbench.netlab.lab import cleanup_orphaned_labs
from hvbench.platforms.base import FailureEvidence, Platform
from hvbench.platforms.kinds import platform_kind
from hvbench.platforms.kvm_probe import kvm_status
from hvbench.platforms.libvirt import cleanup_orphaned_domains
from hvbench.platforms.socket_daemon import kill_orphaned_daemons
from hvbench.run import fleet_tls
from hvbench.run.cells.base import CellContext, CellResult, run_cell, scenario_monitors
from hvbench.run.cells.registry import (
    cell_kind,
    kind_of,
    needs_native_server,
    round_memories,
    run_states,
    server_ports,
)
from hvbench.run.lab_session import LabSession
from hvbench.run.plan import (
    PlannedItem,
    groups,
    repetition_order,
    round_cells,
    run_items,
)
from hvbench.run.scenario import ScenarioRun
from hvbench.store.records import MeasurementRecord, MeasurementRow, RawRecord, cell_record

if TYPE_CHECKING:
    from hvbench.store.database import Store

__all__ = ["CellResult", "PlannedItem", "RunLock", "RunOutcome", "StudyRunner", "load_study",
           "make_platform", "remove_orphans", "resume_study", "run_study"]

LOCK_NAME = "hvbench-run.lock"
#: The raw-output kind of a native platform's memory cgroup (JSON: limit, peak).
MEMORY_CGROUP_KIND = "memory-cgroup"
#: The raw-output kind of a guest's ``host_limits`` cgroup (paths, values written,
#: applied after boot).
HOST_LIMITS_KIND = "host-limits"


def load_study(path: Path, overrides: Sequence[str] = ()) -> Study:
    """Read, parse and expand a study file with the ``--set`` ``overrides``
    (``PATH=VALUE``, :mod:`hvbench.model.overrides`), then run every cell kind's checks
    of the files it names (a fio job file is read, parsed by fio and fitted to each
    cell's target) before anything starts.

    Raises :class:`SpecError` (exit code 2), one line naming the file, field and
    expectation, for any bytes: a directory, a FIFO, an oversized or non-UTF-8 file.
    """
    return study_from_text(read_text_input(path, "a study"), str(path), overrides)


def study_from_text(text: str, path: str, overrides: Sequence[str] = ()) -> Study:
    """:func:`load_study` of a study's ``text`` (``path`` names it, and relative job
    files are read from its directory); raises :class:`SpecError` like it."""
    study = parse_study_text(text, path, facts.memory_bytes() or 0, overrides)
    for cell in study.cells:
        kind_of(cell.workload.spec.kind).check(cell, path)
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
def describe_holder(text: str) -> str:
    """What a run lock file says about its holder, as a refused study names it: ``study
    NAME (run ID, pid N)``; the file's text as it is when it is not the JSON the holder
    writes (pure)."""
    try:
        holder = json.loads(text)
    except ValueError:
        holder = None
    if not isinstance(holder, dict) or "study" not in holder:
        return text.strip() or "unknown"
    return (f"study {holder.get('study')} (run {holder.get('run')}, "
            f"pid {holder.get('pid')})")


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
                holder = describe_holder(handle.read())
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

    def remove_stale(self, *, dry_run: bool = False) -> bool:
        """Remove the lock file when no live process holds it (its holder was killed
        by ``kill -9``: the kernel dropped the lock, the file stayed). True if removed
        (``dry_run``: if it would be; the file stays)."""
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
                if not dry_run:
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
ProgressHook = Callable[[PlannedItem, str], None]


def make_platform(cell: Cell, session: LabSession | None = None,
                  web_ports: Sequence[int] = ()) -> Platform:
    """The platform of ``cell``, not started; a guest's NICs are wired into the lab, if
    any, with ``web_ports`` forwarded on a user-mode NIC. May run the KVM probe (see
    :func:`hvbench.platforms.accel.choose_accel`)."""
    spec = cell.platform.spec
    kind = platform_kind(spec)
    wire = (None if session is None
            else lambda vm: session.guest_spec(vm, cell.platform.name, web_ports))
    return kind.build(spec, name=kind.instance_name(cell.platform.name, cell.platform_name),
                      wire=wire, resolve=None if session is None else session.resolve_source)


def stored_overrides(env: Mapping[str, Any]) -> tuple[str, ...]:
    """The ``--set`` overrides a run was started with (none for runs before them)."""
    return tuple(str(o) for o in env.get(STUDY_OVERRIDES) or ())


def environment(study: Study) -> dict[str, Any]:
    """The environment every run carries: host, QEMU, accelerator, versions. With a
    guest platform it asks the KVM probe (up to 20 s when no verdict is cached)."""
    qemu = facts.qemu_info()
    accel = None
    if any(platform_kind(p.spec).is_guest for p in study.platforms):
        accel = "kvm" if kvm_status().usable else "tcg"
    return {
        **facts.host_summary(), "qemu_version": qemu.version, "qemu_package": qemu.package,
        "accelerator": accel, "hvbench_version": __version__, "git_commit": git_commit(),
        "work_dir": facts.free_disk(work_dir()),
        # Whether guests' tap NICs could use vhost-net (in-kernel virtio-net backend).
        "vhost_net": facts.vhost_net_available() if study.lab else None,
        # The study text is stored as written; these `--set` changes were applied to it.
        STUDY_OVERRIDES: list(study.overrides),
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
        #: What each kind keeps for the whole run (lifecycle: its repository images),
        #: closed when the run ends.
        self.kind_state = run_states()
        #: Where each adaptive cell stopped (filled at the end of the run).
        self.precision: list[CellPrecision] = []
        #: What the registered kinds keep of this run's results for other cells of the
        #: same round (web: the maxima relative rates take a share of).
        self.memories = round_memories(study, self._stored_rows)

    def plan(self, cell_ids: dict[str, int], *, warmup: bool = False) -> list[PlannedItem]:
        """Every item of the base rounds still to do, in run order (after the warm-ups
        with ``warmup``); records each round's order."""
        rounds = base_rounds(self.study)
        for rep in range(rounds):
            order = round_cells(self.study, rep)
            self.store.record_order(self.run_id or "", rep, [c.name for c in order])
        stored = self.store.done(self.run_id or "")
        done = {(name, rep) for name, cell_id in cell_ids.items()
                for rep in range(rounds) if (cell_id, rep) in stored}
        return run_items(self.study, done, warmup=warmup)

    def run(self, lock: RunLock, on_plan: Callable[[int], None] | None = None,
            on_start: Callable[[str], None] | None = None) -> RunOutcome:
        """Create (or reopen) the run and execute everything still to do; ``on_start``
        is told the run id once the run exists. On any exception the run is marked
        interrupted and the exception propagates."""
        resume = self.run_id is not None
        run_id = self.start_run()
        lock.describe(run_id, self.study.study.name)
        try:
            if on_start is not None:
                on_start(run_id)
            ids = self.cell_ids()
            items = self.plan(ids, warmup=not resume)
            if on_plan is not None:
                on_plan(len(items))
            self.execute(items, ids)
            interrupt.check()
            self.precision = AdaptiveRounds(self, ids).run(len(items), on_plan)
        except BaseException:
            self.store.set_status(run_id, "interrupted", finished_at=_now())
            raise
        finally:
            for state in self.kind_state.values():
                state.close()
        self.store.set_status(run_id, "complete", finished_at=_now())
        return RunOutcome(run_id, self.failures, tuple(self.boot_s), tuple(self.precision))

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
        records = [cell_record(c) for c in self.study.cells]
        return self.store.add_cells(self.run_id or "", records)

    def execute(self, items: list[PlannedItem], cell_ids: dict[str, int]) -> None:
        """Run the items, booting each platform once per consecutive group."""
        for group in groups(items):
            interrupt.check()
            self._run_group(group, cell_ids)

    def _run_group(self, group: list[PlannedItem], cell_ids: dict[str, int]) -> None:
        """Run a group's items on one booted platform (and its scenario); items whose
        kind boots its own guests run without it."""
        platform: Platform | None = None
        self.scenario = None
        try:
            for item in group:
                if not cell_kind(item.cell).boots_platform:
                    self._run_item(item, None, cell_ids, None)
                    continue
                boot_s = None
                if platform is None:
                    platform = self._boot(item, cell_ids)
                    if platform is None:
                        continue
                    # Attaching to the user's running domain is no boot: not stored as one.
                    boot_s = None if _attached(item) else self.boot_s[-1]
                alive = self._run_item(item, platform, cell_ids, boot_s)
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
                                 server_ports(self.study, item.cell.platform.name))
        self.progress(item, "booting")
        started = time.monotonic()
        try:
            platform.start()
        except GuestError as exc:
            self._record_failure(item, cell_ids, exc, platform)
            return None
        if not _attached(item):
            self.boot_s.append(time.monotonic() - started)
        scenario = item.cell.scenario
        if scenario is not None:
            run = ScenarioRun(scenario.spec, scenario.name, platform, session=self.session,
                              key=item.cell.platform_name, cell=item.cell,
                              workloads=self.study.workloads)
            self.progress(item, "starting neighbours")
            try:
                run.rate_refs = self.rate_refs(item)
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

    def _context(self, cell: Cell, platform: Platform | None,
                 rate_refs: Mapping[str, Mapping[int, float]]) -> CellContext:
        scenario = self.scenario if platform is not None else None
        kind = platform_kind(cell.platform.spec)
        return CellContext(
            cell=cell, study=self.study, platform=platform, session=self.session,
            scenario=scenario,
            monitors=scenario_monitors(scenario,
                                       guest_sampling=self.study.study.guest_sampling),
            guest_name=kind.instance_name(cell.platform.name, cell.platform_name),
            kind_state=self.kind_state, rate_refs=rate_refs)

    def rate_refs(self, item: PlannedItem) -> dict[str, Mapping[int, float]]:
        """The maxima the item's relative rates take a share of, by reference workload,
        as the registered kinds' memories know them (empty without relative rates)."""
        return {name: found for memory in self.memories
                for name, found in memory.rate_refs(item.cell, item.repetition).items()}

    def _remember(self, item: PlannedItem, result: CellResult) -> None:
        """Tell every kind's memory what the item measured."""
        for memory in self.memories:
            memory.note(item.cell, item.repetition, result.measurements)

    def _stored_rows(self) -> list[MeasurementRow]:
        """The run's stored measurements so far (``--resume``; none before it exists)."""
        return [] if self.run_id is None else self.store.measurements(self.run_id)

    def _run_item(self, item: PlannedItem, platform: Platform | None,
                  cell_ids: dict[str, int], boot_s: float | None) -> bool:
        """Run one item (on ``platform``, or None for a kind that boots its own guests);
        returns False when the platform died and must be rebooted.

        ``boot_s``: the platform was booted for this item, in that many seconds; it is
        stored with it (phase ``boot``), so a guest's boot times are measurements too.
        """
        self.progress(item, "running")
        started = _now()
        config = _host_config(platform)
        try:
            ctx = self._context(item.cell, platform, self.rate_refs(item))
            result = run_cell(cell_kind(item.cell), ctx)
        except HvbenchError as exc:
            self._record_failure(item, cell_ids, exc, platform)
            return platform is None or platform.is_running()
        # A signal that a lower layer turned into a failure or a result: the
        # repetition was abandoned, so nothing of it is stored.
        interrupt.check()
        if ctx.scenario is not None:
            # What the scenario set up (neighbours' argv, cgroups), as a raw output.
            result.raw.append(RawRecord("scenario", "scenario-json",
                                        json.dumps(ctx.scenario.describe())))
        if boot_s is not None and platform is not None and platform.is_guest:
            result.measurements.append(MeasurementRecord("boot", "boot_s", boot_s, "s"))
            result.measurements += _boot_phases(platform)
        result.raw += _domain_xml(platform) + config + _guest_clocksource(platform)
        self._remember(item, result)
        self._record_ok(item, cell_ids, result, started, platform)
        return True

    def _record_ok(self, item: PlannedItem, cell_ids: dict[str, int], result: CellResult,
                   started: str, platform: Platform | None) -> None:
        """Commit a measured repetition (warm-up items are not stored)."""
        if item.repetition >= 0:
            self.store.record_repetition(
                run_id=self.run_id or "", cell_id=cell_ids[item.cell.name],
                repetition=item.repetition, position=item.position, status="ok",
                measurements=result.measurements, samples=result.samples, raw=result.raw,
                qemu_argv=_argv(platform), accel=_accel(platform),
                started_at=started, finished_at=_now())
        self.progress(item, "done")

    def _record_failure(self, item: PlannedItem, cell_ids: dict[str, int],
                        exc: BaseException, platform: Platform | None) -> None:
        """Commit a failed repetition; an interruption (or a failure caused by one)
        is no failure: it propagates as :class:`InterruptedRun`, and nothing is
        stored."""
        interrupt.check(exc)
        self.failures += 1
        console = platform.console_tail(200) if platform is not None else None
        if console is None and isinstance(exc, GuestError):
            console = exc.console_tail or None
        # Read while the guest still runs: its kernel's warnings (kept off the console
        # by `quiet`) and its NICs' queues place a stall the console does not show.
        evidence = platform.failure_evidence() \
            if isinstance(platform, FailureEvidence) else ""
        if evidence:
            console = f"{console or ''}\n{evidence}".lstrip("\n")
        if item.repetition >= 0:
            self.store.record_repetition(
                run_id=self.run_id or "", cell_id=cell_ids[item.cell.name],
                repetition=item.repetition, position=item.position, status="failed",
                measurements=[], samples=[], raw=[], error=str(exc), console_log=console,
                qemu_argv=_argv(platform), accel=_accel(platform),
                started_at=_now(), finished_at=_now())
        self.progress(item, "failed")


def _domain_xml(platform: Platform | None) -> list[RawRecord]:
    """A libvirt domain's XML (what its I/O settings were) and the host metrics it could
    not give (a remote URI's, and why), a native side's memory cgroup and a guest's
    host_limits cgroup, kept with each repetition."""
    about = platform.describe() if platform is not None else {}
    xml, missing = about.get("domain_xml"), about.get("missing_metrics")
    raw = [RawRecord("platform", DOMAIN_XML_KIND, xml)] if isinstance(xml, str) and xml \
        else []
    if missing:
        raw.append(RawRecord("platform", MISSING_METRICS_KIND, json.dumps(missing)))
    # The native side's memory cgroup: its limit and the peak charge so far (the page
    # cache it had), kept to show the limit held.
    cgroup = about.get("memory_cgroup")
    if cgroup:
        raw.append(RawRecord("platform", MEMORY_CGROUP_KIND, json.dumps(cgroup)))
    # A guest's host_limits cgroup: what was written where, and that it was joined
    # after the boot.
    limits = about.get("host_limits")
    if limits:
        raw.append(RawRecord("platform", HOST_LIMITS_KIND, json.dumps(limits)))
    return raw


def _host_config(platform: Platform | None) -> list[RawRecord]:
    """The host configuration around a guest's QEMU process at cell start (cgroup
    limits, device queues, O_DIRECT of its images: ``hvbench explain``'s evidence)."""
    pid = platform.pid if platform is not None and platform.is_guest else None
    if pid is None:
        return []
    return [RawRecord("platform", HOST_CONFIG_KIND, json.dumps(read_host_config(pid)))]


def _attached(item: PlannedItem) -> bool:
    """Whether the item's platform is an existing guest attached to, not booted."""
    return item.cell.platform.spec.attached()


def _boot_phases(platform: Platform) -> list[MeasurementRecord]:
    """The phases of a guest's start its platform timed apart (``boot_phases`` in its
    description, e.g. libvirt's own define and start times, then firmware and kernel
    to the agent), stored next to ``boot_s`` in phase ``boot``."""
    phases = platform.describe().get("boot_phases") or {}
    return [MeasurementRecord("boot", name, float(value), "s")
            for name, value in phases.items()]


def _guest_clocksource(platform: Platform | None) -> list[RawRecord]:
    """The clocksource the guest's kernel used as the repetition ended (it may differ
    from the one declared: the kernel falls back when one is unusable), read through
    the agent as a file (no process in the guest, milliseconds). Nothing for the host,
    or when the guest cannot answer (its repetition fails elsewhere then); an
    interruption propagates."""
    if platform is None or not platform.is_guest:
        return []
    try:
        text = platform.read_file(CURRENT_CLOCKSOURCE).decode(errors="replace").strip()
    except HvbenchError as exc:
        interrupt.check(exc)
        return []
    return [RawRecord("platform", GUEST_CLOCKSOURCE_KIND, text)]


def _argv(platform: Platform | None) -> list[str] | None:
    return platform.argv if platform is not None else None


def _accel(platform: Platform | None) -> str | None:
    return platform.accel if platform is not None else None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    failures: int
    boot_s: tuple[float, ...]
    #: Where each cell with adaptive repetitions stopped, and why.
    precision: tuple[CellPrecision, ...] = ()


class AdaptiveRounds:
    """The rounds after the base ones, for cells with adaptive repetitions: each round
    runs, in that round's shuffled order, every cell still above its CI target and
    below its maximum (:mod:`hvbench.analysis.precision`), records the order, and
    measures; it ends when no cell needs more. A resumed run first finishes the rounds
    it had recorded."""

    def __init__(self, runner: StudyRunner, cell_ids: dict[str, int]) -> None:
        self.runner = runner
        self.cell_ids = cell_ids
        self.study = runner.study

    def run(self, planned: int, on_plan: Callable[[int], None] | None) -> list[CellPrecision]:
        """Measure the extra rounds; ``planned``: items announced so far (each round
        raises the total given to ``on_plan``, so the progress ETA follows). Returns
        every adaptive cell's final precision."""
        if not any(repetition_rule(self.study, c).adaptive for c in self.study.cells):
            return []
        store, run_id = self.runner.store, self.runner.run_id or ""
        recorded = store.order(run_id)
        first = base_rounds(self.study)
        rep = first
        while True:
            interrupt.check()
            if rep in recorded:
                names = set(recorded[rep])
                done = {cid for cid, r in store.done(run_id) if r == rep}
                cells = [c for c in repetition_order(self.study, rep)
                         if c.name in names and self.cell_ids[c.name] not in done]
            else:
                needy = {p.cell for p in self.states() if p.state == "more"}
                if not needy:
                    break
                cells = [c for c in repetition_order(self.study, rep) if c.name in needy]
                store.record_order(run_id, rep, [c.name for c in cells])
            position = sum(len(v) for r, v in store.order(run_id).items() if r < rep)
            items = [PlannedItem(rep, c, position + i) for i, c in enumerate(cells)]
            planned += len(items)
            if on_plan is not None and items:
                on_plan(planned)
            self.runner.execute(items, self.cell_ids)
            rep += 1
        return [p for p in self.states() if p.state != "fixed"]

    def states(self) -> list[CellPrecision]:
        """Every cell's precision from what the store holds now."""
        run_id = self.runner.run_id or ""
        rows = self.runner.store.measurements(run_id)
        rounds: dict[str, int] = {}
        for names in self.runner.store.order(run_id).values():
            for name in names:
                rounds[name] = rounds.get(name, 0) + 1
        out = []
        for cell in self.study.cells:
            mine = [r for r in rows if r.cell == cell.name and r.phase != "boot"]
            out.append(cell_precision(cell.name, repetition_rule(self.study, cell), mine,
                                      rounds.get(cell.name, 0)))
        return out


def resume_study(store: Store, run_id: str) -> Study:
    """The study of a stored run, parsed from the text stored with it, as the run was
    started: only the cells it stored (``--only``/``--exclude``) and as many repetitions
    as it ordered (``--repetitions``).

    Raises :class:`StoreError` (no such run) and :class:`SpecError` (the stored text no
    longer parses, or none of its cells remains)."""
    record = store.get_run(run_id)
    study = parse_study_text(record.study_text, record.study_path, facts.memory_bytes() or 0,
                             stored_overrides(record.env))
    study = keep_cells(study, {c.name for c in store.cells(run_id)})
    if any(repetition_rule(study, c).adaptive for c in study.cells):
        # The base rounds come from the rules; the rounds recorded above them are
        # finished first, then the adaptive rule goes on (AdaptiveRounds).
        return study
    ordered = len(store.order(run_id))
    return with_repetitions(study, ordered) if ordered else study


def run_study(study: Study, store: Store, *, resume: str | None = None,
              progress: ProgressHook | None = None,
              on_plan: Callable[[int], None] | None = None,
              on_start: Callable[[str], None] | None = None) -> RunOutcome:
    """Run (or resume) ``study`` into ``store`` under the host-wide run lock;
    ``on_start`` is told the run id as soon as the run is stored.

    Orphans of an earlier ``kill -9`` are removed first. On any exception (including
    Ctrl-C / SIGTERM) the run is marked interrupted and the exception propagates; every
    measurement finished before it is already committed. Raises :class:`HostError` if
    another study holds the lock.
    """
    check_devices(study)
    lock = RunLock(work_dir())
    lock.acquire(resume or "(starting)", study.study.name)
    try:
        remove_orphans()
        # Before the run exists: a wrong domain or disk leaves no interrupted run.
        check_existing_domains(study)
        with contextlib.ExitStack() as stack:
            session = (stack.enter_context(LabSession(
                study, native_server=needs_native_server(study))) if study.lab else None)
            runner = StudyRunner(study, store, progress=progress, run_id=resume,
                                 session=session)
            return runner.run(lock, on_plan, on_start)
    finally:
        lock.release()


def check_devices(study: Study) -> None:
    """Before anything starts: every host block device a platform of ``study`` names is
    free (:func:`~hvbench.host.blockdev.device_problem`) and holds the ``file_size`` of
    the raw disk workloads run on it. Touches no other device and writes nothing.
    Raises :class:`HostError`, one line naming the study file, the platform, the field
    and the device."""
    platforms = {c.platform.name: c.platform for c in study.cells}
    for name, variant in platforms.items():
        for field, _, source in variant.spec.disk_sources():
            if source_kind(source) != "device":
                continue
            what = f"{study.path}: platform {name}: {field}"
            require_free_device(source, what)
            size = device_size(source)
            for workload, wanted in raw_file_sizes(study, name):
                if wanted > size:
                    raise HostError(f"{what}: {source} holds {size} bytes, less than "
                                    f"workload {workload}'s file_size ({wanted})")


def check_existing_domains(study: Study) -> None:
    """Before anything is created: what each platform of ``study`` points at outside
    hvbench (an existing libvirt domain: its disk, agent, tools, and what is on the
    disk) is checked once per platform (:meth:`PlatformKind.check`). Raises
    :class:`SpecError` in one line naming the study file, the platform and the problem,
    and :class:`HostError` when libvirt does not answer."""
    platforms = {c.platform.name: c.platform.spec for c in study.cells}
    for name, spec in platforms.items():
        try:
            platform_kind(spec).check(spec, name=name)
        except SpecError as exc:
            raise SpecError(f"{study.path}: platform {name}: {exc}") from exc


def remove_orphans(*, dry_run: bool = False) -> list[str]:
    """Remove what an hvbench killed by ``kill -9`` left: its labs (namespaces, links,
    their processes), cgroups, libvirt domains, scratch directories (the wrk scripts'
    among them), fleet TLS bundles installed for a worker that never started and stale
    run lock. Returns one sentence per thing done, e.g. ``removed
    link hvb-...`` (the labs' own lines say what they did, including what they could
    not remove); ``dry_run``: one ``would remove ...`` line per thing, nothing done."""
    removed = cleanup_orphaned_labs(dry_run=dry_run)
    others = (cleanup_orphaned_cgroups(dry_run=dry_run)
              + cleanup_orphaned_domains(dry_run=dry_run))
    if not dry_run:
        # Before their socket directories go: a daemon that outlived its hvbench.
        others += kill_orphaned_daemons(orphaned_dirs(Path(tempfile.gettempdir())))
    for parent in (work_dir(), Path(tempfile.gettempdir())):
        others += [str(path) for path in remove_orphaned_dirs(parent, dry_run=dry_run)]
    # a fleet worker's TLS bundle installed over SSH whose worker never started
    others += [f"fleet TLS bundle {path}" for path in
               fleet_tls.remove_unclaimed_bundles(work_dir(), dry_run=dry_run)]
    lock = RunLock(work_dir())
    if lock.remove_stale(dry_run=dry_run):
        others.append(f"stale run lock {lock.path}")
    if dry_run:  # a lab's record directory is named once, by the lab's lines
        others = [o for o in others if not any(line.endswith(o) for line in removed)]
    verb = "would remove" if dry_run else "removed"
    return removed + [f"{verb} {what}" for what in others]


