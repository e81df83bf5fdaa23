"""Cache key, cache directory, manifest checks, cpio, module closure (no apt, no QEMU)."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
from pathlib import Path, PurePosixPath

import pytest

from hvbench.errors import ImageError
from hvbench.image import builder, kmod, resolution
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


@pytest.fixture(autouse=True)
def no_apt_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fingerprint no host files: the tests' resolution cache must not depend on apt."""
    monkeypatch.setattr(resolution, "APT_STATE_GLOBS", ())


def _fake_image(directory: Path, key: str, initrd: bytes = b"cpio") -> None:
    directory.mkdir(parents=True)
    (directory / "vmlinux").write_bytes(b"kernel")
    (directory / "initrd.img").write_bytes(initrd)
    (directory / "rootfs.img").write_bytes(b"squashfs")
    manifest = {
        "key": key,
        "format_version": builder.FORMAT_VERSION,
        "kernel_release": "6.1.0-56-amd64",
        "kernel_file": "vmlinux",
        "packages": PACKAGES,
        "initrd_size": 4,
        "rootfs_file": "rootfs.img",
        "rootfs_size": 8,
    }
    (directory / "manifest.json").write_text(json.dumps(manifest))


def test_find_image_checks_manifest_and_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(builder, "resolve_packages", lambda: dict(PACKAGES))
    key = builder.image_key(PACKAGES, builder.boot_scripts())
    assert builder.find_image(tmp_path) is None
    _fake_image(tmp_path / "images" / key, key)
    image = builder.find_image(tmp_path)
    assert image is not None
    assert image.kernel == tmp_path / "images" / key / "vmlinux"
    assert image.rootfs == tmp_path / "images" / key / "rootfs.img"
    assert image.packages == PACKAGES
    assert image.kernel_release == "6.1.0-56-amd64"
    assert image.rootfs is not None
    image.rootfs.write_bytes(b"short")  # size no longer matches the manifest
    assert builder.find_image(tmp_path) is None
    image.rootfs.write_bytes(b"squashfs")
    assert builder.find_image(tmp_path) is not None
    (image.initrd).write_bytes(b"truncated!")
    assert builder.find_image(tmp_path) is None


def test_find_image_uses_the_resolution_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[int] = []

    def resolve() -> dict[str, str]:
        calls.append(1)
        return dict(PACKAGES)

    monkeypatch.setattr(builder, "resolve_packages", resolve)
    key = builder.image_key(PACKAGES, builder.boot_scripts())
    _fake_image(tmp_path / "images" / key, key)
    assert builder.find_image(tmp_path) is not None
    # The second lookup is served from the cache: resolve (apt-cache) is not run again.
    # (Its few ms are not asserted: a wall-clock bound flakes on a loaded xdist worker.)
    assert builder.find_image(tmp_path) is not None
    assert len(calls) == 1
    # A different image format (or root package list) is a different fingerprint.
    monkeypatch.setattr(builder, "FORMAT_VERSION", builder.FORMAT_VERSION + 1)
    assert builder.find_image(tmp_path) is None
    assert len(calls) == 2


def test_manifest_without_rootfs_is_not_this_format(tmp_path: Path) -> None:
    key = builder.image_key(PACKAGES, builder.boot_scripts())
    directory = tmp_path / key
    _fake_image(directory, key)
    manifest = json.loads((directory / "manifest.json").read_text())
    del manifest["rootfs_file"]
    (directory / "manifest.json").write_text(json.dumps(manifest))
    assert builder._load_image(directory, key) is None


def test_key_covers_both_init_scripts() -> None:
    scripts = builder.boot_scripts()
    assert builder.stage1_script() in scripts
    assert builder.init_script() in scripts
    assert f"/lower {builder.ROOTFS_TYPE} ro ".encode() in builder.stage1_script()


@pytest.mark.parametrize("script", ["stage1_script", "init_script"])
def test_init_scripts_parse(script: str, tmp_path: Path) -> None:
    shell = shutil.which("busybox") or shutil.which("sh")
    if shell is None:
        pytest.skip("no shell to check the syntax with")
    path = tmp_path / "init"
    path.write_bytes(getattr(builder, script)())
    argv = [shell, "sh", "-n", str(path)] if shell.endswith("busybox") else [shell, "-n", str(path)]
    assert subprocess.run(argv, capture_output=True, check=False).returncode == 0


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
    key = builder.image_key(PACKAGES, builder.boot_scripts())
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


