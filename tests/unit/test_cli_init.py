"""`hvbench init`: the study it writes is the golden template, passes `run --dry-run`
for every profile and bus, and never overwrites without --force."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hvbench.cli.main import main
from hvbench.model.template import INIT_PROFILES

GOLDEN = Path(__file__).parents[1] / "fixtures" / "init-default.golden.toml"


def test_the_default_study_is_the_golden_one(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "study.toml"
    assert main(["init", str(path)]) == 0
    assert "wrote" in capsys.readouterr().out
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(path.read_text())
    assert path.read_text() == GOLDEN.read_text()


@pytest.mark.parametrize("profile", INIT_PROFILES)
def test_every_profile_makes_a_study_the_dry_run_accepts(
        profile: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / f"{profile}.toml"
    assert main(["init", str(path), "--profile", profile, "--bus", "virtio-blk",
                 "--bus", "ahci", "--cache", "writeback", "--repetitions", "2",
                 "--name", f"my-{profile}"]) == 0
    capsys.readouterr()
    assert main(["run", str(path), "--dry-run", "--db", str(tmp_path / "none.db")]) == 0
    out = capsys.readouterr().out
    assert f"study my-{profile}: 3 cells x 2 repetitions" in out
    assert f"guest.ahci/{profile}" in out


def test_init_never_overwrites_without_force_nor_writes_a_bad_study(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "study.toml"
    path.write_text("mine")
    assert main(["init", str(path)]) == 2
    assert "give --force" in capsys.readouterr().err
    assert path.read_text() == "mine"
    assert main(["init", str(path), "--force", "--memory-mib", "1"]) == 2
    assert "memory_mib" in capsys.readouterr().err
    assert path.read_text() == "mine"
    assert main(["init", str(path), "--force"]) == 0
    assert path.read_text() != "mine"
