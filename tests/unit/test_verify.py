"""explain --verify's pure half: which verdicts get a verification, the study it runs
(validated by the study parser), and the outcome read from its paired measurements."""

from __future__ import annotations

import math

import pytest

from hvbench.analysis.diagnosis import Finding, Verdict
from hvbench.analysis.verify import (
    Plan,
    Unverifiable,
    VerifyResult,
    classify,
    grouped,
    plan,
    study_text,
)
from hvbench.kinds.disk.spec import DiskWorkloadSpec
from hvbench.model.study import declared_vm, parse_study
from hvbench.run.cells.base import as_spec

PLATFORM = {"kind": "qemu", "vm": {
    "accel": "auto", "machine": "pc", "memory_mib": 256, "vcpus": 1, "nics": [],
    "disks": [{"bus": "ide", "cache": "writeback", "size": 100663296, "format": "raw",
               "allocation": "preallocated", "aio": "threads", "iothread": False}]}}
WORKLOAD = {"kind": "disk", "profile": "iozone", "target": "device", "direct": True,
            "file_size": 33554432, "record_size": 1048576, "phases": ["write", "read"],
            "job_file": None}


def _finding(rule: str, changes: tuple[tuple[str, object], ...]) -> Finding:
    return Finding(rule, rule, 2.0, ("evidence",), "fix", True, changes=changes)


def _verdict(*findings: Finding, outcome: str = "cause") -> Verdict:
    return Verdict("io", "read", "vm", 40.0, findings[0] if findings else None,
                   tuple(findings[1:]), outcome=outcome)


def test_the_first_fix_this_host_can_apply_is_verified() -> None:
    kvm = _finding("tcg-emulation", (("accel", "kvm"),))
    bus = _finding("emulated-controller", (("disk.bus", "virtio-blk"),))
    made = plan(_verdict(kvm, bus), PLATFORM)
    assert isinstance(made, Plan)
    assert (made.rule, made.fix, made.fixed) == (
        "emulated-controller", 'disk = { bus = "virtio-blk" }', "vm+fix")


@pytest.mark.parametrize(("verdict", "platform", "why"), [
    (_verdict(_finding("tcg-emulation", (("accel", "kvm"),))), PLATFORM, "needs KVM"),
    (_verdict(_finding("shared-device", ())), PLATFORM, "no cause has a fix"),
    (_verdict(outcome="unexplained"), PLATFORM, "outcome unexplained"),
    (_verdict(_finding("emulated-controller", (("disk.bus", "virtio-blk"),))),
     {"kind": "libvirt", "vm": {}}, "kind qemu"),
])
def test_what_cannot_be_verified_says_why(verdict: Verdict, platform: dict[str, object],
                                          why: str) -> None:
    made = plan(verdict, platform)
    assert isinstance(made, Unverifiable) and why in made.reason


def test_the_verification_study_validates_and_differs_only_in_the_fix() -> None:
    the_plan = Plan("vm/io/read", "io", "read", "few-in-flight",
                    (("disk.bus", "virtio-blk"), ("workload.iodepth", 16)), "vm", "vm+fix")
    text = study_text(the_plan, PLATFORM, WORKLOAD, run_id="r1", repetitions=4)
    study = parse_study(text, "/tmp/verify.toml", 24 << 30)
    assert study.study.ab == ("vm", "vm+fix") and study.study.repetitions == 4
    original, fixed = (declared_vm(p.spec) for p in study.platforms)
    assert (original.disks[0].bus, fixed.disks[0].bus) == ("ide", "virtio-blk")
    assert original.model_dump(mode="json") == {**fixed.model_dump(mode="json"), "disks": [
        {**fixed.model_dump(mode="json")["disks"][0], "bus": "ide"}]}
    [workload] = study.workloads
    assert as_spec(workload.spec, DiskWorkloadSpec).iodepth == 16


def _plan() -> Plan:
    return Plan("vm/io/read", "io", "read", "r", (("disk.bus", "virtio-blk"),), "vm", "vm+fix")


def _rows(fixed: list[float], original: list[float]) -> list[tuple[str, int, str, str, float]]:
    return [*(("vm+fix", r, "read", "mb_s", v) for r, v in enumerate(fixed)),
            *(("vm", r, "read", "mb_s", v) for r, v in enumerate(original)),
            ("vm+fix", 0, "write", "mb_s", 1.0)]


@pytest.mark.parametrize(("fixed", "original", "outcome"), [
    ([200, 210, 205, 199], [100, 104, 101, 98], "confirmed"),
    ([100, 101, 99, 100], [100, 100, 100, 101], "no effect"),
    ([50, 52, 49, 51], [100, 104, 101, 98], "worse"),
    ([150, 80, 130, 95], [100, 100, 100, 100], "inconclusive"),
])
def test_the_outcome_follows_the_paired_interval(fixed: list[float], original: list[float],
                                                 outcome: str) -> None:
    result = classify(_plan(), "mb_s", _rows(fixed, original))
    assert isinstance(result, VerifyResult)
    assert result.outcome == outcome and result.pairs == 4
    logs = [math.log(f / o) for f, o in zip(fixed, original, strict=True)]
    assert result.ratio == pytest.approx(math.exp(sum(logs) / 4))


def test_a_lower_is_better_metric_is_turned_and_a_noise_floor_widens_the_margin() -> None:
    rows = [*(("vm+fix", r, "read", "lat_mean_ms", v) for r, v in enumerate([1.0, 1.1, 0.9])),
            *(("vm", r, "read", "lat_mean_ms", v) for r, v in enumerate([2.0, 2.1, 1.9]))]
    result = classify(_plan(), "lat_mean_ms", rows)
    assert isinstance(result, VerifyResult) and result.outcome == "confirmed"
    assert result.ratio == pytest.approx(2.0, rel=0.05)
    wide = classify(_plan(), "lat_mean_ms", rows, floor_pcts=[150.0])
    assert isinstance(wide, VerifyResult) and wide.margin == 1.5
    assert wide.outcome == "no effect"  # a 2x effect inside a ±150 % noise margin


def test_too_few_pairs_give_no_outcome() -> None:
    assert isinstance(classify(_plan(), "mb_s", _rows([2, 2], [1, 1])), Unverifiable)


def test_phases_of_one_workload_with_one_fix_share_a_run() -> None:
    a = _plan()
    b = Plan("vm/io/write", "io", "write", "r", a.changes, "vm", "vm+fix")
    c = Plan("vm/io/read", "io", "read", "r2", (("disk.cache", "none"),), "vm", "vm+fix")
    assert grouped([a, b, c]) == [(a, b), (c,)]
