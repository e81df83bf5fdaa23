"""``hvbench compare`` on a real run: a 20 % disk slowdown injected with QEMU's
``throttling.bps-total`` is significant, an A/A comparison is not.

Why both guests are throttled. Under TCG an unthrottled guest's throughput is set by
how much CPU emulation gets, which on a shared 2-core host varies by 10-25 % between
repetitions (measured while writing this test: unthrottled 122 MB/s, CoV 20 %, against
a guest capped at 80 %: p = 0.0105 with 7 repetitions, not decisive at alpha = 0.01, and
the run took more than 3 minutes). So the baseline guest is capped at 40 MB (41.9 MB/s),
a third of what a TCG guest reads even on a loaded host, and the slowed-down one at
32 MB (80 % of it): the difference is exactly the injected 20 %. Two platforms of one
run are compared by a paired t-test of their back-to-back repetitions (at least 3 pairs);
a throttle's difference is steady: in runs of this test the capped guest read
41.90-41.93 MB/s and the slowed one 33.51-33.55 MB/s in every repetition. But a host
stall longer than the throttle's burst allowance (QEMU's bucket holds a tenth of a
second at the rate) costs a repetition throughput it cannot catch up, and 3 pairs (2
degrees of freedom: p < 0.01 needs |t| > 9.92) fail on one such repetition: CI's run of
3c3e8c4 did (not significant). 5 pairs (|t| > 4.60) still decide with one repetition's
difference cut to a third (8.4, 8.4, 8.4, 8.4, 2.5 MB/s: t = 6.1); each pair costs two
guest boots, and fio runs 1 s after its ramp to pay for part of that. fio's
``ramp_time`` leaves out the throttle's initial burst. The A/A pair is two identical
native platforms, whose values are noisy (page-cache reads of a sparse file): the test
that noise is not called significant.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hvbench.image.builder import GuestImage
from hvbench.model.study import parse_study
from hvbench.run.runner import run_study
from hvbench.store.database import Store
from tests.integration.conftest import hvbench

pytestmark = pytest.mark.integration
HVBENCH = str(Path(sys.executable).parent / "hvbench")
HOST_RAM = 24 << 30

JOB = """[global]
filename=${HVBENCH_TARGET}
direct=1
bs=64k
ioengine=psync
size=32M
time_based=1
ramp_time=500ms
runtime=1s
[read]
rw=read
"""

REPETITIONS = 5
STUDY = f"""
[study]
name = "compare-throttle"
repetitions = {REPETITIONS}
seed = 11

[[platform]]
kind = "native"
name = "host-a"

[[platform]]
kind = "native"
name = "host-b"

[[platform]]
kind = "qemu"
name = "capped"
machine = "pc"
memory_mib = 256
disk = {{ bus = "virtio-blk", cache = "none", size = "64M", bps_limit = "40M" }}

[[platform]]
kind = "qemu"
name = "slowed"
machine = "pc"
memory_mib = 256
disk = {{ bus = "virtio-blk", cache = "none", size = "64M", bps_limit = "32M" }}

[[workload]]
name = "read"
profile = "fio-job"
target = "device"
job_file = "read.fio"
"""


def _compare(db: Path, a: str, b: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return hvbench("compare", a, b, "--db", str(db), *extra)


def _read_row(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    rows = [c for c in doc["comparisons"] if c["phase"] == "read" and c["metric"] == "mb_s"]
    assert len(rows) == 1, doc
    return dict(rows[0])


def test_injected_slowdown_is_significant_and_a_a_is_not(
    image: GuestImage, tmp_path: Path
) -> None:
    (tmp_path / "read.fio").write_text(JOB)
    path = tmp_path / "compare.toml"
    path.write_text(STUDY)
    db = tmp_path / "c.db"
    store = Store(db)
    try:
        outcome = run_study(parse_study(STUDY, str(path), HOST_RAM), store)
        assert outcome.failures == 0, store.failures(outcome.run_id)
    finally:
        store.close()

    slowed = _read_row(_compare(db, ":capped", ":slowed", "--format", "json"))
    assert slowed["n_a"] == slowed["n_b"] == REPETITIONS
    assert slowed["verdict"] == "significant", slowed
    assert slowed["change"] == "worse"
    assert -25.0 < float(slowed["delta_pct"]) < -15.0, slowed  # type: ignore[arg-type]
    assert float(slowed["p_value"]) < 0.01  # type: ignore[arg-type]

    same = _read_row(_compare(db, ":host-a", ":host-b", "--format", "json"))
    assert same["n_a"] == same["n_b"] == REPETITIONS
    assert same["verdict"] != "too few repetitions", same  # decided, not skipped
    assert same["verdict"] != "significant", same

    # As a person reads it: the table names the verdict and the run's platforms.
    text = _compare(db, "capped", "slowed", "--run", outcome.run_id)
    assert text.returncode == 0, text.stderr
    assert "(worse)" in text.stdout and "1 significant" in text.stdout
    assert f"A: run {outcome.run_id} platform capped" in text.stdout
