"""A fleet run for real: a Dask scheduler and two `hvbench worker` processes (each a
simulated host with its own work directory and run lock), a reduced study (native dd and
one TCG guest) committed into a private PostgreSQL; one worker killed with SIGKILL mid
study, then `--resume`."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hvbench.model.study import parse_study
from hvbench.run.fleet import NOT_RUN
from hvbench.run.plan import repetition_order
from hvbench.store.database import Store

pytestmark = pytest.mark.integration

SRC = Path(__file__).resolve().parents[2] / "src"
REPETITIONS = 2
STUDY = f"""
[study]
name = "fleet-small"
repetitions = {REPETITIONS}
seed = 1

[[platform]]
kind = "native"

[[platform]]
kind = "qemu"
name = "vm"
machine = "pc"
memory_mib = 256
disk = {{ bus = "virtio-blk", cache = "none", size = "48M", allocation = "preallocated" }}

[[workload]]
name = "dd"
kind = "disk"
profile = "dd"
target = "device"
file_size = "16M"
direct = true
"""
CELLS = 2


def native_only(repetitions: int) -> str:
    """The reduced study without its guest: native dd only, ``repetitions`` of it."""
    return (STUDY[:STUDY.index('[[platform]]\nkind = "qemu"')]
            + STUDY[STUDY.index("[[workload]]"):]).replace(
        f"repetitions = {REPETITIONS}", f"repetitions = {repetitions}")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HVBENCH_DB"}
    env.update(PYTHONPATH=str(SRC), **extra)
    return env


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Fleet:
    """The scheduler and the workers of one test, all stopped by :meth:`stop`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.processes: list[subprocess.Popen[bytes]] = []
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.address = ""

    def start_scheduler(self) -> None:
        info = self.root / "scheduler.json"
        # the scheduler keeps a dask-scratch-space in its TMPDIR: one removed with root
        (self.root / "scheduler-tmp").mkdir()
        self.processes.append(subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
             "--port", "0", "--no-dashboard", "--scheduler-file", str(info)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=_env(TMPDIR=str(self.root / "scheduler-tmp"))))
        deadline = time.monotonic() + 30
        while not info.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.address = json.loads(info.read_text())["address"]

    def start_worker(self, host: str, *options: str) -> None:
        process = subprocess.Popen(
            [sys.executable, "-m", "hvbench.cli.main", "worker", "--scheduler", self.address,
             "--name", host, "--workdir", str(self.workdir(host)), *options],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
        self.processes.append(process)
        self.workers[host] = process
        self._wait_for(host)

    def _wait_for(self, host: str) -> None:
        from distributed import Client

        from hvbench.run.fleet import hvbench_workers

        with Client(self.address, timeout=30) as client:
            deadline = time.monotonic() + 60
            while host not in hvbench_workers(client):
                assert time.monotonic() < deadline, f"worker {host} never registered"
                time.sleep(0.2)

    def workdir(self, host: str) -> Path:
        return self.root / f"work-{host}"

    def stop(self) -> None:
        for process in reversed(self.processes):
            _stop(process)


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    root = tmp_path / "fleet"
    root.mkdir()
    running = Fleet(root)
    try:
        running.start_scheduler()
        running.start_worker("h1")
        running.start_worker("h2")
        yield running
    finally:
        running.stop()
        shutil.rmtree(root, ignore_errors=True)


def _run(fleet: Fleet, db: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "hvbench.cli.main", "run", *args, "--scheduler",
         fleet.address, "--db", db],
        # wide enough for the per-host table's rows on one line each
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(COLUMNS="400"))


