"""QMP connects are retried while QEMU has bound its socket but does not listen yet."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from qemu.qmp import QMPError

from hvbench.platforms.qemu import _connect_qmp, _refused


def test_a_bound_socket_that_never_listens_is_retried_until_the_deadline(
        tmp_path: Path) -> None:
    path = tmp_path / "qmp.sock"
    with socket.socket(socket.AF_UNIX) as bound:
        bound.bind(str(path))  # bound, not listening: what QEMU is for a moment
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="refused every connection") as info:
            _connect_qmp(path, started + 0.3, lambda: True)
        assert time.monotonic() - started >= 0.3
        assert _refused(info.value)


def test_the_deadline_passed_inside_a_refused_connect_is_the_same_timeout(
        tmp_path: Path) -> None:
    """The deadline already past when the first connect is refused (a loaded host):
    still the timeout, not the refusal itself."""
    path = tmp_path / "qmp.sock"
    with socket.socket(socket.AF_UNIX) as bound:
        bound.bind(str(path))
        with pytest.raises(TimeoutError, match="refused") as info:
            _connect_qmp(path, time.monotonic() - 1.0, lambda: True)
        assert _refused(info.value)


def test_a_missing_socket_of_a_dead_qemu_is_an_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="exited"):
        _connect_qmp(tmp_path / "none.sock", time.monotonic() + 5, lambda: False)


def test_other_failures_are_not_refusals() -> None:
    assert not _refused(QMPError("protocol error"))
    assert _refused(ConnectionRefusedError(111, "refused"))
