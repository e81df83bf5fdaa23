"""Scenario tables from synthetic rows: degradation against alone, aggregated
throughput ratio, guests started on demand, CPU weights, CoV of the samples; missing
baselines and single repetitions; terminal and JSON output through the CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from hvbench.analysis.scenarios import (
    MISSING_BASELINE,
    aggregated_ratios,
    alone_baselines,
    build_scenario_report,
    cov_rows,
    degradation_rows,
    higher_is_better,
    identities,
    is_main_cov,
    jain_index,
    neighbour_threads,
    ondemand_rows,
    ondemand_series,
    weights_label,
    weights_tables,
)
from hvbench.cli.main import main
from hvbench.report.scenarios import (
    aggregated_ratio_table,
    cov_table,
    degradation_table,
    neighbour_threads_table,
    ondemand_table,
    scenario_json,
    scenario_tables,
    weights_text_table,
)
from hvbench.report.tables import rich_table
from hvbench.store.database import Store
from hvbench.store.records import (
    CellRecord,
    MeasurementRecord,
    MeasurementRow,
    SampleRecord,
    SampleRow,
)

Values = dict[str, float]


def rows_of(platform: str, workload: str, phase: str, metrics: Values, *, reps: int = 3,
            spread: float = 1.0) -> list[MeasurementRow]:
    """``reps`` repetitions of each metric: value - spread, value, value + spread (the
    mean is exact), or the value itself for one repetition."""
    offsets = [0.0] if reps == 1 else [spread * (i - (reps - 1) / 2) for i in range(reps)]
    # The identity the store keeps for a scenario cell stored as platform "vm@idle3".
    base, _, scenario = platform.partition("@")
    return [MeasurementRow(0, f"{platform}/{workload}", platform, workload, rep, 0, phase,
                           metric, value + offsets[rep] * (not metric.endswith("file_kb")),
                           "", base, scenario or None)
            for metric, value in metrics.items() for rep in range(reps)]


def idle_rows() -> list[MeasurementRow]:
    """Seed 003 Tables 2-3 in miniature: max rates and a fixed rate, alone and idle3."""
    return [*rows_of("vm", "max", "1kB", {"max_rate_rps": 1070.0, "replies_s": 1070.0}),
            *rows_of("vm", "max", "70kB", {"max_rate_rps": 165.0, "replies_s": 165.0}),
            *rows_of("vm@idle3", "max", "1kB", {"max_rate_rps": 999.0, "replies_s": 999.0}),
            *rows_of("vm", "fixed", "1kB", {"replies_s": 900.0, "reply_ms": 28.0,
                                            "transfer_ms": 0.0}),
            *rows_of("vm@idle3", "fixed", "1kB", {"replies_s": 887.0, "reply_ms": 51.0,
                                                  "transfer_ms": 0.0,
                                                  "nb0.vcpu.cpu_pct": 1.0})]


# -- names and directions ----------------------------------------------------------------------
def test_identities_come_from_the_rows_fields() -> None:
    rows = idle_rows()
    assert identities(rows) == {"vm": ("vm", None), "vm@idle3": ("vm", "idle3")}

def test_directions_follow_compare() -> None:
    assert higher_is_better("replies_s") is True
    assert higher_is_better("max_rate_rps") is True
    assert higher_is_better("reply_ms") is False
    assert higher_is_better("boot_s") is False
    assert higher_is_better("steps") is None


def test_compare_direction_change_and_delta_are_public() -> None:
    from hvbench.analysis.compare import change_label, delta_pct, metric_direction

    assert [metric_direction(m) for m in ("mb_s", "iops", "reply_ms",
                                          "phase_wall_s", "error_pct", "cpu_pct")] == \
        ["higher", "higher", "lower", "lower", "lower", None]
    assert change_label("replies_s", -1.0) == "worse"
    assert change_label("lat_p99_ms", -1.0) == "better"
    assert change_label("retransmits", 2.0) == "worse"
    assert change_label("cpu_pct", 2.0) == "higher" and change_label("cpu_pct", -2.0) == "lower"
    assert delta_pct(50.0, 40.0) == -20.0 and delta_pct(-2.0, -1.0) == 50.0
    assert delta_pct(0.0, 3.0) is None


# -- degradation ---------------------------------------------------------------------------------
def test_degradation_of_throughput_and_times() -> None:
    items = degradation_rows(idle_rows())
    keys = [(d.workload, d.phase, d.metric, d.scenario) for d in items]
    assert keys == [("fixed", "1kB", "replies_s", "idle3"), ("fixed", "1kB", "reply_ms", "idle3"),
                    ("fixed", "1kB", "transfer_ms", "idle3"),
                    ("max", "1kB", "max_rate_rps", "idle3")]
    replies, reply_ms, transfer, max_rate = items
    assert replies.pct == pytest.approx((900 - 887) / 900 * 100)
    assert max_rate.pct == pytest.approx(6.6, abs=0.05)  # seed 003 Table 2: 1 - 999/1070
    assert reply_ms.pct == pytest.approx((51 - 28) / 28 * 100)  # lower is better: +82 %
    assert not reply_ms.higher_is_better
    assert reply_ms.pct is not None
    assert reply_ms.pct_low is not None and reply_ms.pct_high is not None
    assert reply_ms.pct_low < reply_ms.pct < reply_ms.pct_high
    assert transfer.pct is None and transfer.alone is not None  # 0 ms alone: no ratio
    assert degradation_table([transfer]).rows[0][6] == "- (alone is 0)"
    assert max_rate.pct_of_alone == pytest.approx(999 / 1070 * 100)


def test_degradation_interval_flips_for_throughputs() -> None:
    (item,) = [d for d in degradation_rows(idle_rows()) if d.metric == "replies_s"]
    assert item.pct is not None and item.pct_low is not None and item.pct_high is not None
    assert item.pct_low < item.pct < item.pct_high


def test_missing_alone_and_single_repetition() -> None:
    rows = [*rows_of("vm2@idle1", "fixed", "1kB", {"replies_s": 500.0}),
            *rows_of("vm", "fixed", "1kB", {"replies_s": 900.0}, reps=1),
            *rows_of("vm@idle1", "fixed", "1kB", {"replies_s": 450.0}, reps=1)]
    missing, single = degradation_rows(rows)
    assert missing.platform == "vm2" and missing.alone is None and missing.pct is None
    assert single.pct == pytest.approx(50.0)
    assert single.pct_low is None and single.pct_high is None
    table = degradation_table([missing, single])
    assert table.rows[0][3] == "-" and table.rows[0][6] == MISSING_BASELINE
    assert table.rows[1][3:] == ("900 (n=1)", "idle1", "450 (n=1)", "+50.0", "1/1")


def test_boot_time_is_not_compared() -> None:
    rows = [*rows_of("vm", "fixed", "boot", {"boot_s": 4.0}),
            *rows_of("vm@idle3", "fixed", "boot", {"boot_s": 5.0})]
    assert degradation_rows(rows) == []


# -- aggregated throughput ratio -----------------------------------------------------------------
def colocation_rows(file_kb: float = 70.0) -> list[MeasurementRow]:
    return [*rows_of("vm", "max", "1kB", {"replies_s": 1070.0}),
            *rows_of("vm", "max", "70kB", {"replies_s": 165.0}),
            *rows_of("vm", "fixed", "1kB", {"replies_s": 900.0}),
            *rows_of("vm@nb70k", "fixed", "1kB", {"replies_s": 661.0,
                                                  "nb0.load.replies_per_s": 112.0,
                                                  "nb0.load.file_kb": file_kb}, spread=0.0)]


def test_alone_baselines_take_the_best_workload() -> None:
    assert alone_baselines(colocation_rows()) == {("vm", "1kB"): 1070.0, ("vm", "70kB"): 165.0}


def test_aggregated_ratio_as_seed_003_fig_20() -> None:
    (item,) = aggregated_ratios(colocation_rows())
    assert item.cell == "vm@nb70k/fixed" and item.missing == ()
    assert item.target_baseline == 1070.0
    assert item.target_ratio is not None
    assert item.target_ratio.mean == pytest.approx(661 / 1070)
    (nb,) = item.neighbours
    assert nb.label == "nb0" and nb.file_kb == 70.0 and nb.baseline == 165.0
    assert item.aggregated is not None and item.aggregated.n == 3
    assert item.aggregated.mean == pytest.approx(661 / 1070 + 112 / 165)  # about 1.3
    text = aggregated_ratio_table([item]).rows[0]
    assert text[6].startswith("1.3") and "nb0 70kB: 112 / 165 = 0.679" in text[5]
    # 1 kB next to 70 kB: not identical guests, no fairness index.
    assert item.fairness is None and text[7] == "-"


def test_jain_fairness_of_identical_guests() -> None:
    assert jain_index([5.0, 5.0, 5.0]) == 1.0
    assert jain_index([9.0, 0.0, 0.0]) == pytest.approx(1 / 3)
    assert jain_index([]) is None and jain_index([0.0, 0.0]) is None
    # Seed 003 Figs 15-17 in miniature: the target and two 1 kB neighbours.
    rows = [*colocation_rows(),
            *rows_of("vm@dual", "fixed", "1kB", {"replies_s": 600.0,
                                                 "nb0.load.replies_per_s": 300.0,
                                                 "nb1.load.replies_per_s": 300.0,
                                                 "nb0.load.file_kb": 1.0,
                                                 "nb1.load.file_kb": 1.0}, spread=0.0)]
    item = next(a for a in aggregated_ratios(rows) if a.platform == "vm@dual")
    assert item.fairness is not None and item.fairness.n == 3
    # (1200)² / (3 x (600² + 2 x 300²)) = 1440000 / 1620000
    assert item.fairness.mean == pytest.approx(1440000 / 1620000)
    assert aggregated_ratio_table([item]).rows[0][7] == "0.889 ± 0"
    doc = scenario_json(build_scenario_report(rows))
    dual = next(a for a in doc["aggregated_ratio"] if a["platform"] == "vm@dual")
    assert dual["jain_fairness"]["mean"] == pytest.approx(0.8889, abs=1e-4)


def test_aggregated_ratio_says_when_a_baseline_is_missing() -> None:
    (item,) = aggregated_ratios(colocation_rows(file_kb=30.0))
    assert item.aggregated is None and item.neighbours[0].ratio is None
    assert item.missing == (f"{MISSING_BASELINE} for nb0: no replies_s of vm alone in phase "
                            "30kB",)
    row = aggregated_ratio_table([item]).rows[0]
    assert MISSING_BASELINE in row[5] and row[6] == item.missing[0] and row[8] == "0"
    rows = [r for r in colocation_rows() if r.platform != "vm"]
    (alone_missing,) = aggregated_ratios(rows)
    assert alone_missing.target_ratio is None and alone_missing.aggregated is None
    assert "the target" in alone_missing.missing[0]


# -- guests started on demand -----------------------------------------------------------------
def ondemand_cell_rows(reps: int = 3, spread: float = 1.0) -> list[MeasurementRow]:
    return rows_of("vm@ondemand", "steady", "1kB", {
        "replies_s": 100.0, "ondemand.0.asked_at_s": 4.0, "ondemand.0.startup_s": 12.0,
        "ondemand.1.asked_at_s": 6.0, "ondemand.1.startup_s": 15.0, "dip.baseline": 8.0,
        "dip.depth_pct": 40.0, "dip.length_s": 5.0, "dip.min_normalized": 0.6}, reps=reps,
        spread=spread)


def throughput_samples(reps: int = 3) -> list[SampleRow]:
    return [SampleRow("vm@ondemand/steady", rep, "1kB", "throughput", float(t),
                      {"value": 8.0 if t < 4 else 4.8})
            for rep in range(reps) for t in range(10)]


def test_ondemand_rows() -> None:
    (item,) = ondemand_rows(ondemand_cell_rows())
    assert [s.index for s in item.starts] == [0, 1] and item.n == 3
    assert item.starts[1].startup.mean == pytest.approx(15.0)
    assert item.starts[0].asked_at is not None and item.starts[0].asked_at.mean == 4.0
    assert item.depth_pct is not None and item.depth_pct.mean == pytest.approx(40.0)
    table = ondemand_table([item])
    assert table.headers[2:4] == ("guest 1 start-up s", "guest 2 start-up s")
    assert table.rows[0][2] == "12.0 ± 2.5 (asked at 4 s)"
    assert ondemand_rows(idle_rows()) == []


def test_ondemand_single_repetition_has_no_interval() -> None:
    (item,) = ondemand_rows(ondemand_cell_rows(reps=1))
    assert ondemand_table([item]).rows[0][2] == "12 (n=1) (asked at 4 s)"


def test_ondemand_series_normalized_by_the_baseline() -> None:
    cells = {"vm@ondemand/steady": ("vm@ondemand", "steady")}
    rows = ondemand_cell_rows(spread=0.0)
    # repetition 2 has no baseline: it is left out
    rows = [r for r in rows if not (r.repetition == 2 and r.metric == "dip.baseline")]
    series = ondemand_series(rows, throughput_samples(), cells)
    assert [s.repetition for s in series] == [0, 1]
    first = series[0]
    assert first.xs[:2] == (0.0, 1.0) and first.ys[0] == 1.0
    assert first.ys[-1] == pytest.approx(0.6)
    assert first.asked_at == (4.0, 6.0) and first.ready_at == (16.0, 21.0)


# -- CoV ---------------------------------------------------------------------------------------
def cov_samples() -> list[SampleRow]:
    cell = "vm@idle3/fixed"
    out = []
    for rep, series in enumerate(([1.0, 2.0, 3.0], [2.0, 4.0, 6.0])):
        for i, value in enumerate(series):
            t = 0.1 * i
            out += [SampleRow(cell, rep, "1kB", "qemu", t, {"vcpu.cpu_pct": value,
                                                            "vcpu.threads": 1}),
                    SampleRow(cell, rep, "1kB", "host.cpu", t, {"busy_pct": 50.0,
                                                                "idle_pct": 50.0}),
                    SampleRow(cell, rep, "1kB", "net", t, {"guest-tap0.rx_mbit_s": value,
                                                           "lab-bridge.rx_mbit_s": value}),
                    SampleRow(cell, rep, "1kB", "nb0", t, {"vcpu.wait_pct": 0.0})]
    out.append(SampleRow("other/x", 0, "1kB", "qemu", 0.0, {"vcpu.cpu_pct": 1.0}))
    return out


def test_cov_of_every_series() -> None:
    rows = cov_rows(cov_samples(), {"vm@idle3/fixed": ("vm@idle3", "fixed")})
    found = {(c.monitor, c.key): c for c in rows}
    cpu = found[("qemu", "vcpu.cpu_pct")]
    assert cpu.per_repetition == (50.0, 50.0) and cpu.summary.mean == 50.0
    assert cpu.points == 6 and cpu.summary.n == 2
    assert found[("host.cpu", "busy_pct")].summary.mean == 0.0
    assert ("nb0", "vcpu.wait_pct") not in found  # a zero mean has no CoV
    assert {(c.monitor, c.key) for c in rows if is_main_cov(c)} == {
        ("qemu", "vcpu.cpu_pct"), ("host.cpu", "busy_pct"), ("net", "guest-tap0.rx_mbit_s")}
    table = cov_table(rows)
    assert table.headers == ("platform", "workload/phase", "net:guest-tap0.rx_mbit_s",
                             "host.cpu:busy_pct", "qemu:vcpu.cpu_pct", "n")
    assert table.rows == (("vm@idle3", "fixed/1kB", "50 ± 0", "0 ± 0", "50 ± 0", "2"),)


def test_cov_needs_two_points() -> None:
    samples = [SampleRow("c", 0, "p", "throughput", 0.0, {"value": 5.0})]
    assert cov_rows(samples, {"c": ("vm@s", "w")}) == []


# -- weights -------------------------------------------------------------------------------------
def scenario_definition(platform: str) -> dict[str, Any]:
    """What the runner stores for a platform measured alone or in scenario ``x``
    (``vm@x``): the scenario's definition, with its name."""
    _, _, scenario = platform.partition("@")
    return {"kind": "qemu", **({"scenario": {"name": scenario}} if scenario else {})}


