"""The runner through the cell protocol, with a stand-in kind on the host (no QEMU):
what it stores, a failed cell, warm-ups, resume, and the platform booted per group."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from hvbench.cli.run import failure_lines, run_exit_code
from hvbench.errors import HvbenchError, InterruptedRun
from hvbench.host import interrupt
from hvbench.model.study import Study, parse_study
from hvbench.run import runner
from hvbench.run.cells import registry
from hvbench.run.cells.base import CellContext, CellResult, Simple
from hvbench.run.plan import PlannedItem
from hvbench.store.database import Store
from hvbench.store.records import MeasurementRecord

STUDY = """
[study]
name = "fake"
repetitions = 2
warmup = 1

[[platform]]
kind = "native"

[[workload]]
name = "a"
profile = "dd"
direct = true

[[workload]]
name = "b"
profile = "dd"
direct = true
"""


class FakeDisk(Simple):
    """Stores one row per run; fails ``b`` in repetition 0 when told to."""

    kind = "disk"
    boots_platform = True
    needs_lab = False
    runs: ClassVar[list[tuple[str, str]]] = []
    fail: ClassVar[set[str]] = set()

    def estimate_s(self, spec: object) -> float:
        return 1.0

    def run(self, ctx: CellContext) -> CellResult:
        platform = ctx.started()
        assert platform.is_running()
        self.runs.append((ctx.cell.name, platform.name))
        if ctx.cell.name in self.fail:
            raise HvbenchError(f"{ctx.cell.name} broke")
        return CellResult(measurements=[MeasurementRecord("write", "mb_s", 1.0, "MB/s")])


@pytest.fixture
def study(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Study:
    monkeypatch.setenv("HVBENCH_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setattr(runner, "environment", lambda study: {"accelerator": None})
    monkeypatch.setitem(registry.CELL_KINDS, "disk", FakeDisk)
    FakeDisk.runs = []
    FakeDisk.fail = set()
    return parse_study(STUDY, str(tmp_path / "s.toml"), 24 << 30)


def _run(study: Study, store: Store, resume: str | None = None) -> runner.RunOutcome:
    seen: list[tuple[PlannedItem, str]] = []
    outcome = runner.StudyRunner(study, store, run_id=resume,
                                 progress=lambda i, s: seen.append((i, s))).run(
        runner.RunLock(Path(store.location).parent))
    assert {state for _, state in seen} <= {"booting", "running", "done", "failed"}
    return outcome


def test_measured_items_are_stored_and_warmups_are_not(study: Study, tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as store:
        outcome = _run(study, store)
        rows = store.measurements(outcome.run_id)
    assert outcome.failures == 0
    assert len(FakeDisk.runs) == 3 * 2  # one warm-up round and two repetitions
    assert {platform for _, platform in FakeDisk.runs} == {"native"}
    assert sorted((r.cell, r.repetition, r.metric) for r in rows) == [
        (c, rep, "mb_s") for c in ("native/a", "native/b") for rep in (0, 1)]
    # The host's boot is no measurement.
    assert outcome.boot_s and all(r.phase != "boot" for r in rows)


def test_a_failed_cell_is_recorded_and_a_resume_redoes_only_it(study: Study,
                                                                tmp_path: Path) -> None:
    FakeDisk.fail = {"native/b"}
    with Store(tmp_path / "r.db") as store:
        first = _run(study, store)
        assert first.failures == 3  # warm-up and both repetitions
        failures = store.failures(first.run_id)
        assert [(f.cell, f.error, f.console_log, f.qemu_argv, f.accel) for f in failures] == [
            ("native/b", "native/b broke", None, None, None)] * 2
        # What `hvbench run` says at the end, and its exit code (some failed: 1).
        lines = failure_lines(store, first.run_id)
        assert lines[0].startswith("2 of 4 repetitions failed")
        assert lines[1:] == ["  native/b rep 1: native/b broke",
                             "  native/b rep 2: native/b broke"]
        assert run_exit_code(len(store.done(first.run_id)), len(failures)) == 1
        FakeDisk.fail = set()
        FakeDisk.runs = []
        second = _run(study, store, resume=first.run_id)
        assert second.failures == 0
        assert FakeDisk.runs == [("native/b", "native")] * 2  # no warm-ups either
        assert store.failures(first.run_id) == []
        assert failure_lines(store, first.run_id) == []
        assert len(store.measurements(first.run_id)) == 4


class SwallowingDisk(FakeDisk):
    """A kind whose lower layer turned the signal into an ordinary failure."""

    def run(self, ctx: CellContext) -> CellResult:
        interrupt.request(15)
        raise HvbenchError("fio failed (it was killed)")


class ResultAfterSignal(FakeDisk):
    """A kind that still returns a result although the signal arrived meanwhile."""

    def run(self, ctx: CellContext) -> CellResult:
        interrupt.request(2)
        return super().run(ctx)


@pytest.mark.parametrize("kind", [SwallowingDisk, ResultAfterSignal])
def test_an_interrupted_repetition_stops_the_run_and_stores_nothing(
        kind: type[FakeDisk], study: Study, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.CELL_KINDS, "disk", kind)
    interrupt.reset()
    try:
        with Store(tmp_path / "s.db") as store:
            with pytest.raises(InterruptedRun):
                _run(study, store)
            run = store.list_runs()[0]
            assert run.status == "interrupted"
            assert (run.n_ok, run.n_failed) == (0, 0)
    finally:
        interrupt.reset()
    # Only the first item ran: the run stopped instead of going on.
    assert len(FakeDisk.runs) <= 1


def test_a_refused_study_names_the_study_holding_the_lock() -> None:
    from hvbench.run.runner import describe_holder

    assert describe_holder('{"run": "r1", "pid": 7, "study": "quick"}') == \
        "study quick (run r1, pid 7)"
    assert describe_holder("") == "unknown"
    assert describe_holder("not json") == "not json"
