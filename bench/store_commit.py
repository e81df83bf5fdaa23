"""Store benchmark: time to commit one repetition with 10 Hz samples of a 60 s phase,
SQLite file against the private PostgreSQL server (both durable: SQLite WAL with
synchronous=FULL, PostgreSQL with fsync on; both on this machine's disk).

Usage: python bench/store_commit.py [--rounds 20] [--seconds 60] [--hz 10]
                                    [--monitors 3] [--json]

One repetition = ``--monitors`` series of ``seconds x hz`` samples (each a dict of 6
values, as the CPU, disk and NIC samplers store), 12 measurements and a 20 kB raw output,
recorded with ``Store.record_repetition`` (one transaction). Each round records a new
(cell, repetition); the script prints every engine's median, min and max in ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from hvbench.kinds import install
from hvbench.store.database import Store
from hvbench.store.pgserver import PostgresServer
from hvbench.store.records import CellRecord, MeasurementRecord, RawRecord, SampleRecord


def repetition(seconds: int, hz: int, monitors: int) -> dict[str, list[object]]:
    samples = [SampleRecord("seq-write", f"monitor{m}", i / hz,
                            {k: float(i * 7 + j) for j, k in enumerate(
                                ("usr", "sys", "iowait", "read_mb", "write_mb", "util"))})
               for m in range(monitors) for i in range(seconds * hz)]
    measurements = [MeasurementRecord("seq-write", f"metric{i}", 100.0 + i, "MB/s")
                    for i in range(12)]
    raw = [RawRecord("seq-write", "fio-json", "x" * 20_000)]
    return {"samples": list(samples), "measurements": list(measurements), "raw": list(raw)}


def time_commits(target: str | Path, rounds: int, payload: dict[str, list[object]]
                 ) -> list[float]:
    with Store(target) as store:
        rid = store.create_run(run_id=None, study_name="bench", study_path="-",
                               study_text="", seed=0, env={}, hvbench_version="bench",
                               git_commit=None)
        cells = store.add_cells(rid, [CellRecord("c", "p", {}, "w", {})])
        took = []
        for rep in range(rounds):
            start = time.perf_counter()
            store.record_repetition(
                run_id=rid, cell_id=cells["c"], repetition=rep, position=0, status="ok",
                started_at="t0", finished_at="t1",
                samples=payload["samples"],  # type: ignore[arg-type]
                measurements=payload["measurements"],  # type: ignore[arg-type]
                raw=payload["raw"])  # type: ignore[arg-type]
            took.append((time.perf_counter() - start) * 1000)
    return took


def summary(values: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(values), "min_ms": min(values),
            "max_ms": max(values)}


def main() -> None:
    # The store asks each cell's workload kind for its identity facts.
    install()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--hz", type=int, default=10)
    parser.add_argument("--monitors", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    payload = repetition(args.seconds, args.hz, args.monitors)
    results: dict[str, object] = {"samples_per_repetition": len(payload["samples"])}
    with tempfile.TemporaryDirectory(prefix="hvbench-storebench-", dir="/var/tmp") as tmp:
        results["sqlite"] = summary(time_commits(Path(tmp) / "b.db", args.rounds, payload))
    with PostgresServer(durable=True) as server:
        results["postgresql"] = summary(time_commits(server.create_database("bench"),
                                                     args.rounds, payload))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"one repetition = {results['samples_per_repetition']} samples "
          f"({args.monitors} monitors x {args.seconds} s x {args.hz} Hz), 12 measurements, "
          f"20 kB raw; {args.rounds} rounds")
    for engine in ("sqlite", "postgresql"):
        s = results[engine]
        assert isinstance(s, dict)
        print(f"{engine:>10}: median {s['median_ms']:.1f} ms (min {s['min_ms']:.1f}, "
              f"max {s['max_ms']:.1f})")


if __name__ == "__main__":
    main()
