"""The leaderboard (issue 28): guests ranked by % of native with 95 % intervals and the
diagnosis' bottleneck; conclusive only where adjacent intervals are apart. Logic on
built summaries here; the rendered tables on the stored storage run in
tests/unit/test_fixture_runs.py (goldens)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hvbench.analysis.diagnosis import Finding, Verdict
from hvbench.analysis.leaderboard import leaderboards
from hvbench.analysis.stats import summarize
from hvbench.analysis.summaries import PhaseStats
from hvbench.report.leaderboard import (
    LEADERBOARD_HEADERS,
    leaderboard_json,
    leaderboard_note,
    leaderboard_table,
    leaderboard_title,
)
from hvbench.report.model import RunReport, load_run_report
from hvbench.report.render import report_json, section_titles, terminal_tables
from hvbench.store.database import Store
from tests.unit.test_fixture_runs import scratch_copy


def _phase(values: dict[str, list[float]], metric: str = "mb_s") -> PhaseStats:
    return PhaseStats("w", "randread", list(values),
                      {metric: {p: summarize(v) for p, v in values.items()}}, {metric: "MB/s"})


def _verdict(platform: str, rule: str | None) -> Verdict:
    dominant = None if rule is None else Finding(rule, rule, 1.0, (), "fix", False)
    return Verdict("w", "randread", platform, None, dominant, outcome="cause")


def test_guests_are_ranked_best_first_with_their_bottleneck() -> None:
    stats = _phase({"native": [1000, 1010, 990], "ide": [100, 105, 95],
                    "nvme": [600, 610, 590], "vhost": [300, 310, 290]})
    (board,) = leaderboards([stats], {"w": "native"},
                            [_verdict("ide", "emulated-controller"), _verdict("nvme", None)])
    assert [r.platform for r in board.rows] == ["nvme", "vhost", "ide"]
    assert board.rows[0].pct == pytest.approx(60.0)
    assert [r.bottleneck for r in board.rows] == ["-", "-", "emulated-controller"]
    low, high = board.rows[0].low, board.rows[0].high
    assert low is not None and high is not None and low < 60.0 < high
    assert board.conclusive and "shown by the data" in leaderboard_note(board)
    table = leaderboard_table(board)
    assert table.headers == LEADERBOARD_HEADERS
    assert table.rows[0][:3] == ("1", "nvme", "-") and table.rows[0][3] == "60.0"


def test_overlapping_or_missing_intervals_make_the_order_inconclusive() -> None:
    stats = _phase({"native": [1000, 1010, 990], "a": [500, 700, 300],
                    "b": [450, 460, 440], "c": [100, 101, 99], "d": [50]})
    (board,) = leaderboards([stats], {"w": "native"}, [])
    assert [r.platform for r in board.rows] == ["a", "b", "c", "d"]
    # a and b overlap; b and c are apart; d has one value: no interval.
    assert board.overlapping == (("a", "b"), ("c", "d"))
    assert not board.conclusive
    assert "a > b, c > d" in leaderboard_note(board)
    assert leaderboard_table(board).rows[3][4] == "-"
    data = json.loads(json.dumps(leaderboard_json(board)))
    assert data["conclusive"] is False and data["overlapping"] == [["a", "b"], ["c", "d"]]
    assert [r["rank"] for r in data["rows"]] == [1, 2, 3, 4]
    assert data["rows"][3]["ci95_low"] is None


@pytest.mark.parametrize(("values", "natives", "metric"), [
    ({"native": [1.0, 1.1], "a": [0.5, 0.6]}, {"w": "native"}, "mb_s"),  # one guest
    ({"a": [1.0, 1.1], "b": [0.5, 0.6]}, {"w": None}, "mb_s"),  # no native
    ({"native": [0.0, 0.0], "a": [1.0], "b": [2.0]}, {"w": "native"}, "mb_s"),  # native 0
    ({"native": [1.0, 1.1], "a": [1.0], "b": [2.0]}, {"w": "native"}, "lat_mean_ms"),
])
def test_no_leaderboard_without_something_to_rank(values: dict[str, list[float]],
                                                  natives: dict[str, str | None],
                                                  metric: str) -> None:
    assert leaderboards([_phase(values, metric)], natives, []) == []


def _stored(name: str, directory: Path) -> RunReport:
    run = scratch_copy(name, directory)
    with Store(str(directory / f"{name}.db"), create=False) as store:
        return load_run_report(store, run)


def test_the_stored_storage_run_shows_its_leaderboards_everywhere(tmp_path: Path) -> None:
    """terminal, JSON and the section list (which the HTML parity test reads) carry the
    same leaderboards, from the stored run's summaries and verdicts."""
    report = _stored("storage", tmp_path)
    boards = leaderboards(report.phases, report.natives, report.verdicts)
    assert boards, "the storage fixture has native and two guests per phase"
    titles = [t.title for t in terminal_tables(report) if hasattr(t, "title")]
    assert all(leaderboard_title(b) in titles for b in boards)
    assert all(leaderboard_title(b) in section_titles(report)["extra"] for b in boards)
    shown = json.loads(report_json(report))["leaderboard"]
    assert [(b["workload"], b["phase"]) for b in shown] == \
        [(b.workload, b.phase) for b in boards]
    for board in shown:
        pcts = [r["pct_of_native"] for r in board["rows"]]
        assert pcts == sorted(pcts, reverse=True)
        assert all(r["bottleneck"] != "" for r in board["rows"])
