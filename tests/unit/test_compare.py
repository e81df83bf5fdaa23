"""compare: the permutation test, the verdicts, the refusals, and the CLI text on a
stored real run (golden)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from hvbench.analysis.compare import (
    ComparisonRefused,
    Side,
    compare_sides,
    compare_values,
    definition_differences,
    env_differences,
    min_p_value,
    permutation_p_value,
    select_keys,
    setting_differences,
    side_repetitions,
    side_values,
)
from hvbench.cli.compare import comparison_footer, comparison_header, comparison_table
from hvbench.cli.main import main
from hvbench.errors import SpecError
from hvbench.store.database import Store
from hvbench.store.records import CellRecord, MeasurementRecord, MeasurementRow

FIXTURES = Path(__file__).parent.parent / "fixtures"
ENV = {"hostname": "h", "kernel": "6.1", "cpu_model": "EPYC", "cpus": 2,
       "memory_bytes": 1 << 34, "qemu_version": "7.2.22", "accelerator": "tcg",
       "work_dir": {"filesystem": "ext4", "free_bytes": 1}, "boot_id": "x"}


def fixture_rows() -> list[MeasurementRow]:
    data = json.loads((FIXTURES / "compare-rows.json").read_text())
    return [MeasurementRow(**r) for r in data["rows"]]


def key(metric: str = "mb_s") -> tuple[str, str, str]:
    return ("w", "read", metric)


# -- the test --------------------------------------------------------------------------------
def test_separated_samples_reach_the_exact_minimum() -> None:
    a = [100.0, 101.0, 99.5, 100.5, 100.2, 99.8]
    b = [80.0, 81.0, 79.5, 80.5, 80.2, 79.8]
    assert permutation_p_value(a, b) == pytest.approx(2 / math.comb(12, 6))
    assert min_p_value(6, 6) == pytest.approx(2 / 924)


def test_identical_values_give_p_one() -> None:
    assert permutation_p_value([5.0, 5.0, 5.0], [5.0, 5.0]) == 1.0


def test_randomized_test_is_reproducible() -> None:
    a = [float(v) for v in range(20)]
    b = [v + 3.0 for v in a]
    first = permutation_p_value(a, b, n_resamples=999)
    assert first == permutation_p_value(a, b, n_resamples=999)
    assert min_p_value(20, 20, 999) == pytest.approx(2 / 1000)


def test_one_value_per_side_is_refused() -> None:
    with pytest.raises(SpecError, match="2 values per side"):
        permutation_p_value([1.0], [2.0, 3.0])


# -- verdicts --------------------------------------------------------------------------------
def test_twenty_percent_slowdown_is_significant_and_worse() -> None:
    a = [100.0, 104.0, 97.0, 101.0, 99.0, 103.0]
    b = [v * 0.8 for v in a]
    result = compare_values(key(), a, b, alpha=0.01, threshold_pct=5.0)
    assert result.verdict == "significant" and result.change == "worse"
    assert result.delta_pct == pytest.approx(-20.0)


def test_lower_latency_is_better() -> None:
    a = [2.0, 2.1, 1.9, 2.05, 1.95, 2.02]
    b = [v / 2 for v in a]
    result = compare_values(key("lat_p99_ms"), a, b, alpha=0.01, threshold_pct=5.0)
    assert result.verdict == "significant" and result.change == "better"


def test_small_consistent_difference_is_negligible() -> None:
    a = [100.0, 100.1, 100.2, 100.3, 100.4, 100.5]
    b = [v * 1.02 for v in a]
    result = compare_values(key(), a, b, alpha=0.01, threshold_pct=5.0)
    assert result.p_value < 0.01
    assert result.verdict == "negligible" and result.change == ""


def test_large_but_noisy_difference_is_not_significant() -> None:
    a = [100.0, 60.0, 140.0, 90.0, 120.0, 70.0]
    b = [90.0, 50.0, 130.0, 85.0, 110.0, 60.0]
    result = compare_values(key(), a, b, alpha=0.01, threshold_pct=5.0)
    assert abs(result.delta_pct or 0) > 5.0
    assert result.verdict == "not significant"


def test_three_repetitions_can_never_reach_one_percent() -> None:
    result = compare_values(key(), [100.0, 101.0, 102.0], [50.0, 51.0, 52.0], alpha=0.01,
                            threshold_pct=5.0)
    assert result.verdict == "too few repetitions"
    assert result.p_value == pytest.approx(0.1)
    assert min_p_value(3, 3) == pytest.approx(0.1)
    single = compare_values(key(), [1.0], [2.0, 3.0], alpha=0.01, threshold_pct=5.0)
    assert single.verdict == "too few repetitions" and math.isnan(single.p_value)


def test_zero_baseline_has_no_delta() -> None:
    result = compare_values(key("retransmits"), [0.0] * 6, [3.0, 4.0, 5.0, 3.0, 4.0, 5.0],
                            alpha=0.01, threshold_pct=5.0)
    assert result.delta_pct is None
    assert result.verdict == "significant" and result.change == "worse"


@pytest.mark.parametrize(("kw", "message"), [
    ({"alpha": 0.0}, "--alpha"), ({"alpha": 1.5}, "--alpha"),
    ({"threshold_pct": -1.0}, "--threshold"), ({"n_resamples": 0}, "n_resamples"),
])
def test_bad_parameters(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        compare_sides(Side("a", {}), Side("b", {}), **kw)


# -- sides and selection -------------------------------------------------------------------
def test_platform_sides_line_up_by_workload() -> None:
    rows = fixture_rows()
    fast = side_values(rows, "fast")
    slow = side_values(rows, "slow")
    assert ("job", "read", "mb_s") in fast and fast.keys() == slow.keys()
    assert len(fast[("job", "read", "mb_s")]) == 7
    whole = side_values(rows)
    assert ("fast/job", "read", "mb_s") in whole


def test_default_metrics_are_the_throughput_of_each_phase() -> None:
    keys = side_values(fixture_rows(), "fast").keys()
    assert select_keys(keys, []) == [("job", "boot", "boot_s"), ("job", "read", "mb_s")]
    assert select_keys(keys, ["host.disk.*"]) == [("job", "read", "host.disk.vda.util_pct")]


def test_keys_only_on_one_side_are_listed() -> None:
    a = Side("a", {key(): [1.0, 2.0], ("x", "read", "mb_s"): [1.0, 2.0]})
    b = Side("b", {key(): [1.0, 2.0], ("y", "read", "mb_s"): [1.0, 2.0]})
    result = compare_sides(a, b)
    assert [c.cell for c in result.comparisons] == ["w"]
    assert result.only_a == [("x", "read", "mb_s")] and result.only_b == [("y", "read", "mb_s")]


def test_environment_differences_name_the_fields() -> None:
    other = {**ENV, "kernel": "6.2", "boot_id": "y",
             "work_dir": {"filesystem": "xfs", "free_bytes": 2}}
    assert env_differences(ENV, other) == [("kernel", "6.1", "6.2"),
                                           ("work_dir.filesystem", "ext4", "xfs")]
    assert env_differences(ENV, {**ENV, "boot_id": "z", "git_commit": "abc"}) == []
    assert definition_differences({"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 5}) == ["b"]


# -- CLI text (golden) and refusals ----------------------------------------------------------
def render(a: str, b: str, alpha: float = 0.01, paired: bool = True) -> str:
    rows = fixture_rows()
    side_a = Side(f"platform {a}", side_values(rows, a), side_repetitions(rows, a))
    side_b = Side(f"platform {b}", side_values(rows, b), side_repetitions(rows, b))
    result = compare_sides(side_a, side_b, metrics=["mb_s", "lat_p99_ms", "host.disk.*"],
                           alpha=alpha, paired=paired)
    with Path(os.devnull).open("w") as sink:
        console = Console(width=100, record=True, color_system=None, file=sink)
        for line in comparison_header(side_a.label, side_b.label, alpha, 5.0, result):
            console.print(line, markup=False)
        console.print(comparison_table(result))
        for line in comparison_footer(result):
            console.print(line, markup=False)
        return console.export_text()


def test_compare_golden() -> None:
    text = "\n".join(render(a, b, alpha, paired) for a, b, alpha, paired in (
        ("fast", "slow", 0.01, False), ("fast", "slow", 0.05, False),
        ("host-a", "host-b", 0.01, False), ("fast", "slow", 0.01, True)))
    golden = FIXTURES / "compare.golden.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()
    assert "significant (worse)" in text and "not significant" in text


def make_db(path: Path, envs: list[dict[str, Any]], values: dict[str, list[float]],
            workload: dict[str, Any] | None = None) -> list[str]:
    """A store with one run per env, each with the platforms of ``values``."""
    ids = []
    with Store(path) as store:
        for index, env in enumerate(envs):
            run = store.create_run(run_id=f"r{index + 1}", study_name="s", study_path="s.toml",
                                   study_text="", seed=0, env=env, hvbench_version="0",
                                   git_commit=None)
            cells = store.add_cells(run, [CellRecord(f"{p}/w", p, {"kind": p}, "w",
                                                     workload or {"size": 1})
                                          for p in values])
            for platform, series in values.items():
                for rep, value in enumerate(series):
                    store.record_repetition(
                        run_id=run, cell_id=cells[f"{platform}/w"], repetition=rep,
                        position=0, status="ok", started_at="t", finished_at="t",
                        measurements=[MeasurementRecord("read", "mb_s", value, "MB/s")])
            ids.append(run)
    return ids


def test_cli_refuses_runs_from_different_hosts(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    values = {"vm": [10.0, 11.0, 12.0, 10.5, 11.5, 12.5]}
    make_db(db, [ENV, {**ENV, "kernel": "6.9", "accelerator": "kvm"}], values)
    assert main(["compare", "r1", "r2", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "refused" in err and "kernel ('6.1' vs '6.9')" in err
    assert "accelerator ('tcg' vs 'kvm')" in err and "--force" in err
    assert main(["compare", "r1", "r2", "--db", str(db), "--force"]) == 0
    captured = capsys.readouterr()
    assert "forced: the environments differ" in captured.err
    assert "not significant" in captured.out


def test_cli_refuses_cells_defined_differently(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    make_db(db, [ENV], {"vm": [1.0, 2.0]})
    with Store(db) as store:  # a second run whose workload changed its size
        make_db_run = store.create_run(run_id="r2", study_name="s", study_path="s.toml",
                                       study_text="", seed=0, env=ENV, hvbench_version="0",
                                       git_commit=None)
        store.add_cells(make_db_run, [CellRecord("vm/w", "vm", {"kind": "vm"}, "w",
                                                 {"size": 2})])
    with pytest.raises(ComparisonRefused, match="defined differently: vm/w"):
        main_raise(["compare", "r1", "r2", "--db", str(db)])


def main_raise(argv: list[str]) -> None:
    """Run the compare handler without the CLI's error mapping."""
    from hvbench.cli.main import build_parser, err, out

    args = build_parser().parse_args(argv)
    args.handler(args, out, err)


