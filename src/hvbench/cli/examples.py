"""Examples shown at the end of each command's ``--help`` (and in the man page). Kept
apart from the option definitions; tests/unit/test_cli_examples.py parses every example
line, so an example cannot drift from the options."""

from __future__ import annotations

import argparse
from typing import Any

#: Per command, example command lines (a ``#`` comment says what each does).
EXAMPLES: dict[str, tuple[str, ...]] = {
    "doctor": ("hvbench doctor", "hvbench doctor --refresh   # probe KVM again"),
    "image": ("hvbench image build", "hvbench image info"),
    "guest": ("hvbench guest exec -- uname -r",
              "hvbench guest exec --vcpus 2 --memory 1G -- cat /proc/cpuinfo"),
    "fio-compare": ("hvbench fio-compare --rw randread --bs 4K --size 32M",),
    "run": ("hvbench run                                 # the bundled quick study",
            "hvbench run examples/storage.toml --dry-run  # cells, boots, estimate",
            "hvbench run study.toml --db results.db --set study.repetitions=5",
            "hvbench run --resume 20261126-2301 --db results.db   # a unique prefix"),
    "tune": ("hvbench tune examples/tune-disk.toml",
             "hvbench tune --resume 20261126-2301"),
    "report": ("hvbench report --db .make/demo.db            # the latest run",
               "hvbench report 20261126-2301 --format html -o report.html",
               "hvbench report --format csv -o rows.csv"),
    "explain": ("hvbench explain --db .make/demo.db", "hvbench explain 20261126-2301"),
    "compare": ("hvbench compare 20261125-0900 20261126-2301   # two runs",
                "hvbench compare guest.ide guest.virtio-blk --run 20261126-2301"),
    "noise": ("hvbench noise examples/quick.toml --pairs 5", "hvbench noise --show"),
    "check": ("hvbench check --bounds bounds.toml --db results.db",),
    "db": ("hvbench db copy hvbench.db postgresql://me@db.example/hvbench",),
    "worker": ("hvbench worker --scheduler tcp://10.0.0.1:8786 --class gen2",),
}


def add_examples(sub: Any) -> None:
    """Give each command of ``sub`` listed in :data:`EXAMPLES` its examples as epilog
    (kept as written), unless the command already has an epilog."""
    for name, lines in EXAMPLES.items():
        parser = sub.choices.get(name)
        if parser is None or parser.epilog:
            continue
        parser.epilog = "examples:\n" + "\n".join(f"  {line}" for line in lines)
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
