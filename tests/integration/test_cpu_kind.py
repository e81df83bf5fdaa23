"""The cpu workload kind end to end: real stress-ng on the host and in a TCG guest,
through the runner into the store; its bogo ops/s are those of the stored YAML report,
and a method stress-ng refuses fails the cell with stress-ng's own words."""

from __future__ import annotations

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


def test_a_refused_method_fails_the_cell_with_stress_ngs_words(tmp_path: Path) -> None:
    study = parse_study(STUDY.format(guest="", extra='method = "nosuch"'),
                        str(tmp_path / "s.toml"), HOST_RAM)
    with Store(tmp_path / "r.db") as store:
        outcome = run_study(study, store)
        failures = store.failures(outcome.run_id)
    assert outcome.failures == 1
    assert "cpu-method must be one of" in (failures[0].error or "")
