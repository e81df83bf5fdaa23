"""fio jobs: an argv builder and a parser of fio's JSON output.

Both are pure so they are unit-tested on stored fio output; :func:`run_fio` runs a job on
any platform and keeps the raw JSON next to the parsed rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from hvbench.errors import CommandError, HvbenchError
from hvbench.platforms.base import Platform

FioRw = Literal["read", "write", "randread", "randwrite", "rw", "randrw"]
_NS_PER_MS = 1e6


@dataclass(frozen=True)
class FioJob:
    """One fio job, rendered as command-line options (no job file needed)."""

    name: str
    rw: FioRw
    #: The file or device; None for jobs that work on a directory of files.
    filename: str | None
    size: int
    bs: int = 64 * 1024
    iodepth: int = 1
    direct: bool = True
    ioengine: str = "psync"
    runtime_s: float | None = None
    extra: tuple[str, ...] = ()

    def argv(self) -> list[str]:
        args = [
            "fio", "--output-format=json", f"--name={self.name}", f"--rw={self.rw}",
            f"--size={self.size}", f"--bs={self.bs}",
            f"--iodepth={self.iodepth}", f"--direct={int(self.direct)}",
            f"--ioengine={self.ioengine}",
        ]
        if self.filename is not None:
            args.insert(4, f"--filename={self.filename}")
        if self.runtime_s is not None:
            args += [f"--runtime={self.runtime_s:g}", "--time_based"]
        return [*args, *self.extra]


@dataclass(frozen=True)
class FioResult:
    """The parsed numbers of one fio job for one direction (read or write)."""

    job: str
    direction: Literal["read", "write"]
    mb_per_s: float
    iops: float
    lat_mean_ms: float
    lat_p50_ms: float | None
    lat_p99_ms: float | None
    lat_p999_ms: float | None
    cpu_usr_pct: float
    cpu_sys_pct: float
    runtime_s: float
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)


def _percentile(stats: dict[str, Any], key: str) -> float | None:
    value = stats.get("percentile", {}).get(key)
    return None if value is None else float(value) / _NS_PER_MS


def parse_fio_json(text: str) -> list[FioResult]:
    """Parse fio ``--output-format=json``; one result per job and active direction.

    fio may print warnings before the JSON document; they are skipped. Raises
    :class:`HvbenchError` if no JSON document is found.
    """
    start = text.find("{")
    try:
        doc = json.loads(text[start:]) if start >= 0 else None
    except ValueError as exc:
        raise HvbenchError(f"fio output is not JSON: {text[:200]!r}") from exc
    if not isinstance(doc, dict) or "jobs" not in doc:
        raise HvbenchError(f"fio output has no jobs: {text[:200]!r}")
    results = []
    for job in doc["jobs"]:
        for direction in ("read", "write"):
            stats = job[direction]
            if stats.get("io_bytes", 0) == 0:
                continue
            lat = stats.get("clat_ns", {})
            results.append(FioResult(
                job=job["jobname"], direction=direction,
                mb_per_s=float(stats["bw_bytes"]) / 1e6, iops=float(stats["iops"]),
                lat_mean_ms=float(stats.get("lat_ns", {}).get("mean", 0.0)) / _NS_PER_MS,
                lat_p50_ms=_percentile(lat, "50.000000"),
                lat_p99_ms=_percentile(lat, "99.000000"),
                lat_p999_ms=_percentile(lat, "99.900000"),
                cpu_usr_pct=float(job.get("usr_cpu", 0.0)),
                cpu_sys_pct=float(job.get("sys_cpu", 0.0)),
                runtime_s=float(stats.get("runtime", 0)) / 1000.0, raw=job,
            ))
    return results


def run_fio(platform: Platform, job: FioJob, timeout: float = 600.0) -> tuple[
    list[FioResult], str
]:
    """Run ``job`` on ``platform``; returns the parsed results and the raw JSON text.

    Raises :class:`CommandError` (with fio's stderr) when fio fails.
    """
    result = platform.exec(job.argv(), timeout=timeout)
    if not result.ok:
        raise CommandError(
            job.argv(), result.exit_code, result.stderr.decode(errors="replace"),
            f"fio on {platform.name}",
        )
    text = result.text()
    return parse_fio_json(text), text
