"""``hvbench run [STUDY]``: run a study (or resume one), a progress bar with ETA on
stderr, then the report; ``--dry-run`` prints the plan and starts nothing."""

from __future__ import annotations

import argparse
import shlex
import sys
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from hvbench.cli.common import add_db_option, db_of, invoked_program, print_report
from hvbench.errors import HvbenchError, InterruptedRun, SpecError
from hvbench.model.study import Study, select_cells, with_repetitions
from hvbench.report.model import resolve_fleet_id, resolve_run_id
from hvbench.run.eta import RunEta, clock_text, item_estimates
from hvbench.run.plan import StudyPlan
from hvbench.store.location import is_url

if TYPE_CHECKING:
    from hvbench.store.database import Store

QUICK_STUDY = "quick.toml"


def register(sub: Any) -> None:
    run = sub.add_parser("run", help="run a study (default: the bundled quick study)")
    run.add_argument("study", nargs="?", help="study file (TOML)")
    run.add_argument("--resume", metavar="RUN",
                     help="complete an interrupted run (its cells and repetitions as started): "
                          "its id or a unique prefix; with --hosts or --scheduler a fleet "
                          "id or a unique prefix")
    add_db_option(run)
    # SUPPRESS: `hvbench -q run` keeps -q (a subparser's default would replace it).
    run.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                     help="no progress bar, run id or next commands on stderr (as "
                          "`hvbench -q run`)")
    run.add_argument("--dry-run", action="store_true",
                     help="print the cells, repetitions, guests to boot (existing "
                          "domains to attach) and an estimated duration; start nothing")
    run.add_argument("--only", action="append", default=[], metavar="PATTERN",
                     help="run only the cells whose name matches (shell pattern such as "
                          "'vm-*/dd' or '*@idle*/*'; repeatable)")
    run.add_argument("--exclude", action="append", default=[], metavar="PATTERN",
                     help="leave out the cells whose name matches (repeatable)")
    run.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                     dest="overrides",
                     help="change the study file's PATH (dotted, e.g. study.repetitions=1, "
                          "workload.dd.file_size=16M, workload.*.duration_s=1; array "
                          "entries by name, index or *) to the TOML VALUE before it is "
                          "checked; recorded with the run (repeatable; docs/studies.md)")
    run.add_argument("--repetitions", type=int, metavar="N",
                     help="measured repetitions of each cell instead of the study's")
    run.add_argument("--scheduler", metavar="ADDR",
                     help="run on every host of a fleet: the Dask scheduler whose workers "
                          "`hvbench worker --scheduler ADDR` started (each host runs the "
                          "whole study; --resume takes a fleet id or a prefix)")
    run.add_argument("--certs", type=Path, metavar="DIR",
                     help="with a tls:// --scheduler: the coordinator's TLS bundle "
                          "(DIR/coordinator of `hvbench fleet init DIR`)")
    run.add_argument("--insecure", action="store_true",
                     help="with --scheduler: allow a plaintext tcp:// scheduler that is not "
                          "on loopback (whoever reaches it runs code as root on every "
                          "worker)")
    run.add_argument("--hosts", metavar="HOST[=CLASS],...",
                     help="run on these hosts: one hvbench worker each, started over SSH "
                          "(OpenSSH client configuration; each host runs the whole study "
                          "unless --spread; --resume takes a fleet id or a prefix)")
    run.add_argument("--spread", action="store_true",
                     help="with --hosts or --scheduler: split the repetitions across the "
                          "hosts of each class (HOST=CLASS; no class: all hosts are one) "
                          "instead of every host running them all")
    run.add_argument("--remote-python", metavar="PATH", default=sys.executable,
                     help="with --hosts: the Python on each host that has hvbench "
                          "(default: this one's path, %(default)s)")
    run.add_argument("--ssh-config", metavar="FILE", type=Path,
                     help="with --hosts: an OpenSSH client configuration file to use "
                          "instead of ~/.ssh/config")
    run.add_argument("--host-workdir", metavar="DIR",
                     help="with --hosts: the work directory on each host, {host} replaced "
                          "by the host's name, e.g. /var/tmp/hvbench-{host} (default: its "
                          "HVBENCH_WORKDIR or /var/tmp/hvbench)")
    run.set_defaults(handler=handle)


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    from hvbench.run.plan import done_in, plan_study
    from hvbench.run.runner import resume_study
    from hvbench.store.database import Store

    if args.resume and (args.only or args.exclude or args.repetitions is not None
                        or args.overrides):
        raise SpecError("--resume completes a run with the cells, repetitions and --set "
                        "changes it was started with: drop --only, --exclude, "
                        "--repetitions and --set")
    if args.dry_run:
        # A dry run reads earlier runs for its estimate but never creates a database.
        db = db_of(args)
        store = Store(db, create=False) if is_url(db) or Path(db).is_file() else None
        try:
            args.resume = _resolve_dry_resume(store, args)
            study = resume_study(store, args.resume) if args.resume and store else \
                _study(args)
            done = done_in(store, args.resume) if args.resume and store else set()
            plan = plan_study(study, store, done=done, warmup=not args.resume)
        finally:
            if store is not None:
                store.close()
        for line in plan_lines(plan):
            out.print(line, markup=False)
        out.print(plan_table(plan))
        return 0
    _check_fleet_options(args)
    # the study is checked before the database is opened or a worker started: a
    # rejected study (exit 2) creates and migrates nothing
    new_study = None if args.resume else _study(args)
    if args.scheduler:
        return _run_on_scheduler(args, new_study, out, err)
    if args.hosts:
        return _run_on_hosts(args, new_study, out, err)
    return _run_here(args, new_study, out, err)


