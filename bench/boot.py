"""Boot benchmark: where a guest's boot goes, next to the limit measured in the same run.

Usage: python bench/boot.py [--boots 10] [--machine q35] [--accel tcg]
                            [--boot-timeout 60] [--json]

Each round boots two guests on the same QEMU configuration (a QemuPlatform without
disks or NICs, the image's kernel and kernel command line), alternately:

- the *limit*: the image's kernel with a trivial initramfs whose /init prints one line
  (with the guest's uptime) and powers off (hvbench.image.limit); its time is QEMU start
  to that line on the serial console;
- the *guest*: the real image, up to the guest agent's first answer (``boot_s``, what
  every cell reports), then ``dmesg`` and the clocksource are read through the agent.

The breakdown joins three clocks. The host's (monotonic, from the start of launch()):
QEMU start, QMP answering, the agent's first answer, and the time each console line
appeared (read every 2 ms). The guest's own clock (uptime, 0 when the kernel's clock
starts): dmesg's "Run /init" and the uptime each hvbench init line carries. The bridge:
the first console line's arrival minus its uptime is when the kernel's clock started
on the host's clock; the time from QMP to there is the firmware and the kernel's
earliest set-up. The script prints how fast the guest's clock ran against the host's
between the first and last console lines, so a drifting bridge shows.

A boot that does not reach the agent (or the line) within ``--boot-timeout`` counts as
failed (its console tail is printed) and the series goes on. Exits 1 if any boot failed.
The target (README): median guest boot <= 1.15 x the median limit.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hvbench.errors import GuestBootError, GuestError
from hvbench.image.builder import GuestImage, build_image, default_cache_dir
from hvbench.image.limit import LIMIT_MARKER, write_limit_initramfs
from hvbench.kinds.lifecycle.driver import ConsoleWatch, guest_uptime
from hvbench.model.qemu_argv import CURRENT_CLOCKSOURCE
from hvbench.model.spec import VmSpec
from hvbench.platforms.accel import choose_accel
from hvbench.platforms.qemu import AccelChoice, QemuPlatform

TARGET_RATIO = 1.15
_RUN_INIT_RE = re.compile(r"^\[\s*(\d+\.\d+)\] Run /init as init process", re.MULTILINE)
_CLOCKSOURCE = CURRENT_CLOCKSOURCE
_LINE_POLL_S = 0.005

Steps = list[tuple[str, float]]


@dataclasses.dataclass
class Boot:
    """One boot: its total (launch start to ready), its steps in order, and facts."""

    total_s: float
    steps: Steps
    facts: dict[str, Any]


def uptime_lines(lines: Sequence[tuple[float, str]], until: float) -> list[tuple[float,
                                                                                float, str]]:
    """(host time, guest uptime, text after the uptime) of every init line that carries
    an uptime and appeared on the console before host time ``until``."""
    out = []
    for seen, line in lines:
        up = guest_uptime(line)
        if up is not None and seen <= until:
            out.append((seen, up, line.split("] ", 1)[-1]))
    return out


def host_steps(guest: QemuPlatform, t0: float, first: tuple[float, float, str]) -> tuple[
        Steps, float]:
    """QEMU start to QMP, and QMP to the kernel clock's start (the bridge); returns the
    steps and the host time (since ``t0``) at which the kernel's clock started."""
    qmp_at = guest.timings["spawned_s"] + guest.timings["qmp_s"]
    kernel_zero = first[0] - t0 - first[1]
    return [("launch: prepare, spawn QEMU", guest.timings["spawned_s"]),
            ("QEMU start -> QMP answers", guest.timings["qmp_s"]),
            ("QMP -> kernel clock 0 (firmware, earliest kernel)", kernel_zero - qmp_at)], \
        kernel_zero


def clock_rate(marks: Sequence[tuple[float, float, str]]) -> float | None:
    """Host seconds per guest second between the first and last console lines."""
    if len(marks) < 2 or marks[-1][1] - marks[0][1] < 0.05:
        return None
    return (marks[-1][0] - marks[0][0]) / (marks[-1][1] - marks[0][1])


def limit_boot(spec: VmSpec, image: GuestImage, accel: AccelChoice, timeout: float) -> Boot:
    """Boot the limit's initramfs; its total is launch start to the line on the console."""
    guest = QemuPlatform(spec, name="hvbench-bootlimit", image=image, boot_timeout=timeout,
                         accel_choice=accel, await_agent=False)
    t0 = time.monotonic()
    try:
        with ConsoleWatch(lambda: guest.console_log) as watch:
            guest.launch()
            seen = _wait_line(guest, watch, t0 + timeout)
        marks = uptime_lines(watch.lines, seen)
    finally:
        guest.stop()
    steps, _ = host_steps(guest, t0, marks[0])
    steps.append(("kernel clock 0 -> limit /init prints", marks[0][1]))
    return Boot(seen - t0, steps, {})


def _wait_line(guest: QemuPlatform, watch: ConsoleWatch, deadline: float) -> float:
    """Host time the limit's line appeared; the console is read for 0.2 s more after
    QEMU exits (the guest powers off right after printing)."""
    exited: float | None = None
    while True:
        found = [seen for seen, line in list(watch.lines)
                 if line.startswith(LIMIT_MARKER) and guest_uptime(line) is not None]
        if found:
            return found[0]
        now = time.monotonic()
        if exited is None and not guest.is_running():
            exited = now
        if now >= deadline or (exited is not None and now - exited > 0.2):
            what = "exited before printing" if exited is not None else "printed no line"
            raise GuestBootError(f"the limit guest {what} its line:\n"
                                 f"{guest.console_tail()}")
        time.sleep(_LINE_POLL_S)


