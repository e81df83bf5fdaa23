"""The fleet's store side without Dask: a host's scratch database seeded for resume, the
repetitions read back from it for the coordinator, committed once, and what a lost host
did not deliver recorded as not run."""

from __future__ import annotations

from pathlib import Path

from hvbench.run import fleet
from hvbench.store.database import Store
from hvbench.store.records import MeasurementRecord, SampleRecord, cell_record

STUDY = """
[study]
name = "s"
repetitions = 2
seed = 3

[[platform]]
kind = "native"

[[workload]]
name = "dd"
kind = "disk"
profile = "dd"
file_size = "16M"
direct = true
"""


def _job(done: tuple[tuple[str, int], ...] = ()) -> fleet.HostJob:
    return fleet.HostJob(STUDY, "s.toml", ("native/dd",), 2, "run-h1", done, "q", "e")


def test_scratch_seed_and_results(tmp_path: Path) -> None:
    with Store(tmp_path / "scratch.db") as scratch:
        fleet.seed_scratch(scratch, _job(done=(("native/dd", 0),)), "h1")
        assert scratch.get_run("run-h1").host == "h1"
        assert scratch.done("run-h1") == {(scratch.cells("run-h1")[0].id, 0)}
        assert sorted(scratch.order("run-h1")) == [0, 1]
        sent = {("native/dd", 0)}  # the placeholder is never sent
        assert fleet._results(scratch, "run-h1", "h1", sent) == []
        cell = scratch.cells("run-h1")[0].id
        scratch.record_repetition(
            run_id="run-h1", cell_id=cell, repetition=1, position=0, status="ok",
            started_at="t0", finished_at="t1",
            measurements=[MeasurementRecord("read", "mb_s", 5.0, "MB/s")],
            samples=[SampleRecord("read", "cpu", 0.1, {"usr": 1.0})])
        (result,) = fleet._results(scratch, "run-h1", "h1", sent)
        assert (result.host, result.row.cell, result.row.repetition) == ("h1", "native/dd", 1)
        assert [m.value for m in result.measurements] == [5.0]
        assert [s.values for s in result.samples] == [{"usr": 1.0}]
        assert fleet._results(scratch, "run-h1", "h1", sent) == []  # sent once


def test_commit_once_and_not_run(tmp_path: Path) -> None:
    with Store(tmp_path / "scratch.db") as scratch, Store(tmp_path / "team.db") as team:
        fleet.seed_scratch(scratch, _job(), "h1")
        cell = scratch.cells("run-h1")[0].id
        scratch.record_repetition(
            run_id="run-h1", cell_id=cell, repetition=0, position=0, status="ok",
            started_at="t0", finished_at="t1",
            measurements=[MeasurementRecord("read", "mb_s", 5.0, "MB/s")])
        (result,) = fleet._results(scratch, "run-h1", "h1", set())
        rid = team.create_run(run_id=None, study_name="s", study_path="s.toml",
                              study_text=STUDY, seed=3, env={}, hvbench_version="0",
                              git_commit=None, fleet_id="f1", host="h1")
        ids = team.add_cells(rid, [cell_record(c) for c in fleet._job_study(
            _job()).cells])
        host = fleet.HostRun("h1", "tcp://x", rid, ids, {("native/dd", 0), ("native/dd", 1)})
        fleet.commit(team, host, result)
        fleet.commit(team, host, result)  # a repeated message is dropped
        assert host.committed == 1
        host.ended = "host h1: its worker tcp://x disappeared"
        fleet._record_not_run(team, host)
        (missing,) = team.failures(rid)
        assert (missing.cell, missing.repetition) == ("native/dd", 1)
        assert missing.error == f"{fleet.NOT_RUN}: host h1: its worker tcp://x disappeared"
        assert [m.value for m in team.measurements(rid)] == [5.0]
        assert [r.id for r in team.fleet_runs("f1")] == [rid]


def test_a_host_that_delivered_less_than_given_is_failed_with_its_own_words() -> None:
    log = ("study s: 1 cells x 2 repetitions\n"
           "hvbench: error: another study is running on this host: study other (run r1, "
           "pid 42) (lock /w/hvbench-run.lock); wait for it or stop it\n")
    reason = fleet.host_end_reason(fleet.HostEnd("h2", 1, log), missing=2, total=2)
    assert reason == ("hvbench on h2 exited with 1 having delivered 0 of 2 repetitions: "
                      "hvbench: error: another study is running on this host: study other "
                      "(run r1, pid 42) (lock /w/hvbench-run.lock); wait for it or stop it")
    # exit 1 or 3 with everything delivered: its failed repetitions speak for themselves
    assert fleet.host_end_reason(fleet.HostEnd("h2", 3, log), missing=0, total=2) is None
    # whatever the code, a host that stopped short is failed, its last line quoted
    assert fleet.host_end_reason(fleet.HostEnd("h2", 0, "a\n  last   words \n"), 1, 2) == \
        "hvbench on h2 exited with 0 having delivered 1 of 2 repetitions: last words"
    assert fleet.error_line("") == "no output"
