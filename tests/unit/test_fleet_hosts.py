"""``--hosts h1,h2=CLASS`` and ``--spread``: which host runs which repetitions, recorded
with each host's run so ``--resume`` finds its share again (without Dask: a stand-in
client answers what the coordinator asks the scheduler)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hvbench.analysis.fleet import SPREAD_KEY
from hvbench.errors import SpecError
from hvbench.model.study import parse_study
from hvbench.run import fleet
from hvbench.store.database import Store
from tests.unit.test_fleet import STUDY as FLEET_STUDY

# test_fleet's study (native dd), with 5 repetitions to split
STUDY = FLEET_STUDY.replace("repetitions = 2", "repetitions = 5")


def test_hosts_with_and_without_classes() -> None:
    assert fleet.parse_hosts("a,b") == {"a": "", "b": ""}
    assert fleet.parse_hosts(" a=gen1 , b=gen2,c=gen1") == {"a": "gen1", "b": "gen2",
                                                             "c": "gen1"}
    for bad in ("a,,b", "a=", "=x", "a,a=x"):
        with pytest.raises(SpecError, match="--hosts"):
            fleet.parse_hosts(bad)


def test_spread_splits_each_class_round_robin() -> None:
    shares = fleet.spread_repetitions(5, {"a": "", "b": "", "c": ""})
    assert shares == {"a": (0, 3), "b": (1, 4), "c": (2,)}
    # every class runs each repetition exactly once
    two = fleet.spread_repetitions(4, {"a": "g1", "x": "g2", "b": "g1", "y": "g2",
                                       "z": "g2"})
    for klass in (("a", "b"), ("x", "y", "z")):
        assert sorted(r for h in klass for r in two[h]) == [0, 1, 2, 3]
    assert two["a"] == (0, 2) and two["x"] == (0, 3) and two["z"] == (2,)
    assert fleet.spread_repetitions(3, {"only": ""}) == {"only": (0, 1, 2)}


def test_spread_refuses_a_host_without_repetitions() -> None:
    with pytest.raises(SpecError, match="class 'g1' has 3 hosts but the study only 2"):
        fleet.spread_repetitions(2, {"a": "g1", "b": "g1", "c": "g1", "d": "g2"})


class _Done:
    def __init__(self, value: Any) -> None:
        self.value = value


class StandIn:
    """What start_fleet and resume_fleet ask of a Dask client, answered locally."""

    def __init__(self, hosts: list[str]) -> None:
        self.workers = {f"tcp://{h}:1": {"name": h, "resources": {fleet.HOST_RESOURCE: 1}}
                        for h in hosts}
        self.workers["tcp://plain:1"] = {"name": "plain", "resources": {}}

        self.scheduler = self  # client.scheduler.identity: the scheduler's own answer

    def identity(self, n_workers: int = 0) -> dict[str, Any]:
        return {"workers": self.workers if n_workers == -1 else {}}

    def sync(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    def scheduler_info(self, n_workers: int = 0) -> dict[str, Any]:
        # the client's cache, as its periodic refresh leaves it: no workers
        return {"workers": {}}

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> _Done:
        assert kwargs["resources"] == {fleet.HOST_RESOURCE: 1}
        (address,) = kwargs["workers"]
        return _Done({"hostname": self.workers[address]["name"]})

    def gather(self, futures: list[_Done]) -> list[Any]:
        return [f.value for f in futures]


def test_spread_shares_are_stored_and_resumed(tmp_path: Path) -> None:
    study = parse_study(STUDY, "s.toml", 1 << 34)
    client = StandIn(["h1", "h2", "h3"])
    with Store(tmp_path / "team.db") as store:
        fleet_id, runs = fleet.start_fleet(client, study, store, ["h1", "h2", "h3"],
                                           classes={"h1": "g", "h2": "g", "h3": "solo"},
                                           spread=True)
        todo = {r.host: sorted(rep for _, rep in r.todo) for r in runs}
        assert todo == {"h1": [0, 2, 4], "h2": [1, 3], "h3": [0, 1, 2, 3, 4]}
        h2 = next(r for r in runs if r.host == "h2")
        record = store.get_run(h2.run_id)
        assert record.env[SPREAD_KEY] == {"class": "g", "repetitions": [1, 3]}
        assert record.env["hostname"] == "h2"
        # the orders are the study's, every repetition, whoever runs it
        assert sorted(store.order(h2.run_id)) == [0, 1, 2, 3, 4]
        # h2 delivered repetition 1: a resume leaves it only 3
        store.record_repetition(run_id=h2.run_id, cell_id=h2.cell_ids["native/dd"],
                                repetition=1, position=0, status="ok", started_at="t0",
                                finished_at="t1")
        resumed = {r.host: sorted(rep for _, rep in r.todo)
                   for r in fleet.resume_fleet(client, store, fleet_id)}
        assert resumed == {"h1": [0, 2, 4], "h2": [3], "h3": [0, 1, 2, 3, 4]}


def test_without_spread_every_host_runs_everything(tmp_path: Path) -> None:
    study = parse_study(STUDY, "s.toml", 1 << 34)
    with Store(tmp_path / "team.db") as store:
        _, runs = fleet.start_fleet(StandIn(["h1", "h2"]), study, store)
        assert sorted(r.host for r in runs) == ["h1", "h2"]  # not the plain worker
        for r in runs:
            assert len(r.todo) == 5
            assert SPREAD_KEY not in store.get_run(r.run_id).env
        with pytest.raises(fleet.FleetError, match="no hvbench worker for host"):
            fleet.start_fleet(StandIn(["h1"]), study, store, ["h1", "h9"])


@pytest.mark.parametrize(("args", "words"), [
    (["--scheduler", "tcp://127.0.0.1:1", "--hosts", "a"], "exclude each other"),
    (["--spread"], "give --hosts or --scheduler"),
    (["--resume", "fleet-x", "--hosts", "a", "--spread"], "drop --spread"),
    (["--hosts", "a,,b"], "expected HOST[=CLASS]"),
])
def test_fleet_options_refused_before_anything_starts(
        args: list[str], words: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    from hvbench.cli.main import main

    db = tmp_path / "x.db"
    assert main(["run", *args, "--db", str(db)]) == 2
    assert words in capsys.readouterr().err
    assert not db.exists()


class _Flag:
    """A stand-in for the attempt's Dask Event and Queue (name, client ignored)."""

    def __init__(self, *_: Any, **__: Any) -> None:
        self.is_set = False

    def set(self) -> None:
        self.is_set = True

    def clear(self) -> None:
        self.is_set = False


