"""Where an adaptive cell stopped and why, as the one line the run's progress and the
report print (the state itself: :func:`hvbench.analysis.precision.cell_precision`)."""

from __future__ import annotations

from hvbench.analysis.precision import CellPrecision

__all__ = ["precision_line"]


def precision_line(p: CellPrecision) -> str:
    """One line saying where an adaptive cell stopped and why."""
    ci = "-" if p.ci_pct is None else f"±{p.ci_pct:.1f} %"
    cov = "" if p.cov_pct is None else f", CoV {p.cov_pct:.1f} %"
    what = f" ({p.metric})" if p.metric else ""
    if p.state == "reached":
        return f"{p.cell}: {ci}{what} after {p.n} repetitions (target ±{p.target_pct:g} %)"
    if p.state == "max":
        return (f"{p.cell}: stopped at max {p.max_rounds} rounds with {ci}{what}{cov} "
                f"(target ±{p.target_pct:g} %): too noisy for the target; lengthen the "
                "test, pin CPUs, or accept a wider interval")
    if p.state == "no metric":
        return f"{p.cell}: no main metric to test; stopped after {p.n} repetitions"
    return f"{p.cell}: {ci}{what} after {p.n} repetitions"
