"""Cache key, cache directory, manifest checks, cpio, module closure (no apt, no QEMU)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from hvbench.errors import ImageError
from hvbench.image import builder
from hvbench.image.cpio import write_newc
from hvbench.image.kmod import module_closure, module_name, parse_modules_dep

PACKAGES = {"fio": "3.33-3", "linux-image-6.1.0-56-amd64": "6.1.192-2"}


def test_key_depends_on_versions_order_free_and_init() -> None:
    key = builder.image_key(PACKAGES, b"init")
    assert key == builder.image_key(dict(reversed(PACKAGES.items())), b"init")
    assert key != builder.image_key({**PACKAGES, "fio": "3.33-4"}, b"init")
    assert key != builder.image_key(PACKAGES, b"init2")
    assert len(key) == 24
    int(key, 16)


def test_default_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HVBENCH_CACHE_DIR", str(tmp_path / "a"))
    assert builder.default_cache_dir() == tmp_path / "a"
    monkeypatch.delenv("HVBENCH_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert builder.default_cache_dir() == tmp_path / "x" / "hvbench"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert builder.default_cache_dir() == tmp_path / ".cache" / "hvbench"


def _fake_image(directory: Path, key: str, initrd: bytes = b"cpio") -> None:
    directory.mkdir(parents=True)
    (directory / "vmlinux").write_bytes(b"kernel")
    (directory / "initrd.img").write_bytes(initrd)
    manifest = {
        "key": key,
        "format_version": builder.FORMAT_VERSION,
        "kernel_release": "6.1.0-56-amd64",
        "kernel_file": "vmlinux",
        "packages": PACKAGES,
        "initrd_size": 4,
    }
    (directory / "manifest.json").write_text(json.dumps(manifest))


def test_find_image_checks_manifest_and_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(builder, "resolve_packages", lambda: dict(PACKAGES))
    key = builder.image_key(PACKAGES, builder.init_script())
    assert builder.find_image(tmp_path) is None
    _fake_image(tmp_path / "images" / key, key)
    image = builder.find_image(tmp_path)
    assert image is not None
    assert image.kernel == tmp_path / "images" / key / "vmlinux"
    assert image.packages == PACKAGES
    assert image.kernel_release == "6.1.0-56-amd64"
    (image.initrd).write_bytes(b"truncated!")  # size no longer matches the manifest
    assert builder.find_image(tmp_path) is None


def test_failed_build_leaves_no_temp_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(builder, "resolve_packages", lambda: dict(PACKAGES))

    def boom(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(builder, "_build_into", boom)
    with pytest.raises(KeyboardInterrupt):
        builder.build_image(tmp_path)
    assert list((tmp_path / "images").iterdir()) == []


def test_build_image_reuses_a_valid_image(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(builder, "resolve_packages", lambda: dict(PACKAGES))
    key = builder.image_key(PACKAGES, builder.init_script())
    _fake_image(tmp_path / "images" / key, key)

    def must_not_build(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("rebuilt a valid image")

    monkeypatch.setattr(builder, "_build_into", must_not_build)
    assert builder.build_image(tmp_path).key == key


def test_cpio_newc_layout(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "init").write_bytes(b"#!/bin/sh\n")
    (tmp_path / "sh").symlink_to("/bin/busybox")
    out = io.BytesIO()
    write_newc(tmp_path, out)
    data = out.getvalue()
    assert len(data) % 4 == 0
    names = [b"dev\0", b"init\0", b"sh\0", b"dev/console\0", b"TRAILER!!!\0"]
    positions = [data.index(n) for n in names]
    assert positions == sorted(positions)  # parents first, device nodes after dev/
    assert b"/bin/busybox" in data


MODULES_DEP = """\
kernel/fs/ext4/ext4.ko: kernel/lib/crc16.ko kernel/fs/mbcache.ko kernel/fs/jbd2/jbd2.ko
kernel/lib/crc16.ko:
kernel/fs/mbcache.ko:
kernel/fs/jbd2/jbd2.ko:
kernel/arch/x86/crypto/crc32c-intel.ko:
"""


def test_module_closure() -> None:
    deps = parse_modules_dep(MODULES_DEP)
    assert module_closure(deps, ["ext4", "crc32c-intel"]) == sorted(
        [
            "kernel/fs/ext4/ext4.ko",
            "kernel/lib/crc16.ko",
            "kernel/fs/mbcache.ko",
            "kernel/fs/jbd2/jbd2.ko",
            "kernel/arch/x86/crypto/crc32c-intel.ko",
        ]
    )
    assert module_name("kernel/arch/x86/crypto/crc32c-intel.ko") == "crc32c_intel"
    with pytest.raises(ImageError):
        module_closure(deps, ["nope"])
