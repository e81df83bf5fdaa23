"""``hvbench explain [RUN]``: the bottleneck of every cell, named from the host-side
evidence, with its numbers next to native and the fix (docs/diagnosis.md). The
verdicts are the report model's (:attr:`hvbench.report.model.RunReport.verdicts`)."""

from __future__ import annotations

import argparse
import fnmatch
import json
from typing import Any

from rich.console import Console

from hvbench.cli.common import add_db_option, add_run_argument, db_of, run_id_of, warn_tcg


def register(sub: Any) -> None:
    explain = sub.add_parser("explain", help="name the bottleneck of every cell of a run")
    add_run_argument(explain)
    explain.add_argument("--cell", metavar="PATTERN",
                         help="only cells PLATFORM/WORKLOAD/PHASE matching this shell "
                              "pattern, e.g. 'vm-*/iozone/*'")
    explain.add_argument("--format", choices=("table", "json"), default="table")
    explain.add_argument("--verbose", action="store_true",
                         help="also native and boot cells, and the rules that abstained")
    add_db_option(explain)
    explain.set_defaults(handler=handle)


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Every verdict (or those ``--cell`` selects) as text or JSON; exit 1 when the
    pattern selects no cell.

    Raises:
        SpecError: no such run (or an ambiguous prefix).
        StoreError: the database cannot be read.
    """
    from hvbench.report.diagnosis import diagnosis_groups, diagnosis_lines, verdict_json
    from hvbench.report.model import load_run_report
    from hvbench.store.database import Store

    with Store(db_of(args), create=False) as store:
        report = load_run_report(store, run_id_of(store, args), monitors=[], steady=False)
    verdicts = [v for v in report.verdicts
                if args.cell is None or fnmatch.fnmatchcase(v.cell, args.cell)]
    if args.format == "json":
        out.print_json(json.dumps({"run": report.run.id,
                                   "accelerator": report.run.env.get("accelerator"),
                                   "verdicts": [verdict_json(v) for v in verdicts]}))
    else:
        warn_tcg(err, report.run.env.get("accelerator"))
        # Cells under the fix they share, wrapped at the terminal's width; a --cell
        # pattern or --verbose also shows native and boot cells and abstentions.
        groups = diagnosis_groups(verdicts, verbose=args.verbose or args.cell is not None,
                                  long=True)
        for line in diagnosis_lines(groups, out.width):
            out.print(line, markup=False, highlight=False, soft_wrap=True)
    if not verdicts:
        err.print(f"no cell matches {args.cell!r}", style="red", markup=False)
        return 1
    return 0
