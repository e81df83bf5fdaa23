"""Golden fleet reports: ``hvbench report --fleet`` of a real 2-host fleet run
(tests/fixtures/fleet/fleet2.db, made by make.py there: two `hvbench worker` processes
on one machine, native dd and a TCG guest's dd, 3 repetitions) reproduces the stored
table, ``--all-metrics`` table and JSON byte for byte, rendered from a scratch copy."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.unit.test_fixture_runs import hvbench

FLEET = Path(__file__).resolve().parents[1] / "fixtures" / "fleet"
#: (golden file, extra arguments of ``report --fleet F``), as make.py renders them.
GOLDENS = (("fleet2.report.txt", ()), ("fleet2.all-metrics.txt", ("--all-metrics",)),
           ("fleet2.report.json", ("--format", "json")))


def _scratch(directory: Path) -> str:
    """fleet2.db copied into ``directory``; its fleet id."""
    shutil.copyfile(FLEET / "fleet2.db", directory / "fleet2.db")
    with contextlib.closing(sqlite3.connect(directory / "fleet2.db")) as db:
        [(fleet,)] = db.execute("SELECT DISTINCT fleet_id FROM runs").fetchall()
    return str(fleet)


@pytest.mark.parametrize(("golden", "extra"), GOLDENS)
def test_fleet_report_matches_its_golden(tmp_path: Path, golden: str,
                                         extra: tuple[str, ...]) -> None:
    fleet = _scratch(tmp_path)
    done = hvbench(tmp_path, "report", "--fleet", fleet, "--db", "fleet2.db", *extra)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == (FLEET / golden).read_text()


def test_the_golden_leads_with_percent_of_native_and_the_two_host_verdict() -> None:
    """What the goldens hold, read from the JSON: every guest throughput has both hosts'
    % of native, natives are 100 %, and the verdict names the hosts and the cells."""
    doc = json.loads((FLEET / "fleet2.report.json").read_text())
    assert [h["host"] for h in doc["hosts"]] == ["h1", "h2"]
    for row in doc["main"]:
        # a boot time has no native; every throughput has one on both hosts
        assert set(row["pct_native"]) == (set() if row["phase"] == "boot" else {"h1", "h2"})
        if row["platform"] == "native":
            assert set(row["pct_native"].values()) == {100.0}
        elif row["phase"] != "boot":
            assert all(0 < pct < 100 for pct in row["pct_native"].values())  # TCG guests
    verdict = doc["verdict"]
    assert (verdict["first"], verdict["second"]) == ("h1", "h2")
    assert verdict["cells"] == len(doc["main"])
    text = (FLEET / "fleet2.report.txt").read_text()
    assert "main metric per host (% of that host's native)" in text
    assert "h1 vs h2" in text and verdict["verdict"] in text
    assert "every metric" not in text
    assert "every metric" in (FLEET / "fleet2.all-metrics.txt").read_text()
