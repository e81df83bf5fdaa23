"""The fleet's store side without Dask: a host's scratch database seeded for resume, the
repetitions read back from it for the coordinator, committed once, and what a lost host
did not deliver recorded as not run; how the coordinator judges its hosts from the
messages it receives (made-up messages): a host whose worker goes away after it
delivered everything is finished, one whose worker goes away with cells outstanding is
lost, and results still queued behind the loss are committed before the host is
judged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hvbench.run import fleet
from hvbench.store.database import Store
from hvbench.store.records import (
    MeasurementRecord,
    RepetitionRow,
    SampleRecord,
    cell_record,
)

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


CELL = "native/dd"


class Future:
    """A host task's future as the tracker reads it."""

    def __init__(self, status: str = "pending", error: str = "") -> None:
        self.status = status
        self.error = error
        self.cancelled = False

    def exception(self) -> BaseException:
        return RuntimeError(self.error)

    def cancel(self) -> None:
        self.cancelled = True


def _tracker(store: Store, hosts: list[str]) -> tuple[fleet.FleetTracker, list[Any]]:
    runs, told = [], []
    for host in hosts:
        rid = store.create_run(run_id=None, study_name="s", study_path="s.toml",
                               study_text=STUDY, seed=3, env={}, hvbench_version="0",
                               git_commit=None, fleet_id="f1", host=host)
        ids = store.add_cells(rid, [cell_record(c) for c in fleet._job_study(_job()).cells])
        runs.append(fleet.HostRun(host, f"tls://{host}:1", rid, ids,
                                  {(CELL, 0), (CELL, 1)}, future=Future()))
    tracker = fleet.FleetTracker(store, runs,
                                 lambda host, done, total: told.append((host, done, total)))
    return tracker, told


def _result(host: str, rep: int) -> fleet.RepetitionResult:
    row = RepetitionRow(cell=CELL, repetition=rep, position=rep, status="ok", error=None,
                        started_at="t0", finished_at="t1", console_log=None,
                        qemu_argv=None, accel=None)
    return fleet.RepetitionResult(host, row, (), (), ())


def _feed(tracker: fleet.FleetTracker, items: list[object]) -> list[fleet.Settle]:
    """Every message in order; a Settle asked for goes behind what is queued, as the
    coordinator puts it on the fleet queue."""
    queue, asked = list(items), []
    while queue:
        settle = tracker.receive(queue.pop(0))
        if settle is not None:
            asked.append(settle)
            queue.append(settle)
    return asked


def test_a_worker_gone_after_its_last_result_is_a_finished_host(tmp_path: Path) -> None:
    with Store(tmp_path / "team.db") as store:
        tracker, told = _tracker(store, ["h1"])
        # the worker is removed after its last result and before its end message came
        _feed(tracker, [_result("h1", 0), _result("h1", 1),
                        fleet.WorkerGone("tls://h1:1")])
        h1 = tracker.by_host["h1"]
        assert tracker.active == set()
        assert h1.ended is None
        assert h1.committed == 2
        assert h1.future.cancelled  # its pinned task would wait for the worker for ever
        assert told[-1] == ("h1", 2, 2)


def test_results_queued_behind_the_loss_are_committed_first(tmp_path: Path) -> None:
    with Store(tmp_path / "team.db") as store:
        tracker, _ = _tracker(store, ["h1", "h2"])
        # the remove-worker event overtook h1's last result (another channel)
        asked = _feed(tracker, [_result("h1", 0), fleet.WorkerGone("tls://h1:1"),
                                _result("h1", 1), _result("h2", 0)])
        assert asked == [fleet.Settle("h1", "host h1: its worker tls://h1:1 disappeared")]
        assert tracker.by_host["h1"].ended is None
        assert tracker.by_host["h1"].todo == set()
        assert tracker.active == {"h2"}  # another host's worker is not affected


def test_a_worker_gone_with_cells_outstanding_is_lost(tmp_path: Path) -> None:
    with Store(tmp_path / "team.db") as store:
        tracker, _ = _tracker(store, ["h1"])
        _feed(tracker, [_result("h1", 0), fleet.WorkerGone("tls://h1:1"),
                        fleet.WorkerGone("tls://h1:1")])  # the safety net's second notice
        h1 = tracker.by_host["h1"]
        assert h1.ended == "host h1: its worker tls://h1:1 disappeared"
        assert h1.todo == {(CELL, 1)}
        fleet._record_not_run(store, h1)
        (missing,) = store.failures(h1.run_id)
        assert missing.repetition == 1
        assert missing.error == f"{fleet.NOT_RUN}: host h1: its worker tls://h1:1 disappeared"


def test_an_end_message_before_the_loss_decides(tmp_path: Path) -> None:
    with Store(tmp_path / "team.db") as store:
        tracker, _ = _tracker(store, ["h1"])
        asked = _feed(tracker, [_result("h1", 0),
                                fleet.HostEnd("h1", 1, "hvbench: error: disk full\n"),
                                fleet.WorkerGone("tls://h1:1")])
        assert asked == []  # an ended host is not settled again
        assert tracker.by_host["h1"].ended == (
            "hvbench on h1 exited with 1 having delivered 1 of 2 repetitions: "
            "hvbench: error: disk full")


def test_a_failed_task_is_lost_with_its_error_a_finished_one_waits(tmp_path: Path
                                                                   ) -> None:
    with Store(tmp_path / "team.db") as store:
        tracker, _ = _tracker(store, ["h1", "h2"])
        tracker.by_host["h1"].future = Future("error", "worker ran out of memory")
        tracker.by_host["h2"].future = Future("finished")
        _feed(tracker, [fleet.TaskDone("h1"), fleet.TaskDone("h2")])
        assert tracker.by_host["h1"].ended == "host h1: worker ran out of memory"
        # a finished task's end message is in the queue: it decides, not the callback
        assert tracker.active == {"h2"}
        _feed(tracker, [_result("h2", 0), _result("h2", 1), fleet.HostEnd("h2", 0, "")])
        assert tracker.active == set()
        assert tracker.by_host["h2"].ended is None
