"""The cell kinds: the registry covers every workload kind, one record builder gives
each kind's stored shape, prepare/run/release order, and no type dispatch in run/."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from hvbench.errors import GuestError, HvbenchError, InterruptedRun, SpecError
from hvbench.kinds.disk.spec import DiskWorkloadSpec
from hvbench.model.qemu_argv import CURRENT_CLOCKSOURCE, GUEST_CLOCKSOURCE_KIND
from hvbench.model.study import parse_study
from hvbench.model.workload import spec_classes
from hvbench.monitors.sampler import MonitorResult
from hvbench.monitors.session import PhaseMonitors
from hvbench.platforms.base import Platform
from hvbench.platforms.native import NativePlatform
from hvbench.run.cells.base import (
    CellContext,
    CellResult,
    MeasuredWindow,
    cell_result,
    run_cell,
    vhost_records,
)
from hvbench.run.cells.registry import (
    CELL_KINDS,
    cell_kind,
    kind_of,
    needs_native_server,
    server_ports,
)
from hvbench.run.runner import _guest_clocksource
from hvbench.store.records import MeasurementRecord, RawRecord, SampleRecord
from hvbench.workloads.outcome import PhaseOutcome

RUN_DIR = Path(__file__).parent.parent.parent / "src" / "hvbench" / "run"
HOST_RAM = 24 << 30

STUDY = """
[study]
name = "cells"

[lab]
[[lab.host]]
name = "client"

[[platform]]
kind = "native"

[[platform]]
name = "vm"
nic = { backend = "user" }

[[workload]]
kind = "web"
port = 8088
file_kb = [1]

