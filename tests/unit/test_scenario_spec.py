"""Scenarios, lifecycle and propagation workloads in study files: expansion and errors;
a web neighbour's httperf chain measured as the target's; the time-series statistics of
start-on-demand."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from hvbench.analysis.stats import dip_metrics, one_second_buckets, series_cov_pct, steady_buckets
from hvbench.errors import SpecError
from hvbench.kinds.qemu.spec import QemuPlatformSpec
from hvbench.kinds.web.spec import WebWorkloadSpec
from hvbench.model.scenario import NeighbourSpec, ScenarioSpec
from hvbench.model.study import parse_study
from hvbench.platforms.base import ExecResult, Platform
from hvbench.run.scenario import LOAD_CHUNK_S, ScenarioRun, _web_chunk
from hvbench.workloads import web
from hvbench.workloads.endpoints import Endpoint

NET = Path(__file__).resolve().parents[1] / "fixtures" / "net"

HOST_RAM = 24 << 30

BASE = """
[study]
name = "sc"
repetitions = 1

[[lab.host]]
name = "client"

[[platform]]
kind = "native"

[[platform]]
name = "vm"
nic = { model = "virtio-net", backend = "tap" }

[[workload]]
name = "web"
kind = "web"
client = "client"
file_kb = [1, 70]

[[workload]]
name = "dd"
profile = "dd"
direct = true
"""


def _parse(extra: str) -> list[str]:
    return [c.name for c in parse_study(BASE + extra, "sc.toml", HOST_RAM).cells]


def test_scenarios_multiply_qemu_cells_only() -> None:
    names = _parse("""
[[scenario]]
name = "idle3"
neighbours = [{ role = "idle", count = 3 }]

[[scenario]]
name = "w"
weights = { io = [0.5, 1, 2] }
workloads = ["web"]
""")
    assert names == ["native/web", "native/dd", "vm/web", "vm@idle3/web", "vm@w.0.5/web",
                     "vm@w.1/web", "vm@w.2/web", "vm/dd", "vm@idle3/dd"]


def test_platform_name_and_json_carry_the_scenario() -> None:
    study = parse_study(BASE + '[[scenario]]\nname = "cpu"\nneighbours = [{ role = "cpu" }]\n',
                        "sc.toml", HOST_RAM)
    cell = next(c for c in study.cells if c.scenario is not None)
    assert cell.platform_name == "vm@cpu"
    assert isinstance(cell.platform.spec, QemuPlatformSpec)
    assert study.cells[0].platform_name == "native"


@pytest.mark.parametrize(("extra", "message"), [
    ('[[scenario]]\nneighbours = [{ role = "idle" }]\n', "scenario[0]: name"),
    ('[[scenario]]\nname = "alone"\nneighbours = [{ role = "idle" }]\n', "not 'alone'"),
    ('[[scenario]]\nname = "x"\n', "needs neighbours, start or weights"),
    ('[[scenario]]\nname = "x"\nneighbours = [{ role = "idle", rate = 5 }]\n',
     "rate does not apply to role = \"idle\""),
    ('[[scenario]]\nname = "x"\nneighbours = [{ role = "gpu" }]\n', "neighbours[0].role"),
    ('[[scenario]]\nname = "x"\nneighbours = [{ role = "net", client = "nobody" }]\n',
     "client 'nobody' is not a [[lab.host]]"),
    ('[[scenario]]\nname = "x"\nweights = { cpus = "zero" }\n', "expected a CPU list"),
    ('[[scenario]]\nname = "x"\nweights = { io = 0 }\n', "weights.io"),
    ('[[scenario]]\nname = "x"\nweights = { io = 2 }\nworkloads = ["nope"]\n',
     "no workload is named 'nope'"),
    ('[[scenario]]\nname = "x"\nstart = { count = 0 }\n', "start.count"),
    ('[[scenario]]\nname = "x"\nweights = { io = 2 }\n[[scenario]]\nname = "x"\n'
     'weights = { io = 3 }\n', "scenario[1]: name: 'x' is the name of scenario[0] too"),
    ('[[scenario]]\nname = "x"\nneighbours = [{ role = "idle", rate = 5, rw = "read" }]\n',
     "rate, rw do not apply to role = \"idle\""),
    ('[[scenario]]\nname = "x"\nneighbours = [{ role = "net", reply_timeout_s = 1 }]\n',
     "reply_timeout_s applies to load = \"web\" only"),
    ('[[scenario]]\nname = "x"\nneighbours = [{ role = "cpu", reply_timeout_s = 1 }]\n',
     "reply_timeout_s does not apply to role = \"cpu\""),
    ('[[scenario]]\nname = "x"\nneighbours = [{ role = "net", load = "web", '
     'reply_timeout_s = 0 }]\n', "neighbours[0].reply_timeout_s"),
])
def test_scenario_errors_name_file_field_and_expectation(extra: str, message: str) -> None:
    with pytest.raises(SpecError) as err:
        _parse(extra)
    assert "sc.toml" in str(err.value) and message in str(err.value)


def test_neighbour_vm_has_what_its_role_needs() -> None:
    assert NeighbourSpec(role="net").vm().nics[0].backend == "tap"
    assert NeighbourSpec(role="disk").vm().disks[0].size == 1 << 30
    idle = NeighbourSpec(role="idle", vcpus=2, memory_mib=384).vm()
    assert (idle.vcpus, idle.memory_mib, idle.nics, idle.disks) == (2, 384, (), ())
    spec = ScenarioSpec(neighbours=(NeighbourSpec(count=2), NeighbourSpec(role="net")))
    assert spec.guest_count() == 3 and spec.lab_clients() == {"client"}


def test_a_web_neighbours_reply_timeout_is_the_web_workloads_field() -> None:
    """Same default and range as ``kind = "web"``'s, so both sides can wait alike."""
    mine, theirs = (NeighbourSpec.model_fields["reply_timeout_s"],
                    WebWorkloadSpec.model_fields["reply_timeout_s"])
    assert (mine.default, mine.metadata) == (theirs.default, theirs.metadata)
    assert NeighbourSpec(role="net", load="web", reply_timeout_s=1).reply_timeout_s == 1.0


