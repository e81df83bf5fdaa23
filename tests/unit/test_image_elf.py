"""ELF dynamic-section parsing and library resolution on a fake tree."""

from __future__ import annotations

import struct
from pathlib import Path, PurePosixPath

import pytest

from hvbench.errors import ImageError
from hvbench.image.elf import has_pvh_entry, library_closure, read_dynamic, resolve_in_tree

_VADDR = 0x400000


def make_elf(needed: list[str], runpath: str = "", interp: str = "", notes: bytes = b"") -> bytes:
    """Build a minimal ELF64 with PT_LOAD, optional PT_INTERP/PT_NOTE and PT_DYNAMIC."""
    strtab = b"\0"
    offsets = []
    for name in [*needed, runpath, interp]:
        offsets.append(len(strtab))
        strtab += name.encode() + b"\0"
    dyn = [(1, off) for off in offsets[: len(needed)]]
    if runpath:
        dyn.append((29, offsets[len(needed)]))
    phnum = 4
    str_off = 64 + 56 * phnum
    dyn_off = str_off + len(strtab)
    dyn_off += -dyn_off % 8
    dyn.append((5, _VADDR + str_off))
    dyn.append((0, 0))
    dynamic = b"".join(struct.pack("<qQ", t, v) for t, v in dyn)
    note_off = dyn_off + len(dynamic)
    total = note_off + len(notes)
    interp_off = str_off + offsets[-1]
    header = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    header += struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, 0, 64, 0, 0, 64, 56, phnum, 0, 0, 0)
    phdrs = struct.pack("<IIQQQQQQ", 1, 5, 0, _VADDR, _VADDR, total, total, 0x1000)
    phdrs += struct.pack("<IIQQQQQQ", 2, 6, dyn_off, 0, 0, len(dynamic), len(dynamic), 8)
    kind = 3 if interp else 6  # PT_INTERP or an ignored PT_PHDR-like placeholder
    plen = len(interp) + 1 if interp else 0
    phdrs += struct.pack("<IIQQQQQQ", kind, 4, interp_off, 0, 0, plen, plen, 1)
    phdrs += struct.pack("<IIQQQQQQ", 4, 4, note_off, 0, 0, len(notes), len(notes), 4)
    body = header + phdrs + strtab
    body += b"\0" * (dyn_off - len(body))
    return body + dynamic + notes


def write(root: Path, guest: str, data: bytes) -> None:
    path = root / guest.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_read_dynamic(tmp_path: Path) -> None:
    write(tmp_path, "/bin/x", make_elf(["liba.so.1"], runpath="$ORIGIN/../lib", interp="/ld"))
    info = read_dynamic(tmp_path / "bin/x")
    assert info.needed == ("liba.so.1",)
    assert info.runpath == ("$ORIGIN/../lib",)
    assert info.interpreter == "/ld"


def test_not_elf_is_an_image_error(tmp_path: Path) -> None:
    write(tmp_path, "/x", b"#!/bin/sh\n")
    with pytest.raises(ImageError):
        read_dynamic(tmp_path / "x")


def test_closure_follows_runpath_symlinks_and_interpreter(tmp_path: Path) -> None:
    ld = "/lib64/ld-linux-x86-64.so.2"
    write(tmp_path, "/usr/bin/fio", make_elf(["librados.so.2", "libc.so.6"], interp=ld))
    write(
        tmp_path,
        "/usr/lib/x86_64-linux-gnu/librados.so.2.0.0",
        make_elf(["libceph-common.so.2"], runpath="/usr/lib/x86_64-linux-gnu/ceph"),
    )
    (tmp_path / "usr/lib/x86_64-linux-gnu/librados.so.2").symlink_to("librados.so.2.0.0")
    write(tmp_path, "/usr/lib/x86_64-linux-gnu/ceph/libceph-common.so.2", make_elf([]))
    write(tmp_path, "/lib/x86_64-linux-gnu/libc.so.6", make_elf([]))
    write(tmp_path, "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", make_elf([]))
    (tmp_path / "lib64").mkdir()
    (tmp_path / "lib64/ld-linux-x86-64.so.2").symlink_to(
        "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
    )
    closure = {str(p) for p in library_closure(tmp_path, [PurePosixPath("/usr/bin/fio")])}
    assert closure == {
        "/usr/bin/fio",
        ld,
        "/usr/lib/x86_64-linux-gnu/librados.so.2",
        "/usr/lib/x86_64-linux-gnu/ceph/libceph-common.so.2",
        "/lib/x86_64-linux-gnu/libc.so.6",
    }


def test_missing_library_names_the_program(tmp_path: Path) -> None:
    write(tmp_path, "/usr/bin/x", make_elf(["libnothere.so.1"]))
    with pytest.raises(ImageError, match=r"/usr/bin/x needs libnothere\.so\.1"):
        library_closure(tmp_path, [PurePosixPath("/usr/bin/x")])


def test_absolute_symlinks_resolve_inside_the_tree(tmp_path: Path) -> None:
    write(tmp_path, "/real/f", b"x")
    (tmp_path / "link").symlink_to("/real")
    assert resolve_in_tree(tmp_path, PurePosixPath("/link/f")) == tmp_path / "real/f"
    assert resolve_in_tree(tmp_path, PurePosixPath("/link/nope")) is None


def test_pvh_note_detection() -> None:
    note = struct.pack("<III", 4, 8, 18) + b"Xen\0" + b"\0" * 8
    other = struct.pack("<III", 4, 8, 5) + b"Xen\0" + b"\0" * 8
    assert has_pvh_entry(make_elf([], notes=other + note))
    assert not has_pvh_entry(make_elf([], notes=other))
