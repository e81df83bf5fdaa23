"""Owned scratch directories: recognisable after kill -9, even before the owner file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hvbench.host.paths import OWNER_FILE, make_owned_dir, remove_orphaned_dirs


def _dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    return int(child.stdout)


def test_live_owner_is_kept_dead_owner_removed_strangers_untouched(tmp_path: Path) -> None:
    mine = make_owned_dir(tmp_path, "native-")
    assert mine.name.endswith(f".hvb{os.getpid()}")
    dead = _dead_pid()
    orphan = tmp_path / f"hvbench-1-vm-abc.hvb{dead}"  # killed before its owner file
    orphan.mkdir()
    recorded = tmp_path / "lab-xyz"
    recorded.mkdir()
    (recorded / OWNER_FILE).write_text(str(dead))
    stranger = tmp_path / "somebody-elses"
    stranger.mkdir()
    assert sorted(remove_orphaned_dirs(tmp_path, dry_run=True)) == sorted([orphan, recorded])
    assert orphan.exists() and recorded.exists(), "a dry run removed something"
    assert sorted(remove_orphaned_dirs(tmp_path)) == sorted([orphan, recorded])
    assert mine.exists() and stranger.exists()
