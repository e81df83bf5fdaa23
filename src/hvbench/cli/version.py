"""``hvbench --version``: hvbench's own version and those of what it measures with.

A bug report or a result shared without these is hard to reproduce, so the flag names
the QEMU, fio and guest-image versions too (the same facts every stored run carries).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from hvbench import __version__


def version_lines(qemu: str | None, qemu_package: str | None, fio: str | None,
                  image: tuple[str, str] | None) -> list[str]:
    """The lines ``--version`` prints (pure). ``image``: (key, kernel release) of the
    guest image built for the current package versions, or None."""
    qemu_text = "not installed" if qemu is None else qemu + (
        f" ({qemu_package})" if qemu_package else "")
    image_text = ("not built (hvbench image build)" if image is None
                  else f"{image[0][:12]}, kernel {image[1]}")
    return [f"hvbench {__version__}", f"QEMU {qemu_text}",
            f"fio {fio or 'not installed'}", f"guest image {image_text}"]


def _image() -> tuple[str, str] | None:
    from hvbench.errors import HvbenchError
    from hvbench.image.builder import find_image

    try:
        image = find_image()
    except HvbenchError:  # apt-cache missing or versions unresolvable: no image to name
        return None
    return None if image is None else (image.key, image.kernel_release)


class VersionAction(argparse.Action):
    """Prints :func:`version_lines` and exits 0 (probing the tools takes ~0.1 s, so it
    happens only when the flag is given)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the versions of hvbench, QEMU, fio and the guest "
                              "image, then exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from hvbench.host import facts

        qemu = facts.qemu_info()
        argv, pattern = facts.TOOL_VERSION_PROBES["fio"]
        lines = version_lines(qemu.version, qemu.package, facts.tool_version(argv, pattern),
                              _image())
        sys.stdout.write("\n".join(lines) + "\n")
        parser.exit(0)
