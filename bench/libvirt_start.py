"""libvirt's own start time, both paths: ``createXML`` against ``defineXML`` then start.

Usage: python bench/libvirt_start.py [--rounds 3] [--uri qemu:///system] [--json]

Each round starts the tiny domain (32 MiB, no devices, paused: no guest code runs) once
through each path, alternating which goes first, and destroys (and undefines) it at once
(:func:`hvbench.platforms.libvirt_start.time_tiny_start`). It prints every round and the
median of each figure, and the cause ``hvbench doctor`` would name. libvirtd must answer
at ``--uri``; with ``--start-daemons`` the script starts ``virtlogd -d`` and
``libvirtd -d`` where they do not run and stops only those it started (the integration
tests' helper). Wrap it in the shared lock on a shared machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path

from hvbench.model.libvirt_xml import caps_have_kvm
from hvbench.platforms.libvirt import DEFAULT_URI, connect
from hvbench.platforms.libvirt_start import slow_cause, time_tiny_start, user_kvm_access


@contextlib.contextmanager
def _daemons(start: bool) -> Iterator[None]:
    if not start:
        yield
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.integration.libvirt_daemons import running_daemons  # noqa: PLC0415 - only with --start-daemons

    with running_daemons():
        yield


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--uri", default=DEFAULT_URI)
    parser.add_argument("--start-daemons", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rounds: list[dict[str, float]] = []
    with _daemons(args.start_daemons):
        conn = connect(args.uri)
        try:
            for index in range(args.rounds):
                row: dict[str, float] = {}
                for transient in ((True, False) if index % 2 == 0 else (False, True)):
                    row.update(time_tiny_start(conn, transient=transient))
                rounds.append(row)
                print(f"round {index + 1}: createXML {row['create_s']:.2f} s; define "
                      f"{row['define_s']:.2f} s + start {row['start_s']:.2f} s", flush=True)
            caps_kvm = caps_have_kvm(conn.getCapabilities())
        finally:
            conn.close()
    medians = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    cause = slow_cause(medians["define_s"], caps_kvm, user_kvm_access())
    if args.json:
        print(json.dumps({"rounds": rounds, "median": medians, "cause": cause}, indent=2))
    else:
        print(f"median: createXML {medians['create_s']:.2f} s; define "
              f"{medians['define_s']:.2f} s + start {medians['start_s']:.2f} s "
              f"= {medians['define_s'] + medians['start_s']:.2f} s")
        print(f"cause: {cause or 'not slow'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
