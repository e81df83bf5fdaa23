"""VmSpec options on the command line: ``--machine``, ``--disk bus=ahci,cache=none``...

Parsing is pure: it yields a :class:`VmSpec` or a :class:`SpecError` naming the option.
"""

from __future__ import annotations

import argparse
from typing import Any

from hvbench.errors import SpecError
from hvbench.model.spec import VmSpec, parse_size, vm_spec_from_mapping

_BOOLS = {"on": True, "true": True, "yes": True, "1": True,
          "off": False, "false": False, "no": False, "0": False}
_BOOL_FIELDS = {"iothread", "discard"}


def add_vm_options(parser: argparse.ArgumentParser) -> None:
    """Add the VmSpec options to ``parser``."""
    group = parser.add_argument_group("guest (VmSpec)")
    group.add_argument("--machine", default="q35", help="q35, pc or microvm (default q35)")
    group.add_argument("--vcpus", type=int, default=1, help="guest vCPUs (default 1)")
    group.add_argument("--memory", default="512M", help="guest RAM, e.g. 512M or 1G")
    group.add_argument("--accel", default="auto", help="auto (probe KVM, else TCG), kvm, tcg")
    group.add_argument("--clocksource", default="auto",
                       help="the guest kernel's clocksource: auto (tsc under TCG, the "
                       "kernel's own under KVM), kernel, tsc, hpet, acpi_pm, kvm-clock")
    group.add_argument(
        "--disk", action="append", default=[], metavar="KEY=VAL,...",
        help="a benchmark disk: bus=virtio-blk|virtio-scsi|nvme|ide|ahci|lsi-scsi, "
        "cache=none|writeback|writethrough|directsync|unsafe, aio=threads|native|io_uring, "
        "format=raw|qcow2, allocation=sparse|preallocated|full, size=1G, iothread=on, "
        "queues=N (virtio, nvme), poll-max-ns=NS, queue-size=N, discard=on, "
        "detect-zeroes=off|on|unmap, backend=qemu|vhost-user (repeatable)",
    )
    group.add_argument(
        "--nic", action="append", default=[], metavar="KEY=VAL,...",
        help="a NIC: model=virtio-net|e1000|rtl8139, backend=user|tap, bridge=BR, "
        "address=IP/PREFIX, gateway=IP, forwards=tcp:HOSTPORT:GUESTPORT, queues=N "
        "(virtio-net on tap) (repeatable)",
    )


def parse_kv(text: str, option: str) -> dict[str, Any]:
    """``a=1,b=2`` -> ``{"a": "1", "b": "2"}``; raises SpecError naming ``option``."""
    out: dict[str, Any] = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SpecError(f"{option}: {item!r}: expected KEY=VALUE")
        key = key.strip().replace("-", "_")
        if key in _BOOL_FIELDS:
            if value.lower() not in _BOOLS:
                raise SpecError(f"{option}: {key}: expected on or off, got {value!r}")
            out[key] = _BOOLS[value.lower()]
        elif key == "forwards":
            out[key] = tuple(value.split("+"))
        else:
            out[key] = value
    return out


def vm_spec_from_args(args: argparse.Namespace) -> VmSpec:
    """Build the VmSpec the options describe; raises :class:`SpecError`."""
    try:
        memory_mib = parse_size(args.memory) // (1 << 20) if not str(args.memory).isdigit() \
            else int(args.memory)
    except ValueError as exc:
        raise SpecError(f"--memory: {exc}") from exc
    data = {
        "machine": args.machine, "vcpus": args.vcpus, "memory_mib": memory_mib,
        "accel": args.accel, "clocksource": args.clocksource,
        "disks": [parse_kv(d, f"--disk #{i + 1}") for i, d in enumerate(args.disk)],
        "nics": [parse_kv(n, f"--nic #{i + 1}") for i, n in enumerate(args.nic)],
    }
    return vm_spec_from_mapping(data, source="command line")
