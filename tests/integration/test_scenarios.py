"""Scenarios end to end: real neighbour guests in every role, guests started on demand
during a measurement, CPU weights through the host's cgroups, and cleanup after
``kill -9``."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hvbench.host import proctree
from hvbench.host.cgroups import detect_cpu_cgroups
from hvbench.image.builder import GuestImage
from hvbench.model.study import Study, parse_study, select_cells
from hvbench.run.runner import run_study
from hvbench.store.database import MeasurementRow, Store
from tests.integration.conftest import existing_network_objects, hvbench, network_objects_of

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the net lab and cgroups need root"),
]
HVBENCH = str(Path(sys.executable).parent / "hvbench")
HOST_RAM = 24 << 30

#: The lab host and the target guest every study here uses.
TARGET = """
[[lab.host]]
name = "client"

[[platform]]
name = "vm"
machine = "pc"
memory_mib = 256
nic = { model = "virtio-net", backend = "tap" }
"""



def _iperf3_study(name: str, *, duration_s: float, omit_s: float) -> str:
    """A one-repetition study of the target guest sending to the lab host with iperf3
    (the scenarios follow)."""
    return f"""
[study]
name = "{name}"
repetitions = 1
""" + TARGET + f"""
[[workload]]
kind = "network"
name = "iperf3"
peer = "client"
duration_s = {duration_s:g}
omit_s = {omit_s:g}
"""


ROLES = """
[study]
name = "roles"
repetitions = 1
seed = 3
""" + TARGET + """
[[workload]]
kind = "network"
name = "iperf3"
peer = "client"
duration_s = 3
omit_s = 0.5

[[scenario]]
name = "idle"
neighbours = [{ role = "idle" }]

[[scenario]]
name = "cpu"
neighbours = [{ role = "cpu" }]

[[scenario]]
name = "disk"
neighbours = [{ role = "disk", rw = "randwrite", block_size = "64K" }]

[[scenario]]
name = "netperf"
neighbours = [{ role = "net", load = "iperf3", bitrate = "50M" }]

[[scenario]]
name = "netweb"
neighbours = [{ role = "net", load = "web", file_kb = 10, rate = 40 }]
"""

ONDEMAND = _iperf3_study("ondemand", duration_s=14, omit_s=0) + """

[[scenario]]
name = "od"
start = { count = 2, at_s = 4, interval_s = 1, image_size = "160M" }
"""

WEIGHTS = _iperf3_study("weights", duration_s=3, omit_s=0.5) + """

[[scenario]]
name = "w"
neighbours = [{ role = "cpu" }]
weights = { io = [0.5, 2], target = 1, neighbours = 1, cpus = "0" }
"""

STAGES = """
[study]
name = "stages"
repetitions = 1
""" + TARGET + """
[[workload]]
kind = "web"
name = "trickle"
mode = "fixed"
client = "client"
file_kb = [1]
rate = 5
duration_s = 11

# Each stage about 4 s: a neighbour's stress-ng starts some way into its stage (the
# agent's latency, then its own start under TCG), and with 3 s the second stage's mean
# of nb1's vCPUs was once 19 % on a loaded host, against 40-65 % when it runs.
[[scenario]]
name = "stages"
neighbours = [
  { role = "cpu", vcpus = 2, start_after_s = 3 },
  { role = "cpu", vcpus = 2, start_after_s = 7 },
]
"""

NETSTAGES = _iperf3_study("netstages", duration_s=8, omit_s=0) + """

