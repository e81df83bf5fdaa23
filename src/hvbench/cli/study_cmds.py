"""``hvbench run``, ``runs``, ``report`` and ``cleanup``."""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from hvbench.cli.report_cmds import EXPORT_FORMATS, add_report_options, cmd_report_export
from hvbench.model.study import Study
from hvbench.report.model import latest_run_id, load_run_report
from hvbench.report.render import report_json, terminal_header, terminal_tables
from hvbench.run.runner import PlannedItem, load_study, remove_orphans, resume_study, run_study
from hvbench.store.sqlite import Store

QUICK_STUDY = "quick.toml"


def _bundled_quick_study() -> Path:
    """The default study a bare ``hvbench run`` uses (examples/quick.toml)."""
    candidate = Path(__file__).resolve().parents[3] / "examples" / QUICK_STUDY
    if candidate.exists():
        return candidate
    packaged = resources.files("hvbench") / "examples" / QUICK_STUDY
    return Path(str(packaged))


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}", table_column=None),
        BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("ETA"), TimeRemainingColumn(),
        console=console, transient=False,
    )


def cmd_run(args: argparse.Namespace, out: Console, err: Console) -> int:
    store = Store(Path(args.db))
    try:
        if args.resume:
            study = resume_study(store, args.resume)
        else:
            study = load_study(Path(args.study) if args.study else _bundled_quick_study())
        run_id = _run_with_progress(study, store, args.resume, err)
        _print_report(store, run_id, out, err)
    finally:
        store.close()
    return 0


def _run_with_progress(study: Study, store: Store, resume: str | None, err: Console) -> str:
    err.print(f"study [bold]{study.study.name}[/]: {len(study.cells)} cells x "
              f"{study.study.repetitions} repetitions")
    with _progress(err) as progress:
        task = progress.add_task("starting", total=None)

        def on_plan(total: int) -> None:
            progress.update(task, total=total)

        def hook(item: PlannedItem, state: str) -> None:
            rep = "warm-up" if item.repetition < 0 else f"rep {item.repetition + 1}"
            progress.update(task, description=f"{item.cell.name} ({rep}): {state}")
            if state in ("done", "failed"):
                progress.advance(task)

        outcome = run_study(study, store, resume=resume, progress=hook, on_plan=on_plan)
    if outcome.failures:
        err.print(f"[red]{outcome.failures} cell repetitions failed; see `hvbench report "
                  f"{outcome.run_id}` (their console logs are stored)[/]")
    err.print(f"run [bold]{outcome.run_id}[/] complete")
    return outcome.run_id


def _print_report(store: Store, run_id: str, out: Console, err: Console) -> None:
    # The terminal does not print the CoV: no samples are read.
    report = load_run_report(store, run_id, monitors=[])
    for line in terminal_header(report):
        out.print(line)
    for table in terminal_tables(report):
        out.print(table)
    for warning in report.warnings:
        # Warnings quote study text such as "[study]": never read them as rich markup.
        err.print(f"warning: {warning}", style="yellow", markup=False)
    for failure in report.failures:
        first = failure.error.splitlines()[0] if failure.error else ""
        err.print(f"failed: {failure.cell} rep {failure.repetition + 1}: {first}",
                  style="red", markup=False)


def cmd_report(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``hvbench report``: the tables (phase summaries, then propagation fits and
    scenario tables when the run has them), ``json`` (the summaries, ``scenarios`` and
    ``propagation``),
    or an export format (:func:`hvbench.cli.report_cmds.cmd_report_export`)."""
    if args.format in EXPORT_FORMATS:
        return cmd_report_export(args, out, err)
    store = Store(Path(args.db))
    try:
        run_id = args.run or latest_run_id(store, args.db)
        if args.format == "table":
            _print_report(store, run_id, out, err)
            return 0
        text = report_json(load_run_report(store, run_id))
        if args.output:
            Path(args.output).write_text(text)
        else:
            print(text, end="" if text.endswith("\n") else "\n")
    finally:
        store.close()
    return 0


def cmd_runs(args: argparse.Namespace, out: Console, err: Console) -> int:
    store = Store(Path(args.db))
    try:
        table = Table(title=f"runs in {args.db}")
        for column in ("run", "study", "created", "status", "cells", "ok", "failed", "accel"):
            table.add_column(column)
        for run in store.list_runs():
            table.add_row(run.id, run.study_name, run.created_at, run.status,
                          str(run.n_cells), str(run.n_ok), str(run.n_failed),
                          str(run.accelerator))
        out.print(table)
    finally:
        store.close()
    return 0


def cmd_cleanup(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Remove what a killed hvbench left: its labs (namespaces, bridges, veths and the
    processes in them) and the scratch directories of dead owners. Never touches
    anything a live hvbench or anyone else made."""
    removed = remove_orphans()
    for what in removed:
        out.print(f"removed {what}")
    out.print(f"cleanup: {len(removed)} leftovers removed")
    return 0


def add_study_commands(sub: Any) -> None:
    """Register run, runs, report and cleanup on the top-level subparsers."""
    run = sub.add_parser("run", help="run a study (default: the bundled quick study)")
    run.add_argument("study", nargs="?", help="study file (TOML)")
    run.add_argument("--resume", metavar="RUN", help="complete an interrupted run")
    run.add_argument("--db", default="hvbench.db", help="SQLite file (default ./hvbench.db)")
    run.set_defaults(study_handler=cmd_run)

    report = sub.add_parser("report", help="tables of a run (default: the latest)")
    report.add_argument("run", nargs="?")
    report.add_argument("--format", choices=("table", "json", *EXPORT_FORMATS),
                        default="table")
    report.add_argument("-o", "--output", help="write to this file instead of stdout")
    report.add_argument("--db", default="hvbench.db")
    add_report_options(report)
    report.set_defaults(study_handler=cmd_report)

    runs = sub.add_parser("runs", help="list the runs in the database")
    runs.add_argument("--db", default="hvbench.db")
    runs.set_defaults(study_handler=cmd_runs)

    cleanup = sub.add_parser("cleanup", help="remove what a killed hvbench left behind")
    cleanup.set_defaults(study_handler=cmd_cleanup)
