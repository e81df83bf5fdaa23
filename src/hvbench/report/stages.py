"""The CPU-per-stage tables of a report (seed 004 Figs. 1-4) and their JSON shape, from
the stage rows :mod:`hvbench.analysis.stages` computes."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from hvbench.analysis.stages import StageRow, column_key
from hvbench.analysis.stats import Summary
from hvbench.report.text import TextTable, mean_ci_text

__all__ = ["stage_json", "stage_tables"]


def stage_tables(rows: Sequence[StageRow]) -> list[TextTable]:
    """One table per (cell, phase): a row per stage, the mean per-core host busy %, the
    host's busy % and each guest's vCPU % (mean ± 95 % CI over the repetitions)."""
    grouped: dict[tuple[str, str, str, str], list[StageRow]] = defaultdict(list)
    for r in rows:
        grouped[(r.platform, r.workload, r.phase, r.cell)].append(r)
    tables = []
    for (platform, workload, phase, _), items in grouped.items():
        columns = sorted({c for r in items for c in r.means}, key=column_key)
        body = tuple((r.stage, mean_ci_text(r.seconds),
                      *(mean_ci_text(r.means[c]) if c in r.means else "-" for c in columns),
                      str(r.seconds.n)) for r in items)
        tables.append(TextTable(
            f"CPU per stage, {platform} {workload}/{phase} (seed 004 Figs. 1-4)",
            ("stage", "seconds", *columns, "n"), body,
            note="stages start at the stored nb<i>.cpu.started_at_s marks; busy %: of one "
                 "host core (host busy %: of all cores); vCPU %: of one core, summed over "
                 "the guest's vCPU threads."))
    return tables


def stage_json(rows: Sequence[StageRow]) -> list[dict[str, Any]]:
    """The stage rows for ``--format json``."""
    def summary(s: Summary) -> dict[str, float | int]:
        return {"mean": s.mean, "ci95_half_width": s.ci95_half_width, "n": s.n}
    return [{"cell": r.cell, "platform": r.platform, "workload": r.workload,
             "phase": r.phase, "stage": r.stage, "seconds": summary(r.seconds),
             "means": {c: summary(s) for c, s in r.means.items()}} for r in rows]
