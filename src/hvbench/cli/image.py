"""``hvbench image build`` and ``hvbench image info``: the bundled guest image."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console

from hvbench.cli.common import add_format_option, add_output_option, write_document


def register(sub: Any) -> None:
    image = sub.add_parser("image", help="the bundled guest image")
    image_sub = image.add_subparsers(dest="image_command", required=True, metavar="ACTION")
    build = image_sub.add_parser("build", help="build (or reuse) the guest image")
    build.add_argument("--force", action="store_true", help="rebuild even if cached")
    build.set_defaults(handler=handle_build)
    info = image_sub.add_parser("info", help="print the cached image's manifest")
    add_format_option(info)
    add_output_option(info)
    info.set_defaults(handler=handle_info)


def handle_build(args: argparse.Namespace, out: Console, err: Console) -> int:
    from hvbench.image.builder import build_image

    image = build_image(force=args.force, log=lambda line: err.print(f"[dim]{line}[/]"))
    out.print(f"guest image {image.key[:12]}: kernel {image.kernel_release}")
    out.print(f"  kernel {image.kernel}\n  initrd {image.initrd}")
    return 0


def handle_info(args: argparse.Namespace, out: Console, err: Console) -> int:
    from hvbench.image.builder import find_image

    image = find_image()
    if image is None:
        err.print("no guest image is built for the current package versions "
                  "(run `hvbench image build`)")
        return 1
    info = {"key": image.key, "kernel_release": image.kernel_release,
            "kernel": str(image.kernel), "initrd": str(image.initrd),
            "packages": image.packages}
    if args.format == "json":
        write_document(out, json.dumps(info, indent=2))
    else:
        for line in image_lines(info):
            out.print(line, markup=False, highlight=False, soft_wrap=True)
    return 0


def image_lines(info: dict[str, Any]) -> list[str]:
    """The manifest for reading, one ``field: value`` line each (paths whole, to copy);
    the package list (a few hundred entries) is counted: ``--format json`` has it
    (pure)."""
    width = max(len(key) for key in info)
    lines = []
    for key, value in info.items():
        shown = f"{len(value)} Debian packages (--format json lists them)" \
            if isinstance(value, dict | list) else value
        lines.append(f"{key.replace('_', ' ') + ':':<{width + 1}} {shown}")
    return lines
