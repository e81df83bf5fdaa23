"""The lifecycle workload with real TCG guests: create, boot, shut down, idle."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from hvbench.errors import GuestBootError, GuestTimeoutError, ImageError
from hvbench.image.builder import GuestImage
from hvbench.kinds.lifecycle.driver import (
    LIFECYCLE_PHASES,
    RAW_KIND,
    RepositoryCache,
    remove_repository,
    run_lifecycle,
    write_repository,
)
from hvbench.kinds.lifecycle.spec import LifecycleWorkloadSpec
from hvbench.model.spec import VmSpec
from hvbench.model.study import parse_study
from hvbench.run.runner import run_study
from hvbench.store.database import Store
from hvbench.workloads.outcome import PhaseOutcome

pytestmark = pytest.mark.integration

#: The smallest system image that holds the guest's root filesystem (about 117 MiB).
SIZE = 128 << 20
VM = VmSpec(accel="tcg")


def values(outcome: PhaseOutcome) -> dict[str, float]:
    return {name: value for name, (value, _) in outcome.metrics.items()}


def check_life(outcomes: list[PhaseOutcome], spec: LifecycleWorkloadSpec,
               wall: float) -> dict[str, float]:
    """Every phase positive, the phases summing to about the run's wall time."""
    assert [o.phase for o in outcomes] == list(spec.phase_list())
    assert all(o.raw_kind == RAW_KIND for o in outcomes)
    phases = {o.phase: values(o)["duration_s"] for o in outcomes if o.phase != "idle"}
    assert all(d > 0 for d in phases.values()), phases
    doc = json.loads(outcomes[0].raw)
    assert doc["phases"] == pytest.approx(phases)
    # Phases and the two gaps tile the guest's life exactly; the gaps are small.
    assert sum(phases.values()) + sum(doc["gaps"].values()) == pytest.approx(doc["wall_s"])
    assert sum(doc["gaps"].values()) < 0.5, doc["gaps"]
    # The call also wrote the repository image (unless cached) and ran the idle phase.
    assert doc["wall_s"] <= wall
    assert doc["shutdown_boundary"] == "qmp-shutdown-event"
    kernel = values(outcomes[LIFECYCLE_PHASES.index("kernel")])
    # The kernel counted most of the kernel phase itself; the rest is firmware/loading.
    assert 0 < kernel["guest_uptime_s"] < kernel["duration_s"]
    assert doc["init_line"].startswith("hvbench-stage1:")
    return phases


@pytest.mark.parametrize(("create", "fmt"),
                         [("copy", "raw"), ("convert", "qcow2"), ("overlay", "qcow2")])
def test_lifecycle_phases(image: GuestImage, no_leaks: Path, create: str, fmt: str) -> None:
    spec = LifecycleWorkloadSpec.model_validate(
        {"image_size": SIZE, "image_format": fmt, "create": create, "timeout_s": 300})
    started = time.monotonic()
    outcomes = run(spec, image, no_leaks)
    phases = check_life(outcomes, spec, time.monotonic() - started)
    create_metrics = values(outcomes[0])
    if create == "overlay":
        assert create_metrics["size_bytes"] < 4 << 20
    else:
        assert create_metrics["size_bytes"] >= SIZE
        assert create_metrics["mb_s"] > 0
    doc = json.loads(outcomes[0].raw)
    assert doc["created"]["format"] == fmt
    assert doc["guest"]["qemu_argv"]
    print(f"{create}/{fmt}: " + ", ".join(f"{p} {d:.3f} s" for p, d in phases.items()))


def run(spec: LifecycleWorkloadSpec, image: GuestImage, scratch: Path,
        cache: RepositoryCache | None = None) -> list[PhaseOutcome]:
    return run_lifecycle(spec, VM, name="qemu/lifecycle", scratch=scratch, image=image,
                         source_cache=cache)


#: Two lives through the runner: the second takes the run-wide repository image.
STUDY = f"""
[study]
name = "life"
repetitions = 2
seed = 3
[[platform]]
kind = "qemu"
name = "vm"
accel = "tcg"
[[workload]]
kind = "lifecycle"
image_size = {SIZE}
timeout_s = 300
"""


