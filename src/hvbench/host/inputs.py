"""Reading files a user hands to hvbench (study files, fio job files) safely.

Whatever the path names (a binary file passed by mistake, a directory, a FIFO that would
block forever, a huge file, bytes that are not UTF-8), the result is either the text or
one :class:`SpecError` line naming the file and what was expected, never a traceback.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from hvbench.errors import SpecError

#: Default limit for a text input: studies and job files are a few kB.
MAX_INPUT_BYTES = 1 << 20


def decode_text(data: bytes, path: str, what: str) -> str:
    """``data`` as UTF-8 text (a leading BOM is dropped).

    Raises :class:`SpecError` naming ``path``, ``what`` it should be and the byte offset
    of the first byte that is not UTF-8, or of a NUL byte (a sign of a binary file).
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: expected {what} as UTF-8 text, but byte {exc.start} "
                        f"(0x{data[exc.start]:02x}) is not UTF-8 (a binary file?)") from exc
    nul = text.find("\0")
    if nul >= 0:
        offset = len(text[:nul].encode())
        raise SpecError(f"{path}: expected {what} as text, but byte {offset} is a NUL "
                        "(a binary file?)")
    return text.removeprefix("\ufeff")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def read_input_bytes(path: str | Path, what: str, max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them.

    The file is opened with ``O_NONBLOCK`` and checked with ``fstat`` on the open
    descriptor, so a FIFO is refused instead of blocking and a file swapped for
    something else between the check and the read cannot slip through. Raises
    :class:`SpecError` (one line) when it cannot be opened, is not a regular file, or is
    larger than ``max_bytes`` (the limit is named).
    """
    name = str(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise SpecError(f"{name}: cannot read {what}: {exc.strerror}") from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise SpecError(f"{name}: expected {what} in a regular file, but it is "
                        f"{_kind(mode)}")
    with os.fdopen(fd, "rb") as file:
        try:
            data = file.read(max_bytes + 1)
        except OSError as exc:
            raise SpecError(f"{name}: cannot read {what}: {exc.strerror}") from exc
    if len(data) > max_bytes:
        raise SpecError(f"{name}: {what} is larger than the limit of {max_bytes} bytes")
    return data


def read_text_input(path: str | Path, what: str, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of the regular file ``path`` (see :func:`read_input_bytes` and
    :func:`decode_text`). Raises :class:`SpecError`, one line naming the file and what
    was expected: not a regular file, a FIFO, too large, not UTF-8 (with the offset)."""
    return decode_text(read_input_bytes(path, what, max_bytes), str(path), what)
