"""Which host block device the disk monitor samples: the one holding a platform's
benchmark storage (issue 26: a study's ``disk.source``), not the work directory's."""

from __future__ import annotations

from pathlib import Path

import pytest

from hvbench.model.spec import DiskSpec, VmSpec
from hvbench.monitors import session
from hvbench.platforms.native import NativePlatform
from hvbench.platforms.qemu import QemuPlatform, disk_host_path


def test_disk_host_path_by_source_kind() -> None:
    assert disk_host_path(DiskSpec(source="/dev/loop7"), "/dev/loop7") == "/dev/loop7"
    assert disk_host_path(DiskSpec(), "/other/fs/disk0.raw") == "/other/fs/disk0.raw"
    # Before the platform made the image there is no path yet.
    assert disk_host_path(DiskSpec(), None) is None
    # A network export's blocks are on no host path.
    assert disk_host_path(DiskSpec(source="nbd://10.0.0.2:10809/storage"),
                          "nbd://10.0.0.2:10809/storage") is None
    assert disk_host_path(DiskSpec(source="aoe://storage/e0.0", initiator="guest"), None) is None


def test_native_host_storage() -> None:
    assert NativePlatform(disk_source="/dev/sdz").host_storage() == "/dev/sdz"
    assert NativePlatform(disk_source="nbd://10.0.0.2:10809/storage").host_storage() is None
    # A scratch file: the scratch directory once started, nothing before.
    assert NativePlatform().host_storage() is None


def test_native_scratch_dir_is_its_storage(tmp_path: Path) -> None:
    with NativePlatform(base_dir=tmp_path) as native:
        where = native.host_storage()
        assert where is not None and Path(where).parent == tmp_path


def test_guest_host_storage_before_start_names_only_a_device(tmp_path: Path) -> None:
    phy = QemuPlatform(VmSpec(disks=(DiskSpec(source="/dev/sdz"),)), base_dir=tmp_path)
    assert phy.host_storage() == "/dev/sdz"
    # An image hvbench has not created yet has no path.
    assert QemuPlatform(VmSpec(disks=(DiskSpec(),)), base_dir=tmp_path).host_storage() is None


@pytest.fixture
def looked_up(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """The paths :func:`session.host_device` resolves (the work directory: tmp_path)."""
    seen: list[str] = []

    def fake(path: Path | str) -> str:
        seen.append(str(path))
        return "sdz"

    monkeypatch.setattr(session, "backing_device", fake)
    monkeypatch.setattr(session, "work_dir", lambda: tmp_path)
    return seen


def test_host_device_follows_the_named_source(looked_up: list[str]) -> None:
    assert session.host_device(NativePlatform(disk_source="/dev/loop7")) == "sdz"
    assert looked_up == ["/dev/loop7"]


def test_host_device_falls_back_to_the_work_directory(looked_up: list[str],
                                                      tmp_path: Path) -> None:
    # An NBD export: its file sits in the work directory, served by the lab host.
    session.host_device(NativePlatform(disk_source="nbd://10.0.0.2:10809/storage"))
    # A platform that does not say where its storage is.
    session.host_device(object())  # type: ignore[arg-type]
    assert looked_up == [str(tmp_path), str(tmp_path)]
