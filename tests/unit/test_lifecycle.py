"""The lifecycle workload's pure parts: marks, phase splitting, console lines, idle
metrics, outcomes and the raw JSON; and a byte copy of a small image."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hvbench.errors import GuestTimeoutError, ImageError
from hvbench.kinds.lifecycle.driver import (
    LIFECYCLE_PHASES,
    MARKS,
    RAW_KIND,
    ConsoleWatch,
    CreatedImage,
    IdleRecord,
    LifeRecord,
    LineClock,
    RepositoryImage,
    _guest_name,
    _raw_document,
    boot_marks,
    check_order,
    create_image,
    first_init_line,
    gaps,
    guest_uptime,
    idle_metrics,
    lifecycle_outcomes,
    remove_repository,
    shutdown_marks,
    split_phases,
)
from hvbench.kinds.lifecycle.spec import LifecycleWorkloadSpec
from hvbench.model.spec import VmSpec
from hvbench.monitors.sampler import MonitorResult
from hvbench.platforms.qemu import _event_offset
from hvbench.workloads.timeline import Timeline

#: QemuPlatform.timings of a launch() called at t = 100 and a shutdown() at t = 110.
LAUNCH = {"prepared_s": 0.01, "spawned_s": 0.03, "qmp_s": 0.2, "agent_s": 4.5,
          "boot_s": 4.53}
SHUTDOWN = {"shutdown_event_s": 0.04, "exited_s": 0.05, "removed_s": 0.06}


def full_marks(event: bool = True) -> dict[str, float]:
    marks = {"create_start": 99.0, "create_end": 99.99}
    marks |= boot_marks(100.0, LAUNCH)
    marks["init_started"] = 103.5
    timings = SHUTDOWN if event else {k: v for k, v in SHUTDOWN.items()
                                      if k != "shutdown_event_s"}
    return marks | shutdown_marks(110.0, timings)


def test_boot_marks_count_qmp_and_agent_from_the_spawn() -> None:
    marks = boot_marks(100.0, LAUNCH)
    assert marks == pytest.approx({"qemu_start": 100.01, "qmp_answered": 100.23,
                                   "agent_answered": 104.53})
    with pytest.raises(ValueError, match="agent_s"):
        boot_marks(100.0, {k: v for k, v in LAUNCH.items() if k != "agent_s"})


def test_shutdown_marks_fall_back_to_qemu_exit_without_the_event() -> None:
    with_event = shutdown_marks(110.0, SHUTDOWN)
    assert with_event == pytest.approx({"shutdown_requested": 110.0, "powered_off": 110.04,
                                        "qemu_exited": 110.05, "files_removed": 110.06})
    without = shutdown_marks(110.0, {"exited_s": 0.05, "removed_s": 0.06})
    assert without["powered_off"] == without["qemu_exited"]
    with pytest.raises(ValueError, match="removed_s"):
        shutdown_marks(110.0, {"exited_s": 0.05})


def test_split_phases_from_marks() -> None:
    marks = full_marks()
    phases = split_phases(marks)
    assert tuple(phases) == LIFECYCLE_PHASES
    assert phases == pytest.approx({"create": 0.99, "qemu": 0.22, "kernel": 3.27,
                                    "agent": 1.03, "shutdown": 0.04, "exit": 0.02})
    assert gaps(marks) == pytest.approx({"prepare": 0.02, "between": 5.47})
    wall = marks["files_removed"] - marks["create_start"]
    assert sum(phases.values()) + sum(gaps(marks).values()) == pytest.approx(wall)


def test_split_phases_without_shutdown_event_leaves_exit_to_cleanup() -> None:
    phases = split_phases(full_marks(event=False))
    assert phases["shutdown"] == pytest.approx(0.05)
    assert phases["exit"] == pytest.approx(0.01)


def test_marks_missing_or_out_of_order_are_refused() -> None:
    marks = full_marks()
    del marks["init_started"]
    with pytest.raises(ValueError, match="init_started"):
        split_phases(marks)
    late_qmp = full_marks() | {"qmp_answered": 103.6}  # after the /init line
    with pytest.raises(ValueError, match=r"init_started .* comes before qmp_answered"):
        check_order(late_qmp)
    check_order(full_marks())
    assert len(MARKS) == len(set(MARKS)) == 10


def test_console_lines_carry_uptime_and_init_marker() -> None:
    assert guest_uptime("hvbench-stage1: [2.68] loading the root disk drivers") == 2.68
    assert guest_uptime("hvbench-init: [?] stage 2 started") is None
    assert guest_uptime("[    0.000000] Linux version") is None
    lines = [(1.0, "Booting"), (2.0, "hvbench-stage1: [1.5] x"), (3.0, "hvbench-init: [2] y")]
    assert first_init_line(lines) == (2.0, "hvbench-stage1: [1.5] x")
    assert first_init_line(lines[2:]) == (3.0, "hvbench-init: [2] y")
    assert first_init_line(lines[:1]) is None


def test_line_clock_stamps_a_line_with_its_first_bytes() -> None:
    clock = LineClock()
    assert clock.feed(b"hvbench-st", 1.0) == []
    assert clock.feed(b"age1: [1] a\r\nsecond", 1.5) == [(1.0, "hvbench-stage1: [1] a")]
    assert clock.feed(b" line\nthird\n", 2.0) == [(1.5, "second line"), (2.0, "third")]
    assert clock.feed(b"", 3.0) == []


def test_console_watch_reads_a_log_that_appears_late(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    where: list[Path | None] = [None]
    watch = ConsoleWatch(lambda: where[0], interval=0.001)
    watch.start()
    time.sleep(0.01)  # no path yet, then a path whose file does not exist yet
    where[0] = log
    time.sleep(0.01)
    log.write_bytes(b"kernel says hi\nhvbench-stage1: [0.9] go\npartial")
    before_stop = time.monotonic()
    watch.stop()  # the last read happens on the way out
    watch.stop()
    assert [line for _, line in watch.lines] == ["kernel says hi", "hvbench-stage1: [0.9] go"]
    assert all(t <= time.monotonic() for t, _ in watch.lines)
    assert watch.lines[0][0] <= before_stop + 1.0


def test_event_offset_uses_qemu_timestamp_clamped() -> None:
    wall_minus_mono = 1000.0
    event = {"event": "SHUTDOWN", "timestamp": {"seconds": 1010, "microseconds": 250000}}
    # QEMU stamped it at monotonic 10.25; requested at 10.0, read at 10.4.
    assert _event_offset(event, wall_minus_mono, 10.0, 10.4) == pytest.approx(0.25)
    # A stamp after the receipt (a wall-clock step) is clamped to the receipt.
    assert _event_offset(event, wall_minus_mono - 5, 10.0, 10.4) == pytest.approx(0.4)
    assert _event_offset(event, wall_minus_mono + 5, 10.0, 10.4) == 0.0
    assert _event_offset({"event": "SHUTDOWN"}, 0.0, 10.0, 10.3) == pytest.approx(0.3)


def _monitor_result() -> MonitorResult:
    host = [(1.0, {"busy_pct": 2.0}), (2.0, {"busy_pct": 1.0}), (3.0, {"busy_pct": 0.5})]
    q0 = [(1.0, {"total.cpu_pct": 1.0, "total.run_pct": 1.2}),
          (2.0, {"total.cpu_pct": 0.0, "total.run_pct": 0.4})]
    q1 = [(1.0, {"total.cpu_pct": 2.0, "total.run_pct": 2.1}),
          (2.0, {"total.cpu_pct": 1.0, "total.run_pct": 0.9}),
          (3.0, {"total.cpu_pct": 0.0, "total.run_pct": 0.2})]
    summary = {"host.cpu.busy_pct": 1.5, "qemu0.total.cpu_pct": 0.5,
               "qemu1.total.cpu_pct": 1.5, "qemu0.vcpu.cpu_pct": 0.25,
               "qemu1.vcpu.cpu_pct": 0.5, "qemu0.total.run_pct": 0.8,
               "qemu1.total.run_pct": 1.2}
    return MonitorResult(summary=summary,
                         series={"host.cpu": host, "qemu0": q0, "qemu1": q1}, seconds=3.0)


def test_idle_metrics_sum_guests_and_align_series() -> None:
    metrics, series = idle_metrics(_monitor_result(), guests=2, host_cpus=2)
    values = {k: v for k, (v, _) in metrics.items()}
    assert values == pytest.approx({
        "host_busy_pct": 1.5, "qemu_cpu_pct": 2.0, "qemu_cpu_pct_per_guest": 1.0,
        "qemu_vcpu_pct": 0.75, "qemu_run_pct": 2.0, "host_cpus": 2, "guests": 2,
        "window_s": 3.0})
    assert metrics["host_busy_pct"][1] == "%"
    # The series stops at the shortest monitor's (qemu0 has two rows).
    assert [t for t, _ in series] == [1.0, 2.0]
    assert series[0][1] == pytest.approx({"host_busy_pct": 2.0, "qemu_cpu_pct": 3.0,
                                          "qemu_cpu_pct_per_guest": 1.5, "qemu_run_pct": 3.3})


def _life(tmp_path: Path) -> LifeRecord:
    created = CreatedImage(tmp_path / "system.raw", "raw", "copy", 99.0, 99.99, 134217728)
    repo = RepositoryImage(tmp_path / "repository.raw", 134217728, "raw", "ab" * 32, 0.5)
    console = [(103.5, "hvbench-stage1: [2.68] loading"), (104.0, "hvbench-init: [3.1] ready")]
    return LifeRecord(full_marks(), created, repo, False, {"name": "lc", "timings": LAUNCH},
                      console, console[0][1], qmp_event=True)


def test_outcomes_and_raw_document(tmp_path: Path) -> None:
    spec = LifecycleWorkloadSpec(image_size=128 << 20, idle_guests=2, idle_s=3)
    life = _life(tmp_path)
    metrics, series = idle_metrics(_monitor_result(), guests=2, host_cpus=2)
    idle = IdleRecord(metrics, series, {"window_s": 3.0})
    raw = _raw_document(spec, VmSpec(accel="tcg"), life, idle)
    outcomes = lifecycle_outcomes(spec, life, raw, idle)
    assert [o.phase for o in outcomes] == list(spec.phase_list())
    by_phase = {o.phase: o for o in outcomes}
    assert all(o.raw_kind == RAW_KIND and o.raw == raw for o in outcomes)
    assert by_phase["create"].metrics["duration_s"][0] == pytest.approx(0.99)
    assert by_phase["create"].metrics["duration_s"][1] == "s"
    assert by_phase["create"].metrics["size_bytes"] == (134217728.0, "bytes")
    assert by_phase["create"].metrics["mb_s"][0] == pytest.approx(134217728 / 0.99 / 1e6)
    assert by_phase["kernel"].metrics["guest_uptime_s"] == (2.68, "s")
    assert by_phase["shutdown"].metrics["qmp_event"] == (1.0, "flag")
    assert by_phase["qemu"].metrics["prepare_s"][0] == pytest.approx(0.02)
    assert by_phase["idle"].series == series
    doc = json.loads(raw)
    assert doc["marks"]["create_start"] == 0.0
    assert doc["marks"]["files_removed"] == pytest.approx(doc["wall_s"]) == pytest.approx(11.06)
    assert doc["shutdown_boundary"] == "qmp-shutdown-event"
    assert doc["console"][0] == {"t": pytest.approx(4.5), "line": life.init_line,
                                 "guest_uptime_s": 2.68}
    assert doc["idle"] == {"window_s": 3.0}


def test_outcomes_without_idle_guests(tmp_path: Path) -> None:
    spec = LifecycleWorkloadSpec(image_size=128 << 20)
    life = _life(tmp_path)
    outcomes = lifecycle_outcomes(spec, life, "{}", None)
    assert [o.phase for o in outcomes] == list(LIFECYCLE_PHASES)


def test_copy_is_a_durable_byte_copy(tmp_path: Path) -> None:
    source = tmp_path / "repo" / "repository.raw"
    source.parent.mkdir()
    source.write_bytes(bytes(range(256)) * 4096)
    repo = RepositoryImage(source, source.stat().st_size, "raw", "x", 0.0)
    created = create_image("copy", repo, "raw", tmp_path, timeout=30)
    assert created.path.read_bytes() == source.read_bytes()
    assert created.size_bytes == 1 << 20 and created.end >= created.start
    assert created.mb_s > 0
    with pytest.raises(ImageError, match="needs a qcow2 source"):
        create_image("copy", repo, "qcow2", tmp_path, timeout=30)
    with pytest.raises(ImageError, match="needs a raw source"):
        create_image("convert", RepositoryImage(source, 1, "qcow2", "x", 0.0), "qcow2",
                     tmp_path, timeout=30)
    remove_repository(cache := {(repo.size, "raw"): repo})
    assert cache == {} and not source.parent.exists()


def test_deadline_and_guest_name() -> None:
    times = Timeline(60.0, "lifecycle")
    assert 0 < times.remaining("a step") <= 60.0
    with pytest.raises(GuestTimeoutError, match=r"lifecycle.*sampling.*timeout_s = 60 s"):
        times.remaining("sampling", need=120.0)
    assert _guest_name("qemu-tcg/lifecycle #1") == "qemu-tcg-lifecycle-1"
    assert _guest_name("//") == "lifecycle"