[[scenario]]
name = "ns"
neighbours = [{ role = "net", load = "iperf3", direction = "from-guest", start_after_s = 4 }]
"""

#: The target alone (every study here has the cell): left out with ``exclude=ALONE``
#: where a test asserts nothing of it, as it is a boot and a whole phase of its own.
ALONE = ("vm/*",)


def _run(text: str, tmp_path: Path, exclude: tuple[str, ...] = ()
         ) -> tuple[list[MeasurementRow], Path, str]:
    study = parse_study(text, str(tmp_path / "study.toml"), HOST_RAM)
    return _run_study(select_cells(study, exclude=exclude) if exclude else study, tmp_path)


#: iperf3's last words in the known open bug (not yet explained): now and then (about 1
#: full suite in 3 when it was seen) a target guest's iperf3 transmission to a lab host
#: stalls at 0 bytes/s for tens of seconds next to a neighbour guest, and iperf3 ends
#: with one of these. Nothing reruns: a failure with them names the bug, and fails.
TX_STALL = ("control socket has closed unexpectedly", "select failed: Bad file descriptor")


def _run_study(study: Study, tmp_path: Path) -> tuple[list[MeasurementRow], Path, str]:
    db = tmp_path / "r.db"
    with Store(db) as store:
        outcome = run_study(study, store)
        errors = [f.error or "" for f in store.failures(outcome.run_id)]
        stalled = any(words in e for e in errors for words in TX_STALL)
        assert outcome.failures == 0, (
            ("known open bug, the guest TX stall (TX_STALL): " if stalled else "")
            + "\n\n".join(errors))
        return store.measurements(outcome.run_id), db, outcome.run_id


def _values(rows: list[MeasurementRow]) -> dict[tuple[str, str], float]:
    return {(r.platform, r.metric): r.value for r in rows}


def test_every_neighbour_role_runs_next_to_the_target(image: GuestImage,
                                                      tmp_path: Path) -> None:
    """One run serves two checks: every role next to the target, and the context
    switches of the idle and CPU-bound neighbours."""
    rows, db, run_id = _run(ROLES, tmp_path)
    values = _values(rows)
    for platform in ("vm", "vm@idle", "vm@cpu", "vm@disk", "vm@netperf", "vm@netweb"):
        assert values[(platform, "mbit_s")] > 1.0, platform
    idle_cpu = values[("vm@idle", "nb0.vcpu.cpu_pct")]
    assert idle_cpu < 30.0
    # A busy neighbour's vCPU against an idle one's, as in the stages test: how much of
    # a core it gets depends on what else this shared machine runs (40-65 %).
    assert values[("vm@cpu", "nb0.vcpu.cpu_pct")] > max(20.0, 3 * idle_cpu)
    # fio keeps the disk neighbour's vCPU busier than an idle guest's.
    assert values[("vm@disk", "nb0.vcpu.cpu_pct")] > idle_cpu
    # The loads ran at their settings: never above them, and well into them (the floors
    # leave room for a TCG neighbour starved of CPU for a moment; a web chunk is 2 s, so
    # a quarter is half a second of tail).
    assert 5.0 < values[("vm@netperf", "nb0.load.goodput_mbit_s")] < 60.0
    assert values[("vm@netweb", "nb0.load.replies_per_s")] == pytest.approx(40.0, rel=0.25)
    assert ("vm", "nb0.vcpu.cpu_pct") not in values
    with sqlite3.connect(db) as conn:
        monitors = {m for (m,) in conn.execute("SELECT DISTINCT monitor FROM samples")}
        raw = [json.loads(c) for (c,) in conn.execute(
            "SELECT content FROM raw_outputs WHERE kind = 'scenario-json'")]
    assert {"nb0", "net", "qemu"} <= monitors
    assert {r["scenario"] for r in raw} == {"idle", "cpu", "disk", "netperf", "netweb"}
    assert all(len(r["neighbours"]) == 1 and r["neighbours"][0]["qemu_argv"] for r in raw)
    # The same run (its idle and cpu scenarios) shows the neighbours' threads.
    check_context_switches(values, db, run_id)


def check_context_switches(values: dict[tuple[str, str], float], db: Path,
                           run_id: str) -> None:
    """A CPU-bound neighbour's vCPU is preempted (involuntary switches) where an idle
    one mostly sleeps (voluntary); the terminal report shows both neighbours' threads."""
    for scenario in ("idle", "cpu"):
        platform = f"vm@{scenario}"
        assert values[(platform, "nb0.total.cs_per_s")] > 0.0
        assert values[(platform, "nb0.total.cs_per_s")] == pytest.approx(
            values[(platform, "nb0.total.vol_cs_per_s")]
            + values[(platform, "nb0.total.invol_cs_per_s")])
        known = values[(platform, "nb0.total.wakeups_known")]
        assert ((platform, "nb0.vcpu.wakeups_per_s") in values) == (known == 1.0)
    assert values[("vm@cpu", "nb0.vcpu.invol_cs_per_s")] > values[
        ("vm@idle", "nb0.vcpu.invol_cs_per_s")]
    assert values[("vm", "qemu.vcpu.cs_per_s")] > 0.0
    done = hvbench("report", run_id, "--db", str(db), columns=160)
    assert done.returncode == 0, done.stderr
    for scenario in ("idle", "cpu"):
        assert f"QEMU threads of the neighbours, vm@{scenario} iperf3/" in done.stdout
    print(done.stdout[done.stdout.index("QEMU threads of the neighbours"):])