def _run_here(args: argparse.Namespace, new_study: Study | None, out: Console,
              err: Console) -> int:
    """The study (``new_study``, or the run ``--resume`` names) on this host, then its
    report and the commands to see it again; returns the run's exit code."""
    from hvbench.run.runner import resume_study
    from hvbench.store.database import Store

    with Store(db_of(args)) as store:
        args.resume = _resolve_resume(store, args.resume)
        if args.resume:
            _refuse_tuning_run(store, args.resume)
        study = resume_study(store, args.resume) if new_study is None else new_study
        quiet = getattr(args, "quiet", False)
        run_id = run_with_progress(study, store, args.resume, err, db_of(args), quiet=quiet)
        print_report(store, run_id, out, err)
        if not quiet:
            err.print("next:", markup=False)
            for line in next_commands(run_id, db_of(args), invoked_program()):
                err.print(line, markup=False, soft_wrap=True)
        # After a resume: the run as a whole, not only what this invocation ran.
        ok, failed = len(store.done(run_id)), len(store.failures(run_id))
    return run_exit_code(ok, failed)


def _resolve_dry_resume(store: Store | None, args: argparse.Namespace) -> str | None:
    """The run a dry run of ``--resume`` plans from: with ``--hosts`` or ``--scheduler``
    the first host run of the fleet the id or prefix names (each host's share is planned
    alike), else the run. Raises :class:`SpecError` as :func:`resolve_fleet_id` and
    :func:`resolve_run_id` do."""
    if store is not None and args.resume and (args.hosts or args.scheduler):
        fleet_id = resolve_fleet_id(store, args.resume, store.location)
        return str(store.fleet_runs(fleet_id)[0].id)
    return _resolve_resume(store, args.resume)


def _resolve_resume(store: Store | None, resume: str | None) -> str | None:
    """``--resume``'s run id from a unique prefix, as ``report`` takes it (unchanged
    without a store to look in or without ``--resume``). Raises :class:`SpecError`: no
    such run, or a prefix of several (named on one line)."""
    if store is None or not resume:
        return resume
    return resolve_run_id(store, resume, store.location)


def _refuse_tuning_run(store: Store, run_id: str) -> None:
    """A tuning run's cells are the search's: only ``hvbench tune --resume`` continues
    it. Raises :class:`SpecError` for one."""
    from hvbench.run.tune import is_tune_text

    if is_tune_text(store.get_run(run_id).study_text):
        raise SpecError(f"run {run_id} is a tuning run: continue it with `hvbench tune "
                        f"--resume {run_id}`")


#: ``hvbench run``'s exit codes (README, "Exit codes"); 2 and 130/143 come from the
#: errors themselves.
EXIT_OK = 0
EXIT_SOME_FAILED = 1
EXIT_ALL_FAILED = 3


