"""Bounds a run must stay within, for CI: parse a bounds file, evaluate it on rows.

Pure: :func:`parse_bounds` takes the file's text and its path (for messages);
:func:`evaluate` takes stored rows. The CLI reads the files, prints the table and
exits non-zero when a bound fails.

The file (TOML)::

    [[bound]]
    name = "guest dd write"      # optional, shown in the table
    metric = "mb_s"              # fnmatch patterns: metric, platform, workload, phase
    platform = "guest.*"         # default "*"
    workload = "dd"
    phase = "write"
    stat = "mean"                # mean | median | min | max over the repetitions
    min = 80                     # and/or max = ...
    # or: mid = 110 and tolerance_pct = 20   (mid +/- 20 %)
    # or: mid = 110 and tolerance_noise = 3  (mid +/- 3 x this host's noise floor: one
    #     repetition's A/A spread in %, measured by `hvbench noise` for that cell)
    # of_native = true: the value is the stat in % of the native platform's mean

Every (platform, workload, phase, metric) the patterns match is checked; a bound that
matches nothing fails (a renamed metric must not pass silently).
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hvbench.analysis.stats import Summary, summarize
from hvbench.analysis.summaries import Row
from hvbench.errors import SpecError
from hvbench.model.problems import did_you_mean
from hvbench.model.spec import spec_error

__all__ = ["Bound", "BoundResult", "BoundsFile", "evaluate", "parse_bounds"]

Stat = Literal["mean", "median", "min", "max"]
Status = Literal["pass", "fail", "missing"]


class Bound(BaseModel):
    """One ``[[bound]]``: where it applies, which statistic, and its limits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    metric: str = Field(min_length=1)
    platform: str = "*"
    workload: str = "*"
    phase: str = "*"
    stat: Stat = "mean"
    of_native: bool = False
    min: float | None = None
    max: float | None = None
    mid: float | None = None
    tolerance_pct: float | None = Field(default=None, ge=0)
    #: k: mid +/- k times the host's noise floor (one repetition's A/A spread, %).
    tolerance_noise: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _check(self) -> Bound:
        has_range = self.min is not None or self.max is not None
        tolerances = (self.tolerance_pct is not None) + (self.tolerance_noise is not None)
        has_mid = self.mid is not None or tolerances > 0
        if has_range and has_mid:
            raise ValueError("give either min/max or mid with a tolerance, not both")
        if not has_range and not has_mid:
            raise ValueError("a bound needs min and/or max, or mid with tolerance_pct or "
                             "tolerance_noise")
        if tolerances > 1:
            raise ValueError("give tolerance_pct or tolerance_noise, not both")
        if has_mid and (self.mid is None or tolerances == 0):
            raise ValueError("mid goes with tolerance_pct (mid +/- tolerance_pct %) or "
                             "tolerance_noise (mid +/- k x the host's noise floor)")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min:g}) is above max ({self.max:g})")
        return self

    def limits(self, noise_pct: float | None = None) -> tuple[float | None, float | None]:
        """(low, high), either may be None (unbounded); a ``tolerance_noise`` bound
        needs ``noise_pct`` (the cell's A/A spread, %) and is (None, None) without it."""
        tolerance = self.tolerance_pct
        if self.tolerance_noise is not None:
            tolerance = None if noise_pct is None else self.tolerance_noise * noise_pct
        if self.mid is not None and tolerance is not None:
            spread = abs(self.mid) * tolerance / 100.0
            return self.mid - spread, self.mid + spread
        return self.min, self.max

    def label(self, index: int) -> str:
        """The bound's name, or ``#N`` (1-based position in the file)."""
        return self.name or f"#{index + 1}"


class BoundsFile(BaseModel):
    """A bounds file: one or more ``[[bound]]`` tables."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bound: tuple[Bound, ...] = Field(min_length=1)


def parse_bounds(text: str, source: str) -> BoundsFile:
    """Parse and validate a bounds file.

    Raises:
        SpecError: not TOML, or a field is unknown, missing or of the wrong type; one
            line naming ``source``, the field path (``bound[2].min``) and what was expected.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{source}: not valid TOML: {exc}") from exc
    try:
        return BoundsFile.model_validate(data)
    except ValidationError as exc:
        raise spec_error(exc, source, model=BoundsFile) from exc


