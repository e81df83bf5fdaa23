"""Fleet benchmark: N hvbench workers on this machine (default 16), each its own work
directory and run lock, over TLS (``hvbench fleet init`` certificates, Dask's own
scheduler on 127.0.0.1), run a native-only micro study; one worker is killed with
SIGKILL once it delivered a repetition, the fleet run ends with that host interrupted,
the worker is started again and ``--resume`` completes the fleet.

Usage: python bench/fleet_scale.py [--workers 16] [--repetitions 3] [--json]

Prints the wall time of the fleet (first attempt, resume) against the same study on one
host without a fleet, and the coordinator's cost per cell: the CPU time (user + system)
of the coordinator processes (``hvbench run --scheduler``, both attempts, Python start
and imports included) divided by the repetitions they committed, and the same without
the coordinator's fixed start cost (the CPU of ``hvbench run --help``-sized start: a
coordinator that fails at once, measured here). Everything it starts is stopped and its
directory removed at the end, also on error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hvbench.run.fleet import hvbench_workers
from hvbench.run.fleet_tls import init_fleet, security
from hvbench.store.database import Store

STUDY = """
[study]
name = "fleet-scale"
repetitions = {repetitions}
seed = 1

[[platform]]
kind = "native"

[[workload]]
name = "dd"
kind = "disk"
profile = "dd"
target = "device"
file_size = "4M"
direct = true
"""
HVBENCH = [sys.executable, "-m", "hvbench.cli.main"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HVBENCH_DB"}
    env.update(extra)
    return env


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _timed(argv: list[str], env: dict[str, str]) -> tuple[int, float, float, str]:
    """Run ``argv``: (exit code, wall s, CPU s of the process and its children, stderr
    tail)."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as err:
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = err.read().decode(errors="replace")[-600:]
    return (process.returncode, time.monotonic() - started, usage.ru_utime + usage.ru_stime,
            tail)


class Bench:
    """The scheduler and workers of one measurement, under ``root``."""

    def __init__(self, root: Path, workers: int) -> None:
        self.root = root
        self.names = [f"w{i:02d}" for i in range(1, workers + 1)]
        self.certs = root / "certs"
        self.scheduler: subprocess.Popen[bytes] | None = None
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.address = ""

    def start(self) -> None:
        init_fleet(self.certs, self.names)
        info, tmp, bundle = self.root / "scheduler.json", self.root / "sched-tmp", \
            self.certs / "scheduler"
        tmp.mkdir()
        self.scheduler = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host",
             "tls://127.0.0.1", "--port", "0", "--no-dashboard",
             "--tls-ca-file", str(bundle / "ca.pem"), "--tls-cert", str(bundle / "cert.pem"),
             "--tls-key", str(bundle / "key.pem"), "--scheduler-file", str(info)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(TMPDIR=str(tmp)))
        deadline = time.monotonic() + 60
        while not info.exists():
            if time.monotonic() > deadline or self.scheduler.poll() is not None:
                raise RuntimeError("the Dask scheduler did not start")
            time.sleep(0.1)
        self.address = json.loads(info.read_text())["address"]
        for name in self.names:
            self.start_worker(name)
        self.wait_for(set(self.names))

    def start_worker(self, name: str) -> None:
        self.workers[name] = subprocess.Popen(
            [*HVBENCH, "worker", "--scheduler", self.address, "--certs",
             str(self.certs / name), "--name", name, "--workdir",
             str(self.root / f"work-{name}")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())

    def wait_for(self, names: set[str], timeout: float = 300) -> None:
        from distributed import Client  # noqa: PLC0415 - slow import, after argparse

        deadline = time.monotonic() + timeout
        with Client(self.address, timeout=60,
                    security=security(self.certs / "coordinator")) as client:
            while not names <= set(hvbench_workers(client)):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"workers {sorted(names)} did not all register")
                time.sleep(0.5)

    def coordinator(self, *args: str) -> list[str]:
        return [*HVBENCH, "run", *args, "--scheduler", self.address, "--certs",
                str(self.certs / "coordinator"), "--db", str(self.root / "fleet.db")]

    def stop(self) -> None:
        for process in self.workers.values():
            _stop(process)
        if self.scheduler is not None:
            _stop(self.scheduler)


def _delivered(db: Path, host: str) -> int:
    with contextlib.suppress(Exception), Store(str(db), create=False) as store:
        return sum(len(store.done(r)) for r in store.run_ids()
                   if store.get_run(r).host == host)
    return 0