def run_exit_code(ok: int, failed: int) -> int:
    """The exit code of a finished run with ``ok`` and ``failed`` stored repetitions:
    0 when none failed, 3 when every one failed, 1 when some did (pure)."""
    if failed == 0:
        return EXIT_OK
    return EXIT_ALL_FAILED if ok == 0 else EXIT_SOME_FAILED


def _check_fleet_options(args: argparse.Namespace) -> None:
    """The fleet options that go together, and the scheduler address allowed.

    Raises:
        SpecError: options that exclude each other, or a plaintext scheduler that is not
            on loopback without --insecure.
    """
    from hvbench.run.fleet_tls import plaintext_refusal

    if args.scheduler and args.hosts:
        raise SpecError("--scheduler and --hosts exclude each other: workers are either "
                        "started by you (--scheduler) or over SSH (--hosts)")
    if args.spread and not (args.scheduler or args.hosts):
        raise SpecError("--spread splits repetitions across hosts: give --hosts or "
                        "--scheduler")
    if args.spread and args.resume:
        raise SpecError("--resume keeps each host's share of a spread fleet run: drop "
                        "--spread")
    if (args.certs is not None or args.insecure) and not args.scheduler:
        raise SpecError("--certs and --insecure go with --scheduler (--hosts makes and "
                        "installs its own certificates)")
    refusal = args.scheduler and plaintext_refusal(
        args.scheduler, certs=args.certs is not None, insecure=args.insecure)
    if refusal:
        raise SpecError(refusal)


def _run_on_scheduler(args: argparse.Namespace, new_study: Study | None, out: Console,
                      err: Console) -> int:
    """``--scheduler``: the fleet on the workers the user started."""
    from distributed import Client

    from hvbench.run import fleet, fleet_tls

    again = ["--scheduler", args.scheduler]
    if args.certs is not None:
        again += ["--certs", str(args.certs)]
    if args.insecure:
        again += ["--insecure"]
    try:
        client = Client(args.scheduler, timeout=30,
                        security=None if args.certs is None else
                        fleet_tls.security(args.certs))
    except OSError as exc:
        raise fleet.FleetError(f"cannot reach the Dask scheduler at {args.scheduler}: "
                               f"{exc}") from exc
    with client:
        return _run_fleet(client, args, new_study, out, err, hosts=None, classes=None,
                          again=shlex.join(again))


def _run_on_hosts(args: argparse.Namespace, new_study: Study | None, out: Console,
                  err: Console) -> int:
    """``--hosts``: one hvbench worker per host over SSH for this run, stopped after."""
    from hvbench.run.fleet import parse_hosts
    from hvbench.run.ssh_hosts import SshWorkers

    classes = parse_hosts(args.hosts)
    err.print(f"starting hvbench workers over SSH on {', '.join(classes)}", markup=False)
    workers = SshWorkers(list(classes), remote_python=args.remote_python,
                         ssh_config=args.ssh_config, host_workdir=args.host_workdir,
                         classes=classes)
    try:
        with workers:
            return _run_fleet(workers.client, args, new_study, out, err,
                              hosts=list(classes), classes=classes,
                              again=shlex.join(ssh_options(args)))
    finally:
        # Dask's teardown errors come after every result was committed: one line, not
        # its tracebacks over the run's table.
        if workers.teardown:
            err.print(f"warning: stopping the SSH workers, Dask logged "
                      f"{len(workers.teardown)} line(s); the last: {workers.teardown[-1]}",
                      markup=False, soft_wrap=True)


def ssh_options(args: argparse.Namespace) -> list[str]:
    """The ``--hosts`` options of this command line, as a resume must repeat them."""
    argv = ["--hosts", args.hosts]
    if args.remote_python != sys.executable:
        argv += ["--remote-python", args.remote_python]
    if args.ssh_config is not None:
        argv += ["--ssh-config", str(args.ssh_config)]
    if args.host_workdir is not None:
        argv += ["--host-workdir", args.host_workdir]
    return argv


