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
    doctor,
    explain,
    fio_compare,
    guest,
    image,
    report,
    run,
    runs,
)
from hvbench.cli.common import Handler
from hvbench.cli.version import VersionAction
from hvbench.errors import HvbenchError, InterruptedRun
from hvbench.platforms.registry import REGISTRY

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

#: The commands in the order ``hvbench --help`` lists them.
COMMANDS = (doctor, image, guest, fio_compare, run, runs, report, explain, compare, check,
            cleanup)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hvbench", description="Measure what virtualization costs I/O.")
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise InterruptedRun(signum)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point. Exit codes: 0 ok, 1 error, 2 bad input, 130/143 interrupted;
    ``guest exec`` returns its command's exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    # Ctrl-C stops guests in order even when hvbench was started with SIGINT ignored
    # (a background job of a non-interactive shell inherits SIG_IGN).
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        handler: Handler = args.handler
        return handler(args, out, err)
    except BrokenPipeError:
        # `hvbench report | head`: the reader left; not an error worth a traceback.
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        err.print("[red]interrupted; stopping all guests[/]")
        return 130
    except HvbenchError as exc:
        err.print(f"hvbench: error: {exc}", style="red", markup=False, soft_wrap=True)
        return exc.exit_code
    finally:
        REGISTRY.stop_all()
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


if __name__ == "__main__":
    sys.exit(main())
