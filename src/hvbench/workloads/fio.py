"""fio jobs: an argv builder and a parser of fio's JSON output.

Both are pure so they are unit-tested on stored fio output; :func:`run_fio` runs a job on
any platform and keeps the raw JSON next to the parsed rows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from hvbench.errors import CommandError, HvbenchError, stderr_tail
from hvbench.platforms.base import Platform

FioRw = Literal["read", "write", "randread", "randwrite", "rw", "randrw"]
_NS_PER_MS = 1e6
#: fio's ``json+``: the JSON document plus each job's completion-latency histogram
#: (``clat_ns.bins``: latency in ns -> I/Os), from which the report draws latency CDFs.
OUTPUT_FORMAT = "json+"
#: The raw-output kind fio's document is stored under.
RAW_KIND = "fio-json"


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
            "fio", f"--output-format={OUTPUT_FORMAT}", f"--name={self.name}",
            f"--rw={self.rw}",
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
    lat_p90_ms: float | None = None
    lat_p9999_ms: float | None = None
    #: Mean requests in flight at submission (fio's ``iodepth_level`` distribution;
    #: None when the document has none).
    depth_mean: float | None = None
    #: Mean submission and completion latency, µs (None: fio measured none, as for
    #: slat with synchronous engines).
    slat_mean_us: float | None = None
    clat_mean_us: float | None = None
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)


def _percentile(stats: dict[str, Any], key: str) -> float | None:
    value = stats.get("percentile", {}).get(key)
    return None if value is None else float(value) / _NS_PER_MS


def depth_mean(levels: Mapping[str, Any]) -> float | None:
    """The mean of fio's ``iodepth_level`` distribution (% of submissions per depth
    bucket), or None when it is empty. fio's buckets are powers of two, bucket ``k``
    holding depths k to 2k - 1 (``>=64`` all above): each counts as its lower bound,
    which is exact for the power-of-two depths jobs are given."""
    total = weighted = 0.0
    for key, pct in levels.items():
        depth = float(key.removeprefix(">="))
        total += float(pct)
        weighted += depth * float(pct)
    return weighted / total if total > 0 else None


def _mean_us(stats: Mapping[str, Any]) -> float | None:
    """A latency block's mean in µs; None when it counted no I/O."""
    if not stats or stats.get("N", 1) == 0 or (stats.get("max", 1) == 0):
        return None
    return float(stats.get("mean", 0.0)) / 1000.0


def parse_fio_json(text: str) -> list[FioResult]:
    """Parse fio ``--output-format=json`` (or ``json+``); one result per job and active
    direction.

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
                lat_p90_ms=_percentile(lat, "90.000000"),
                lat_p9999_ms=_percentile(lat, "99.990000"),
                cpu_usr_pct=float(job.get("usr_cpu", 0.0)),
                cpu_sys_pct=float(job.get("sys_cpu", 0.0)),
                runtime_s=float(stats.get("runtime", 0)) / 1000.0,
                depth_mean=depth_mean(job.get("iodepth_level") or {}),
                slat_mean_us=_mean_us(stats.get("slat_ns") or {}),
                clat_mean_us=_mean_us(lat), raw=job,
            ))
    return results


def _json_job_errors(stdout: str) -> list[str]:
    """``job NAME: error N (strerror)`` for every job whose JSON ``error`` is set."""
    start = stdout.find("{")
    try:
        doc = json.loads(stdout[start:]) if start >= 0 else None
    except ValueError:
        return []
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    out = []
    for job in jobs if isinstance(jobs, list) else []:
        code = job.get("error") if isinstance(job, dict) else None
        if isinstance(code, int) and code:
            out.append(f"job {job.get('jobname', '?')}: error {code} ({os.strerror(code)})")
    return out


def fio_error(stdout: str, stderr: str, lines: int = 5) -> str:
    """fio's own words for a failure (pure): the lines that say what went wrong
    (``fio: ...``, ``err=.../error=...``, ``JOB: you need to specify size=``) from its
    stderr and from its stdout outside the JSON document (fio prints some errors
    there), then the jobs whose JSON ``error`` field is set. Empty when fio said
    nothing useful."""
    start = stdout.find("{")
    outside = stdout if start < 0 else stdout[:start]
    said = [line.strip() for line in (stderr + "\n" + outside).splitlines()
            if line.strip() and not line.startswith("fio: ETA")]
    # fio repeats some messages (an unrecognized option is printed twice).
    unique = list(dict.fromkeys(said))[-lines:]
    return "\n".join(unique + _json_job_errors(stdout))


def fio_command_error(argv: list[str] | tuple[str, ...], exit_code: int | None,
                      stdout: str, stderr: str, what: str) -> CommandError:
    """A :class:`CommandError` for a failed fio run that leads with fio's own words."""
    return CommandError(argv, exit_code, stderr_tail(stderr, 30) or stdout[-2000:], what,
                        tool_error=fio_error(stdout, stderr))


def run_fio(platform: Platform, job: FioJob, timeout: float = 600.0) -> tuple[
    list[FioResult], str
]:
    """Run ``job`` on ``platform``; returns the parsed results and the raw JSON text.

    Raises :class:`CommandError` (with fio's stderr) when fio fails.
    """
    result = platform.exec(job.argv(), timeout=timeout)
    if not result.ok:
        raise fio_command_error(job.argv(), result.exit_code, result.text(),
                                result.stderr.decode(errors="replace"),
                                f"fio on {platform.name}")
    text = result.text()
    return parse_fio_json(text), text