def test_cli_two_platforms_of_the_latest_run(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    make_db(db, [ENV], {"a": [100.0, 101.0, 99.0, 100.5, 99.5, 100.2],
                        "b": [80.0, 81.0, 79.0, 80.5, 79.5, 80.2]})
    assert main(["compare", ":a", ":b", "--db", str(db), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["a"] == "run r1 platform a"
    assert doc["comparisons"][0]["verdict"] == "significant"
    assert main(["compare", "a", "b", "--run", "r1", "--db", str(db)]) == 0
    out = capsys.readouterr().out  # 80 columns: the verdict may wrap
    assert "1 significant" in out and "(worse)" in out
    assert main(["compare", ":a", "r1", "--db", str(db)]) == 2
    assert "not one of each" in capsys.readouterr().err
    assert main(["compare", ":a", ":nope", "--db", str(db)]) == 2
    assert "no measurements of platform 'nope' (platforms: a, b)" in capsys.readouterr().err


def test_cli_names_the_platform_settings_a_cell_changed(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    make_db(db, [ENV], {"vm": [1.0, 2.0]})
    with Store(db) as store:  # a second run whose guest's second disk changed its cache
        run = store.create_run(run_id="r2", study_name="s", study_path="s.toml",
                               study_text="", seed=0, env=ENV, hvbench_version="0",
                               git_commit=None)
        platform = {"kind": "vm", "vm": {"disks": [{}, {"cache": "writeback"}]}}
        store.add_cells(run, [CellRecord("vm/w", "vm", platform, "w", {"size": 1})])
    with pytest.raises(ComparisonRefused,
                       match=r"defined differently: vm/w \(disks\[1\]\.cache None vs "
                             r"'writeback'\)"):
        main_raise(["compare", "r1", "r2", "--db", str(db)])


def test_setting_differences_cover_every_disk() -> None:
    a: tuple[dict[str, Any], dict[str, Any]] = (
        {"kind": "qemu", "vm": {"disks": [{"cache": "none"}, {"cache": "none"}]}}, {})
    b: tuple[dict[str, Any], dict[str, Any]] = (
        {"kind": "qemu", "vm": {"disks": [{"cache": "none"}, {"cache": "writeback"}]}}, {})
    assert setting_differences(a, b) == [("disks[1].cache", "none", "writeback")]
    assert setting_differences(a, a) == []
    assert setting_differences({"size": 1}, {"size": 2}) == []
