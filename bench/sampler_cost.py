"""Sampler cost: the CPU time of the monitors' sampling thread, as % of one core.

Usage: python bench/sampler_cost.py [--seconds 60] [--hz 10] [--dir /var/tmp]
       [--json out.json]

Runs the monitor set of a guest measurement (the block device of ``--dir``, host CPU,
and every thread of a live QEMU process: a paused ``-S`` TCG machine with 2 vCPUs and
an iothread, killed at the end) for ``--seconds`` and reports the sampling thread's CPU
time, measured twice: ``time.thread_time()`` inside the thread, and the thread's
utime+stime from ``/proc/self/task/TID/stat`` (tick resolution). Also reports the
time ``stop()`` takes, when the samples are parsed and the metrics computed (outside
the measured window). Target: <= 0.5 % of one core at 10 Hz.
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

from hvbench.monitors import (
    DiskStatsSampler,
    HostCpuSampler,
    Monitor,
    MonitorSet,
    ThreadCpuSampler,
)

TARGET_PCT = 0.5
QEMU_ARGV = ["qemu-system-x86_64", "-name", "hvbench-cost,debug-threads=on", "-machine",
             "q35", "-accel", "tcg", "-smp", "2", "-nodefaults", "-display", "none", "-S",
             "-object", "iothread,id=iothread0"]


def _thread_ticks(tid: int) -> int:
    """utime+stime (clock ticks) of one thread of this process."""
    text = Path(f"/proc/self/task/{tid}/stat").read_text()
    fields = text[text.rfind(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def _measure(monitors: list[Monitor], hz: float, seconds: float) -> dict[str, Any]:
    sampler = MonitorSet(monitors, hz=hz)
    sampler.start()
    if sampler.thread_id is None:
        raise SystemExit("the sampling thread did not start")
    ticks0 = _thread_ticks(sampler.thread_id)
    time.sleep(seconds)
    ticks1 = _thread_ticks(sampler.thread_id)  # before stop(): the thread still exists
    stop_started = time.perf_counter()
    result = sampler.stop()
    stop_s = time.perf_counter() - stop_started
    proc_s = (ticks1 - ticks0) / os.sysconf("SC_CLK_TCK")
    return {
        "seconds": result.seconds, "hz": hz, "samples": result.samples,
        "thread_cpu_s": result.sampler_cpu_s, "pct_of_one_core": result.sampler_cpu_pct,
        "proc_stat_cpu_s": proc_s, "proc_stat_pct": proc_s / result.seconds * 100.0,
        "us_per_sample": result.sampler_cpu_s / max(1, result.samples - 2) * 1e6,
        "stop_s": stop_s,
        "threads_sampled": result.summary.get("qemu.total.threads"),
        "monitors": [m.name for m in monitors], "errors": result.errors,
        "target_pct": TARGET_PCT, "ok": result.sampler_cpu_pct <= TARGET_PCT,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--hz", type=float, default=10.0)
    parser.add_argument("--dir", type=Path, default=Path("/var/tmp"),
                        help="directory whose block device is sampled")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    qemu = subprocess.Popen(QEMU_ARGV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)  # let QEMU create its threads
        monitors: list[Monitor] = [DiskStatsSampler.for_path(args.dir), HostCpuSampler(),
                                   ThreadCpuSampler(qemu.pid)]
        figures = _measure(monitors, args.hz, args.seconds)
    finally:
        qemu.kill()
        qemu.wait()
    print(f"sampler: {figures['samples']} samples in {figures['seconds']:.1f} s at "
          f"{args.hz:g} Hz of {', '.join(figures['monitors'])} "
          f"({figures['threads_sampled']:.0f} QEMU threads): "
          f"{figures['thread_cpu_s'] * 1000:.1f} ms CPU = {figures['pct_of_one_core']:.3f} % "
          f"of one core ({figures['us_per_sample']:.0f} us/sample; /proc says "
          f"{figures['proc_stat_pct']:.2f} %), target <= {TARGET_PCT} %; "
          f"stop() took {figures['stop_s'] * 1000:.0f} ms")
    if figures["errors"]:
        print(f"errors: {figures['errors']}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if figures["ok"] and not figures["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
