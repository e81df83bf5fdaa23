"""``target = "filesystem"``: fio on a guest's virtio-fs share and natively on the same
host directory (issue 28). The study's validation and where each side runs; the real
guest run is tests/integration/test_io_paths.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from hvbench.errors import SpecError
from hvbench.kinds.disk import driver as disk
from hvbench.kinds.disk.spec import DiskWorkloadSpec, native_share_dir
from hvbench.model.study import parse_study
from hvbench.platforms.native import NativePlatform

WORKLOAD = """
[[workload]]
name = "fs"
kind = "disk"
profile = "dd"
target = "filesystem"
file_size = "8M"
allow_cached = true
"""


def study_text(platforms: str, workload: str = WORKLOAD) -> str:
    """A study of ``platforms`` (TOML) running ``workload`` (dd on the share)."""
    return f'[study]\nname = "s"\nrepetitions = 1\n{platforms}{workload}'


def _parse(text: str) -> object:
    return parse_study(text, "s.toml", 8 << 30)


def test_a_share_and_the_native_side_parse() -> None:
    study = parse_study(study_text(
        '[[platform]]\nkind = "native"\n'
        '[[platform]]\nkind = "qemu"\nname = "fs"\n'
        'filesystem = { source = "/srv/share", cache = "none" }\n'), "s.toml", 8 << 30)
    assert {c.platform.name for c in study.cells} == {"native", "fs"}
    assert native_share_dir(study, "fs") == "/srv/share"


def test_unnamed_shares_leave_the_native_side_in_the_work_directory() -> None:
    study = parse_study(study_text(
        '[[platform]]\nkind = "native"\n'
        '[[platform]]\nkind = "qemu"\nname = "a"\nfilesystem = { cache = "auto" }\n'
        '[[platform]]\nkind = "qemu"\nname = "b"\nfilesystem = { cache = "none" }\n'),
        "s.toml", 8 << 30)
    assert native_share_dir(study, "fs") is None


@pytest.mark.parametrize(("platforms", "expected"), [
    ('[[platform]]\nkind = "qemu"\nname = "g"\ndisk = { size = "64M" }\n',
     "s.toml: platform g: workload fs: target = \"filesystem\" runs on the guest's first "
     "shared directory; expected filesystem = { cache = \"auto\" }"),
    ('[[platform]]\nkind = "native"\n'
     '[[platform]]\nkind = "qemu"\nname = "a"\nfilesystem = { source = "/srv/a" }\n'
     '[[platform]]\nkind = "qemu"\nname = "b"\nfilesystem = { source = "/srv/b" }\n',
     "s.toml: workload fs: target = \"filesystem\": the guests share different "
     "directories (a (/srv/a), b (/srv/b)); expected one filesystem.source"),
    ('[[platform]]\nkind = "native"\ndisk = { source = "/dev/sdz" }\n',
     "set target = \"device\""),
])
def test_impossible_share_targets_are_one_line_errors(platforms: str,
                                                      expected: str) -> None:
    with pytest.raises(SpecError) as caught:
        _parse(study_text(platforms))
    message = str(caught.value)
    assert expected in message and "\n" not in message


def test_a_libvirt_guest_cannot_take_a_share_target() -> None:
    with pytest.raises(SpecError) as caught:
        _parse(study_text('[[platform]]\nkind = "libvirt"\nname = "lv"\n'
                      'disk = { size = "64M" }\n'))
    assert "platform lv: workload fs: target = \"filesystem\" needs a virtio-fs share, " \
        "which hvbench serves to kind = \"qemu\" guests only" in str(caught.value)


def test_an_unknown_target_names_the_choices() -> None:
    with pytest.raises(SpecError) as caught:
        _parse(study_text('[[platform]]\nkind = "native"\n',
                      WORKLOAD.replace('"filesystem"', '"share"')))
    assert "target" in str(caught.value) and "filesystem" in str(caught.value)


def test_the_native_side_works_in_a_fresh_directory_of_the_share(tmp_path: Path) -> None:
    spec = DiskWorkloadSpec.model_validate({"profile": "dd", "target": "filesystem"})
    share = tmp_path / "share"
    share.mkdir()
    (share / "theirs").write_text("not hvbench's\n")
    with NativePlatform(base_dir=tmp_path) as host:
        target = disk.prepare_target(host, spec, str(share))
        assert target.owned and not target.raw and target.device is None
        assert Path(target.directory).parent == share and Path(target.directory).is_dir()
        assert target.path == f"{target.directory}/hvbench.dat"
        unnamed = disk.prepare_target(host, spec, None)
        assert Path(unnamed.directory).parent == Path(host.scratch_dir())
        job = disk.phase_job(spec, "write", target)
        assert job.filename == target.path and "--fallocate=none" in job.extra
        Path(target.path).write_bytes(b"x")
        disk.release_target(host, target)
        disk.release_target(host, unnamed)
    # What hvbench made is gone; what was there before is untouched.
    assert sorted(p.name for p in share.iterdir()) == ["theirs"]


def test_only_native_cells_still_run_in_the_guests_directory() -> None:
    """``--only native/*`` leaves no guest cell, but the directory stays the one the
    declared guests share."""
    from hvbench.model.study import select_cells
    study = parse_study(study_text(
        '[[platform]]\nkind = "native"\n'
        '[[platform]]\nkind = "qemu"\nname = "fs"\n'
        'filesystem = { source = "/srv/share" }\n'), "s.toml", 8 << 30)
    native_only = select_cells(study, ["native/*"])
    assert [c.platform.name for c in native_only.cells] == ["native"]
    assert native_share_dir(native_only, "fs") == "/srv/share"
