"""What a study run will do, in order, before it does it.

One planning code for the runner and for dry runs: the items in run order (warm-ups,
then each repetition's shuffled cells), the groups that share one booted platform, how
many guests boot, and an estimated duration, from earlier runs of cells with the same
definition in a store when there are any, else from each kind's rough default
(:meth:`~hvbench.run.cells.base.CellKind.estimate_s`, documented in each kind's module)
plus :data:`BOOT_ESTIMATE_S` per guest boot the runner makes.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hvbench.model.study import (
    Cell,
    Study,
    base_rounds,
    cell_order,
    cell_references,
    repetition_rule,
)
from hvbench.platforms.kinds import platform_kind
from hvbench.run.cells.registry import cell_kind
from hvbench.store.records import cell_record

if TYPE_CHECKING:
    from hvbench.store.database import Store


#: Rough seconds one guest takes to boot under TCG (to the agent's first answer).
BOOT_ESTIMATE_S = 10.0


@dataclass(frozen=True)
class PlannedItem:
    """One (repetition, cell) of a run; ``repetition`` is -1 for a warm-up, whose
    ``position`` is -1 too (warm-ups are not stored)."""

    repetition: int
    cell: Cell
    position: int


@dataclass(frozen=True)
class StudyPlan:
    """A dry run: what :func:`~hvbench.run.runner.run_study` would do."""

    study: str
    cells: tuple[str, ...]
    repetitions: int
    warmup: int
    items: tuple[PlannedItem, ...]
    #: Boots of the cells' own platforms (one per group of items on a guest hvbench
    #: starts; an existing domain is attached to, not booted).
    platform_boots: int
    #: Every guest: the platforms', the scenarios' neighbours and on-demand guests,
    #: network peers, and the guests lifecycle and propagation cells boot themselves.
    guest_boots: int
    estimate_s: float
    #: Cells whose estimate comes from earlier runs in the store.
    from_history: tuple[str, ...]
    #: Per cell, the estimated seconds of one repetition (boots by the runner aside).
    cell_seconds: Mapping[str, float]
    #: Adaptive repetitions: the estimate if every adaptive cell ran to its maximum
    #: (None when no cell is adaptive).
    estimate_max_s: float | None = None
    #: Attaches to existing guests of the user's (one per group of items on one).
    attaches: int = 0
    #: The platforms that are attached to, never booted (existing domains).
    attached: tuple[str, ...] = ()


def repetition_order(study: Study, repetition: int) -> list[Cell]:
    """The cells of one repetition in run order (warm-up round ``r`` is repetition
    ``-1 - r``): see :func:`~hvbench.model.study.cell_order`, then
    :func:`references_first`."""
    order = cell_order(study.cells, study.study.seed, repetition, study.study.ab)
    return references_first(order, reference_names(study))


def reference_names(study: Study) -> set[str]:
    """The cells whose measured maxima some relative rate of the study takes."""
    return {ref.name for cell in study.cells for ref in cell_references(study, cell).values()}


def references_first(order: Sequence[Cell], references: Collection[str]) -> list[Cell]:
    """``order`` with the platform groups holding a reference cell (a max-rate web cell
    alone that a relative rate takes its maximum from) moved to the front, and each
    reference first in its group, so every round measures the maxima before any cell
    that offers a share of them. Otherwise the shuffled order is kept."""
    if not references:
        return list(order)
    grouped: list[list[Cell]] = []
    for cell in order:
        if grouped and grouped[-1][0].platform_name == cell.platform_name:
            grouped[-1].append(cell)
        else:
            grouped.append([cell])

    def refs_in(group: list[Cell]) -> bool:
        return any(c.name in references for c in group)

    out: list[Cell] = []
    for group in [g for g in grouped if refs_in(g)] + [g for g in grouped if not refs_in(g)]:
        out += [c for c in group if c.name in references]
        out += [c for c in group if c.name not in references]
    return out


def round_cells(study: Study, repetition: int) -> list[Cell]:
    """The cells of measured round ``repetition`` (below :func:`base_rounds`) in run
    order: those whose minimum number of repetitions is above it."""
    return [c for c in repetition_order(study, repetition)
            if repetition < repetition_rule(study, c).min]


def warmup_items(study: Study) -> list[PlannedItem]:
    """Every warm-up item, round after round."""
    return [PlannedItem(-1, cell, -1) for round_ in range(study.study.warmup)
            for cell in repetition_order(study, -1 - round_)]


def measured_items(study: Study, done: Collection[tuple[str, int]] = ()) -> list[PlannedItem]:
    """Every (repetition, cell) not in ``done`` (cell name, repetition), in run order;
    positions count every item, done or not, so a resumed run keeps them."""
    items: list[PlannedItem] = []
    position = 0
    for rep in range(base_rounds(study)):
        for cell in round_cells(study, rep):
            if (cell.name, rep) not in done:
                items.append(PlannedItem(rep, cell, position))
            position += 1
    return items


def run_items(study: Study, done: Collection[tuple[str, int]] = (), *,
              warmup: bool = True) -> list[PlannedItem]:
    """The warm-ups (unless ``warmup`` is False: a resumed run has had them), then the
    measured items still to do."""
    return (warmup_items(study) if warmup else []) + measured_items(study, done)


def groups(items: Sequence[PlannedItem]) -> Iterator[list[PlannedItem]]:
    """Consecutive items of one repetition on one platform (and scenario): the runner
    boots that platform once for them."""
    group: list[PlannedItem] = []
    for item in items:
        if group and (item.repetition != group[0].repetition
                      or item.cell.platform_name != group[0].cell.platform_name):
            yield group
            group = []
        group.append(item)
    if group:
        yield group


def _needs_platform(group: Sequence[PlannedItem]) -> bool:
    """Whether the group's platform is a guest that some item needs started."""
    if not group or not platform_kind(group[0].cell.platform.spec).is_guest:
        return False
    return any(cell_kind(item.cell).boots_platform for item in group)


