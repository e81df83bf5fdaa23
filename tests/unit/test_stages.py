"""Staged cpu neighbours (seed 004 Figs. 1-4): the ``start_after_s`` field, the stages
cut from stored marks, the per-stage means over synthetic 10 Hz series, and the table,
JSON and HTML figures that show them."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from rich.console import Console

from hvbench.analysis.stages import (
    IDLE,
    Stage,
    StageWindow,
    stage_rows,
    stage_windows,
    window_stages,
)
from hvbench.cli import main as cli
from hvbench.cli.main import main
from hvbench.errors import HostError, SpecError
from hvbench.model.scenario import NeighbourSpec
from hvbench.model.study import parse_study
from hvbench.monitors.sampler import MonitorResult
from hvbench.monitors.session import PhaseMonitors
from hvbench.report.html import stage_figures
from hvbench.report.stages import stage_json, stage_tables
from hvbench.run.scenario import Neighbour, ScenarioMonitors, StagedLoads, stress_argv
from hvbench.store.database import Store
from hvbench.store.records import (
    CellRecord,
    MeasurementRecord,
    MeasurementRow,
    SampleRecord,
    SampleRow,
)
from tests.unit.waiting import wait_until

HOST_RAM = 24 << 30
CELL = "vm@stages/trickle"
CELLS = {CELL: ("vm@stages", "trickle")}

STUDY = """
[study]
name = "st"
[[lab.host]]
name = "client"
[[platform]]
name = "vm"
nic = { model = "virtio-net", backend = "tap" }
[[workload]]
kind = "web"
name = "trickle"
client = "client"
file_kb = [1]
"""


# -- the spec ---------------------------------------------------------------------------------
def test_start_after_s_stages_a_net_neighbour() -> None:
    spec = NeighbourSpec(role="net", load="iperf3", direction="from-guest", start_after_s=6)
    assert spec.start_after_s == 6.0
    assert NeighbourSpec(role="net").start_after_s is None


def test_start_after_s_is_a_cpu_field() -> None:
    spec = NeighbourSpec(role="cpu", vcpus=2, start_after_s=8)
    assert spec.start_after_s == 8.0
    assert stress_argv(spec)[:3] == ["stress-ng", "--cpu", "2"]
    assert NeighbourSpec(role="cpu").start_after_s is None
    study = parse_study(STUDY + '[[scenario]]\nname = "stages"\nneighbours = [{ role = "cpu", '
                        'start_after_s = 4 }, { role = "cpu", start_after_s = 8 }]\n',
                        "st.toml", HOST_RAM)
    assert [c.name for c in study.cells] == ["vm/trickle", "vm@stages/trickle"]


@pytest.mark.parametrize(("neighbour", "message"), [
    ('{ role = "idle", start_after_s = 4 }', 'start_after_s does not apply to role = "idle"'),
    ('{ role = "disk", start_after_s = 4 }', 'start_after_s does not apply to role = "disk"'),
    ('{ role = "cpu", start_after_s = -1 }', "start_after_s"),
])
def test_start_after_s_errors_name_the_file_and_field(neighbour: str, message: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_study(STUDY + f'[[scenario]]\nname = "x"\nneighbours = [{neighbour}]\n',
                    "st.toml", HOST_RAM)
    assert "st.toml" in str(err.value) and message in str(err.value)


# -- stages from marks -------------------------------------------------------------------------
def test_stages_are_cut_at_the_marks_in_start_order() -> None:
    stages = window_stages({"nb1": 10.2, "nb0": 5.1}, 15.0)
    assert stages == [Stage(IDLE, 0.0, 5.1), Stage("nb0", 5.1, 10.2),
                      Stage("nb0+nb1", 10.2, 15.0)]
    assert window_stages({}, 3.0) == [Stage(IDLE, 0.0, 3.0)]


def _marks(rep: int, marks: dict[str, float]) -> list[MeasurementRow]:
    return [MeasurementRow(0, CELL, "vm@stages", "trickle", rep, 0, "1kB",
                           f"{label}.cpu.started_at_s", at, "s", "vm", "stages")
            for label, at in marks.items()]


def _samples(rep: int, offset: float = 0.0) -> list[SampleRow]:
    """10 Hz rows over 15 s: cpu0 at 10 % idle, 90 % once nb0 runs (from 5 s), cpu1 at
    10 % until both run (from 10 s), then 95 %; each busy guest's vCPU % follows."""
    out = []
    for i in range(1, 151):
        t = round(0.1 * i, 1)
        cpu0 = 10.0 if t <= 5.0 else 90.0
        cpu1 = 95.0 if t > 10.0 else 10.0
        out += [SampleRow(CELL, rep, "1kB", "host.cpu", t, {
                    "busy_pct": (cpu0 + cpu1) / 2 + offset, "cpu0.busy_pct": cpu0 + offset,
                    "cpu1.busy_pct": cpu1 + offset, "idle_pct": 0.0}),
                SampleRow(CELL, rep, "1kB", "nb0", t, {"vcpu.cpu_pct": 0.0 if t <= 5 else 180.0}),
                SampleRow(CELL, rep, "1kB", "nb1", t, {"vcpu.cpu_pct": 0.0 if t <= 10 else 150.0}),
                SampleRow(CELL, rep, "1kB", "qemu", t, {"vcpu.cpu_pct": 2.0, "vcpu.threads": 1})]
    return out


