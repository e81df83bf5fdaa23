"""``hvbench worker --scheduler ADDR [--certs DIR] [--name HOST] [--workdir DIR]
[--class CLASS]``: this host as a fleet worker (one Dask worker, one thread, the
``host`` resource) for ``hvbench run --scheduler ADDR``."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from hvbench.errors import SpecError

if TYPE_CHECKING:
    from hvbench.run.fleet import HostWorker

#: Dask's dask_spec starts an SSH host's worker by this module's name
#: (hvbench.run.fleet.WORKER_CLASS), so importing it registers the kinds first.
__all__ = ["HostWorker", "handle", "register"]


def __getattr__(name: str) -> Any:
    # HostWorker is a Dask Worker: resolved on first use (dask_spec's getattr) so that
    # importing the CLI does not import Dask distributed for every other command.
    if name == "HostWorker":
        from hvbench.run.fleet import HostWorker

        return HostWorker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register(sub: Any) -> None:
    worker = sub.add_parser("worker", help="serve fleet runs: a Dask worker for this host")
    worker.add_argument("--scheduler", required=True, metavar="ADDR",
                        help="the Dask scheduler, e.g. tcp://10.0.0.1:8786")
    worker.add_argument("--name", default=os.uname().nodename,
                        help="this host's name in results (default: its hostname)")
    worker.add_argument("--workdir", type=Path, metavar="DIR",
                        help="this worker's work directory (guest images, native test "
                             "files, its run lock; default: $HVBENCH_WORKDIR, else "
                             "/var/tmp/hvbench); two workers on one machine need two")
    worker.add_argument("--class", dest="host_class", default="", metavar="CLASS",
                        help="this host's class for `hvbench run --scheduler ADDR "
                             "--spread` (hosts of one class share the repetitions)")
    worker.add_argument("--connect-timeout", type=float, default=30.0, metavar="S",
                        help="give up with an error when the scheduler has not accepted "
                             "this worker after S seconds (default: %(default)g)")
    worker.add_argument("--certs", type=Path, metavar="DIR",
                        help="this host's TLS bundle (DIR/HOST of `hvbench fleet init DIR`) "
                             "for a tls:// scheduler")
    worker.add_argument("--insecure", action="store_true",
                        help="allow a plaintext tcp:// scheduler that is not on loopback "
                             "(whoever reaches it runs code as root here)")
    worker.set_defaults(handler=handle)


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    from hvbench.run.fleet import serve_worker
    from hvbench.run.fleet_tls import plaintext_refusal

    refusal = plaintext_refusal(args.scheduler, certs=args.certs is not None,
                                insecure=args.insecure)
    if refusal:
        raise SpecError(refusal)
    err.print(f"hvbench worker {args.name}: serving {args.scheduler}", markup=False)
    serve_worker(args.scheduler, args.name,
                 None if args.workdir is None else args.workdir.resolve(), args.host_class,
                 timeout=args.connect_timeout,
                 certs=None if args.certs is None else args.certs.resolve())
    return 0
