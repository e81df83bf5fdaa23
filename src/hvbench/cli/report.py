"""``hvbench report [RUN]``: a run's tables in the terminal, or the same report as JSON
or HTML, or its measurements as CSV, JSON rows or Parquet. Every format renders the
one report model (:func:`hvbench.report.model.load_run_report`)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from hvbench.cli.common import (
    add_db_option,
    add_run_argument,
    db_of,
    print_report,
    run_id_of,
    short_number,
)
from hvbench.errors import SpecError
from hvbench.store.database import Store

#: Formats that export measurements or a document rather than print tables.
EXPORT_FORMATS = ("csv", "json-rows", "parquet", "html")


def register(sub: Any) -> None:
    report = sub.add_parser("report", help="tables of a run (default: the latest)")
    add_run_argument(report)
    report.add_argument("--format", choices=("table", "json", *EXPORT_FORMATS),
                        default="table")
    report.add_argument("-o", "--output", help="write to this file instead of stdout")
    add_db_option(report)
    report.add_argument(
        "--series", metavar="MONITOR:KEY[+KEY]",
        help="time series drawn in the HTML report, e.g. host.disk.*:util_pct, "
             "host.cpu:busy_pct, qemu:vcpu.cpu_pct, iperf3:mbit_s (default: iperf3 "
             "Mbit/s, else host disk MB/s, else host CPU busy %%)")
    report.add_argument(
        "--findings", nargs="?", const="measured", choices=("measured", "all"),
        help="the seed papers' findings next to this run's numbers (docs/seeds.md); "
             "'all' also lists those the run does not measure (a seed study's run, "
             "examples/seeds/, shows the measured ones unasked)")
    report.add_argument(
        "--fleet", metavar="FLEET",
        help="a fleet run's host-to-host table instead: each host's mean per cell, the "
             "CoV across hosts next to the CoV within hosts, and the outlier hosts")
    report.set_defaults(handler=handle)


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    """The tables (phase summaries, then propagation fits and scenario tables when the
    run has them) on stdout, warnings and failures on stderr; or a document."""
    if args.format == "parquet" and not args.output and sys.stdout.isatty():
        raise SpecError("--format parquet writes binary data: give -o FILE or redirect "
                        "stdout")
    if args.fleet:
        out.print(fleet_table(db_of(args), args.fleet))
        return 0
    with Store(db_of(args), create=False) as store:
        run_id = run_id_of(store, args)
        if args.format == "table":
            print_report(store, run_id, out, err, findings=args.findings)
            return 0
        data = _document(store, run_id, args)
    if args.output:
        Path(args.output).write_bytes(data)
        if args.format in EXPORT_FORMATS:
            err.print(f"wrote {args.output} ({len(data)} bytes)")
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return 0


def _document(store: Store, run_id: str, args: argparse.Namespace) -> bytes:
    from hvbench.report.model import load_run_report
    from hvbench.report.render import export_bytes, findings_choice, report_json

    if args.format == "json":
        report = load_run_report(store, run_id)
        text = report_json(report, findings_choice(report, args.findings))
        return (text if text.endswith("\n") else text + "\n").encode()
    if args.format == "html":
        return _html(store, run_id, args.series, args.findings).encode()
    return export_bytes(load_run_report(store, run_id, monitors=[]), args.format)


def _html(store: Store, run_id: str, series: str | None, findings: str | None) -> str:
    from hvbench.report.html import (
        AUTO_SERIES,
        SCENARIO_MONITORS,
        parse_series_choice,
        render_html,
    )
    from hvbench.report.model import latency_distributions, load_run_report
    from hvbench.report.render import findings_choice, html_input
    from hvbench.report.tune import load_tune_report, tuning_html
    from hvbench.run.tune import is_tune_text

    choice = parse_series_choice(series) if series else None
    # Only the monitors a series choice (or the automatic ones) can draw, plus, for a
    # run with scenarios, those its Scenarios section reads.
    patterns = [choice.monitor] if choice else [c.monitor for c in AUTO_SERIES]
    if any(c.identity.scenario for c in store.cells(run_id)):
        patterns += SCENARIO_MONITORS
    report = load_run_report(store, run_id, monitors=patterns)
    data = html_input(report, choice, latency_distributions(store, run_id),
                      findings_choice(report, findings))
    if is_tune_text(report.run.study_text):
        data = dataclasses.replace(data, tuning=tuning_html(load_tune_report(store, run_id)))
    return render_html(data)


def fleet_table(db: str, fleet_id: str) -> Table:
    """The host-to-host table of fleet run ``fleet_id`` (its hosts' ok repetitions)."""
    from hvbench.analysis.fleet import host_spread

    with Store(db, create=False) as store:
        runs = store.fleet_runs(fleet_id)
        if not runs:
            raise SpecError(f"{store.location}: no fleet run {fleet_id!r}")
        spreads = host_spread({str(r.host): store.measurements(r.id) for r in runs})
    hosts = [str(r.host) for r in runs]
    table = Table(title=f"fleet {fleet_id}: {len(hosts)} hosts", title_justify="left")
    for column in ("cell", "phase", "metric", *hosts, "CoV across hosts %",
                   "CoV within hosts %", "outliers"):
        table.add_column(column, overflow="fold")
    for s in spreads:
        table.add_row(s.cell, s.phase, f"{s.metric} ({s.unit})",
                      *(short_number(s.means[h]) if h in s.means else "-" for h in hosts),
                      _pct(s.across_cov_pct), _pct(s.within_cov_pct),
                      ", ".join(s.outliers) or ("-" if s.p_values else "n/a (< 3 hosts)"))
    return table


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
