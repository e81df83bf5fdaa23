"""The cpu workload kind end to end: real stress-ng on the host and in a TCG guest,
through the runner into the store; its bogo ops/s are those of the stored YAML report,
and a method stress-ng refuses fails the cell with stress-ng's own words."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hvbench.image.builder import GuestImage
from hvbench.kinds.cpu.driver import RAW_KIND, parse_report
from hvbench.model.study import parse_study
from hvbench.run.runner import run_study
from hvbench.store.database import Store

pytestmark = pytest.mark.integration
HOST_RAM = 24 << 30
STUDY = """
[study]
name = "cpu"
repetitions = 1

[[platform]]
kind = "native"
{guest}
[[workload]]
kind = "cpu"
workers = 1
duration_s = 2
{extra}
"""
GUEST = """
[[platform]]
name = "vm"
memory_mib = 256
"""


def test_stress_ng_on_the_host_and_in_a_guest(image: GuestImage, tmp_path: Path) -> None:
    del image  # built once per session; the guest boots from it
    study = parse_study(STUDY.format(guest=GUEST, extra=""), str(tmp_path / "s.toml"),
                        HOST_RAM)
    with Store(tmp_path / "r.db") as store:
        outcome = run_study(study, store)
        failures = store.failures(outcome.run_id)
        assert outcome.failures == 0, "\n\n".join(f.error or "" for f in failures)
        rows = store.measurements(outcome.run_id)
        raws = {r.cell: r.content for r in store.raw_outputs(outcome.run_id, kind=RAW_KIND)}
    values = {(r.platform, r.metric): r.value for r in rows if r.phase == "cpu"}
    assert set(raws) == {"native/cpu", "vm/cpu"}
    for platform in ("native", "vm"):
        stored = parse_report(raws[f"{platform}/cpu"])
        assert values[(platform, "bogo_ops_s")] == pytest.approx(stored["bogo_ops_s"][0])
        # One worker for 2 s: its operations over about 2 s of wall time.
        assert values[(platform, "bogo_ops")] / values[(platform, "bogo_ops_s")] == \
            pytest.approx(2.0, rel=0.25)


def test_a_refused_method_fails_the_cell_with_stress_ngs_words(image: GuestImage,
                                                              tmp_path: Path) -> None:
    """On the host and in a guest with a NIC, whose failure also keeps what the running
    guest could tell then: its kernel warnings and its virtio-net queues as QEMU has
    them (read after the failure, beside the console tail)."""
    del image  # built once per session; the guest boots from it
    guest = GUEST + 'nic = { model = "virtio-net", backend = "user" }\n'
    study = parse_study(STUDY.format(guest=guest, extra='method = "nosuch"'),
                        str(tmp_path / "s.toml"), HOST_RAM)
    with Store(tmp_path / "r.db") as store:
        outcome = run_study(study, store)
        failures = {f.cell: f for f in store.failures(outcome.run_id)}
    assert outcome.failures == 2 and set(failures) == {"native/cpu", "vm/cpu"}
    for failure in failures.values():
        assert "cpu-method must be one of" in (failure.error or "")
    assert failures["native/cpu"].console_log is None
    log = failures["vm/cpu"].console_log or ""
    assert "[console.log]" in log and "[kernel warnings and errors" in log
    # The NIC's three queues (rx, tx, control), each with QEMU's indices.
    assert len(re.findall(r"virtio-backend queue \d: .*last-avail-idx=\d+", log)) == 3, log
    assert re.search(r"eth0:\s+\d+", log), log