def test_guests_started_on_demand_are_timed_and_the_dip_measured(
        image: GuestImage, tmp_path: Path) -> None:
    # The target alone asserts nothing here (it would measure 14 s more).
    rows, db, run_id = _run(ONDEMAND, tmp_path, exclude=ALONE)
    values = _values(rows)
    assert {r.platform for r in rows} == {"vm@od"}
    for index in (0, 1):
        assert 0.5 < values[("vm@od", f"ondemand.{index}.startup_s")] < 60.0
    assert values[("vm@od", "ondemand.0.asked_at_s")] == pytest.approx(4.0, abs=0.5)
    assert values[("vm@od", "ondemand.1.asked_at_s")] >= 5.0
    with Store(db) as store:
        buckets = sorted((int(s.t), float(s.values["value"]))
                         for s in store.samples(run_id, monitor="throughput"))
    assert buckets[0][0] == 0 and len(buckets) >= 12
    # The dip, from the stored 1 s buckets (docs: the first and last bucket are not
    # steady; baseline: the median before the first start; depth: the lowest after it).
    steady = buckets[1:-1]
    first_start = values[("vm@od", "ondemand.0.asked_at_s")]
    before = sorted(v for t, v in steady if t + 1 <= first_start)
    baseline = statistics.median(before)
    lowest = min(v for t, v in steady if t + 1 > first_start)
    assert baseline > 1.0
    assert values[("vm@od", "dip.baseline")] == pytest.approx(baseline)
    assert values[("vm@od", "dip.depth_pct")] == pytest.approx(
        max(0.0, 100.0 * (1.0 - lowest / baseline)))


def test_staged_cpu_neighbours_mark_their_stages(image: GuestImage, tmp_path: Path) -> None:
    """Seed 004 Figs. 1-4 in one window: the neighbours' stress-ng starts are stored
    where they were asked for, and the report's stages (cut at those marks) see each
    neighbour's vCPUs busy from its own stage on, carried by the host's cores."""
    rows, db, run_id = _run(STAGES, tmp_path)
    values = _values(rows)
    # A mark is taken once the guest agent confirmed the start: never before it was due,
    # later by the agent's latency (seconds on this loaded machine), inside the window.
    first, second = (values[("vm@stages", f"nb{i}.cpu.started_at_s")] for i in (0, 1))
    assert 3.0 <= first < second < values[("vm@stages", "phase_wall_s")]
    assert second >= 7.0
    assert ("vm", "nb0.cpu.started_at_s") not in values
    done = hvbench("report", run_id, "--db", str(db), "--format", "json")
    assert done.returncode == 0, done.stderr
    stages = {s["stage"]: s for s in json.loads(done.stdout)["stages"]}
    assert list(stages) == ["idle", "nb0", "nb0+nb1"]
    assert stages["idle"]["seconds"]["mean"] == pytest.approx(
        values[("vm@stages", "nb0.cpu.started_at_s")])

    def mean(stage: str, column: str) -> float:
        return float(stages[stage]["means"][column]["mean"])
    assert {"cpu0 busy %", "host busy %", "target vCPU %", "nb1 vCPU %"} <= set(
        stages["idle"]["means"])
    # The stages are real: each neighbour's vCPUs run once its stage began (an idle
    # guest's sit at a few %; how much a busy one gets depends on what else this shared
    # machine runs: 40-65 % of a core with other studies running).
    assert mean("nb0", "nb0 vCPU %") > max(20.0, 3 * mean("idle", "nb0 vCPU %"))
    assert mean("nb0+nb1", "nb1 vCPU %") > max(20.0, 3 * mean("nb0", "nb1 vCPU %"))
    # The host's cores (/proc/stat) carry at least the busy guests' vCPU threads
    # (/proc/PID/task): two sources agree on the both-busy stage. (Whether the host is
    # busier than while idle depends on what else this shared machine runs: other
    # studies can hold it at 100 % throughout.)
    cores = [c for c in stages["idle"]["means"] if c.startswith("cpu")]
    assert len(cores) == os.cpu_count()
    assert mean("nb0+nb1", "host busy %") * len(cores) >= 0.8 * (
        mean("nb0+nb1", "nb0 vCPU %") + mean("nb0+nb1", "nb1 vCPU %"))
    html = hvbench("report", run_id, "--db", str(db), "--format", "html")
    assert html.returncode == 0, html.stderr
    assert "trickle / 1kB: host CPU busy % per core per stage" in html.stdout
    assert "CPU per stage, vm@stages trickle/1kB" in html.stdout
    print(json.dumps(list(stages.values()), indent=1))


