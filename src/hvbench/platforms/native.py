"""NativePlatform: the bare host, the baseline every guest is compared against.

Its scratch directory lives in the same work directory as the guests' disk images, so a
native workload's data file sits on the same filesystem (and device) as theirs.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hvbench.errors import HostError
from hvbench.host import facts
from hvbench.host.paths import make_owned_dir, work_dir
from hvbench.host.started import StartStop
from hvbench.model.spec import NicSpec
from hvbench.platforms.base import ExecResult
from hvbench.platforms.process import run_in_group


class NativePlatform(StartStop):
    """Runs commands directly on the host, in a private scratch directory.

    ``start()`` creates the scratch directory under the work directory; ``stop()``
    removes it (safe to call twice).
    """

    kind = "native"
    is_guest = False
    on_this_host = True

    def __init__(self, *, name: str = "native", base_dir: Path | None = None) -> None:
        self.name = name
        self._base_dir = base_dir
        self._scratch: Path | None = None

    def start(self) -> None:
        if self._scratch is None:
            base = self._base_dir or work_dir()
            self._scratch = make_owned_dir(base, "native-")

    def stop(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    # -- what a guest has and the host lacks (see the Platform protocol) -------------
    @property
    def accel(self) -> str | None:
        return None

    @property
    def argv(self) -> list[str] | None:
        return None

    @property
    def pid(self) -> int | None:
        return None

    @property
    def tap_names(self) -> tuple[str | None, ...]:
        return ()

    @property
    def nics(self) -> tuple[NicSpec, ...]:
        return ()

    @property
    def vhost(self) -> bool | None:
        return None

    def is_running(self) -> bool:
        """True while started: the host itself cannot die under a workload."""
        return self._scratch is not None

    def console_tail(self, lines: int = 40) -> str | None:
        return None

    def vcpu_threads(self) -> dict[int, int]:
        return {}

    def scratch_dir(self) -> str:
        if self._scratch is None:
            raise HostError("NativePlatform is not started")
        return str(self._scratch)

    def exec(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Run ``argv`` on the host in the scratch directory (with PR_SET_PDEATHSIG, so
        it dies with hvbench).

        On timeout the whole process group is killed and :class:`GuestTimeoutError`
        raised (the same error a guest command raises, so workloads treat both alike).
        """
        return run_in_group(argv, timeout=timeout, stdin=stdin, env=env, cwd=self._scratch,
                            what="native command")

    def write_file(self, path: str, data: bytes) -> None:
        Path(path).write_bytes(data)

    def read_file(self, path: str) -> bytes:
        return Path(path).read_bytes()

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "name": self.name, "label": "native",
            "scratch_dir": str(self._scratch) if self._scratch else None,
            "work_dir_fs": facts.free_disk(self._base_dir or work_dir()).get("filesystem"),
        }
