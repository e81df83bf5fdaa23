"""Parsing of apt-cache output and .deb file naming (no apt calls)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hvbench.errors import ImageError
from hvbench.image.apt import deb_glob, find_deb, parse_depends_closure, parse_policy_candidates

DEPENDS = """\
fio
  Depends: libaio1
 |Depends: debconf
  Depends: <debconf-2.0>
    cdebconf
    debconf
libaio1
<debconf-2.0>
<perl:any>
debconf
  Depends: perl-base
cdebconf
perl-base
debconf
"""

POLICY = """\
fio:
  Installed: (none)
  Candidate: 3.33-3
  Version table:
     3.33-3 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
busybox-static:
  Installed: (none)
  Candidate: 1:1.35.0-4+deb12u1+b1
"""


def test_closure_keeps_real_packages_once_in_order() -> None:
    assert parse_depends_closure(DEPENDS) == ["fio", "libaio1", "debconf", "cdebconf", "perl-base"]


def test_policy_candidates() -> None:
    assert parse_policy_candidates(POLICY) == {
        "fio": "3.33-3",
        "busybox-static": "1:1.35.0-4+deb12u1+b1",
    }


def test_policy_without_candidate_is_an_error() -> None:
    with pytest.raises(ImageError, match="gone"):
        parse_policy_candidates("gone:\n  Installed: (none)\n  Candidate: (none)\n")


def test_deb_glob_escapes_epoch_like_apt() -> None:
    assert deb_glob("busybox-static", "1:1.35.0-4+deb12u1+b1") == (
        "busybox-static_1%3a1.35.0-4+deb12u1+b1_*.deb"
    )


def test_find_deb(tmp_path: Path) -> None:
    (tmp_path / "fio_3.33-3_amd64.deb").write_bytes(b"")
    (tmp_path / "fio_3.32-1_amd64.deb").write_bytes(b"")
    assert find_deb(tmp_path, "fio", "3.33-3") == tmp_path / "fio_3.33-3_amd64.deb"
    assert find_deb(tmp_path, "fio", "3.34-1") is None
