"""Boot benchmark: QEMU start -> guest agent answers ``guest-ping``, over N boots.

Usage: python bench/boot.py [--boots 10] [--machine q35] [--accel tcg] [--json]

Each boot is a fresh QemuPlatform (no disks, no NICs) whose launch() returns once the
agent has answered a guest-sync; the script then times one more guest-ping and stops the
guest. It prints every boot and the median, min, max and standard deviation.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from hvbench.image.builder import build_image
from hvbench.model.spec import VmSpec
from hvbench.platforms.qemu import QemuPlatform


def one_boot(spec: VmSpec) -> dict[str, float]:
    guest = QemuPlatform(spec, name="hvbench-bootbench")
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
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    image = build_image()
    spec = VmSpec(machine=args.machine, accel=args.accel)
    boots = []
    for index in range(args.boots):
        boots.append(one_boot(spec))
        if not args.json:
            print(f"boot {index + 1:2d}: {boots[-1]['boot_to_ping_s']:.3f} s", file=sys.stderr)
    times = [b["boot_to_ping_s"] for b in boots]
    summary = {
        "machine": args.machine, "accel": args.accel, "image_key": image.key,
        "initrd_bytes": image.initrd.stat().st_size, "boots": len(times),
        "median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
        "stdev_s": statistics.stdev(times) if len(times) > 1 else 0.0, "each_s": times,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{args.machine}/{args.accel}: median {summary['median_s']:.3f} s, "
              f"min {summary['min_s']:.3f} s, max {summary['max_s']:.3f} s, "
              f"sd {summary['stdev_s']:.3f} s over {len(times)} boots "
              f"(initrd {summary['initrd_bytes'] / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
