"""The per-stage tables of a report (seed 004 Figs. 1-7: CPU, and bandwidth when the
stages are iperf3 starts) and their JSON shape, from the stage rows
:mod:`hvbench.analysis.stages` computes."""

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
    host's busy %, each guest's vCPU % and, where the NIC sampler ran, each guest's and
    the guests' summed Mbit/s (mean ± 95 % CI over the repetitions)."""
    grouped: dict[tuple[str, str, str, str], list[StageRow]] = defaultdict(list)
    for r in rows:
        grouped[(r.platform, r.workload, r.phase, r.cell)].append(r)
    tables = []
    for (platform, workload, phase, _), items in grouped.items():
        columns = sorted({c for r in items for c in r.means}, key=column_key)
        body = tuple((r.stage, mean_ci_text(r.seconds),
                      *(mean_ci_text(r.means[c]) if c in r.means else "-" for c in columns),
                      str(r.seconds.n)) for r in items)
        traffic = any(c.endswith(" Mbit/s") for c in columns)
        what, figs = ("CPU and bandwidth", "1-7") if traffic else ("CPU", "1-4")
        tables.append(TextTable(
            f"{what} per stage, {platform} {workload}/{phase} (seed 004 Figs. {figs})",
            ("stage", "seconds", *columns, "n"), body,
            note="stages start at the stored nb<i>.<role>.started_at_s marks; busy %: of "
                 "one host core (host busy %: of all cores); vCPU %: of one core, summed "
                 "over the guest's vCPU threads" + (
                     "; Mbit/s: rx + tx of the guest's taps on the host, guests: their "
                     "sum." if traffic else ".")))
    return tables


def stage_json(rows: Sequence[StageRow]) -> list[dict[str, Any]]:
    """The stage rows for ``--format json``."""
    def summary(s: Summary) -> dict[str, float | int]:
        return {"mean": s.mean, "ci95_half_width": s.ci95_half_width, "n": s.n}
    return [{"cell": r.cell, "platform": r.platform, "workload": r.workload,
             "phase": r.phase, "stage": r.stage, "seconds": summary(r.seconds),
             "means": {c: summary(s) for c, s in r.means.items()}} for r in rows]
