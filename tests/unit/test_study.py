"""Study files: expansion, names, filters, order, and one-line errors for bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from hvbench.errors import SpecError
from hvbench.kinds.disk.spec import DiskWorkloadSpec
from hvbench.kinds.qemu.spec import QemuPlatformSpec
from hvbench.model.study import cell_order, parse_study

EXAMPLES = Path(__file__).parent.parent.parent / "examples"
GIB = 1 << 30
HOST_RAM = 24 * GIB

BASE = """
[study]
name = "t"
repetitions = 2
seed = 7

[[platform]]
kind = "native"

[[platform]]
kind = "qemu"
name = "vm"
disk = { bus = ["virtio-blk", "ide"], cache = ["none", "writeback"] }
machine = "pc"

[[workload]]
kind = "disk"
profile = "dd"
direct = true
"""


def parse(text: str) -> object:
    return parse_study(text, "s.toml", HOST_RAM)


def test_cross_product_and_names() -> None:
    study = parse_study(BASE, "s.toml", HOST_RAM)
    names = [p.name for p in study.platforms]
    assert names == [
        "native",
        "vm.virtio-blk-none",
        "vm.virtio-blk-writeback",
        "vm.ide-none",
        "vm.ide-writeback",
    ]
    vm = study.platforms[4].spec
    assert isinstance(vm, QemuPlatformSpec)
    assert (vm.vm.machine, vm.vm.disks[0].bus, vm.vm.disks[0].cache) == ("pc", "ide", "writeback")
    assert [c.name for c in study.cells][:2] == ["native/dd", "vm.virtio-blk-none/dd"]
    assert study.platforms[1].values == {"disk.bus": "virtio-blk", "disk.cache": "none"}


@pytest.mark.parametrize("words", [[], ["nokaslr", "elevator=none"]])
def test_kernel_args_are_one_value_not_an_axis(words: list[str]) -> None:
    # docs/studies.md writes `kernel_args = []`, and explain --verify writes a stored
    # platform back with it: an empty axis would remove every variant, words would
    # become one variant per word.
    text = BASE.replace('machine = "pc"', f'machine = "pc"\nkernel_args = {words!r}'
                        .replace("'", '"'))
    study = parse_study(text, "s.toml", HOST_RAM)
    vms = [p.spec for p in study.platforms if isinstance(p.spec, QemuPlatformSpec)]
    assert len(vms) == 4
    assert all(vm.vm.kernel_args == tuple(words) for vm in vms)


def test_only_and_exclude() -> None:
    text = BASE.replace(
        'machine = "pc"', 'machine = "pc"\nexclude = [{ bus = "ide", cache = "none" }]'
    )
    assert [p.name for p in parse_study(text, "s", HOST_RAM).platforms][-1] == "vm.ide-writeback"
    assert "vm.ide-none" not in [p.name for p in parse_study(text, "s", HOST_RAM).platforms]
    text = BASE.replace('machine = "pc"', 'machine = "pc"\nonly = [{ "disk.cache" = "none" }]')
    names = [p.name for p in parse_study(text, "s", HOST_RAM).platforms]
    assert names == ["native", "vm.virtio-blk-none", "vm.ide-none"]


def test_workload_lists_expand_too() -> None:
    text = BASE.replace('profile = "dd"', 'profile = "iozone"\nrecord_size = ["64K", "1M"]')
    study = parse_study(text, "s", HOST_RAM)
    assert [w.name for w in study.workloads] == ["iozone.64K", "iozone.1M"]
    spec = study.workloads[1].spec
    assert isinstance(spec, DiskWorkloadSpec) and spec.io_size() == 1 << 20


def test_order_is_seeded_grouped_and_varies_by_repetition() -> None:
    study = parse_study(BASE, "s", HOST_RAM)
    first = [c.name for c in cell_order(study.cells, 7, 0)]
    assert first == [c.name for c in cell_order(study.cells, 7, 0)]
    orders = {tuple(c.name for c in cell_order(study.cells, 7, rep)) for rep in range(6)}
    assert len(orders) > 1
    assert sorted(first) == sorted(c.name for c in study.cells)


def test_cache_rule_refuses_small_buffered_files() -> None:
    text = BASE.replace("direct = true", 'file_size = "256M"')
    with pytest.raises(SpecError, match=r"smaller than 2 x the platform's RAM \(24G\)"):
        parse_study(text, "s.toml", HOST_RAM)
    allowed = text.replace('file_size = "256M"', 'file_size = "256M"\nallow_cached = true')
    assert parse_study(allowed, "s.toml", HOST_RAM)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ("seed = 7", "seed = 7\ncolour = 1"),
            "s.toml:6: study: colour: unknown field",
        ),
        (
            ("repetitions = 2", 'repetitions = "two"'),
            "s.toml:4: study: repetitions: Input should be a valid integer",
        ),
        (
            ('profile = "dd"', 'profile = "iozone3"'),
            "s.toml:18: workload[0]: profile: Input should be",
        ),
        (
            ('cache = ["none", "writeback"]', 'cache = ["none", "sometimes"]'),
            "s.toml:13: platform[1] (variant disk.bus=virtio-blk, disk.cache=sometimes): "
            "disk.cache: Input should be",
        ),
        (('machine = "pc"', 'machine = "microvm"'), "microvm cannot carry bus=ide"),
        (('kind = "native"', 'kind = "xen"'),
         'platform[0]: kind: expected "native", "qemu" or "libvirt"'),
        (('profile = "dd"', 'profile = "fio-job"'), "profile fio-job needs job_file"),
        (("[[workload]]", "[workload]"), "workload: expected at least one [[workload]] table"),
        (('name = "t"', "name = "), "not valid TOML"),
    ],
)
def test_errors_are_one_line_and_name_file_and_field(edit: tuple[str, str], message: str) -> None:
    text = BASE.replace(*edit, 1)
    assert text != BASE
    with pytest.raises(SpecError) as info:
        parse_study(text, "s.toml", HOST_RAM)
    assert message in str(info.value)
    assert "\n" not in str(info.value).strip()


def test_a_misspelt_section_and_what_it_leaves_missing_are_both_listed() -> None:
    with pytest.raises(SpecError) as info:
        parse_study(BASE.replace("[study]", "[studdy]", 1), "s.toml", HOST_RAM)
    assert str(info.value).splitlines() == [
        "s.toml:2: studdy: unknown section (did you mean 'study'?) (expected [study], [lab], "
        "[[platform]], [[workload]], [[scenario]] and [tune])",
        "s.toml: study: name: required, missing"]


@pytest.mark.parametrize("name", ["quick.toml", "storage.toml", "fio-job.toml"])
def test_examples_parse(name: str) -> None:
    study = parse_study((EXAMPLES / name).read_text(), name, HOST_RAM)
    assert study.cells


def test_storage_example_matrix() -> None:
    study = parse_study((EXAMPLES / "storage.toml").read_text(), "storage.toml", HOST_RAM)
    assert len(study.platforms) == 1 + 3 * 3 * 3


@pytest.mark.parametrize("line,replacement", [
    ('name = "t"', 'name = "t\\u0000"'),
    ('name = "vm"', 'name = "vm\\u001b[2J"'),
    ('name = "vm"', 'name = "vm\\u202e"'),
    ('profile = "dd"', 'profile = "dd"\nname = "a\\u0000b"'),
])
def test_control_characters_in_names_are_refused(line: str, replacement: str) -> None:
    with pytest.raises(SpecError, match="control or format character") as info:
        parse(BASE.replace(line, replacement, 1))
    assert "\n" not in str(info.value)


def test_scenario_name_with_trailing_newline_is_refused() -> None:
    text = BASE + '[[scenario]]\nname = "idle\\n"\nneighbours = []\n'
    with pytest.raises(SpecError, match="scenario"):
        parse(text)