def test_a_staged_net_neighbour_streams_from_its_stage_on(image: GuestImage,
                                                           tmp_path: Path) -> None:
    """Seed 004 Figs. 5-7 in one window: a net neighbour's iperf3 chain starts at its
    start_after_s, its mark is stored, and the report's stages see its tap carry the
    stream only from its own stage on, the guests' sum beside each guest's."""
    # The stages are the scenario's own: the target alone would only add a phase.
    rows, db, run_id = _run(NETSTAGES, tmp_path, exclude=ALONE)
    values = _values(rows)
    start = values[("vm@ns", "nb0.net.started_at_s")]
    assert 4.0 <= start < values[("vm@ns", "phase_wall_s")]
    assert values[("vm@ns", "nb0.load.goodput_mbit_s")] > 0
    done = hvbench("report", run_id, "--db", str(db), "--format", "json")
    assert done.returncode == 0, done.stderr
    stages = {s["stage"]: s["means"] for s in json.loads(done.stdout)["stages"]}
    assert list(stages) == ["idle", "nb0"]

    def mean(stage: str, column: str) -> float:
        return float(stages[stage][column]["mean"])
    # Before its stage the neighbour's tap is quiet (ARP at most); in it, it streams.
    assert mean("nb0", "nb0 Mbit/s") > max(1.0, 20 * mean("idle", "nb0 Mbit/s"))
    assert mean("idle", "target Mbit/s") > 1.0
    for stage in ("idle", "nb0"):
        assert mean(stage, "guests Mbit/s") == pytest.approx(
            mean(stage, "target Mbit/s") + mean(stage, "nb0 Mbit/s"), rel=1e-6)
    text = hvbench("report", run_id, "--db", str(db))
    assert text.returncode == 0, text.stderr
    assert "CPU and bandwidth per stage, vm@ns iperf3/tx" in text.stdout

def _own_cgroups() -> set[str]:
    """The cgroups this test's hvbench recorded (owner records in the test's own work
    directory, written before each cgroup is created): other runs' are not checked."""
    paths: set[str] = set()
    for record in Path(os.environ["HVBENCH_WORKDIR"]).glob("cgroups-*.json"):
        with contextlib.suppress(OSError, ValueError):
            paths.update(json.loads(record.read_text()).get("paths", []))
    return paths


def _existing(paths: set[str]) -> set[str]:
    return {p for p in paths if Path(p).exists()}


def _populated(paths: set[str]) -> bool:
    """True when a thread or process sits in one of the cgroups ``paths`` (the weights
    are applied)."""
    for path in paths:
        for name in ("cgroup.threads", "tasks", "cgroup.procs"):
            with contextlib.suppress(OSError):
                if (Path(path) / name).read_text().strip():
                    return True
    return False