def weights_definition(io: float) -> dict[str, Any]:
    return {"vcpus": 1, "scenario": {"name": f"w.{io:g}", "neighbours": [],
                                     "weights": {"io": io, "target": 1.0, "neighbours": 1.0,
                                                 "cpus": "0", "target_quota_pct": None}}}


def weights_rows() -> list[MeasurementRow]:
    metrics = {"replies_s": 700.0, "nb0.load.replies_per_s": 100.0, "nb0.load.file_kb": 70.0,
               "qemu.main.cpu_pct": 30.0, "qemu.main.exec_per_s": 950.0,
               "qemu.vcpu.cpu_ms_per_exec": 0.3, "nb0.vcpu.cpu_pct": 20.0,
               "net.guest-tap0.rx_mbit_s": 50.0, "host.cpu.busy_pct": 90.0}
    return [*rows_of("vm@w.2", "fixed", "1kB", {**metrics, "replies_s": 534.0}),
            *rows_of("vm@w.0.5", "fixed", "1kB", metrics),
            *rows_of("vm@idle3", "fixed", "1kB", {"replies_s": 880.0})]


def test_weights_label() -> None:
    assert weights_label(weights_definition(0.5)) == "0.5:1:1"
    assert weights_label({"vcpus": 1}) is None
    assert weights_label({"scenario": {"neighbours": []}}) is None


