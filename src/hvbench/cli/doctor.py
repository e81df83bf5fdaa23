"""``hvbench doctor``: what this host can do (KVM, QEMU and its AIO modes, tools,
cgroups, root, free disk)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from hvbench.cli.common import (
    DeprecatedAlias,
    add_format_option,
    add_output_option,
    warn_tcg,
    write_document,
)


def register(sub: Any) -> None:
    doctor = sub.add_parser("doctor", help="what this host can do (KVM, QEMU, tools, cgroups)")
    add_format_option(doctor)
    add_output_option(doctor)
    doctor.add_argument("--json", action=DeprecatedAlias, nargs=0, dest="format",
                        const="json", replacement="--format json", help=argparse.SUPPRESS)
    doctor.add_argument("--refresh", action="store_true",
                        help="re-probe KVM and re-time libvirt's start (ignore the cache)")
    doctor.add_argument("--timeout", type=float, default=20.0,
                        help="KVM probe boot timeout in seconds (default 20)")
    doctor.set_defaults(handler=handle)


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    from hvbench.platforms.doctor import collect, render

    report = collect(refresh=args.refresh, timeout=args.timeout)
    if args.format == "json":
        write_document(out, json.dumps(report, indent=2))
        return 0
    out.print(doctor_table(render(report)))
    warn_tcg(err, report["accelerator"])
    return 0


def doctor_table(rows: list[tuple[str, str]]) -> Table:
    """The doctor report as a two-column table; problems in red (pure)."""
    table = Table(title="hvbench doctor", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for label, value in rows:
        style = "red" if "MISSING" in value or "unusable" in value or "SLOW" in value \
            else ""
        table.add_row(label, value, style=style)
    return table
