"""The answer of a tuning run read from a store (synthetic measurements, no guest): the
ranking, the winner against the default and native, the honesty labels, the winner
block, the JSON and the HTML tuning section."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hvbench.cli.main import main
from hvbench.model.platform import PlatformSpec
from hvbench.model.study import Variant
from hvbench.model.tune import TuneSpec
from hvbench.report.tune import (
    ABOVE_NATIVE_NOTE,
    CACHED_NOTE,
    TCG_NOTE,
    answer_lines,
    load_tune_report,
    ranked_table,
    tune_json,
    tuning_html,
)
from hvbench.run.tune import load_tune, resume_tune
from hvbench.store.database import Store
from hvbench.store.records import MeasurementRecord, cell_record

TUNE = """
[study]
name = "t"
seed = 3

[[platform]]
kind = "native"

[[platform]]
kind = "qemu"
name = "vm"
machine = "pc"
memory_mib = 256
disk = { bus = "virtio-blk", cache = "writethrough", size = "48M" }

[[workload]]
name = "wr"
kind = "disk"
profile = "dd"
target = "device"
file_size = "16M"
direct = true
phases = ["write"]

[tune]
metric = "mb_s"

[tune.axes]
"disk.cache" = ["none", "writeback", "writethrough"]
"disk.iothread" = [false, true]
"""
#: (cache, iothread) -> MB/s per repetition; native: 100.
VALUES = {
    ("writethrough", False): [40.0, 42.0, 41.0, 39.0],  # the default
    ("none", False): [80.0, 82.0, 81.0, 79.0, 80.5],
    ("writeback", True): [130.0, 128.0, 131.0, 129.0],  # above native: the page cache
    ("none", True): [60.0],
}


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Store, str, TuneSpec]:
    return _stored(tmp_path, TUNE)


@pytest.fixture
def crowned(tmp_path: Path) -> tuple[Store, str, TuneSpec]:
    """The same run from a tune file that lets a page-cache measurement win."""
    return _stored(tmp_path, TUNE.replace('metric = "mb_s"',
                                          'metric = "mb_s"\ncrown_cached = true'))


def _stored(tmp_path: Path, text: str) -> tuple[Store, str, TuneSpec]:
    path = tmp_path / "t.toml"
    path.write_text(text)
    spec = load_tune(str(path))
    store = Store(tmp_path / "t.db")
    run_id = store.create_run(run_id=None, study_name="t", study_path=str(path),
                              study_text=text, seed=3, env={"accelerator": "tcg"},
                              hvbench_version="0", git_commit=None)
    assert spec.native is not None
    _store(store, run_id, spec, spec.native, [100.0, 101.0, 99.0, 100.5])
    for (cache, iothread), values in VALUES.items():
        variant = spec.trial_variant((("disk.cache", cache), ("disk.iothread", iothread)))
        _store(store, run_id, spec, variant, values)
    return store, run_id, spec


def _store(store: Store, run_id: str, spec: TuneSpec, variant: Variant[PlatformSpec],
           values: list[float]) -> None:
    cell = spec.cells(variant)[0]
    ids = store.add_cells(run_id, [cell_record(cell)])
    for rep, value in enumerate(values):
        store.record_repetition(
            run_id=run_id, cell_id=ids[cell.name], repetition=rep, position=rep,
            status="ok", measurements=[MeasurementRecord("write", "mb_s", value, "MB/s")],
            started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T00:00:05+00:00")


def test_the_answer_ranks_labels_and_tests(stored: tuple[Store, str, TuneSpec]) -> None:
    store, run_id, _ = stored
    report = load_tune_report(store, run_id, resume_tune(store, run_id))
    names = [r.name for r in report.rows]
    assert names == ["vm.writeback-on", "vm.none-off", "vm.none-on", "vm.writethrough-off"]
    # O_DIRECT writes faster than the bare host: the page cache, not a device
    # measurement: flagged and, by default, not crowned (issue 23, defect 5).
    assert set(report.cached) == {"vm.writeback-on"}
    assert report.winner is not None and report.winner.name == "vm.none-off"
    assert report.default is not None and report.default.name == "vm.writethrough-off"
    assert report.rows[0].above_native and not report.rows[1].above_native
    assert report.vs_default is not None and report.vs_default.verdict == "significant"
    assert report.vs_native is not None and report.vs_native.change == "worse"
    table = ranked_table(report)
    assert ABOVE_NATIVE_NOTE in table.note and TCG_NOTE in table.note
    assert CACHED_NOTE in table.note
    assert table.rows[0][1] == "vm.writeback-on (not a device measurement)"
    assert table.rows[1][1] == "vm.none-off (winner)"
    assert table.rows[2][2] == "60 (n=1)"
    lines = "\n".join(answer_lines(report))
    assert "winner vs default: 80.5 vs 40.5" in lines
    assert "vm.writeback-on is not a device measurement" in lines and "not crowned" in lines
    assert json.loads(json.dumps(tune_json(report)))["not_device_measurements"] == {
        "vm.writeback-on": report.cached["vm.writeback-on"]}


def test_crown_cached_lets_the_page_cache_win(crowned: tuple[Store, str, TuneSpec]) -> None:
    store, run_id, _ = crowned
    report = load_tune_report(store, run_id, resume_tune(store, run_id))
    assert report.winner is not None and report.winner.name == "vm.writeback-on"
    lines = "\n".join(answer_lines(report))
    assert f"note: the winner is {ABOVE_NATIVE_NOTE}" in lines
    assert "crowned because crown_cached = true" in lines


def test_json_and_html_carry_the_winner_block(crowned: tuple[Store, str, TuneSpec]) -> None:
    store, run_id, _ = crowned
    report = load_tune_report(store, run_id, resume_tune(store, run_id))
    data = json.loads(json.dumps(tune_json(report)))
    config = data["winner_config"]
    assert 'cache = "writeback"' in config["platform_toml"]
    assert any("cache=writeback" in a for a in config["qemu_args"])
    assert "<iothreads>1</iothreads>" in config["libvirt_elements"]
    assert data["ranking"][0]["pct_of_native"][0] == pytest.approx(129.5 / 100.125 * 100)
    page = tuning_html(report)
    assert page.startswith('<h2 id="tuning">Tuning</h2>')
    assert page.count("<figure") == 2 and page.count('<div class="figs">') == 1


@pytest.mark.parametrize(("argv", "message"), [
    (["tune"], "give a tune file or --resume RUN"),
    (["tune", "x.toml", "--resume", "r1"], "give a tune file or --resume RUN"),
    (["tune", "--resume", "r1", "--seed", "4"], "drop --seed"),
])
def test_tune_options_are_checked_before_anything_starts(
        argv: list[str], message: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--db", str(tmp_path / "none.db")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()


def test_a_bad_tune_file_is_one_line_exit_2(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(TUNE.replace('metric = "mb_s"', 'metric = "furlongs"'))
    assert main(["tune", str(path), "--db", str(tmp_path / "t.db")]) == 2
    err = capsys.readouterr().err
    assert f"{path}: tune.metric: 'furlongs' is not a catalogue metric" in err.replace("\n", "")


def test_run_resume_refuses_a_tuning_run(stored: tuple[Store, str, TuneSpec], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    store, run_id, _ = stored
    assert main(["run", "--resume", run_id, "--db", str(store.path)]) == 2
    assert f"hvbench tune --resume {run_id}" in capsys.readouterr().err.replace("\n", "")