def test_weights_go_into_cgroups_that_are_removed_afterwards(
        image: GuestImage, tmp_path: Path) -> None:
    support = detect_cpu_cgroups()
    if support.version is None:
        pytest.skip(f"no CPU cgroups here: {support.reason}")
    # examples/weights.toml reduced: two of its three weights, a short phase, and its
    # scenario cells only (the guest alone has no weights; it would cost a boot).
    path = Path(__file__).resolve().parents[2] / "examples" / "weights.toml"
    study = parse_study(path.read_text(), str(path), HOST_RAM, [
        "study.repetitions=1", "workload.web1k.duration_s=2", "scenario.w.weights.io=[0.5, 2]"])
    rows, db, _ = _run_study(select_cells(study, exclude=["guest/*"]), tmp_path)
    assert {r.platform for r in rows} == {"guest@w.0.5", "guest@w.2"}
    with sqlite3.connect(db) as conn:
        raw = [json.loads(c) for (c,) in conn.execute(
            "SELECT content FROM raw_outputs WHERE kind = 'scenario-json'")]
    described = {r["scenario"]: r["cgroups"] for r in raw}
    assert set(described) == {"w.0.5", "w.2"}
    assert all(d is not None and d["version"] == support.version for d in described.values())
    # Every cgroup the scenarios describe is gone (their paths, from the stored JSON).
    made = {p for d in described.values() for p in d["paths"]}
    assert made and _existing(made) == set(), made
    values = _values(rows)
    assert values[("guest@w.0.5", "replies_s")] > 0 and values[("guest@w.2", "replies_s")] > 0


def _own_qemus(pid: int) -> set[int]:
    """The QEMUs that hvbench ``pid`` started (its descendants)."""
    return {p.pid for p in proctree.descendants(pid) if p.comm.startswith("qemu-system")}


def _running(pids: set[int]) -> set[int]:
    """Those of ``pids`` still running (not zombies)."""
    alive = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                alive.add(pid)
    return alive