def test_root_disk_modules_include_the_benchmark_file_system() -> None:
    # The host mounts benchmark disks without -t: ext4 must be loadable in the guest.
    assert {"ext4", "crc32c_generic", "virtio_console"} <= set(kmod.WANTED_MODULES)
    assert {"virtio_blk", "squashfs", "overlay"} <= set(kmod.STAGE1_MODULES)


#: Shell keywords and ash builtins stage1.sh uses (no applet link needed).
_SHELL_WORDS = {"if", "then", "fi", "for", "in", "do", "done", "while", "return", "exit",
                "export", "read", "echo", "cd", "exec", "break", "local", "set", "[", "test"}


def test_stage1_runs_only_the_applets_the_initramfs_links() -> None:
    # The initramfs carries only builder._STAGE1_APPLETS: a command stage1.sh gained
    # without its link would fail the boot ("not found") on every machine.
    text = builder.stage1_script().decode()
    functions = set(re.findall(r"^([a-z_]+)\(\) \{", text, re.MULTILINE))
    # The shebang's interpreter runs the script itself.
    commands = {PurePosixPath(text.splitlines()[0].removeprefix("#!")).name}
    for line in text.splitlines():
        code = line.split("#", 1)[0].strip()
        if not code or code.endswith("() {") or code in ("}", "done", "fi"):
            continue
        for part in re.split(r"\|\||&&|;|\bthen\b|\bdo\b|\bexec\b", code):
            words = part.split()
            if words and re.fullmatch(r"[a-z_][a-z_0-9]*", words[0]):
                commands.add(words[0])
    applets = {PurePosixPath(a).name for a in builder._STAGE1_APPLETS}
    assert commands - _SHELL_WORDS - functions == applets


def test_cpio_stores_a_hard_linked_file_once(tmp_path: Path) -> None:
    # The overlay's /rw/upper/bin/busybox is a hard link to /bin/busybox: the kernel
    # links names that share an inode number (link count >= 2), so the data goes in once.
    (tmp_path / "bin").mkdir()
    (tmp_path / "upper").mkdir()
    payload = b"busybox-bytes-" * 100
    (tmp_path / "bin" / "busybox").write_bytes(payload)
    os.link(tmp_path / "bin" / "busybox", tmp_path / "upper" / "busybox")
    (tmp_path / "other").write_bytes(b"x")
    out = io.BytesIO()
    write_newc(tmp_path, out, devices=())
    data = out.getvalue()
    assert data.count(payload) == 1
    headers = {}
    for name in (b"bin/busybox\0", b"upper/busybox\0", b"other\0"):
        head = data[data.index(name) - 110 : data.index(name)]
        fields = [int(head[6 + 8 * i : 14 + 8 * i], 16) for i in range(13)]
        headers[name] = (fields[0], fields[4], fields[6])  # ino, nlink, size
    ino, nlink, size = headers[b"bin/busybox\0"]
    assert (nlink, size) == (2, len(payload))
    assert headers[b"upper/busybox\0"] == (ino, 2, 0)
    assert headers[b"other\0"][0] != ino and headers[b"other\0"][1] == 1


def test_stage1_mount_table_order() -> None:
    # One `mount -a` in stage 1: the overlay before anything under /newroot, the guest's
    # file systems (the root disk's /etc/fstab) before /dev, /proc and /sys move.
    lines = [line.split() for line in builder.newroot_table().splitlines()]
    assert lines[0][1] == "/newroot" and lines[0][2] == "overlay"
    moves = [(line[0], line[1]) for line in lines if line[3] == "move"]
    assert moves == [(f"/{fs}", f"/newroot/{fs}") for fs in ("dev", "proc", "sys")]
    assert [line[3] for line in lines[-3:]] == ["move"] * 3
    guest = [line.split() for line in builder.guest_fstab().splitlines()]
    middle = lines[1:-3]
    assert [(m[0], m[2], m[3]) for m in middle] == [(g[0], g[2], g[3]) for g in guest]
    for mounted, listed in zip(middle, guest, strict=True):
        expected = listed[1] if listed[1].startswith("/dev/") else "/newroot" + listed[1]
        assert mounted[1] == expected
