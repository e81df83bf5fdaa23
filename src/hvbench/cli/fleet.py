"""``hvbench fleet init DIR --hosts h1,h2``: a fleet's certificate authority and the TLS
bundles of its hosts, scheduler and coordinator (docs/fleet.md, "Security");
``hvbench fleet install-bundle PARENT``: what ``run --hosts`` runs on each host over SSH
to install that host's bundle (read from stdin); ``hvbench fleet remove-bundle DIR``:
what it runs to remove one whose worker did not start."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console


def register(sub: Any) -> None:
    fleet = sub.add_parser("fleet", help="fleet certificates: a CA and per-host TLS bundles")
    fleet_sub = fleet.add_subparsers(dest="fleet_command", required=True, metavar="COMMAND")
    init = fleet_sub.add_parser(
        "init", help="make DIR's CA (once) and a TLS bundle DIR/NAME for each host, the "
                     "scheduler and the coordinator that has none yet")
    init.add_argument("directory", type=Path, metavar="DIR",
                      help="the fleet's certificate directory (created 0700)")
    init.add_argument("--hosts", default="", metavar="HOST,...",
                      help="the worker names (hvbench worker --name) to make bundles for")
    init.set_defaults(handler=handle_init)
    install = fleet_sub.add_parser(
        "install-bundle", help="(used by run --hosts over SSH) write the bundle read from "
                               "stdin into a new private directory under PARENT and print "
                               "its path")
    install.add_argument("parent", type=Path, metavar="PARENT", nargs="?",
                         help="default: the work directory ($HVBENCH_WORKDIR, else "
                              "/var/tmp/hvbench)")
    install.set_defaults(handler=handle_install)
    remove = fleet_sub.add_parser(
        "remove-bundle", help="(used by run --hosts over SSH) remove a bundle directory "
                              "install-bundle made (one without its marker is left alone)")
    remove.add_argument("directory", type=Path, metavar="DIR",
                        help="the bundle directory to remove (it must hold the install marker)")
    remove.set_defaults(handler=handle_remove)


def handle_init(args: argparse.Namespace, out: Console, err: Console) -> int:
    from hvbench.run.fleet_tls import init_fleet

    hosts = [h.strip() for h in args.hosts.split(",") if h.strip()]
    made = init_fleet(args.directory, hosts)
    root = args.directory
    for member in made:
        out.print(f"{root / member}: made", markup=False)
    if not made:
        out.print(f"{root}: every bundle exists already; nothing made", markup=False)
    err.print(f"copy {root}/HOST to each host (its key is the host's credential) and run "
              f"`hvbench worker --scheduler tls://ADDR:8786 --certs {root}/HOST --name "
              f"HOST`; keep {root / 'ca-key.pem'} on the coordinator only", markup=False,
              soft_wrap=True)
    return 0


def handle_install(args: argparse.Namespace, out: Console, err: Console) -> int:
    from hvbench.host.paths import work_dir
    from hvbench.run.fleet_tls import install

    parent = work_dir() if args.parent is None else args.parent
    out.print(str(install(sys.stdin.read(), parent)), markup=False, soft_wrap=True)
    return 0


def handle_remove(args: argparse.Namespace, out: Console, err: Console) -> int:
    from hvbench.run.fleet_tls import remove_installed

    removed = remove_installed(args.directory)
    out.print(f"{args.directory}: {'removed' if removed else 'not there'}", markup=False,
              soft_wrap=True)
    return 0
