"""The ``hvbench`` command. Thin: parse, call the layers below, print, map errors to exit
codes (the only place that does).

Each command is one module of this package with ``register(subparsers)`` and handlers
of one signature, :data:`hvbench.cli.common.Handler`: ``(args, out, err) -> exit code``.
"""

from __future__ import annotations

import argparse
import difflib
import re
import signal
import sys
from collections.abc import Sequence
from types import FrameType
from typing import NoReturn

from rich.console import Console

from hvbench.cli import (
    calibrate,
    check,
    cleanup,
    compare,
    db,
    doctor,
    explain,
    fio_compare,
    fleet,
    guest,
    image,
    init,
    noise,
    parser_docs,
    report,
    run,
    runs,
    show,
    tune,
    worker,
)
from hvbench.cli.common import Handler, output_console
from hvbench.cli.examples import add_examples
from hvbench.cli.version import VersionAction
from hvbench.errors import HvbenchError, InterruptedRun, SpecError
from hvbench.host import interrupt, proctree
from hvbench.platforms.registry import REGISTRY

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

#: The commands in the order ``hvbench --help`` lists them.
COMMANDS = (doctor, init, image, guest, fio_compare, run, tune, runs, report, explain, compare,
            noise, calibrate, check, show, db, fleet, worker, cleanup, parser_docs)


def build_parser() -> argparse.ArgumentParser:
    parser = SuggestingParser(
        prog="hvbench", description="Measure what virtualization costs I/O.")
    parser.add_argument("--version", action=VersionAction)
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bar and no informational lines on stderr (run "
                             "id, next commands); warnings, failures and errors still "
                             "print. NO_COLOR=1 in the environment turns colours off")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=SuggestingParser)
    for command in COMMANDS:
        command.register(sub)
    add_examples(sub)
    return parser


class SuggestingParser(argparse.ArgumentParser):
    """An argument parser whose "invalid choice" errors (a mistyped command, action or
    ``--format``) end with the closest valid choice. Usage errors exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.format_usage()}{self.prog}: error: "
                     f"{with_suggestion(message, option_names(self))}\n")


def option_names(parser: argparse.ArgumentParser) -> list[str]:
    """Every ``--option`` of ``parser`` and of its commands, hidden aliases left out."""
    names: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                names += option_names(child)
        elif action.help != argparse.SUPPRESS:
            names += [o for o in action.option_strings if o.startswith("--")]
    return sorted(set(names))


def with_suggestion(message: str, options: Sequence[str] = ()) -> str:
    """argparse's ``invalid choice: 'X' (choose from 'a', 'b')`` plus "did you mean"
    the closest choice, and ``unrecognized arguments: --fromat`` plus the closest of
    ``options`` (pure; other messages unchanged)."""
    unknown = re.search(r"unrecognized arguments: (.*)$", message)
    if unknown is not None:
        words = [w.split("=")[0] for w in unknown.group(1).split() if w.startswith("--")]
        close = [m for w in words for m in difflib.get_close_matches(w, options, n=1,
                                                                       cutoff=0.75)]
        return f"{message}; did you mean {close[0]!r}?" if close else message
    match = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
    if match is None:
        return message
    choices = re.findall(r"'([^']*)'", match.group(2)) or \
        [c.strip() for c in match.group(2).split(",")]
    close = difflib.get_close_matches(match.group(1), choices, n=1, cutoff=0.5)
    return f"{message}; did you mean {close[0]!r}?" if close else message


def _on_signal(signum: int, frame: FrameType | None) -> None:
    # Only the first signal raises: a second one (an impatient Ctrl-C) must not break
    # the stop that the first one started. Inside interrupt.deferred() it raises when
    # that block ends.
    interrupt.deliver(signum)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point. Exit codes: 0 ok, 1 error (``run``: some repetitions failed), 2 bad
    input, 3 every repetition of a run failed, 130/143 interrupted by SIGINT/SIGTERM;
    ``guest exec`` returns its command's exit code, ``check`` its own."""
    parser = build_parser()
    args = parser.parse_args(argv)
    interrupt.reset()
    # Orphaned descendants (fio's jobs in their own session) re-parent to hvbench, so
    # stopping finds the whole tree (docs/design.md, "One class per external process").
    # Only for the command's duration: a caller that runs main() in-process (tests)
    # must not go on adopting every orphan of the machine's daemons afterwards.
    was_subreaper = proctree.is_subreaper()
    proctree.become_subreaper()
    # Ctrl-C stops guests in order even when hvbench was started with SIGINT ignored
    # (a background job of a non-interactive shell inherits SIG_IGN).
    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGTERM,
                                                               signal.SIGINT)}
    try:
        handler: Handler = args.handler
        with output_console(args, out) as target:
            return handler(args, target, err)
    except BrokenPipeError:
        # `hvbench report | head`: the reader left; not an error worth a traceback.
        sys.stderr.close()
        return 0
    except (InterruptedRun, KeyboardInterrupt) as exc:
        signum = exc.signum if isinstance(exc, InterruptedRun) else signal.SIGINT
        return _stop_interrupted(signum)
    except HvbenchError as exc:
        # A study's problems are one line each: each gets the prefix.
        lines = str(exc).splitlines() if isinstance(exc, SpecError) else [str(exc)]
        for line in lines or [""]:
            err.print(f"hvbench: error: {line}", style="red", markup=False, soft_wrap=True)
        return exc.exit_code
    finally:
        REGISTRY.stop_all()
        for sig, handler_before in previous.items():
            signal.signal(sig, handler_before)
        if not was_subreaper:
            proctree.become_subreaper(False)


def _stop_interrupted(signum: int) -> int:
    """Stop every registered process, then every descendant left (whatever its group or
    session); name the survivors. Returns 128 + ``signum``."""
    REGISTRY.stop_all()
    survivors = proctree.kill_descendants()
    message = f"interrupted by signal {signum}; every guest, lab and process was stopped"
    if survivors:
        message += ("; still present after SIGKILL (uninterruptible I/O?): "
                    + proctree.describe(survivors))
    err.print(f"hvbench: {message}", style="red", markup=False, soft_wrap=True)
    return 128 + signum


if __name__ == "__main__":
    sys.exit(main())
