"""``hvbench init [FILE]``: write a commented study from a few flags, checked by the
study parser before it is written."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, get_args

from rich.console import Console

from hvbench.errors import SpecError
from hvbench.model.spec import CacheMode, DiskBus
from hvbench.model.template import INIT_PROFILES, TemplateChoices, study_template

EXAMPLES = """examples:
  hvbench init                                  # study.toml: native vs virtio-blk, dd
  hvbench init disks.toml --bus virtio-blk --bus ide --cache writeback
  hvbench init io.toml --profile iozone --repetitions 5 --memory-mib 512"""


def register(sub: Any) -> None:
    init = sub.add_parser("init", help="write a commented study to start from",
                          epilog=EXAMPLES,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    init.add_argument("path", nargs="?", default="study.toml", metavar="FILE",
                      help="the study file to write (default: %(default)s)")
    init.add_argument("--name", help="the study's name (default: the file's name)")
    init.add_argument("--bus", action="append", choices=get_args(DiskBus), default=[],
                      help="a disk bus of the guest (repeatable: one guest each; "
                           "default virtio-blk)")
    init.add_argument("--cache", choices=get_args(CacheMode), default="none",
                      help="QEMU's host cache mode of the benchmark disk "
                           "(default: %(default)s)")
    init.add_argument("--profile", choices=INIT_PROFILES, default="dd",
                      help="the fio profile (default: %(default)s)")
    init.add_argument("--repetitions", type=int, default=3, metavar="N",
                      help="measured repetitions of each cell (default: %(default)s)")
    init.add_argument("--memory-mib", type=int, default=256, metavar="MIB",
                      help="the guest's RAM (default: %(default)s)")
    init.add_argument("--file-size-mib", type=int, default=64, metavar="MIB",
                      help="the size of fio's test file (default: %(default)s)")
    init.add_argument("--force", action="store_true", help="overwrite an existing FILE")
    init.set_defaults(handler=handle)


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Write the study; exit 2 (nothing written) when FILE exists without ``--force``
    or the choices do not make a valid study (the parser's words)."""
    from hvbench.host import facts
    from hvbench.model.study import parse_study

    path = Path(args.path)
    if path.exists() and not args.force:
        raise SpecError(f"{path} exists: give --force to overwrite it, or another FILE")
    choices = TemplateChoices(
        name=args.name or path.stem, buses=tuple(args.bus) or ("virtio-blk",),
        cache=args.cache, profile=args.profile, repetitions=args.repetitions,
        memory_mib=args.memory_mib, file_size_mib=args.file_size_mib)
    text = study_template(choices)
    study = parse_study(text, str(path), facts.memory_bytes() or 0)
    path.write_text(text)
    out.print(f"wrote {path}: study {study.study.name}, {len(study.cells)} cells "
              f"({', '.join(c.name for c in study.cells)})", markup=False, soft_wrap=True)
    out.print(f"next: hvbench run {path} --dry-run", markup=False, soft_wrap=True)
    return 0
