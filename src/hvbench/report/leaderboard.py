"""The leaderboard's presentation: one table (with its note) and JSON entry per phase of
:func:`hvbench.analysis.leaderboard.leaderboards`."""

from __future__ import annotations

from typing import Any

from hvbench.analysis.leaderboard import Leaderboard, RankedPath
from hvbench.analysis.metrics import lookup
from hvbench.report.text import TextTable

LEADERBOARD_HEADERS = ("rank", "platform", "bottleneck", "% of native", "95 % CI")


def leaderboard_title(board: Leaderboard) -> str:
    """``Leaderboard WORKLOAD / PHASE: LABEL in % of NATIVE``."""
    spec = lookup(board.metric)
    label = spec.short_label if spec is not None else board.metric
    return f"Leaderboard {board.workload} / {board.phase}: {label} in % of {board.native}"


def leaderboard_note(board: Leaderboard) -> str:
    """The sentence under the table: which orders the intervals support."""
    if board.conclusive:
        return "Every adjacent pair's 95 % intervals are apart: the order is shown " \
               "by the data."
    pairs = ", ".join(f"{a} > {b}" for a, b in board.overlapping)
    return f"Order inconclusive where the 95 % intervals overlap or one is missing " \
           f"(-: fewer than 2 repetitions, or native's own interval reaches 0): {pairs}."


def _ci(row: RankedPath) -> str:
    return "-" if row.low is None or row.high is None else f"{row.low:.0f}-{row.high:.0f}"


def leaderboard_table(board: Leaderboard) -> TextTable:
    """The terminal's and the HTML report's table of one leaderboard, its note under."""
    rows = tuple((str(i), r.platform, r.bottleneck, f"{r.pct:.1f}", _ci(r))
                 for i, r in enumerate(board.rows, start=1))
    return TextTable(leaderboard_title(board), LEADERBOARD_HEADERS, rows, left=3,
                     note=leaderboard_note(board))


def leaderboard_json(board: Leaderboard) -> dict[str, Any]:
    """``--format json``'s entry of one leaderboard (numbers unrounded)."""
    return {"workload": board.workload, "phase": board.phase, "metric": board.metric,
            "native": board.native, "conclusive": board.conclusive,
            "overlapping": [list(pair) for pair in board.overlapping],
            "rows": [{"rank": i, "platform": r.platform, "pct_of_native": r.pct,
                      "ci95_low": r.low, "ci95_high": r.high, "bottleneck": r.bottleneck}
                     for i, r in enumerate(board.rows, start=1)]}
