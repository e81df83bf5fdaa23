"""fio JSON parsing on stored output of a real fio run."""

from __future__ import annotations

from pathlib import Path

import pytest

from hvbench.errors import HvbenchError
from hvbench.workloads.fio import FioJob, parse_fio_json

FIXTURES = Path(__file__).parent.parent / "fixtures"


def test_write_job() -> None:
    text = (FIXTURES / "fio-write.json").read_text()
    (result,) = parse_fio_json(text)
    assert result.direction == "write" and result.job == "w"
    assert result.mb_per_s == pytest.approx(299593142 / 1e6)
    assert result.iops == pytest.approx(4571.428571)
    assert result.lat_p50_ms is not None and result.lat_p99_ms is not None
    assert result.lat_p50_ms <= result.lat_p99_ms <= (result.lat_p999_ms or 0)
    assert result.raw["jobname"] == "w"


def test_mixed_job_gives_both_directions() -> None:
    results = parse_fio_json((FIXTURES / "fio-randrw.json").read_text())
    assert [r.direction for r in results] == ["read", "write"]


def test_leading_warnings_are_skipped() -> None:
    text = "fio: some warning\n" + (FIXTURES / "fio-write.json").read_text()
    assert len(parse_fio_json(text)) == 1


@pytest.mark.parametrize("bad", ["", "not json", '{"no": "jobs"}', "{broken"])
def test_garbage_is_an_error(bad: str) -> None:
    with pytest.raises(HvbenchError):
        parse_fio_json(bad)


def test_job_argv() -> None:
    job = FioJob(name="j", rw="randread", filename="/dev/vda", size=1 << 20, bs=4096, runtime_s=5)
    argv = job.argv()
    assert argv[:2] == ["fio", "--output-format=json+"]
    assert "--rw=randread" in argv and "--direct=1" in argv and "--time_based" in argv
