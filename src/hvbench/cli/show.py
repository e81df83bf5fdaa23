"""``hvbench show STUDY PLATFORM``: the QEMU argv (``kind = "qemu"``) or libvirt domain
XML (``kind = "libvirt"``) that a study's platform would use; nothing is started."""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path
from typing import Any

from rich.console import Console

from hvbench.errors import SpecError
from hvbench.model.platform import PlatformSpec
from hvbench.model.study import Study, Variant
from hvbench.platforms.kinds import platform_kind

EXAMPLES = """examples:
  hvbench show examples/quick.toml guest.virtio-blk
  hvbench show study.toml my-libvirt-guest > domain.xml
  hvbench show examples/quick.toml guest.ide --set platform.guest.vcpus=2"""


def register(sub: Any) -> None:
    show = sub.add_parser(
        "show", help="print the QEMU command line or libvirt XML of a study's platform",
        description="Print what a study's platform would launch, without starting "
                    "anything: the QEMU argv of a kind = \"qemu\" platform, the domain "
                    "XML of a kind = \"libvirt\" one. Per-guest paths only known at start "
                    "are placeholders in capitals (WORKDIR, SOCKDIR, TAP0).",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    show.add_argument("study", help="study file (TOML)")
    show.add_argument("platform", help="the name of one of the study's platforms")
    show.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                      dest="overrides",
                      help="change the study file's PATH to VALUE first, as `run --set`")
    show.set_defaults(handler=handle)


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    """The platform's argv or XML on stdout, how accel was chosen on stderr.

    Raises:
        SpecError: the study does not load, names no such platform (the names are
            listed), or libvirt cannot express the platform.
    """
    from hvbench.run.runner import load_study

    study = load_study(Path(args.study), args.overrides)
    variant = find_platform(study, args.platform)
    for line in preview_lines(variant):
        out.print(line, markup=False, soft_wrap=True, highlight=False)
    return 0


def find_platform(study: Study, name: str) -> Variant[PlatformSpec]:
    """The platform variant ``name`` of ``study``. Raises :class:`SpecError` naming
    the closest name and every platform."""
    names = [p.name for p in study.platforms]
    for platform in study.platforms:
        if platform.name == name:
            return platform
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise SpecError(f"{study.path}: no platform {name!r}: {hint}its platforms are "
                    f"{', '.join(names)}")


def preview_lines(variant: Variant[PlatformSpec]) -> list[str]:
    """What ``show`` prints for ``variant``: a comment line on accel and placeholders,
    then the argv (one option per line, shell-quoted) or the domain XML, as the
    platform's kind previews it."""
    return platform_kind(variant.spec).preview(variant.spec, name=variant.name)
