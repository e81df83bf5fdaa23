"""The host's time-stamp counter rate, which a TCG guest sees as its own TSC rate.

Under TCG, QEMU answers the guest's ``rdtsc`` from the host's ``rdtsc`` (offset, same
rate). A Linux guest calibrates the TSC at boot against the PIT; under TCG that
calibration loop is timed by an emulated PIT whose reads race the host scheduler, and
it fails now and then ("tsc: Unable to calibrate against PIT"). On ``q35`` and ``pc``
the kernel then falls back to the HPET or the ACPI PM timer. ``microvm`` has neither:
the TSC is marked unstable and the boot stops in early timer set-up (measured here: 5
boots in 8 stopped without this, 0 in 12 with ``tsc_early_khz=``). Telling the kernel
the rate skips the calibration altogether.

The rate is measured once per process, by reading the counter with the ``rdtsc``
instruction (a 10-byte function placed in an executable anonymous mapping) against
``CLOCK_MONOTONIC_RAW`` over :data:`MEASURE_S`. On hosts that are not x86-64, or that
refuse executable mappings, the rate is unknown (``None``) and guests calibrate as
usual.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import platform
import statistics
import time
from collections.abc import Callable

#: How long each of the :data:`ROUNDS` measurements lasts (seconds).
MEASURE_S = 0.05
ROUNDS = 3

# rdtsc; shl rdx, 32; or rax, rdx; ret  -- returns the 64-bit counter in rax.
_RDTSC_CODE = bytes.fromhex("0f31" "48c1e220" "4809d0" "c3")


def _rdtsc_function() -> tuple[Callable[[], int], mmap.mmap] | None:
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    try:
        page = mmap.mmap(
            -1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC
        )
    except (OSError, ValueError):
        return None
    page.write(_RDTSC_CODE)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    function = ctypes.CFUNCTYPE(ctypes.c_uint64)(address)
    # The mapping must outlive the function pointer: the caller keeps both.
    return function, page


def _one_rate(rdtsc: Callable[[], int], seconds: float) -> float:
    clock = time.CLOCK_MONOTONIC_RAW
    t0 = time.clock_gettime_ns(clock)
    c0 = rdtsc()
    t1 = time.clock_gettime_ns(clock)
    time.sleep(seconds)
    t2 = time.clock_gettime_ns(clock)
    c1 = rdtsc()
    t3 = time.clock_gettime_ns(clock)
    # Each counter read sits between two clock reads: take the midpoints.
    elapsed_ns = (t2 + t3) / 2 - (t0 + t1) / 2
    return (c1 - c0) / elapsed_ns * 1e6  # kHz


@functools.cache
def tsc_khz() -> int | None:
    """The host TSC rate in kHz, measured once (about 0.15 s), or None if unknown.

    Never raises: a host where the counter cannot be read gives None.
    """
    found = _rdtsc_function()
    if found is None:
        return None
    rdtsc, page = found
    try:
        rates = [_one_rate(rdtsc, MEASURE_S) for _ in range(ROUNDS)]
    finally:
        page.close()  # rdtsc must not be called after this
    khz = round(statistics.median(rates))
    # A non-invariant TSC or a broken clock gives nonsense: trust only a plausible rate.
    return khz if 100_000 <= khz <= 10_000_000 else None