class _Inbox:
    closed = False

    def __init__(self, *_: Any) -> None:
        pass

    def start(self) -> None:
        pass

    def task_done(self, *_: Any) -> None:
        pass

    def close(self, _timeout: float) -> list[object]:
        _Inbox.closed = True
        return []


def test_ctrl_c_between_two_submissions_stops_the_hosts_already_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An interrupt while the host tasks are being submitted sets the attempt's stop
    event (the first host's task would otherwise run on), ends the inbox and marks
    every host's run interrupted."""
    study = parse_study(STUDY, "s.toml", 1 << 34)
    events: list[_Flag] = []

    def event(*args: Any, **kwargs: Any) -> _Flag:
        events.append(_Flag())
        return events[-1]

    submitted: list[str] = []

    class Future:
        def add_done_callback(self, _fn: Any) -> None:
            pass

    def pinned(_client: Any, address: str, *_: Any) -> Future:
        if submitted:
            raise KeyboardInterrupt
        submitted.append(address)
        return Future()

    monkeypatch.setattr(fleet, "Event", event)
    monkeypatch.setattr(fleet, "Queue", _Flag)
    monkeypatch.setattr(fleet, "FleetInbox", _Inbox)
    with Store(tmp_path / "team.db") as store:
        fleet_id, runs = fleet.start_fleet(StandIn(["h1", "h2"]), study, store)
        monkeypatch.setattr(fleet, "_pinned", pinned)
        with pytest.raises(KeyboardInterrupt):
            fleet.run_fleet(StandIn(["h1", "h2"]), study, store, fleet_id=fleet_id, runs=runs)
        assert submitted == ["tcp://h1:1"] and events and events[0].is_set
        assert _Inbox.closed
        assert {store.get_run(r.run_id).status for r in runs} == {"interrupted"}


def test_teardown_logs_become_lines_not_tracebacks(capsys: pytest.CaptureFixture[str]
                                                   ) -> None:
    from hvbench.run.ssh_hosts import _teardown_logs, _TeardownLines

    lines = _TeardownLines()
    app = logging.getLogger("tornado.application")
    before = (app.handlers[:], app.propagate)
    with _teardown_logs(lines):
        try:
            raise TimeoutError("Timeout")
        except TimeoutError:
            app.error("Exception in callback <Task finished coro=<x()>>", exc_info=True)
        logging.getLogger("distributed.deploy.spec").info("not kept: below WARNING")
    assert lines.lines == ["tornado.application: Exception in callback <Task finished "
                           "coro=<x()>> (TimeoutError: Timeout)"]
    assert (app.handlers, app.propagate) == before
    assert "Traceback" not in capsys.readouterr().err
