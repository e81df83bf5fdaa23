"""The cpu workload kind without a process: its study entries (cells on the host and a
guest, the default name, refusals), stress-ng's argv and the reading of its YAML report
(a report as stress-ng 0.15 writes it; tests/integration/test_cpu_kind.py runs it)."""

from __future__ import annotations

import pytest

from hvbench.errors import HvbenchError, SpecError
from hvbench.kinds.cpu.driver import parse_report, report_argv, stress_argv, tool_error
from hvbench.kinds.cpu.spec import CpuWorkloadSpec
from hvbench.model.stored import load_workload
from hvbench.model.study import parse_study
from hvbench.run.cells.base import as_spec
from hvbench.run.cells.registry import cell_kind

HOST_RAM = 24 << 30
STUDY = """
[study]
name = "cpu"

[[platform]]
kind = "native"

[[platform]]
name = "vm"
memory_mib = 256

[[workload]]
kind = "cpu"
workers = [1, 2]
duration_s = 5
{extra}
"""
REPORT = """---
system-info:
      stress-ng-version: 0.15.06
      cpus: 2
metrics:
    - stressor: cpu
      bogo-ops: 3302
      bogo-ops-per-second-usr-sys-time: 1651.264202
      bogo-ops-per-second-real-time: 1649.217606
      wall-clock-time: 2.002162
      user-time: 1.995677
      system-time: 0.004003
      cpu-usage-per-instance: 99.876059
      max-rss: 6500
...
"""


def test_a_cpu_entry_forms_a_cell_per_platform_and_variant() -> None:
    study = parse_study(STUDY.format(extra=""), "cpu.toml", HOST_RAM)
    assert [c.name for c in study.cells] == ["native/cpu.1", "native/cpu.2", "vm/cpu.1",
                                             "vm/cpu.2"]
    spec = as_spec(study.cells[1].workload.spec, CpuWorkloadSpec)
    assert (spec.workers, spec.duration_s, spec.phase_list()) == (2, 5, ("cpu",))
    assert study.lab is None  # it needs no net lab
    kind = cell_kind(study.cells[0])
    assert kind.boots_platform and not kind.needs_lab
    assert kind.estimate_s(spec) > spec.duration_s


@pytest.mark.parametrize(("extra", "expected"), [
    ("timeout_s = 5", "timeout_s (5) must be longer than duration_s (5)"),
    ('method = "Pi; rm"', "method"),
    ("worker = 2", "worker"),
])
def test_bad_cpu_entries_name_the_field(extra: str, expected: str) -> None:
    with pytest.raises(SpecError, match=r"cpu\.toml") as info:
        parse_study(STUDY.format(extra=extra), "cpu.toml", HOST_RAM)
    assert expected in str(info.value)


def test_a_stored_cpu_definition_loads_back_typed() -> None:
    spec = CpuWorkloadSpec(workers=2, duration_s=3, method="pi")
    assert load_workload(spec.model_dump(mode="json"), "stored cpu") == spec


def test_argv_asks_for_metrics_and_passes_them_to_the_report_script() -> None:
    spec = CpuWorkloadSpec(workers=0, duration_s=3, method="matrixprod")
    argv = stress_argv(spec)
    assert argv == ["stress-ng", "--cpu", "0", "--timeout", "3s", "--metrics",
                    "--cpu-method", "matrixprod"]
    wrapped = report_argv(spec)
    assert wrapped[:2] == ["sh", "-c"] and wrapped[3:] == ["sh", *argv]


def test_the_report_gives_bogo_ops_per_second() -> None:
    metrics = parse_report(REPORT)
    assert metrics["bogo_ops_s"][0] == pytest.approx(1649.217606)
    assert metrics["bogo_ops_s"][1] == "ops/s"
    assert metrics["bogo_ops_s_cpu"][0] == pytest.approx(1651.264202)
    assert metrics["bogo_ops"] == (3302.0, "count")
    assert metrics["stress_cpu_pct"][0] == pytest.approx(99.876059)


@pytest.mark.parametrize(("text", "expected"), [
    ("metrics: [", "not YAML"),
    ("system-info:\n  cpus: 2\n", "no metrics for the cpu stressor"),
    ("metrics:\n  - stressor: cpu\n    bogo-ops: 1\n", "lack"),
])
def test_a_report_without_cpu_metrics_is_refused(text: str, expected: str) -> None:
    with pytest.raises(HvbenchError, match=expected):
        parse_report(text)


def test_tool_error_keeps_stress_ngs_refusal_and_drops_its_log() -> None:
    stderr = ("stress-ng: info:  [1] dispatching hogs: 1 cpu\n"
              "cpu-method must be one of: all ackermann\n"
              "stress-ng: metrc: [1] stressor bogo ops\n")
    assert tool_error(stderr) == "cpu-method must be one of: all ackermann"
