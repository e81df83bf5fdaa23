"""host_limits against the real kernel: one guest whose whole QEMU process hvbench puts
into a cgroup of its own after boot (a 4 MB/s read limit on the host device under its
image, and a CPU quota it never reaches), one short fio read cell beside native. The
run stores the cgroup (host-limits), the host configuration read at cell start sees the
limit on the QEMU process, explain names it with its file as the fix, and nothing of
the cgroup is left after the run.

Wall time here (TCG, 2 shared cores, pytest --durations): 10-11 s for the study (one
boot, a 16 MiB fill, a 2 s read phase at 4 MB/s, native beside it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hvbench.image.builder import GuestImage
from hvbench.model.study import parse_study
from hvbench.report.model import load_run_report
from hvbench.run.runner import HOST_LIMITS_KIND, run_study
from hvbench.store.database import Store

pytestmark = pytest.mark.integration

HOST_RAM = 24 << 30
JOB = Path(__file__).resolve().parents[2] / "examples/diagnosis/jobs/seqread-64k-qd4.fio"
#: 150 % of one CPU: a 1-vCPU guest reading at 4 MB/s stays far below it, so the read
#: limit alone is the cause; the quota proves the cpu hierarchy's half of the cgroup.
STUDY = f"""
[study]
name = "host-limits"
repetitions = 1
seed = 5

[[platform]]
kind = "native"

[[platform]]
kind = "qemu"
name = "vm"
machine = "pc"
memory_mib = 256
disk = {{ bus = "virtio-blk", cache = "none", allocation = "full", size = "48M" }}
host_limits = {{ read_bps = "4M", cpu_quota_pct = 150 }}

[[workload]]
name = "seq"
kind = "disk"
profile = "fio-job"
target = "device"
job_file = "{JOB}"
file_size = "16M"
"""


def test_the_cgroup_is_applied_seen_named_and_removed(image: GuestImage,
                                                      tmp_path: Path) -> None:
    path = tmp_path / "limits.toml"
    path.write_text(STUDY)
    with Store(tmp_path / "r.db") as store:
        outcome = run_study(parse_study(STUDY, str(path), HOST_RAM), store)
        assert outcome.failures == 0, store.failures(outcome.run_id)
        raws = store.raw_outputs(outcome.run_id)
        report = load_run_report(store, outcome.run_id, monitors=[])
    limits = [json.loads(r.content) for r in raws if r.kind == HOST_LIMITS_KIND]
    configs = [json.loads(r.content) for r in raws if r.kind == "host-config"]
    assert limits and configs
    applied = limits[0]
    assert applied["applied"] == "after boot"
    groups = {g["controller"]: g["path"] for g in applied["groups"]}
    assert set(groups) == {"blkio", "cpu"}
    # The host configuration read at cell start saw the QEMU process in the cgroup.
    config = configs[0]
    assert config["pid"] in applied["pids"]
    (read_limit,) = [lim for lim in config["io_limits"] if lim["kind"] == "read_bps"]
    assert read_limit["value"] == 4 << 20
    assert read_limit["path"] == f"{groups['blkio']}/blkio.throttle.read_bps_device"
    assert read_limit["device"] in applied["devices"]
    assert config["cpu"]["cpu.cfs_quota_us"]["value"] == "150000"
    # explain names the limit found, with the file that removes it.
    (verdict,) = [v for v in report.verdicts if v.cell == "vm/seq/seqread"]
    assert verdict.dominant is not None, verdict
    assert verdict.dominant.rule == "io-limit", verdict
    assert read_limit["path"] in verdict.dominant.fix
    # Nothing of the cgroup outlived the run (its owner record: the leak check).
    assert not any(Path(p).exists() for p in groups.values())
    assert list(Path("/sys/fs/cgroup").glob("*/hvbench-limits-*")) == []
