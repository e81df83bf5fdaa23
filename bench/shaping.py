"""Shaping accuracy: TCP goodput over 100 Mbit/s and 1 Gbit/s lab links.

Usage (root): python bench/shaping.py [--rounds 5] [--seconds 4] [--json]

One NetLab with two hosts, ``m100`` (rate = "100mbit") and ``g1`` (rate = "1gbit"),
each running ``iperf3 -s``. Each round runs ``iperf3 -c HOST -t SECONDS -O 1 -J`` to
both hosts, in both directions (``-R``: the host sends), in an order that alternates
between rounds; the figures are the medians of the receiver-side goodput. Targets:
94-100 Mbit/s (TCP over a 100 Mbit/s link carries at most 1448/1514 = 95.6 % of it)
and >= 930 Mbit/s. An unshaped host's goodput is printed for reference.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import sys
from typing import Any

from hvbench.model.lab import LabHostSpec, LabSpec
from hvbench.netlab import NetLab
from hvbench.platforms.process import tcp_port_open

PORT = 5201
HOSTS = (LabHostSpec(name="m100", rate="100mbit"), LabHostSpec(name="g1", rate="1gbit"),
         LabHostSpec(name="free"))
TARGETS = {"m100": (94.0, 100.0), "g1": (930.0, 1000.0), "free": (0.0, float("inf"))}


def iperf3_argv(address: str, seconds: float, reverse: bool) -> list[str]:
    argv = ["iperf3", "-c", address, "-p", str(PORT), "-t", f"{seconds:g}", "-O", "1", "-J"]
    return [*argv, "-R"] if reverse else argv


def goodput(argv: list[str], seconds: float) -> float:
    out = subprocess.run(argv, capture_output=True, text=True, check=True,
                         timeout=seconds + 30).stdout
    return float(json.loads(out)["end"]["sum_received"]["bits_per_second"]) / 1e6


def measure(rounds: int, seconds: float) -> dict[str, Any]:
    runs: dict[str, list[float]] = {}
    with NetLab(LabSpec(hosts=HOSTS)) as lab:
        for host in lab.hosts.values():
            host.spawn(["iperf3", "-s", "-p", str(PORT)], name=f"iperf3 on {host.name}",
                       ready=functools.partial(tcp_port_open, host.address, PORT))
        cases = [(h, rev) for h in lab.hosts.values() for rev in (False, True)]
        for rnd in range(rounds):
            for host, reverse in cases if rnd % 2 == 0 else reversed(cases):
                key = f"{host.name}{' reverse' if reverse else ''}"
                argv = iperf3_argv(host.address, seconds, reverse)
                runs.setdefault(key, []).append(goodput(argv, seconds))
        commands = {h.name: " ".join(iperf3_argv(h.address, seconds, False))
                    for h in lab.hosts.values()}
    medians = {k: statistics.median(v) for k, v in runs.items()}
    verdicts = {k: TARGETS[k.split()[0]][0] <= m <= TARGETS[k.split()[0]][1]
                for k, m in medians.items()}
    return {"runs_mbit_s": runs, "medians": medians, "within_target": verdicts,
            "commands": commands}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.rounds, args.seconds)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for key, median in result["medians"].items():
        low, high = TARGETS[key.split()[0]]
        target = "reference" if key.startswith("free") else f"target {low:g}-{high:g}"
        ok = "" if key.startswith("free") else (
            " ok" if result["within_target"][key] else " MISSED")
        runs = [round(x, 1) for x in result["runs_mbit_s"][key]]
        print(f"{key:14s} median {median:8.1f} Mbit/s ({target}){ok}  {runs}")
    for name, command in result["commands"].items():
        print(f"command ({name}): {command} [-R]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
