"""Guest sampling cost: throughput with the guest sampler / without, paired.

Usage: python bench/guest_sampling_cost.py [--rounds 12] [--study FILE] [--json]
       [--micro-seconds 10]

One guest of ``bench/studies/guest-sampling.toml`` is booted once; its disk cell (fio,
libaio, 8 in flight) and its network cell (iperf3 to the host over a tap) are each run
``2 x rounds`` times through the same code the cells use (``disk.run_phase``,
``run_iperf3`` inside the phase monitors), with the guest sampler on and off in
alternation (ABAB, the order flipped every round: A B, B A, ...). Per round the ratio
on / off of the throughput; the figure is the mean ratio with a 95 % t interval over
the rounds. Target: >= 0.98.

``--micro-seconds S`` first compares the two ways of sampling inside an idle guest:
the sampler loop (started through the agent; the disk's files, no NIC) for S seconds
at its 2 Hz, and polling the same three files through the agent (guest-file-open,
-read, -close each) 10 times a second; each as guest CPU ticks spent (from the guest's
/proc/stat, less the idle guest's own) per sample, and the agent round trips' host wall
time per sample. From the loop's ticks it prints the sampler's share of one vCPU at
2 Hz: the most it can take from a cell whose vCPU is the bottleneck (it does no I/O but
to the guest's tmpfs), a bound the paired throughputs cannot resolve on a noisy host.

Holds the machine-wide guest lock (bench/machine_lock.py) while the guest runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from scipy import stats as sstats

from hvbench.kinds import install
from hvbench.kinds.disk import driver as disk
from hvbench.kinds.disk.spec import DiskWorkloadSpec
from hvbench.kinds.network.spec import NetworkWorkloadSpec
from hvbench.monitors.cpu import parse_proc_stat
from hvbench.monitors.guest import DEFAULT_GUEST_HZ, GuestSampler, guest_disk_name
from hvbench.monitors.session import monitors_for
from hvbench.platforms.base import Platform
from hvbench.platforms.kinds import platform_kind
from hvbench.platforms.qemu import QemuPlatform
from hvbench.run.cells.base import MonitorWindow
from hvbench.run.lab_session import LabSession
from hvbench.run.runner import load_study
from hvbench.workloads.iperf3 import run_iperf3

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine_lock import machine_lock

ROOT = Path(__file__).resolve().parent.parent
STUDY = ROOT / "bench" / "studies" / "guest-sampling.toml"


def busy_ticks(platform: Platform) -> int:
    """The guest's busy CPU ticks so far (all but idle and iowait)."""
    cpu = parse_proc_stat(platform.read_file("/proc/stat").decode())["cpu"]
    return sum(cpu) - cpu[3] - cpu[4]


def micro(platform: QemuPlatform, seconds: float) -> dict[str, Any]:
    """Guest CPU ticks (1/100 s) per sample: the sampler loop against agent polling."""
    device = guest_disk_name(platform)
    out: dict[str, Any] = {}
    before = busy_ticks(platform)
    time.sleep(seconds)
    idle = busy_ticks(platform) - before
    sampler = GuestSampler(platform, device, net=False)
    before = busy_ticks(platform)
    sampler.start()
    time.sleep(seconds)
    sampler.stop()
    ticks = busy_ticks(platform) - before
    samples = (sampler.window.raw if sampler.window else "").count("\nT ") + 1
    out["loop"] = {"samples": samples, "ticks_per_sample": (ticks - idle) / samples,
                   "idle_ticks": idle}
    files = ["/proc/uptime", f"/sys/block/{device}/stat", "/proc/stat"]
    polls = int(seconds * 10)
    before = busy_ticks(platform)
    started = time.monotonic()
    for _ in range(polls):
        for path in files:
            platform.read_file(path)  # guest-file-open, -read (x2 to see EOF), -close
    wall = time.monotonic() - started
    ticks = busy_ticks(platform) - before
    idle_share = idle * wall / seconds
    out["agent"] = {"samples": polls, "ticks_per_sample": (ticks - idle_share) / polls,
                    "host_wall_ms_per_sample": wall / polls * 1000.0}
    return out


def disk_round(platform: Platform, spec: DiskWorkloadSpec, target: disk.DiskTarget,
               sampling: bool) -> float:
    phase = spec.phase_list()[0]
    disk.before_phase(platform, spec, phase, target)
    monitors = monitors_for(platform, guest=sampling)
    with MonitorWindow(monitors):
        outcome = disk.run_phase(platform, spec, phase, target)
    return outcome.metrics["mb_s"][0]


