"""The SQLite results store: schema versions, round trips, no duplicates, atomicity."""

from __future__ import annotations

import math
import re
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hvbench.store import (
    SCHEMA_VERSION,
    CellRecord,
    MeasurementRecord,
    RawRecord,
    SampleRecord,
    Store,
    StoreError,
)
from hvbench.store import migrations as migrations_module
from hvbench.store import sqlite as sqlite_module

T0, T1 = "2026-01-01T00:00:00+00:00", "2026-01-01T00:01:00+00:00"
CELLS = [
    CellRecord("native/seq", "native", {"kind": "native"}, "seq", {"size": "1G"}),
    CellRecord("vm/seq", "vm", {"kind": "qemu", "cpus": 2}, "seq", {"size": "1G"}),
]
TABLES = ("repetitions", "measurements", "samples", "raw_outputs")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "results.db"


@pytest.fixture
def store(db: Path) -> Iterator[Store]:
    with Store(db) as opened:
        yield opened


def new_run(store: Store, run_id: str | None = "r1", **env: Any) -> tuple[str, dict[str, int]]:
    rid = store.create_run(
        run_id=run_id, study_name="disk", study_path="/s/disk.toml", study_text="[study]\n",
        seed=42, env=env or {"accelerator": "kvm", "cpus": 8}, hvbench_version="0.1.0",
        git_commit="abc123",
    )
    return rid, store.add_cells(rid, CELLS)


def record(
    store: Store, run_id: str, cell_id: int, repetition: int, *, status: str = "ok",
    value: float = 100.0, **extra: Any,
) -> int:
    kwargs: dict[str, Any] = {
        "measurements": [MeasurementRecord("seq-write", "mb_s", value, "MB/s")],
        "samples": [SampleRecord("seq-write", "cpu", 0.5, {"usr": 10.0}),
                    SampleRecord("seq-write", "cpu", 1.0, {"usr": 12.0})],
        "raw": [RawRecord("seq-write", "fio-json", '{"jobs": []}')],
    }
    kwargs.update(extra)
    return store.record_repetition(
        run_id=run_id, cell_id=cell_id, repetition=repetition, position=0,
        status=status,  # type: ignore[arg-type]  # tests pass invalid statuses on purpose
        started_at=T0, finished_at=T1, **kwargs,
    )


def count(db: Path, table: str) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])  # noqa: S608


def pragma(db: Path, name: str) -> Any:
    with sqlite3.connect(db) as conn:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]


# -- schema versions ------------------------------------------------------------------


@pytest.mark.parametrize("existing", [False, True])
def test_migrating_an_empty_file_sets_user_version(db: Path, existing: bool) -> None:
    if existing:
        db.touch()
    Store(db).close()
    assert pragma(db, "user_version") == SCHEMA_VERSION == 2
    assert pragma(db, "journal_mode") == "wal"
    Store(db).close()  # reopening a current database migrates nothing
    assert pragma(db, "user_version") == SCHEMA_VERSION


def test_database_from_a_newer_hvbench_is_refused(db: Path) -> None:
    Store(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError) as info:
        Store(db)
    message = str(info.value)
    assert str(db) in message
    assert f"version {SCHEMA_VERSION + 1}" in message
    assert f"up to {SCHEMA_VERSION}" in message


