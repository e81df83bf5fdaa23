"""fio job files as users have them run unmodified, natively and in a TCG guest, through
profile = "fio-job" with small file_size/runtime overrides: the job files in
tests/fixtures/fio-jobs, and fio's own examples when the Debian package fio-examples
installed them."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from hvbench.image.builder import GuestImage
from hvbench.kinds.disk import driver as disk
from hvbench.kinds.disk.spec import DiskWorkloadSpec
from hvbench.model.study import parse_study
from hvbench.run.runner import run_study
from hvbench.store.database import Store

pytestmark = pytest.mark.integration
HOST_RAM = 24 << 30
FIXTURES = Path(__file__).parents[1] / "fixtures" / "fio-jobs"
FIO_EXAMPLES = Path("/usr/share/doc/fio/examples")
STOCK = ("ssd-test.fio", "tiobench-example.fio", "fio-rand-read.fio", "latency-profile.fio")
#: (job file, target, file_size): small sizes so each job file takes a few seconds.
#: Every job runs for the workload's runtime (WORKLOAD below): half a second still moves
#: hundreds of blocks at least on either platform, and the test checks that each job ran
#: and was measured (a rate above 0), not the rates themselves.
OURS = (("flash-check.fio", "file", "16M"), ("threads-like.fio", "file", "8M"),
        ("randread-dev.fio", "device", "32M"), ("latency-target.fio", "file", "16M"),
        ("with-include.fio", "file", None))

STUDY = """
[study]
name = "fio-job-files"
repetitions = 1

[[platform]]
kind = "native"

[[platform]]
kind = "qemu"
name = "vm"
memory_mib = 256
disk = {{ bus = "virtio-blk", cache = "none", size = "512M" }}
{workloads}
"""

WORKLOAD = """
[[workload]]
name = "{name}"
profile = "fio-job"
job_file = "{job}"
target = "{target}"
runtime = "500ms"
{size}"""


def _workloads(jobs: Sequence[tuple[str, str, str | None]]) -> str:
    return "".join(WORKLOAD.format(
        name=Path(job).stem, job=job, target=target,
        size=f'file_size = "{size}"\n' if size else "") for job, target, size in jobs)


def _run(tmp_path: Path, sources: dict[str, Path],
         jobs: Sequence[tuple[str, str, str | None]]) -> dict[tuple[str, str, str, str], float]:
    for name, source in sources.items():
        shutil.copy(source, tmp_path / name)
    path = tmp_path / "jobs.toml"
    path.write_text(STUDY.format(workloads=_workloads(jobs)))
    study = parse_study(path.read_text(), str(path), HOST_RAM)
    for cell in study.cells:   # as the runner will at load time: before any guest boots
        spec = cell.workload.spec
        assert isinstance(spec, DiskWorkloadSpec)
        changes = disk.check_job_file(spec, str(path), cell.platform.spec)
        print(f"\n{cell.name}: " + "; ".join(changes))
    store = Store(tmp_path / "r.db")
    try:
        outcome = run_study(study, store)
        assert outcome.failures == 0, store.failures(outcome.run_id)
        rows = store.measurements(outcome.run_id)
    finally:
        store.close()
    values = {(r.platform, r.workload, r.phase, r.metric): r.value for r in rows}
    for key, value in sorted(values.items()):
        if key[3] in ("mb_s", "iops"):
            print(f"{key[0]:7} {key[1]:20} {key[2]:12} {key[3]:5} {value:10.1f}")
    return values


def test_our_job_files(image: GuestImage, tmp_path: Path) -> None:
    sources = {job: FIXTURES / job for job, _, _ in OURS}
    sources["common.fio"] = FIXTURES / "common.fio"
    values = _run(tmp_path, sources, OURS)
    expected = {"flash-check": ("seqread", "randread", "seqwrite", "randwrite"),
                "threads-like": ("wr", "rr"), "randread-dev": ("dev",),
                "latency-target": ("probe",), "with-include": ("mixed",)}
    for platform in ("native", "vm"):
        for workload, phases in expected.items():
            for phase in phases:
                assert values[(platform, workload, phase, "mb_s")] > 0, (platform, phase)


@pytest.mark.skipif(not all((FIO_EXAMPLES / f).is_file() for f in STOCK),
                    reason="fio's own examples are not installed (Debian: fio-examples)")
def test_fios_own_examples_unmodified(image: GuestImage, tmp_path: Path) -> None:
    jobs = [("ssd-test.fio", "file", "16M"), ("tiobench-example.fio", "file", "8M"),
            ("fio-rand-read.fio", "file", "16M"), ("latency-profile.fio", "device", "32M")]
    values = _run(tmp_path, {job: FIO_EXAMPLES / job for job in STOCK}, jobs)
    expected = {"ssd-test": ("seq-read", "rand-read", "seq-write", "rand-write"),
                "tiobench-example": ("f1", "f2", "f3", "f4"),
                "fio-rand-read": ("file1",), "latency-profile": ("device",)}
    for platform in ("native", "vm"):
        for workload, phases in expected.items():
            for phase in phases:
                assert values[(platform, workload, phase, "mb_s")] > 0, (platform, phase)
