"""The host TSC rate that TCG microvm guests are given."""

from __future__ import annotations

import mmap
import platform

import pytest

from hvbench.host import tsc


def test_unknown_without_rdtsc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tsc, "_rdtsc_function", lambda: None)
    tsc.tsc_khz.cache_clear()
    try:
        assert tsc.tsc_khz() is None
    finally:
        tsc.tsc_khz.cache_clear()


def test_implausible_rate_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    # A counter that does not move (or a broken clock) must not reach a guest's cmdline.
    page = mmap.mmap(-1, mmap.PAGESIZE)
    monkeypatch.setattr(tsc, "_rdtsc_function", lambda: (lambda: 7, page))
    tsc.tsc_khz.cache_clear()
    try:
        assert tsc.tsc_khz() is None
    finally:
        tsc.tsc_khz.cache_clear()


@pytest.mark.skipif(platform.machine() != "x86_64", reason="rdtsc is x86-64 only")
def test_rate_matches_two_independent_reads() -> None:
    # Two separate measurements of the same counter agree to 0.5 %: the reader measures
    # a rate, not noise. (No absolute figure: it depends on the host's CPU.)
    tsc.tsc_khz.cache_clear()
    first = tsc.tsc_khz()
    found = tsc._rdtsc_function()
    assert first is not None and found is not None
    rdtsc, _page = found  # the mapping must stay alive while rdtsc is called
    second = tsc._one_rate(rdtsc, 0.05)
    del rdtsc
    assert abs(second - first) / first < 0.005
    assert 100_000 <= first <= 10_000_000
    tsc.tsc_khz.cache_clear()
