"""CPU weights: the CPU shares three busy loops get for the seed's weight sets.

Usage (root): python bench/weights.py [--seconds 3] [--cpus 0] [--json out.json]

Seed 003 §6 set Xen credit-scheduler weights Dom0:VM1:VM2 = 0.5:1:1, 1:1:1 and 2:1:1.
Here three busy loops (``python3 -c "while True: pass"``) stand for the three domains,
each in its own group of :class:`hvbench.host.cgroups.CpuCgroups`, all pinned to the same
CPUs (``--cpus``) so they compete. For each set the achieved share of each loop
(its cgroup's CPU seconds over the total) is printed next to the asked share
(weight over the sum of weights). Ends with the largest deviation in percentage points.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hvbench.host.cgroups import CgroupSupport, CpuCgroups, GroupSettings, detect_cpu_cgroups

WEIGHT_SETS = ((0.5, 1.0, 1.0), (1.0, 1.0, 1.0), (2.0, 1.0, 1.0))
NAMES = ("dom0", "vm1", "vm2")
SETTLE_S = 0.3


def _measure(weights: tuple[float, ...], cpus: str, seconds: float,
             support: CgroupSupport) -> dict[str, Any]:
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in weights]
    try:
        with CpuCgroups(f"bench{os.getpid()}", support=support) as groups:
            for name, weight, proc in zip(NAMES, weights, procs, strict=True):
                groups.add_group(name, GroupSettings(weight=weight, cpus=cpus))
                groups.move_threads(name, [proc.pid])
            time.sleep(SETTLE_S)
            before = [groups.usage_s(n) for n in NAMES]
            time.sleep(seconds)
            used = [groups.usage_s(n) - b for n, b in zip(NAMES, before, strict=True)]
            written = {n: g["written"] for n, g in groups.describe()["groups"].items()}
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    total = sum(used) or 1.0
    return {"weights": list(weights), "written": written,
            "asked_pct": [100 * w / sum(weights) for w in weights],
            "got_pct": [100 * u / total for u in used], "cpu_s": used}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--cpus", default="0", help="CPUs every group is pinned to")
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args()
    support = detect_cpu_cgroups()
    if support.version is None:
        raise SystemExit(f"no CPU cgroups: {support.reason}")
    print(support.reason)
    results = [_measure(w, args.cpus, args.seconds, support) for w in WEIGHT_SETS]
    worst = 0.0
    for r in results:
        pairs = [f"{n} {a:5.1f}%->{g:5.1f}%"
                 for n, a, g in zip(NAMES, r["asked_pct"], r["got_pct"], strict=True)]
        worst = max([worst, *(abs(a - g) for a, g in zip(r["asked_pct"], r["got_pct"],
                                                         strict=True))])
        print(":".join(f"{w:g}" for w in r["weights"]), " ".join(pairs))
    print(f"largest deviation from the asked share: {worst:.1f} percentage points")
    if args.json:
        args.json.write_text(json.dumps({"version": support.version, "results": results},
                                        indent=1))


if __name__ == "__main__":
    main()
