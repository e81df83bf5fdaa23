"""The planted matrix (examples/diagnosis, issue 23 item 8) is consistent: every study
parses and has planted cells, every planted cause is a rule (or a clean guest), and
bench/diagnosis_accuracy.py scores verdicts as documented (top-1, right fix, clean
guests, the confusion matrix)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hvbench.analysis.diagnosis import RULES
from hvbench.model.study import parse_study
from tests.unit.bench_scripts import load_bench

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "examples" / "diagnosis"
MATRIX: dict[str, Any] = json.loads((SUITE / "expected.json").read_text())
PLANTED = {k: v for k, v in MATRIX.items() if not k.startswith("_")}


BENCH = load_bench("diagnosis_accuracy")


def test_every_study_parses_and_is_planted() -> None:
    studies = {p.stem for p in SUITE.glob("*.toml")}
    assert studies == set(PLANTED)
    assert set(MATRIX["_make_test"]) <= studies
    rules = {r.name for r in RULES} | {BENCH.CLEAN}
    kinds: set[str] = set()
    for name in sorted(studies):
        path = SUITE / f"{name}.toml"
        study = parse_study(path.read_text(), str(path), 24 << 30)
        kinds |= {w.spec.kind for w in study.workloads}
        for spec in PLANTED[name].values():
            assert BENCH.planted_cause(spec)[0] in rules, name
    assert {"disk", "network", "web"} <= kinds
    assert sum(len(cells) for cells in PLANTED.values()) >= 24


def _verdict(rule: str | None, outcome: str = "cause", fix: str = "",
             changes: tuple[tuple[str, Any], ...] = ()) -> dict[str, Any]:
    dominant = None if rule is None else {
        "rule": rule, "fix_detail": fix, "changes": [{"key": k, "value": v}
                                                     for k, v in changes]}
    return {"cell": "vm/w/read", "phase": "read", "outcome": outcome, "dominant": dominant}


FIXES = {"io-limit": "remove the limit", "few-in-flight": "more at once",
         "depth-not-delivered": "a shorter path"}


@pytest.mark.parametrize(("verdict", "spec", "ok", "right_fix"), [
    (_verdict("io-limit", fix="remove the limit"), "io-limit", True, True),
    # Another rule with the planted rule's fix: the right fix under a wrong name.
    (_verdict("depth-not-delivered", fix="more at once"), "few-in-flight", False, True),
    (_verdict(None, "unexplained"), "io-limit", False, False),
    # A clean guest: nothing specific, or only the accelerator's own cost.
    (_verdict(None, "near-native"), "none", True, True),
    (_verdict("tcg-emulation", fix="accel=kvm"), "none", True, True),
    (_verdict("io-limit", fix="remove the limit"), "none", False, False),
    # A fix given as configuration changes must be exactly those.
    (_verdict("host-page-cache", changes=(("disk.cache", "none"),)),
     {"rule": "host-page-cache", "fix": {"disk.cache": "none"}}, True, True),
    (_verdict("host-page-cache", changes=(("disk.cache", "directsync"),)),
     {"rule": "host-page-cache", "fix": {"disk.cache": "none"}}, True, False),
    # A fix outside the study file must name one of the listed control files.
    (_verdict("io-limit", fix="write \"254:0 0\" to /cg/blkio.throttle.read_bps_device"),
     {"rule": "io-limit", "fix_names": ["blkio.throttle.read_bps_device", "io.max"]},
     True, True),
    (_verdict("io-limit", fix="raise or remove bps_limit on the disk"),
     {"rule": "io-limit", "fix_names": ["blkio.throttle.read_bps_device", "io.max"]},
     True, False),
    (_verdict("cpu-quota", fix="write -1 to /cg/cpu.cfs_quota_us"),
     {"rule": "cpu-quota", "fix_names": "cpu.cfs_quota_us"}, True, True),
])
def test_scoring(verdict: dict[str, Any], spec: Any, ok: bool, right_fix: bool) -> None:
    scored = BENCH.score(verdict, spec, FIXES)
    assert (scored["ok"], scored["right_fix"]) == (ok, right_fix)
    assert scored["unexplained"] == (verdict["outcome"] == "unexplained")


def test_summary_and_confusion_matrix() -> None:
    verdicts = [_verdict("io-limit", fix="remove the limit"),
                _verdict(None, "unexplained"),
                {**_verdict("few-in-flight", fix="more at once"), "cell": "vm/s/randread"}]
    planted = {"vm/w/*": "io-limit", "vm/s/*": "few-in-flight", "vm/gone/*": "io-limit"}
    results = BENCH.match(verdicts, planted, FIXES)
    # Two verdicts match vm/w/*, one vm/s/*; no cell matches vm/gone/*: a miss.
    assert [r["label"] for r in results] == ["io-limit", "(unexplained)", "few-in-flight",
                                             "(no such cell)"]
    summary = BENCH.summarize(results, rounds=1)
    assert summary["top1_accuracy"] == pytest.approx(0.5)
    assert summary["right_fix_rate"] == pytest.approx(0.5)
    assert summary["unexplained_rate"] == pytest.approx(0.25)
    assert summary["confusion"] == {
        "few-in-flight": {"few-in-flight": 1},
        "io-limit": {"(no such cell)": 1, "(unexplained)": 1, "io-limit": 1}}
    lines = BENCH.confusion_lines(summary["confusion"])
    assert lines[0].split() == ["planted", "\\", "named", "(no", "such", "cell)",
                                "(unexplained)", "few-in-flight", "io-limit"]
    assert lines[2].split() == ["io-limit", "1", "1", ".", "1"]


def test_the_figures_over_quiet_studies_leave_out_a_busy_hosts() -> None:
    # On a host busy with other work the planted truth no longer holds: the quiet
    # figures count only the studies during which the host was otherwise idle.
    verdicts = [_verdict("io-limit", fix="remove the limit"), _verdict(None, "unexplained")]
    results = BENCH.match(verdicts, {"vm/w/*": "io-limit"}, FIXES)
    results[0]["quiet"], results[1]["quiet"] = True, False
    summary = BENCH.summarize(results, rounds=1)
    assert summary["top1_accuracy"] == pytest.approx(0.5)
    assert (summary["quiet_cells"], summary["quiet_correct"]) == (1, 1)
    assert summary["quiet_top1_accuracy"] == pytest.approx(1.0)

