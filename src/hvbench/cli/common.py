"""What every command module shares: the handler signature, the ``--db`` option, the
TCG warning, resolving a run id, and printing a run's report (``run`` and ``report``
both end with it)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Console

from hvbench.analysis.summaries import warning_lines
from hvbench.report.model import load_run_report, resolve_run_id
from hvbench.store.database import DB_ENV, Store

if TYPE_CHECKING:
    from hvbench.report.render import TerminalOptions

#: Every command's handler: parsed arguments, stdout and stderr consoles -> exit code.
Handler = Callable[[argparse.Namespace, Console, Console], int]
#: The results database a command uses unless ``--db`` names another.
DEFAULT_DB = "hvbench.db"


def default_db() -> str:
    """``$HVBENCH_DB`` when set, else ./hvbench.db."""
    return os.environ.get(DB_ENV) or DEFAULT_DB


def add_db_option(parser: argparse.ArgumentParser) -> None:
    """``--db FILE|URL`` (default ``$HVBENCH_DB``, else ./hvbench.db)."""
    parser.add_argument("--db", default=None, type=str,
                        help=f"results database: an SQLite file or a "
                             f"postgresql://user@host/dbname URL (default ${DB_ENV}, else "
                             f"./{DEFAULT_DB})")
    parser.set_defaults(db=None)


def db_of(args: argparse.Namespace) -> str:
    """The database a command uses: ``--db``, else ``$HVBENCH_DB``, else ./hvbench.db."""
    return str(args.db) if args.db else default_db()


def add_run_argument(parser: argparse.ArgumentParser) -> None:
    """The optional ``RUN`` positional: a run id or a unique prefix of one."""
    parser.add_argument("run", nargs="?",
                        help="run id or a unique prefix of one (default: the latest run)")


def short_number(value: float) -> str:
    """A number as the comparison and bounds tables show it: whole above 1000, else
    three significant digits."""
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def warn_tcg(err: Console, accel: str | None) -> None:
    """The red warning every command prints when guests ran under TCG."""
    from hvbench.platforms.doctor import TCG_WARNING

    if accel == "tcg":
        err.print(f"[bold red]WARNING: {TCG_WARNING}[/]")


def run_id_of(store: Store, args: argparse.Namespace) -> str:
    """``args.run`` resolved (a unique prefix is enough), or the latest run.

    Raises :class:`SpecError`: no run, an unknown id, or an ambiguous prefix."""
    return resolve_run_id(store, args.run, store.location)


def print_report(store: Store, run_id: str, out: Console, err: Console, *,
                 findings: str | None = None, options: TerminalOptions | None = None
                 ) -> None:
    """The terminal report of ``run_id``: header, tables (with ``findings``, ``measured``
    or ``all``, the Findings table last), then warnings and failures on stderr."""
    # Imported here: the renderers pull in matplotlib (HTML plots), which commands that
    # print no report (explain, check) should not pay for.
    from hvbench.report.render import (
        TerminalOptions,
        brief_table,
        findings_choice,
        findings_text_table,
        terminal_header,
        terminal_tables,
    )
    from hvbench.report.tables import rich_table

    options = options or TerminalOptions()
    # The terminal does not print the CoV: no samples are read.
    report = load_run_report(store, run_id, monitors=[])
    for line in terminal_header(report):
        out.print(line)
    if options.brief:
        out.print(rich_table(brief_table(report)))
        if report.warnings or report.failures:
            err.print(f"{len(warning_lines(report.warnings))} warnings, "
                      f"{len(report.failures)} failed repetitions: the full report lists "
                      "them", markup=False)
        return
    for table in terminal_tables(report, options):
        out.print(table)
    # A seed study's run shows the findings it measures without being asked.
    findings = findings_choice(report, findings)
    found = findings_text_table(report, findings)
    if found is not None:
        out.print(rich_table(found))
    elif findings is not None:
        out.print("Findings: this run measures none of the seed papers' findings "
                  "(--findings all lists them)")
    for warning in warning_lines(report.warnings):
        # Warnings quote study text such as "[study]": never read them as rich markup.
        err.print(f"warning: {warning}", style="yellow", markup=False)
    for failure in report.failures:
        first = failure.error.splitlines()[0] if failure.error else ""
        err.print(f"failed: {failure.cell} rep {failure.repetition + 1}: {first}",
                  style="red", markup=False)
