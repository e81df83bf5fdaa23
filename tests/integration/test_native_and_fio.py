"""The same fio job natively and in a guest, and the native platform's own behaviour."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hvbench.analysis.latency import fio_clat_histogram
from hvbench.errors import GuestTimeoutError
from hvbench.image.builder import GuestImage
from hvbench.model.spec import DiskSpec, VmSpec
from hvbench.platforms.native import NativePlatform
from hvbench.platforms.qemu import QemuPlatform
from hvbench.workloads.fio import FioJob, run_fio

pytestmark = pytest.mark.integration


def test_native_scratch_is_in_the_work_dir(no_leaks: Path) -> None:
    with NativePlatform() as native:
        scratch = Path(native.scratch_dir())
        assert scratch.parent == no_leaks
        native.write_file(str(scratch / "x"), b"abc")
        assert native.exec(["cat", "x"], timeout=10).stdout == b"abc"
    assert not scratch.exists()


def test_native_timeout_kills_the_process_group() -> None:
    with NativePlatform() as native:
        started = time.monotonic()
        with pytest.raises(GuestTimeoutError):
            native.exec(["sh", "-c", "sleep 30 & sleep 30"], timeout=0.5)
        assert time.monotonic() - started < 5


def test_fio_native_and_guest(image: GuestImage) -> None:
    size = 16 << 20
    with NativePlatform() as native:
        job = FioJob(name="w", rw="write", filename=f"{native.scratch_dir()}/f", size=size)
        (native_result,), raw = run_fio(native, job)
    spec = VmSpec(accel="tcg", disks=(DiskSpec(size=32 << 20),))
    with QemuPlatform(spec, image=image) as guest:
        job = FioJob(name="w", rw="write", filename=guest.disk_device(0), size=size)
        (guest_result,), guest_raw = run_fio(guest, job)
    for result in (native_result, guest_result):
        assert result.direction == "write" and result.mb_per_s > 0
        assert result.raw["write"]["io_bytes"] == size
    assert '"fio version"' in raw and '"fio version"' in guest_raw
    # json+ histograms: every I/O is in one bucket, on both sides.
    for text, result in ((raw, native_result), (guest_raw, guest_result)):
        assert sum(fio_clat_histogram(text).values()) == size // job.bs
        assert result.lat_p90_ms is not None and result.lat_p9999_ms is not None
        assert result.lat_p50_ms is not None and result.lat_p50_ms <= result.lat_p9999_ms
