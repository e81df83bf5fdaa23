"""``hvbench explain --verify`` presented: one block per verified cause (the fix, the
measured effect with its interval and the outcome) and the verdicts that could not be
verified, as text and as JSON-ready data. The outcomes are pure analysis
(:mod:`hvbench.analysis.verify`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from hvbench.analysis.verify import Unverifiable, VerifyResult

__all__ = ["OUTCOME_TEXT", "verify_json", "verify_lines"]

#: How each outcome reads.
OUTCOME_TEXT = {
    "confirmed": "confirmed: the fix moves the metric beyond the noise margin",
    "no effect": "not confirmed: the fix's effect lies within the noise margin",
    "worse": "contradicted: the fix makes the metric worse beyond the noise margin",
    "inconclusive": "inconclusive: the interval straddles the noise margin",
}


def _interval(result: VerifyResult) -> str:
    if math.isnan(result.low):
        return f"x{result.ratio:.3g} (no interval)"
    return f"x{result.ratio:.3g} [{result.low:.3g}, {result.high:.3g}]"


def _result_lines(result: VerifyResult, run_id: str) -> list[str]:
    plan = result.plan
    lines = [
        f"{plan.cell}: {plan.rule}",
        f"  fix: {plan.fix}",
        f"  measured: {result.metric} fixed/original {_interval(result)} over "
        f"{result.pairs} ABBA pairs (better above 1; margin ±{result.margin * 100:.0f} %)",
        f"  {OUTCOME_TEXT[result.outcome]}",
    ]
    if result.outcome == "inconclusive" and result.needed is not None:
        lines.append(f"  about {result.needed} pairs would likely decide "
                     "(explain --verify --repetitions N)")
    lines.append(f"  verification run: {run_id}")
    return lines


def verify_lines(results: Sequence[tuple[VerifyResult | Unverifiable, str]],
                 skipped: Sequence[Unverifiable]) -> list[str]:
    """The text of ``explain --verify``: each (result, verification run id), then the
    verdicts with nothing to verify."""
    lines: list[str] = []
    for result, run_id in results:
        if isinstance(result, VerifyResult):
            lines += _result_lines(result, run_id)
        else:
            lines += [f"{result.cell}: not verified: {result.reason}",
                      f"  verification run: {run_id}"]
    if skipped:
        lines.append(f"not verifiable ({len(skipped)}):")
        lines += [f"  {s.cell}: {s.reason}" for s in skipped]
    return lines


def _float(value: float) -> float | None:
    return None if math.isnan(value) else value


def verify_json(results: Sequence[tuple[VerifyResult | Unverifiable, str]],
                skipped: Sequence[Unverifiable]) -> dict[str, Any]:
    """``explain --verify --format json``: the verified causes and the skipped cells."""
    verified: list[dict[str, Any]] = []
    for result, run_id in results:
        if isinstance(result, VerifyResult):
            verified.append({
                "cell": result.plan.cell, "rule": result.plan.rule,
                "fix": result.plan.fix, "metric": result.metric,
                "ratio": result.ratio, "low": _float(result.low), "high": _float(result.high),
                "pairs": result.pairs, "margin": result.margin,
                "outcome": result.outcome, "pairs_needed": result.needed,
                "verification_run": run_id})
        else:
            verified.append({"cell": result.cell, "outcome": "not verified",
                             "reason": result.reason, "verification_run": run_id})
    return {"verified": verified,
            "not_verifiable": [{"cell": s.cell, "reason": s.reason} for s in skipped]}
