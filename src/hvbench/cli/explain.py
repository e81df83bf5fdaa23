"""``hvbench explain [RUN]``: the bottleneck of every cell, named from the host-side
evidence, with its numbers next to native and the fix (docs/diagnosis.md). The
verdicts are the report model's (:attr:`hvbench.report.model.RunReport.verdicts`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console

from hvbench.cli.common import (
    add_cell_filters,
    add_db_option,
    add_format_option,
    add_output_option,
    add_run_argument,
    db_of,
    no_match_error,
    run_id_of,
    selected,
    warn_tcg,
)


def register(sub: Any) -> None:
    explain = sub.add_parser("explain", help="name the bottleneck of every cell of a run")
    add_run_argument(explain)
    add_cell_filters(explain, what="cells PLATFORM/WORKLOAD/PHASE", old_name="--cell")
    add_format_option(explain)
    add_output_option(explain)
    add_db_option(explain)
    explain.set_defaults(handler=handle)


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Every verdict (or those ``--only``/``--exclude`` select) as text or JSON.

    Raises:
        SpecError: no such run (or an ambiguous prefix); the patterns select no cell
            (the message lists the closest cells).
        StoreError: the database cannot be read.
    """
    from hvbench.report.diagnosis import explain_lines, verdict_json
    from hvbench.report.model import load_run_report
    from hvbench.store.database import Store

    with Store(db_of(args), create=False) as store:
        report = load_run_report(store, run_id_of(store, args), monitors=[], steady=False)
    verdicts = [v for v in report.verdicts if selected(v.cell, args.only, args.exclude)]
    if not verdicts and (args.only or args.exclude):
        raise no_match_error(args.only or args.exclude, [v.cell for v in report.verdicts],
                             "cell")
    if args.format == "json":
        out.print_json(json.dumps({"run": report.run.id,
                                   "accelerator": report.run.env.get("accelerator"),
                                   "verdicts": [verdict_json(v) for v in verdicts]}))
    else:
        warn_tcg(err, report.run.env.get("accelerator"))
        for verdict in verdicts:
            for line in explain_lines(verdict):
                out.print(line, markup=False, highlight=False, soft_wrap=True)
    return 0