def _first_attempt(bench: Bench, study: Path, victim: str) -> dict[str, Any]:
    """The fleet run, ``victim``'s worker killed with SIGKILL once it delivered a
    repetition; the coordinator's CPU from its own rusage (not the workers')."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as err:
        coordinator = subprocess.Popen(bench.coordinator(str(study)),
                                       stdout=subprocess.DEVNULL, stderr=err,
                                       env=_env(COLUMNS="200"))
        while _delivered(bench.root / "fleet.db", victim) < 1:
            pid, status, usage = os.wait4(coordinator.pid, os.WNOHANG)
            if pid:
                coordinator.returncode = os.waitstatus_to_exitcode(status)
                err.seek(0)
                raise RuntimeError(
                    f"the fleet ended (exit {coordinator.returncode}) before {victim} "
                    f"delivered anything: {err.read().decode(errors='replace')[-1500:]}")
            time.sleep(0.2)
        killed_at = time.monotonic() - started
        bench.workers[victim].send_signal(signal.SIGKILL)
        bench.workers[victim].wait()
        _, status, usage = os.wait4(coordinator.pid, 0)
        coordinator.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = err.read().decode(errors="replace")[-600:]
    with Store(str(bench.root / "fleet.db"), create=False) as store:
        fleet = str(store.get_run(store.run_ids()[0]).fleet_id)
    return {"exit": coordinator.returncode, "wall_s": time.monotonic() - started,
            "cpu_s": usage.ru_utime + usage.ru_stime, "killed_after_s": killed_at,
            "fleet": fleet, "stderr_tail": tail}


def _summary(db: Path) -> tuple[int, int, dict[str, str]]:
    with Store(str(db), create=False) as store:
        runs = store.run_ids()
        return (sum(len(store.done(r)) for r in runs),
                sum(len(store.failures(r)) for r in runs),
                {str(store.get_run(r).host): store.get_run(r).status for r in runs})


def measure(root: Path, workers: int, repetitions: int) -> dict[str, Any]:
    study = root / "scale.toml"
    study.write_text(STUDY.format(repetitions=repetitions))
    one_code, one_wall, one_cpu, one_err = _timed(
        [*HVBENCH, "run", str(study), "--db", str(root / "one.db")],
        _env(HVBENCH_WORKDIR=str(root / "work-one")))
    if one_code != 0:
        raise RuntimeError(f"the one-host run failed: {one_err}")
    # the coordinator's fixed cost: Python, hvbench and Dask imports, a refused argument
    _, _, start_cpu, _ = _timed([*HVBENCH, "run", str(study), "--scheduler",
                                 "tcp://10.0.0.1:1"], _env())
    bench = Bench(root, workers)
    try:
        t0 = time.monotonic()
        bench.start()
        startup = time.monotonic() - t0
        victim = bench.names[-1]
        first = _first_attempt(bench, study, victim)
        committed_first = _summary(root / "fleet.db")[0]
        bench.start_worker(victim)
        bench.wait_for({victim})
        code, wall, cpu, err = _timed(bench.coordinator("--resume", first["fleet"]),
                                      _env(COLUMNS="200"))
        done, failed, statuses = _summary(root / "fleet.db")
    finally:
        bench.stop()
    committed = done + failed  # every repetition the coordinator committed, ok or not
    return {
        "workers": workers, "repetitions": repetitions, "cells_per_host": repetitions,
        "startup_s": startup, "one_host_wall_s": one_wall, "one_host_cpu_s": one_cpu,
        "first_attempt": {**first, "committed_ok": committed_first},
        "resume": {"exit": code, "wall_s": wall, "cpu_s": cpu, "stderr_tail": err[-300:]},
        "fleet_wall_s": first["wall_s"] + wall,
        "ok": done, "failed_kept": failed, "statuses": statuses,
        "coordinator_cpu_s": first["cpu_s"] + cpu, "coordinator_start_cpu_s": start_cpu,
        "coordinator_cpu_ms_per_cell": 1000 * (first["cpu_s"] + cpu) / max(committed, 1),
        "coordinator_cpu_ms_per_cell_after_start":
            1000 * (first["cpu_s"] + cpu - 2 * start_cpu) / max(committed, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    parent = Path(os.environ.get("HVBENCH_WORKDIR", "/var/tmp/hvbench"))
    parent.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="hvbench-fleet-scale-", dir=parent))
    try:
        result = measure(root, args.workers, args.repetitions)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    first, resume = result["first_attempt"], result["resume"]
    print(f"{result['workers']} workers x {result['repetitions']} repetitions (native dd "
          f"4M), TLS; workers registered in {result['startup_s']:.1f} s")
    print(f"one host, no fleet: {result['one_host_wall_s']:.1f} s wall")
    print(f"fleet attempt 1: {first['wall_s']:.1f} s wall, exit {first['exit']}, "
          f"{first['committed_ok']} ok committed, w{result['workers']:02d} killed after "
          f"{first['killed_after_s']:.1f} s")
    print(f"fleet resume: {resume['wall_s']:.1f} s wall, exit {resume['exit']}")
    print(f"fleet total: {result['fleet_wall_s']:.1f} s wall; {result['ok']} ok, "
          f"{result['failed_kept']} failed rows kept; statuses "
          f"{sorted(set(result['statuses'].values()))}")
    print(f"coordinator CPU: {result['coordinator_cpu_s']:.1f} s = "
          f"{result['coordinator_cpu_ms_per_cell']:.0f} ms per committed cell "
          f"({result['coordinator_cpu_ms_per_cell_after_start']:.0f} ms after its start "
          f"cost of {result['coordinator_start_cpu_s']:.1f} s per invocation)")


if __name__ == "__main__":
    main()
