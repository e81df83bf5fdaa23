"""``hvbench fio-compare``: one fio job on the host and in a guest, side by side.

The native job writes a file in the work directory; the guest job targets its first
benchmark disk, whose image lives in the same work directory, so both reach the same
host filesystem. Both use O_DIRECT, so neither measures a page cache.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.table import Table

from hvbench.cli.common import warn_tcg
from hvbench.cli.vmopts import add_vm_options, vm_spec_from_args
from hvbench.model.spec import DiskSpec, VmSpec, parse_size
from hvbench.platforms.accel import choose_accel
from hvbench.platforms.native import NativePlatform
from hvbench.platforms.qemu import QemuPlatform
from hvbench.workloads.fio import FioJob, FioResult, run_fio


def register(sub: Any) -> None:
    fio = sub.add_parser("fio-compare", help="one fio job natively and in a guest, side by side")
    add_vm_options(fio)
    fio.add_argument("--rw", default="write", help="fio rw mode (default write)")
    fio.add_argument("--bs", default="64K", help="block size (default 64K)")
    fio.add_argument("--size", default="64M", help="bytes of I/O per job (default 64M)")
    fio.add_argument("--boot-timeout", type=float, default=60.0, metavar="S",
                     help="seconds the guest may take to boot (default 60)")
    fio.set_defaults(handler=handle)


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    table, accel = run_fio_compare(vm_spec_from_args(args), args, err)
    out.print(table)
    warn_tcg(err, accel)
    return 0


def _job(args: argparse.Namespace, filename: str) -> FioJob:
    return FioJob(
        name=f"{args.rw}-{args.bs}", rw=args.rw, filename=filename,
        size=parse_size(args.size), bs=parse_size(args.bs),
    )


def _with_disk(spec: VmSpec, size: int) -> VmSpec:
    if spec.disks:
        return spec
    disk = DiskSpec(size=max(size, 64 << 20))
    return spec.model_copy(update={"disks": (disk,)})


def comparison_table(native: list[FioResult], guest: list[FioResult], label: str) -> Table:
    """A table with one row per job direction: native, guest and % of native (pure)."""
    table = Table(title=f"fio: native vs guest ({label})")
    for column in ("job", "dir", "native MB/s", "guest MB/s", "% of native",
                   "native p99 ms", "guest p99 ms"):
        table.add_column(column, justify="right" if "MB" in column or "ms" in column else "left")
    for n, g in zip(native, guest, strict=True):
        pct = 100.0 * g.mb_per_s / n.mb_per_s if n.mb_per_s else float("nan")
        table.add_row(n.job, n.direction, f"{n.mb_per_s:.1f}", f"{g.mb_per_s:.1f}",
                      f"{pct:.1f} %", f"{n.lat_p99_ms or 0:.2f}", f"{g.lat_p99_ms or 0:.2f}")
    return table


def run_fio_compare(
    spec: VmSpec, args: argparse.Namespace, log: Console
) -> tuple[Table, str | None]:
    """Run the job natively, then in a guest. Returns the table and the guest accel."""
    size = parse_size(args.size)
    spec = _with_disk(spec, size)
    with NativePlatform() as native:
        log.print("[dim]native: running fio...[/]")
        native_results, _ = run_fio(native, _job(args, f"{native.scratch_dir()}/fio.dat"))
    log.print(f"[dim]guest: booting {spec.label()}...[/]")
    with QemuPlatform(spec, boot_timeout=args.boot_timeout,
                      accel_choice=choose_accel(spec)) as guest:
        device = guest.disk_device(0)
        log.print(f"[dim]guest: booted in {guest.timings['boot_s']:.2f}s ({guest.accel}); "
                  f"running fio on {device}...[/]")
        guest_results, _ = run_fio(guest, _job(args, device))
        accel = guest.accel
    return comparison_table(native_results, guest_results, spec.label()), accel
