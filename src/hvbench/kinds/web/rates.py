"""Web's memory of a run: the maxima its max-rate cells measured, which relative rates
(of web cells and of scenarios' web neighbours) take a share of in the same round."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hvbench.kinds.web.spec import WebWorkloadSpec
from hvbench.model.study import Cell, Study, base_rounds, cell_references
from hvbench.run.cells.base import as_spec
from hvbench.run.cells.registry import StoredRows
from hvbench.run.plan import reference_names
from hvbench.store.records import MeasurementRecord

#: The metric a max-rate phase stores its maximum under (requests/s).
MAX_RATE_METRIC = "max_rate_rps"


class RateMaxima:
    """A :class:`~hvbench.run.cells.base.RoundMemory`: per (reference cell, repetition)
    the measured maximum per file size; on ``--resume`` the run's stored ones, read once
    when a lookup first misses."""

    def __init__(self, study: Study, stored: StoredRows) -> None:
        self.study = study
        self._stored = stored
        self._loaded = False
        #: (reference cell, repetition) -> file size (kB) -> measured max_rate_rps: what
        #: relative rates take a share of (warm-ups are repetition -1).
        self.maxima: dict[tuple[str, int], dict[int, float]] = {}
        #: The web max-rate cells (alone) some relative rate takes its maximum from.
        self.references = reference_names(study)

    def note(self, cell: Cell, repetition: int,
             measurements: Sequence[MeasurementRecord]) -> None:
        """Keep a web max-rate cell's maxima for the relative rates of its round."""
        if cell.name not in self.references:
            return
        kb_of = kb_of_phases(cell)
        self.maxima[(cell.name, repetition)] = {
            kb_of[m.phase]: m.value for m in measurements
            if m.metric == MAX_RATE_METRIC and m.phase in kb_of}

    def rate_refs(self, cell: Cell, repetition: int) -> Mapping[str, Mapping[int, float]]:
        """The maxima the cell's relative rates take a share of, by reference workload:
        its reference cells' in the same round (a resumed run reads them from the
        store); in an adaptive round above the base ones, which need not rerun the
        reference, the latest earlier round's. Empty without relative rates; a reference
        without a result is left out (the consumer names it)."""
        out: dict[str, dict[int, float]] = {}
        adaptive = repetition >= base_rounds(self.study)
        for name, ref in cell_references(self.study, cell).items():
            rounds = range(repetition, -1, -1) if adaptive else [repetition]
            for rep in rounds:
                found = self._maximum(ref, rep)
                if found:
                    out[name] = found
                    break
        return out

    def _maximum(self, ref: Cell, rep: int) -> dict[int, float] | None:
        if (ref.name, rep) not in self.maxima and rep >= 0 and not self._loaded:
            self._loaded = True
            self._load_stored()
        return self.maxima.get((ref.name, rep))

    def _load_stored(self) -> None:
        """The maxima of the reference cells the run already stored (``--resume``)."""
        kb_of = {c.name: kb_of_phases(c) for c in self.study.cells
                 if c.name in self.references}
        for row in self._stored():
            kb = kb_of.get(row.cell, {}).get(row.phase)
            if kb is not None and row.metric == MAX_RATE_METRIC:
                self.maxima.setdefault((row.cell, row.repetition), {})[kb] = row.value


def kb_of_phases(reference: Cell) -> dict[str, int]:
    """A reference (a web max-rate cell, checked when the study was parsed): phase
    -> the file size it serves, from its spec (phase names are not parsed)."""
    spec = as_spec(reference.workload.spec, WebWorkloadSpec)
    return dict(zip(spec.phase_list(), spec.file_kb, strict=True))
