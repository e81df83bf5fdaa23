"""Propagation workloads in study files: expansion into cells, the headnode the lab
gains, refusals; the runner's records of a propagation cell (no QEMU, no lab)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hvbench.errors import SpecError
from hvbench.kinds.propagation.cell import repository_methods
from hvbench.kinds.propagation.spec import PROPAGATION_PHASES, PropagationWorkloadSpec
from hvbench.model.study import parse_study
from hvbench.model.workload import spec_classes
from hvbench.monitors.sampler import MonitorResult
from hvbench.run.cells.base import MeasuredWindow, as_spec, cell_result
from hvbench.run.cells.registry import kind_of
from hvbench.workloads.outcome import PhaseOutcome

EXAMPLES = Path(__file__).parent.parent.parent / "examples"
HOST_RAM = 24 << 30

STUDY = """
[study]
name = "prop"
repetitions = 2

[[platform]]
kind = "native"

[[platform]]
name = "vm"
memory_mib = 256

[[workload]]
kind = "propagation"
method = ["scp", "overlay"]
image_size = ["128M", "1G"]

[[scenario]]
name = "idle1"
neighbours = [{ role = "idle", count = 1 }]
"""


def test_propagation_is_a_registered_self_booting_kind() -> None:
    assert spec_classes()["propagation"] is PropagationWorkloadSpec
    assert PropagationWorkloadSpec.SELF_BOOTING
    kind = kind_of("propagation")
    assert not kind.boots_platform and kind.needs_lab


def test_a_propagation_study_expands_into_method_x_size_cells_on_guests_only() -> None:
    study = parse_study(STUDY, "p.toml", HOST_RAM)
    # No native cell (the node boots a guest), no scenario cell (it boots its own).
    assert [c.name for c in study.cells] == [
        "vm/propagation.scp-128M", "vm/propagation.scp-1G",
        "vm/propagation.overlay-128M", "vm/propagation.overlay-1G"]
    specs = [as_spec(c.workload.spec, PropagationWorkloadSpec) for c in study.cells]
    assert all(isinstance(s, PropagationWorkloadSpec) for s in specs)
    assert [(s.method, s.image_size) for s in specs] == [
        ("scp", 128 << 20), ("scp", 1 << 30), ("overlay", 128 << 20), ("overlay", 1 << 30)]
    assert {s.phase_list() for s in specs} == {PROPAGATION_PHASES}
    assert all(c.scenario is None for c in study.cells)
    # The lab gains the repository host, on a link shaped to the default 1 Gbit/s.
    assert study.lab is not None
    assert [(h.name, h.rate) for h in study.lab.hosts] == [("headnode", "1gbit")]


def test_a_declared_repository_host_is_kept_and_others_are_added() -> None:
    text = STUDY.replace('[[platform]]\nkind = "native"', """[lab]
[[lab.host]]
name = "headnode"
rate = "100mbit"

[[platform]]
kind = "native\"""").replace('image_size = ["128M", "1G"]',
                             'image_size = "256M"\nrepository = ["headnode", "repo2"]\n'
                             'link_rate = "10gbit"')
    study = parse_study(text, "p.toml", HOST_RAM)
    assert study.lab is not None
    assert [(h.name, h.rate) for h in study.lab.hosts] == [
        ("headnode", "100mbit"), ("repo2", "10gbit")]
    assert [c.name for c in study.cells] == [
        "vm/propagation.scp-headnode", "vm/propagation.scp-repo2",
        "vm/propagation.overlay-headnode", "vm/propagation.overlay-repo2"]
    # A session starts, on each repository host, the servers of every method used there.
    assert repository_methods(study, "headnode") == ["overlay", "scp"]
    assert repository_methods(study, "repo2") == ["overlay", "scp"]
    assert repository_methods(study, "client") == []


@pytest.mark.parametrize(("edit", "message"), [
    (('method = ["scp", "overlay"]', 'method = "ftp"'), "method"),
    (('image_size = ["128M", "1G"]', 'image_size = "lots"'), "image_size"),
    (('image_size = ["128M", "1G"]', 'image_size = "128M"\nlink_rate = "fast"'),
     "link_rate"),
    (('image_size = ["128M", "1G"]', 'image_size = "128M"\nbogus = 1'), "bogus"),
])
def test_bad_propagation_fields_are_refused_naming_the_field(edit: tuple[str, str],
                                                             message: str) -> None:
    text = STUDY.replace(*edit, 1)
    assert text != STUDY
    with pytest.raises(SpecError, match=message):
        parse_study(text, "p.toml", HOST_RAM)


def test_a_native_only_propagation_study_has_no_cell() -> None:
    text = STUDY.replace('[[platform]]\nname = "vm"\nmemory_mib = 256\n', "")
    with pytest.raises(SpecError, match="no cell remains"):
        parse_study(text, "p.toml", HOST_RAM)


def test_the_example_sweeps_five_methods_over_four_sizes() -> None:
    study = parse_study((EXAMPLES / "propagation.toml").read_text(), "propagation.toml",
                        HOST_RAM)
    specs = [as_spec(c.workload.spec, PropagationWorkloadSpec) for c in study.cells]
    assert {s.method for s in specs} == {"scp", "http", "rsync", "http-zstd", "overlay"}
    assert len({s.image_size for s in specs}) >= 4
    assert min(s.image_size for s in specs) >= 120 << 20  # above the guest's root fs
    assert study.lab is not None and study.lab.hosts[0].rate == "1gbit"
    assert study.cells[0].name == "vm/propagation.scp-128M"


def _phases(raw: str) -> list[MeasuredWindow]:
    out = []
    for phase in PROPAGATION_PHASES:
        metrics = {"duration_s": (0.5, "s")}
        series: list[tuple[float, dict[str, float]]] = []
        monitors = MonitorResult()
        wall = 0.5
        if phase == "transfer":
            metrics |= {"size_bytes": (1e8, "bytes"), "bytes_on_wire": (1.04e8, "bytes")}
            series = [(0.1, {"received_mb": 10.0, "mb_s": 100.0})]
            monitors = MonitorResult(summary={"net.headnode.rx_mbit_s": 900.0},
                                     series={"net": [(0.1, {"headnode.rx_mbit_s": 900.0})]})
            wall = 0.7
        out.append(MeasuredWindow([PhaseOutcome(phase=phase, metrics=metrics, raw=raw,
                                                raw_kind="propagation-json",
                                                series=series)], wall, monitors))
    return out


def test_a_propagation_cell_stores_rows_series_and_one_raw_document() -> None:
    raw = json.dumps({"method": "http"})
    result = cell_result(_phases(raw), raw_once="propagation")
    rows = {(m.phase, m.metric): m.value for m in result.measurements}
    assert {p for p, _ in rows} == set(PROPAGATION_PHASES)
    assert all(rows[(p, "duration_s")] == 0.5 for p in PROPAGATION_PHASES)
    assert rows[("transfer", "bytes_on_wire")] == 1.04e8
    assert rows[("transfer", "net.headnode.rx_mbit_s")] == 900.0
    assert rows[("transfer", "phase_wall_s")] == 0.7
    assert {(s.phase, s.monitor) for s in result.samples} == {
        ("transfer", "net"), ("transfer", "propagation")}
    assert [(r.phase, r.kind, r.content) for r in result.raw] == [
        ("propagation", "propagation-json", raw)]
    assert cell_result([], raw_once="propagation").raw == []
