"""A throttle outside QEMU's configuration: a real guest's QEMU put in a cgroup v1 blkio
write limit while it boots. The host configuration read at cell start must hold the
limit, and `hvbench explain` must name that cgroup file and value (never a `bps_limit`
that was not set). The planted throttle study's clean guest (16 MB of O_DIRECT 1 MB
writes, then reads, which the write limit leaves alone) and native."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hvbench.host import proctree
from hvbench.host.paths import work_dir
from hvbench.image.builder import GuestImage
from hvbench.model.study import parse_study, select_cells
from hvbench.report.diagnosis import explain_lines
from hvbench.report.model import load_run_report
from hvbench.run.runner import run_study
from hvbench.store.database import Store

pytestmark = pytest.mark.integration
BLKIO = Path("/sys/fs/cgroup/blkio")
LIMIT = 4 << 20
#: The planted throttle study's clean guest: the same guest, limited from outside QEMU.
THROTTLE = Path(__file__).resolve().parents[2] / "examples" / "diagnosis" / "throttle.toml"


def _whole_disk(path: Path) -> str:
    """MAJ:MIN of the whole disk under ``path`` (blkio throttles take no partition)."""
    dev = path.stat().st_dev
    node = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if (node / "partition").exists():
        return (node.resolve().parent / "dev").read_text().strip()
    return f"{os.major(dev)}:{os.minor(dev)}"


@pytest.fixture
def blkio_group() -> Iterator[Path]:
    """A blkio cgroup of this test's own with a write limit on the work directory's
    disk; removed afterwards (its processes have exited by then)."""
    if not (BLKIO / "blkio.throttle.write_bps_device").exists():
        pytest.skip("no cgroup v1 blkio throttle on this host")
    group = BLKIO / f"hvbench-test-{os.getpid()}"
    group.mkdir()
    try:
        work_dir().mkdir(parents=True, exist_ok=True)
        (group / "blkio.throttle.write_bps_device").write_text(
            f"{_whole_disk(work_dir())} {LIMIT}\n")
        yield group
    finally:
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def _move_qemu(group: Path, stop: threading.Event) -> None:
    """Put this test's QEMU in ``group`` as soon as it appears (it boots for seconds
    under TCG before the cell starts)."""
    while not stop.is_set():
        for proc in proctree.descendants(os.getpid()):
            if proc.comm.startswith("qemu-system"):
                (group / "cgroup.procs").write_text(f"{proc.pid}\n")
                return
        time.sleep(0.05)


def test_io_limit_names_the_cgroup_limit(image: GuestImage, blkio_group: Path,
                                         tmp_path: Path) -> None:
    study = select_cells(parse_study(THROTTLE.read_text(), str(THROTTLE), 24 << 30),
                         only=["native/*", "vm-clean/*"])
    stop = threading.Event()
    mover = threading.Thread(target=_move_qemu, args=(blkio_group, stop), daemon=True)
    mover.start()
    try:
        with Store(tmp_path / "r.db") as store:
            outcome = run_study(study, store)
            assert outcome.failures == 0, store.failures(outcome.run_id)
            report = load_run_report(store, outcome.run_id, monitors=[])
    finally:
        stop.set()
        mover.join(5)
    verdict = next(v for v in report.verdicts if v.cell == "vm-clean/seq/write")
    text = "\n".join(explain_lines(verdict))
    assert verdict.dominant is not None and verdict.dominant.rule == "io-limit", text
    assert str(blkio_group / "blkio.throttle.write_bps_device") in verdict.dominant.fix, text
    assert str(LIMIT) in " ".join(verdict.dominant.evidence), text
    assert "bps_limit" not in verdict.dominant.fix
