"""The metric catalogue, the schema v2 identity of real fixture runs, and the parity
of the report's renderers (terminal, JSON, HTML) on the fixture runs."""

from __future__ import annotations

import functools
import json
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest

from hvbench.analysis.metrics import catalogue, lookup, unknown_metrics
from hvbench.report.diagnosis import DIAGNOSIS_TITLE
from hvbench.report.html import render_html
from hvbench.report.model import RunReport, load_run_report
from hvbench.report.render import html_input, report_json, section_titles, terminal_tables
from hvbench.store.database import Store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RUNS = FIXTURES / "runs"
NAMES = sorted(p.stem for p in RUNS.glob("*.db"))


def stored_metrics(db: Path) -> set[tuple[str, str]]:
    conn = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    try:
        return {(m, u) for m, u in conn.execute("SELECT DISTINCT metric, unit FROM measurements")}
    finally:
        conn.close()


@pytest.mark.parametrize("name", NAMES)
def test_every_stored_metric_is_in_the_catalogue(name: str) -> None:
    found = stored_metrics(RUNS / f"{name}.db")
    assert unknown_metrics(m for m, _ in found) == []
    # a stored unit, when the producer gives one, is the catalogue's
    wrong = {(m, u) for m, u in found if u and (spec := lookup(m)) and spec.unit != u}
    assert wrong == set()


def test_every_fixture_row_metric_is_in_the_catalogue() -> None:
    for path in FIXTURES.glob("*.json"):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "rows" in data:
            assert unknown_metrics(r["metric"] for r in data["rows"]) == [], path.name


def test_catalogue_names_are_unique_and_roles_ranked_once() -> None:
    names = [s.name for s in catalogue()]
    assert len(names) == len(set(names))
    for role in ("main", "detail", "vs_alone"):
        ranks = [getattr(s, role) for s in catalogue() if getattr(s, role) is not None]
        assert len(ranks) == len(set(ranks)), role


@pytest.fixture(params=NAMES)
def migrated(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """A scratch copy of a version 1 fixture run, upgraded in place to version 2."""
    name: str = request.param
    shutil.copyfile(RUNS / f"{name}.db", tmp_path / f"{name}.db")
    return Store(tmp_path / f"{name}.db", create=False)


def test_migration_fills_the_identity_from_the_definitions(migrated: Store) -> None:
    with migrated as store:
        run = store.latest_run()
        assert run is not None
        for cell in store.cells(run.id):
            ident = cell.identity
            assert ident.platform_kind == cell.platform.get("kind", "qemu")
            assert ident.workload_kind == cell.workload.get("kind", "disk")
            scenario = cell.platform.get("scenario", {}).get("name")
            assert ident.scenario == scenario
            assert cell.platform_name == (ident.base_platform if scenario is None
                                          else f"{ident.base_platform}@{scenario}")
            if ident.workload_kind == "propagation":
                assert ident.method == cell.workload["method"]
                assert ident.image_size == cell.workload["image_size"]


@functools.cache
def fixture_report_html(name: str) -> tuple[RunReport, str]:
    """The report model of fixture run ``name`` (a scratch copy, migrated as it is
    opened) and the HTML :func:`render_html` makes of it: loaded and rendered once per
    session for the tests that read them (test_propagation_shares too)."""
    with tempfile.TemporaryDirectory(prefix="hvb-test-") as scratch:
        shutil.copyfile(RUNS / f"{name}.db", Path(scratch) / f"{name}.db")
        with Store(Path(scratch) / f"{name}.db", create=False) as store:
            run = store.latest_run()
            assert run is not None
            report = load_run_report(store, run.id)
    return report, render_html(html_input(report, None))


@pytest.mark.parametrize("name", NAMES)
def test_renderers_show_the_same_sections(name: str) -> None:
    report, html = fixture_report_html(name)
    titles = section_titles(report)
    terminal = [str(t.title) for t in terminal_tables(report)]
    doc = json.loads(report_json(report))
    phases = [f"{p['workload']} / {p['phase']}" for p in doc["phases"]]
    assert terminal[:len(titles["phases"])] == titles["phases"] == phases
    extra = terminal[len(titles["phases"]):]
    assert len(extra) == len(titles["extra"])
    fits = doc["propagation"]["fits"]
    if fits:
        assert extra[0].startswith("propagation: total time against image size")
        assert all(f["equation"] in html for f in doc["propagation"]["fits"])
    for title in titles["extra"][1 if fits else 0:]:
        assert title in extra
        # The Diagnosis is cards under one heading in HTML, not a titled table.
        assert (title.replace("&", "&amp;") in html if title != DIAGNOSIS_TITLE
                else html.count('<h2 id="diagnosis">Diagnosis</h2>') == 1)
    for workload in {p["workload"] for p in doc["phases"]}:
        assert f"Workload {workload}" in html
    scenarios = doc["scenarios"]
    assert bool(scenarios["degradation"]) == ("Degradation against alone" in extra)
    assert len(scenarios["weights"]) == sum("CPU weights" in t for t in extra)


def test_the_guest_kernel_line_names_the_declared_clocksource() -> None:
    from hvbench.report.model import guest_kernel
    assert guest_kernel({"vm": {"mitigations": True, "clocksource": "hpet"}}) == (
        "mitigations on (kernel default), clocksource hpet")
    assert "clocksource auto (tsc under TCG" in str(
        guest_kernel({"vm": {"mitigations": False, "clocksource": "auto"}}))
    # A run from before the setting: its guests booted with tsc=reliable.
    assert "clocksource tsc (tsc=reliable built in" in str(guest_kernel({"vm": {}}))
