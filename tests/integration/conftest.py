"""Integration fixtures: the real guest image, and a leak check after every test."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hvbench.image.builder import GuestImage, build_image
from hvbench.platforms.qemu import TAP_PREFIX
from hvbench.platforms.registry import REGISTRY


@pytest.fixture(scope="session")
def image() -> GuestImage:
    """The bundled guest image (built once; a cache hit after `make image`)."""
    return build_image()


def hvbench_links() -> list[str]:
    out = subprocess.run(
        ["ip", "-o", "link", "show"], capture_output=True, text=True, check=True
    ).stdout
    names = [line.split(": ")[1].split("@")[0] for line in out.splitlines()]
    return [n for n in names if n.startswith(TAP_PREFIX)]


@pytest.fixture(autouse=True)
def no_leaks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Each test gets a private work dir and TMPDIR; afterwards nothing may remain in
    them, no guest may be registered, and no hvbench tap may exist."""
    work = tmp_path / "work"
    tmp = tmp_path / "tmp"
    work.mkdir()
    tmp.mkdir()
    monkeypatch.setenv("HVBENCH_WORKDIR", str(work))
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    yield work
    assert REGISTRY.live() == [], "a guest outlived its test"
    assert list(work.iterdir()) == [], f"left in the work dir: {list(work.iterdir())}"
    assert list(tmp.iterdir()) == [], f"left in TMPDIR: {list(tmp.iterdir())}"
    assert hvbench_links() == [], "a tap device outlived its test"
