"""Fidelity: hvbench's native iozone write/read vs the same fio job run by hand.

Usage: python bench/fidelity.py [--rounds 5] [--size 1G] [--record 16M] [--ramdisk] [--aa]
                               [--json]

Each round runs, in alternating order, (a) hvbench's iozone profile natively through the
runner (write and read phases, O_DIRECT, stored in a scratch database) and (b) the
identical fio command lines run directly with subprocess, with the host cache dropped
before each phase as hvbench does, in a fresh directory of the work directory as
hvbench's native platform uses. (A fresh top-level directory lands in another ext4
block group, so the file sits elsewhere on the disk; on a virtual disk whose host caches
its backing file, reusing one directory on one side only biased reads by ~15 %.) The
ratio of the medians (hvbench / by hand) per phase is the fidelity. Target: >= 0.98.

``--ramdisk`` (root) runs both on an ext4 filesystem on a loop device backed by
/dev/shm: a stable medium, where run-to-run noise of a virtual disk cannot hide a
difference, and where any overhead of hvbench shows most (the I/O itself is fastest).

``--aa`` is the A/A control: both sides run by hand, in the same alternating order.
Its ratio and interval are the medium's own noise floor: how far from 1 two identical
measurements land here, which bounds what the real comparison can show.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hvbench.analysis.stats import median_ratio_ci95
from hvbench.host.caches import drop_host_caches
from hvbench.host.paths import work_dir
from hvbench.kinds import install
from hvbench.kinds.disk.driver import DiskTarget, phase_job
from hvbench.kinds.disk.spec import DiskWorkloadSpec
from hvbench.model.study import parse_study
from hvbench.run.runner import run_study
from hvbench.store.database import Store
from hvbench.workloads.fio import parse_fio_json

STUDY = """
[study]
name = "fidelity"
repetitions = 1
seed = {seed}

[[platform]]
kind = "native"

[[workload]]
name = "iozone"
profile = "iozone"
phases = ["write", "read"]
file_size = "{size}"
record_size = "{record}"
direct = true
"""


def by_hand(spec: DiskWorkloadSpec, parent: Path) -> dict[str, float]:
    """The same fio jobs, run directly in a fresh directory under ``parent``; MB/s per
    phase."""
    directory = Path(tempfile.mkdtemp(prefix="hand-", dir=parent))
    try:
        return _by_hand_in(spec, directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _by_hand_in(spec: DiskWorkloadSpec, directory: Path) -> dict[str, float]:
    target = DiskTarget(str(directory / "hvbench.dat"), str(directory), None)
    out = {}
    for phase in ("write", "read"):
        if phase == "write":
            Path(target.path).unlink(missing_ok=True)
        drop_host_caches()
        argv = phase_job(spec, phase, target).argv()
        text = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        out[phase] = sum(r.mb_per_s for r in parse_fio_json(text))
    Path(target.path).unlink(missing_ok=True)
    return out


def through_hvbench(text: str, db: Path) -> dict[str, float]:
    study = parse_study(text, "fidelity.toml", 0)
    with Store(db) as store:
        outcome = run_study(study, store)
        rows = store.measurements(outcome.run_id)
    return {r.phase: r.value for r in rows if r.metric == "mb_s"}


@contextlib.contextmanager
def ramdisk(size: str) -> Iterator[Path]:
    """An ext4 filesystem on a loop device over a /dev/shm file, mounted; removed after."""
    backing = Path(tempfile.mkstemp(prefix="hvbench-fidelity-", dir="/dev/shm")[1])
    mount = Path(tempfile.mkdtemp(prefix="hvbench-fidelity-"))
    loop = ""
    try:
        subprocess.run(["truncate", "-s", size, str(backing)], check=True)
        loop = subprocess.run(["losetup", "--find", "--show", str(backing)], check=True,
                              capture_output=True, text=True).stdout.strip()
        subprocess.run(["mkfs.ext4", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0",
                        loop], check=True)
        subprocess.run(["mount", loop, str(mount)], check=True)
        try:
            yield mount
        finally:
            subprocess.run(["umount", str(mount)], check=True)
    finally:
        if loop:
            subprocess.run(["losetup", "-d", loop], check=False)
        backing.unlink(missing_ok=True)
        mount.rmdir()


def main() -> int:
    install()  # every workload kind, as the CLI does at start-up
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", default="1G")
    parser.add_argument("--record", default="16M")
    parser.add_argument("--ramdisk", action="store_true",
                        help="run on ext4 over a /dev/shm-backed loop device (root)")
    parser.add_argument("--aa", action="store_true",
                        help="A/A control: by hand on both sides (the medium's noise)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        if args.ramdisk:
            os.environ["HVBENCH_WORKDIR"] = str(stack.enter_context(ramdisk("3G")))
        summary = measure(args)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        first = "by hand (A)" if args.aa else "hvbench"
        for phase, s in summary.items():
            print(f"{phase}: {first} {s['hvbench_median_mb_s']:.1f} MB/s, by hand "
                  f"{s['by_hand_median_mb_s']:.1f} MB/s, ratio {s['ratio']:.3f} "
                  f"(bootstrap 95 % CI {s['ratio_ci95'][0]:.3f}-{s['ratio_ci95'][1]:.3f}; "
                  "target >= 0.98)")
    return 0


def measure(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Interleaved rounds of both sides; medians and their ratio per phase."""
    scratch = Path(tempfile.mkdtemp(prefix="fidelity-", dir=work_dir()))
    hv: dict[str, list[float]] = {"write": [], "read": []}
    hand: dict[str, list[float]] = {"write": [], "read": []}
    try:
        # Round -1 warms both sides up (the first I/O after start-up is slow on a
        # virtual disk) and is not counted.
        for rnd in range(-1, args.rounds):
            text = STUDY.format(seed=rnd + 1, size=args.size, record=args.record)
            spec = parse_study(text, "fidelity.toml", 0).workloads[0].spec
            if not isinstance(spec, DiskWorkloadSpec):
                raise SystemExit("internal: fidelity study lost its workload")
            # Alternate which side goes first, so drift does not favour one of them.
            for side in ((0, 1) if rnd % 2 == 0 else (1, 0)):
                result = (through_hvbench(text, scratch / f"r{rnd + 1}.db")
                          if side == 0 and not args.aa else by_hand(spec, work_dir()))
                for phase in ("write", "read"):
                    if rnd >= 0:
                        (hv if side == 0 else hand)[phase].append(result[phase])
    finally:
        subprocess.run(["rm", "-rf", str(scratch)], check=True)
    return {phase: _summary(hv[phase], hand[phase]) for phase in ("write", "read")}


def _summary(hv: list[float], hand: list[float]) -> dict[str, Any]:
    """Medians, their ratio, and a 95 % bootstrap interval of that ratio (the noise of
    the medium decides how close to 1 a ratio can be shown to be)."""
    return {"hvbench_median_mb_s": statistics.median(hv),
            "by_hand_median_mb_s": statistics.median(hand),
            "ratio": statistics.median(hv) / statistics.median(hand),
            "ratio_ci95": list(median_ratio_ci95(hv, hand)),
            "hvbench": hv, "by_hand": hand}


if __name__ == "__main__":
    sys.exit(main())
