"""``hvbench cleanup``: remove what an hvbench killed by ``kill -9`` left behind."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console


def register(sub: Any) -> None:
    cleanup = sub.add_parser("cleanup", help="remove what a killed hvbench left behind")
    cleanup.set_defaults(handler=handle)


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Remove a killed hvbench's labs (namespaces, bridges, veths and the processes in
    them), CPU cgroups, scratch directories and stale run lock. Never touches anything
    a live hvbench or anyone else made."""
    from hvbench.run.runner import remove_orphans

    done = remove_orphans()
    for line in done:
        out.print(line, markup=False, soft_wrap=True)
    removed = sum(1 for line in done if line.startswith("removed "))
    out.print(f"cleanup: {removed} leftovers removed")
    return 0