def net_round(session: LabSession, platform: Platform, spec: NetworkWorkloadSpec,
              sampling: bool) -> float:
    monitors = monitors_for(platform, interfaces=session.interfaces(platform),
                            guest=sampling)
    outcome = run_iperf3(spec, session.platform_endpoint(platform), session.root_endpoint(),
                         window=MonitorWindow(monitors))
    return outcome.metrics["mbit_s"][0]


def ratio_ci(ratios: list[float]) -> dict[str, float]:
    mean = statistics.fmean(ratios)
    median = statistics.median(ratios)
    if len(ratios) < 2:
        return {"mean": mean, "median": median, "ci95_low": float("nan"),
                "ci95_high": float("nan")}
    half = sstats.t.ppf(0.975, len(ratios) - 1) * statistics.stdev(ratios) / len(ratios) ** 0.5
    return {"mean": mean, "median": median, "ci95_low": mean - half, "ci95_high": mean + half}


def vcpu_share(micro_result: dict[str, Any], hz: float = DEFAULT_GUEST_HZ) -> float:
    """The sampler's share of one vCPU at ``hz`` (ticks are 10 ms): what it can take
    from a cell whose vCPU is its bottleneck, the worst case for throughput; the
    sampler does no I/O of its own but to the guest's tmpfs."""
    return float(micro_result["loop"]["ticks_per_sample"]) * 0.01 * hz


def main() -> int:
    install()  # every workload kind, as the CLI does at start-up
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--study", default=str(STUDY))
    parser.add_argument("--micro-seconds", type=float, default=0.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    study = load_study(Path(args.study))
    cells = {c.workload.spec.kind: c for c in study.cells}
    dspec = cells["disk"].workload.spec
    nspec = cells["network"].workload.spec
    if not isinstance(dspec, DiskWorkloadSpec) or not isinstance(nspec, NetworkWorkloadSpec):
        raise SystemExit(f"{args.study}: expected one disk and one network workload")
    result: dict[str, Any] = {"study": args.study, "rounds": args.rounds}
    pairs: dict[str, list[tuple[float, float]]] = {"disk": [], "network": []}
    with machine_lock(), LabSession(study) as session:
        spec = cells["disk"].platform.spec
        platform = platform_kind(spec).build(
            spec, name="hvb-sampling-cost",
            wire=lambda vm: session.guest_spec(vm, cells["disk"].platform.name))
        platform.start()
        try:
            if args.micro_seconds > 0 and isinstance(platform, QemuPlatform):
                result["micro"] = micro(platform, args.micro_seconds)
            target = disk.prepare_target(platform, dspec)
            try:
                for r in range(args.rounds):
                    order = (True, False) if r % 2 == 0 else (False, True)
                    got = {flag: disk_round(platform, dspec, target, flag) for flag in order}
                    pairs["disk"].append((got[True], got[False]))
                    got = {flag: net_round(session, platform, nspec, flag) for flag in order}
                    pairs["network"].append((got[True], got[False]))
                    print(f"round {r + 1}: disk {pairs['disk'][-1]}, network "
                          f"{pairs['network'][-1]}", file=sys.stderr)
            finally:
                disk.release_target(platform, target)
        finally:
            platform.stop()
    for kind, values in pairs.items():
        ratios = [on / off for on, off in values if off > 0]
        result[kind] = {"pairs": values, "ratio": ratio_ci(ratios)}
    if "micro" in result:
        result["micro"]["vcpu_share_at_default_hz"] = vcpu_share(result["micro"])
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        if "micro" in result:
            print(f"micro: {json.dumps(result['micro'])}")
            share = vcpu_share(result["micro"])
            print(f"sampler at {DEFAULT_GUEST_HZ:g} Hz: {100 * share:.2f} % of one vCPU, so "
                  f"a vCPU-bound cell keeps >= {1 - share:.4f} of its throughput")
        for kind in ("disk", "network"):
            r = result[kind]["ratio"]
            print(f"{kind}: throughput with / without guest sampling = {r['mean']:.4f} "
                  f"[95 % CI {r['ci95_low']:.4f}, {r['ci95_high']:.4f}], median of the "
                  f"pair ratios {r['median']:.4f}, over {len(result[kind]['pairs'])} "
                  f"ABAB pairs (target >= 0.98)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
