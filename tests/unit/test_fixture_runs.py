"""Golden reports of real, reduced study runs (tests/fixtures/runs).

Each ``NAME.db`` there is a real run of ``NAME.toml`` stored at schema version 1; its
``NAME.report.*`` files are what ``hvbench report`` printed for it when the fixture was
made (``regenerate.sh`` documents the commands). Rendering a scratch copy of each
database must reproduce them byte for byte: a change of the store or the report code
that changes any output, or fails to read a version-1 database, fails here. The
committed databases are never opened in place.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
SRC = Path(__file__).resolve().parents[2] / "src"
NAMES = sorted(p.stem for p in RUNS.glob("*.db"))

#: (golden suffix, extra report arguments); the table's stderr is checked with it.
FORMATS = (("report.txt", ()), ("report.json", ("--format", "json")),
           ("report.csv", ("--format", "csv")))


def hvbench(cwd: Path, *args: str, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[bytes]:
    """``hvbench ARGS`` as regenerate.sh runs it: this tree's code, 160 columns
    (``env``: more variables)."""
    env = {**{k: v for k, v in os.environ.items()
              if k not in ("FORCE_COLOR", "NO_COLOR", "CLICOLOR_FORCE", "HVBENCH_DB")},
           **(env or {})}
    env.update(COLUMNS="160", PYTHONPATH=str(SRC))
    return subprocess.run([sys.executable, "-m", "hvbench.cli.main", *args], cwd=cwd,
                          env=env, capture_output=True, timeout=300, check=False)


@pytest.fixture(params=NAMES)
def scratch_db(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, Path]:
    """(name, run id, scratch directory holding a copy NAME.db)."""
    name: str = request.param
    shutil.copyfile(RUNS / f"{name}.db", tmp_path / f"{name}.db")
    with sqlite3.connect(tmp_path / f"{name}.db") as db:
        runs = [r[0] for r in db.execute("SELECT id FROM runs")]
    assert len(runs) == 1, runs
    return name, runs[0], tmp_path


def test_fixtures_exist() -> None:
    assert {"quick", "storage", "network", "web", "scenario", "lifecycle",
            "propagation"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_fixture_is_schema_version_1(name: str) -> None:
    # immutable: read in place without creating a -wal or -shm next to the fixture.
    db = sqlite3.connect(f"file:{RUNS / f'{name}.db'}?immutable=1", uri=True)
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    finally:
        db.close()


#: Keys the JSON report added since the goldens were made (none: the goldens were
#: regenerated with ``propagation`` and ``diagnosis``, see regenerate.sh).
ADDED_JSON_KEYS: tuple[str, ...] = ()


def without_added_keys(text: bytes) -> bytes:
    """The JSON report as it was before :data:`ADDED_JSON_KEYS` were added."""
    data = json.loads(text)
    for key in ADDED_JSON_KEYS:
        data.pop(key, None)
    return (json.dumps(data, indent=2) + "\n").encode()


def assert_reports_match(cwd: Path, name: str, run: str, db: str) -> None:
    """The table (with its stderr), JSON and CSV reports of ``run`` in ``db`` are the
    goldens of fixture ``name``."""
    for suffix, extra in FORMATS:
        done = hvbench(cwd, "report", run, "--db", db, *extra)
        out = without_added_keys(done.stdout) if suffix == "report.json" else done.stdout
        assert out == (RUNS / f"{name}.{suffix}").read_bytes(), f"{name}.{suffix}"
        if suffix == "report.txt":
            assert done.stderr == (RUNS / f"{name}.report.stderr.txt").read_bytes()


def test_reports_match_goldens(scratch_db: tuple[str, str, Path]) -> None:
    name, run, cwd = scratch_db
    assert_reports_match(cwd, name, run, f"{name}.db")
    html = RUNS / f"{name}.report.html"
    if html.exists():
        done = hvbench(cwd, "report", run, "--db", f"{name}.db", "--format", "html",
                       "-o", str(cwd / "out.html"))
        assert done.returncode == 0, done.stderr
        assert (cwd / "out.html").read_bytes() == html.read_bytes(), html.name


#: Shipped examples whose run is explained elsewhere than in these fixtures: the test
#: that runs each for real and explains its run.
EXPLAINED_BY_INTEGRATION_TESTS = {
    "libvirt.toml": "tests/integration/test_libvirt.py",
    "hyperconverged.toml": "tests/integration/test_scenarios.py",
    # test_tune explains a disk tuning run (3 axes); a tuning run's trials are cells like
    # any other, so tune-net's run is read the same way (checked by hand, not in CI).
    "tune-disk.toml": "tests/integration/test_tune.py",
    "tune-net.toml": "tests/integration/test_tune.py",
}
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_every_shipped_example_has_an_explained_run() -> None:
    """Each examples/*.toml is reduced by a fixture here (its header names it) or run
    and explained by an integration test (examples/diagnosis: the planted suite)."""
    headers = "".join((RUNS / f"{n}.toml").read_text().split("\n[", 1)[0] for n in NAMES)
    for example in sorted(p.name for p in EXAMPLES.glob("*.toml")):
        if example in EXPLAINED_BY_INTEGRATION_TESTS:
            test = EXPLAINED_BY_INTEGRATION_TESTS[example]
            assert "explain" in (RUNS.parents[2] / test).read_text(), test
        else:
            assert f"examples/{example}" in headers, example


def test_explain_answers_for_every_cell(scratch_db: tuple[str, str, Path]) -> None:
    """`hvbench explain` on each fixture run: a verdict for every cell of the report,
    the table and the JSON agreeing on the dominant causes."""
    name, run, cwd = scratch_db
    report = json.loads(hvbench(cwd, "report", run, "--db", f"{name}.db",
                                "--format", "json").stdout)
    done = hvbench(cwd, "explain", run, "--db", f"{name}.db", "--format", "json")
    assert done.returncode == 0, done.stderr.decode()
    verdicts = json.loads(done.stdout)["verdicts"]
    assert [v["cell"] for v in verdicts] == [v["cell"] for v in report["diagnosis"]]
    assert verdicts, name
    table = hvbench(cwd, "explain", run, "--db", f"{name}.db")
    assert table.returncode == 0, table.stderr.decode()
    text = table.stdout.decode()
    for verdict in verdicts:
        assert verdict["cell"] in text
        if verdict["dominant"] is not None:
            assert f"dominant: {verdict['dominant']['rule']}" in text


def test_reports_from_postgresql_match_goldens(
    scratch_db: tuple[str, str, Path], postgres_url: str
) -> None:
    """``hvbench db copy`` of the (migrated) fixture into PostgreSQL, then the same
    reports read from there: byte for byte the goldens (the HTML too); a second copy
    copies nothing."""
    name, run, cwd = scratch_db
    done = hvbench(cwd, "db", "copy", f"{name}.db", postgres_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith(f"{run}: ")
    again = hvbench(cwd, "db", "copy", f"{name}.db", postgres_url, run[:10])
    assert again.returncode == 0, again.stderr
    assert b" 0 repetitions copied" in again.stdout
    assert_reports_match(cwd, name, run, postgres_url)
    html = RUNS / f"{name}.report.html"
    if html.exists():
        done = hvbench(cwd, "report", run, "--format", "html", "-o", str(cwd / "out.html"),
                       env={"HVBENCH_DB": postgres_url})
        assert done.returncode == 0, done.stderr
        assert (cwd / "out.html").read_bytes() == html.read_bytes(), html.name
