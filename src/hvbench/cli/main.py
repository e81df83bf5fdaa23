"""The ``hvbench`` command. Thin: parse, call the layers below, print, map errors to exit
codes (the only place that does).

Each command is one module of this package with ``register(subparsers)`` and handlers
of one signature, :data:`hvbench.cli.common.Handler`: ``(args, out, err) -> exit code``.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from rich.console import Console

from hvbench.cli import (
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
    noise,
    report,
    run,
    runs,
    tune,
    worker,
)
from hvbench.cli.common import Handler
from hvbench.cli.version import VersionAction
from hvbench.errors import HvbenchError, InterruptedRun
from hvbench.host import interrupt, proctree
from hvbench.platforms.registry import REGISTRY

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

#: The commands in the order ``hvbench --help`` lists them.
COMMANDS = (doctor, image, guest, fio_compare, run, tune, runs, report, explain, compare,
            noise, check, db, fleet, worker, cleanup)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hvbench", description="Measure what virtualization costs I/O.")
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def _on_signal(signum: int, frame: FrameType | None) -> None:
    # Only the first signal raises: a second one (an impatient Ctrl-C) must not break
    # the stop that the first one started.
    if interrupt.request(signum):
        raise InterruptedRun(signum)


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
        return handler(args, out, err)
    except BrokenPipeError:
        # `hvbench report | head`: the reader left; not an error worth a traceback.
        sys.stderr.close()
        return 0
    except (InterruptedRun, KeyboardInterrupt) as exc:
        signum = exc.signum if isinstance(exc, InterruptedRun) else signal.SIGINT
        return _stop_interrupted(signum)
    except HvbenchError as exc:
        err.print(f"hvbench: error: {exc}", style="red", markup=False, soft_wrap=True)
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
