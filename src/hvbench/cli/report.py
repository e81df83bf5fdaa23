"""``hvbench report [RUN]``: a run's tables in the terminal, or the same report as JSON
or HTML, or its measurements as CSV, JSON rows or Parquet. Every format renders the
one report model (:func:`hvbench.report.model.load_run_report`)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from hvbench.cli.common import (
    add_db_option,
    add_format_option,
    add_output_option,
    add_run_argument,
    db_of,
    file_console,
    print_report,
    run_id_of,
)
from hvbench.errors import SpecError

if TYPE_CHECKING:
    from hvbench.store.database import Store


#: Formats that export measurements or a document rather than print tables.
EXPORT_FORMATS = ("csv", "json-rows", "parquet", "html")


def register(sub: Any) -> None:
    report = sub.add_parser("report", help="tables of a run (default: the latest)")
    add_run_argument(report)
    add_format_option(report, ("table", "json", *EXPORT_FORMATS))
    add_output_option(report, console=False)
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
        help="a fleet run's report instead (its id or a unique prefix): its hosts, each "
             "workload's main metric per host with its %% of that host's native, the "
             "CoV across hosts next to the CoV within hosts, the outlier hosts, and "
             "with 2 hosts their verdict paired by cell (--format table, json or html)")
    report.add_argument(
        "--all-metrics", action="store_true",
        help="with --fleet: also the host-to-host table of every metric (not only each "
             "workload's main one)")
    report.add_argument("--brief", action="store_true",
                        help="one screen: the headline and the main table")
    report.add_argument("--verbose", action="store_true",
                        help="the Diagnosis also lists native, boot and abstaining cells")
    report.add_argument("--stats", action="store_true",
                        help="the headline metric's median, min and max as well")
    report.set_defaults(handler=handle)


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    """The tables (phase summaries, then propagation fits and scenario tables when the
    run has them) on stdout, warnings and failures on stderr; or a document."""
    from hvbench.store.database import Store

    if args.format == "parquet" and not args.output and sys.stdout.isatty():
        raise SpecError("--format parquet writes binary data: give -o FILE or redirect "
                        "stdout")
    if args.fleet and args.format not in ("table", "json", "html"):
        raise SpecError(f"--fleet renders as table, json or html, not {args.format}: "
                        "export each host's run for its measurements")
    with Store(db_of(args), create=False) as store:
        if args.fleet:
            data = _fleet_document(store, args.fleet, args.format, out,
                                   all_metrics=args.all_metrics)
            if data is None:
                return 0
        else:
            run_id = run_id_of(store, args)
            if args.format == "table":
                with contextlib.ExitStack() as stack:
                    target = stack.enter_context(file_console(args.output)) \
                        if args.output else out
                    print_report(store, run_id, target, err, findings=args.findings,
                                 options=terminal_options(args))
                return 0
            data = _document(store, run_id, args)
    if args.output:
        Path(args.output).write_bytes(data)
        if args.format in EXPORT_FORMATS and not getattr(args, "quiet", False):
            err.print(f"wrote {args.output} ({len(data)} bytes)")
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return 0


def terminal_options(args: argparse.Namespace) -> Any:
    """The table format's :class:`~hvbench.report.render.TerminalOptions`."""
    from hvbench.report.render import TerminalOptions

    return TerminalOptions(stats=args.stats, verbose=args.verbose, brief=args.brief)


def _fleet_document(store: Store, fleet_id: str, fmt: str, out: Console, *,
                    all_metrics: bool = False) -> bytes | None:
    """``--fleet``: the tables printed (None), or the JSON or HTML document."""
    from hvbench.report.fleet import fleet_json_text, fleet_tables, load_fleet_report
    from hvbench.report.html import render_fleet_html
    from hvbench.report.model import resolve_fleet_id
    from hvbench.report.tables import rich_table

    # A unique prefix, as for a run id and `run --resume` of a fleet.
    fleet_id = resolve_fleet_id(store, fleet_id, store.location)
    report = load_fleet_report(store, fleet_id)
    if fmt == "json":
        return fleet_json_text(report).encode()
    if fmt == "html":
        return render_fleet_html(fleet_id, fleet_tables(report, all_metrics=all_metrics),
                                 tcg=report.tcg).encode()
    for table in fleet_tables(report, all_metrics=all_metrics):
        out.print(rich_table(table))
    return None


def _fleet_of(store: Store, run_id: str) -> Any:
    """The fleet report of the fleet ``run_id`` belongs to (None: a run of one host)."""
    from hvbench.report.fleet import load_fleet_report

    fleet_id = store.get_run(run_id).fleet_id
    return None if fleet_id is None else load_fleet_report(store, fleet_id)


def _document(store: Store, run_id: str, args: argparse.Namespace) -> bytes:
    from hvbench.report.fleet import fleet_json
    from hvbench.report.model import load_run_report
    from hvbench.report.render import export_bytes, findings_choice, report_json

    if args.format == "json":
        report = load_run_report(store, run_id)
        fleet = _fleet_of(store, run_id)
        text = report_json(report, findings_choice(report, args.findings),
                           fleet=None if fleet is None else fleet_json(fleet))
        return (text if text.endswith("\n") else text + "\n").encode()
    if args.format == "html":
        return _html(store, run_id, args.series, args.findings).encode()
    return export_bytes(load_run_report(store, run_id, monitors=[]), args.format)


def _html(store: Store, run_id: str, series: str | None, findings: str | None) -> str:
    from hvbench.report.fleet import fleet_tables
    from hvbench.report.html import (
        AUTO_SERIES,
        SCENARIO_MONITORS,
        parse_series_choice,
        render_html,
    )
    from hvbench.report.model import latency_distributions, load_run_report
    from hvbench.report.render import findings_choice, html_input
    from hvbench.report.tune import load_tune_report, tuning_html
    from hvbench.run.tune import is_tune_text, resume_tune

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
        data = dataclasses.replace(data, tuning=tuning_html(
            load_tune_report(store, run_id, resume_tune(store, run_id))))
    fleet = _fleet_of(store, run_id)
    if fleet is not None:
        data = dataclasses.replace(data, fleet=fleet_tables(fleet))
    return render_html(data)