def test_weights_table_as_seed_003_table_5() -> None:
    platforms = {"vm@w.2": weights_definition(2.0), "vm@w.0.5": weights_definition(0.5),
                 "vm@idle3": {"scenario": {"neighbours": []}}}
    (table,) = weights_tables(weights_rows(), platforms)
    assert table.columns == (("0.5:1:1", "w.0.5"), ("2:1:1", "w.2"))
    labels = [label for label, _ in table.rows]
    assert labels == ["target replies/s", "nb0 load replies/s", "aggregated replies/s",
                      "tap guest-tap0.rx_mbit_s", "host CPU busy %", "target QEMU main loop "
                      "CPU %", "target QEMU main loop exec/s", "target QEMU vCPU CPU ms per "
                      "exec", "nb0 vCPU CPU %"]
    aggregate = dict(table.rows)["aggregated replies/s"]
    assert [s.mean for s in aggregate if s] == [800.0, 634.0]
    text = weights_text_table(table)
    assert text.headers == ("metric", "0.5:1:1 (w.0.5)", "2:1:1 (w.2)")
    assert weights_tables(weights_rows(), {}) == []


# -- neighbours' threads -------------------------------------------------------------------------
def neighbour_rows(known: float = 0.0) -> list[MeasurementRow]:
    nb = {f"nb{i}.{cls}.{key}": value
          for i in (1, 0) for cls in ("vcpu", "main", "total")
          for key, value in (("cpu_pct", 40.0 + i), ("wait_pct", 5.0), ("blocked_pct", 50.0),
                             ("exec_per_s", 900.0), ("cpu_ms_per_exec", 0.4),
                             ("vol_cs_per_s", 700.0), ("invol_cs_per_s", 200.0))}
    flags = {"nb0.total.wakeups_known": known, "nb1.total.wakeups_known": known}
    if known:
        nb |= {"nb0.vcpu.wakeups_per_s": 650.0}
    return [*rows_of("vm@idle2", "fixed", "1kB", {"replies_s": 800.0, **nb}),
            *rows_of("vm@idle2", "fixed", "1kB", flags, spread=0.0),
            *rows_of("vm", "fixed", "1kB", {"replies_s": 900.0, "qemu.vcpu.cpu_pct": 9.0})]


