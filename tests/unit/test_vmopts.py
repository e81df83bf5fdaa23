"""VmSpec options on the command line."""

from __future__ import annotations

import argparse

import pytest

from hvbench.cli.vmopts import add_vm_options, parse_kv, vm_spec_from_args
from hvbench.errors import SpecError


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_vm_options(parser)
    return parser.parse_args(list(argv))


def test_full_spec() -> None:
    spec = vm_spec_from_args(
        parse(
            "--machine",
            "pc",
            "--vcpus",
            "2",
            "--memory",
            "1G",
            "--disk",
            "bus=ide,cache=writeback,size=256M",
            "--disk",
            "bus=virtio-blk,iothread=on,aio=native",
            "--nic",
            "model=e1000,forwards=tcp:8080:80+tcp:2222:22",
        )
    )
    assert (spec.machine, spec.vcpus, spec.memory_mib) == ("pc", 2, 1024)
    assert spec.disks[0].bus == "ide" and spec.disks[0].size == 256 << 20
    assert spec.disks[1].iothread is True and spec.disks[1].aio == "native"
    assert spec.nics[0].forwards == ("tcp:8080:80", "tcp:2222:22")


def test_clocksource_option() -> None:
    assert vm_spec_from_args(parse()).clocksource == "auto"
    assert vm_spec_from_args(parse("--clocksource", "hpet")).clocksource == "hpet"


def test_plain_memory_is_mib() -> None:
    assert vm_spec_from_args(parse("--memory", "768")).memory_mib == 768


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--disk", "bus=floppy"], "command line: disks[0].bus: Input should be"),
        (
            ["--disk", "bus=ide", "--disk", "iothread=maybe"],
            "--disk #2: iothread: expected on or off",
        ),
        (["--nic", "model"], "--nic #1: 'model': expected KEY=VALUE"),
        (["--memory", "lots"], "--memory: expected a size"),
        (["--machine", "microvm", "--disk", "bus=ahci"], "microvm cannot carry bus=ahci"),
        (["--clocksource", "jiffies"], "command line: clocksource: Input should be"),
        (["--clocksource", "kvm-clock"], "needs accel = \"kvm\""),
    ],
)
def test_errors_name_the_option(argv: list[str], message: str) -> None:
    with pytest.raises(SpecError, match=message.replace("[", r"\[").replace("]", r"\]")):
        vm_spec_from_args(parse(*argv))


def test_parse_kv_dashes_become_underscores() -> None:
    assert parse_kv("a-b=1,,c=2", "--x") == {"a_b": "1", "c": "2"}
