"""The cpu workload kind's spec (``kind = "cpu"``): stress-ng's CPU stressor on the
platform, for what virtualization costs plain computation (seed 004 lacked one)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from hvbench.model.workload import WorkloadSpec

#: The one phase a cpu workload stores.
PHASE = "cpu"


class CpuWorkloadSpec(WorkloadSpec):
    """``kind = "cpu"``: ``workers`` stress-ng CPU workers (``--cpu N``; 0: one per
    online CPU of the platform) for ``duration_s`` seconds (``--timeout``), each running
    ``method`` (``--cpu-method``; stress-ng's default cycles through all of them)."""

    kind: Literal["cpu"] = "cpu"
    workers: int = Field(default=1, ge=0, le=1024)
    duration_s: int = Field(default=10, ge=1, le=3600)
    method: str | None = Field(default=None, pattern=r"^[a-z0-9_]+$", max_length=40)
    timeout_s: float = Field(default=300.0, gt=0)

    @model_validator(mode="after")
    def _check(self) -> CpuWorkloadSpec:
        # stress-ng ends the run at --timeout; its start-up and report need a margin.
        if self.timeout_s <= self.duration_s:
            raise ValueError(f"timeout_s ({self.timeout_s:g}) must be longer than "
                             f"duration_s ({self.duration_s})")
        return self

    def phase_list(self) -> tuple[str, ...]:
        return (PHASE,)


def default_name(entry: Mapping[str, Any]) -> str:
    """A cpu entry's name: ``cpu``."""
    del entry
    return "cpu"
