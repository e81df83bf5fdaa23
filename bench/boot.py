"""Boot benchmark: QEMU start -> guest agent answers ``guest-ping``, over N boots.

Usage: python bench/boot.py [--boots 10] [--machine q35] [--accel tcg]
                            [--boot-timeout 60] [--json]

Each boot is a fresh QemuPlatform (no disks, no NICs) whose launch() returns once the
agent has answered a guest-sync; the script then runs one command in the guest and
stops it. A boot that does not reach the agent within ``--boot-timeout`` counts as
failed (its console tail is printed) and the series goes on, so the script also measures
how often boots hang. It prints every boot, the failures, and the median, min, max and
standard deviation of the successful ones; it exits 1 if any boot failed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from hvbench.errors import GuestBootError
from hvbench.image.builder import build_image
from hvbench.model.spec import VmSpec
from hvbench.platforms.accel import choose_accel
from hvbench.platforms.qemu import QemuPlatform


def one_boot(spec: VmSpec, boot_timeout: float) -> dict[str, float]:
    guest = QemuPlatform(spec, name="hvbench-bootbench", boot_timeout=boot_timeout,
                         accel_choice=choose_accel(spec))
    started = time.monotonic()
    try:
        guest.launch()
        ready = time.monotonic() - started
        guest.exec(["true"], timeout=30)  # proves the guest runs commands, not only pings
        return {"boot_to_ping_s": ready, "qmp_s": guest.timings["qmp_s"]}
    finally:
        guest.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boots", type=int, default=10)
    parser.add_argument("--machine", default="q35")
    parser.add_argument("--accel", default="tcg")
    parser.add_argument("--boot-timeout", type=float, default=60.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    image = build_image()
    spec = VmSpec(machine=args.machine, accel=args.accel)
    boots = []
    failed = 0
    for index in range(args.boots):
        try:
            boots.append(one_boot(spec, args.boot_timeout))
        except GuestBootError as exc:
            failed += 1
            print(f"boot {index + 1:2d}: FAILED\n{exc}", file=sys.stderr)
            continue
        if not args.json:
            print(f"boot {index + 1:2d}: {boots[-1]['boot_to_ping_s']:.3f} s", file=sys.stderr)
    times = [b["boot_to_ping_s"] for b in boots]
    if not times:
        print(f"all {failed} boots failed", file=sys.stderr)
        return 1
    summary = {
        "machine": args.machine, "accel": args.accel, "image_key": image.key,
        "initrd_bytes": image.initrd.stat().st_size, "boots": len(times), "failed": failed,
        "median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
        "stdev_s": statistics.stdev(times) if len(times) > 1 else 0.0, "each_s": times,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{args.machine}/{args.accel}: median {summary['median_s']:.3f} s, "
              f"min {summary['min_s']:.3f} s, max {summary['max_s']:.3f} s, "
              f"sd {summary['stdev_s']:.3f} s over {len(times)} boots, {failed} failed "
              f"(initrd {summary['initrd_bytes'] / 1e6:.1f} MB)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