def guest_boot(spec: VmSpec, image: GuestImage, accel: AccelChoice, timeout: float) -> Boot:
    """Boot the real image to the agent's first answer; read dmesg and the clocksource."""
    guest = QemuPlatform(spec, name="hvbench-bootbench", image=image, boot_timeout=timeout,
                         accel_choice=accel)
    t0 = time.monotonic()
    try:
        with ConsoleWatch(lambda: guest.console_log) as watch:
            guest.launch()
            answered = t0 + guest.timings["boot_s"]
            dmesg = guest.exec(["dmesg"], timeout=30).text()
            clocksource = guest.exec(["cat", _CLOCKSOURCE], timeout=30).text().strip()
        marks = uptime_lines(watch.lines, answered)
    finally:
        guest.stop()
    if not marks:
        raise GuestError("no init line with an uptime reached the console")
    steps, kernel_zero = host_steps(guest, t0, marks[0])
    match = _RUN_INIT_RE.search(dmesg)
    previous_label, previous_up = "kernel clock 0", 0.0
    if match:
        previous_label, previous_up = "/init runs", float(match.group(1))
        steps.append(("kernel clock 0 -> /init runs (dmesg)", previous_up))
    for _, up, text in marks:
        steps.append((f"{previous_label} -> {text}", up - previous_up))
        previous_label, previous_up = text, up
    steps.append((f"{previous_label} -> agent answers (host)",
                  guest.timings["boot_s"] - kernel_zero - previous_up))
    return Boot(guest.timings["boot_s"], steps,
                {"clocksource": clocksource, "clock_rate": clock_rate(marks)})


def median_steps(boots: Sequence[Boot]) -> Steps:
    """Median of each step over the boots, in the first boot's order (a step missing from
    a boot is left out of its median)."""
    order: list[str] = []
    values: dict[str, list[float]] = {}
    for boot in boots:
        for label, value in boot.steps:
            if label not in values:
                order.append(label)
                values[label] = []
            values[label].append(value)
    return [(label, statistics.median(values[label])) for label in order]


def summary(kind: str, boots: Sequence[Boot]) -> dict[str, Any]:
    totals = [b.total_s for b in boots]
    return {
        "kind": kind, "boots": len(totals), "median_s": statistics.median(totals),
        "min_s": min(totals), "max_s": max(totals),
        "stdev_s": statistics.stdev(totals) if len(totals) > 1 else 0.0, "each_s": totals,
        "steps_median_s": dict(median_steps(boots)),
        "facts": [b.facts for b in boots],
    }


def print_summary(result: dict[str, Any]) -> None:
    for kind in ("limit", "guest"):
        part = result[kind]
        print(f"\n{kind}: median {part['median_s']:.3f} s, min {part['min_s']:.3f} s, "
              f"max {part['max_s']:.3f} s, sd {part['stdev_s']:.3f} s over "
              f"{part['boots']} boots; median steps:")
        for label, value in part["steps_median_s"].items():
            print(f"  {value * 1000:8.0f} ms  {label}")
    rates = [f["clock_rate"] for f in result["guest"]["facts"] if f.get("clock_rate")]
    sources = sorted({f["clocksource"] for f in result["guest"]["facts"]})
    if rates:
        print(f"\nguest clock: {statistics.median(rates):.3f} host s per guest s (median); "
              f"clocksource {', '.join(sources)}")
    verdict = "met" if result["ratio"] <= TARGET_RATIO else "NOT met"
    print(f"{result['machine']}/{result['accel']}: guest {result['guest']['median_s']:.3f} s "
          f"/ limit {result['limit']['median_s']:.3f} s = {result['ratio']:.3f} "
          f"(target <= {TARGET_RATIO}: {verdict}); {result['failed']} boots failed")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boots", type=int, default=10, help="boots of each kind")
    parser.add_argument("--machine", default="q35")
    parser.add_argument("--accel", default="tcg")
    parser.add_argument("--boot-timeout", type=float, default=60.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    image = build_image()
    spec = VmSpec(machine=args.machine, accel=args.accel)
    accel = choose_accel(spec)
    boots: dict[str, list[Boot]] = {"limit": [], "guest": []}
    failed = 0
    with tempfile.TemporaryDirectory(prefix="hvb-bootbench-") as scratch:
        limit_image = dataclasses.replace(image, initrd=write_limit_initramfs(
            image.packages, default_cache_dir() / "debs", Path(scratch) / "limit.img"))
        for index in range(args.boots):
            for kind, boot, use in (("limit", limit_boot, limit_image),
                                    ("guest", guest_boot, image)):
                try:
                    boots[kind].append(boot(spec, use, accel, args.boot_timeout))
                except (GuestBootError, GuestError) as exc:
                    failed += 1
                    print(f"{kind} boot {index + 1:2d}: FAILED\n{exc}", file=sys.stderr)
                    continue
                print(f"{kind} boot {index + 1:2d}: {boots[kind][-1].total_s:.3f} s",
                      file=sys.stderr)
    if not boots["limit"] or not boots["guest"]:
        print(f"no successful boot of each kind ({failed} failed)", file=sys.stderr)
        return 1
    result: dict[str, Any] = {
        "machine": args.machine, "accel": accel.accel, "image_key": image.key,
        "initrd_bytes": image.initrd.stat().st_size, "failed": failed,
        "limit": summary("limit", boots["limit"]), "guest": summary("guest", boots["guest"]),
    }
    result["ratio"] = result["guest"]["median_s"] / result["limit"]["median_s"]
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_summary(result)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
