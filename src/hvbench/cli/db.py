"""``hvbench db copy SRC DST [RUN...]``: move runs between results databases (a local
SQLite file and the team's PostgreSQL, either way)."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console


def register(sub: Any) -> None:
    db = sub.add_parser("db", help="results databases: copy runs between them")
    db_sub = db.add_subparsers(dest="db_command", required=True, metavar="COMMAND")
    copy = db_sub.add_parser(
        "copy", help="copy runs from SRC to DST (SQLite files or postgresql:// URLs); "
                     "copying again completes what is missing")
    copy.add_argument("source", metavar="SRC", help="database to read")
    copy.add_argument("destination", metavar="DST", help="database to write (created)")
    copy.add_argument("runs", nargs="*", metavar="RUN",
                      help="run ids or unique prefixes (default: every run of SRC)")
    copy.set_defaults(handler=handle_copy)


def handle_copy(args: argparse.Namespace, out: Console, err: Console) -> int:
    from hvbench.report.model import resolve_run_id
    from hvbench.store.copy import copy_runs
    from hvbench.store.database import Store

    with Store(args.source, create=False) as source, Store(args.destination) as destination:
        run_ids = [resolve_run_id(source, run, source.location) for run in args.runs]
        for done in copy_runs(source, destination, run_ids):
            state = "new" if done.created else "existing"
            out.print(f"{done.run_id}: {done.copied} repetitions copied, {done.skipped} "
                      f"already there ({state} run in {destination.location})", markup=False)
    return 0
