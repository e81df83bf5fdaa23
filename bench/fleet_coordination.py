"""Fleet benchmark: coordination cost per cell on this machine: a pinned task's round
trip through the Dask scheduler (submit to the host's worker, which sends one
repetition's results through the fleet queue) plus the coordinator's commit of that
repetition into a private PostgreSQL (fsync on).

Usage: python bench/fleet_coordination.py [--rounds 200] [--samples 0] [--json]

The repetition carries 12 measurements, a 2 kB raw output and ``--samples`` samples
(0: what coordination costs by itself; 600: a 60 s phase sampled at 10 Hz). The scheduler
and one worker (nthreads=1, the ``host`` resource) are a LocalCluster of separate
processes on loopback TCP. Prints the median, p90 and max in ms; target: median < 50 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from distributed import Client, LocalCluster, Queue

from hvbench.kinds import install
from hvbench.run.fleet import HOST_RESOURCE, HostRun, RepetitionResult, commit, hvbench_workers
from hvbench.store.database import Store
from hvbench.store.pgserver import PostgresServer
from hvbench.store.records import (
    CellRecord,
    MeasurementRecord,
    RawRecord,
    RepetitionRow,
    SampleRecord,
)


def send_one(queue_name: str, repetition: int, n_samples: int) -> int:
    """On the worker: one repetition's results into the fleet queue."""
    row = RepetitionRow("c", repetition, 0, "ok", None, None, None, "tcg", "t0", "t1")
    Queue(queue_name).put(RepetitionResult(
        "bench", row,
        tuple(MeasurementRecord("p", f"m{i}", float(i), "x") for i in range(12)),
        tuple(SampleRecord("p", "cpu", i / 10, {"usr": 1.0, "sys": 2.0})
              for i in range(n_samples)),
        (RawRecord("p", "fio-json", "x" * 2000),)))
    return repetition


def main() -> None:
    # The store asks each cell's workload kind for its identity facts.
    install()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--samples", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with PostgresServer(durable=True) as server, \
            LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                         resources={HOST_RESOURCE: 1}, dashboard_address=None,
                         host="127.0.0.1") as cluster, \
            Client(cluster) as client, Store(server.create_database("bench")) as store:
        rid = store.create_run(run_id=None, study_name="bench", study_path="-",
                               study_text="", seed=0, env={}, hvbench_version="bench",
                               git_commit=None)
        ids = store.add_cells(rid, [CellRecord("c", "p", {}, "w", {})])
        host = HostRun("bench", "", rid, ids, {("c", r) for r in range(args.rounds + 5)})
        queue = Queue("bench-results", client=client)
        # the scheduler asked directly: scheduler_info() is the client's cache
        address = next(iter(hvbench_workers(client).values()))
        took = []
        for rep in range(args.rounds + 5):
            start = time.perf_counter()
            future = client.submit(send_one, "bench-results", rep, args.samples,
                                   workers=[address], resources={HOST_RESOURCE: 1},
                                   pure=False)
            commit(store, host, queue.get(timeout=30))
            future.result()
            if rep >= 5:  # the first rounds warm up connections and imports
                took.append((time.perf_counter() - start) * 1000)
    took.sort()
    result = {"rounds": args.rounds, "samples": args.samples,
              "median_ms": statistics.median(took),
              "p90_ms": took[int(0.9 * (len(took) - 1))], "max_ms": took[-1]}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"coordination per cell ({args.rounds} rounds, {args.samples} samples): median "
          f"{result['median_ms']:.1f} ms, p90 {result['p90_ms']:.1f} ms, "
          f"max {result['max_ms']:.1f} ms (target < 50 ms)")


if __name__ == "__main__":
    main()
