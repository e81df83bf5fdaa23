"""The settings read model (:mod:`hvbench.model.settings`): every setting reads and
writes every disk and NIC of a stored platform, stored definitions load back into the
specs the study parser produced, and a workload's diagnosis class comes from its
stored kind."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from hvbench.analysis.resources import KIND_CLASSES, workload_class
from hvbench.errors import SpecError
from hvbench.kinds.disk.spec import DiskWorkloadSpec
from hvbench.kinds.qemu.spec import QemuPlatformSpec
from hvbench.model import settings
from hvbench.model.stored import load_platform, load_workload
from hvbench.model.study import parse_study
from hvbench.model.tune import AXIS_VALUES
from hvbench.model.workload import spec_classes
from hvbench.store.records import cell_record

STUDY = """
[study]
name = "settings"

[[platform]]
kind = "qemu"
name = "vm"
vcpus = 2
disks = [{ bus = "virtio-blk", cache = "none" }, { bus = "ide", cache = "writeback" }]
nics = [{ model = "virtio-net", backend = "user" }, { model = "e1000", backend = "user" }]

[[platform]]
kind = "native"
name = "native"

[[workload]]
kind = "disk"
name = "dd"
profile = "dd"
file_size = "16M"
direct = true

[[scenario]]
name = "idle1"
neighbours = [{ role = "idle" }]
"""


def _stored() -> dict[str, Mapping[str, Any]]:
    """cell name -> the platform definition the store keeps for it."""
    study = parse_study(STUDY, "settings.toml", 8 << 30)
    return {cell.name: cell_record(cell).platform for cell in study.cells}


def _other(setting: settings.Setting, current: Any) -> Any:
    """A value of ``setting`` other than ``current`` (a stored definition's round trip
    needs no valid VM, only a distinct value of the setting's type)."""
    closed = [c for c in setting.choices if c != current and c is not None]
    if closed:
        return closed[-1]
    if setting.type_text.startswith("tuple"):
        return ["x=1"]
    if setting.type_text.startswith("int"):
        return 7 if current != 7 else 8
    return "other"


def _guest() -> Mapping[str, Any]:
    return _stored()["vm/dd"]


def test_the_guest_has_two_disks_and_two_nics_as_stored() -> None:
    guest = _guest()
    assert settings.values(guest, "disk.bus") == ("virtio-blk", "ide")
    assert settings.values(guest, "nic.model") == ("virtio-net", "e1000")
    assert settings.get(guest, "disk.cache") == "none"
    assert settings.get(guest, "disk.cache", index=1) == "writeback"
    assert settings.get(guest, "disk.cache", index=2) is None
    assert settings.get(guest, "vcpus") == 2
    assert settings.values(guest, "vcpus") == (2,)
    assert settings.get(guest, "kind") == "qemu"


@pytest.mark.parametrize("name", [n for n, s in settings.SETTINGS.items() if s.scope != "platform"])
def test_every_setting_round_trips_on_each_device_and_on_all(name: str) -> None:
    guest = _guest()
    setting = settings.lookup(name)
    vm = settings.vm_of(guest)
    count = len(settings.values(guest, name))
    for index in range(count):
        before = settings.values(guest, name)
        value = _other(setting, before[index])
        changed = {**guest, "vm": settings.with_setting(vm, name, value, index=index)}
        after = settings.values(changed, name)
        assert after[index] == value
        assert settings.get(changed, name, index=index) == value
        # Only the device asked for changed; the stored mapping itself is untouched.
        assert [a for i, a in enumerate(after) if i != index] == \
            [b for i, b in enumerate(before) if i != index]
        assert settings.values(guest, name) == before
    value = _other(setting, settings.get(guest, name))
    everywhere = {**guest, "vm": settings.with_setting(vm, name, value)}
    assert settings.values(everywhere, name) == (value,) * count


def test_setting_none_removes_the_key_so_the_default_applies() -> None:
    guest = _guest()
    limited = settings.with_setting(settings.vm_of(guest), "disk.bps_limit", 10_000_000)
    assert settings.values({"vm": limited}, "disk.bps_limit") == (10_000_000, 10_000_000)
    cleared = settings.with_setting(limited, "disk.bps_limit", None, index=0)
    assert "bps_limit" not in cleared["disks"][0]
    assert cleared["disks"][1]["bps_limit"] == 10_000_000


def test_a_guest_without_a_disk_gets_the_one_a_setting_names() -> None:
    vm = settings.with_setting({"vcpus": 1}, "disk.cache", "writeback", index=0)
    assert vm["disks"] == [{"cache": "writeback"}]


def test_an_index_the_vm_lacks_is_refused() -> None:
    with pytest.raises(SpecError, match=r"disk.cache: the VM has 2 disks, no index 2"):
        settings.with_setting(settings.vm_of(_guest()), "disk.cache", "none", index=2)


def test_a_platform_level_setting_is_not_set_on_a_vm() -> None:
    with pytest.raises(SpecError, match="'scenario' is not a VM setting"):
        settings.with_setting({}, "scenario", "idle1")


@pytest.mark.parametrize(("name", "suggestion"), [("disk.cahce", "disk.cache"),
                                                  ("nic.modle", "nic.model"),
                                                  ("vcpu", "vcpus")])
def test_an_unknown_setting_is_one_line_naming_it(name: str, suggestion: str) -> None:
    for call in (lambda: settings.get(_guest(), name), lambda: settings.values({}, name),
                 lambda: settings.with_setting({}, name, 1)):
        with pytest.raises(SpecError) as caught:
            call()
        assert str(caught.value) == (f"unknown platform setting {name!r} (did you mean "
                                     f"{suggestion!r}?)")


def test_flat_names_every_setting_and_every_further_device() -> None:
    guest = _guest()
    flat = settings.flat(guest)
    assert set(settings.SETTINGS) <= set(flat)
    assert flat["disk.bus"] == "virtio-blk"
    assert flat["disks[1].bus"] == "ide"
    assert flat["nics[1].model"] == "e1000"
    assert "disks[2].bus" not in flat
    # Two guests differing in the second disk only differ in that key.
    other = {**guest, "vm": settings.with_setting(settings.vm_of(guest), "disk.cache",
                                                  "directsync", index=1)}
    differ = {k for k, v in settings.flat(other).items() if flat[k] != v}
    assert differ == {"disks[1].cache"}


def test_the_natives_settings_are_absent_not_guessed() -> None:
    native = _stored()["native/dd"]
    assert settings.get(native, "kind") == "native"
    assert settings.get(native, "disk.cache") is None
    assert settings.values(native, "disk.cache") == ()
    assert settings.get(native, "vcpus") is None


def test_settings_declare_their_place_and_choices() -> None:
    cache = settings.lookup("disk.cache")
    assert (cache.scope, cache.key, cache.path, cache.per_device) == (
        "disk", "cache", "vm.disks[*].cache", True)
    assert "writeback" in cache.choices
    assert settings.lookup("nic.queues").type_text == "int | None"
    assert settings.lookup("vcpus").path == "vm.vcpus"
    assert not settings.lookup("vcpus").per_device
    # Every axis tune searches is a declared setting, with values it may hold.
    for axis, values in AXIS_VALUES.items():
        choices = settings.lookup(axis).choices
        assert not choices or set(values) <= set(choices), axis


def test_stored_definitions_load_back_into_the_parsed_specs() -> None:
    study = parse_study(STUDY, "settings.toml", 8 << 30)
    assert any(c.scenario is not None for c in study.cells)
    for cell in study.cells:
        record = cell_record(cell)
        loaded = load_platform(record.platform, cell.name)
        assert load_workload(record.workload, cell.name) == cell.workload.spec
        assert loaded.spec == cell.platform.spec
        assert loaded.scenario == (cell.scenario.name if cell.scenario else None)
        assert settings.get(cell_record(cell).platform, "scenario") == loaded.scenario
    guest = load_platform(_guest())
    assert isinstance(guest.spec, QemuPlatformSpec)
    assert guest.vm is not None and [d.cache for d in guest.vm.disks] == ["none", "writeback"]
    assert load_platform(_stored()["native/dd"]).vm is None


def test_a_definition_this_version_cannot_read_names_the_field() -> None:
    guest = _guest()
    broken = {**guest, "vm": settings.with_setting(settings.vm_of(guest), "disk.cache",
                                                   "sometimes", index=1)}
    with pytest.raises(SpecError, match=r"^cell vm/dd: vm\.disks\[1\]\.cache: Input should"):
        load_platform(broken, "cell vm/dd")
    with pytest.raises(SpecError, match=r"^cell x: kind: 'qemo' .*\(did you mean 'qemu'\?\)$"):
        load_platform({"kind": "qemo"}, "cell x")
    with pytest.raises(SpecError, match=r"^cell x: kind: missing"):
        load_workload({"profile": "dd"}, "cell x")
    with pytest.raises(SpecError, match=r"^cell x: profile: Input should be"):
        load_workload({"kind": "disk", "profile": "ddd"}, "cell x")
    assert isinstance(load_workload({"kind": "disk", "profile": "dd"}), DiskWorkloadSpec)


def test_the_class_comes_from_the_stored_kind() -> None:
    assert set(KIND_CLASSES) == set(spec_classes())
    # A disk workload that stored no throughput is still a disk workload ...
    assert workload_class({}, {"kind": "disk"}, "write") == "disk"
    # ... a network one whose metrics look like a disk's is not one ...
    assert workload_class({"mb_s": 1.0}, {"kind": "network"}, "tx") == "network"
    # ... the guest's boot is no workload I/O, and the per-phase exceptions hold.
    assert workload_class({"mb_s": 1.0}, {"kind": "disk"}, "boot") == "other"
    assert workload_class({"mb_s": 1.0}, {"kind": "lifecycle"}, "create") == "disk"
    assert workload_class({}, {"kind": "lifecycle"}, "kernel") == "other"
    assert workload_class({"mb_s": 1.0}, {"kind": "propagation"}, "transfer") == "disk"


def test_a_definition_without_a_kind_falls_back_to_the_metrics() -> None:
    assert workload_class({"mb_s": 1.0}, {}, "write") == "disk"
    assert workload_class({"mbit_s": 1.0}, None, "tx") == "network"
    assert workload_class({"replies_s": 1.0}, {"profile": "x"}, "fixed") == "web"
    assert workload_class({"boot_s": 1.0}) == "other"


def test_every_setting_diagnosis_and_tune_name_is_declared() -> None:
    from hvbench.analysis.diagnosis import RULES
    from hvbench.run.tune import FIX_SETTINGS

    knobs = {r.knob for r in RULES if r.knob is not None}
    seeds = {name for pairs in FIX_SETTINGS.values() for name, _ in pairs}
    assert knobs and seeds
    for name in knobs | seeds:
        assert settings.lookup(name).name == name


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _read_only(db: Path) -> contextlib.closing[sqlite3.Connection]:
    """A connection that never writes next to the fixture (immutable: no -wal, -shm)."""
    return contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True))


