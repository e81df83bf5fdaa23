"""The commented study ``hvbench init`` writes (pure): a disk workload on the bare host
and in one guest per disk bus, every line saying what it sets, in the spelling
docs/studies.md documents. The caller checks the text with the study parser before it
writes it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: The disk profiles ``init`` offers (fio-job needs the user's job file).
INIT_PROFILES = ("dd", "iozone", "bonnie")
#: Where each profile's fio runs: dd reads and writes the raw disk, IOzone and
#: Bonnie++ files on a file system the guest makes.
_TARGETS = {"dd": "device", "iozone": "file", "bonnie": "file"}


@dataclass(frozen=True)
class TemplateChoices:
    """What ``init``'s flags choose."""

    name: str
    buses: tuple[str, ...] = ("virtio-blk",)
    cache: str = "none"
    profile: str = "dd"
    repetitions: int = 3
    memory_mib: int = 256
    file_size_mib: int = 64


def _toml_list(values: Sequence[str]) -> str:
    quoted = ", ".join(f'"{v}"' for v in values)
    return f"[{quoted}]" if len(values) > 1 else f'"{values[0]}"'


def study_template(choices: TemplateChoices) -> str:
    """The study text for ``choices`` (pure)."""
    target = _TARGETS[choices.profile]
    # The guest's benchmark disk holds the test file, plus a file system's own room
    # when the profile writes files.
    disk_mib = choices.file_size_mib + (32 if target == "device" else
                                        choices.file_size_mib // 2 + 64)
    disk = (f'bus = {_toml_list(choices.buses)}, cache = "{choices.cache}", '
            f'size = "{disk_mib}M", allocation = "preallocated"')
    where = ("the raw benchmark disk" if target == "device"
             else "files on a file system in the guest")
    return f'''# A study written by `hvbench init`; every field: docs/studies.md.
# Check it (and see its cells and estimated duration) with
#   hvbench run THIS_FILE --dry-run
# then run it with `hvbench run THIS_FILE`.

[study]
name = "{choices.name}"
# Measured repetitions of every cell (3 or more give a CoV and a confidence interval).
repetitions = {choices.repetitions}
# The seed of the shuffled cell order: the same seed, the same order.
seed = 1

# The bare host: every guest is compared with it.
[[platform]]
kind = "native"

# A QEMU guest; a list of values makes one platform per value (guest.virtio-blk, ...).
[[platform]]
kind = "qemu"
name = "guest"
machine = "pc"
memory_mib = {choices.memory_mib}
# The benchmark disk: bus, host cache mode, size and allocation of its image file.
disk = {{ {disk} }}

# fio reproducing {choices.profile} ({target}: {where}),
# with O_DIRECT so the page cache answers nothing.
[[workload]]
name = "{choices.profile}"
kind = "disk"
profile = "{choices.profile}"
target = "{target}"
file_size = "{choices.file_size_mib}M"
direct = true
'''
