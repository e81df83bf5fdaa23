"""Lab overhead: iperf3 TCP through an unshaped net lab vs over a bare veth pair.

Usage (root): python bench/lab_overhead.py [--rounds 7] [--seconds 3] [--json]

(a) hvbench's lab: the root namespace -> a lab host, through the lab bridge and the
host's veth (``NetLab``, one unshaped host, ``iperf3 -s`` spawned in it).
(b) by hand: the same iperf3 client over a bare veth pair between the root namespace
and a network namespace, no bridge, built here with plain ``ip`` commands.

Each round runs both, in alternating order; the figure is median(a) / median(b), with
the median of the per-round ratios a/b beside it (less sensitive to the drifting load of
a shared machine). Target: >= 0.95. Both iperf3 servers stay up during the whole run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

from hvbench.analysis.stats import median_ratio_ci95
from hvbench.model.lab import LabHostSpec, LabSpec
from hvbench.netlab import NetLab, names
from hvbench.netlab.lab import used_networks
from hvbench.platforms.process import BackgroundProcess, tcp_port_open

PORT = 5201


def iperf3_argv(address: str, seconds: float) -> list[str]:
    return ["iperf3", "-c", address, "-p", str(PORT), "-t", f"{seconds:g}", "-J"]


def goodput(address: str, seconds: float) -> float:
    """Receiver-side TCP goodput in Mbit/s of one iperf3 run from the root namespace."""
    out = subprocess.run(iperf3_argv(address, seconds), capture_output=True, text=True,
                         check=True, timeout=seconds + 30).stdout
    return float(json.loads(out)["end"]["sum_received"]["bits_per_second"]) / 1e6


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, timeout=10)


@contextlib.contextmanager
def bare_veth() -> Iterator[str]:
    """A veth pair root <-> a namespace (no bridge), with iperf3 -s in the namespace;
    yields the namespace end's address. Removed on exit."""
    tag = names.random_tag()
    netns, veth = f"hvb-bare{tag}", f"hvb-r{tag}"
    subnet = names.choose_subnet(used_networks(), start=int(tag, 16) % 256)
    if subnet is None:
        raise SystemExit("no free /24 for the bare veth pair")
    plan = names.AddressPlan(subnet)
    peer = plan.lab_host_address(0)
    try:
        _ip("netns", "add", netns)
        _ip("-n", netns, "link", "set", "lo", "up")
        _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
        _ip("addr", "add", plan.with_prefix(plan.bridge_address), "dev", veth)
        _ip("link", "set", veth, "up")
        _ip("-n", netns, "addr", "add", plan.with_prefix(peer), "dev", "eth0")
        _ip("-n", netns, "link", "set", "eth0", "up")
        with BackgroundProcess(["iperf3", "-s", "-p", str(PORT)], name="bare iperf3",
                               netns=netns) as server:
            _wait_port(server, peer)
            yield peer
    finally:
        subprocess.run(["ip", "link", "del", veth], check=False, capture_output=True)
        subprocess.run(["ip", "netns", "del", netns], check=False, capture_output=True)


def _wait_port(server: BackgroundProcess, address: str) -> None:
    deadline = time.monotonic() + 10
    while not tcp_port_open(address, PORT):
        if not server.is_running() or time.monotonic() > deadline:
            raise SystemExit(f"iperf3 server did not come up:\n{server.log_tail()}")
        time.sleep(0.02)


def measure(rounds: int, seconds: float) -> dict[str, Any]:
    lab_runs: list[float] = []
    bare_runs: list[float] = []
    with NetLab(LabSpec(hosts=(LabHostSpec(name="a"),))) as lab, bare_veth() as bare:
        host = lab.host("a")
        host.spawn(["iperf3", "-s", "-p", str(PORT)], name="lab iperf3",
                   ready=lambda: tcp_port_open(host.address, PORT))
        goodput(host.address, 1)  # warm-up, not counted
        goodput(bare, 1)
        for rnd in range(rounds):
            order = ("lab", "bare") if rnd % 2 == 0 else ("bare", "lab")
            for side in order:
                if side == "lab":
                    lab_runs.append(goodput(host.address, seconds))
                else:
                    bare_runs.append(goodput(bare, seconds))
        commands = {"lab": iperf3_argv(host.address, seconds),
                    "bare": iperf3_argv(bare, seconds)}
    return {"lab_mbit_s": lab_runs, "bare_mbit_s": bare_runs,
            "ratio_ci95": list(median_ratio_ci95(lab_runs, bare_runs)),
            "lab_median": statistics.median(lab_runs),
            "bare_median": statistics.median(bare_runs),
            "ratio": statistics.median(lab_runs) / statistics.median(bare_runs),
            # Each round's two runs are next to each other in time: their ratio cancels
            # the slow drift of a shared machine's load.
            "paired_ratio_median": statistics.median(
                a / b for a, b in zip(lab_runs, bare_runs, strict=True)),
            "commands": {k: " ".join(v) for k, v in commands.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.rounds, args.seconds)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"lab (bridge + veth): median {result['lab_median']:.0f} Mbit/s "
          f"{[round(x) for x in result['lab_mbit_s']]}")
    print(f"bare veth pair:      median {result['bare_median']:.0f} Mbit/s "
          f"{[round(x) for x in result['bare_mbit_s']]}")
    low, high = result["ratio_ci95"]
    print(f"ratio lab / bare: {result['ratio']:.3f} of the medians (bootstrap 95 % CI "
          f"{low:.3f}-{high:.3f}), {result['paired_ratio_median']:.3f} median of the "
          "rounds' ratios (target >= 0.95)")
    print(f"commands: lab: {result['commands']['lab']}; bare: {result['commands']['bare']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
