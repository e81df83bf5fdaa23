"""Each propagation phase's share of the propagation time (seed 000 Fig. 4): the pure
computation on stored-row fixtures, and its table in the terminal, JSON and HTML reports
of the propagation fixture database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hvbench.kinds.propagation.analysis import phase_shares, propagation_workloads
from hvbench.kinds.propagation.text import (
    PROPAGATION_SHARE_TITLE,
    SHARE_HEADERS,
    PropagationPart,
    share_rows,
)
from hvbench.report.render import report_json, terminal_tables
from hvbench.store.records import MeasurementRow
from tests.unit.test_report_model import fixture_report_html

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


def row(workload: str, phase: str, metric: str, value: float, rep: int) -> MeasurementRow:
    return MeasurementRow(cell_id=0, cell=f"vm/{workload}", platform="vm", workload=workload,
                          repetition=rep, position=0, phase=phase, metric=metric, value=value,
                          unit="", base_platform="vm", method=workload.split(".")[1],
                          image_size=1 << 30)


def fixture_rows() -> list[MeasurementRow]:
    """scp: initial 1 s, transfer 6 s then 8 s, terminal 1 s, shutdown 5 s; the overlay
    fetches once (cache_hit 0) and then hits (transfer 0 s)."""
    out = []
    for rep, transfer in enumerate((6.0, 8.0)):
        out += [row("propagation.scp", "initial", "duration_s", 1.0, rep),
                row("propagation.scp", "transfer", "duration_s", transfer, rep),
                row("propagation.scp", "terminal", "phase_wall_s", 1.0, rep),
                row("propagation.scp", "shutdown", "duration_s", 5.0, rep)]
    for rep, (transfer, hit) in enumerate(((2.0, 0.0), (0.0, 1.0), (0.0, 1.0))):
        out += [row("propagation.overlay", "initial", "duration_s", 1.0, rep),
                row("propagation.overlay", "transfer", "duration_s", transfer, rep),
                row("propagation.overlay", "transfer", "cache_hit", hit, rep),
                row("propagation.overlay", "terminal", "duration_s", 1.0, rep)]
    return out


def test_shares_per_repetition_then_summarized() -> None:
    rows = fixture_rows()
    shares = {s.method: s for s in phase_shares(rows, propagation_workloads(rows))}
    assert list(shares) == ["overlay", "overlay (cache hit)", "scp"]
    scp = shares["scp"]
    # 6/8 and 8/10 of the time: shutdown (5 s) is not counted
    assert scp.shares["transfer"].mean == pytest.approx((75.0 + 80.0) / 2)
    assert scp.shares["initial"].mean == pytest.approx((12.5 + 10.0) / 2)
    assert scp.total.mean == pytest.approx(9.0) and scp.total.n == 2
    for s in shares.values():
        assert sum(v.mean for v in s.shares.values()) == pytest.approx(100.0)
    hits = shares["overlay (cache hit)"]
    assert hits.cache_hit and hits.label == "vm/propagation.overlay (cache hit)"
    assert hits.total.n == 2 and hits.shares["transfer"].mean == 0.0
    assert shares["overlay"].shares["transfer"].mean == pytest.approx(50.0)


def test_share_rows_text() -> None:
    rows = fixture_rows()
    texts = share_rows(phase_shares(rows, propagation_workloads(rows)))
    assert len(texts[0]) == len(SHARE_HEADERS)
    # one repetition: the mean alone; two: mean ± the 95 % CI half-width
    assert texts[0] == ["vm", "overlay", "1024 MiB", "1", "25.0", "50.0", "25.0", "4.00"]
    scp = texts[2]
    assert scp[:4] == ["vm", "scp", "1024 MiB", "2"]
    assert scp[5].startswith("77.5 ± ") and float(scp[5].split(" ± ")[1]) > 0


def test_no_propagation_no_shares() -> None:
    rows = [r for r in fixture_rows() if r.phase == "transfer"]
    assert phase_shares(rows, propagation_workloads(rows)) == []


def test_the_reports_show_the_share_table() -> None:
    # The propagation fixture's report model and its HTML, as test_report_model loads
    # and renders them (once per session).
    report, text = fixture_report_html("propagation")
    part = report.kind_parts["propagation"]
    assert isinstance(part, PropagationPart) and part.shares
    titles = [str(t.title) for t in terminal_tables(report)]
    assert PROPAGATION_SHARE_TITLE in titles
    doc = json.loads(report_json(report))
    shares = doc["propagation"]["shares"]
    assert len(shares) == len(part.shares)
    for share in shares:
        means = [float(share[f"{p} %"].split(" ± ")[0]) for p in
                 ("initial", "transfer", "terminal")]
        assert sum(means) == pytest.approx(100.0, abs=0.2)
    assert PROPAGATION_SHARE_TITLE in text
    assert "share of each propagation phase (mean % over repetitions)" in text
