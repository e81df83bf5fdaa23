"""``hvbench worker --scheduler ADDR [--name HOST]``: this host as a fleet worker (one
Dask worker, one thread, the ``host`` resource) for ``hvbench run --scheduler ADDR``."""

from __future__ import annotations

import argparse
import os
from typing import Any

from rich.console import Console


def register(sub: Any) -> None:
    worker = sub.add_parser("worker", help="serve fleet runs: a Dask worker for this host")
    worker.add_argument("--scheduler", required=True, metavar="ADDR",
                        help="the Dask scheduler, e.g. tcp://10.0.0.1:8786")
    worker.add_argument("--name", default=os.uname().nodename,
                        help="this host's name in results (default: its hostname)")
    worker.set_defaults(handler=handle)


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    from hvbench.run.fleet import serve_worker

    err.print(f"hvbench worker {args.name}: serving {args.scheduler}", markup=False)
    serve_worker(args.scheduler, args.name)
    return 0