def test_neighbour_threads_table() -> None:
    (item,) = neighbour_threads(neighbour_rows())
    assert (item.platform, item.workload, item.phase) == ("vm@idle2", "fixed", "1kB")
    assert [(nb, cls) for nb, cls, _ in item.rows] == [
        ("nb0", "vcpu"), ("nb0", "main"), ("nb0", "total"),
        ("nb1", "vcpu"), ("nb1", "main"), ("nb1", "total")]
    assert item.wakeups_known is False
    table = neighbour_threads_table(item)
    assert table.headers[:4] == ("neighbour", "class", "CPU %", "wait %")
    assert table.headers[-3:] == ("vol cs/s", "invol cs/s", "wake-ups/s")
    assert table.rows[0] == ("nb0", "vcpu", "40", "5", "50", "900", "0.4", "700", "200", "-")
    assert table.rows[3][2] == "41"
    assert "mean of 3 repetition(s)" in table.note and "wake-ups not measured" in table.note
    (known,) = neighbour_threads(neighbour_rows(known=1.0))
    assert known.wakeups_known
    assert neighbour_threads_table(known).rows[0][-1] == "650"
    assert "not measured" not in neighbour_threads_table(known).note
    assert neighbour_threads(rows_of("vm", "fixed", "1kB", {"qemu.vcpu.cpu_pct": 1.0})) == []
    # A run from before context switch sampling stored no flag: says so, not "kernel".
    old = [r for r in neighbour_rows() if "wakeups_known" not in r.metric]
    (item,) = neighbour_threads(old)
    assert item.wakeups_known is None and "not sampled" in neighbour_threads_table(item).note


