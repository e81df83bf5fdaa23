"""Every shipped example runs, reduced: `hvbench run EXAMPLE --set ... --only ...` as
tests/integration/example_overrides.toml gives it (1 repetition, small sizes, short
phases, one value per axis), on real TCG guests and network namespaces. Each planned
cell must store an ok repetition and nothing may fail; `hvbench report` then renders
the run in the terminal and as HTML (in this process: conftest.hvbench). Examples
another test already runs reduced are skipped here, naming that test."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hvbench.image.builder import GuestImage
from hvbench.model.study import Study, select_cells
from hvbench.run.runner import load_study
from hvbench.store.database import Store
from tests.integration.conftest import hvbench
from tests.integration.libvirt_daemons import running_daemons

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.geteuid() != 0, reason="the net lab and cgroups need root")]
HVBENCH = str(Path(sys.executable).parent / "hvbench")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
OVERRIDES = Path(__file__).with_name("example_overrides.toml")
ENTRIES: dict[str, dict[str, Any]] = tomllib.loads(OVERRIDES.read_text())
#: A whole reduced example, boots included (the slowest here take about a minute).
RUN_TIMEOUT_S = 600


def planned(name: str, entry: dict[str, Any]) -> Study:
    """The reduced study as `hvbench run` plans it."""
    study = load_study(EXAMPLES / name, entry.get("set", []))
    only = entry.get("only", [])
    return select_cells(study, only, []) if only else study


def run_args(name: str, entry: dict[str, Any]) -> list[str]:
    args = [str(EXAMPLES / name)]
    for change in entry.get("set", []):
        args += ["--set", change]
    for pattern in entry.get("only", []):
        args += ["--only", pattern]
    return args


@contextlib.contextmanager
def services(study: Study) -> Iterator[None]:
    """What the study needs from the host beyond hvbench: libvirtd for libvirt
    platforms (started only when it is not running, stopped only if started here)."""
    if any(p.spec.kind == "libvirt" for p in study.platforms):
        with running_daemons():
            yield
    else:
        yield


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_example_runs_reduced(name: str, image: GuestImage, tmp_path: Path) -> None:
    entry = ENTRIES[name]
    if "covered_by" in entry:
        pytest.skip(f"run reduced by {entry['covered_by']}")
    study = planned(name, entry)
    assert study.study.repetitions == 1, "a reduced example runs 1 repetition"
    db = tmp_path / "r.db"
    with services(study):
        done = subprocess.run([HVBENCH, "run", *run_args(name, entry), "--db", str(db)],
                              capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                              check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    with Store(db) as store:
        (run,) = store.list_runs()
        assert store.failures(run.id) == []
        cells = {c.id: c.name for c in store.cells(run.id)}
        stored = {cells[cell_id] for cell_id, _ in store.done(run.id)}
        assert store.get_run(run.id).env["study_overrides"] == entry.get("set", [])
    assert stored == {c.name for c in study.cells}
    report = hvbench("report", run.id, "--db", str(db))
    assert report.returncode == 0, report.stderr
    page = tmp_path / "report.html"
    report = hvbench("report", run.id, "--db", str(db), "--format", "html", "-o", str(page))
    assert report.returncode == 0, report.stderr
    assert "--set" in page.read_text()
