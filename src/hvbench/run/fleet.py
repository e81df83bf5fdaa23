"""Fleet runs: one study on many hosts through Dask distributed (docs/fleet.md).

A fleet run is one run per host in the results database, grouped by a fleet id
(``runs.fleet_id``, ``runs.host``): each host runs the whole study (or, with
``--spread``, its share of the repetitions: :func:`spread_repetitions`), its own native
baseline and its own guests, so its % of native is always against itself, and every
existing report works on each host's run. The workers are either started by the user
(``hvbench worker``) or over SSH (:mod:`hvbench.run.ssh_hosts`); both are
:class:`HostWorker`.

Coordinator (:func:`run_fleet`, where ``hvbench run --scheduler`` runs): asks each host
for its environment (a small task), creates the host runs and their cell orders, then
gives each host one task, :func:`run_on_host`, pinned to that host's worker. A worker is
started with ``nthreads=1`` and the Dask resource ``host=1``, and every task asks for
that resource: a host never runs two cells (or two studies) at once.

Worker (:func:`run_on_host`): runs the study with the ordinary runner, in an
``hvbench run --resume`` child process against a scratch SQLite file in its work
directory (the run and, on a resumed fleet, what is already done are seeded there
first), and sends every repetition the child commits to the coordinator through a Dask
queue; the coordinator commits it into the team database. A worker never sees the
database or its credentials.

A host that fails or disappears: what it sent is committed, its unfinished repetitions
are recorded as failed with ``not run: <reason>`` (so reports list them and ``--resume``
re-runs exactly those), its run is marked interrupted, and the other hosts go on.
Ctrl-C sets a Dask event every host task watches: each stops its child with SIGTERM,
which stops that host's guests and labs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue as stdqueue
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from distributed import Event, Queue, Worker, get_worker, wait

from hvbench import __version__
from hvbench.analysis.fleet import SPREAD_KEY
from hvbench.errors import HostError, HvbenchError, SpecError
from hvbench.host import facts
from hvbench.host.paths import claim_dir, make_owned_dir, work_dir
from hvbench.host.proctree import die_with_parent
from hvbench.model.overrides import STUDY_OVERRIDES
from hvbench.model.study import Study, keep_cells, with_repetitions
from hvbench.model.study import parse_study as parse_study_text
from hvbench.run import fleet_tls
from hvbench.run.plan import repetition_order
from hvbench.run.runner import environment, git_commit
from hvbench.store.database import Store, new_run_id
from hvbench.store.records import (
    MeasurementRecord,
    RawRecord,
    RepetitionRow,
    SampleRecord,
    cell_record,
)

#: The Dask resource every hvbench worker has once and every host task takes whole.
HOST_RESOURCE = "host"
#: How often a host task looks at its child's scratch database, seconds.
POLL_S = 0.5
#: How long a worker may take to register with its scheduler, seconds.
CONNECT_TIMEOUT_S = 30.0
#: How long the coordinator waits for a message before it reads the scheduler's worker
#: list itself, seconds: a safety net only (a worker that left before the coordinator's
#: subscription to the scheduler's events took effect sends no event), not the way
#: results or losses are normally noticed.
LIVENESS_S = 30.0
#: How long a stopped host task waits for its child to stop its guests, seconds.
STOP_GRACE_S = 60.0
#: The error of a repetition a lost host never ran.
NOT_RUN = "not run"
#: The scheduler's event topic of every worker added and removed.
SCHEDULER_TOPIC = "all"


class FleetError(HvbenchError):
    """A fleet run cannot start: no scheduler, no hvbench workers, hosts missing."""


# -- which host runs what (pure) ---------------------------------------------------------


def parse_hosts(text: str) -> dict[str, str]:
    """``--hosts h1,h2=gen2,...``: host -> its class (``""`` when none is declared), in
    the order given.

    Raises:
        SpecError: an empty name or class, or a host named twice.
    """
    hosts: dict[str, str] = {}
    for item in text.split(","):
        name, sep, klass = (part.strip() for part in item.partition("="))
        if not name or (sep and not klass):
            raise SpecError(f"--hosts {text!r}: expected HOST[=CLASS][,HOST[=CLASS]...], "
                            f"got the item {item!r}")
        if name in hosts:
            raise SpecError(f"--hosts {text!r}: host {name!r} is named twice")
        hosts[name] = klass
    return hosts


def spread_repetitions(repetitions: int, classes: Mapping[str, str]
                       ) -> dict[str, tuple[int, ...]]:
    """``--spread``: each class of hosts runs every repetition once, split among its
    hosts round robin in the order given (repetition r of a class of k hosts on its
    host r mod k), so a host runs ceil(n/k) or floor(n/k) of them; each still runs
    every cell of its repetitions, its native baseline among them.

    Raises:
        SpecError: a class has more hosts than the study has repetitions (a host with
            none would measure nothing).
    """
    members: dict[str, list[str]] = {}
    for host, klass in classes.items():
        members.setdefault(klass, []).append(host)
    shares: dict[str, tuple[int, ...]] = {}
    for klass, hosts in members.items():
        if len(hosts) > repetitions:
            name = f"class {klass!r}" if klass else "the hosts"
            raise SpecError(f"--spread: {name} has {len(hosts)} hosts but the study only "
                            f"{repetitions} repetitions; give --repetitions at least "
                            f"{len(hosts)} or fewer hosts")
        for i, host in enumerate(hosts):
            shares[host] = tuple(range(i, repetitions, len(hosts)))
    return shares


# -- on the worker ----------------------------------------------------------------------


@dataclass(frozen=True)
class HostJob:
    """What a host task needs: the study as the coordinator parsed it, the host's run
    id (also the scratch run's), the (cell, repetition) pairs already done there, and
    the names of the fleet's queue and stop event, and the ``--set`` changes the study
    was started with (applied to ``study_text`` on the host, as on the coordinator)."""

    study_text: str
    study_path: str
    cells: tuple[str, ...]
    repetitions: int
    run_id: str
    done: tuple[tuple[str, int], ...]
    queue: str
    stop_event: str
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class RepetitionResult:
    """One repetition a host committed, as the coordinator stores it."""

    host: str
    row: RepetitionRow
    measurements: tuple[MeasurementRecord, ...]
    samples: tuple[SampleRecord, ...]
    raw: tuple[RawRecord, ...]


@dataclass(frozen=True)
class HostEnd:
    """A host task's last message: how its child ended."""

    host: str
    returncode: int
    stderr_tail: str


def host_environment(study_text: str, study_path: str, overrides: Sequence[str] = ()
                     ) -> dict[str, Any]:
    """This host's environment for its run (CPU, kernel, QEMU, accelerator, hvbench
    version, the ``--set`` changes, ...), as a single-host run records it."""
    study = parse_study_text(study_text, study_path, facts.memory_bytes() or 0, overrides)
    return {**environment(study), "hostname": os.uname().nodename,
            "hvbench_version": __version__}


def _job_study(job: HostJob) -> Study:
    study = parse_study_text(job.study_text, job.study_path, facts.memory_bytes() or 0,
                             job.overrides)
    return with_repetitions(keep_cells(study, set(job.cells)), job.repetitions)


def seed_scratch(store: Store, job: HostJob, host: str) -> None:
    """The host's run in its scratch database: the run, its cells and orders, and a
    placeholder ok repetition for everything already done (so the child's resume skips
    it; placeholders are never sent back)."""
    study = _job_study(job)
    store.create_run(run_id=job.run_id, study_name=study.study.name,
                     study_path=study.path, study_text=study.text, seed=study.study.seed,
                     # the child's resume applies the --set changes stored here
                     env={STUDY_OVERRIDES: list(job.overrides)},
                     hvbench_version=__version__, git_commit=None, host=host)
    ids = store.add_cells(job.run_id, [cell_record(c) for c in study.cells])
    for rep in range(study.study.repetitions):
        store.record_order(job.run_id, rep, [c.name for c in repetition_order(study, rep)])
    for name, rep in job.done:
        store.record_repetition(run_id=job.run_id, cell_id=ids[name], repetition=rep,
                                position=-1, status="ok", started_at="", finished_at="")


def _results(store: Store, run_id: str, host: str, sent: set[tuple[str, int]]
             ) -> list[RepetitionResult]:
    """The repetitions of the scratch run not sent yet (placeholders are in ``sent``)."""
    new = [r for r in store.repetitions(run_id) if (r.cell, r.repetition) not in sent]
    out = []
    for row in new:
        key = {"cell": row.cell, "repetition": row.repetition}
        out.append(RepetitionResult(
            host, row,
            tuple(MeasurementRecord(m.phase, m.metric, m.value, m.unit)
                  for m in store.measurements(run_id, include_failed=True)
                  if (m.cell, m.repetition) == (row.cell, row.repetition)),
            tuple(SampleRecord(s.phase, s.monitor, s.t, s.values)
                  for s in store.samples(run_id, **key)),  # type: ignore[arg-type]
            tuple(RawRecord(r.phase, r.kind, r.content)
                  for r in store.raw_outputs(run_id, **key))))  # type: ignore[arg-type]
        sent.add((row.cell, row.repetition))
    return out


def run_on_host(job: HostJob) -> HostEnd:
    """The host task (runs in a Dask worker): the study's missing repetitions through
    ``hvbench run --resume`` in a child process, each committed repetition sent to the
    fleet queue as it appears in the scratch database."""
    worker = get_worker()
    host = str(worker.name)
    queue, stop = Queue(job.queue), Event(job.stop_event)
    # owned by this worker: the next hvbench on this host removes it after a kill -9
    scratch = make_owned_dir(work_dir(), "hvbench-fleet-")
    db = scratch / "host.db"
    try:
        with Store(db) as store:
            seed_scratch(store, job, host)
        sent = set(job.done)
        env = {k: v for k, v in os.environ.items() if k != "HVBENCH_DB"}
        with (scratch / "child.log").open("w+b") as log:
            child = subprocess.Popen(
                [sys.executable, "-m", "hvbench.cli.main", "run", "--resume", job.run_id,
                 "--db", str(db)],
                stdout=log, stderr=subprocess.STDOUT, env=env,
                # SIGTERM when the worker dies (even by kill -9): hvbench then stops its
                # guests and labs instead of running on as an orphan
                preexec_fn=partial(die_with_parent, signal.SIGTERM))  # noqa: PLW1509
            try:
                while child.poll() is None:
                    if stop.is_set():
                        child.send_signal(signal.SIGTERM)
                        child.wait(STOP_GRACE_S)
                        break
                    _send(db, job.run_id, host, sent, queue)
                    time.sleep(POLL_S)
            finally:
                if child.poll() is None:
                    child.kill()
                    child.wait()
            _send(db, job.run_id, host, sent, queue)
            log.seek(0)
            tail = log.read().decode(errors="replace")[-2000:]
        end = HostEnd(host, int(child.returncode), tail)
        queue.put(end)
        return end
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _send(db: Path, run_id: str, host: str, sent: set[tuple[str, int]], queue: Any) -> None:
    with Store(db, create=False) as store:
        for result in _results(store, run_id, host, sent):
            queue.put(result)


# -- on the coordinator -----------------------------------------------------------------


@dataclass
class HostRun:
    """One host of the fleet as the coordinator tracks it."""

    host: str
    address: str
    run_id: str
    cell_ids: dict[str, int]
    todo: set[tuple[str, int]]
    future: Any = None
    ended: str | None = None
    committed: int = 0
    lost: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FleetOutcome:
    """A finished fleet run: its id and each host's run, repetitions committed by this
    invocation, and why a host stopped early (None: it finished)."""

    fleet_id: str
    runs: dict[str, str]
    committed: dict[str, int]
    lost: dict[str, str | None]


#: Told (host, committed so far, total to do) after every commit and when a host ends.
FleetProgress = Callable[[str, int, int], None]


def hvbench_workers(client: Any) -> dict[str, str]:
    """host name -> worker address of the scheduler's hvbench workers (those with the
    ``host`` resource)."""
    # asked of the scheduler each time: Client.scheduler_info() returns the client's
    # cache, which its own periodic refresh overwrites with an identity without workers
    # (seen: a 16-host fleet reported finished hosts as disappeared)
    workers = client.sync(client.scheduler.identity, n_workers=-1)["workers"]
    return {str(info.get("name")): address for address, info in workers.items()
            if info.get("resources", {}).get(HOST_RESOURCE)}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _pinned(client: Any, address: str, fn: Callable[..., Any], *args: Any) -> Any:
    return client.submit(fn, *args, workers=[address], allow_other_workers=False,
                         resources={HOST_RESOURCE: 1}, pure=False)


def start_fleet(client: Any, study: Study, store: Store, hosts: Sequence[str] | None = None,
                *, classes: Mapping[str, str] | None = None, spread: bool = False,
                ) -> tuple[str, list[HostRun]]:
    """Create a fleet run: one run per host (environment asked from the host), cells
    and orders. ``hosts`` None: every hvbench worker of the scheduler. ``spread``: the
    repetitions are split across the hosts of each class (``classes``: host -> class;
    a host not in it is of class ``""``; None: the class each worker was started with),
    see :func:`spread_repetitions`; the share is
    recorded in the host run's environment under :data:`SPREAD_KEY`.

    Raises:
        FleetError: no hvbench worker, or a named host has none.
        SpecError: ``spread`` with more hosts in a class than repetitions.
    """
    workers = hvbench_workers(client)
    names = sorted(workers) if hosts is None else list(hosts)
    missing = [h for h in names if h not in workers]
    if not names or missing:
        raise FleetError(f"no hvbench worker for host(s) {', '.join(missing) or '(any)'} at "
                         f"the scheduler (workers: {', '.join(sorted(workers)) or 'none'}); "
                         "start them with `hvbench worker --scheduler ADDR`")
    reps = study.study.repetitions
    if classes is None and spread:
        # --scheduler: each worker's own class (hvbench worker --class)
        classes = worker_classes(client, {h: workers[h] for h in names})
    classes_of = {h: (classes or {}).get(h, "") for h in names}
    shares = spread_repetitions(reps, classes_of) if spread else {}
    envs = client.gather([_pinned(client, workers[h], host_environment, study.text,
                                  study.path, study.overrides) for h in names])
    fleet_id = "fleet-" + new_run_id()
    records = [cell_record(c) for c in study.cells]
    runs = []
    for host, host_env in zip(names, envs, strict=True):
        env = {**host_env, SPREAD_KEY: {"class": classes_of[host],
                                        "repetitions": list(shares[host])}} \
            if spread else host_env
        run_id = store.create_run(
            run_id=None, study_name=study.study.name, study_path=study.path,
            study_text=study.text, seed=study.study.seed, env=env,
            hvbench_version=__version__, git_commit=git_commit(), fleet_id=fleet_id,
            host=host)
        ids = store.add_cells(run_id, records)
        # every repetition's order, also under --spread: the host runs' orders are the
        # study's, whichever host runs a repetition
        for rep in range(reps):
            store.record_order(run_id, rep, [c.name for c in repetition_order(study, rep)])
        todo = {(c.name, rep) for c in study.cells for rep in shares.get(host, range(reps))}
        runs.append(HostRun(host, workers[host], run_id, ids, todo))
    return fleet_id, runs


def resume_fleet(client: Any, store: Store, fleet_id: str) -> list[HostRun]:
    """The host runs of a stored fleet run with what each still has to do.

    Raises:
        FleetError: no such fleet, or one of its hosts has no worker now.
    """
    records = store.fleet_runs(fleet_id)
    if not records:
        raise FleetError(f"no fleet run {fleet_id!r} in {store.location}")
    workers = hvbench_workers(client)
    missing = [r.host for r in records if r.host not in workers]
    if missing:
        raise FleetError(f"fleet {fleet_id}: no worker for host(s) {', '.join(map(str, missing))}"
                         f" (workers: {', '.join(sorted(workers)) or 'none'})")
    runs = []
    for record in records:
        cells = {c.name: c.id for c in store.cells(record.id)}
        done_ids = store.done(record.id)
        share = record.env.get(SPREAD_KEY, {}).get("repetitions")
        reps = share if share is not None else range(len(store.order(record.id)))
        todo = {(name, rep) for name, cid in cells.items() for rep in reps
                if (cid, rep) not in done_ids}
        runs.append(HostRun(str(record.host), workers[str(record.host)], record.id, cells,
                            todo))
    return runs


def run_fleet(client: Any, study: Study, store: Store, *, fleet_id: str,
              runs: list[HostRun], progress: FleetProgress | None = None) -> FleetOutcome:
    """Run every host's missing repetitions, committing each as it arrives; a host lost
    gets its unfinished repetitions recorded as not run. On Ctrl-C (any exception) every
    host task is told to stop its child, the host runs are marked interrupted, and the
    exception propagates.

    Waits on messages (:class:`FleetInbox`), not on a timer; only after
    :data:`LIVENESS_S` without any does it read the scheduler's worker list itself.
    Stopping waits up to :data:`STOP_GRACE_S` for the host tasks.

    Raises:
        FleetError: the fleet queue could no longer be read (the scheduler went away).
    """
    tell = progress or (lambda host, done, total: None)
    # Names of this attempt only: an event set by an interrupted attempt (Ctrl-C) stays
    # set in the scheduler, and would stop every host of the next --resume at once.
    attempt = f"{fleet_id}-{uuid.uuid4().hex[:8]}"
    queue_name, event_name = f"{attempt}-results", f"{attempt}-stop"
    queue, stop = Queue(queue_name, client=client), Event(event_name, client=client)
    # subscribed before any task exists, so a worker lost from now on is an event
    inbox = FleetInbox(client, queue, attempt)
    inbox.start()
    try:
        for r in runs:
            store.set_status(r.run_id, "running")
            if _submit(client, study, r, queue_name, event_name, inbox=inbox):
                tell(r.host, 0, len(r.todo))
    except BaseException:
        # Ctrl-C between two submissions: the hosts already given their task stop too.
        with contextlib.suppress(Exception):
            stop.set()
        with contextlib.suppress(Exception):
            inbox.close(STOP_GRACE_S)
        for r in runs:
            store.set_status(r.run_id, "interrupted", finished_at=_now())
        raise
    tracker = FleetTracker(store, runs, tell)
    try:
        # a worker that left before the subscription took effect sent no event
        _receive(tracker, queue, vanished(client, tracker))
        while tracker.active:
            item = inbox.get(LIVENESS_S)
            if isinstance(item, ReaderFailed):
                raise FleetError(f"fleet {fleet_id}: its results queue cannot be read: "
                                 f"{item.error}") from item.error
            _receive(tracker, queue, [item] if item is not None else
                     vanished(client, tracker))
        _receive(tracker, queue, inbox.close(STOP_GRACE_S))
    except BaseException:
        with contextlib.suppress(Exception):  # a scheduler already gone stops nothing
            stop.set()
        with contextlib.suppress(Exception):  # a lost host's future never ends
            wait([r.future for r in runs if r.future is not None], timeout=STOP_GRACE_S)
        with contextlib.suppress(Exception):
            _receive(tracker, None, inbox.close(STOP_GRACE_S))
        for r in runs:
            store.set_status(r.run_id, "interrupted", finished_at=_now())
        raise
    finally:
        with contextlib.suppress(Exception):  # a scheduler already gone holds nothing
            stop.clear()
    for r in runs:
        if r.ended is not None:
            _record_not_run(store, r)
            store.set_status(r.run_id, "interrupted", finished_at=_now())
        else:
            store.set_status(r.run_id, "complete", finished_at=_now())
    return FleetOutcome(fleet_id, {r.host: r.run_id for r in runs},
                        {r.host: r.committed for r in runs},
                        {r.host: r.ended for r in runs})


def _submit(client: Any, study: Study, r: HostRun, queue_name: str, event_name: str, *,
            inbox: FleetInbox) -> bool:
    """Give host ``r`` its task (its missing repetitions), pinned to its worker; False
    when it has nothing left to run."""
    if not r.todo:
        r.ended = None
        return False
    job = HostJob(study.text, study.path, tuple(r.cell_ids), study.study.repetitions,
                  r.run_id, tuple(sorted(
                      {(c, rep) for c in r.cell_ids
                       for rep in range(study.study.repetitions)} - r.todo)),
                  queue_name, event_name, study.overrides)
    r.future = _pinned(client, r.address, run_on_host, job)
    r.future.add_done_callback(partial(inbox.task_done, r.host))
    return True


@dataclass(frozen=True)
class WorkerGone:
    """The scheduler removed the worker at ``address`` (its ``remove-worker`` event, or
    its absence from the worker list)."""

    address: str


@dataclass(frozen=True)
class TaskDone:
    """A host task's future ended: finished, erred or cancelled."""

    host: str


@dataclass(frozen=True)
class Settle:
    """The coordinator's marker behind a lost host's messages in the fleet queue. The
    queue is first in, first out and the scheduler took every message the host put
    before it removed the worker (or failed its task), so when this comes back every
    message the host sent has been received: the host is judged on what it delivered."""

    host: str
    reason: str


@dataclass(frozen=True)
class EndOfAttempt:
    """The marker that ends the coordinator's queue reader."""

    attempt: str


@dataclass(frozen=True)
class ReaderFailed:
    """The queue reader stopped: the fleet queue could not be read."""

    error: BaseException


class FleetTracker:
    """The coordinator's account of its hosts, driven by the messages it receives in
    the order it receives them (no Dask here: the unit tests give it made-up ones).

    A host leaves ``active`` by its end message (:func:`host_end_reason` judges it) or,
    when its worker vanished or its task failed, by a :class:`Settle` marker:
    :meth:`receive` asks for one when it learns of the loss, the coordinator puts it
    behind the host's messages in the fleet queue, and when it comes back the host is
    finished if it delivered everything it was given, else lost with the reason. A
    loss is thus never judged before the host's last results are committed (judging it
    at once reported hosts that had delivered every cell as disappeared)."""

    def __init__(self, store: Store, runs: Sequence[HostRun], tell: FleetProgress) -> None:
        self.store = store
        self.tell = tell
        self.by_host = {r.host: r for r in runs}
        self.totals = {r.host: len(r.todo) for r in runs}
        self.active = {r.host for r in runs if r.future is not None}
        self._settling: set[str] = set()

    def receive(self, item: object) -> Settle | None:
        """Take one message; the :class:`Settle` marker to put on the fleet queue when
        it tells of a lost host (None otherwise)."""
        if isinstance(item, RepetitionResult):
            r = self.by_host[item.host]
            commit(self.store, r, item)
            self.tell(r.host, r.committed, self.totals[r.host])
        elif isinstance(item, HostEnd):
            self._end(item.host, host_end_reason(
                item, len(self.by_host[item.host].todo), self.totals[item.host]))
        elif isinstance(item, WorkerGone):
            for host in sorted(self.active):
                if self.by_host[host].address == item.address:
                    return self._settle(host, f"host {host}: its worker {item.address} "
                                              "disappeared")
        elif isinstance(item, TaskDone):
            future = self.by_host[item.host].future
            if future is not None and future.status == "error":
                return self._settle(item.host, f"host {item.host}: {future.exception()}")
        elif isinstance(item, Settle):
            r = self.by_host[item.host]
            self._end(item.host, item.reason if r.todo else None)
            with contextlib.suppress(Exception):  # a pinned task without its worker waits
                r.future.cancel()
        return None

    def _settle(self, host: str, reason: str) -> Settle | None:
        if host not in self.active or host in self._settling:
            return None
        self._settling.add(host)
        return Settle(host, reason)

    def _end(self, host: str, reason: str | None) -> None:
        if host in self.active:
            self.active.discard(host)
            self.by_host[host].ended = reason


def _receive(tracker: FleetTracker, queue: Any, items: Sequence[object]) -> None:
    """Give ``items`` to the tracker; the markers it asks for go on the fleet queue
    (``queue`` None: the attempt is over, nothing is settled any more)."""
    for item in items:
        settle = tracker.receive(item)
        if settle is not None and queue is not None:
            queue.put(settle)


def vanished(client: Any, tracker: FleetTracker) -> list[WorkerGone]:
    """The workers of the active hosts that the scheduler no longer lists."""
    present = set(hvbench_workers(client).values())
    return [WorkerGone(tracker.by_host[h].address) for h in sorted(tracker.active)
            if tracker.by_host[h].address not in present]


class FleetInbox:
    """Where the coordinator waits: one local queue fed by a thread reading the fleet
    queue (a ``get`` without timeout: one that expires makes the scheduler log a
    TimeoutError traceback), by the scheduler's ``remove-worker`` events (a topic
    subscription) and by the host tasks' done callbacks. ``start()`` subscribes and
    starts the reader; ``close()`` ends both."""

    def __init__(self, client: Any, queue: Any, attempt: str) -> None:
        self.client = client
        self.queue = queue
        self.attempt = attempt
        self.items: stdqueue.Queue[object] = stdqueue.Queue()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Subscribe to the scheduler's events and start the queue reader."""
        self.client.subscribe_topic(SCHEDULER_TOPIC, self._event)
        self._thread = threading.Thread(target=self._read, daemon=True,
                                        name=f"hvbench-fleet-{self.attempt}")
        self._thread.start()

    def _event(self, event: tuple[float, Any]) -> None:
        _, msg = event
        if isinstance(msg, dict) and msg.get("action") == "remove-worker":
            self.items.put(WorkerGone(str(msg.get("worker"))))

    def _read(self) -> None:
        try:
            while True:
                item = self.queue.get()
                if isinstance(item, EndOfAttempt):
                    return
                self.items.put(item)
        # whatever the client raised for a scheduler gone; the coordinator raises it
        except Exception as exc:
            self.items.put(ReaderFailed(exc))

    def task_done(self, host: str, _future: Any) -> None:
        """A host task's done callback (Dask calls it in its callback thread)."""
        self.items.put(TaskDone(host))

    def get(self, timeout: float) -> object | None:
        """The next message, waiting up to ``timeout`` seconds (None: none came)."""
        try:
            return self.items.get(timeout=timeout)
        except stdqueue.Empty:
            return None

    def close(self, timeout: float) -> list[object]:
        """Unsubscribe, end the reader (its end marker goes behind everything queued),
        waiting up to ``timeout`` seconds, and return the messages not taken yet."""
        with contextlib.suppress(Exception):  # a scheduler gone: nothing to end there
            self.client.unsubscribe_topic(SCHEDULER_TOPIC)
        with contextlib.suppress(Exception):
            self.queue.put(EndOfAttempt(self.attempt))
        if self._thread is not None:
            self._thread.join(timeout)
        rest = []
        while True:
            try:
                rest.append(self.items.get_nowait())
            except stdqueue.Empty:
                return [item for item in rest if not isinstance(item, ReaderFailed)]


def error_line(output: str) -> str:
    """The line of a host's hvbench output that says why it stopped: its last
    ``error:`` line, else its last line (pure)."""
    lines = [" ".join(line.split()) for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line]
    if errors:
        return errors[-1]
    return lines[-1] if lines else "no output"


def host_end_reason(end: HostEnd, missing: int, total: int) -> str | None:
    """Why a host whose hvbench ended did not finish (None: it delivered everything
    it was given, whatever its exit code says about the repetitions themselves): how it
    exited, how much it delivered, and its own last error line (pure)."""
    if missing == 0:
        return None
    return (f"hvbench on {end.host} exited with {end.returncode} having delivered "
            f"{total - missing} of {total} repetitions: {error_line(end.stderr_tail)}")


def commit(store: Store, r: HostRun, item: RepetitionResult) -> None:
    """Commit one repetition a host sent into its host run (once: a repeated message
    of an ok repetition is dropped)."""
    key = (item.row.cell, item.row.repetition)
    if key not in r.todo:
        return
    row = item.row
    store.record_repetition(
        run_id=r.run_id, cell_id=r.cell_ids[row.cell], repetition=row.repetition,
        position=row.position, status=row.status, measurements=item.measurements,
        samples=item.samples, raw=item.raw, error=row.error, console_log=row.console_log,
        qemu_argv=row.qemu_argv, accel=row.accel, started_at=row.started_at,
        finished_at=row.finished_at)
    r.todo.discard(key)
    r.committed += 1


def _record_not_run(store: Store, r: HostRun) -> None:
    """Every repetition a lost host did not deliver, as failed ``not run: reason``."""
    now = _now()
    for name, rep in sorted(r.todo, key=lambda k: (k[1], k[0])):
        with contextlib.suppress(HvbenchError):
            store.record_repetition(
                run_id=r.run_id, cell_id=r.cell_ids[name], repetition=rep, position=-1,
                status="failed", error=f"{NOT_RUN}: {r.ended}", started_at=now,
                finished_at=now)


class HostWorker(Worker):
    """An hvbench fleet worker: a Dask worker with one thread and the ``host`` resource
    (so every hvbench task, which asks for it whole, runs alone on its host), its Dask
    scratch space in a directory of the work dir owned by this process (removed on
    close; after a ``kill -9`` the next hvbench on the host removes it), and
    ``HVBENCH_WORKDIR`` set to ``work`` when given. ``hvbench worker`` serves one;
    ``hvbench run --hosts`` starts one per host over SSH by this class's import path
    (:data:`WORKER_CLASS`). ``host_class`` is the host's class for ``--spread`` (``""``:
    none; the coordinator asks it with :func:`worker_classes`). Unless given,
    ``death_timeout`` is :data:`CONNECT_TIMEOUT_S`: a worker that cannot register with
    its scheduler stops instead of retrying for ever. ``certs``: the directory of this
    host's TLS bundle (:mod:`hvbench.run.fleet_tls`; encryption is then required),
    removed when the worker closes if ``remove_certs`` (which first records this
    process as its owner, so ``cleanup`` removes it after a ``kill -9``). Other arguments are
    :class:`distributed.Worker`'s.

    Raises:
        SpecError: ``certs`` lacks a file of a bundle."""

    def __init__(self, *args: Any, work: str | None = None, host_class: str = "",
                 certs: str | None = None, remove_certs: bool = False,
                 **kwargs: Any) -> None:
        if work is not None:
            os.environ["HVBENCH_WORKDIR"] = work
        self.host_class = host_class
        # --hosts installed a bundle for this worker alone: it goes when the worker does,
        # or with the next cleanup if this process is killed
        self.certs = Path(certs) if certs is not None and remove_certs else None
        if self.certs is not None:
            claim_dir(self.certs)
        if certs is not None:
            kwargs["security"] = fleet_tls.security(Path(certs))
        kwargs.setdefault("death_timeout", CONNECT_TIMEOUT_S)
        # not TMPDIR/dask-scratch-space, which would outlive the worker
        self.scratch = make_owned_dir(work_dir(), "hvbench-dask-")
        kwargs.update(nthreads=1, resources={HOST_RESOURCE: 1},
                      local_directory=str(self.scratch))
        super().__init__(*args, **kwargs)

    # ignored as in distributed.Worker.close itself, which narrows its bases' close
    async def close(self, *args: Any, **kwargs: Any) -> str | None:  # type: ignore[override]
        """Close the worker (:meth:`distributed.Worker.close`), then remove its scratch
        space."""
        try:
            return await super().close(*args, **kwargs)
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)
            if self.certs is not None:
                shutil.rmtree(self.certs, ignore_errors=True)