[[workload]]
kind = "lifecycle"
"""


def test_every_workload_kind_has_one_cell_kind() -> None:
    assert set(CELL_KINDS) == set(spec_classes())
    for name in spec_classes():
        kind = kind_of(name)
        assert kind.kind == name
        # The kinds that boot their own guests are the model's self-booting ones.
        assert kind.boots_platform == (not spec_classes()[name].SELF_BOOTING)
    assert kind_of("disk") is not kind_of("disk")  # fresh per (cell, repetition)


def test_an_unknown_kind_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(SpecError, match=r"'gpu'.*disk, lifecycle, network, propagation, web"):
        kind_of("gpu")


def test_server_ports_and_the_native_server_come_from_the_kinds() -> None:
    study = parse_study(STUDY, "c.toml", HOST_RAM)
    assert server_ports(study, "vm") == [8088]
    assert server_ports(study, "native") == [8088]
    assert needs_native_server(study)
    web_only_on_guests = parse_study(STUDY.replace('[[platform]]\nkind = "native"\n', ""),
                                     "c.toml", HOST_RAM)
    assert not needs_native_server(web_only_on_guests)
    lifecycle = next(c for c in study.cells if c.workload.spec.kind == "lifecycle")
    assert cell_kind(lifecycle).guests(lifecycle.workload.spec) == 1


def test_no_type_dispatch_in_run_outside_the_registry() -> None:
    """The runner, the lab session and the kinds ask the protocols, never the types."""
    dispatch = re.compile(r"isinstance\([^)]*(WorkloadSpec|PlatformSpec|QemuPlatform|"
                          r"NativePlatform)")
    offenders = [f"{path.relative_to(RUN_DIR)}:{number}: {line.strip()}"
                 for path in sorted(RUN_DIR.rglob("*.py")) if path.name != "registry.py"
                 for number, line in enumerate(path.read_text().splitlines(), 1)
                 if dispatch.search(line)]
    assert offenders == []


# -- the one record builder ------------------------------------------------------------
def _monitors(phase_summary: float) -> MonitorResult:
    return MonitorResult(summary={"host.cpu.busy_pct": phase_summary},
                         series={"host.cpu": [(0.1, {"busy_pct": phase_summary})]})


def test_a_disk_phase_stores_metrics_wall_monitors_caches_and_its_fio_json() -> None:
    outcome = PhaseOutcome("write", {"mb_s": (100.0, "MB/s")}, "{fio}", "fio-json",
                           caches_dropped={"host": True, "guest": False})
    result = cell_result([MeasuredWindow([outcome], 2.0, _monitors(5.0), "write")])
    assert result.measurements == [
        MeasurementRecord("write", "mb_s", 100.0, "MB/s"),
        MeasurementRecord("write", "phase_wall_s", 2.0, "s"),
        MeasurementRecord("write", "host.cpu.busy_pct", 5.0, ""),
        MeasurementRecord("write", "cache_dropped.host", 1.0, "bool"),
        MeasurementRecord("write", "cache_dropped.guest", 0.0, "bool")]
    assert result.samples == [SampleRecord("write", "host.cpu", 0.1, {"busy_pct": 5.0})]
    assert result.raw == [RawRecord("write", "fio-json", "{fio}")]


def test_a_job_files_phases_share_one_window_stored_once_under_job_file() -> None:
    outcomes = [PhaseOutcome(name, {"iops": (1.0, "IO/s")}, "{job}", "fio-json")
                for name in ("a", "b")]
    result = cell_result([MeasuredWindow(outcomes, 3.0, _monitors(7.0), "job-file")])
    assert [(m.phase, m.metric) for m in result.measurements] == [
        ("a", "iops"), ("a", "phase_wall_s"), ("a", "host.cpu.busy_pct"),
        ("b", "iops"), ("b", "phase_wall_s"), ("b", "host.cpu.busy_pct")]
    assert [(s.phase, s.monitor) for s in result.samples] == [("job-file", "host.cpu")]
    assert result.raw == [RawRecord("job-file", "fio-json", "{job}")]
    empty = cell_result([MeasuredWindow([], 3.0, _monitors(7.0), "job-file")])
    assert [s.phase for s in empty.samples] == ["job-file"] and empty.raw == []


def test_a_job_files_rewrite_is_stored_beside_its_fio_json() -> None:
    outcome = PhaseOutcome("a", {"iops": (1.0, "IO/s")}, "{job}", "fio-json",
                           attachments=[("fio-job-rewritten", "[a]"),
                                        ("fio-job-changes", '["moved"]')])
    result = cell_result([MeasuredWindow([outcome], 3.0, _monitors(7.0), "job-file")])
    assert result.raw == [RawRecord("job-file", "fio-json", "{job}"),
                          RawRecord("job-file", "fio-job-rewritten", "[a]"),
                          RawRecord("job-file", "fio-job-changes", '["moved"]')]


def test_a_network_phase_keeps_the_tools_series_under_its_name() -> None:
    outcome = PhaseOutcome("tx", {"goodput_mbit_s": (900.0, "Mbit/s")}, "{iperf}",
                           "iperf3-json", series=[(1.0, {"mbit_s": 901.0})])
    result = cell_result([MeasuredWindow([outcome], 10.0, _monitors(1.0))])
    assert [(s.phase, s.monitor, s.t) for s in result.samples] == [
        ("tx", "host.cpu", 0.1), ("tx", "iperf3", 1.0)]
    assert result.raw == [RawRecord("tx", "iperf3-json", "{iperf}")]


def test_web_phases_each_keep_their_own_raw_output() -> None:
    windows = [MeasuredWindow([PhaseOutcome(f"{kb}kB", {"replies_per_s": (50.0, "1/s")},
                                            f"report {kb}", "httperf-text")], 1.0,
                              MonitorResult()) for kb in (1, 10)]
    result = cell_result(windows)
    assert result.raw == [RawRecord("1kB", "httperf-text", "report 1"),
                          RawRecord("10kB", "httperf-text", "report 10")]
    assert result.samples == []


def test_a_lifecycle_stores_only_metrics_its_series_and_one_document() -> None:
    outcomes = [PhaseOutcome(p, {"duration_s": (0.5, "s")}, "{life}", "lifecycle-json")
                for p in ("create", "qemu")]
    outcomes.append(PhaseOutcome("idle", {"cpu_pct": (3.0, "%")}, "{life}",
                                 "lifecycle-json", series=[(1.0, {"cpu_pct": 3.0})]))
    result = cell_result([MeasuredWindow(outcomes)], raw_once="lifecycle")
    assert [(m.phase, m.metric) for m in result.measurements] == [
        ("create", "duration_s"), ("qemu", "duration_s"), ("idle", "cpu_pct")]
    assert result.samples == [SampleRecord("idle", "lifecycle", 1.0, {"cpu_pct": 3.0})]
    assert result.raw == [RawRecord("lifecycle", "lifecycle-json", "{life}")]
    assert cell_result([MeasuredWindow([])], raw_once="lifecycle").raw == []


class _Guest(NativePlatform):
    """A stand-in guest: only what the records read."""

    is_guest = True

    @property
    def vhost(self) -> bool | None:
        return True


def test_vhost_rows_only_for_a_guest() -> None:
    assert vhost_records(NativePlatform(), ["tx"]) == []
    assert vhost_records(_Guest(), ["1kB", "10kB"]) == [
        MeasurementRecord("1kB", "vhost", 1.0, "bool"),
        MeasurementRecord("10kB", "vhost", 1.0, "bool")]


# -- prepare, run, release -------------------------------------------------------------
class _Recorder:
    kind = "disk"
    boots_platform = True
    needs_lab = False

    def __init__(self, fail: str | None = None) -> None:
        self.calls: list[str] = []
        self.fail = fail

    def _step(self, name: str) -> None:
        self.calls.append(name)
        if self.fail == name:
            raise HvbenchError(f"{name} failed")

    def check(self, spec: object, study_path: str) -> None: ...

    def server_ports(self, spec: object) -> tuple[int, ...]:
        return ()

    def estimate_s(self, spec: object) -> float:
        return 1.0

    def guests(self, spec: object) -> int:
        return 0

    def prepare(self, ctx: CellContext) -> None:
        self._step("prepare")

    def run(self, ctx: CellContext) -> CellResult:
        self._step("run")
        return CellResult()

    def release(self, ctx: CellContext) -> None:
        self._step("release")


def _context(platform: Platform | None = None) -> CellContext:
    study = parse_study(STUDY, "c.toml", HOST_RAM)

    def monitors(platform: Platform, interfaces: Mapping[str, str] | None) -> PhaseMonitors:
        return PhaseMonitors([])
    return CellContext(cell=study.cells[0], study=study, platform=platform, session=None,
                       scenario=None, monitors=monitors, guest_name="g")


@pytest.mark.parametrize(("fail", "calls"), [
    (None, ["prepare", "run", "release"]),
    ("prepare", ["prepare", "release"]),
    ("run", ["prepare", "run", "release"]),
])
def test_release_follows_whatever_happened(fail: str | None, calls: list[str]) -> None:
    kind = _Recorder(fail)
    if fail is None:
        assert run_cell(kind, _context()) == CellResult()
    else:
        with pytest.raises(HvbenchError, match=fail):
            run_cell(kind, _context())
    assert kind.calls == calls


class _InterruptedThenReleaseFails(_Recorder):
    def run(self, ctx: CellContext) -> CellResult:
        self.calls.append("run")
        raise KeyboardInterrupt

    def release(self, ctx: CellContext) -> None:
        self.calls.append("release")
        raise HvbenchError("umount: target is busy")


def test_a_failing_release_does_not_replace_an_interrupt() -> None:
    # Ctrl-C during fio, then the release's umount fails: the run must still end as
    # interrupted (exit 130), with the release's failure kept as a note.
    kind = _InterruptedThenReleaseFails()
    with pytest.raises(KeyboardInterrupt) as caught:
        run_cell(kind, _context())
    assert kind.calls == ["prepare", "run", "release"]
    assert any("umount: target is busy" in note for note in caught.value.__notes__)


def test_a_context_names_what_a_cell_lacks() -> None:
    ctx = _context()
    with pytest.raises(HvbenchError, match="runs without a lab"):
        ctx.lab()
    with pytest.raises(HvbenchError, match="no started platform"):
        ctx.started()
    with pytest.raises(HvbenchError, match="is not a DiskWorkloadSpec"):
        ctx.spec(DiskWorkloadSpec)


class _ClockGuest(_Guest):
    """A guest whose sysfs says which clocksource its kernel uses (or cannot answer)."""

    def __init__(self, answer: bytes | None) -> None:
        super().__init__()
        self.answer = answer

    def read_file(self, path: str) -> bytes:
        if self.answer is None or path != CURRENT_CLOCKSOURCE:
            raise GuestError("agent gone")
        return self.answer


def test_a_guest_repetition_keeps_the_clocksource_its_kernel_used() -> None:
    assert _guest_clocksource(_ClockGuest(b"hpet\n")) == [
        RawRecord("platform", GUEST_CLOCKSOURCE_KIND, "hpet")]
    assert _guest_clocksource(_ClockGuest(None)) == []
    assert _guest_clocksource(NativePlatform()) == []
    assert _guest_clocksource(None) == []


def test_an_interruption_while_reading_the_clocksource_propagates() -> None:
    class _Interrupted(_Guest):
        def read_file(self, path: str) -> bytes:
            raise InterruptedRun(2)

    with pytest.raises(InterruptedRun):
        _guest_clocksource(_Interrupted())


def test_a_windows_monitor_errors_are_kept_beside_its_figures() -> None:
    monitors = _monitors(5.0)
    monitors.errors["nb0.load"] = "its load generator's run had not finished"
    outcome = PhaseOutcome("70kB", {"replies_per_s": (8.0, "1/s")}, "{h}", "httperf-text")
    result = cell_result([MeasuredWindow([outcome], 2.0, monitors, "web")])
    assert RawRecord("web", "monitor-errors",
                     '{"nb0.load": "its load generator\'s run had not finished"}') \
        in result.raw
    assert not any(r.kind == "monitor-errors"
                   for r in cell_result([MeasuredWindow([outcome], 2.0, _monitors(5.0),
                                                        "web")]).raw)