def _windows() -> list[StageWindow]:
    rows = [*_marks(0, {"nb0": 5.0, "nb1": 10.0}), *_marks(1, {"nb0": 5.0, "nb1": 10.0})]
    samples = [*_samples(0), *_samples(1, offset=2.0),
               # another cell, and a window without marks: both left out
               *[SampleRow("other/x", 0, "1kB", "host.cpu", 0.1, {"cpu0.busy_pct": 1.0})],
               *_samples(2)]
    return stage_windows(rows, samples, CELLS)


def test_stage_means_per_core_and_per_guest() -> None:
    windows = _windows()
    assert [(w.repetition, [s.name for s in w.stages]) for w in windows] == [
        (0, [IDLE, "nb0", "nb0+nb1"]), (1, [IDLE, "nb0", "nb0+nb1"])]
    assert list(windows[0].series) == ["host busy %", "cpu0 busy %", "cpu1 busy %",
                                       "target vCPU %", "nb0 vCPU %", "nb1 vCPU %"]
    means = windows[0].stage_means()
    assert means[IDLE]["cpu0 busy %"] == pytest.approx(10.0)
    assert means["nb0"]["cpu0 busy %"] == pytest.approx(90.0)
    assert means["nb0"]["cpu1 busy %"] == pytest.approx(10.0)
    assert means["nb0+nb1"]["cpu1 busy %"] == pytest.approx(95.0)
    assert means["nb0+nb1"]["nb1 vCPU %"] == pytest.approx(150.0)
    assert means[IDLE]["nb0 vCPU %"] == 0.0


def test_a_row_spanning_a_mark_belongs_to_no_stage() -> None:
    rows = _marks(0, {"nb0": 5.05})
    windows = stage_windows(rows, _samples(0), CELLS)
    means = windows[0].stage_means()
    # the 5.0-5.1 s row spans the mark: without it the idle stage stays at 10 %
    assert means[IDLE]["cpu0 busy %"] == pytest.approx(10.0)
    assert means["nb0"]["cpu0 busy %"] == pytest.approx(90.0)


def test_stage_rows_summarize_the_repetitions() -> None:
    rows = stage_rows(_windows())
    assert [r.stage for r in rows] == [IDLE, "nb0", "nb0+nb1"]
    idle = rows[0]
    assert idle.seconds.mean == pytest.approx(5.0) and idle.seconds.n == 2
    assert idle.means["cpu0 busy %"].mean == pytest.approx(11.0)  # 10 and 12
    assert idle.means["cpu0 busy %"].n == 2


def test_stage_table_and_json() -> None:
    rows = stage_rows(_windows())
    (table,) = stage_tables(rows)
    assert table.title == "CPU per stage, vm@stages trickle/1kB (seed 004 Figs. 1-4)"
    assert table.headers[:4] == ("stage", "seconds", "host busy %", "cpu0 busy %")
    assert [r[0] for r in table.rows] == [IDLE, "nb0", "nb0+nb1"]
    assert table.rows[0][-1] == "2"
    doc = json.loads(json.dumps(stage_json(rows)))
    assert doc[2]["stage"] == "nb0+nb1"
    assert doc[2]["means"]["cpu1 busy %"]["mean"] == pytest.approx(96.0)