def test_kill_9_then_cleanup_removes_neighbours_cgroups_and_lab(
        image: GuestImage, tmp_path: Path) -> None:
    if detect_cpu_cgroups().version is None:
        pytest.skip("no CPU cgroups here")
    study, db = tmp_path / "w.toml", tmp_path / "r.db"
    study.write_text(WEIGHTS.replace("duration_s = 3", "duration_s = 20"))
    # Only the scenario's cells: the kill comes in the first of them, and the target
    # alone, when the shuffle put it first, held that off by its boot and 20 s phase.
    proc = subprocess.Popen([HVBENCH, "run", str(study), "--exclude", ALONE[0],
                             "--db", str(db)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    # Wait until the scenario's neighbour is up (two QEMUs of this hvbench) and the
    # weights are in place (a cgroup of the scenario is recorded and exists).
    while not (len(_own_qemus(proc.pid)) >= 2 and _populated(_own_cgroups())):
        assert proc.poll() is None, "the study ended before it could be killed"
        assert time.monotonic() < deadline, "no neighbour with weights came up"
        time.sleep(0.2)
    qemus, cgroups = _own_qemus(proc.pid), _own_cgroups()
    made = network_objects_of(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = subprocess.run([HVBENCH, "cleanup"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 15
    while _running(qemus) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _running(qemus), "a guest outlived hvbench"
    assert _existing(cgroups) == set(), cgroups
    assert existing_network_objects(made) == set(), made


def test_the_hyperconverged_example_runs_and_is_explained(image: GuestImage,
                                                          tmp_path: Path) -> None:
    """examples/hyperconverged.toml (seed 004) with one repetition and 2 s phases: every
    measured cell gets a verdict from `hvbench explain`, and the guest alone on the
    100 Mbit/s link is named as held by the link."""
    path = Path(__file__).resolve().parents[2] / "examples" / "hyperconverged.toml"
    # The phases' length buys no assertion: a verdict needs a measured phase, and a TCP
    # stream fills a 100 Mbit/s tbf link well within 0.5 s (omit_s leaves that out).
    study = parse_study(path.read_text(), str(path), HOST_RAM, [
        "study.repetitions=1", "workload.iperf3.duration_s=2", "workload.iperf3.omit_s=0.5",
        "workload.web.duration_s=2"])
    db = tmp_path / "hc.db"
    with Store(db) as store:
        outcome = run_study(study, store)
        assert outcome.failures == 0, store.failures(outcome.run_id)
    done = hvbench("explain", outcome.run_id, "--db", str(db), "--format", "json")
    assert done.returncode == 0, done.stderr
    verdicts = {v["cell"]: v for v in json.loads(done.stdout)["verdicts"]}
    measured = [c for c in verdicts if not c.endswith("/boot")]
    assert {c.split("/")[0] for c in measured} == {"vm1", "vm1@cpu3", "vm1@net3"}, verdicts
    (tx,) = [v for v in verdicts.values() if v["platform"] == "vm1" and v["phase"] == "tx"]
    assert tx["dominant"] is not None and tx["dominant"]["rule"] == "link-saturated", tx


RATES = """
[study]
name = "rates"
repetitions = 1
seed = 2
""" + TARGET + """
[[workload]]
kind = "web"
name = "max"
mode = "max-rate"
file_kb = [1]
duration_s = 1
start_rate = 20
rate_factor = 2.0
max_rate = 160

[[workload]]
kind = "web"
name = "fixed"
file_kb = [1]
rate = "50%"
duration_s = 2

[[scenario]]
name = "sweep"
workloads = ["fixed"]
neighbours = [{ role = "net", load = "web", file_kb = 1, rate = ["20%", "40%"] }]

[[scenario]]
name = "pair"
workloads = ["fixed"]
identical = 2
"""


def test_relative_rates_follow_their_reference_and_sweep_a_neighbour(
        image: GuestImage, tmp_path: Path) -> None:
    """Seed 003's "% of the maximum": the max-rate reference runs first in the round,
    the fixed phase and the neighbours offer their share of its measured maximum, and
    the Fig. 20 table has a row per neighbour rate."""
    rows, db, run_id = _run(RATES, tmp_path)
    values = _values(rows)
    maximum = values[("vm", "max_rate_rps")]
    assert maximum > 0
    assert values[("vm", "offered_rps")] == pytest.approx(0.5 * maximum)
    assert values[("vm", "rate_ref_rps")] == maximum
    for pct in (20, 40):
        platform = f"vm@sweep.r{pct}pct"
        assert values[(platform, "offered_rps")] == pytest.approx(0.5 * maximum)
        assert values[(platform, "nb0.load.offered_rps")] == pytest.approx(pct / 100 * maximum)
        assert values[(platform, "nb0.load.rate_ref_rps")] == maximum
        assert values[(platform, "nb0.load.replies_per_s")] > 0
    # Two identical guests: the copy serves the target's file at the same share.
    assert values[("vm@pair", "nb0.load.offered_rps")] == pytest.approx(0.5 * maximum)
    assert values[("vm@pair", "nb0.load.file_kb")] == 1.0
    with Store(db) as store:
        assert store.order(run_id)[0][0] == "vm/max"
    done = hvbench("report", run_id, "--db", str(db), "--format", "json")
    assert done.returncode == 0, done.stderr
    scenarios = json.loads(done.stdout)["scenarios"]
    (sweep,) = scenarios["rate_sweeps"]
    assert [r["neighbour_rates"] for r in sweep["rows"]] == [["20%"], ["40%"]]
    # Fig. 20 from the stored rows: each side's replies/s over the best replies/s of the
    # guest alone at the file size (1 kB: the fixed phase's), summed.
    alone = max(r.value for r in rows if r.platform == "vm" and r.metric == "replies_s"
                and r.phase == "1kB")
    for row, pct in zip(sweep["rows"], (20, 40), strict=True):
        platform = f"vm@sweep.r{pct}pct"
        assert row["aggregated"]["mean"] == pytest.approx(
            (values[(platform, "replies_s")] + values[(platform, "nb0.load.replies_per_s")])
            / alone), platform
    # Jain's index of the pair's two sides, (x + y)^2 / (2 (x^2 + y^2)), from their rows.
    pair = next(a for a in scenarios["aggregated_ratio"] if a["platform"] == "vm@pair")
    x, y = values[("vm@pair", "replies_s")], values[("vm@pair", "nb0.load.replies_per_s")]
    assert pair["jain_fairness"]["mean"] == pytest.approx((x + y) ** 2 / (2 * (x * x + y * y)))
    done = hvbench("report", run_id, "--db", str(db), columns=200)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "Aggregated throughput ratio over neighbour rate" in text
    print(text[text.index("Aggregated throughput ratio"):])
