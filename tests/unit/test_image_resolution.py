"""The apt resolution cache that keeps find_image() cheap (no apt, no QEMU)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hvbench.image import resolution

PACKAGES = {"fio": "3.33-3", "linux-image-6.1.0-56-amd64": "6.1.192-2"}


@pytest.fixture
def apt_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake /var/lib/apt/lists with one Packages file, used as apt's whole state."""
    lists = tmp_path / "lists"
    lists.mkdir()
    (lists / "deb.debian.org_dists_bookworm_main_binary-amd64_Packages").write_text("a")
    monkeypatch.setattr(
        resolution, "APT_STATE_GLOBS", ((str(lists), "*_Packages"), (str(lists), "*_Packages.*"))
    )
    return lists


def test_fingerprint_follows_files_and_extra(apt_state: Path) -> None:
    first = resolution.apt_fingerprint(["format=4"])
    assert first == resolution.apt_fingerprint(["format=4"])
    assert first != resolution.apt_fingerprint(["format=5"])
    listing = next(apt_state.iterdir())
    st = listing.stat()
    os.utime(listing, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    touched = resolution.apt_fingerprint(["format=4"])
    assert touched != first
    (apt_state / "security_Packages.lz4").write_text("b")  # compressed lists count too
    assert resolution.apt_fingerprint(["format=4"]) != touched
    (apt_state / "unrelated_Sources").write_text("c")
    assert resolution.apt_fingerprint(["format=4"]) == resolution.apt_fingerprint(["format=4"])


def test_resolve_cached_resolves_once_per_state(apt_state: Path, tmp_path: Path) -> None:
    calls: list[int] = []

    def resolve() -> dict[str, str]:
        calls.append(1)
        return dict(PACKAGES)

    cache_file = tmp_path / "cache" / resolution.CACHE_FILE
    assert resolution.resolve_cached(cache_file, ["x"], resolve) == PACKAGES
    assert resolution.resolve_cached(cache_file, ["x"], resolve) == PACKAGES
    assert len(calls) == 1
    (apt_state / "new_Packages").write_text("apt-get update ran")
    assert resolution.resolve_cached(cache_file, ["x"], resolve) == PACKAGES
    assert len(calls) == 2
    assert [p.name for p in cache_file.parent.iterdir()] == [resolution.CACHE_FILE]


def test_corrupt_or_unwritable_cache_only_costs_a_resolution(tmp_path: Path) -> None:
    cache_file = tmp_path / resolution.CACHE_FILE
    cache_file.write_text("{not json")
    assert resolution.load(cache_file, "f") is None
    cache_file.write_text('{"fingerprint": "f", "packages": {}}')
    assert resolution.load(cache_file, "f") is None
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    resolution.store(blocked / resolution.CACHE_FILE, "f", PACKAGES)  # must not raise
    resolution.store(cache_file, "f", PACKAGES)
    assert resolution.load(cache_file, "f") == PACKAGES
    assert resolution.load(cache_file, "g") is None
