"""``hvbench explain --verify``: is a named cause confirmed by applying its fix?

Pure. For a verdict whose fix is a configuration change (:attr:`Finding.changes`), a
*verification study* holds the cell's platform as stored and the same platform with the
fix applied, as an A/B pair (``[study] ab``: the two run back to back in every
repetition, in ABBA order, so that drift cancels in the pairs), with the cell's workload
as stored. It is an ordinary study file: validated like any other and stored as the
text of its run. One verification run serves every phase of the workload whose verdict
names the same fix on the same platform.

The measured effect is the paired ratio fixed / original of the cell's headline metric,
turned so that better is above 1, with its 95 % interval (the per-repetition log ratios,
:func:`hvbench.analysis.replication.log_ratio_interval`). With the margin ``δ`` (10 %,
or this host's stored noise floor of the cell when that is larger:
:func:`hvbench.analysis.replication.margin`) the outcome is

- ``confirmed``: the whole interval is above ``1 + δ`` (the fix helps beyond noise);
- ``no effect``: the whole interval lies within ``[1/(1+δ), 1+δ]``;
- ``worse``: the whole interval is below ``1/(1+δ)``;
- ``inconclusive``: none of these (the interval straddles a bound), with the
  repetitions a decision would likely need.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from hvbench.analysis.diagnosis import Change, Finding, Verdict, apply_changes, change_text
from hvbench.analysis.metrics import direction_of
from hvbench.analysis.replication import (
    MIN_REPETITIONS,
    log_ratio_interval,
    margin,
    needed_repetitions,
)
from hvbench.errors import SpecError
from hvbench.model import settings
from hvbench.model.stored import load_platform
from hvbench.model.tune import toml_value

__all__ = ["DEFAULT_REPETITIONS", "Plan", "Unverifiable", "VerifyOutcome", "VerifyResult",
           "classify", "grouped", "plan", "study_text"]

#: Repetitions of the A/B pair: two ABBA rounds, the fewest with a paired interval on
#: 3 degrees of freedom.
DEFAULT_REPETITIONS = 4
#: Fixes this host cannot apply: KVM is what the fix asks for, and its absence is why.
_HOST_BOUND = {"accel": "kvm"}

VerifyOutcome = Literal["confirmed", "no effect", "worse", "inconclusive"]


@dataclass(frozen=True)
class Plan:
    """One verification: the verdict's cell, the finding whose fix is applied, and the
    A/B platforms' names in the verification study."""

    cell: str
    workload: str
    phase: str
    rule: str
    changes: tuple[Change, ...]
    original: str
    fixed: str

    @property
    def fix(self) -> str:
        """The fix as a study file writes it."""
        return change_text(self.changes)


@dataclass(frozen=True)
class Unverifiable:
    """A verdict that cannot be verified, and why (one line)."""

    cell: str
    reason: str


@dataclass(frozen=True)
class VerifyResult:
    """The measured effect of one plan's fix."""

    plan: Plan
    metric: str
    #: fixed / original, turned so that above 1 is better; NaN bounds without an interval.
    ratio: float
    low: float
    high: float
    pairs: int
    margin: float
    outcome: VerifyOutcome
    #: ``inconclusive``: the pairs a decision would likely need (None: not estimable).
    needed: int | None = None


def _host_bound(finding: Finding) -> bool:
    return any(_HOST_BOUND.get(key) == value for key, value in finding.changes)


def plan(verdict: Verdict, platform_def: Mapping[str, Any]) -> Plan | Unverifiable:
    """The verification of ``verdict``: its dominant cause's fix, else the first
    contributing cause's, among the fixes in study syntax that this host can apply;
    or why there is none."""
    if verdict.native or verdict.outcome != "cause":
        return Unverifiable(verdict.cell, f"outcome {verdict.outcome}: no cause to verify")
    try:
        stored = load_platform(platform_def, f"cell {verdict.cell}")
    except SpecError as exc:
        return Unverifiable(verdict.cell, "its stored platform is not one this version "
                                          f"can re-run: {str(exc).splitlines()[0]}")
    if not stored.spec.RERUNS_WITH_FIX:
        return Unverifiable(verdict.cell, "only a guest hvbench defines (kind qemu) can be "
                                          f"re-run with a fix; this is {stored.spec.kind!r}")
    fixable = [f for f in (verdict.dominant, *verdict.contributing)
               if f is not None and f.changes]
    finding = next((f for f in fixable if not _host_bound(f)), None)
    if finding is None:
        why = ("no cause has a fix in study syntax" if not fixable else
               f"{fixable[0].rule}: its fix ({change_text(fixable[0].changes)}) needs KVM, "
               "which this host cannot run")
        return Unverifiable(verdict.cell, why)
    return Plan(verdict.cell, verdict.workload, verdict.phase, finding.rule,
                tuple(finding.changes), verdict.platform, f"{verdict.platform}+fix")


