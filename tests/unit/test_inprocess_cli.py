"""tests/integration/conftest.hvbench: the CLI run in the test's process lays its tables
out as a process of its own would, at the width the test asks for."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from rich.console import Console

import hvbench.cli.main as cli_main
from tests.integration.conftest import hvbench

RUN_DB = Path(__file__).parent.parent / "fixtures" / "runs" / "network.db"


def _widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_columns_wins_over_the_width_the_cli_was_imported_with(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # rich fixes a console's width when it is made if COLUMNS is set then: the CLI's
    # module-level console, made when pytest imported it under an exported COLUMNS.
    db = tmp_path / "r.db"
    shutil.copy(RUN_DB, db)
    monkeypatch.setenv("COLUMNS", "90")
    monkeypatch.setattr(cli_main, "out", Console(highlight=False))
    inherited = hvbench("report", "--db", str(db))
    assert inherited.returncode == 0, inherited.stderr
    assert _widest(inherited.stdout) <= 90
    wide = hvbench("report", "--db", str(db), columns=200)
    assert wide.returncode == 0, wide.stderr
    assert 90 < _widest(wide.stdout) <= 200
