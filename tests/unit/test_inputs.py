"""Reading user input files: any path gives the text or one SpecError line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hvbench.errors import SpecError
from hvbench.host.inputs import decode_text, read_text_input


def one_line_error(path: Path, max_bytes: int = 1 << 20) -> str:
    with pytest.raises(SpecError) as info:
        read_text_input(path, "a study", max_bytes)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    return message


def test_text_is_read(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_bytes("\ufeff[study]\nname = \"é\"\n".encode())
    assert read_text_input(path, "a study") == "[study]\nname = \"é\"\n"


def test_binary_file_names_the_offset(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_bytes(b"[study]\n\x7fELF\xff\xfe")
    assert "byte 12 (0xff) is not UTF-8" in one_line_error(path)


def test_nul_byte_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_bytes(b"abc\x00def")
    assert "byte 3 is a NUL" in one_line_error(path)


def test_directory(tmp_path: Path) -> None:
    assert "it is a directory" in one_line_error(tmp_path)


def test_fifo_does_not_block(tmp_path: Path) -> None:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    assert "it is a FIFO" in one_line_error(path)


def test_device(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="it is a device"):
        read_text_input("/dev/null", "a study")


def test_oversized(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    path.write_bytes(b"#" * 101)
    assert "larger than the limit of 100 bytes" in one_line_error(path, max_bytes=100)


def test_missing(tmp_path: Path) -> None:
    assert "No such file" in one_line_error(tmp_path / "nope.toml")


def test_decode_multibyte_offset() -> None:
    with pytest.raises(SpecError, match="byte 4 is a NUL"):
        decode_text("éé\0".encode(), "x", "text")
