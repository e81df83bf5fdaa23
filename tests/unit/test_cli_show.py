"""`hvbench show STUDY PLATFORM`: the QEMU argv and the libvirt XML a study's platform
would use (golden files), built by the platforms' own functions, nothing started."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from hvbench.cli.main import main
from hvbench.model.qemu_argv import ResolvedAccel
from hvbench.model.spec import VmSpec
from hvbench.platforms import preview

EXAMPLES = Path(__file__).parents[2] / "examples"
FIXTURES = Path(__file__).parents[1] / "fixtures" / "show"
FILES = preview.GuestFiles("/img/vmlinux", "/img/initrd.img", "/img/rootfs.img")


@pytest.fixture(autouse=True)
def fixed_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """The image paths and the accelerator of a host with a built image and no KVM."""
    monkeypatch.setattr(preview, "guest_files", lambda: FILES)

    def accel(vm: VmSpec) -> tuple[ResolvedAccel, str]:
        return "tcg", "accel = 'auto': TCG (test host)"
    monkeypatch.setattr(preview, "preview_accel", accel)
    monkeypatch.setattr("hvbench.host.facts.vhost_net_available", lambda: False)


def _golden(name: str, text: str) -> None:
    golden = FIXTURES / name
    if os.environ.get("UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text()


@pytest.mark.parametrize(("study", "platform", "golden"), [
    ("quick.toml", "guest.virtio-blk", "quick-virtio-blk.golden.txt"),
    ("libvirt.toml", "libvirt", "libvirt.golden.txt"),
    ("libvirt.toml", "native", "native.golden.txt"),
])
def test_show_prints_what_the_platform_would_launch(
        study: str, platform: str, golden: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(EXAMPLES / study), platform]) == 0
    _golden(golden, capsys.readouterr().out)


def test_the_argv_lines_are_one_shell_command() -> None:
    argv = preview.qemu_argv(VmSpec(), "g", "tcg", FILES)
    text = "\n".join(preview.argv_lines(argv))
    assert shlex.split(text.replace("\\\n", " ")) == argv


def test_a_wrong_platform_name_lists_the_names_and_the_closest(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(EXAMPLES / "quick.toml"), "guest.virtio"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'guest.virtio-blk'?" in err
    assert "its platforms are native, guest.virtio-blk, guest.ide" in err


@pytest.mark.skipif(shutil.which("virt-xml-validate") is None,
                    reason="virt-xml-validate (libvirt-clients) is not installed")
def test_the_shown_domain_xml_is_valid_by_libvirts_schema(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(EXAMPLES / "libvirt.toml"), "libvirt"]) == 0
    path = tmp_path / "domain.xml"
    path.write_text(capsys.readouterr().out)
    done = subprocess.run(["virt-xml-validate", str(path), "domain"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