def _run_fleet(client: Any, args: argparse.Namespace, new_study: Study | None,
               out: Console, err: Console, *,
               hosts: list[str] | None, classes: dict[str, str] | None, again: str) -> int:
    """The study on every host of ``client``'s scheduler (``hosts`` None: every hvbench
    worker), committed here as results arrive; one progress bar per host and an
    overall one with ETA. ``new_study``: the study to start (None: ``--resume``)."""
    from hvbench.run import fleet
    from hvbench.run.runner import resume_study
    from hvbench.store.database import Store

    with Store(db_of(args)) as store:
        if new_study is None:
            # A unique prefix of the fleet id, as a run's --resume takes one.
            fleet_id = resolve_fleet_id(store, args.resume, store.location)
            runs = fleet.resume_fleet(client, store, fleet_id)
            study = resume_study(store, runs[0].run_id)
        else:
            study = new_study
            fleet_id, runs = fleet.start_fleet(client, study, store, hosts,
                                               classes=classes, spread=args.spread)
        err.print(f"fleet [bold]{fleet_id}[/]: study {study.study.name} on "
                  f"{len(runs)} hosts ({', '.join(r.host for r in runs)})"
                  + (" (repetitions spread)" if args.spread else ""))
        with _progress(err) as progress:
            overall = progress.add_task("all hosts", total=sum(len(r.todo) for r in runs))
            bars = {r.host: progress.add_task(r.host, total=len(r.todo)) for r in runs}
            seen = dict.fromkeys(bars, 0)

            def tell(host: str, done: int, total: int) -> None:
                progress.update(bars[host], completed=done, total=total)
                progress.advance(overall, done - seen[host])
                seen[host] = done

            try:
                outcome = fleet.run_fleet(client, study, store, fleet_id=fleet_id,
                                          runs=runs, progress=tell)
            except (InterruptedRun, KeyboardInterrupt):
                err.print(f"fleet {fleet_id} interrupted; every host stopped its hvbench; "
                          f"complete it with `{resume_command(args, fleet_id, again)}`",
                          style="red", markup=False, soft_wrap=True)
                raise
        failed = ok = 0
        rows = []
        for host, run_id in outcome.runs.items():
            lost = outcome.lost[host]
            if lost:
                err.print(f"{host}: stopped early: {lost}", style="red", markup=False,
                          soft_wrap=True)
            for line in failure_lines(store, run_id):
                err.print(f"{host}: {line}", style="red", markup=False, soft_wrap=True)
            rows.append(fleet_host_row(store, host, run_id, lost))
            ok += len(store.done(run_id))
            failed += len(store.failures(run_id))
        out.print(fleet_hosts_table(fleet_id, rows))
        if any(outcome.lost.values()):
            err.print(f"`{resume_command(args, fleet_id, again)}` runs what is missing",
                      markup=False, soft_wrap=True)
    return run_exit_code(ok, failed)


def resume_command(args: argparse.Namespace, fleet_id: str, again: str) -> str:
    """The command that completes fleet ``fleet_id`` as it was started: its workers'
    options (``again``) and ``--db`` when one was given."""
    argv = [invoked_program(), "run", "--resume", fleet_id, *shlex.split(again)]
    if args.db:
        argv += ["--db", str(args.db)]
    return shlex.join(argv)


def fleet_host_row(store: Store, host: str, run_id: str, lost: str | None
                   ) -> tuple[str, ...]:
    """One host of a finished fleet run as the per-host table shows it: host, run,
    status, repetitions ok, failed, not run, and what happened."""
    from hvbench.run.fleet import NOT_RUN

    failures = store.failures(run_id)
    not_run = sum(1 for f in failures if (f.error or "").startswith(NOT_RUN))
    status = store.get_run(run_id).status
    return (host, run_id, status, str(len(store.done(run_id))),
            str(len(failures) - not_run), str(not_run),
            lost or "finished what it was given")