def test_a_failing_migration_leaves_the_previous_version(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Store(db).close()

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half_done (x INTEGER)")
        raise RuntimeError("migration bug")

    monkeypatch.setattr(sqlite_module, "MIGRATIONS", [*migrations_module.MIGRATIONS, broken])
    monkeypatch.setattr(sqlite_module, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    with pytest.raises(RuntimeError, match="migration bug"):
        Store(db)
    assert pragma(db, "user_version") == SCHEMA_VERSION
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert "half_done" not in tables


def test_garbage_file_is_refused(db: Path) -> None:
    db.write_bytes(b"this is not an sqlite database, just text" * 100)
    with pytest.raises(StoreError, match=re.escape(str(db))):
        Store(db)


def test_missing_file_without_create(db: Path) -> None:
    with pytest.raises(StoreError, match="no results database"):
        Store.open(db, create=False)
    assert not db.exists()


# -- runs -----------------------------------------------------------------------------


def test_generated_run_id_is_sortable_and_run_round_trips(store: Store) -> None:
    rid, _ = new_run(store, run_id=None, accelerator="tcg", cpus=4)
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", rid)
    run = store.get_run(rid)
    assert (run.study_name, run.study_path, run.study_text, run.seed) == (
        "disk", "/s/disk.toml", "[study]\n", 42)
    assert (run.status, run.finished_at, run.git_commit) == ("running", None, "abc123")
    assert run.env == {"accelerator": "tcg", "cpus": 4}
    assert store.latest_run() == run


def test_duplicate_run_id_is_refused(store: Store) -> None:
    new_run(store)
    with pytest.raises(StoreError, match="already exists"):
        new_run(store)


def test_unknown_run_lists_what_the_file_holds(store: Store, db: Path) -> None:
    with pytest.raises(StoreError, match="holds no runs"):
        store.get_run("nope")
    new_run(store)
    with pytest.raises(StoreError) as info:
        store.get_run("nope")
    assert "no run 'nope'" in str(info.value)
    assert str(db) in str(info.value)
    assert "r1" in str(info.value)


def test_set_status(store: Store) -> None:
    rid, _ = new_run(store)
    store.set_status(rid, "interrupted")
    store.set_status(rid, "complete", finished_at=T1)
    run = store.get_run(rid)
    assert (run.status, run.finished_at) == ("complete", T1)
    with pytest.raises(StoreError, match="no run"):
        store.set_status("nope", "failed")
    with pytest.raises(StoreError, match="run status"):
        store.set_status(rid, "bogus")  # type: ignore[arg-type]


def test_latest_run_of_empty_database(store: Store) -> None:
    assert store.latest_run() is None
    assert store.list_runs() == []


def test_non_json_env_is_refused(store: Store) -> None:
    with pytest.raises(StoreError, match="JSON"):
        new_run(store, path=Path("/x"))
    assert store.list_runs() == []


# -- cells and order ------------------------------------------------------------------


def test_add_cells_is_idempotent(store: Store) -> None:
    rid, ids = new_run(store)
    assert sorted(ids) == ["native/seq", "vm/seq"]
    assert store.add_cells(rid, list(reversed(CELLS))) == ids
    assert [c.name for c in store.cells(rid)] == ["native/seq", "vm/seq"]
    assert store.cells(rid)[1].platform == {"kind": "qemu", "cpus": 2}


def test_changed_cell_definition_is_refused(store: Store) -> None:
    rid, _ = new_run(store)
    changed = CellRecord("vm/seq", "vm", {"kind": "qemu", "cpus": 4}, "seq", {"size": "1G"})
    with pytest.raises(StoreError, match="study changed"):
        store.add_cells(rid, [changed])


def test_add_cells_to_unknown_run(store: Store) -> None:
    with pytest.raises(StoreError, match="no run"):
        store.add_cells("nope", CELLS)


def test_record_order(store: Store) -> None:
    rid, _ = new_run(store)
    store.record_order(rid, 1, ["vm/seq", "native/seq"])
    store.record_order(rid, 1, ["vm/seq", "native/seq"])  # resume replays it: no error
    store.record_order(rid, 2, ["native/seq", "vm/seq"])
    assert store.order(rid) == {1: ["vm/seq", "native/seq"], 2: ["native/seq", "vm/seq"]}
    with pytest.raises(StoreError, match="recorded order"):
        store.record_order(rid, 1, ["native/seq", "vm/seq"])
    with pytest.raises(StoreError, match="no cells"):
        store.record_order(rid, 3, ["ghost"])


# -- repetitions ----------------------------------------------------------------------


def test_record_and_query_round_trip(store: Store) -> None:
    rid, ids = new_run(store)
    record(store, rid, ids["vm/seq"], 1, value=250.5, qemu_argv=["qemu", "-m", "1G"],
           accel="kvm", console_log="boot ok")
    (row,) = store.measurements(rid)
    assert (row.cell, row.platform, row.workload, row.repetition, row.position) == (
        "vm/seq", "vm", "seq", 1, 0)
    assert (row.phase, row.metric, row.value, row.unit) == ("seq-write", "mb_s", 250.5, "MB/s")
    samples = store.samples(rid, cell="vm/seq", repetition=1)
    assert [(s.t, s.values) for s in samples] == [(0.5, {"usr": 10.0}), (1.0, {"usr": 12.0})]
    assert store.samples(rid, cell="native/seq") == []
    assert store.samples(rid, monitor="disk") == []
    (raw,) = store.raw_outputs(rid, kind="fio-json")
    assert (raw.cell, raw.content) == ("vm/seq", '{"jobs": []}')
    assert store.failures(rid) == []


def test_duplicate_ok_repetition_is_refused(store: Store, db: Path) -> None:
    rid, ids = new_run(store)
    record(store, rid, ids["vm/seq"], 1, value=1.0)
    with pytest.raises(StoreError, match="already recorded as ok"):
        record(store, rid, ids["vm/seq"], 1, value=2.0)
    assert [m.value for m in store.measurements(rid)] == [1.0]
    assert count(db, "samples") == 2


def test_failed_repetition_is_replaced_by_a_later_ok_one(store: Store, db: Path) -> None:
    rid, ids = new_run(store)
    cell = ids["vm/seq"]
    record(store, rid, cell, 1, status="failed", value=7.0, error="guest hung",
           console_log="kernel panic", qemu_argv=["qemu-system-x86_64"])
    (failure,) = store.failures(rid)
    assert (failure.cell, failure.repetition, failure.error) == ("vm/seq", 1, "guest hung")
    assert (failure.console_log, failure.qemu_argv) == ("kernel panic", ["qemu-system-x86_64"])
    assert store.measurements(rid) == []
    assert [m.value for m in store.measurements(rid, include_failed=True)] == [7.0]

    record(store, rid, cell, 1, value=9.0)
    assert store.failures(rid) == []
    assert [m.value for m in store.measurements(rid, include_failed=True)] == [9.0]
    assert (count(db, "repetitions"), count(db, "samples"), count(db, "raw_outputs")) == (1, 2, 1)


def test_done_is_what_resume_skips(store: Store) -> None:
    rid, ids = new_run(store)
    native, vm = ids["native/seq"], ids["vm/seq"]
    assert store.done(rid) == set()
    record(store, rid, native, 1)
    record(store, rid, vm, 1, status="failed")
    record(store, rid, native, 2)
    assert store.done(rid) == {(native, 1), (native, 2)}
    todo = [(c, r) for r in (1, 2) for c in (native, vm) if (c, r) not in store.done(rid)]
    assert todo == [(vm, 1), (vm, 2)]


@pytest.mark.parametrize(
    "bad",
    [
        {"measurements": [MeasurementRecord("p", "m", 1.0, "x"),
                          MeasurementRecord("p", "m", 2.0, "x")]},
        {"measurements": [MeasurementRecord("p", "m", math.nan, "x")]},
        {"samples": [SampleRecord("p", "cpu", 0.0, {"ok": 1}),
                     SampleRecord("p", "cpu", 1.0, {"bad": object()})]},
        {"status": "maybe"},
    ],
    ids=["duplicate-metric", "nan", "unserializable-sample", "bad-status"],
)
def test_failed_write_leaves_nothing_partial(
    store: Store, db: Path, bad: dict[str, Any]
) -> None:
    rid, ids = new_run(store)
    with pytest.raises(StoreError):
        record(store, rid, ids["vm/seq"], 1, **bad)
    assert all(count(db, table) == 0 for table in TABLES)
    assert store.done(rid) == set()
    record(store, rid, ids["vm/seq"], 1)  # the (cell, repetition) is still free
    assert store.done(rid) == {(ids["vm/seq"], 1)}


def test_failed_retry_keeps_the_earlier_failure(store: Store) -> None:
    rid, ids = new_run(store)
    record(store, rid, ids["vm/seq"], 1, status="failed", error="first")
    with pytest.raises(StoreError):
        record(store, rid, ids["vm/seq"], 1, value=math.nan)
    assert [f.error for f in store.failures(rid)] == ["first"]


def test_killed_mid_transaction_loses_only_the_open_repetition(db: Path) -> None:
    with Store(db) as store:
        rid, ids = new_run(store)
        record(store, rid, ids["native/seq"], 1)
    # A child process dies with os._exit (no cleanup, like kill -9) after inserting the
    # repetition row but before its results and the COMMIT.
    script = textwrap.dedent(f"""
        import os
        from hvbench.store import MeasurementRecord, Store
        from hvbench.store.sqlite import Store as S
        S._insert_results = staticmethod(lambda *a: os._exit(9))
        store = Store({str(db)!r})
        store.record_repetition(
            run_id={rid!r}, cell_id={ids["vm/seq"]}, repetition=1, position=1, status="ok",
            measurements=[MeasurementRecord("p", "m", 1.0, "x")],
            started_at="t0", finished_at="t1")
    """)
    result = subprocess.run([sys.executable, "-c", script], check=False)
    assert result.returncode == 9
    with Store(db) as store:
        assert store.done(rid) == {(ids["native/seq"], 1)}
        assert len(store.measurements(rid)) == 1
        record(store, rid, ids["vm/seq"], 1)


def test_cell_of_another_run_is_refused(store: Store) -> None:
    new_run(store)
    other, _ = new_run(store, run_id="r2")
    own = {c.name: c.id for c in store.cells("r1")}
    with pytest.raises(StoreError, match="not part of run r2"):
        record(store, other, own["vm/seq"], 1)


# -- readers --------------------------------------------------------------------------


def test_second_store_sees_committed_rows(db: Path) -> None:
    with Store(db) as writer, Store(db) as reader:
        rid, ids = new_run(writer)
        assert reader.get_run(rid).study_name == "disk"
        record(writer, rid, ids["vm/seq"], 1, value=3.0)
        assert [m.value for m in reader.measurements(rid)] == [3.0]
        assert reader.done(rid) == {(ids["vm/seq"], 1)}


def test_list_runs_counts(store: Store) -> None:
    rid, ids = new_run(store)
    record(store, rid, ids["native/seq"], 1)
    record(store, rid, ids["vm/seq"], 1)
    record(store, rid, ids["native/seq"], 2)
    record(store, rid, ids["vm/seq"], 2, status="failed", error="boom")
    other, other_ids = new_run(store, run_id="r2", cpus=2)  # no accelerator in env
    record(store, other, other_ids["vm/seq"], 1, accel="tcg")
    store.set_status(rid, "complete", finished_at=T1)

    first, second = store.list_runs()
    assert (first.id, first.study_name, first.status) == ("r1", "disk", "complete")
    assert (first.n_cells, first.n_ok, first.n_failed, first.accelerator) == (2, 3, 1, "kvm")
    assert (second.id, second.n_ok, second.n_failed, second.accelerator) == ("r2", 1, 0, "tcg")
    assert second.created_at >= first.created_at


def test_reads_of_unknown_run_are_errors(store: Store) -> None:
    for read in (store.measurements, store.samples, store.raw_outputs, store.failures):
        with pytest.raises(StoreError, match="no run 'nope'"):
            read("nope")
