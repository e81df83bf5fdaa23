"""`hvbench run --dry-run / --only / --exclude / --repetitions`, run-id prefixes and
the `runs` table: no guest boots, no database is created."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from hvbench.cli.main import main
from hvbench.cli.run import plan_lines, plan_table
from hvbench.cli.runs import runs_table
from hvbench.errors import SpecError
from hvbench.model.study import parse_study, select_cells
from hvbench.report.model import resolve_run_id
from hvbench.run.plan import plan_study
from hvbench.run.runner import load_study, resume_study
from hvbench.store.database import Store
from hvbench.store.records import RunSummary, cell_record

EXAMPLES = Path(__file__).parents[2] / "examples"
STUDIES = sorted(EXAMPLES.rglob("*.toml"))


def _text(renderable: object, width: int = 250) -> str:
    console = Console(file=io.StringIO(), width=width, highlight=False)
    console.print(renderable)
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


@pytest.mark.parametrize("path", STUDIES, ids=[p.name for p in STUDIES])
def test_dry_run_of_every_example_lists_its_cells(path: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "none.db"
    assert main(["run", str(path), "--dry-run", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "dry run: nothing was started" in out and "estimated duration" in out
    assert not db.exists(), "a dry run must not create a database"
    study = load_study(path)
    table = _text(plan_table(plan_study(study)))
    for cell in study.cells:
        assert cell.name in table


def test_selection_and_repetitions_shape_the_plan() -> None:
    study = load_study(EXAMPLES / "quick.toml")
    names = [c.name for c in study.cells]
    assert main(["run", str(EXAMPLES / "quick.toml"), "--dry-run", "--repetitions", "5",
                 "--only", names[0], "--db", "/nonexistent/x.db"]) == 0
    chosen = select_cells(study, only=[names[0]])
    plan = plan_study(chosen)
    assert plan.cells == (names[0],)
    lines = plan_lines(plan)
    assert lines[0].startswith(f"study {study.study.name}: 1 cells x")
    assert "guests to boot" in lines[1]


def test_a_selection_that_leaves_nothing_is_one_line(capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    assert main(["run", str(EXAMPLES / "quick.toml"), "--dry-run", "--exclude", "*"]) == 2
    err = capsys.readouterr().err
    assert "no cell remains after exclude '*'" in err


def test_resume_refuses_a_new_selection(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--resume", "r1", "--only", "x", "--dry-run"]) == 2
    assert "drop --only" in capsys.readouterr().err


def _stored_run(db: Path, run_id: str, study_path: Path, *, only: list[str],
                repetitions: int) -> None:
    """A run started as `hvbench run --only ... --repetitions N` stores: only the chosen
    cells, and the order of each of its N repetitions."""
    study = select_cells(load_study(study_path), only=only)
    with Store(db) as store:
        store.create_run(run_id=run_id, study_name=study.study.name,
                         study_path=str(study_path), study_text=study.text, seed=0, env={},
                         hvbench_version="0", git_commit=None)
        store.add_cells(run_id, [cell_record(c) for c in study.cells])
        for rep in range(repetitions):
            store.record_order(run_id, rep, [c.name for c in study.cells])


def test_resume_keeps_the_cells_and_repetitions_the_run_started_with(tmp_path: Path) -> None:
    path = EXAMPLES / "quick.toml"
    first = load_study(path).cells[0].name
    db = tmp_path / "r.db"
    _stored_run(db, "20261125-000000-abcd", path, only=[first], repetitions=2)
    with Store(db) as store:
        study = resume_study(store, "20261125-000000-abcd")
    assert [c.name for c in study.cells] == [first]
    assert study.study.repetitions == 2


def test_run_ids_resolve_from_a_unique_prefix(tmp_path: Path) -> None:
    path = EXAMPLES / "quick.toml"
    db = tmp_path / "r.db"
    for run_id in ("20261125-000000-abcd", "20261125-000000-abef", "20261126-000000-0000"):
        _stored_run(db, run_id, path, only=["*"], repetitions=1)
    with Store(db) as store:
        assert resolve_run_id(store, "20261126", str(db)) == "20261126-000000-0000"
        assert resolve_run_id(store, "20261125-000000-abcd", str(db)) == "20261125-000000-abcd"
        assert resolve_run_id(store, None, str(db)) == "20261126-000000-0000"
        with pytest.raises(SpecError, match="start of 2 run ids"):
            resolve_run_id(store, "20261125-000000-ab", str(db))
        with pytest.raises(SpecError, match="no run 'x'"):
            resolve_run_id(store, "x", str(db))


def test_runs_table_never_truncates_an_id_in_80_columns() -> None:
    runs = [RunSummary(f"20261124-1{i}0000-3fa{i}", "a-study-with-a-rather-long-name-" * 2,
                       "2026-11-24T10:00:00+00:00", "interrupted", 28, 80, 4, "tcg")
            for i in range(3)]
    text = _text(runs_table(runs, "/var/tmp/some/where/hvbench.db"), width=80)
    for run in runs:
        assert run.id in text
    # Nothing but the study name folds: the status is whole (it was "interr…" beside
    # a creation time that repeated the id's).
    assert text.count("interrupted") == 3 and "…" not in text


ATTACH_STUDY = """
[study]
name = "attach"
repetitions = 3

