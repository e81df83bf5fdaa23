"""The web workload's wrk latency pass end to end: a real lab, lighttpd in the lab host
``native`` (and in a TCG guest on the lab bridge: examples/web.toml reduced), httperf
then wrk from the lab host ``client``, through the runner into the store. The staged
Lua script is removed (the leak check finds nothing left in TMPDIR)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from hvbench.image.builder import GuestImage
from hvbench.model.study import parse_study, select_cells
from hvbench.run.runner import run_study
from hvbench.store.database import Store
from hvbench.workloads.wrk import RAW_KIND, parse_wrk

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the net lab needs root"),
]
HOST_RAM = 24 << 30
PERCENTILES = ("p50", "p90", "p99", "p999", "p9999")

NATIVE = """
[study]
name = "web-latency"
repetitions = 1
seed = 17

[lab]
[[lab.host]]
name = "client"

[[platform]]
kind = "native"

[[workload]]
kind = "web"
name = "fixed"
file_kb = {sizes}
rate = 20
duration_s = 1
latency = {{ tool = "wrk", seconds = 2, connections = 2 }}
"""

#: examples/web.toml's fixed-rate workload (native and a TCG guest), reduced.
WEB_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "web.toml"
WEB_REDUCED = ["study.repetitions=1", "workload.fixed.file_kb=[10]", "workload.fixed.rate=20",
               "workload.fixed.duration_s=1",
               'workload.fixed.latency={ tool = "wrk", seconds = 2, connections = 2 }']


def _run(text: str, tmp_path: Path, path: Path | None = None, changes: Sequence[str] = (),
         only: Sequence[str] = ()) -> tuple[dict[tuple[str, str, str], float],
                                           dict[tuple[str, str], str]]:
    """Run the study ``text`` (of file ``path``, with the ``--set`` ``changes`` and
    ``--only`` patterns ``only``): (platform, phase, metric) -> value, and (cell, phase)
    -> the stored wrk JSON."""
    study = parse_study(text, str(path or tmp_path / "study.toml"), HOST_RAM, changes)
    study = select_cells(study, only, []) if only else study
    with Store(tmp_path / "r.db") as store:
        outcome = run_study(study, store)
        failures = store.failures(outcome.run_id)
        assert outcome.failures == 0, "\n\n".join(f.error or "" for f in failures)
        rows = store.measurements(outcome.run_id)
        raws = {(r.cell, r.phase): r.content
                for r in store.raw_outputs(outcome.run_id, kind=RAW_KIND)}
    return {(r.platform, r.phase, r.metric): r.value for r in rows}, raws


def _check_phase(values: dict[tuple[str, str, str], float], platform: str,
                 phase: str) -> list[float]:
    points = [values[(platform, phase, f"wrk_lat_{p}_ms")] for p in PERCENTILES]
    assert 0 < points[0] <= points[1] <= points[2] <= points[3] <= points[4], points
    assert points[4] <= values[(platform, phase, "wrk_lat_max_ms")]
    assert values[(platform, phase, "wrk_rps")] > 10
    assert values[(platform, phase, "wrk_errors")] == 0
    # httperf's means are still there, next to wrk's percentiles: a mean reply shorter
    # than the 50 ms between two of its 20 requests/s (longer would queue requests,
    # which one small file at this rate never does; httperf prints 0.1 ms steps, so a
    # fast native reply may read 0.0).
    assert 0.0 <= values[(platform, phase, "reply_ms")] < 1000.0 / 20
    assert values[(platform, phase, "replies_s")] == pytest.approx(20, rel=0.25)
    return points


def test_native_web_cell_stores_wrk_percentiles(tmp_path: Path) -> None:
    values, raws = _run(NATIVE.format(sizes="[1, 30]"), tmp_path)
    for phase in ("1kB", "30kB"):
        _check_phase(values, "native", phase)
    assert len(raws) == 2
    for (_, phase), raw in raws.items():
        result = parse_wrk(raw)
        assert result.url.endswith(f"/{phase[:-2]}k.bin")
        assert result.requests == values[("native", phase, "wrk_requests")]
        assert json.loads(raw)["latency_us"]["histogram"]


def test_guest_and_native_wrk_percentiles(image: GuestImage, tmp_path: Path) -> None:
    """examples/web.toml reduced to its fixed-rate workload at 10 kB."""
    values, raws = _run(WEB_EXAMPLE.read_text(), tmp_path, WEB_EXAMPLE, WEB_REDUCED,
                        ["*/fixed"])
    native = _check_phase(values, "native", "10kB")
    guest = _check_phase(values, "guest", "10kB")
    assert len(raws) == 2
    # TCG emulates the guest's CPU: its lighttpd answers far slower than native's.
    assert guest[0] > native[0]