def _attached(group: Sequence[PlannedItem]) -> bool:
    return group[0].cell.platform.spec.attached()


def platform_boots(group: Sequence[PlannedItem]) -> int:
    """1 when the group's platform is a guest hvbench boots and some item needs it (a
    reboot after a guest dies is not foreseen), else 0; an existing guest of the
    user's is attached to, not booted (:func:`platform_attaches`)."""
    return int(_needs_platform(group) and not _attached(group))


def platform_attaches(group: Sequence[PlannedItem]) -> int:
    """1 when the group's platform is an existing guest hvbench attaches to, else 0."""
    return int(_needs_platform(group) and _attached(group))


def group_guests(group: Sequence[PlannedItem]) -> int:
    """Every guest a group boots: its platform, its scenario's neighbours (once) and
    on-demand guests (per measured window), and the items' own guests."""
    booted = platform_boots(group)
    total = booted
    scenario = group[0].cell.scenario if group else None
    if scenario is not None and booted:
        total += scenario.spec.guest_count()
    for item in group:
        kind, spec = cell_kind(item.cell), item.cell.workload.spec
        total += kind.guests(spec)
        start = scenario.spec.start if scenario is not None else None
        if start is not None and kind.boots_platform:
            total += start.count * max(1, len(spec.phase_list()))
    return total


def done_in(store: Store, run_id: str) -> set[tuple[str, int]]:
    """The (cell name, repetition) pairs of run ``run_id`` already stored as ok: what
    resuming it skips. Raises :class:`StoreError` when the store cannot be read."""
    names = {c.id: c.name for c in store.cells(run_id)}
    return {(names[cell_id], rep) for cell_id, rep in store.done(run_id)}


def plan_study(study: Study, store: Store | None = None, *,
               done: Collection[tuple[str, int]] = (), warmup: bool = True) -> StudyPlan:
    """The plan of running ``study`` (``done``: (cell, repetition) pairs a resumed run
    skips). Pure but for reading ``store``: raises :class:`StoreError` when it cannot
    be read."""
    items = run_items(study, done, warmup=warmup)
    history = store.cell_durations([cell_record(c) for c in study.cells]) if store else {}
    seconds = _item_seconds(study.cells, history)
    boots = guests = attaches = 0
    for group in groups(items):
        boots += platform_boots(group)
        guests += group_guests(group)
        attaches += platform_attaches(group)
    attached = tuple(dict.fromkeys(
        c.platform.name for c in study.cells
        if c.platform.spec.attached()))
    estimate = sum(seconds[item.cell.name] for item in items) + boots * BOOT_ESTIMATE_S
    return StudyPlan(
        estimate_max_s=_adaptive_max_s(study, done, seconds, estimate),
        study=study.study.name, cells=tuple(c.name for c in study.cells),
        repetitions=base_rounds(study), warmup=study.study.warmup if warmup else 0,
        items=tuple(items), platform_boots=boots, guest_boots=guests, estimate_s=estimate,
        from_history=tuple(c.name for c in study.cells if history.get(c.name)),
        cell_seconds=seconds, attaches=attaches, attached=attached)


def _adaptive_max_s(study: Study, done: Collection[tuple[str, int]],
                    seconds: Mapping[str, float], estimate: float) -> float | None:
    """``estimate`` plus every adaptive cell's rounds above its minimum (with a boot
    each for a guest), or None when no cell is adaptive."""
    extra = 0.0
    for cell in study.cells:
        rule = repetition_rule(study, cell)
        if not rule.adaptive:
            continue
        rounds = sum(1 for r in range(rule.min, rule.max) if (cell.name, r) not in done)
        boot = BOOT_ESTIMATE_S if platform_kind(cell.platform.spec).is_guest else 0.0
        extra += rounds * (seconds[cell.name] + boot)
    return None if not any(repetition_rule(study, c).adaptive for c in study.cells) \
        else estimate + extra


def _item_seconds(cells: Sequence[Cell], history: Mapping[str, Sequence[float]]
                  ) -> dict[str, float]:
    """Per cell, the median of its earlier durations, else its kind's default (plus a
    boot per guest the cell boots itself, which the default leaves out)."""
    out: dict[str, float] = {}
    for cell in cells:
        earlier = history.get(cell.name)
        if earlier:
            out[cell.name] = statistics.median(earlier)
            continue
        kind, spec = cell_kind(cell), cell.workload.spec
        out[cell.name] = kind.estimate_s(spec) + kind.guests(spec) * BOOT_ESTIMATE_S
    return out