def test_stage_figures_mark_the_stage_starts() -> None:
    ((workload, phase, host, guests, traffic),) = stage_figures(_windows())
    assert (workload, phase) == ("trickle", "1kB")
    assert [p.title for p in host] == ["vm@stages rep 1", "vm@stages rep 2"]
    assert [line.label for line in host[0].lines] == ["host busy", "cpu0 busy", "cpu1 busy"]
    assert [line.label for line in guests[0].lines] == ["target vCPU", "nb0 vCPU",
                                                        "nb1 vCPU"]
    assert [v.x for v in host[0].vlines] == [5.0, 10.0]
    assert traffic == []  # no NIC series: no bandwidth figure


# -- the stored run through the CLI -------------------------------------------------------------
def _stored_run(path: Path) -> str:
    rows = _marks(0, {"nb0": 5.0, "nb1": 10.0})
    with Store(path) as store:
        run = store.create_run(run_id="r1", study_name="stages", study_path="s.toml",
                               study_text="", seed=1, env={"accelerator": "tcg"},
                               hvbench_version="0", git_commit=None)
        definition = {"kind": "qemu", "name": "vm@stages",
                      "scenario": {"neighbours": [{"role": "cpu"}, {"role": "cpu"}]}}
        ids = store.add_cells(run, [CellRecord(CELL, "vm@stages", definition, "trickle",
                                               {"kind": "web"})])
        store.record_repetition(
            run_id=run, cell_id=ids[CELL], repetition=0, position=0, status="ok",
            measurements=[MeasurementRecord(r.phase, r.metric, r.value, r.unit) for r in rows],
            samples=[SampleRecord(s.phase, s.monitor, s.t, s.values) for s in _samples(0)],
            started_at="t0", finished_at="t1")
    return run


