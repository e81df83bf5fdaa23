"""The host-to-host spread and outlier test of a fleet run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hvbench.analysis.fleet import host_spread
from hvbench.cli.main import main
from hvbench.store.database import Store
from hvbench.store.records import CellRecord, MeasurementRecord, MeasurementRow


def rows(values: list[float]) -> list[MeasurementRow]:
    return [MeasurementRow(1, "vm/dd", "vm", "dd", i, 0, "write", "mb_s", v, "MB/s")
            for i, v in enumerate(values)]


def test_a_slow_host_is_an_outlier_the_others_are_not() -> None:
    (spread,) = host_spread({
        "h1": rows([100, 101, 99, 100, 100]), "h2": rows([99, 100, 101, 100, 100]),
        "h3": rows([101, 100, 99, 100, 101]), "h4": rows([70, 71, 69, 70, 70])})
    assert spread.outliers == ("h4",)
    assert spread.means["h4"] == pytest.approx(70)
    assert spread.across_cov_pct is not None and spread.within_cov_pct is not None
    assert spread.across_cov_pct > 10 > spread.within_cov_pct


def test_noise_alone_makes_no_outlier_and_two_hosts_never_do() -> None:
    (spread,) = host_spread({"h1": rows([100, 90, 110]), "h2": rows([95, 105, 100]),
                             "h3": rows([104, 96, 100])})
    assert spread.outliers == ()
    (two,) = host_spread({"h1": rows([100, 100.5, 99.5]), "h2": rows([50, 50.5, 49.5])})
    assert two.outliers == () and two.p_values == {}


def fleet_db(tmp_path: Path) -> Path:
    """A fleet of three hosts, h3 40 % slower, 4 repetitions each."""
    db = tmp_path / "f.db"
    with Store(db) as store:
        for host, level in (("h1", 100.0), ("h2", 101.0), ("h3", 60.0)):
            rid = store.create_run(run_id=None, study_name="s", study_path="s", study_text="",
                                   seed=0, env={}, hvbench_version="0", git_commit=None,
                                   fleet_id="fleet-x", host=host)
            ids = store.add_cells(rid, [CellRecord("vm/dd", "vm", {}, "dd", {})])
            for rep, jitter in enumerate((-0.5, 0.0, 0.5, 0.2)):
                store.record_repetition(
                    run_id=rid, cell_id=ids["vm/dd"], repetition=rep, position=0,
                    status="ok", started_at="t0", finished_at="t1",
                    measurements=[MeasurementRecord("write", "mb_s", level + jitter, "MB/s")])
    return db


def test_report_fleet_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = fleet_db(tmp_path)
    assert main(["report", "--fleet", "fleet-x", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "fleet fleet-x: 3 hosts" in out
    row = next(line for line in out.splitlines() if "vm/dd" in line)
    assert row.rstrip(" │").endswith("h3")
    assert main(["report", "--fleet", "nope", "--db", str(db)]) == 2


def test_compare_by_host(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = fleet_db(tmp_path)
    assert main(["compare", "fleet-x", "h3", "--by-host", "--format", "json",
                 "--db", str(db)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["b"] == "fleet fleet-x host h3"
    (row,) = result["comparisons"]
    assert (row["n_a"], row["n_b"]) == (8, 4)
    assert row["delta_pct"] < -35
    assert main(["compare", "fleet-x", "h9", "--by-host", "--db", str(db)]) == 2


def test_report_fleet_json_and_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                    ) -> None:
    db = fleet_db(tmp_path)
    assert main(["report", "--fleet", "fleet-x", "--format", "json", "--db", str(db)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["fleet_id"] == "fleet-x"
    assert [h["host"] for h in doc["hosts"]] == ["h1", "h2", "h3"]
    assert all(h["ok"] == 4 and h["failed"] == 0 for h in doc["hosts"])
    (cell,) = doc["spread"]
    assert (cell["cell"], cell["metric"], cell["outliers"]) == ("vm/dd", "mb_s", ["h3"])
    assert cell["across_cov_pct"] > 10 > cell["within_cov_pct"]
    assert set(cell["p_values"]) == {"h1", "h2", "h3"}

    out = tmp_path / "fleet.html"
    assert main(["report", "--fleet", "fleet-x", "--format", "html", "-o", str(out),
                 "--db", str(db)]) == 0
    page = out.read_text()
    assert '<h2 id="fleet">Fleet</h2>' in page and "CoV across hosts %" in page
    assert "<td class=\"l\">vm/dd</td>" in page and "Bonferroni" in page
    assert main(["report", "--fleet", "fleet-x", "--format", "csv", "--db", str(db)]) == 2


def test_a_host_runs_report_has_the_fleet_section(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    db = fleet_db(tmp_path)
    with Store(db) as store:
        runs = {str(r.host): r.id for r in store.fleet_runs("fleet-x")}
    assert main(["report", runs["h2"], "--format", "json", "--db", str(db)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["fleet"]["fleet_id"] == "fleet-x"
    assert doc["fleet"]["spread"][0]["outliers"] == ["h3"]
    out = tmp_path / "h2.html"
    assert main(["report", runs["h2"], "--format", "html", "-o", str(out),
                 "--db", str(db)]) == 0
    page = out.read_text()
    assert '<a href="#fleet">Fleet</a>' in page and '<h2 id="fleet">Fleet</h2>' in page
    # a run of one host has none
    with Store(db) as store:
        alone = store.create_run(run_id=None, study_name="s", study_path="s",
                                 study_text="", seed=0, env={}, hvbench_version="0",
                                 git_commit=None)
        ids = store.add_cells(alone, [CellRecord("vm/dd", "vm", {}, "dd", {})])
        store.record_repetition(run_id=alone, cell_id=ids["vm/dd"], repetition=0,
                                position=0, status="ok", started_at="t0", finished_at="t1",
                                measurements=[MeasurementRecord("write", "mb_s", 1.0,
                                                                "MB/s")])
    assert main(["report", alone, "--format", "json", "--db", str(db)]) == 0
    assert "fleet" not in json.loads(capsys.readouterr().out)