# -- together --------------------------------------------------------------------------------------
def all_rows() -> list[MeasurementRow]:
    return [*idle_rows(), *colocation_rows(), *ondemand_cell_rows()]


def test_tables_json_and_terminal() -> None:
    samples = [*throughput_samples(), *cov_samples()]
    report = build_scenario_report(all_rows(), samples)
    titles = [t.title for t in scenario_tables(report)]
    assert titles == ["Degradation against alone", "Aggregated throughput ratio (seed 003 "
                      "Fig. 20)", "Guests started on demand (seed 003 Fig. 14)",
                      "QEMU threads of the neighbours, vm@idle3 fixed/1kB (seed 003 Figs 11-14)"]
    assert scenario_tables(report, cov=True)[-1].title.startswith("CoV")
    doc = json.loads(json.dumps(scenario_json(report)))
    assert set(doc) == {"degradation", "aggregated_ratio", "ondemand", "weights", "cov",
                        "neighbour_threads", "rate_sweeps"}
    assert doc["aggregated_ratio"][0]["aggregated"]["n"] == 3
    assert {c["monitor"] for c in doc["cov"]} >= {"throughput", "qemu", "net"}
    assert any(not c["main"] for c in doc["cov"])  # the full set, not only the main ones
    with Path(os.devnull).open("w") as sink:
        console = Console(width=200, record=True, color_system=None, file=sink)
        for table in scenario_tables(report):
            console.print(rich_table(table))
        text = console.export_text()
    assert "Degradation against alone" in text and "+6.6" in text and "positive = worse" in text


