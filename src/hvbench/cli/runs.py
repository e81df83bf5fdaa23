"""``hvbench runs``: the runs in a results database, filtered, sorted and limited;
``hvbench runs rm RUN...`` removes runs (after a prompt, or with ``--yes``)."""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from hvbench.cli.common import (
    DEFAULT_DB,
    add_db_option,
    add_format_option,
    add_output_option,
    db_of,
    write_document,
)
from hvbench.errors import SpecError
from hvbench.store.location import DB_ENV
from hvbench.store.records import RUN_STATUSES, RunSummary

#: ``--sort`` keys and what each sorts by (ties: creation time, then id).
SORT_KEYS = ("created", "study", "status", "cells", "ok", "failed")

EXAMPLES = """examples:
  hvbench runs --db .make/demo.db
  hvbench runs --status interrupted --study 'quick*'
  hvbench runs --limit 5 --sort failed
  hvbench runs rm 20261126-2301 --yes"""


def register(sub: Any) -> None:
    runs = sub.add_parser("runs", help="list the runs in the database (or remove some)",
                          epilog=EXAMPLES,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    add_db_option(runs)
    add_format_option(runs)
    add_output_option(runs)
    runs.add_argument("--study", metavar="PATTERN",
                      help="only runs whose study name matches this shell pattern")
    runs.add_argument("--status", action="append", choices=RUN_STATUSES, default=[],
                      help="only runs with this status (repeatable)")
    runs.add_argument("--limit", type=int, metavar="N",
                      help="only the N newest of the runs that match")
    runs.add_argument("--sort", choices=SORT_KEYS, default="created",
                      help="order of the rows (default: %(default)s, oldest first; "
                           "counts: smallest first)")
    actions = runs.add_subparsers(dest="runs_action", metavar="ACTION")
    rm = actions.add_parser("rm", help="remove runs and everything stored with them",
                            epilog="example:\n  hvbench runs rm 20261126-2301 --db x.db",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    rm.add_argument("runs", nargs="+", metavar="RUN",
                    help="run id or a unique prefix of one (repeatable)")
    rm.add_argument("-y", "--yes", action="store_true",
                    help="remove without asking (needed when stdin is not a terminal)")
    # SUPPRESS: `runs --db X rm R` keeps X (a subparser's default would replace it).
    rm.add_argument("--db", default=argparse.SUPPRESS,
                    help=f"results database (default ${DB_ENV}, else ./{DEFAULT_DB})")
    rm.set_defaults(handler=handle_rm)
    runs.set_defaults(handler=handle)


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    from hvbench.store.database import Store

    if args.limit is not None and args.limit < 1:
        raise SpecError(f"--limit: expected a positive number of runs, got {args.limit}")
    with Store(db_of(args), create=False) as store:
        chosen = select_runs(store.list_runs(), study=args.study, statuses=args.status,
                             limit=args.limit, sort=args.sort)
        location = store.location
    if args.format == "json":
        write_document(out, runs_json(chosen, location))
    else:
        out.print(runs_table(chosen, location))
    return 0


def runs_json(runs: Sequence[RunSummary], db: str) -> str:
    """The run list as a JSON document: the database and one object per run (pure)."""
    return json.dumps({"db": db, "runs": [dataclasses.asdict(r) for r in runs]}, indent=2)


def select_runs(runs: Sequence[RunSummary], *, study: str | None = None,
                statuses: Sequence[str] = (), limit: int | None = None,
                sort: str = "created") -> list[RunSummary]:
    """The runs whose study matches ``study`` (shell pattern) and whose status is one
    of ``statuses`` (empty: any), the ``limit`` newest of them, ordered by ``sort``
    (one of :data:`SORT_KEYS`; ties by creation) (pure)."""
    kept = sorted((r for r in runs
                   if (study is None or fnmatch.fnmatchcase(r.study_name, study))
                   and (not statuses or r.status in statuses)),
                  key=lambda r: (r.created_at, r.id))
    if limit is not None:
        kept = kept[-limit:] if limit > 0 else []
    keys: dict[str, Any] = {"created": lambda r: (r.created_at, r.id),
                            "study": lambda r: r.study_name, "status": lambda r: r.status,
                            "cells": lambda r: r.n_cells, "ok": lambda r: r.n_ok,
                            "failed": lambda r: r.n_failed}
    return sorted(kept, key=keys[sort])


def handle_rm(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Remove the named runs: after a y/N prompt on a terminal, else only with
    ``--yes`` (exit 2 without it). Raises :class:`SpecError` for an unknown or
    ambiguous run before anything is removed."""
    from hvbench.report.model import resolve_run_id
    from hvbench.store.database import Store

    with Store(db_of(args), create=False) as store:
        ids = list(dict.fromkeys(resolve_run_id(store, r, store.location)
                                 for r in args.runs))
        summaries = {r.id: r for r in store.list_runs() if r.id in ids}
        for run_id in ids:
            out.print(f"  {removal_line(summaries[run_id])}", markup=False)
        if not args.yes:
            if not sys.stdin.isatty():
                raise SpecError("runs rm: stdin is not a terminal to ask on: give --yes "
                                "to remove these runs")
            answer = input(f"remove {len(ids)} run(s) from {store.location}? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                err.print("nothing removed", markup=False)
                return 0
        for run_id in ids:
            store.delete_run(run_id)
        out.print(f"removed {len(ids)} run(s) from {store.location}", markup=False)
    return 0


def removal_line(run: RunSummary) -> str:
    """What ``runs rm`` says of a run before removing it (pure)."""
    return (f"{run.id}  {run.study_name}  {run.status}  {run.n_ok} ok, "
            f"{run.n_failed} failed repetitions  (created {run.created_at})")


def runs_table(runs: Sequence[RunSummary], db: str) -> Table:
    """One row per run (pure). The id is the one thing a user copies from this table,
    so its column never shrinks or wraps: the study name folds instead. The id is the
    run's start time (UTC), so the creation time is not repeated beside it: with it the
    table took 92 columns and folded every date and status at 80 (``--format json``
    has it)."""
    table = Table(title=f"runs in {db}", caption="a run id is its start time (UTC)")
    table.add_column("run", no_wrap=True, min_width=max((len(r.id) for r in runs), default=3))
    table.add_column("study", overflow="fold")
    for column in ("status", "cells", "ok", "failed", "accel"):
        table.add_column(column, no_wrap=True)
    for run in runs:
        table.add_row(run.id, run.study_name, run.status, str(run.n_cells),
                      str(run.n_ok), str(run.n_failed), str(run.accelerator))
    return table
