"""``hvbench runs``: the runs in a results database."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from hvbench.cli.common import (
    add_db_option,
    add_format_option,
    add_output_option,
    db_of,
    write_document,
)
from hvbench.store.records import RunSummary


def register(sub: Any) -> None:
    runs = sub.add_parser("runs", help="list the runs in the database")
    add_db_option(runs)
    add_format_option(runs)
    add_output_option(runs)
    runs.set_defaults(handler=handle)


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    from hvbench.store.database import Store

    with Store(db_of(args), create=False) as store:
        runs, location = store.list_runs(), store.location
    if args.format == "json":
        write_document(out, runs_json(runs, location))
    else:
        out.print(runs_table(runs, location))
    return 0


def runs_json(runs: Sequence[RunSummary], db: str) -> str:
    """The run list as a JSON document: the database and one object per run (pure)."""
    return json.dumps({"db": db, "runs": [dataclasses.asdict(r) for r in runs]}, indent=2)


def runs_table(runs: Sequence[RunSummary], db: str) -> Table:
    """One row per run (pure). The id is the one thing a user copies from this table,
    so its column never shrinks or wraps: the study name folds instead."""
    table = Table(title=f"runs in {db}")
    table.add_column("run", no_wrap=True, min_width=max((len(r.id) for r in runs), default=3))
    table.add_column("study", overflow="fold")
    table.add_column("created", overflow="fold")
    for column in ("status", "cells", "ok", "failed", "accel"):
        table.add_column(column, no_wrap=column != "status")
    for run in runs:
        table.add_row(run.id, run.study_name, run.created_at, run.status, str(run.n_cells),
                      str(run.n_ok), str(run.n_failed), str(run.accelerator))
    return table