def _table(header: str, fields: Mapping[str, Any]) -> list[str]:
    return [header, *(f"{key} = {toml_value(value)}" for key, value in fields.items()
                      if value is not None), ""]


def study_text(the_plan: Plan, platform_def: Mapping[str, Any],
               workload_def: Mapping[str, Any], *, run_id: str,
               repetitions: int = DEFAULT_REPETITIONS) -> str:
    """The verification study of ``the_plan`` as TOML, from the stored definitions of
    the cell's platform and workload (validate it with the study parser)."""
    vm = dict(settings.vm_of(platform_def))
    fixed_vm = apply_changes(platform_def, the_plan.changes)
    workload = {k: v for k, v in workload_def.items() if k != "name"}
    for key, value in the_plan.changes:
        group, _, name = key.partition(".")
        if group == "workload":
            workload[name] = value
    lines = [
        f"# hvbench explain --verify of run {run_id}, cell {the_plan.cell}:",
        f"# cause {the_plan.rule}, fix: {the_plan.fix}",
        *_table("[study]", {
            "name": f"verify {the_plan.rule} on {the_plan.original}",
            "repetitions": repetitions,
            "ab": [the_plan.original, the_plan.fixed],
        }),
        *_table("[[platform]]", {"kind": "qemu", "name": the_plan.original, **vm}),
        *_table("[[platform]]", {"kind": "qemu", "name": the_plan.fixed, **fixed_vm}),
        *_table("[[workload]]", {"name": the_plan.workload, **workload}),
    ]
    return "\n".join(lines)


def grouped(plans: Sequence[Plan]) -> list[tuple[Plan, ...]]:
    """Plans that one verification run serves: the same platform, workload and fix
    (several phases of one workload), in first-seen order."""
    groups: dict[tuple[str, str, tuple[Change, ...]], list[Plan]] = {}
    for p in plans:
        groups.setdefault((p.original, p.workload, p.changes), []).append(p)
    return [tuple(g) for g in groups.values()]


def _per_repetition(rows: Sequence[tuple[str, int, str, str, float]], platform: str,
                    phase: str, metric: str) -> dict[int, float]:
    return {rep: value for plat, rep, ph, met, value in rows
            if plat == platform and ph == phase and met == metric}


def classify(the_plan: Plan, metric: str,
             rows: Sequence[tuple[str, int, str, str, float]],
             floor_pcts: Sequence[float] = ()) -> VerifyResult | Unverifiable:
    """The verification's outcome from the verification run's measurements
    (``(platform, repetition, phase, metric, value)``) of the cell's phase."""
    direction = direction_of(metric)
    if direction == "neutral":
        return Unverifiable(the_plan.cell, f"{metric} has no better direction")
    fixed = _per_repetition(rows, the_plan.fixed, the_plan.phase, metric)
    original = _per_repetition(rows, the_plan.original, the_plan.phase, metric)
    a, b = (fixed, original) if direction == "higher" else (original, fixed)
    interval = log_ratio_interval(a, b)
    if interval is None or interval.n < MIN_REPETITIONS:
        return Unverifiable(the_plan.cell, f"too few positive values of {metric} "
                                           f"({len(fixed)} fixed, {len(original)} original)")
    delta = margin(floor_pcts)
    d = math.log1p(delta)
    outcome: VerifyOutcome = "inconclusive"
    needed = None
    if interval.has_interval:
        if interval.log_low > d:
            outcome = "confirmed"
        elif interval.log_high < -d:
            outcome = "worse"
        elif -d <= interval.log_low and interval.log_high <= d:
            outcome = "no effect"
    if outcome == "inconclusive":
        needed = needed_repetitions(interval, interval.log_mean, (-d, d))
    return VerifyResult(the_plan, metric, interval.ratio, interval.low, interval.high,
                        interval.n, delta, outcome, needed)