#: BASE's web workload, fixed at 2000 req/s with a 1 s reply timeout, copied once.
IDENTICAL = BASE.replace("file_kb = [1, 70]",
                         "file_kb = [1]\nrate = 2000\nreply_timeout_s = 1") + """
[[scenario]]
name = "pair"
workloads = ["web"]
identical = 2
"""


def _copy(text: str) -> NeighbourSpec:
    """The neighbour spec the scenario's identical copy of the target runs with."""
    study = parse_study(text, "id.toml", HOST_RAM)
    cell = next(c for c in study.cells if c.scenario is not None)
    assert cell.scenario is not None
    run = ScenarioRun(cell.scenario.spec, "pair", cast(Platform, SimpleNamespace(name="vm")),
                      session=None, key="vm@pair", cell=cell)
    ((spec, vm),) = run._identical()
    assert vm.nics[0].backend == "tap"
    return spec


def test_an_identical_copy_waits_as_long_as_the_target() -> None:
    copy = _copy(IDENTICAL)
    assert (copy.load, copy.file_kb, copy.rate, copy.reply_timeout_s) == ("web", 1, 2000, 1)
    default = _copy(IDENTICAL.replace("reply_timeout_s = 1\n", ""))
    assert default.reply_timeout_s == WebWorkloadSpec().reply_timeout_s


class _Replay:
    """An executor answering with captured httperf output; notes the argv and timeout."""

    def __init__(self, stdout: str) -> None:
        self.stdout = stdout.encode()
        self.calls: list[tuple[list[str], float]] = []

    def exec(self, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None,
             env: Mapping[str, str] | None = None) -> ExecResult:
        self.calls.append((list(argv), timeout))
        return ExecResult(tuple(argv), 0, self.stdout, b"", 1.0)


