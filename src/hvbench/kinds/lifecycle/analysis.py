"""What the lifecycle kind reads in a run's rows (seed 003 Fig. 13), as data its report
section draws.

Pure: functions of stored rows. A workload with at least two of ``create`` ... ``exit``
carrying a duration is a lifecycle workload; x is the cell's ``image_size`` (an
overlay's own file is a few hundred kB whatever the image), else ``create``'s
``size_bytes``; y is ``create``'s duration; the method is the cell's ``method``
identity field (``qcow2-overlay``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from hvbench.analysis.summaries import Row
from hvbench.analysis.trends import (
    SizeSeries,
    identity_of_cells,
    per_repetition,
    phase_duration,
    size_series,
    workloads_with,
)
from hvbench.kinds.lifecycle.driver import LIFECYCLE_PHASES


def lifecycle_workloads(rows: Sequence[Row]) -> list[str]:
    """Workloads with at least two of the lifecycle's phases (``create`` ... ``exit``)
    that carry a duration."""
    return workloads_with(rows, LIFECYCLE_PHASES)


def lifecycle_series(rows: Sequence[Row], workloads: Sequence[str]) -> list[SizeSeries]:
    """Per (platform, method): (image size, ``create`` seconds) of every repetition
    (seed 003 Fig. 13). The size is the cell's ``image_size`` (an overlay's file is a
    few hundred kB whatever the image), else the ``create`` phase's ``size_bytes``."""
    points: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    facts = identity_of_cells(rows)
    for (platform, workload, _), values in per_repetition(rows, workloads).items():
        method, image_size = facts[(platform, workload)]
        size = image_size or values.get(("create", "size_bytes"))
        seconds = phase_duration(values, "create")
        if size and seconds is not None:
            points[(platform, method)].append((size, seconds))
    return size_series(points)
