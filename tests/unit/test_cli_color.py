"""NO_COLOR turns colours off (rich reads it; FORCE_COLOR stands for a terminal)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize(("no_color", "coloured"), [(None, True), ("1", False)])
def test_no_color_removes_the_colour_of_an_error(tmp_path: Path, no_color: str | None,
                                                 coloured: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["FORCE_COLOR"] = "1"
    if no_color is not None:
        env["NO_COLOR"] = no_color
    done = subprocess.run([sys.executable, "-m", "hvbench.cli.main", "report", "--db",
                           str(tmp_path / "none.db")], capture_output=True, text=True,
                          env=env, check=False, timeout=60)
    assert done.returncode != 0, done.stderr
    assert "no results database" in done.stderr
    assert ("\x1b[31m" in done.stderr) is coloured, repr(done.stderr)
