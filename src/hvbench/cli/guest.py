"""``hvbench guest exec``: boot a guest, run a command in it, stop it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rich.console import Console

from hvbench.cli.common import warn_tcg
from hvbench.cli.vmopts import add_vm_options, vm_spec_from_args
from hvbench.errors import SpecError


def register(sub: Any) -> None:
    guest = sub.add_parser("guest", help="boot a guest by hand")
    guest_sub = guest.add_subparsers(dest="guest_command", required=True, metavar="ACTION")
    gexec = guest_sub.add_parser("exec", help="boot a guest, run CMD in it, stop it")
    add_vm_options(gexec)
    gexec.add_argument("--boot-timeout", type=float, default=60.0, help="seconds (default 60)")
    gexec.add_argument("--timeout", type=float, default=600.0,
                       help="seconds CMD may run (default 600)")
    gexec.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    gexec.set_defaults(handler=handle_exec)


def handle_exec(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Exits with the command's own exit code."""
    from hvbench.platforms.accel import choose_accel
    from hvbench.platforms.qemu import QemuPlatform

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise SpecError("guest exec: no command given (hvbench guest exec [options] -- CMD...)")
    spec = vm_spec_from_args(args)
    with QemuPlatform(spec, boot_timeout=args.boot_timeout,
                      accel_choice=choose_accel(spec)) as guest:
        warn_tcg(err, guest.accel)
        result = guest.exec(command, timeout=args.timeout)
        sys.stdout.buffer.write(result.stdout)
        sys.stdout.flush()
        sys.stderr.buffer.write(result.stderr)
        err.print(
            f"[dim]accel={guest.accel} boot={guest.timings['boot_s']:.2f}s "
            f"(qmp {guest.timings['qmp_s']:.2f}s, agent {guest.timings['agent_s']:.2f}s) "
            f"exec={result.seconds:.2f}s exit={result.exit_code}[/]"
        )
    return result.exit_code
