"""Sampler cost: CPU time of the sampling thread as % of one core.

Usage: python bench/sampler_cost.py [--seconds 60] [--hz 10] [--json]

Samples what a guest measurement samples (the work directory's block device, host CPU
and every thread of a live QEMU process) for the given time, and reads the sampling
thread's own CPU time (``time.thread_time`` inside the thread). The QEMU process is a
paused machine (``-S``) with 2 vCPUs and an iothread, killed at the end.
Target: <= 0.5 % of one core at 10 Hz.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time

from hvbench.host.paths import work_dir
from hvbench.monitors.sampler import (
    DiskStatsSampler,
    HostCpuSampler,
    Monitor,
    MonitorSet,
    ThreadCpuSampler,
    backing_device,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--hz", type=float, default=10.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="hvb-cost-")
    qemu = subprocess.Popen(
        ["qemu-system-x86_64", "-name", "hvbench-cost,debug-threads=on", "-machine", "q35",
         "-accel", "tcg", "-smp", "2", "-nodefaults", "-display", "none", "-S",
         "-object", "iothread,id=iothread0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)
        device = backing_device(work_dir())
        monitors: list[Monitor] = [HostCpuSampler(), ThreadCpuSampler(qemu.pid)]
        if device:
            monitors.insert(0, DiskStatsSampler(device))
        sampler = MonitorSet(monitors, hz=args.hz)
        sampler.start()
        time.sleep(args.seconds)
        result = sampler.stop()
    finally:
        qemu.kill()
        qemu.wait()
        shutil.rmtree(scratch, ignore_errors=True)
    pct = sampler.thread_cpu_s / result.seconds * 100.0
    summary = {"seconds": result.seconds, "hz": args.hz, "samples": result.samples,
               "thread_cpu_s": sampler.thread_cpu_s, "pct_of_one_core": pct,
               "threads_sampled": result.summary.get("qemu.total.threads"),
               "errors": result.errors}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"sampler: {result.samples} samples in {result.seconds:.1f} s at {args.hz:g} Hz, "
              f"{sampler.thread_cpu_s * 1000:.1f} ms CPU = {pct:.3f} % of one core "
              f"(target <= 0.5 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