def _fixture_cells() -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """(database, cell, platform, workload) of every stored fixture cell (read-only)."""
    out = []
    for db in sorted(FIXTURES.glob("**/*.db")):
        with _read_only(db) as conn:
            out += [(db.name, name, json.loads(p), json.loads(w)) for name, p, w in
                    conn.execute("SELECT name, platform_json, workload_json FROM cells")]
    return out


def test_every_stored_fixture_cell_loads_back_typed() -> None:
    cells = _fixture_cells()
    # Every kind the fixture runs were made with (the cpu kind came later: its stored
    # definition is read back in tests/unit/test_cpu_kind.py).
    assert {w["kind"] for _, _, _, w in cells} == set(spec_classes()) - {"cpu"}
    for db, name, platform, workload in cells:
        loaded = load_platform(platform, f"{db}: {name}")
        assert loaded.spec.kind == platform["kind"]
        assert load_workload(workload, f"{db}: {name}").kind == workload["kind"]


def _phase_metrics(db: Path) -> dict[tuple[str, str], tuple[str, set[str]]]:
    """(workload, phase) -> (its stored kind, the metrics any platform stored)."""
    out: dict[tuple[str, str], tuple[str, set[str]]] = {}
    with _read_only(db) as conn:
        for workload, definition, phase, metric in conn.execute(
                "SELECT DISTINCT c.workload_name, c.workload_json, m.phase, m.metric FROM cells c "
                "JOIN repetitions r ON r.cell_id = c.id "
                "JOIN measurements m ON m.repetition_id = r.id"):
            kind = json.loads(definition)["kind"]
            out.setdefault((workload, phase), (kind, set()))[1].add(metric)
    return out


def test_the_stored_kind_classes_every_fixture_phase_as_the_metrics_did() -> None:
    seen = set()
    for db in sorted((FIXTURES / "runs").glob("*.db")):
        for (_, phase), (kind, metrics) in _phase_metrics(db).items():
            by_metrics = dict.fromkeys(metrics, 0.0)
            assert workload_class(by_metrics, {"kind": kind}, phase) == \
                workload_class(by_metrics), (db.name, kind, phase)
            seen.add((kind, workload_class(by_metrics, {"kind": kind}, phase)))
    assert {c for _, c in seen} == {"disk", "network", "web", "other"}
