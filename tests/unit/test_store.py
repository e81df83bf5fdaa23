"""The results store on SQLite and on PostgreSQL: schema versions, round trips, no
duplicates, atomicity, concurrent writers."""

from __future__ import annotations

import json
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
from sqlalchemy import Connection, Engine, create_engine, inspect
from sqlalchemy.pool import NullPool

from hvbench.report.model import monitor_warnings
from hvbench.store import (
    SCHEMA_VERSION,
    CellRecord,
    MeasurementRecord,
    RawRecord,
    SampleRecord,
    Store,
    StoreError,
)
from hvbench.store import database as database_module
from hvbench.store import migrations as migrations_module

T0, T1 = "2026-01-01T00:00:00+00:00", "2026-01-01T00:01:00+00:00"
CELLS = [
    CellRecord("native/seq", "native", {"kind": "native"}, "seq", {"size": "1G"}),
    CellRecord("vm/seq", "vm", {"kind": "qemu", "cpus": 2}, "seq", {"size": "1G"}),
]
TABLES = ("repetitions", "measurements", "samples", "raw_outputs")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "results.db"


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, db: Path) -> str | Path:
    """The database of a test that runs on both engines: an SQLite file or a fresh
    database on the private PostgreSQL server."""
    if request.param == "sqlite":
        return db
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def store(target: str | Path) -> Iterator[Store]:
    with Store(target) as opened:
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


def engine_of(target: str | Path) -> Engine:
    if isinstance(target, Path):
        return create_engine(f"sqlite:///{target}", poolclass=NullPool)
    return create_engine(target.replace("postgresql://", "postgresql+psycopg://"),
                         poolclass=NullPool)


def count(target: str | Path, table: str) -> int:
    engine = engine_of(target)
    try:
        with engine.connect() as conn:
            return int(conn.exec_driver_sql(f"SELECT COUNT(*) FROM {table}").scalar_one())  # noqa: S608
    finally:
        engine.dispose()


def pragma(db: Path, name: str) -> Any:
    with sqlite3.connect(db) as conn:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]


# -- schema versions ------------------------------------------------------------------


@pytest.mark.parametrize("existing", [False, True])
def test_migrating_an_empty_file_sets_user_version(db: Path, existing: bool) -> None:
    if existing:
        db.touch()
    Store(db).close()
    assert pragma(db, "user_version") == SCHEMA_VERSION == 5
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


def stored_version(target: str | Path) -> int:
    if isinstance(target, Path):
        return int(pragma(target, "user_version"))
    engine = engine_of(target)
    try:
        with engine.connect() as conn:
            return int(conn.exec_driver_sql("SELECT version FROM hvbench_schema").scalar_one())
    finally:
        engine.dispose()


