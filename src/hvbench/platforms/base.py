"""What every platform offers: run a command, move files, describe itself."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class ExecResult:
    """The outcome of one command on a platform."""

    argv: tuple[str, ...]
    exit_code: int
    stdout: bytes
    stderr: bytes
    seconds: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def text(self) -> str:
        """stdout decoded as UTF-8 (invalid bytes replaced)."""
        return self.stdout.decode(errors="replace")


class Platform(Protocol):
    """A place where a workload runs: the host itself or a guest."""

    name: str
    kind: str

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def exec(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult: ...

    def write_file(self, path: str, data: bytes) -> None: ...

    def read_file(self, path: str) -> bytes: ...

    def scratch_dir(self) -> str:
        """A directory on this platform for a workload's small files (job files)."""
        ...

    def describe(self) -> dict[str, Any]:
        """A JSON-ready record of this platform: kind, spec, accelerator, argv."""
        ...
