"""``hvbench --version`` names QEMU, fio and the guest image besides hvbench."""

from __future__ import annotations

import pytest

from hvbench import __version__
from hvbench.cli.main import main
from hvbench.cli.version import version_lines


def test_lines_name_every_version() -> None:
    lines = version_lines("7.2.22", "Debian 1:7.2", "3.33", ("0123456789abcdef", "6.1.0"))
    assert lines == [f"hvbench {__version__}", "QEMU 7.2.22 (Debian 1:7.2)", "fio 3.33",
                     "guest image 0123456789ab, kernel 6.1.0"]


def test_missing_pieces_say_so() -> None:
    lines = version_lines(None, None, None, None)
    assert lines[1:] == ["QEMU not installed", "fio not installed",
                         "guest image not built (hvbench image build)"]


def test_flag_prints_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"hvbench {__version__}"
    assert [line.split()[0] for line in out[1:]] == ["QEMU", "fio", "guest"]
