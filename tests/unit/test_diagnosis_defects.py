"""The seven defects of issue 23 ("What went wrong"), each reproduced on a synthetic cell
model (the defect, not the recipe), the honest outcomes, and every rule's fix applied
to every bus, NIC model and backend through the study parser."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, get_args

import pytest

from hvbench.analysis.diagnosis import (
    RULES,
    Finding,
    Verdict,
    apply_changes,
    change_text,
    diagnose,
)
from hvbench.model.spec import CacheMode, DiskBus, NetBackend, NicModel
from hvbench.model.study import parse_study
from hvbench.report.diagnosis import diagnosis_groups, explain_lines, verdict_json
from tests.unit.test_diagnosis import DISK, NATIVE, VM, _vm, model

#: 16 requests in flight through libaio, as a workload definition stores it.
DEEP = {"kind": "disk", "profile": "iozone", "ioengine": "libaio", "iodepth": 16,
        "direct": True}
#: The host device idle behind few requests: the shape of defect 1's cell.
IDLE = {**DISK, "host.disk.vda.avgqu_sz": 0.3, "host.disk.vda.util_pct": 20.0,
        "host.disk.vda.w_await_ms": 1.0, "lat_mean_ms": 4.0, "mb_s": 20.0}
NATIVE_DEEP = {**NATIVE, "host.disk.vda.avgqu_sz": 14.0}


def findings(verdict: Verdict) -> dict[str, Finding]:
    return {f.rule: f for f in [verdict.dominant, *verdict.contributing] if f is not None}


# -- 1. a deep-queue workload called "few in flight" ------------------------------------
def test_deep_queue_workload_is_never_few_in_flight() -> None:
    verdict = diagnose(model(IDLE, native=NATIVE_DEEP, workload=DEEP))
    assert "few-in-flight" not in findings(verdict)
    # Without guest-side samples the loss is named but not placed.
    assert verdict.dominant is not None and verdict.dominant.rule == "depth-not-delivered"
    assert any("asked 16" in e for e in verdict.dominant.evidence)


def test_the_guest_block_layer_places_the_loss() -> None:
    lost = diagnose(model({**IDLE, "guest.disk.vda.avgqu_sz": 15.8}, native=NATIVE_DEEP,
                          workload=DEEP))
    assert lost.dominant is not None and lost.dominant.rule == "lost-in-virt-path"
    assert any("held 15.8" in e for e in lost.dominant.evidence)
    submit = diagnose(model({**IDLE, "guest.disk.vda.avgqu_sz": 1.1,
                             "guest.cpu.busy_pct": 97.0}, native=NATIVE_DEEP, workload=DEEP))
    assert submit.dominant is not None and submit.dominant.rule == "guest-submit-bound"
    assert "depth-not-delivered" not in findings(submit)
    assert submit.dominant.changes == (("vcpus", 2),)


def test_a_guest_with_cpu_to_spare_is_not_told_to_add_vcpus() -> None:
    """guest-submit-bound's own fix (one more vCPU) holds only when the guest's CPU
    was busy; with CPU to spare the fix says where to look (the guest's queue limits
    and scheduler, not sampled), with no change to try."""
    held = {**IDLE, "guest.disk.vda.avgqu_sz": 1.1, "guest.cpu.busy_pct": 35.0}
    spare = diagnose(model(held, native=NATIVE_DEEP, workload=DEEP)).dominant
    assert spare is not None and spare.rule == "guest-submit-bound"
    assert spare.changes == () and "more vCPUs would not" in spare.fix
    assert "nr_requests" in spare.fix
    # The busiest of two vCPU threads saturated, the guest's CPU as a whole at half:
    # one submitting thread, which a third vCPU would not help.
    two = {"kind": "qemu", "vm": {**VM["vm"], "vcpus": 2}}
    one_busy = {**held, "guest.cpu.busy_pct": 50.0, "qemu.vcpu.cpu_pct": 99.0,
                "qemu.vcpu.threads": 2.0, "qemu.vcpu.max_cpu_pct": 97.0}
    one = diagnose(model(one_busy, native=NATIVE_DEEP, workload=DEEP, platform=two)).dominant
    assert one is not None and one.rule == "guest-submit-bound"
    assert one.changes == () and "numjobs" in one.fix and "stay idle" in one.fix
    # The submitting thread moving between the vCPUs: each vCPU thread under half busy,
    # the guest's CPU under half, fio's own job thread all but saturated (the shape of
    # examples/diagnosis/guest-submit-2vcpu.toml's cell under TCG).
    moving = {**held, "guest.cpu.busy_pct": 46.0, "qemu.vcpu.cpu_pct": 79.0,
              "qemu.vcpu.threads": 2.0, "qemu.vcpu.max_cpu_pct": 45.0, "cpu_pct": 97.0}
    spread = diagnose(model(moving, native=NATIVE_DEEP, workload=DEEP, platform=two,
                            accel="tcg")).dominant
    assert spread is not None and spread.rule == "guest-submit-bound"
    assert spread.changes == () and "numjobs" in spread.fix
    assert any("the workload's own thread 97 % of a CPU" in e for e in spread.evidence)
    # Both vCPUs busy: the guest as a whole had no CPU to spare.
    both = diagnose(model({**one_busy, "guest.cpu.busy_pct": 96.0, "qemu.vcpu.cpu_pct": 190.0},
                          native=NATIVE_DEEP, workload=DEEP, platform=two)).dominant
    assert both is not None and both.changes == (("vcpus", 3),)


def test_few_in_flight_only_when_the_workload_asked_for_few() -> None:
    verdict = diagnose(model(IDLE, native=NATIVE))
    assert verdict.dominant is not None and verdict.dominant.rule == "few-in-flight"
    # fio's own depth wins over the definition: it measured what was in flight.
    deep = diagnose(model({**IDLE, "depth_mean": 8.0}, native=NATIVE_DEEP))
    assert "few-in-flight" not in findings(deep)
    # A user's job file without fio's depth: the intent is unknown, the rule abstains.
    job = diagnose(model(IDLE, workload={"kind": "disk", "profile": "fio-job"}))
    assert "few-in-flight" in {r for r, _ in job.abstained}


# -- 2. someone else's I/O blamed on the guest ---------------------------------------------
SMALL = {**DISK, "host.disk.vda.avgrq_sz": 14.0, "mb_s": 20.0}
NATIVE_121 = {**NATIVE, "host.disk.vda.avgrq_sz": 121.0}


def test_another_writer_is_a_shared_device_not_a_shrunk_request() -> None:
    others = {**SMALL, "qemu.io.read_kb_s": 0.0, "qemu.io.write_kb_s": 5_000.0}
    verdict = diagnose(model(others, native=NATIVE_121))
    assert "request-size-shrunk" not in findings(verdict)
    assert verdict.dominant is not None and verdict.dominant.rule == "shared-device"
    assert any("others moved 90 %" in e for e in verdict.dominant.evidence)
    # Others' I/O on an idle device is no cause (the planted throttles ran next to
    # other users' I/O on this shared machine, the device 7-8 % busy).
    idle = {**others, "host.disk.vda.util_pct": 8.0}
    assert "shared-device" not in findings(diagnose(model(idle, native=NATIVE_121)))
    # ... unless it serves each request at least twice as slowly as natively: a device
    # that works in parallel (an SSD, a virtual disk) is slowed before its %util is high.
    slowed = {**idle, "host.disk.vda.w_await_ms": 10.0}
    verdict = diagnose(model(slowed, native=NATIVE_121))
    assert verdict.dominant is not None and verdict.dominant.rule == "shared-device"
    assert "device await 10 ms vs 5 ms natively" in verdict.dominant.evidence
    barely = {**idle, "host.disk.vda.w_await_ms": 9.0}
    assert "shared-device" not in findings(diagnose(model(barely, native=NATIVE_121)))
    mine = {**SMALL, "qemu.io.read_kb_s": 0.0, "qemu.io.write_kb_s": 48_000.0}
    shrunk = findings(diagnose(model(mine, native=NATIVE_121,
                                     workload={**DEEP, "record_size": 65536})))
    assert "request-size-shrunk" in shrunk
    # Intent against delivery: what the workload asked next to what the device got.
    assert shrunk["request-size-shrunk"].evidence[:2] == (
        "the workload asked 128 sectors per request",
        "host avgrq-sz 14 sectors vs 121 sectors natively")


# -- 3. a limit found, the wrong knob named -------------------------------------------------
THROTTLED = {**DISK, "mb_s": 4.0, "host.disk.vda.util_pct": 5.0, "iops": 4.0,
             "host.disk.vda.w_kb_s": 4_000.0, "host.disk.vda.avgqu_sz": 0.5,
             "qemu.vcpu.cpu_pct": 5.0, "qemu.total.cpu_pct": 10.0, "lat_mean_ms": 250.0}
CGROUP = {"io_limits": [{"path": "/sys/fs/cgroup/blkio/hvb/blkio.throttle.write_bps_device",
                         "device": "254:0", "kind": "write_bps", "value": 4_194_304,
                         "remove": "0"}]}


def test_io_limit_names_the_cgroup_limit_actually_found() -> None:
    verdict = diagnose(model(THROTTLED, host_config=CGROUP))
    assert verdict.dominant is not None and verdict.dominant.rule == "io-limit"
    text = " ".join(verdict.dominant.evidence) + verdict.dominant.fix
    assert "blkio.throttle.write_bps_device" in text and "4194304" in text
    assert "bps_limit" not in verdict.dominant.fix and verdict.dominant.changes == ()
    assert verdict.dominant.share_pct is not None


def test_io_limit_without_a_found_limit_names_no_setting() -> None:
    verdict = diagnose(model(THROTTLED))
    assert verdict.dominant is not None and verdict.dominant.rule == "io-limit"
    assert "bps_limit" not in verdict.dominant.fix
    assert any("unidentified" in e for e in verdict.dominant.evidence)


def test_a_limit_the_throughput_sits_at_needs_no_waiting_requests() -> None:
    # The planted read throttle: 9 I/Os per second, QEMU busy emulating the vCPU's idle
    # loop, so its CPU per I/O (59 ms) was more than half of the 111 ms added; the
    # configured limit equal to the throughput decided it, and no flatness was needed.
    busy = {**THROTTLED, "qemu.vcpu.cpu_pct": 45.0, "qemu.total.cpu_pct": 50.0}
    assert "io-limit" not in findings(diagnose(model(busy, series_cov=None)))
    verdict = diagnose(model(busy, series_cov=None, host_config=CGROUP))
    assert verdict.dominant is not None and verdict.dominant.rule == "io-limit"
    assert not any("requests wait" in e for e in verdict.dominant.evidence)
    assert any("requests wait" in e for e in diagnose(
        model(THROTTLED, host_config=CGROUP)).dominant.evidence)  # type: ignore[union-attr]


def test_a_limit_is_matched_on_the_median_repetition() -> None:
    """A limit caps every repetition: one slowed further (0.51 MB/s beside two at 4.18
    on a 4.19 MB/s cgroup limit, the planted read limit's first repetition) moves the
    mean (2.96) off the cap, not the median; without flatness only the match names the
    limiter."""
    slow_first = {**THROTTLED, "mb_s": 2.96}
    mean_only = model(slow_first, series_cov=None, host_config=CGROUP)
    assert "io-limit" not in findings(diagnose(mean_only))
    verdict = diagnose(dataclasses.replace(mean_only, main_median=4.18))
    assert verdict.dominant is not None and verdict.dominant.rule == "io-limit"
    assert any("= the throughput 4.18 MB/s (median of the repetitions)" in e
               for e in verdict.dominant.evidence)


# -- 4. flat from one sample ------------------------------------------------------------
def test_flatness_is_never_a_cov_over_one_repetition() -> None:
    # n = 1: the CoV over repetitions is 0 and says nothing; no series, no flatness.
    one = diagnose(model(THROTTLED, cov=0.0, series_cov=None))
    assert "io-limit" not in findings(one)
    bursty = diagnose(model(THROTTLED, cov=0.0, series_cov=45.0))
    assert "io-limit" not in findings(bursty)
    # Without a series, only a limit found at the throughput is evidence of a limiter.
    at_limit = diagnose(model(THROTTLED, cov=0.0, series_cov=None, host_config=CGROUP))
    assert at_limit.dominant is not None and at_limit.dominant.rule == "io-limit"
    assert any("no series long enough" in e for e in at_limit.dominant.evidence)


# -- 5. the page cache went unnoticed ----------------------------------------------------
def test_a_cached_cell_is_not_a_device_measurement_whatever_its_throughput() -> None:
    # 40 % of native, the device moved a tenth of native's bytes per workload byte.
    slow = {**DISK, "mb_s": 20.0, "host.disk.vda.w_kb_s": 2_000.0}
    verdict = diagnose(model(slow, platform=_vm(cache="writeback")))
    assert verdict.outcome == "not-a-device-measurement"
    assert verdict.why() == "not a device measurement"
    assert verdict.dominant is not None and verdict.dominant.rule == "host-page-cache"
    assert dict(verdict.dominant.changes) == {"disk.cache": "none"}


def test_qemu_opening_the_image_without_o_direct_is_evidence() -> None:
    opened = {"images": [{"path": "/var/tmp/hvbench/disk0.raw", "flags": "0o100002",
                          "o_direct": False}]}
    verdict = diagnose(model(DISK, platform=_vm(cache="writeback"), host_config=opened))
    assert verdict.outcome == "not-a-device-measurement"
    assert any("without O_DIRECT" in e for e in verdict.validity)


def test_a_short_phase_in_a_long_window_is_not_called_cached() -> None:
    # 32 MB at 1.2 GB/s is 27 ms of a 1.1 s window: the window's device rate is no
    # evidence of what the device moved for the workload.
    short = {**DISK, "mb_s": 1200.0, "phase_wall_s": 1.1, "host.disk.vda.w_kb_s": 9_000.0}
    verdict = diagnose(model(short, native={**NATIVE, "mb_s": 1300.0},
                             workload={**DEEP, "file_size": 32_000_000}))
    assert verdict.outcome != "not-a-device-measurement"


# -- 6. fixes hvbench itself refuses -----------------------------------------------------
def _study(platform: dict[str, Any], changes: tuple[tuple[str, Any], ...]) -> str:
    vm = apply_changes(platform, changes)
    lines = ["[study]", 'name = "fix"', "", "[[platform]]", 'kind = "qemu"', 'name = "vm"']
    for key in ("machine", "vcpus", "memory_mib", "accel"):
        if key in vm:
            lines.append(f"{key} = {_toml(vm[key])}")
    for key, items in (("disk", vm["disks"]), ("nic", vm["nics"])):
        if items:
            body = ", ".join(f"{k} = {_toml(v)}" for k, v in items[0].items() if v is not None)
            lines.append(f"{key} = {{ {body} }}")
    lines += ["", "[[workload]]", 'name = "w"', 'kind = "disk"', 'profile = "dd"',
              "direct = true"]
    return "\n".join(lines) + "\n"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else str(value)


def _platform(bus: str, cache: str, model_: str, backend: str) -> dict[str, Any]:
    disk = {"bus": bus, "cache": cache, "aio": "threads", "format": "raw",
            "allocation": "sparse", "size": 64 << 20}
    nic = {"model": model_, "backend": backend}
    return {"kind": "qemu", "vm": {"machine": "pc", "vcpus": 1, "memory_mib": 256,
                                   "disks": [disk], "nics": [nic]}}


@pytest.mark.parametrize("bus", get_args(DiskBus))
def test_every_rule_fix_validates_on_every_bus_nic_and_backend(bus: str) -> None:
    caches: tuple[str, ...] = get_args(CacheMode)
    for cache, nic, backend in itertools.product(caches, get_args(NicModel),
                                                 get_args(NetBackend)):
        platform = _platform(bus, cache, nic, backend)
        cell = model(DISK, platform=platform, accel="tcg")
        for rule in RULES:
            if rule.changes is None:
                continue
            changes = rule.changes(cell)
            parse_study(_study(platform, changes), f"{rule.name}:{bus}/{cache}/{nic}/"
                        f"{backend}", 8 << 30)


def test_an_ide_guest_is_told_the_bus_first_in_study_spelling() -> None:
    ide = model(IDLE, native=NATIVE, platform=_vm(bus="ide", cache="writethrough"))
    verdict = diagnose(ide)
    assert verdict.dominant is not None and verdict.dominant.rule == "few-in-flight"
    text = change_text(verdict.dominant.changes)
    assert 'bus = "virtio-blk"' in text and "iothread = true" in text
    assert 'cache = "none"' in text and 'aio = "native"' in text  # aio=native needs it
    assert "iothread=true" not in text


# -- 7. a symptom ranked above its cause ---------------------------------------------------
def test_a_symptom_never_outranks_emulation_of_a_busy_vcpu() -> None:
    busy = {**IDLE, "qemu.vcpu.cpu_pct": 80.0}
    verdict = diagnose(model(busy, native=NATIVE_DEEP, workload=DEEP, accel="tcg"))
    assert verdict.dominant is not None and verdict.dominant.rule == "tcg-emulation"
    symptom = findings(verdict)["depth-not-delivered"]
    assert not symptom.carries_to_kvm
    shrunk = diagnose(model({**busy, "host.disk.vda.avgrq_sz": 15.0}, native=NATIVE_DEEP,
                            workload=DEEP, accel="tcg"))
    assert shrunk.dominant is not None and shrunk.dominant.rule == "tcg-emulation"
    assert not findings(shrunk)["request-size-shrunk"].carries_to_kvm
    # Measured at both ends, the guest's requests whole and the host's shrunk: the split
    # is below the guest, where a busy emulated vCPU does not act (the planted qcow2
    # image with clusters allocated in random order: guest 463 sectors, host 131).
    placed = diagnose(model({**busy, "host.disk.vda.avgrq_sz": 15.0,
                             "guest.disk.vda.avgrq_sz": 900.0}, native=NATIVE_DEEP,
                            workload=DEEP, accel="tcg"))
    assert placed.dominant is not None and placed.dominant.rule == "request-size-shrunk"
    assert placed.dominant.carries_to_kvm
    assert "tcg-emulation" in findings(placed)
    # A specific cause with its own evidence still outranks emulation.
    flushing = {**busy, "host.disk.vda.f_s": 100.0}
    writethrough = diagnose(model(flushing, native=NATIVE_DEEP, workload=DEEP, accel="tcg",
                                  platform=_vm(cache="writethrough")))
    assert writethrough.dominant is not None
    assert writethrough.dominant.rule == "flush-per-write"


# -- honest outcomes ----------------------------------------------------------------------
def test_unexplained_lists_the_metrics_furthest_from_native() -> None:
    odd = {**DISK, "mb_s": 20.0, "host.disk.vda.w_await_ms": 40.0, "lat_mean_ms": 41.0}
    verdict = diagnose(model(odd))
    assert verdict.dominant is None and verdict.outcome == "unexplained"
    assert any(u.startswith("res.disk.await_ms 40 vs 5 natively") for u in verdict.unusual)
    data = verdict_json(verdict)
    assert data["outcome"] == "unexplained" and data["unusual"] == list(verdict.unusual)
    ((group),) = diagnosis_groups([verdict])
    assert group.fix is None
    lines = group.cells[0].lines
    assert lines[0][0] == "outcome" and lines[0][1].startswith("unexplained")
    assert ("furthest from native", verdict.unusual[0]) in lines
    assert any("furthest from native" in line for line in explain_lines(verdict))


def test_near_native_and_baseline_outcomes() -> None:
    assert diagnose(model(DISK)).outcome == "near-native"
    native = model(DISK, platform={"kind": "native"})
    assert diagnose(native).outcome == "baseline"
    assert VM["kind"] == "qemu"


def test_an_iops_limit_is_matched_at_the_cells_bytes_per_io() -> None:
    # 4 I/Os per second of 1 MB: a 4 I/O-per-second cgroup limit is the 4 MB/s measured
    # (no series: only a limit the throughput sits at identifies it).
    iops = {"io_limits": [{**CGROUP["io_limits"][0], "kind": "write_iops", "value": 4,
                           "path": "/sys/fs/cgroup/blkio/hvb/blkio.throttle.write_iops_device"}]}
    verdict = diagnose(model(THROTTLED, series_cov=None, host_config=iops))
    assert verdict.dominant is not None and verdict.dominant.rule == "io-limit"
    assert "blkio.throttle.write_iops_device" in verdict.dominant.fix
    assert verdict.dominant.share_pct is not None
    # An I/O rate the cell is far from is not the limiter it sits at.
    far = {"io_limits": [{**iops["io_limits"][0], "value": 400}]}
    assert "io-limit" not in findings(diagnose(model(THROTTLED, series_cov=None,
                                                     host_config=far)))