def table_names(target: str | Path) -> set[str]:
    engine = engine_of(target)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_a_failing_migration_leaves_the_previous_version(
    target: str | Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Store(target).close()

    def broken(conn: Connection) -> None:
        conn.exec_driver_sql("CREATE TABLE half_done (x INTEGER)")
        raise RuntimeError("migration bug")

    monkeypatch.setattr(database_module, "MIGRATIONS", [*migrations_module.MIGRATIONS, broken])
    monkeypatch.setattr(database_module, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    with pytest.raises(RuntimeError, match="migration bug"):
        Store(target)
    assert stored_version(target) == SCHEMA_VERSION
    assert "half_done" not in table_names(target)


def test_one_schema_on_both_engines(db: Path, postgres_url: str) -> None:
    """The same tables and columns, created through the same migration history."""
    Store(db).close()
    Store(postgres_url).close()
    shapes = []
    for target in (db, postgres_url):
        engine = engine_of(target)
        try:
            found = inspect(engine)
            shapes.append({t: [c["name"] for c in found.get_columns(t)]
                           for t in found.get_table_names() if t != "hvbench_schema"})
        finally:
            engine.dispose()
    assert shapes[0] == shapes[1]
    assert "fleet_id" in shapes[0]["runs"]
    assert stored_version(db) == stored_version(postgres_url) == SCHEMA_VERSION


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


def test_unknown_run_lists_what_the_file_holds(store: Store) -> None:
    with pytest.raises(StoreError, match="holds no runs"):
        store.get_run("nope")
    new_run(store)
    with pytest.raises(StoreError) as info:
        store.get_run("nope")
    assert "no run 'nope'" in str(info.value)
    assert store.location in str(info.value)
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


def test_duplicate_ok_repetition_is_refused(store: Store, target: str | Path) -> None:
    rid, ids = new_run(store)
    record(store, rid, ids["vm/seq"], 1, value=1.0)
    with pytest.raises(StoreError, match="already recorded as ok"):
        record(store, rid, ids["vm/seq"], 1, value=2.0)
    assert [m.value for m in store.measurements(rid)] == [1.0]
    assert count(target, "samples") == 2


def test_failed_repetition_is_replaced_by_a_later_ok_one(store: Store, target: str | Path) -> None:
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
    assert [count(target, t) for t in ("repetitions", "samples", "raw_outputs")] == [1, 2, 1]


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
    store: Store, target: str | Path, bad: dict[str, Any]
) -> None:
    rid, ids = new_run(store)
    with pytest.raises(StoreError):
        record(store, rid, ids["vm/seq"], 1, **bad)
    assert all(count(target, table) == 0 for table in TABLES)
    assert store.done(rid) == set()
    record(store, rid, ids["vm/seq"], 1)  # the (cell, repetition) is still free
    assert store.done(rid) == {(ids["vm/seq"], 1)}


def test_failed_retry_keeps_the_earlier_failure(store: Store) -> None:
    rid, ids = new_run(store)
    record(store, rid, ids["vm/seq"], 1, status="failed", error="first")
    with pytest.raises(StoreError):
        record(store, rid, ids["vm/seq"], 1, value=math.nan)
    assert [f.error for f in store.failures(rid)] == ["first"]


def test_killed_mid_transaction_loses_only_the_open_repetition(target: str | Path) -> None:
    with Store(target) as store:
        rid, ids = new_run(store)
        record(store, rid, ids["native/seq"], 1)
    # A child process dies with os._exit (no cleanup, like kill -9) after inserting the
    # repetition row but before its results and the COMMIT.
    script = textwrap.dedent(f"""
        import os
        from hvbench.store import MeasurementRecord, Store
        from hvbench.store.database import Store as S
        S._insert_results = staticmethod(lambda *a: os._exit(9))
        store = Store({target if isinstance(target, str) else str(target)!r})
        store.record_repetition(
            run_id={rid!r}, cell_id={ids["vm/seq"]}, repetition=1, position=1, status="ok",
            measurements=[MeasurementRecord("p", "m", 1.0, "x")],
            started_at="t0", finished_at="t1")
    """)
    result = subprocess.run([sys.executable, "-c", script], check=False)
    assert result.returncode == 9
    with Store(target) as store:
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


def test_second_store_sees_committed_rows(target: str | Path) -> None:
    with Store(target) as writer, Store(target) as reader:
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


# -- concurrent writers ---------------------------------------------------------------


def test_concurrent_writers_get_unique_run_ids(target: str | Path) -> None:
    """Four processes create 25 runs each at once, their id suffixes drawn from 256
    values instead of 65536 (ids created in the same second collide often), and record a
    repetition of each: every run is stored once, with its own cells and repetition."""
    Store(target).close()
    script = textwrap.dedent(f"""
        import random
        from hvbench.kinds import install
        from hvbench.store import CellRecord, MeasurementRecord, Store
        from hvbench.store import database
        install()  # a cell's identity asks its kind
        database.secrets.token_hex = lambda n: f"{{random.randrange(256):04x}}"
        with Store({target if isinstance(target, str) else str(target)!r}) as store:
            for i in range(25):
                rid = store.create_run(run_id=None, study_name="s", study_path="p",
                                       study_text="", seed=i, env={{}},
                                       hvbench_version="0", git_commit=None)
                ids = store.add_cells(rid, [CellRecord("c", "p", {{}}, "w", {{}})])
                store.record_repetition(run_id=rid, cell_id=ids["c"], repetition=0,
                    position=0, status="ok", started_at="t0", finished_at="t1",
                    measurements=[MeasurementRecord("p", "m", float(i), "x")])
                print(rid)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script],
                              stdout=subprocess.PIPE, text=True) for n in range(4)]
    outputs = [p.communicate(timeout=120)[0].split() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0]
    ids = [rid for out in outputs for rid in out]
    assert len(ids) == len(set(ids)) == 100
    with Store(target) as store:
        assert sorted(store.run_ids()) == sorted(ids)
        assert all(len(store.done(rid)) == 1 for rid in ids)
    assert count(target, "repetitions") == 100


def test_monitor_errors_kept_with_a_window_become_the_reports_warnings(tmp_path: Path
                                                                        ) -> None:
    with Store(tmp_path / "w.db") as store:
        rid, ids = new_run(store)
        first = next(iter(ids.values()))
        errors = json.dumps({"nb0.load": "stopped", "guest": "no samples came back"})
        record(store, rid, first, 0, raw=[RawRecord("seq-write", "monitor-errors", errors)])
        record(store, rid, first, 1, raw=[RawRecord("seq-write", "monitor-errors", "[1]")])
        record(store, rid, first, 2)
        cell = next(iter(ids))
        assert monitor_warnings(store, rid) == [
            f"{cell} rep 1 (seq-write): monitor guest: no samples came back",
            f"{cell} rep 1 (seq-write): monitor nb0.load: stopped",
            f"{cell} rep 2 (seq-write): its monitor errors are not a JSON object"]