def test_terminal_and_json_reports_read_the_stage_series(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The terminal report loads no series otherwise: the stage table loads its own."""
    # A console of this width for the call: the CLI's own was made when some earlier
    # test first imported it, with whatever COLUMNS that test had set.
    monkeypatch.setattr(cli, "out", Console(width=200, highlight=False))
    db = tmp_path / "s.db"
    run = _stored_run(db)
    assert main(["report", run, "--db", str(db)]) == 0
    text = capsys.readouterr().out
    assert "CPU per stage, vm@stages trickle/1kB" in text and "cpu1 busy %" in text
    assert main(["report", run, "--db", str(db), "--format", "json"]) == 0
    stages = json.loads(capsys.readouterr().out)["stages"]
    assert [s["stage"] for s in stages] == [IDLE, "nb0", "nb0+nb1"]
    assert stages[1]["means"]["cpu0 busy %"]["mean"] == pytest.approx(90.0)


# -- staged iperf3 starts (seed 004 Figs. 5-7) --------------------------------------------------
NET_CELL = "vm@netstages/iperf3"


def _net_samples(rep: int) -> list[SampleRow]:
    """10 Hz NIC rows over 12 s: the target's stream at 400 Mbit/s (tx on the guest is
    rx on its tap, 4 of ACKs back), halved once nb0's stream starts at 6 s; a lab
    host's veth that is no guest's; the host CPU beside it."""
    out = []
    for i in range(1, 121):
        t = round(0.1 * i, 1)
        second = t > 6.0
        out += [SampleRow(NET_CELL, rep, "tx", "net", t, {
                    "guest-tap0.rx_mbit_s": 200.0 if second else 400.0,
                    "guest-tap0.tx_mbit_s": 2.0 if second else 4.0,
                    "guest-tap0.rx_pps": 9000.0,
                    "nb0-tap0.rx_mbit_s": 190.0 if second else 0.0,
                    "nb0-tap0.tx_mbit_s": 2.0 if second else 0.0,
                    "client-veth.rx_mbit_s": 999.0}),
                SampleRow(NET_CELL, rep, "tx", "host.cpu", t, {"busy_pct": 50.0})]
    return out


def _net_marks(rep: int, at: float) -> list[MeasurementRow]:
    return [MeasurementRow(0, NET_CELL, "vm@netstages", "iperf3", rep, 0, "tx",
                           "nb0.net.started_at_s", at, "s", "vm", "netstages")]


def test_net_stages_give_each_guest_and_the_sum() -> None:
    rows = [*_net_marks(0, 6.0), *_net_marks(1, 6.0)]
    windows = stage_windows(rows, [*_net_samples(0), *_net_samples(1)],
                            {NET_CELL: ("vm@netstages", "iperf3")})
    assert [[s.name for s in w.stages] for w in windows] == [[IDLE, "nb0"]] * 2
    assert list(windows[0].series) == ["host busy %", "target Mbit/s", "nb0 Mbit/s",
                                       "guests Mbit/s"]
    means = windows[0].stage_means()
    # The first stage is the target's stream alone (its own iperf3 runs throughout).
    assert means[IDLE]["target Mbit/s"] == pytest.approx(404.0)
    assert means[IDLE]["nb0 Mbit/s"] == 0.0
    assert means[IDLE]["guests Mbit/s"] == pytest.approx(404.0)
    assert means["nb0"]["target Mbit/s"] == pytest.approx(202.0)
    assert means["nb0"]["nb0 Mbit/s"] == pytest.approx(192.0)
    assert means["nb0"]["guests Mbit/s"] == pytest.approx(394.0)
    (table,) = stage_tables(stage_rows(windows))
    assert table.title == ("CPU and bandwidth per stage, vm@netstages iperf3/tx "
                           "(seed 004 Figs. 1-7)")
    assert table.headers[-4:] == ("target Mbit/s", "nb0 Mbit/s", "guests Mbit/s", "n")
    assert "Mbit/s: rx + tx of the guest's taps" in (table.note or "")
    ((_, _, host, guests, traffic),) = stage_figures(windows)
    assert guests == [] and len(host) == 2
    assert [line.label for line in traffic[0].lines] == ["target Mbit/s", "nb0 Mbit/s",
                                                         "guests Mbit/s"]
    assert [v.x for v in traffic[0].vlines] == [6.0]


def test_cpu_stages_leave_the_traffic_out() -> None:
    # A CPU test's target has a tap too (its trickle of web requests): without a staged
    # net neighbour the stage table stays CPU only.
    rows = _marks(0, {"nb0": 5.0})
    traffic = [SampleRow(CELL, 0, "1kB", "net", 0.1 * i, {"guest-tap0.rx_mbit_s": 0.1})
               for i in range(1, 100)]
    (window,) = stage_windows(rows, [*_samples(0), *traffic], CELLS)
    assert not any(c.endswith("Mbit/s") for c in window.series)
    (table,) = stage_tables(stage_rows([window]))
    assert table.title.startswith("CPU per stage, ")


def test_a_staged_net_neighbour_chains_its_load_in_the_window() -> None:
    # The chain itself is a fake load generator (the real one: the integration test
    # test_a_staged_net_neighbour_streams_from_its_stage_on); no guest is touched.
    ran = threading.Event()

    def chunk() -> float:
        ran.set()
        time.sleep(0.01)
        return 900.0
    nb = Neighbour("nb0", NeighbourSpec(role="net", start_after_s=0), cast(Any, None))
    nb.chunk = chunk
    stages = StagedLoads([nb], time.monotonic())
    stages.start()
    assert ran.wait(10)
    stages.join()
    result = MonitorResult(seconds=60.0)
    stages.add_to(result)
    assert 0.0 <= result.summary["nb0.net.started_at_s"] < 10.0
    assert "stages" not in result.errors
    chain = nb.load
    assert chain is not None
    wait_until(lambda: bool(chain.records), 10)
    assert chain.records[0].value == 900.0
    stages.stop_loads()
    assert nb.load is None and chain.error is None
    done = len(chain.records)
    time.sleep(0.05)
    assert len(chain.records) == done  # the chain ended with the window



def test_a_window_whose_samplers_fail_to_stop_still_ends_its_staged_chain(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The window's samplers raise when stopped (faked; no guest is touched): the staged
    # chain must end with the window anyway, or it streams on into the next windows.
    ran = threading.Event()

    def chunk() -> float:
        ran.set()
        time.sleep(0.01)
        return 900.0

    def broken(self: PhaseMonitors,
               focus: tuple[float, float] | None = None) -> MonitorResult:
        raise HostError("the sampler did not stop")
    nb = Neighbour("nb0", NeighbourSpec(role="net", start_after_s=0), cast(Any, None))
    nb.chunk = chunk
    run = SimpleNamespace(spec=SimpleNamespace(start=None), neighbours=[nb])
    monkeypatch.setattr(PhaseMonitors, "start", lambda self: None)
    monkeypatch.setattr(PhaseMonitors, "stop", broken)
    window = ScenarioMonitors(cast(Any, run), [], 10.0)
    window.start()
    assert ran.wait(10)
    chain = nb.load
    assert chain is not None
    with pytest.raises(HostError, match="did not stop"):
        window.stop()
    assert nb.load is None
    done = len(chain.records)
    time.sleep(0.05)
    assert len(chain.records) == done
