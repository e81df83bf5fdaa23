"""``hvbench cleanup``: remove what an hvbench killed by ``kill -9`` left behind."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console


def register(sub: Any) -> None:
    cleanup = sub.add_parser("cleanup", help="remove what a killed hvbench left behind",
                             epilog="examples:\n  hvbench cleanup --dry-run\n"
                                    "  hvbench cleanup",
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    cleanup.add_argument("--dry-run", action="store_true",
                         help="only list what would be removed; remove nothing")
    cleanup.set_defaults(handler=handle)


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Remove a killed hvbench's labs (namespaces, bridges, veths and the processes in
    them), CPU cgroups, scratch directories, fleet TLS bundles whose worker never started
    and stale run lock. Never touches anything
    a live hvbench or anyone else made. ``--dry-run`` lists them and removes nothing."""
    from hvbench.run.runner import remove_orphans

    done = remove_orphans(dry_run=args.dry_run)
    for line in done:
        out.print(line, markup=False, soft_wrap=True)
    if args.dry_run:
        found = sum(1 for line in done if line.startswith("would remove "))
        out.print(f"cleanup --dry-run: {found} leftovers would be removed; nothing was")
        return 0
    removed = sum(1 for line in done if line.startswith("removed "))
    out.print(f"cleanup: {removed} leftovers removed")
    return 0