def test_a_web_neighbours_chunk_waits_its_timeout_and_counts_as_the_target() -> None:
    text = (NET / "httperf-guest-10k-rate640-queueing.txt").read_text()
    replay = _Replay(text)
    client = Endpoint("client", "netns", replay, "10.9.0.10", "10.9.0.10",
                      netns="hvb-x-client")
    server = Endpoint("nb0", "guest", replay, "10.9.0.101", "10.9.0.101")
    site = web.StaticSite(file_kb=(10,), port=8180)
    once = _web_chunk(site, 640.0, 1.5, client, server)
    value = once()
    ((argv, timeout),) = replay.calls
    assert "--timeout=1.5" in argv and "--rate=640" in argv
    assert f"--num-conns={round(640 * LOAD_CHUNK_S)}" in argv
    assert timeout >= LOAD_CHUNK_S + 1.5
    # The target's replies_s formula (HttperfResult.achieved_rps: the shortest
    # connection taken off httperf's duration), not 2xx replies / duration as before.
    result = web.parse_httperf(text)
    assert value == pytest.approx(result.achieved_rps())
    assert value > result.ok_replies / result.duration_s


def test_lifecycle_cells_are_qemu_only_and_alone_only() -> None:
    text = """
[study]
name = "p"
[[platform]]
kind = "native"
[[platform]]
name = "vm"
[[workload]]
kind = "lifecycle"
create = "overlay"
image_format = "qcow2"
image_size = ["128M", "256M"]
[[scenario]]
name = "idle"
neighbours = [{ role = "idle" }]
"""
    study = parse_study(text, "p.toml", HOST_RAM)
    assert [c.name for c in study.cells] == ["vm/lifecycle.128M", "vm/lifecycle.256M"]
    assert study.lab is None


def test_lifecycle_overlay_needs_qcow2() -> None:
    text = ('[study]\nname = "l"\n[[platform]]\nname = "vm"\n[[workload]]\n'
            'kind = "lifecycle"\ncreate = "overlay"\n')
    with pytest.raises(SpecError, match="image_format = \"qcow2\""):
        parse_study(text, "l.toml", HOST_RAM)


def test_one_second_buckets_average_each_second() -> None:
    rows = [(0.05, 10.0), (0.55, 20.0), (1.1, 30.0), (2.9, 40.0), (-0.1, 99.0)]
    assert one_second_buckets(rows) == [(0, 15.0), (1, 30.0), (2, 40.0)]


def test_dip_metrics_measure_depth_and_length_against_the_baseline() -> None:
    # Second 0 is the load's start (near 0) and second 8 its end: neither counts.
    buckets = [(0, 3.0), (1, 100.0), (2, 102.0), (3, 98.0), (4, 50.0), (5, 80.0),
               (6, 95.0), (7, 100.0), (8, 10.0)]
    dip = dip_metrics(buckets, event_s=4.0)
    assert dip["baseline"] == 100.0
    assert dip["depth_pct"] == pytest.approx(50.0)
    assert dip["length_s"] == 2.0  # seconds 4 and 5 are below 90 %
    assert dip["min_normalized"] == pytest.approx(0.5)
    assert dip_metrics(buckets, event_s=0.0) == {}
    # Too short to trim: every bucket counts.
    assert dip_metrics([(0, 100.0), (1, 100.0)], event_s=1.0)["length_s"] == 0.0


def test_steady_buckets_drop_the_edges_only_of_long_series() -> None:
    assert steady_buckets([(2, 1.0), (0, 0.0), (1, 1.0), (3, 1.0), (4, 0.0)]) == [
        (1, 1.0), (2, 1.0), (3, 1.0)]
    assert steady_buckets([(0, 0.0), (1, 1.0), (2, 1.0)]) == [(0, 0.0), (1, 1.0), (2, 1.0)]


def test_series_cov() -> None:
    assert series_cov_pct([1.0]) is None
    assert series_cov_pct([0.0, 0.0]) is None
    assert series_cov_pct([9.0, 11.0]) == pytest.approx(14.142, rel=1e-3)
