"""What every command module shares: the handler signature, the ``--db`` option, the
TCG warning, resolving a run id, and printing a run's report (``run`` and ``report``
both end with it)."""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import os
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from hvbench.errors import SpecError
from hvbench.report.model import load_run_report, resolve_run_id
from hvbench.report.text import warning_lines
from hvbench.store.location import DB_ENV

if TYPE_CHECKING:
    from hvbench.report.render import TerminalOptions
    from hvbench.store.database import Store

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


# -- one option vocabulary (issue 29): every command spells these the same way ----------
#: What ``--format`` prints for a person: a table (or, for ``explain``, text blocks).
HUMAN_FORMAT = "table"


def add_format_option(parser: argparse.ArgumentParser,
                      choices: Sequence[str] = (HUMAN_FORMAT, "json"),
                      default: str = HUMAN_FORMAT) -> None:
    """``--format {table,json,...}``, the one way every command chooses its output."""
    parser.add_argument("--format", choices=tuple(choices), default=default,
                        help=f"output format (default {default})")


def add_output_option(parser: argparse.ArgumentParser, *, console: bool = True) -> None:
    """``-o/--output FILE``. With ``console`` the command's stdout console is the file
    (:func:`output_console`); else the handler writes the file itself."""
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="write the output to FILE instead of stdout")
    parser.set_defaults(output_to_console=console)


@contextlib.contextmanager
def output_console(args: argparse.Namespace, out: Console) -> Iterator[Console]:
    """``out``, or a console writing to ``-o FILE`` for commands whose output is
    printed (the file is plain text: no colour, a width that does not wrap tables)."""
    path = getattr(args, "output", None)
    if not path or not getattr(args, "output_to_console", False):
        yield out
        return
    with file_console(path) as console:
        yield console


@contextlib.contextmanager
def file_console(path: str) -> Iterator[Console]:
    """A console writing plain text to ``path``. Raises :class:`SpecError` when the file
    cannot be written."""
    try:
        handle = Path(path).open("w", encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise SpecError(f"-o {path}: cannot write: {exc.strerror}") from exc
    with handle:
        yield Console(file=handle, highlight=False, no_color=True, width=FILE_WIDTH)


def write_document(out: Console, text: str) -> None:
    """``text`` (a JSON document) on ``out`` byte for byte: no markup, emoji codes,
    highlighting or wrapping."""
    out.file.write(text if text.endswith("\n") else text + "\n")
    out.file.flush()


#: Columns of a table written to a file: wide enough that rows do not wrap.
FILE_WIDTH = 160


def add_cell_filters(parser: argparse.ArgumentParser, *, what: str = "cells",
                     old_name: str | None = None) -> None:
    """``--only PATTERN`` / ``--exclude PATTERN``, the one cell filter of every command
    (shell patterns on the cell name, repeatable). ``old_name`` (e.g. ``--cell``) keeps
    a command's former spelling working as a hidden alias of ``--only``."""
    parser.add_argument("--only", action="append", default=[], metavar="PATTERN",
                        help=f"only the {what} whose name matches this shell pattern, "
                             "e.g. 'vm-*/dd*' (repeatable)")
    parser.add_argument("--exclude", action="append", default=[], metavar="PATTERN",
                        help=f"leave out the {what} whose name matches this shell pattern "
                             "(repeatable)")
    if old_name is not None:
        parser.add_argument(old_name, action=DeprecatedAlias, dest="only", nargs=1,
                            replacement="--only", help=argparse.SUPPRESS)


class DeprecatedAlias(argparse.Action):
    """A former option spelling, hidden from ``--help``: it does what ``replacement``
    does (``const`` stored, or its value appended to ``dest``) and says so on stderr."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, replacement: str,
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.replacement = replacement

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if self.nargs == 0:
            setattr(namespace, self.dest, self.const)
        else:
            setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []),
                                           *values])
        # Printed while parsing: the handler never learns which spelling was used.
        sys.stderr.write(f"hvbench: warning: {option_string} is deprecated; use "
                         f"{self.replacement}\n")


#: Options kept for old command lines, hidden from ``--help`` (the parser walk of
#: tests/unit/test_cli_conventions.py allows exactly these spellings).
HIDDEN_ALIASES = {"--json", "--cell"}


def selected(name: str, only: Sequence[str], exclude: Sequence[str]) -> bool:
    """``name`` passes ``--only`` (any pattern, or none given) and no ``--exclude``."""
    return ((not only or any(fnmatch.fnmatchcase(name, p) for p in only))
            and not any(fnmatch.fnmatchcase(name, p) for p in exclude))


def no_match_error(patterns: Sequence[str], names: Sequence[str], what: str) -> SpecError:
    """Nothing matched ``patterns``: the error lists the closest (else all) ``names``."""
    import difflib

    wanted = ", ".join(repr(p) for p in patterns) or "(no pattern)"
    close: list[str] = []
    for pattern in patterns:
        close += difflib.get_close_matches(pattern, names, n=5, cutoff=0.4)
    shown = list(dict.fromkeys(close)) or list(names)
    label = "closest" if close else "available"
    return SpecError(f"no {what} matches {wanted}; {label} {what}s: "
                     f"{', '.join(shown) or 'none'}")


def invoked_program(argv0: str | None = None, on_path: bool | None = None) -> str:
    """How the user types hvbench again in a command hvbench prints: ``hvbench`` when
    that is on PATH, else the path they ran it by (``.venv/bin/hvbench`` in the demo,
    whose venv is not activated) so a copied line runs."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    found = shutil.which("hvbench") is not None if on_path is None else on_path
    if found or Path(argv0).name != "hvbench" or "/" not in argv0:
        return "hvbench"
    return argv0
