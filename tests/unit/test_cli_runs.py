"""`hvbench runs`: filters, limit and sort (pure selection and the table), and
`runs rm` (prefix, confirmation, --yes) on a real SQLite store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from hvbench.cli.main import main
from hvbench.cli.runs import removal_line, select_runs
from hvbench.store.database import Store
from hvbench.store.records import RunStatus, RunSummary


def _summary(run_id: str, study: str, status: RunStatus, failed: int = 0) -> RunSummary:
    return RunSummary(run_id, study, f"2026-11-{run_id[6:8]}T00:00:00+00:00", status, 2,
                      4, failed, "tcg")


RUNS = [_summary("20261120-000000-aaaa", "quick", "complete"),
        _summary("20261121-000000-bbbb", "disk-sweep", "interrupted", failed=3),
        _summary("20261122-000000-cccc", "quick", "interrupted", failed=1),
        _summary("20261123-000000-dddd", "quick-lab", "complete")]


def _ids(runs: list[RunSummary]) -> list[str]:
    return [r.id[-4:] for r in runs]


def test_filters_limit_and_sort_select_runs() -> None:
    assert _ids(select_runs(RUNS)) == ["aaaa", "bbbb", "cccc", "dddd"]
    assert _ids(select_runs(RUNS, study="quick*")) == ["aaaa", "cccc", "dddd"]
    assert _ids(select_runs(RUNS, statuses=["interrupted"])) == ["bbbb", "cccc"]
    assert _ids(select_runs(RUNS, study="quick", statuses=["interrupted"])) == ["cccc"]
    # --limit keeps the newest of those that match, whatever the sort.
    assert _ids(select_runs(RUNS, limit=2)) == ["cccc", "dddd"]
    assert _ids(select_runs(RUNS, limit=3, sort="failed")) == ["dddd", "cccc", "bbbb"]
    assert _ids(select_runs(RUNS, sort="study")) == ["bbbb", "aaaa", "cccc", "dddd"]


def _store(db: Path, *run_ids: str) -> None:
    with Store(db) as store:
        for run_id in run_ids:
            store.create_run(run_id=run_id, study_name="s", study_path="s.toml",
                             study_text="", seed=0, env={}, hvbench_version="0",
                             git_commit=None)
            store.record_order(run_id, 0, [])


def _left(db: Path) -> list[str]:
    with Store(db, create=False) as store:
        return store.run_ids()


def test_runs_lists_with_filters_and_refuses_a_bad_limit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    _store(db, "20261125-000000-abcd", "20261126-000000-0000")
    assert main(["runs", "--db", str(db), "--limit", "1"]) == 0
    out = capsys.readouterr().out
    assert "20261126-000000-0000" in out and "20261125-000000-abcd" not in out
    assert main(["runs", "--db", str(db), "--status", "complete"]) == 0
    assert "20261126" not in capsys.readouterr().out
    assert main(["runs", "--db", str(db), "--limit", "0"]) == 2
    assert "--limit: expected a positive number" in capsys.readouterr().err


def test_runs_rm_needs_yes_without_a_terminal_and_takes_a_prefix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    _store(db, "20261125-000000-abcd", "20261125-000000-abef", "20261126-000000-0000")
    # pytest's stdin is not a terminal: no prompt, nothing removed, exit 2.
    assert main(["runs", "--db", str(db), "rm", "20261126"]) == 2
    assert "give --yes" in capsys.readouterr().err
    assert len(_left(db)) == 3
    # An ambiguous prefix removes nothing.
    assert main(["runs", "rm", "20261125", "--yes", "--db", str(db)]) == 2
    assert len(_left(db)) == 3
    assert main(["runs", "rm", "20261126", "20261125-000000-abc", "--yes",
                 "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "removed 2 run(s)" in out
    assert _left(db) == ["20261125-000000-abef"]
    # What was stored with the removed runs went with them (foreign keys cascade).
    with sqlite3.connect(db) as conn:
        orders = [r[0] for r in conn.execute("SELECT run_id FROM run_order")]
    assert orders == ["20261125-000000-abef"]


def test_runs_rm_answered_no_removes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    _store(db, "20261126-000000-0000")
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    assert main(["runs", "rm", "2026", "--db", str(db)]) == 0
    assert "nothing removed" in capsys.readouterr().err
    assert _left(db) == ["20261126-000000-0000"]


def test_the_removal_line_names_what_goes() -> None:
    assert removal_line(RUNS[1]) == ("20261121-000000-bbbb  disk-sweep  interrupted  4 ok, "
                                     "3 failed repetitions  (created "
                                     "2026-11-21T00:00:00+00:00)")