#: :class:`HostWorker` as Dask's ``dask_spec`` imports it on a remote host: through the
#: CLI package, whose import registers every workload and platform kind (the worker
#: parses the study text; this layer may not import the kinds itself).
WORKER_CLASS = "hvbench.cli.worker.HostWorker"


def worker_class(dask_worker: Any) -> str:
    """The host class of the worker it runs in (``client.run`` passes ``dask_worker``)."""
    return str(getattr(dask_worker, "host_class", ""))


def worker_classes(client: Any, addresses: Mapping[str, str]) -> dict[str, str]:
    """host name -> the class its hvbench worker was started with (``hvbench worker
    --class``), for the workers ``addresses`` names (host -> address)."""
    if not addresses:
        return {}
    by_address = client.run(worker_class, workers=list(addresses.values()))
    return {host: str(by_address.get(address, "")) for host, address in addresses.items()}


def _tls_error(exc: BaseException) -> ssl.SSLError | None:
    """The TLS error somewhere in ``exc``'s chain (Dask retries a refused handshake
    until its timeout, and raises the timeout, the handshake's error in its context)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, ssl.SSLError):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _start_failure(scheduler: str, name: str, exc: BaseException, timeout: float) -> str:
    """One line for a worker that did not join its scheduler, in Dask's words (Dask
    wraps the scheduler's refusal, e.g. a name already taken, in "failed to start")."""
    refused = _tls_error(exc)
    if refused is not None:
        return (f"the TLS handshake with the Dask scheduler at {scheduler} failed: "
                f"{' '.join(str(refused).split())} (is --certs a bundle of this fleet's CA?)")
    if isinstance(exc, TimeoutError):
        return f"cannot reach the Dask scheduler at {scheduler} within {timeout:g} s"
    cause = exc.__cause__ or exc
    words = " ".join(str(cause).split()) or type(cause).__name__
    if "name taken" in words:
        return (f"the Dask scheduler at {scheduler} already has a worker named {name!r}: "
                "give this host another --name")
    return f"worker {name!r} did not join the Dask scheduler at {scheduler}: {words}"


