"""Moving runs between two results databases (``hvbench db copy``): a local SQLite file
and the team's PostgreSQL, either way.

A run keeps its id, creation time, study, environment, fleet id and host; its cells,
cell orders and every repetition with its measurements, samples and raw outputs are
copied, each repetition in its own transaction as the runner commits them. Copying
again is safe: what the destination already holds as ok is skipped, a repetition it
holds as failed is replaced by the source's ok one, so an interrupted copy (or a run
that went on in the source) completes with a second copy.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from hvbench.store.database import Store, StoreError
from hvbench.store.records import (
    CellRecord,
    MeasurementRecord,
    RawRecord,
    SampleRecord,
)


@dataclass(frozen=True)
class CopyOutcome:
    """What one run's copy did."""

    run_id: str
    created: bool
    copied: int
    skipped: int


def copy_runs(source: Store, destination: Store, run_ids: Sequence[str]) -> list[CopyOutcome]:
    """Copy ``run_ids`` (all of the source's when empty) from ``source`` to
    ``destination``.

    Raises:
        StoreError: a run is unknown in the source, or the destination holds a run of
            the same id that is another study or has cells of other definitions.
    """
    return [copy_run(source, destination, run_id)
            for run_id in (run_ids or source.run_ids())]


def copy_run(source: Store, destination: Store, run_id: str) -> CopyOutcome:
    """Copy one run (see :func:`copy_runs`)."""
    run = source.get_run(run_id)
    created = run_id not in destination.run_ids(prefix=run_id)
    if created:
        destination.create_run(
            run_id=run.id, study_name=run.study_name, study_path=run.study_path,
            study_text=run.study_text, seed=run.seed, env=run.env,
            hvbench_version=run.hvbench_version, git_commit=run.git_commit,
            fleet_id=run.fleet_id, host=run.host, created_at=run.created_at)
    elif destination.get_run(run_id).study_text != run.study_text:
        raise StoreError(f"run {run_id} in {destination.location} is another study than "
                         f"run {run_id} in {source.location}; not copied")
    cells = source.cells(run_id)
    ids = destination.add_cells(run_id, [
        CellRecord(c.name, c.platform_name, c.platform, c.workload_name, c.workload,
                   c.identity) for c in cells])
    for repetition, names in source.order(run_id).items():
        destination.record_order(run_id, repetition, names)
    done = destination.done(run_id)
    measurements: dict[tuple[str, int], list[MeasurementRecord]] = defaultdict(list)
    for m in source.measurements(run_id, include_failed=True):
        measurements[m.cell, m.repetition].append(
            MeasurementRecord(m.phase, m.metric, m.value, m.unit))
    samples: dict[tuple[str, int], list[SampleRecord]] = defaultdict(list)
    for s in source.samples(run_id):
        samples[s.cell, s.repetition].append(SampleRecord(s.phase, s.monitor, s.t, s.values))
    raw: dict[tuple[str, int], list[RawRecord]] = defaultdict(list)
    for r in source.raw_outputs(run_id):
        raw[r.cell, r.repetition].append(RawRecord(r.phase, r.kind, r.content))
    held = {(f.cell, f.repetition) for f in destination.failures(run_id)}
    copied = skipped = 0
    for rep in source.repetitions(run_id):
        key = (rep.cell, rep.repetition)
        if (ids[rep.cell], rep.repetition) in done or (rep.status == "failed" and key in held):
            skipped += 1
            continue
        destination.record_repetition(
            run_id=run_id, cell_id=ids[rep.cell], repetition=rep.repetition,
            position=rep.position, status=rep.status, measurements=measurements[key],
            samples=samples[key], raw=raw[key], error=rep.error,
            console_log=rep.console_log, qemu_argv=rep.qemu_argv, accel=rep.accel,
            started_at=rep.started_at, finished_at=rep.finished_at)
        copied += 1
    if created or destination.get_run(run_id).status != run.status:
        destination.set_status(run_id, run.status, run.finished_at)
    return CopyOutcome(run_id, created, copied, skipped)