@dataclass(frozen=True)
class BoundResult:
    """One bound checked on one (platform, workload, phase, metric)."""

    bound: str
    platform: str
    workload: str
    phase: str
    metric: str
    stat: str
    value: float | None
    low: float | None
    high: float | None
    status: Status
    note: str = ""


Group = tuple[str, str, str, str]


def _groups(rows: Iterable[Row]) -> dict[Group, list[float]]:
    out: dict[Group, list[float]] = defaultdict(list)
    for row in rows:
        out[(row.platform, row.workload, row.phase, row.metric)].append(row.value)
    return out


def _matches(bound: Bound, group: Group) -> bool:
    patterns = (bound.platform, bound.workload, bound.phase, bound.metric)
    return all(fnmatch.fnmatchcase(v, p) for v, p in zip(group, patterns, strict=True))


def _missing_note(bound: Bound, groups: Iterable[Group]) -> str:
    """Why a bound matched nothing: when no measured metric matches its ``metric``,
    the closest metric names (a typo is the usual reason)."""
    metrics = sorted({g[3] for g in groups})
    if any(fnmatch.fnmatchcase(m, bound.metric) for m in metrics):
        return "no measurement matches"
    return f"no such metric{did_you_mean(bound.metric, metrics)}"


def _stat(summary: Summary, stat: Stat) -> float:
    return {"mean": summary.mean, "median": summary.median, "min": summary.min,
            "max": summary.max}[stat]


def _value(bound: Bound, group: Group, groups: Mapping[Group, list[float]],
           natives: Mapping[str, str | None]) -> tuple[float | None, str]:
    """The checked value, or None and why there is none."""
    value = _stat(summarize(groups[group]), bound.stat)
    if not bound.of_native:
        return value, ""
    native = natives.get(group[1])
    baseline = groups.get((native, *group[1:])) if native else None
    if not baseline:
        return None, f"no native baseline for workload {group[1]}"
    mean = summarize(baseline).mean
    if mean == 0:
        return None, "the native mean is 0"
    return value / mean * 100.0, f"% of {native}"


def _check(bound: Bound, label: str, group: Group, groups: Mapping[Group, list[float]],
           natives: Mapping[str, str | None], *, noise: Mapping[Group, float]
           ) -> BoundResult:
    low, high = bound.limits(noise.get(group))
    value, note = _value(bound, group, groups, natives)
    if bound.tolerance_noise is not None and group not in noise:
        return BoundResult(label, *group, stat=bound.stat, value=None, low=None, high=None,
                           status="fail", note="no noise floor of this cell on this host "
                                               "(measure one with hvbench noise)")
    ok = value is not None and (low is None or value >= low) and (high is None or value <= high)
    return BoundResult(label, *group, stat=bound.stat, value=value, low=low, high=high,
                       status="pass" if ok else "fail", note=note)


def evaluate(bounds: BoundsFile, rows: Iterable[Row],
             natives: Mapping[str, str | None] | None = None,
             noise: Mapping[Group, float] | None = None) -> list[BoundResult]:
    """Check every bound on every group it matches, in file order. A bound matching
    nothing gives one ``missing`` result; ``of_native`` bounds skip the native platform
    itself (always 100 %). ``noise``: the host's A/A spread (%) per (platform, workload,
    phase, metric), for ``tolerance_noise`` bounds (a group without one fails, saying
    so)."""
    groups = _groups(rows)
    natives = natives or {}
    noise = noise or {}
    out: list[BoundResult] = []
    for index, bound in enumerate(bounds.bound):
        label = bound.label(index)
        matched = [g for g in groups if _matches(bound, g)
                   and not (bound.of_native and natives.get(g[1]) == g[0])]
        low, high = bound.limits()
        if not matched:
            out.append(BoundResult(label, bound.platform, bound.workload, bound.phase,
                                   bound.metric, bound.stat, None, low, high, "missing",
                                   _missing_note(bound, groups)))
        out += [_check(bound, label, g, groups, natives, noise=noise) for g in matched]
    return out


def failed(results: Sequence[BoundResult]) -> bool:
    """True when any result is not a pass."""
    return any(r.status != "pass" for r in results)