def test_no_scenarios_no_tables() -> None:
    report = build_scenario_report(rows_of("native", "dd", "write", {"mb_s": 100.0}))
    assert scenario_tables(report, cov=True) == []


# -- the CLI -----------------------------------------------------------------------------------
def make_db(path: Path) -> str:
    """A stored run with the scenario rows, 1 s throughput samples and weights."""
    unique = {(r.cell, r.repetition, r.phase, r.metric): r
              for r in reversed([*all_rows(), *weights_rows()])}
    rows = list(unique.values())
    with Store(path) as store:
        run = store.create_run(run_id="r1", study_name="scenarios", study_path="s.toml",
                               study_text="", seed=1, env={"accelerator": "kvm"},
                               hvbench_version="0", git_commit=None)
        names = sorted({(r.cell, r.platform, r.workload) for r in rows})
        definitions = {"vm@w.2": weights_definition(2.0), "vm@w.0.5": weights_definition(0.5)}
        ids = store.add_cells(run, [CellRecord(c, p, definitions.get(p, scenario_definition(p)),
                                               w, {"kind": "web"}) for c, p, w in names])
        for cell, _, _ in names:
            for rep in range(3):
                found = [r for r in rows if r.cell == cell and r.repetition == rep]
                samples = [SampleRecord(s.phase, s.monitor, s.t, s.values)
                           for s in throughput_samples() if s.cell == cell
                           and s.repetition == rep]
                store.record_repetition(
                    run_id=run, cell_id=ids[cell], repetition=rep, position=0, status="ok",
                    measurements=[MeasurementRecord(r.phase, r.metric, r.value, r.unit)
                                  for r in found],
                    samples=samples, started_at="t0", finished_at="t1")
    return run


def test_cli_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    run = make_db(db)
    assert main(["report", run, "--db", str(db)]) == 0
    text = capsys.readouterr().out
    for expected in ("Degradation against alone", "Aggregated throughput ratio",
                     "Guests started on demand", "CPU weights io:target:neighbours",
                     "0.5:1:1 (w.0.5)"):
        assert expected in text, expected
    assert text.index("fixed / 1kB") < text.index("Degradation against alone")
    assert main(["report", run, "--db", str(db), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["run"]["id"] == "r1" and doc["phases"]
    scenarios = doc["scenarios"]
    assert scenarios["ondemand"][0]["starts"][1]["startup_s"]["mean"] == 15.0
    assert {c["monitor"] for c in scenarios["cov"]} == {"throughput"}
    assert len(scenarios["weights"]) == 1
    out = tmp_path / "r.json"
    assert main(["report", run, "--db", str(db), "--format", "json", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["scenarios"]["degradation"]


def test_cli_other_formats_are_unchanged(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    run = make_db(db)
    out = tmp_path / "rows.csv"
    assert main(["report", run, "--db", str(db), "--format", "csv", "-o", str(out)]) == 0
    assert out.read_text().startswith("run,cell,platform,workload,repetition")