[[platform]]
kind = "native"
name = "host"

[[platform]]
kind = "libvirt"
name = "mine"
domain = "web01"
disk = "vdb"

[[workload]]
name = "dd"
profile = "dd"
target = "device"
file_size = "16M"
direct = true
"""


def test_the_dry_run_says_attach_for_an_existing_domain_not_boot() -> None:
    study = parse_study(ATTACH_STUDY, "attach.toml", 24 << 30)
    plan = plan_study(study)
    assert (plan.platform_boots, plan.guest_boots, plan.attaches) == (0, 0, 3)
    assert plan.attached == ("mine",)
    lines = plan_lines(plan)
    assert not any("guests to boot" in line for line in lines), lines
    assert "existing domains to attach: 3 (platforms mine: never booted, stopped or " \
           "changed)" in lines


def test_the_resume_command_of_a_fleet_repeats_its_workers_and_database() -> None:
    import argparse
    import shlex
    import sys

    from hvbench.cli.run import resume_command, ssh_options

    args = argparse.Namespace(db="postgres://team@db/hvb", hosts="h1,h2=gen2",
                              remote_python=sys.executable, ssh_config=Path("/c f"),
                              host_workdir=None)
    assert resume_command(args, "fleet-1", shlex.join(ssh_options(args))) == (
        "hvbench run --resume fleet-1 --hosts h1,h2=gen2 --ssh-config '/c f' "
        "--db postgres://team@db/hvb")
    args.db = None
    assert resume_command(args, "fleet-1", "--scheduler tcp://10.0.0.1:8786") == \
        "hvbench run --resume fleet-1 --scheduler tcp://10.0.0.1:8786"


@pytest.mark.parametrize("where", [[], ["--scheduler", "tcp://127.0.0.1:9"],
                                   ["--hosts", "h1"]])
def test_a_rejected_study_creates_no_database(tmp_path: Path, where: list[str],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[study]\nname = "bad"\nrepetitions = 0\n')
    db = tmp_path / "results.db"
    assert main(["run", str(bad), "--db", str(db), *where]) == 2
    assert "bad.toml" in capsys.readouterr().err
    assert not db.exists()


def test_postgres_urls_take_libpq_synonym() -> None:
    from hvbench.store.database import _postgres_url, is_url

    assert is_url("postgres://team@db/hvbench") and is_url("postgresql://team@db/hvb")
    assert not is_url("postgres.db")
    assert _postgres_url("postgres://team@db/hvbench").drivername == "postgresql+psycopg"


def test_resume_takes_a_unique_prefix_and_lists_an_ambiguous_ones_candidates(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = EXAMPLES / "quick.toml"
    db = tmp_path / "r.db"
    for run_id in ("20261125-000000-abcd", "20261125-000000-abef"):
        _stored_run(db, run_id, path, only=["*"], repetitions=1)
    assert main(["run", "--resume", "20261125-000000-abc", "--dry-run", "--db", str(db)]) == 0
    assert "dry run: nothing was started" in capsys.readouterr().out
    for dry in (["--dry-run"], []):
        assert main(["run", "--resume", "20261125", *dry, "--db", str(db)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert "20261125-000000-abcd" in err and "20261125-000000-abef" in err


def test_an_ambiguous_prefix_names_every_candidate(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    ids = [f"20261125-0000{i:02d}-abcd" for i in range(7)]
    for run_id in ids:
        _stored_run(db, run_id, EXAMPLES / "quick.toml", only=["*"], repetitions=1)
    with Store(db) as store, pytest.raises(SpecError) as caught:
        resolve_run_id(store, "2026", str(db))
    message = str(caught.value)
    assert "\n" not in message
    assert all(run_id in message for run_id in ids), message


def _fleet_runs(db: Path, fleet_ids: list[str]) -> None:
    """One host run per fleet id, as start_fleet stores them."""
    with Store(db) as store:
        for i, fleet_id in enumerate(fleet_ids):
            store.create_run(run_id=f"20261126-00000{i}-abcd", study_name="quick",
                             study_path="quick.toml", study_text="", seed=0, env={},
                             hvbench_version="0", git_commit=None, fleet_id=fleet_id,
                             host="h1")


def test_fleet_ids_resolve_from_a_unique_prefix(tmp_path: Path) -> None:
    from hvbench.report.model import resolve_fleet_id

    db = tmp_path / "f.db"
    _fleet_runs(db, ["fleet-20261126-000000-aaaa", "fleet-20261126-000000-abbb",
                     "fleet-20261127-000000-cccc"])
    with Store(db) as store:
        assert resolve_fleet_id(store, "fleet-20261127", "f.db") == \
            "fleet-20261127-000000-cccc"
        assert resolve_fleet_id(store, "fleet-20261126-000000-aaaa", "f.db") == \
            "fleet-20261126-000000-aaaa"
        with pytest.raises(SpecError, match=r"is the start of 2 fleet ids .*aaaa.*abbb"):
            resolve_fleet_id(store, "fleet-20261126", "f.db")
        with pytest.raises(SpecError, match="no fleet run 'fleet-2025'"):
            resolve_fleet_id(store, "fleet-2025", "f.db")


def test_a_fleet_resume_takes_a_unique_prefix(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """`run --resume PREFIX --hosts/--scheduler` resumes the one fleet the prefix names
    (the fleet's workers are not needed to see which: resume_fleet is stood in for)."""
    import argparse

    from hvbench.cli import run as run_cli
    from hvbench.run import fleet

    db = tmp_path / "f.db"
    _fleet_runs(db, ["fleet-20261126-000000-aaaa", "fleet-20261127-000000-cccc"])
    asked: list[str] = []

    def resume_fleet(client: object, store: Store, fleet_id: str) -> list[object]:
        asked.append(fleet_id)
        raise fleet.FleetError("stop here")

    monkeypatch.setattr(fleet, "resume_fleet", resume_fleet)
    args = argparse.Namespace(resume="fleet-20261126", db=str(db), spread=False)
    console = Console(file=io.StringIO())
    with pytest.raises(fleet.FleetError, match="stop here"):
        run_cli._run_fleet(object(), args, None, console, console, hosts=None,
                           classes=None, again="")
    assert asked == ["fleet-20261126-000000-aaaa"]


def test_a_dry_run_of_a_fleet_resume_takes_its_prefix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "f.db"
    study = load_study(EXAMPLES / "quick.toml")
    with Store(db) as store:
        store.create_run(run_id="20261126-000001-abcd", study_name="quick",
                         study_path="quick.toml", study_text=study.text, seed=0, env={},
                         hvbench_version="0", git_commit=None,
                         fleet_id="fleet-20261126-000001-ffff", host="h1")
        store.add_cells("20261126-000001-abcd", [cell_record(c) for c in study.cells])
        store.record_order("20261126-000001-abcd", 0, [c.name for c in study.cells])
    assert main(["run", "--resume", "fleet-2026", "--hosts", "h1", "--dry-run",
                 "--db", str(db)]) == 0
    assert "dry run: nothing was started" in capsys.readouterr().out