def serve_worker(scheduler: str, name: str, work: Path | None = None,
                 host_class: str = "", *, timeout: float = CONNECT_TIMEOUT_S,
                 certs: Path | None = None) -> None:
    """``hvbench worker``: a :class:`HostWorker` for this host until the scheduler goes
    away or SIGINT/SIGTERM. Waits up to ``timeout`` seconds to register.

    Dask's own log is set to warnings (its INFO lines are every connection), and to
    nothing while the worker registers: a failure to register is this function's one
    line, not Dask's log lines and tracebacks.

    Raises:
        HostError: the scheduler cannot be reached within the timeout, or refused the
            worker (a name already taken), with Dask's words.
    """
    dask_log = logging.getLogger("distributed")

    async def serve() -> None:
        dask_log.setLevel(logging.CRITICAL + 1)
        try:
            worker = HostWorker(scheduler, name=name,
                                work=None if work is None else str(work),
                                host_class=host_class, death_timeout=timeout,
                                certs=None if certs is None else str(certs))
            await worker
        # Dask raises TimeoutError (death_timeout), RuntimeError wrapping the
        # scheduler's refusal, OSError/ValueError for an address it cannot use
        except (OSError, TimeoutError, RuntimeError, ValueError) as exc:
            raise HostError(_start_failure(scheduler, name, exc, timeout)) from exc
        finally:
            dask_log.setLevel(logging.WARNING)
        async with worker:
            await worker.finished()  # type: ignore[no-untyped-call]  # Dask: untyped

    asyncio.run(serve())