def test_repetitions_reuse_the_repository_image(image: GuestImage, no_leaks: Path,
                                                tmp_path: Path) -> None:
    """Through the runner: the lifecycle kind's run-wide state (its repository images)
    serves the second repetition the first one's image, and is removed at the run's
    end."""
    del image  # built (and found by the runner) before the run
    study = parse_study(STUDY, "life.toml", 24 << 30)
    with Store(tmp_path / "r.db") as store:
        outcome = run_study(study, store)
        failures = store.failures(outcome.run_id)
        assert outcome.failures == 0, "\n\n".join(f.error or "" for f in failures)
        raws = sorted(store.raw_outputs(outcome.run_id), key=lambda r: r.repetition)
    first, second = (json.loads(r.content)["repository"] for r in raws)
    assert (first["cached"], second["cached"]) == (False, True)
    assert first["sha256"] == second["sha256"] and first["path"] == second["path"]
    assert not Path(first["path"]).exists()
    assert list(no_leaks.iterdir()) == []


def test_idle_guests_use_cpu(image: GuestImage, no_leaks: Path) -> None:
    spec = LifecycleWorkloadSpec(image_size=SIZE, idle_guests=2, idle_s=3, timeout_s=300)
    started = time.monotonic()
    outcomes = run(spec, image, no_leaks)
    check_life(outcomes, spec, time.monotonic() - started)
    idle = outcomes[-1]
    assert idle.phase == "idle"
    metrics = values(idle)
    assert metrics["guests"] == 2
    assert metrics["qemu_run_pct"] > 0
    # Two sources that must agree: the guests' QEMU threads (/proc/PID/task, % of one
    # CPU) run on the host's cores (/proc/stat, % of all of them), so they cannot exceed
    # the host's busy time (10 % and 5 points of sampling slack); their vCPU threads are
    # a part of them. (Idle guests' QEMU can read 0 %: utime+stime count 10 ms ticks,
    # which 3 s of an idle guest may not fill, while run_pct above counts nanoseconds.)
    host_cpus = metrics["host_cpus"]
    assert host_cpus == os.cpu_count()
    assert metrics["qemu_cpu_pct"] <= 1.1 * metrics["host_busy_pct"] * host_cpus + 5
    # /proc/stat counts ticks too: a host whose work all runs between ticks (the idle
    # guests' and the sampler's timer wake-ups) can read 0 % busy (seen once in CI), so
    # the check is that the host's shares were measured and add up to the ticks counted.
    host = json.loads(idle.raw)["idle"]["summary"]
    assert host["host.cpu.busy_pct"] + host["host.cpu.idle_pct"] + \
        host["host.cpu.iowait_pct"] == pytest.approx(100.0)
    assert metrics["host_busy_pct"] == host["host.cpu.busy_pct"] <= 100
    assert metrics["qemu_vcpu_pct"] <= metrics["qemu_cpu_pct"] + 1e-9
    assert metrics["qemu_cpu_pct_per_guest"] == pytest.approx(metrics["qemu_cpu_pct"] / 2)
    assert metrics["window_s"] == pytest.approx(3.0, abs=0.5)
    assert len(idle.series) >= 2
    assert {"host_busy_pct", "qemu_cpu_pct", "qemu_run_pct"} <= set(idle.series[0][1])
    doc = json.loads(idle.raw)
    assert len(doc["idle"]["guests"]) == 2
    print(f"idle: {metrics}")


def test_boot_running_out_of_time_leaves_nothing(image: GuestImage, no_leaks: Path) -> None:
    cache: RepositoryCache = {}
    try:
        repo_dir = no_leaks / "repo"
        repo_dir.mkdir()
        cache[(SIZE, "raw")] = write_repository(image=image, size=SIZE, fmt="raw",
                                                directory=repo_dir)
        # Creating the copy takes a fraction of a second; booting takes seconds.
        spec = LifecycleWorkloadSpec(image_size=SIZE, timeout_s=1.5)
        with pytest.raises((GuestBootError, GuestTimeoutError)) as info:
            run(spec, image, no_leaks, cache)
        if isinstance(info.value, GuestBootError):
            assert "QEMU argv" in str(info.value)
        assert sorted(p.name for p in no_leaks.iterdir()) == ["repo"]
    finally:
        remove_repository(cache)


def test_image_smaller_than_the_root_filesystem_is_refused(image: GuestImage,
                                                           no_leaks: Path) -> None:
    spec = LifecycleWorkloadSpec(image_size=64 << 20)
    with pytest.raises(ImageError, match="cannot hold the guest's root filesystem"):
        run(spec, image, no_leaks)
