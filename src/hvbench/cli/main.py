"""The ``hvbench`` command. Thin: parse, call the layers below, print, map errors to exit
codes (the only place that does)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Callable, Sequence
from types import FrameType

from rich.console import Console
from rich.table import Table

from hvbench.cli.report_cmds import add_report_commands
from hvbench.cli.study_cmds import add_study_commands
from hvbench.cli.version import VersionAction
from hvbench.cli.vmopts import add_vm_options, vm_spec_from_args
from hvbench.errors import HvbenchError, InterruptedRun, SpecError
from hvbench.platforms.registry import REGISTRY

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

Handler = Callable[[argparse.Namespace], int]


def _warn_tcg(accel: str | None) -> None:
    from hvbench.platforms.doctor import TCG_WARNING

    if accel == "tcg":
        err.print(f"[bold red]WARNING: {TCG_WARNING}[/]")


# -- doctor ----------------------------------------------------------------------------
def cmd_doctor(args: argparse.Namespace) -> int:
    from hvbench.platforms.doctor import collect, render

    report = collect(refresh=args.refresh, timeout=args.timeout)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    out.print(doctor_table(render(report)))
    _warn_tcg(report["accelerator"])
    return 0


def doctor_table(rows: list[tuple[str, str]]) -> Table:
    """The doctor report as a two-column table; problems in red (pure)."""
    table = Table(title="hvbench doctor", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for label, value in rows:
        style = "red" if "MISSING" in value or "unusable" in value else ""
        table.add_row(label, value, style=style)
    return table


# -- image -----------------------------------------------------------------------------
def cmd_image_build(args: argparse.Namespace) -> int:
    from hvbench.image.builder import build_image

    image = build_image(force=args.force, log=lambda line: err.print(f"[dim]{line}[/]"))
    out.print(f"guest image {image.key[:12]}: kernel {image.kernel_release}")
    out.print(f"  kernel {image.kernel}\n  initrd {image.initrd}")
    return 0


def cmd_image_info(args: argparse.Namespace) -> int:
    from hvbench.image.builder import find_image

    image = find_image()
    if image is None:
        err.print("no guest image is built for the current package versions "
                  "(run `hvbench image build`)")
        return 1
    info = {"key": image.key, "kernel_release": image.kernel_release,
            "kernel": str(image.kernel), "initrd": str(image.initrd),
            "packages": image.packages}
    print(json.dumps(info, indent=2))
    return 0


# -- guest exec ------------------------------------------------------------------------
def cmd_guest_exec(args: argparse.Namespace) -> int:
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
        _warn_tcg(guest.accel)
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


# -- fio-compare -----------------------------------------------------------------------
def cmd_fio_compare(args: argparse.Namespace) -> int:
    from hvbench.cli.fio_compare import run_fio_compare

    spec = vm_spec_from_args(args)
    table, accel = run_fio_compare(spec, args, err)
    out.print(table)
    _warn_tcg(accel)
    return 0


# -- parser ----------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hvbench", description="Measure what virtualization costs I/O.")
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    doctor = sub.add_parser("doctor", help="what this host can do (KVM, QEMU, tools, cgroups)")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    doctor.add_argument("--refresh", action="store_true", help="re-probe KVM (ignore cache)")
    doctor.add_argument("--timeout", type=float, default=20.0,
                        help="KVM probe boot timeout in seconds (default 20)")
    doctor.set_defaults(handler=cmd_doctor)

    image = sub.add_parser("image", help="the bundled guest image")
    image_sub = image.add_subparsers(dest="image_command", required=True, metavar="ACTION")
    build = image_sub.add_parser("build", help="build (or reuse) the guest image")
    build.add_argument("--force", action="store_true", help="rebuild even if cached")
    build.set_defaults(handler=cmd_image_build)
    image_sub.add_parser("info", help="print the cached image's manifest").set_defaults(
        handler=cmd_image_info)

    guest = sub.add_parser("guest", help="boot a guest by hand")
    guest_sub = guest.add_subparsers(dest="guest_command", required=True, metavar="ACTION")
    gexec = guest_sub.add_parser("exec", help="boot a guest, run CMD in it, stop it")
    add_vm_options(gexec)
    gexec.add_argument("--boot-timeout", type=float, default=60.0, help="seconds (default 60)")
    gexec.add_argument("--timeout", type=float, default=600.0,
                       help="seconds CMD may run (default 600)")
    gexec.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    gexec.set_defaults(handler=cmd_guest_exec)

    fio = sub.add_parser("fio-compare", help="one fio job natively and in a guest, side by side")
    add_vm_options(fio)
    fio.add_argument("--rw", default="write", help="fio rw mode (default write)")
    fio.add_argument("--bs", default="64K", help="block size (default 64K)")
    fio.add_argument("--size", default="64M", help="bytes of I/O per job (default 64M)")
    fio.add_argument("--boot-timeout", type=float, default=60.0)
    fio.set_defaults(handler=cmd_fio_compare)
    add_study_commands(sub)
    add_report_commands(sub)
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
        if hasattr(args, "study_handler"):
            return int(args.study_handler(args, out, err))
        handler: Handler = args.handler
        return handler(args)
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