def fleet_hosts_table(fleet_id: str, rows: list[tuple[str, ...]]) -> Table:
    """The per-host table at the end of a fleet run (pure)."""
    table = Table(title=f"fleet {fleet_id}", title_justify="left")
    for name in ("host", "run", "status", "ok", "failed", "not run"):
        table.add_column(name, justify="right" if name in ("ok", "failed", "not run")
                         else "left", no_wrap=name in ("host", "run"))
    table.add_column("what happened", overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def _study(args: argparse.Namespace) -> Study:
    """The study file (the bundled quick study by default), loaded and checked, with the
    command line's selection and repetition count applied."""
    from hvbench.run.runner import load_study

    study = load_study(Path(args.study) if args.study else bundled_quick_study(),
                       args.overrides)
    if args.only or args.exclude:
        study = select_cells(study, args.only, args.exclude)
    if args.repetitions is not None:
        study = with_repetitions(study, args.repetitions)
    return study


def bundled_quick_study() -> Path:
    """The default study a bare ``hvbench run`` uses (examples/quick.toml)."""
    candidate = Path(__file__).resolve().parents[3] / "examples" / QUICK_STUDY
    if candidate.exists():
        return candidate
    packaged = resources.files("hvbench") / "examples" / QUICK_STUDY
    return Path(str(packaged))


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def plan_lines(plan: StudyPlan) -> list[str]:
    """What a dry run says before its table (pure)."""
    measured = sum(1 for item in plan.items if item.repetition >= 0)
    source = (f"{len(plan.from_history)} of {len(plan.cells)} cells from earlier runs"
              if plan.from_history else "rough defaults per workload kind; no earlier runs")
    adaptive = plan.estimate_max_s is not None
    lines = [f"study {plan.study}: {len(plan.cells)} cells x {plan.repetitions} repetitions"
             + (" at least (adaptive)" if adaptive else "")
             + f" = {measured} measurements to run"
             + (f" (+{len(plan.items) - measured} warm-up)" if plan.warmup else ""),
             *_guest_lines(plan),
             f"estimated duration: {_duration(plan.estimate_s)} ({source})"]
    if plan.estimate_max_s is not None:
        lines.append(f"adaptive repetitions: up to {_duration(plan.estimate_max_s)} if "
                     "every adaptive cell needs its maximum")
    return [*lines, "dry run: nothing was started"]


def _guest_lines(plan: StudyPlan) -> list[str]:
    """Guests to boot, and the existing ones attached to instead (never booted,
    stopped or changed); the boot line is left out when the study only attaches."""
    lines = []
    if plan.guest_boots or not plan.attaches:
        lines.append(f"guests to boot: {plan.guest_boots} ({plan.platform_boots} for the "
                     "cells' own platforms)")
    if plan.attaches:
        lines.append(f"existing domains to attach: {plan.attaches} (platforms "
                     f"{', '.join(plan.attached)}: never booted, stopped or changed)")
    return lines


def plan_table(plan: StudyPlan) -> Table:
    """One row per cell: its items to run and the estimate of one repetition (pure)."""
    table = Table(title="cells", title_justify="left")
    table.add_column("cell", overflow="fold")
    table.add_column("to run", justify="right")
    table.add_column("est. per repetition", justify="right")
    table.add_column("estimate from")
    counts: dict[str, int] = {}
    for item in plan.items:
        counts[item.cell.name] = counts.get(item.cell.name, 0) + 1
    history = set(plan.from_history)
    for name in plan.cells:
        table.add_row(name, str(counts.get(name, 0)), _duration(plan.cell_seconds[name]),
                      "earlier runs" if name in history else "default")
    return table


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}", table_column=None),
        BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("ETA"), TimeRemainingColumn(),
        console=console, transient=False,
    )


class EtaColumn(ProgressColumn):
    """``ETA H:MM:SS`` from a :class:`~hvbench.run.eta.RunEta`, recomputed at every
    refresh (so it ticks while a measurement runs), always the same width."""

    def __init__(self, eta: RunEta) -> None:
        super().__init__()
        self.eta = eta

    def render(self, task: Task) -> Text:
        return Text(f"ETA {clock_text(self.eta.remaining_s())}", style="progress.remaining")


def run_progress(console: Console, eta: RunEta, *, quiet: bool = False) -> Progress:
    """The single-run bar: fixed-width columns first (bar, done/total, elapsed, ETA),
    the changing description (cell, repetition, state) last, so nothing moves;
    ``quiet``: not shown."""
    return Progress(BarColumn(bar_width=30), MofNCompleteColumn(), TimeElapsedColumn(),
                    EtaColumn(eta), TextColumn("{task.description}"),
                    console=console, transient=False, disable=quiet)


