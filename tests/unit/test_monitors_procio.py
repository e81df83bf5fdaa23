"""/proc/PID/io of a process: its own block I/O, the cell's share of the device."""

from __future__ import annotations

from pathlib import Path

import pytest

from hvbench.monitors.readers import ProcessIoSampler, parse_proc_io

IO = ("rchar: 900\nwchar: 800\nsyscr: 3\nsyscw: 2\nread_bytes: {r}\nwrite_bytes: {w}\n"
      "cancelled_write_bytes: 0\n")


def test_parse_and_rates(tmp_path: Path) -> None:
    source = tmp_path / "io"
    source.write_text(IO.format(r=0, w=1 << 20))
    sampler = ProcessIoSampler(1, source=str(source))
    sampler.open()
    try:
        first = sampler.decode(sampler.sample())
        source.write_text(IO.format(r=512 << 10, w=3 << 20))
        second = sampler.decode(sampler.sample())
    finally:
        sampler.close()
    assert first == (0, 1 << 20)
    assert sampler.metrics(first, second, 2.0) == {"read_kb_s": 256.0, "write_kb_s": 1024.0}
    with pytest.raises(ValueError, match="read_bytes"):
        parse_proc_io("rchar: 1\n")
