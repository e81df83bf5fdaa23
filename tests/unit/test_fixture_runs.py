"""Golden reports of real, reduced study runs (tests/fixtures/runs).

Each ``NAME.db`` there is a real run of ``NAME.toml`` stored at schema version 1; its
``NAME.report.*`` files are what ``hvbench report`` printed for it when the fixture was
made (``regenerate.sh`` documents the commands). Rendering a scratch copy of each
database must reproduce them byte for byte: a change of the store or the report code
that changes any output, or fails to read a version-1 database, fails here. The
committed databases are never opened in place.

The commands run in this process (:func:`hvbench`: ``hvbench.cli.main.main`` with the
console regenerate.sh gives a subprocess: 160 columns, not a terminal, no colour), and
each fixture's outputs are rendered once per session (:class:`Renders`) and shared by
the tests that read them: starting a Python per command cost about 2 s of imports each.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
NAMES = sorted(p.stem for p in RUNS.glob("*.db"))
#: The fixture whose reports are also rendered from PostgreSQL byte for byte (the
#: others compare the report model PostgreSQL yields with SQLite's): the scenario run
#: reads every table the store has (samples of every monitor, raw outputs, failures).
PG_BYTES_FIXTURE = "scenario"

#: (golden suffix, extra report arguments); the table's stderr is checked with it.
FORMATS = (("report.txt", ()), ("report.json", ("--format", "json")),
           ("report.csv", ("--format", "csv")))


@dataclass(frozen=True)
class Done:
    """What one in-process ``hvbench`` command returned and printed."""

    returncode: int
    stdout: bytes
    stderr: bytes


@contextlib.contextmanager
def _environment(extra: dict[str, str]) -> Iterator[None]:
    """regenerate.sh's environment: COLUMNS=160, no colour forcing or HVBENCH_DB (unless
    ``extra`` sets it); restored afterwards."""
    saved = dict(os.environ)
    for key in ("FORCE_COLOR", "NO_COLOR", "CLICOLOR_FORCE", "HVBENCH_DB"):
        os.environ.pop(key, None)
    os.environ.update({"COLUMNS": "160", **extra})
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def hvbench(cwd: Path, *args: str, env: dict[str, str] | None = None,
            width: int = 160) -> Done:
    """``hvbench ARGS`` as regenerate.sh runs it, in this process, from ``cwd`` (``env``:
    more variables; ``width``: the consoles' columns). stdout and stderr are captured
    as bytes: the consoles ``hvbench.cli.main`` prints with are replaced for the call,
    and ``sys.stdout`` too (documents are written to its buffer)."""
    from hvbench.cli import main as cli

    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out_text = io.TextIOWrapper(out_bytes, encoding="utf-8", newline="", write_through=True)
    err_text = io.TextIOWrapper(err_bytes, encoding="utf-8", newline="", write_through=True)
    saved = (cli.out, cli.err)
    with (_environment({"COLUMNS": str(width), **(env or {})}), contextlib.chdir(cwd),
          contextlib.redirect_stdout(out_text), contextlib.redirect_stderr(err_text)):
        cli.out = Console(file=out_text, width=width, highlight=False)
        cli.err = Console(file=err_text, width=width, highlight=False)
        try:
            code = cli.main(list(args))
        finally:
            cli.out, cli.err = saved
            out_text.flush()
            err_text.flush()
    return Done(code, out_bytes.getvalue(), err_bytes.getvalue())


def scratch_copy(name: str, directory: Path) -> str:
    """Copy NAME.db into ``directory``; its only run id."""
    shutil.copyfile(RUNS / f"{name}.db", directory / f"{name}.db")
    with contextlib.closing(sqlite3.connect(directory / f"{name}.db")) as db:
        runs = [r[0] for r in db.execute("SELECT id FROM runs")]
    assert len(runs) == 1, runs
    return str(runs[0])


@dataclass(frozen=True)
class Rendered:
    """Every output of one fixture's scratch copy, rendered once."""

    name: str
    run: str
    cwd: Path
    #: golden suffix -> (command's result); "report.html" holds the file written.
    reports: dict[str, Done]
    html: bytes | None
    explain_json: Done
    explain_table: Done
    #: Each bar chart and latency CDF the HTML report drew: (series -> colour, its SVG)
    #: (test_report_colours reads them).
    figures: tuple[tuple[dict[str, str], str], ...] = ()


# The session fixture ``rendered`` (tests/unit/conftest.py: one instance for every
# module that reads it) is a :class:`Renders`.


class Renders(dict[str, Rendered]):
    """A dict that renders a fixture on its first lookup."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        super().__init__()
        self._factory = factory

    def __missing__(self, name: str) -> Rendered:
        cwd = self._factory.mktemp(name)
        run = scratch_copy(name, cwd)
        db = f"{name}.db"
        reports = render_reports(cwd, run, db)
        html = None
        figures: list[tuple[dict[str, str], str]] = []
        if (RUNS / f"{name}.report.html").exists():
            with watched_figures(figures):
                done = hvbench(cwd, "report", run, "--db", db, "--format", "html",
                               "-o", str(cwd / "out.html"))
            assert done.returncode == 0, done.stderr
            html = (cwd / "out.html").read_bytes()
        value = Rendered(name, run, cwd, reports, html,
                         hvbench(cwd, "explain", run, "--db", db, "--format", "json"),
                         hvbench(cwd, "explain", run, "--db", db, "--verbose"),
                         tuple(figures))
        self[name] = value
        return value


@contextlib.contextmanager
def watched_figures(seen: list[tuple[dict[str, str], str]]) -> Iterator[None]:
    """The HTML report's bar charts and latency CDFs are drawn as always, each also
    appended to ``seen`` as (series -> the colour it was given, the SVG drawn)."""
    from hvbench.report import html as html_module
    from hvbench.report.plots import BarChart, LatencyCurve, series_colors

    real_bars = html_module.grouped_bars  # type: ignore[attr-defined]
    real_cdf = html_module.latency_cdf  # type: ignore[attr-defined]

    def bars(chart: BarChart) -> str:
        svg: str = real_bars(chart)
        seen.append((dict(zip(chart.series, series_colors(chart.series, chart.colors),
                              strict=True)), svg))
        return svg

    def cdf(title: str, curves: Sequence[LatencyCurve], *args: Any) -> str:
        svg: str = real_cdf(title, curves, *args)
        given = {c.label: c.color for c in curves if c.color}
        labels = [c.label for c in curves]
        seen.append((dict(zip(labels, series_colors(labels, given), strict=True)), svg))
        return svg

    html_module.grouped_bars = bars  # type: ignore[attr-defined]
    html_module.latency_cdf = cdf  # type: ignore[attr-defined,assignment]
    try:
        yield
    finally:
        html_module.grouped_bars = real_bars  # type: ignore[attr-defined]
        html_module.latency_cdf = real_cdf  # type: ignore[attr-defined]


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


def assert_reports_match(name: str, reports: dict[str, Done]) -> None:
    """The table (with its stderr), JSON and CSV reports are the goldens of fixture
    ``name``."""
    for suffix, _ in FORMATS:
        done = reports[suffix]
        out = without_added_keys(done.stdout) if suffix == "report.json" else done.stdout
        assert out == (RUNS / f"{name}.{suffix}").read_bytes(), f"{name}.{suffix}"
        if suffix == "report.txt":
            assert done.stderr == (RUNS / f"{name}.report.stderr.txt").read_bytes()


def render_reports(cwd: Path, run: str, db: str) -> dict[str, Done]:
    """The table, JSON and CSV reports of ``run`` in ``db``."""
    return {suffix: hvbench(cwd, "report", run, "--db", db, *extra)
            for suffix, extra in FORMATS}


@pytest.mark.parametrize("name", NAMES)
def test_reports_match_goldens(name: str, rendered: dict[str, Rendered]) -> None:
    got = rendered[name]
    assert_reports_match(name, got.reports)
    html = RUNS / f"{name}.report.html"
    if html.exists():
        assert got.html == html.read_bytes(), html.name


#: Shipped examples whose run is explained elsewhere than in these fixtures: the test
#: that runs each for real and explains its run (its name, found by pytest's collection
#: in tests/integration, not by a word search).
EXPLAINED_BY_INTEGRATION_TESTS = {
    "libvirt.toml": "tests/integration/test_libvirt.py::"
                    "test_the_libvirt_example_runs_and_is_explained",
    "hyperconverged.toml": "tests/integration/test_scenarios.py::"
                           "test_the_hyperconverged_example_runs_and_is_explained",
    "io-paths.toml": "tests/integration/test_io_paths.py::"
                     "test_the_io_paths_example_runs_and_is_explained",
    "tune-disk.toml": "tests/integration/test_tune.py::"
                      "test_the_tune_examples_search_and_are_explained",
    "tune-net.toml": "tests/integration/test_tune.py::"
                     "test_the_tune_examples_search_and_are_explained",
}
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_every_shipped_example_has_an_explained_run() -> None:
    """Each examples/*.toml is reduced by a fixture here (its header names it) or run
    and explained by a named integration test that exists and names the example and
    ``hvbench explain`` in its own body (examples/diagnosis: the planted suite)."""
    import ast

    headers = "".join((RUNS / f"{n}.toml").read_text().split("\n[", 1)[0] for n in NAMES)
    for example in sorted(p.name for p in EXAMPLES.glob("*.toml")):
        if example not in EXPLAINED_BY_INTEGRATION_TESTS:
            assert f"examples/{example}" in headers, example
            continue
        path, test = EXPLAINED_BY_INTEGRATION_TESTS[example].split("::")
        source = (RUNS.parents[2] / path).read_text()
        (function,) = [node for node in ast.walk(ast.parse(source))
                       if isinstance(node, ast.FunctionDef) and node.name == test]
        body = ast.get_source_segment(source, function) or ""
        assert example.removesuffix(".toml") in body, (example, test)
        assert '"explain"' in body, (example, test)


@pytest.mark.parametrize("name", NAMES)
def test_explain_answers_for_every_cell(name: str, rendered: dict[str, Rendered]) -> None:
    """`hvbench explain` on each fixture run: a verdict for every cell of the report,
    the table and the JSON agreeing on the dominant causes."""
    got = rendered[name]
    report = json.loads(got.reports["report.json"].stdout)
    done = got.explain_json
    assert done.returncode == 0, done.stderr.decode()
    verdicts = json.loads(done.stdout)["verdicts"]
    assert [v["cell"] for v in verdicts] == [v["cell"] for v in report["diagnosis"]]
    assert verdicts, name
    table = got.explain_table
    assert table.returncode == 0, table.stderr.decode()
    text = table.stdout.decode()
    for verdict in verdicts:
        assert verdict["cell"] in text
        if verdict["dominant"] is not None:
            assert f"cause: {verdict['dominant']['rule']}" in text


def _everything_rendered(db: str, run: str) -> tuple[object, ...]:
    """Everything a report or explain reads from the store for ``run``: the report
    model with every monitor's samples, the latency distributions (HTML) and the fleet
    it belongs to."""
    from hvbench.report.model import latency_distributions, load_run_report
    from hvbench.store.database import Store

    with Store(db, create=False) as store:
        return (load_run_report(store, run, monitors=["*"]),
                latency_distributions(store, run), store.get_run(run).fleet_id)


@pytest.mark.parametrize("name", NAMES)
def test_reports_from_postgresql_match_goldens(
    name: str, rendered: dict[str, Rendered], postgres_url: str
) -> None:
    """``hvbench db copy`` of the (migrated) fixture into PostgreSQL: a second copy
    copies nothing, and what the reports read from there (the report model with every
    sample, the latency distributions, the fleet) equals what they read from SQLite,
    so the renderers print the goldens from either. For :data:`PG_BYTES_FIXTURE` the
    reports (the HTML too) are also rendered from PostgreSQL and compared byte for byte."""
    got = rendered[name]
    run, cwd, db = got.run, got.cwd, f"{name}.db"
    done = hvbench(cwd, "db", "copy", db, postgres_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith(f"{run}: ")
    again = hvbench(cwd, "db", "copy", db, postgres_url, run[:10])
    assert again.returncode == 0, again.stderr
    assert b" 0 repetitions copied" in again.stdout
    with contextlib.chdir(cwd):
        assert _everything_rendered(postgres_url, run) == _everything_rendered(db, run)
    if name != PG_BYTES_FIXTURE:
        return
    assert_reports_match(name, render_reports(cwd, run, postgres_url))
    html = RUNS / f"{name}.report.html"
    done = hvbench(cwd, "report", run, "--format", "html", "-o", str(cwd / "pg.html"),
                   env={"HVBENCH_DB": postgres_url})
    assert done.returncode == 0, done.stderr
    assert (cwd / "pg.html").read_bytes() == html.read_bytes(), html.name
