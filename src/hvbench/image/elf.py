"""Read the dynamic section of ELF files and resolve shared-library closures in a tree.

The guest image is assembled from unpacked Debian packages, not from the host, so the
host's ``ldd`` (which asks the host's dynamic loader) would resolve the wrong files. We
read ``DT_NEEDED``/``DT_RUNPATH``/``DT_RPATH`` ourselves and look the names up inside the
staging tree. Only 64-bit little-endian ELF is supported: the guest is x86-64.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from hvbench.errors import ImageError

_ELF_MAGIC = b"\x7fELF"
_ELFCLASS64 = 2
_ELFDATA2LSB = 1
_PT_LOAD = 1
_PT_DYNAMIC = 2
_PT_INTERP = 3
_DT_NULL = 0
_DT_NEEDED = 1
_DT_STRTAB = 5
_DT_RPATH = 15
_DT_RUNPATH = 29

#: Directories the x86-64 Debian dynamic loader searches by default (ld.so.cache order on
#: bookworm, which has no merged /usr inside packages).
DEFAULT_LIBRARY_DIRS: tuple[str, ...] = (
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/lib",
    "/usr/lib",
)


@dataclass(frozen=True)
class DynamicInfo:
    """What the loader needs from one ELF file."""

    interpreter: str | None
    needed: tuple[str, ...]
    runpath: tuple[str, ...]


@dataclass(frozen=True)
class _Segment:
    kind: int
    offset: int
    vaddr: int
    filesz: int


def is_elf(path: Path) -> bool:
    """Return whether ``path`` is a regular file starting with the ELF magic."""
    if not path.is_file():
        return False
    with path.open("rb") as f:
        return f.read(4) == _ELF_MAGIC


def read_dynamic(path: Path) -> DynamicInfo:
    """Parse the program headers and dynamic section of ``path``.

    Raises:
        ImageError: the file is not a 64-bit little-endian ELF or is truncated.
    """
    data = path.read_bytes()
    try:
        return _parse(data)
    except (struct.error, IndexError, ValueError) as exc:
        raise ImageError(f"cannot parse ELF file {path}: {exc}") from exc


def _parse(data: bytes) -> DynamicInfo:
    if data[:4] != _ELF_MAGIC or data[4] != _ELFCLASS64 or data[5] != _ELFDATA2LSB:
        raise ValueError("not a 64-bit little-endian ELF file")
    phoff, phentsize, phnum = _header_fields(data)
    segments = [_segment(data, phoff + i * phentsize) for i in range(phnum)]
    interp = _interpreter(data, segments)
    dynamic = next((s for s in segments if s.kind == _PT_DYNAMIC), None)
    if dynamic is None:  # static binary (busybox-static): no libraries needed
        return DynamicInfo(interp, (), ())
    entries = list(_dynamic_entries(data, dynamic))
    strtab_addr = next((v for tag, v in entries if tag == _DT_STRTAB), None)
    if strtab_addr is None:
        raise ValueError("dynamic section without DT_STRTAB")
    strtab = _vaddr_to_offset(segments, strtab_addr)
    needed = tuple(_cstring(data, strtab + v) for tag, v in entries if tag == _DT_NEEDED)
    # DT_RUNPATH wins over DT_RPATH when both exist, as in the real loader.
    paths = [v for tag, v in entries if tag == _DT_RUNPATH] or [
        v for tag, v in entries if tag == _DT_RPATH
    ]
    runpath = tuple(p for v in paths for p in _cstring(data, strtab + v).split(":") if p)
    return DynamicInfo(interp, needed, runpath)


def _header_fields(data: bytes) -> tuple[int, int, int]:
    # e_phoff at 0x20 (8 bytes); e_phentsize, e_phnum at 0x36, 0x38 (2 bytes each).
    (phoff,) = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    return int(phoff), int(phentsize), int(phnum)


def _segment(data: bytes, offset: int) -> _Segment:
    kind, _flags, p_offset, vaddr, _paddr, filesz = struct.unpack_from("<IIQQQQ", data, offset)
    return _Segment(kind, p_offset, vaddr, filesz)


def _interpreter(data: bytes, segments: Sequence[_Segment]) -> str | None:
    seg = next((s for s in segments if s.kind == _PT_INTERP), None)
    return None if seg is None else _cstring(data, seg.offset)


def _dynamic_entries(data: bytes, seg: _Segment) -> Iterable[tuple[int, int]]:
    for pos in range(seg.offset, seg.offset + seg.filesz, 16):
        tag, value = struct.unpack_from("<qQ", data, pos)
        if tag == _DT_NULL:
            return
        yield int(tag), int(value)


def _vaddr_to_offset(segments: Sequence[_Segment], vaddr: int) -> int:
    for seg in segments:
        if seg.kind == _PT_LOAD and seg.vaddr <= vaddr < seg.vaddr + seg.filesz:
            return seg.offset + vaddr - seg.vaddr
    raise ValueError(f"address {vaddr:#x} is not in a loaded segment")


def _cstring(data: bytes, offset: int) -> str:
    end = data.index(b"\0", offset)
    return data[offset:end].decode("utf-8", "surrogateescape")


def _expand_origin(entry: str, origin: PurePosixPath) -> str:
    return entry.replace("${ORIGIN}", str(origin)).replace("$ORIGIN", str(origin))


def _exists_in(root: Path, guest_path: PurePosixPath) -> bool:
    # Symlinks inside the tree are absolute guest paths, so resolve them against the
    # tree root, never against the host's /.
    return resolve_in_tree(root, guest_path) is not None


def resolve_in_tree(root: Path, guest_path: PurePosixPath, _depth: int = 0) -> Path | None:
    """Map ``guest_path`` to the host file inside ``root``, following symlinks in the tree.

    Returns ``None`` when the path (or a symlink target) does not exist in the tree.
    """
    if _depth > 40:  # symlink loop
        return None
    current = PurePosixPath("/")
    parts = guest_path.parts[1:] if guest_path.is_absolute() else guest_path.parts
    for i, part in enumerate(parts):
        if part in ("", "."):
            continue
        if part == "..":
            current = current.parent
            continue
        candidate = current / part
        host = root / str(candidate).lstrip("/")
        if host.is_symlink():
            target = PurePosixPath(str(host.readlink()))
            base = target if target.is_absolute() else current / target
            rest = PurePosixPath(*parts[i + 1 :]) if i + 1 < len(parts) else None
            full = base / rest if rest is not None else base
            return resolve_in_tree(root, full, _depth + 1)
        if not host.exists():
            return None
        current = candidate
    return root / str(current).lstrip("/")


def find_library(
    root: Path,
    name: str,
    runpath: Sequence[str],
    origin: PurePosixPath,
    library_dirs: Sequence[str] = DEFAULT_LIBRARY_DIRS,
) -> PurePosixPath | None:
    """Return the guest path the loader would pick for ``name`` inside ``root``, or None."""
    if "/" in name:
        path = PurePosixPath(_expand_origin(name, origin))
        return path if _exists_in(root, path) else None
    search = [_expand_origin(p, origin) for p in runpath] + list(library_dirs)
    for directory in search:
        candidate = PurePosixPath(directory) / name
        if _exists_in(root, candidate):
            return candidate
    return None


def library_closure(
    root: Path,
    programs: Iterable[PurePosixPath],
    library_dirs: Sequence[str] = DEFAULT_LIBRARY_DIRS,
) -> set[PurePosixPath]:
    """Return every guest path (programs, interpreters, libraries) the programs need.

    ``programs`` are guest paths inside ``root``. The result includes the programs
    themselves; paths are the names the loader looks up (symlinks are kept as such so
    the caller can copy the link and its target).

    Raises:
        ImageError: a program or a needed library is missing from the tree.
    """
    seen: set[PurePosixPath] = set()
    pending = list(programs)
    while pending:
        guest = pending.pop()
        if guest in seen:
            continue
        seen.add(guest)
        host = resolve_in_tree(root, guest)
        if host is None:
            raise ImageError(f"{guest} is missing from the unpacked packages in {root}")
        if not is_elf(host):
            continue
        info = read_dynamic(host)
        if info.interpreter:
            pending.append(PurePosixPath(info.interpreter))
        for name in info.needed:
            found = find_library(root, name, info.runpath, guest.parent, library_dirs)
            if found is None:
                raise ImageError(f"{guest} needs {name}, which no unpacked package provides")
            pending.append(found)
    return seen


_PT_NOTE = 4
#: Xen's ELF note "PHYS32_ENTRY": the 32-bit PVH entry point QEMU uses to boot an
#: uncompressed vmlinux directly with -kernel.
_XEN_ELFNOTE_PHYS32_ENTRY = 18


def has_pvh_entry(data: bytes) -> bool:
    """Return whether the ELF image ``data`` carries a PVH entry point note."""
    try:
        phoff, phentsize, phnum = _header_fields(data)
        segments = [_segment(data, phoff + i * phentsize) for i in range(phnum)]
        for seg in segments:
            if seg.kind == _PT_NOTE and _notes_have_pvh(data, seg):
                return True
    except (struct.error, IndexError, ValueError):
        return False
    return False


def _notes_have_pvh(data: bytes, seg: _Segment) -> bool:
    pos, end = seg.offset, seg.offset + seg.filesz
    while pos + 12 <= end:
        namesz, descsz, kind = struct.unpack_from("<III", data, pos)
        name = data[pos + 12 : pos + 12 + namesz].rstrip(b"\0")
        if name == b"Xen" and kind == _XEN_ELFNOTE_PHYS32_ENTRY:
            return True
        pos += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
    return False