def run_with_progress(study: Study, store: Store, resume: str | None, err: Console,
                       db: str, *, quiet: bool = False) -> str:
    """Run (or resume) ``study`` into ``store`` (``db``: its name as the user gave it,
    for the commands printed) under a progress bar on ``err``; returns the run id.
    ``quiet``: no bar and no informational lines (the resume command on an interrupt
    and failures still print)."""
    from hvbench.run.plan import done_in, plan_study
    from hvbench.run.runner import PlannedItem, run_study

    if not quiet:
        err.print(f"study [bold]{study.study.name}[/]: {len(study.cells)} cells x "
                  f"{_repetitions_text(study)}")
    plan = plan_study(study, store, done=done_in(store, resume) if resume else set(),
                      warmup=not resume)
    eta = RunEta(item_estimates(plan))
    started: list[str] = []
    with run_progress(err, eta, quiet=quiet) as progress:
        task = progress.add_task("starting", total=len(plan.items))

        def on_start(run_id: str) -> None:
            started.append(run_id)
            if not quiet:
                progress.console.print(f"run [bold]{run_id}[/] "
                                       + ("resumed" if resume else "started"))

        def on_plan(total: int) -> None:
            eta.set_total(total)
            progress.update(task, total=total)

        def hook(item: PlannedItem, state: str) -> None:
            rep = "warm-up" if item.repetition < 0 else f"rep {item.repetition + 1}"
            progress.update(task, description=f"{item.cell.name} ({rep}): {state}")
            if state in ("done", "failed"):
                eta.item_done()
                progress.advance(task)

        try:
            outcome = run_study(study, store, resume=resume, progress=hook,
                                on_plan=on_plan, on_start=on_start)
        except (HvbenchError, KeyboardInterrupt) as exc:
            if started:
                why = "interrupted" if isinstance(exc, (InterruptedRun, KeyboardInterrupt)) \
                    else "stopped by an error"
                progress.console.print(
                    f"run {started[0]} {why}; complete it with "
                    f"`{run_command(['run', '--resume', started[0]], db, invoked_program())}`",
                    style="red", markup=False, soft_wrap=True)
            raise
    for line in failure_lines(store, outcome.run_id):
        err.print(line, style="red", markup=False, soft_wrap=True)
    for line in precision_lines(outcome.precision):
        err.print(line, markup=False, soft_wrap=True)
    if not quiet:
        err.print(f"run [bold]{outcome.run_id}[/] complete")
    return outcome.run_id


def run_command(argv: list[str], db: str, program: str = "hvbench") -> str:
    """``PROGRAM ARGV --db DB`` as one shell-quoted line to copy (pure); ``program``:
    :func:`~hvbench.cli.common.invoked_program`'s."""
    return shlex.join([program, *argv, "--db", db])


def next_commands(run_id: str, db: str, program: str = "hvbench") -> list[str]:
    """What a finished run tells its user to type next: the report, the diagnosis and
    the HTML report of ``run_id`` in ``db`` (pure)."""
    return [f"  report:  {run_command(['report', run_id], db, program)}",
            f"  explain: {run_command(['explain', run_id], db, program)}",
            "  HTML:    " + run_command(['report', run_id, '--format', 'html', '-o',
                                         f'{run_id}.html'], db, program)]


def _repetitions_text(study: Study) -> str:
    adaptive = study.study.adaptive
    if adaptive is None:
        return f"{study.study.repetitions} repetitions"
    return (f"{adaptive.min}-{adaptive.max} repetitions (adaptive: until the 95 % CI is "
            f"within ±{adaptive.ci_pct:g} %)")


def precision_lines(precision: Any) -> list[str]:
    """Where each adaptive cell stopped: a count of those that reached their target,
    and one line per cell that stopped at its maximum, with its CoV (pure)."""
    from hvbench.report.precision import precision_line

    if not precision:
        return []
    reached = [p for p in precision if p.state == "reached"]
    lines = [f"adaptive repetitions: {len(reached)} of {len(precision)} cells reached their "
             "CI target"]
    lines += [f"  {precision_line(p)}" for p in precision]
    return lines


def failure_lines(store: Store, run_id: str) -> list[str]:
    """What the end of a run says about its failed repetitions (after a resume: those
    of the whole run): how many of all, then one line each, cell, repetition and the
    first line of the error."""
    failures = store.failures(run_id)
    if not failures:
        return []
    total = len(failures) + len(store.done(run_id))
    lines = [f"{len(failures)} of {total} repetitions failed; see `hvbench report "
             f"{run_id}` (their console logs are stored):"]
    for row in failures:
        first = (row.error or "").strip().splitlines()
        lines.append(f"  {row.cell} rep {row.repetition + 1}: "
                     f"{first[0] if first else 'no error recorded'}")
    return lines