def _processes_under(path: Path) -> list[int]:
    """Processes whose command line names something under ``path`` (the host's hvbench
    child, its QEMU and fio)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if str(path).encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
    return found


def _by_host(db: str) -> dict[str, str]:
    with Store(db) as store:
        return {str(store.get_run(r).host): r for r in store.run_ids()}


def _native_then_guest(study: Path) -> None:
    """The reduced study with one repetition of each cell into ``study``, checked to run
    native dd first (the seed's order): a kill after the first repetition comes while
    the host boots its guest or runs dd in it, seconds later, and leaves a guest
    repetition for the resume."""
    text = STUDY.replace(f"repetitions = {REPETITIONS}", "repetitions = 1")
    study.write_text(text)
    order = repetition_order(parse_study(text, str(study), 24 << 30), 0)
    assert [c.name for c in order] == ["native/dd", "vm/dd"]


def test_kill_one_worker_then_resume(fleet: Fleet, tmp_path: Path, postgres_url: str) -> None:
    study = tmp_path / "fleet.toml"
    _native_then_guest(study)
    total = CELLS
    coordinator = _run(fleet, postgres_url, str(study))
    # kill h2 once it has delivered at least one repetition, before it finished
    deadline = time.monotonic() + 300
    delivered = 0
    while delivered == 0:
        assert time.monotonic() < deadline and coordinator.poll() is None, \
            coordinator.communicate()
        time.sleep(0.5)
        with contextlib.suppress(Exception), Store(postgres_url) as store:
            runs = _by_host(postgres_url)
            delivered = len(store.done(runs["h2"])) if "h2" in runs else 0
    fleet.workers["h2"].send_signal(signal.SIGKILL)
    fleet.workers["h2"].wait()
    _out, err = coordinator.communicate(timeout=600)
    assert coordinator.returncode == 1, err.decode()
    # the killed host's hvbench child and its guest stopped with it
    deadline = time.monotonic() + 60
    while _processes_under(fleet.workdir("h2")) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _processes_under(fleet.workdir("h2")) == []

    runs = _by_host(postgres_url)
    assert sorted(runs) == ["h1", "h2"]
    with Store(postgres_url) as store:
        h1, h2 = store.get_run(runs["h1"]), store.get_run(runs["h2"])
        assert h1.fleet_id == h2.fleet_id is not None
        assert (h1.status, h2.status) == ("complete", "interrupted")
        assert len(store.done(h1.id)) == total and store.failures(h1.id) == []
        ok_before = store.done(h2.id)
        missing = store.failures(h2.id)
        assert 1 <= len(ok_before) < total
        assert len(ok_before) + len(missing) == total
        assert all((f.error or "").startswith(f"{NOT_RUN}: host h2") for f in missing)
        kept = {(m.cell, m.repetition, m.metric, m.value) for m in store.measurements(h2.id)}
        assert kept
        assert h1.env["hostname"] and h1.env.get("accelerator") in ("tcg", "kvm")
    assert "h2: stopped early" in err.decode()

    fleet.start_worker("h2")
    # libpq's synonym of the URL scheme names the same database
    resumed = _run(fleet, postgres_url.replace("postgresql://", "postgres://", 1),
                   "--resume", str(h1.fleet_id))
    _out, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err.decode()
    with Store(postgres_url) as store:
        h2_after = store.get_run(runs["h2"])
        assert h2_after.status == "complete"
        assert len(store.done(h2_after.id)) == total and store.failures(h2_after.id) == []
        after = {(m.cell, m.repetition, m.metric, m.value)
                 for m in store.measurements(h2_after.id)}
        assert kept <= after  # what was committed before the kill is unchanged
        per_rep = {(m.cell, m.repetition) for m in store.measurements(h2_after.id)}
        assert len(per_rep) == total
        assert len(store.done(runs["h1"])) == total  # h1 ran nothing again
    assert sorted(_by_host(postgres_url)) == ["h1", "h2"]


def _spread_run(fleet: Fleet, stem: Path, repetitions: int) -> str:
    """A native-only study of ``repetitions`` with ``--spread``, into ``stem``.db,
    finished with exit 0."""
    study = stem.with_suffix(".toml")
    study.write_text(native_only(repetitions))
    db = str(stem.with_suffix(".db"))
    coordinator = _run(fleet, db, str(study), "--spread")
    _out, err = coordinator.communicate(timeout=300)
    assert coordinator.returncode == 0, err.decode()
    return db


def test_spread_splits_the_repetitions_between_two_hosts(fleet: Fleet, tmp_path: Path) -> None:
    """``--spread`` (all workers one class): a native-only study of 2 repetitions, one
    on each host, each host's native baseline its own; the shares are stored."""
    from hvbench.analysis.fleet import SPREAD_KEY

    db = _spread_run(fleet, tmp_path / "spread", 2)
    runs = _by_host(db)
    with Store(db) as store:
        reps = {host: {(m.platform, m.repetition) for m in store.measurements(run)}
                for host, run in runs.items()}
        assert reps == {"h1": {("native", 0)}, "h2": {("native", 1)}}
        for host, share in (("h1", [0]), ("h2", [1])):
            assert store.get_run(runs[host]).env[SPREAD_KEY] == {"class": "",
                                                                  "repetitions": share}
            assert store.get_run(runs[host]).status == "complete"


def test_a_host_that_measured_nothing_fails_the_fleet_with_its_own_words(
        fleet: Fleet, tmp_path: Path) -> None:
    """h2's run lock is held by another study: its hvbench exits 1 before measuring
    anything. The fleet exits non-zero, h2's repetitions are not run with the child's
    own error line (naming the study that holds the lock), and the table says so."""
    from hvbench.run.runner import RunLock

    study = tmp_path / "locked.toml"
    study.write_text(native_only(1))
    db = str(tmp_path / "locked.db")
    lock = RunLock(fleet.workdir("h2"))
    lock.acquire("run-of-another", "someone-elses-study")
    try:
        coordinator = _run(fleet, db, str(study))
        out, err = coordinator.communicate(timeout=300)
    finally:
        lock.release()
    assert coordinator.returncode == 1, err.decode()
    runs = _by_host(db)
    with Store(db) as store:
        assert len(store.done(runs["h1"])) == 1
        assert store.get_run(runs["h2"]).status == "interrupted"
        [missing] = store.failures(runs["h2"])
        assert (missing.error or "").startswith(f"{NOT_RUN}: hvbench on h2 exited with 1 "
                                                "having delivered 0 of 1 repetitions")
        assert "study someone-elses-study (run run-of-another" in (missing.error or "")
    assert "h2: stopped early" in err.decode()
    rows = {line.split()[1]: line for line in out.decode().splitlines()
            if line.startswith("│ h")}
    assert "complete" in rows["h1"] and "finished what it was given" in rows["h1"]
    assert "interrupted" in rows["h2"] and "having delivered 0 of 1" in rows["h2"]


def _wait_delivered(coordinator: subprocess.Popen[bytes], db: str, at_least: int) -> None:
    """Until the fleet's runs in ``db`` hold ``at_least`` ok repetitions together."""
    deadline = time.monotonic() + 180
    while True:
        assert time.monotonic() < deadline and coordinator.poll() is None, \
            coordinator.communicate()
        with contextlib.suppress(Exception), Store(db) as store:
            if sum(len(store.done(r)) for r in store.run_ids()) >= at_least:
                return
        time.sleep(0.3)


def test_interrupt_and_resume_a_fleet_twice(fleet: Fleet, tmp_path: Path) -> None:
    """Ctrl-C on the coordinator, twice: each time it prints the exact command that
    completes the fleet, and that command (run as printed) measures more, so the stop
    of an interrupted attempt never reaches the next one."""
    reps = 8
    study = tmp_path / "twice.toml"
    study.write_text(native_only(reps))
    db = str(tmp_path / "twice.db")
    coordinator = _run(fleet, db, str(study))
    delivered = 1
    for _attempt in range(2):
        _wait_delivered(coordinator, db, delivered)
        coordinator.send_signal(signal.SIGINT)
        _out, err = coordinator.communicate(timeout=120)
        assert coordinator.returncode == 130, err.decode()
        with Store(db) as store:
            assert {store.get_run(r).status for r in store.run_ids()} == {"interrupted"}
            delivered = sum(len(store.done(r)) for r in store.run_ids()) + 1
        hint = err.decode().split("complete it with `")[1].split("`")[0].split()
        assert hint[:3] == ["hvbench", "run", "--resume"] and "--db" in hint
        assert hint[4:] == ["--scheduler", fleet.address, "--db", db]
        coordinator = subprocess.Popen(
            [sys.executable, "-m", "hvbench.cli.main", *hint[1:]],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    _out, err = coordinator.communicate(timeout=300)
    assert coordinator.returncode == 0, err.decode()
    with Store(db) as store:
        for run_id in store.run_ids():
            assert store.get_run(run_id).status == "complete"
            assert len(store.done(run_id)) == reps and store.failures(run_id) == []


def test_worker_errors_are_one_line(fleet: Fleet, tmp_path: Path) -> None:
    """A name the scheduler already has and a scheduler nobody answers at: one line each
    (no Dask log, no traceback), exit 1, within the connect timeout."""
    def worker(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "hvbench.cli.main", "worker", "--workdir",
             str(tmp_path / "w"), *args], capture_output=True, text=True, env=_env(),
            timeout=120, check=False)

    taken = worker("--scheduler", fleet.address, "--name", "h1")
    assert taken.returncode == 1
    assert taken.stderr.splitlines()[1:] == [
        f"hvbench: error: the Dask scheduler at {fleet.address} already has a worker named "
        "'h1': give this host another --name"], taken.stderr
    started = time.monotonic()
    nobody = worker("--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "2")
    assert nobody.returncode == 1 and time.monotonic() - started < 60
    assert nobody.stderr.splitlines()[1:] == [
        "hvbench: error: cannot reach the Dask scheduler at tcp://127.0.0.1:9 within 2 s"]
    assert list((tmp_path / "w").iterdir()) == []  # the workers' scratch spaces are gone


def test_spread_takes_the_class_each_worker_was_started_with(fleet: Fleet,
                                                             tmp_path: Path) -> None:
    """h1 and h2 replaced by g1 of class x and g2 of class y, 1 repetition: each class
    runs it on its one host (as one class, 2 hosts for 1 repetition are refused)."""
    from distributed import Client

    from hvbench.analysis.fleet import SPREAD_KEY
    from hvbench.run.fleet import hvbench_workers

    for host in ("h1", "h2"):
        _stop(fleet.workers.pop(host))
    with Client(fleet.address, timeout=30) as client:
        deadline = time.monotonic() + 60
        while hvbench_workers(client):
            assert time.monotonic() < deadline, hvbench_workers(client)
            time.sleep(0.2)
    fleet.start_worker("g1", "--class", "x")
    fleet.start_worker("g2", "--class", "y")
    db = _spread_run(fleet, tmp_path / "classes", 1)
    with Store(db) as store:
        shares = {host: store.get_run(run).env[SPREAD_KEY]
                  for host, run in _by_host(db).items()}
    assert shares == {"g1": {"class": "x", "repetitions": [0]},
                      "g2": {"class": "y", "repetitions": [0]}}
