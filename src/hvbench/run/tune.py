"""``hvbench tune``: search the I/O configuration space for the setting that brings the
workload closest to native.

A tuning run is an ordinary run in the store: every configuration tried is a platform
(named from its settings, its definition in the cell's fields) times the objective's
workloads, and every measurement a repetition of those cells; so ``report``,
``explain`` and ``compare`` read it like any run, and ``--resume`` rebuilds the search
from the stored cells without measuring anything again.

The search (:class:`Search`):

1. the native baseline is measured first, ``max_repetitions`` times (no boot: cheap);
2. **explore**: Optuna's TPE sampler over the categorical axes proposes a configuration;
   one that is invalid or excluded is told to the sampler as pruned (never measured,
   not counted), one already measured is told its stored value. The first proposals are
   enqueued: the default configuration, then the fixes its diagnosis names (a
   ``flush-per-write`` verdict tries the other cache modes first). Each new one is
   measured with ``rungs[0]`` repetitions, the default with the last rung's (its
   diagnosis is steadier over several, and the finals test against it anyway);
   In the last ``neighbour_share`` of the exploration the proposals are the
   one-axis neighbours of the best configuration so far (a local step after the
   sampler's global one: in a categorical space whose axes act nearly independently,
   the best is most often one setting away from a good one);
3. **promote** (asynchronous successive halving): a configuration in the best
   ``1/eta`` of those that completed rung ``k`` is measured up to ``rungs[k+1]``;
4. **finals**, once the trial budget or ``explore_share`` of the time budget is spent:
   the ``finalists`` best (and the default, for the test against it) are brought to
   the last rung, then repeated one repetition at a time until the best one's 95 %
   interval separates from the others' or they reach ``max_repetitions``; then the
   winner and the default get repetitions until the permutation test between them can
   reach ``alpha`` (or ``max_repetitions``).

The time budget counts the measuring of every session (stored repetitions and boots)
plus the current session's wall time; a measurement whose estimated length would
overrun it is not started.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import random
import statistics
import time
import tomllib
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hvbench.analysis.compare import min_p_value
from hvbench.analysis.diagnosis import RULES, diagnose_all
from hvbench.analysis.metrics import direction_of, is_known
from hvbench.analysis.resources import build_models
from hvbench.analysis.stats import summarize
from hvbench.analysis.summaries import phase_stats
from hvbench.analysis.tuning import (
    better,
    native_means,
    objective_of,
    ranked,
    scores,
    separated,
)
from hvbench.errors import SpecError
from hvbench.host import facts, interrupt
from hvbench.host.inputs import read_text_input
from hvbench.host.paths import work_dir
from hvbench.model.platform import PlatformSpec, is_host_kind
from hvbench.model.study import Variant
from hvbench.model.tune import Params, TuneSpec, params_of_definition, parse_tune
from hvbench.run.cells.registry import kind_of
from hvbench.run.lab_session import LabSession
from hvbench.run.plan import PlannedItem
from hvbench.run.runner import RunLock, StudyRunner, remove_orphans

# Optuna (~0.3 s with NumPy) is imported by the methods that sample: `run --resume` and
# HTML reports import this module to tell a tuning run apart, only `hvbench tune` searches.
if TYPE_CHECKING:
    import optuna

    from hvbench.store.database import Store


#: How many proposals the sampler may make in a row that are invalid or already
#: measured before a not yet measured configuration is drawn at random instead.
MAX_ASKS = 64
#: Rules whose fix names several settings (their ``knob`` holds at most one, or none):
#: each setting the fix text names, tried as a seed in this order.
FIX_SETTINGS: Mapping[str, tuple[tuple[str, tuple[Any, ...]], ...]] = {
    "few-in-flight": (("disk.aio", ("native", "io_uring")), ("disk.iothread", (True,))),
    "request-size-shrunk": (("disk.bus", ("virtio-blk", "virtio-scsi")),
                            ("disk.allocation", ("full", "preallocated")),
                            ("disk.cache", ("none",)), ("disk.aio", ("native",))),
    "main-loop-saturated": (("disk.iothread", (True,)),),
}
#: The rough seconds of one repetition before any was measured (a TCG boot and a short
#: fio phase): only used to decide whether a measurement still fits the time budget.
FIRST_REPETITION_S = 15.0


def catalogue_direction(metric: str) -> str | None:
    """``higher``/``lower``/``neutral`` for a catalogue metric, None for an unknown one."""
    return direction_of(metric) if is_known(metric) else None


def host_aio_modes() -> list[str]:
    """The AIO modes this host's QEMU opens, as ``hvbench doctor`` reports them."""
    directory = str(work_dir())
    return [m for m in ("threads", "native", "io_uring")
            if facts.qemu_supports_aio(m, directory=directory)]


def load_tune(path: str, text: str | None = None, *, seed: int | None = None) -> TuneSpec:
    """Read (unless ``text`` is given: a stored run's) and parse a tune file, and run
    each workload kind's checks. Raises :class:`SpecError` (exit code 2)."""
    if text is None:
        text = read_text_input(Path(path), "a tune file")
    spec = parse_tune(text, path, facts.memory_bytes() or 0, host_aio_modes,
                      catalogue_direction, seed=seed)
    for cell in spec.cells(spec.base):
        kind_of(cell.workload.spec.kind).check(cell, path)
    # The run records the sampler's seed as its own: a resume samples from the same.
    section = spec.study.study.model_copy(update={"seed": spec.seed})
    return dataclasses.replace(spec, study=dataclasses.replace(spec.study, study=section))


# -- events ---------------------------------------------------------------------------
@dataclass(frozen=True)
class TuneEvent:
    """What the progress display shows: trial k of N, the stage, the configuration
    being measured, the best so far and the time left."""

    stage: str
    trial: int
    trials: int | None
    config: str
    repetitions: int
    state: str
    best: str | None
    best_mean: float | None
    left_s: float | None


ProgressHook = Callable[[TuneEvent], None]


# -- the search -------------------------------------------------------------------------
@dataclass
class Config:
    """One configuration tried: its parameters, objective per repetition, repetitions
    attempted and whether one failed."""

    name: str
    params: Params
    scores: list[float] = field(default_factory=list)
    attempted: int = 0
    failed: bool = False

    @property
    def mean(self) -> float | None:
        return math.fsum(self.scores) / len(self.scores) if self.scores else None


@dataclass(frozen=True)
class Action:
    """Measure ``variant`` up to ``repetitions`` repetitions (stage: explore, promote,
    final)."""

    stage: str
    params: Params
    repetitions: int


Measure = Callable[[Variant[PlatformSpec], Sequence[int]], None]
Scores = Callable[[], tuple[dict[str, list[float]], set[str]]]
#: The default's diagnosis: (knob, better values) of its findings, dominant first.
#: A configuration to try early: settings changed together from the default's.
Seed = tuple[tuple[str, Any], ...]
Seeds = Callable[[str], list[Seed]]


class Search:
    """The search over ``spec``'s space, driving ``measure`` (which stores the
    repetitions it is given) and reading back ``read`` (name -> objective per stored
    repetition, and the names with a failed repetition). Guests are the caller's
    business: with fakes this runs in unit tests."""

    def __init__(self, spec: TuneSpec, measure: Measure, read: Scores, *,
                 seeds: Seeds | None = None, progress: ProgressHook | None = None,
                 spent_before_s: float = 0.0, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self.spec = spec
        self.halving = spec.section.halving
        self.budget = spec.section.budget
        self._measure = measure
        self._read = read
        self._seeds = seeds or (lambda name: [])
        self._progress = progress or (lambda event: None)
        self._clock = clock
        self._started = clock()
        self._spent_before = spent_before_s
        self.configs: dict[str, Config] = {}
        self.order: list[str] = []
        self.valid = {p: spec.trial_variant(p) for p in spec.space}
        self.default = spec.trial_variant(spec.default_params) \
            if spec.default_params in self.valid else None
        self._pending: dict[str, optuna.trial.Trial] = {}
        self._seeded = False
        self._rng = random.Random(spec.seed)  # noqa: S311 - sampling, not secrets
        self.repetition_s: list[float] = []
        #: Seconds spent inside ``measure`` (the rest of the wall time is the search's).
        self.measure_s = 0.0
        self.study = self._new_study()

    # -- optuna ---------------------------------------------------------------------------
    def _new_study(self) -> optuna.Study:
        import optuna  # noqa: PLC0415 - deferred

        optuna.logging.set_verbosity(logging.WARNING)
        with warnings.catch_warnings():
            # multivariate TPE is marked experimental; it models the axes jointly,
            # which is what makes invalid combinations learnable.
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = optuna.samplers.TPESampler(
                seed=self.spec.seed, n_startup_trials=3, multivariate=True)
        return optuna.create_study(direction=self.spec.goal, sampler=sampler)

    @property
    def distributions(self) -> dict[str, optuna.distributions.BaseDistribution]:
        import optuna  # noqa: PLC0415 - deferred

        return {axis: optuna.distributions.CategoricalDistribution(list(values))
                for axis, values in self.spec.axes.items()}

    def _rung0_value(self, config: Config) -> float | None:
        first = config.scores[: self.halving.rungs[0]]
        return math.fsum(first) / len(first) if first else None

    def _told(self, config: Config) -> optuna.trial.FrozenTrial:
        import optuna  # noqa: PLC0415 - deferred

        value = self._rung0_value(config)
        state = (optuna.trial.TrialState.COMPLETE if value is not None
                 else optuna.trial.TrialState.FAIL)
        return optuna.trial.create_trial(params=dict(config.params),
                                         distributions=self.distributions,
                                         value=value, state=state)

    # -- state ------------------------------------------------------------------------------
    def restore(self, stored: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Rebuild the search from stored configurations (platform name, definition)
        in the order they were first measured: their scores, and the sampler's history,
        so nothing is measured again. Raises :class:`SpecError` for a stored
        configuration outside the space."""
        axes = tuple(self.spec.axes)
        for name, definition in stored:
            if name in self.configs:
                continue
            params = params_of_definition(definition, axes)
            if params not in self.valid:
                # The default axes follow the host (its AIO modes): resumed elsewhere,
                # a stored configuration may fall outside them.
                raise SpecError(f"{self.spec.study.path}: stored configuration {name} is "
                                "outside the search space on this host; resume where the "
                                "search started, or give [tune.axes] explicitly")
            self.configs[name] = Config(name, params)
        self._refresh()
        for name in list(self.configs):
            config = self.configs[name]
            if config.attempted == 0:
                del self.configs[name]  # stored as a cell, never measured: not tried
                continue
            self.order.append(name)
            self.study.add_trial(self._told(config))

    def _refresh(self) -> None:
        by_name, failed = self._read()
        for name, config in self.configs.items():
            config.scores = list(by_name.get(name, []))
            config.failed = name in failed
            config.attempted = len(config.scores) + int(config.failed)

    # -- budget -----------------------------------------------------------------------------
    def spent_s(self) -> float:
        return self._spent_before + self._clock() - self._started

    def left_s(self) -> float | None:
        seconds = self.budget.seconds
        return None if seconds is None else max(0.0, seconds - self.spent_s())

    def _estimate_s(self, repetitions: int) -> float:
        one = statistics.median(self.repetition_s) if self.repetition_s else FIRST_REPETITION_S
        return one * repetitions

    def _fits(self, repetitions: int) -> bool:
        left = self.left_s()
        return left is None or self._estimate_s(repetitions) <= left

    def explored(self) -> int:
        """Configurations measured (or tried and failed) so far."""
        return len(self.order)

    def _may_explore(self) -> bool:
        if self.budget.trials is not None and self.explored() >= self.budget.trials:
            return False
        if len(self.order) >= len(self.valid):
            return False
        seconds = self.budget.seconds
        return seconds is None or self.spent_s() < self.halving.explore_share * seconds

    # -- decisions ----------------------------------------------------------------------------
    def _measured(self) -> dict[str, Config]:
        return {n: c for n, c in self.configs.items() if c.scores and not c.failed}

    def _promotion(self) -> Action | None:
        """Asynchronous successive halving: the best not yet promoted configuration in
        the top ``1/eta`` of those that completed a rung."""
        rungs = self.halving.rungs
        measured = self._measured()
        for k in range(len(rungs) - 2, -1, -1):
            done = {n: summarize(c.scores) for n, c in measured.items()
                    if len(c.scores) >= rungs[k]}
            top = ranked(done, self.spec.goal)[: len(done) // self.halving.eta]
            for name in top:
                if measured[name].attempted < rungs[k + 1]:
                    return Action("promote", measured[name].params, rungs[k + 1])
        return None

    def _explore(self) -> Action | None:
        params = self._ask()
        if params is None:
            return None
        # The default goes straight to the last rung: the finals test the winner
        # against it anyway, and its diagnosis (which seeds the search) is steadier
        # over several repetitions than over one.
        rung = -1 if self.default is not None and params == self.spec.default_params else 0
        return Action("explore", params, self.halving.rungs[rung])

    def _exploration_progress(self) -> float:
        """How much of the exploration budget is spent (0 to 1 and beyond)."""
        done = [self.explored() / self.budget.trials] if self.budget.trials else []
        if self.budget.seconds:
            done.append(self.spent_s() / (self.halving.explore_share * self.budget.seconds))
        return max(done, default=0.0)

    def _neighbour(self) -> Params | None:
        """In the last ``neighbour_share`` of the exploration: a not yet measured
        configuration that differs from the best so far in one axis (drawn with the
        search's seeded generator), else None."""
        if self._exploration_progress() < 1.0 - self.halving.neighbour_share:
            return None
        best = self.best()
        if best is None:
            return None
        around = [tuple((a, value if a == axis else v) for a, v in best.params)
                  for axis, values in self.spec.axes.items() for value in values
                  if value != dict(best.params)[axis]]
        fresh = [p for p in around if p in self.valid and self.valid[p].name not in self.configs]
        return self._rng.choice(fresh) if fresh else None

    def _ask(self) -> Params | None:
        """The sampler's next new, valid configuration (see the module docstring); in
        the last part of the exploration a one-axis neighbour of the best so far,
        enqueued into the sampler so that its history stays whole."""
        import optuna  # noqa: PLC0415 - deferred

        axes = tuple(self.spec.axes)
        neighbour = self._neighbour()
        if neighbour is not None:
            self.study.enqueue_trial(dict(neighbour), skip_if_exists=True)
        for _ in range(MAX_ASKS):
            trial = self.study.ask(self.distributions)
            params = tuple((a, trial.params[a]) for a in axes)
            variant = self.valid.get(params)
            if variant is None:
                self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                continue
            if variant.name in self.configs:
                config = self.configs[variant.name]
                value = self._rung0_value(config)
                if value is None:
                    self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
                else:
                    self.study.tell(trial, value)
                continue
            self._pending[variant.name] = trial
            return params
        fresh = [p for p, v in self.valid.items() if v.name not in self.configs]
        return self._rng.choice(fresh) if fresh else None

    def _final(self) -> Action | None:
        """The next measurement of the finals, or None when they are over."""
        last, most = self.halving.rungs[-1], self.halving.max_repetitions
        measured = self._measured()
        if not measured:
            return None
        summaries = {n: summarize(c.scores) for n, c in measured.items()}
        best_first = ranked(summaries, self.spec.goal)
        finalists = best_first[: self.halving.finalists]
        wanted = [*finalists]
        if self.default is not None and self.default.name in measured \
                and self.default.name not in wanted:
            wanted.append(self.default.name)
        short = [n for n in wanted if measured[n].attempted < last]
        if short:
            return Action("final", measured[short[0]].params, last)
        best = summaries[finalists[0]]
        if len(finalists) < 2 or separated(best, [summaries[n] for n in finalists[1:]],
                                           self.spec.goal):
            return self._testable(measured, finalists[0])
        fewest = min((n for n in finalists if measured[n].attempted < most),
                     key=lambda n: measured[n].attempted, default=None)
        if fewest is None:
            return None
        return Action("final", measured[fewest].params, measured[fewest].attempted + 1)

    def _testable(self, measured: Mapping[str, Config], best: str) -> Action | None:
        """After the finals: one more repetition of the winner or the default (the
        fewer first) while the permutation test between them cannot reach ``alpha``
        with so few repetitions (3 against 3 cannot go below p = 0.1)."""
        most = self.halving.max_repetitions
        if self.default is None or self.default.name not in measured \
                or self.default.name == best:
            return None
        pair = sorted((best, self.default.name), key=lambda n: measured[n].attempted)
        counts = [len(measured[n].scores) for n in pair]
        if min_p_value(counts[0], counts[1]) < self.spec.section.alpha:
            return None
        name = next((n for n in pair if measured[n].attempted < most), None)
        if name is None:
            return None
        return Action("final", measured[name].params, measured[name].attempted + 1)

    def next_action(self) -> Action | None:
        """What to measure next, or None when the search is over."""
        action = self._promotion()
        if action is None and self._may_explore():
            action = self._explore()
        if action is None:
            action = self._final()
        if action is None:
            return None
        name = self.valid[action.params].name
        have = self.configs[name].attempted if name in self.configs else 0
        if not self._fits(action.repetitions - have):
            return None
        return action

    # -- running ----------------------------------------------------------------------------
    def _enqueue_default(self) -> None:
        if self.default is not None and self.default.name not in self.configs:
            self.study.enqueue_trial(dict(self.spec.default_params))

    def _enqueue_seeds(self) -> None:
        """The fixes the default's diagnosis names (dominant finding first): each
        seed's settings changed together on the default; settings outside the search's
        axes are left out, and a seed with none on them is skipped."""
        if self._seeded or self.default is None or self.default.name not in self._measured():
            return
        self._seeded = True
        base = dict(self.spec.default_params)
        for seed in self._seeds(self.default.name):
            changes = {axis: value for axis, value in seed if axis in base}
            if not changes:
                continue
            params = tuple((a, changes.get(a, v)) for a, v in base.items())
            variant = self.valid.get(params)
            if variant is not None and variant.name not in self.configs:
                self.study.enqueue_trial(dict(params), skip_if_exists=True)

    def run(self) -> None:
        """Search until the budget is spent or the finals are over. Interruptions
        (SIGINT/SIGTERM) propagate from ``measure``; everything measured is stored."""
        self._enqueue_default()
        self._enqueue_seeds()
        while True:
            interrupt.check()
            action = self.next_action()
            if action is None:
                break
            self._do(action)
            self._enqueue_seeds()

    def _do(self, action: Action) -> None:
        import optuna  # noqa: PLC0415 - deferred

        variant = self.valid[action.params]
        config = self.configs.get(variant.name)
        if config is None:
            config = self.configs[variant.name] = Config(variant.name, action.params)
            self.order.append(variant.name)
        reps = range(config.attempted, action.repetitions)
        self._event(action, variant.name, "running")
        started = self._clock()
        self._measure(variant, reps)
        took = self._clock() - started
        self.measure_s += took
        if reps:
            self.repetition_s.append(took / len(reps))
        self._refresh()
        trial = self._pending.pop(variant.name, None)
        if trial is not None:
            value = self._rung0_value(config)
            if value is None or config.failed:
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                self.study.tell(trial, value)
        self._event(action, variant.name, "failed" if config.failed else "done")

    def best(self) -> Config | None:
        """The best configuration so far by mean objective (finalists first)."""
        measured = self._measured()
        if not measured:
            return None
        last = self.halving.rungs[-1]
        pool = {n: c for n, c in measured.items() if len(c.scores) >= last} or measured
        best = None
        for config in pool.values():
            if best is None or better(config.mean or 0.0, best.mean or 0.0, self.spec.goal):
                best = config
        return best

    def _event(self, action: Action, name: str, state: str) -> None:
        best = self.best()
        self._progress(TuneEvent(
            stage=action.stage, trial=self.order.index(name) + 1, trials=self.budget.trials,
            config=name, repetitions=action.repetitions, state=state,
            best=best.name if best else None, best_mean=best.mean if best else None,
            left_s=self.left_s()))


# -- against the store and real guests ---------------------------------------------------
@dataclass(frozen=True)
class TuneOutcome:
    """A finished (or budget-exhausted) search."""

    run_id: str
    configs: int
    wall_s: float
    #: Seconds spent measuring (runner: boots, workloads, storing) in this session.
    measure_s: float

    @property
    def overhead_s(self) -> float:
        """The search's own time this session: sampler, ranking, reading the store."""
        return max(0.0, self.wall_s - self.measure_s)


def stored_scores(store: Store, run_id: str, spec: TuneSpec
                  ) -> tuple[dict[str, list[float]], set[str]]:
    """Per stored platform, the objective per repetition, and the platforms with a
    failed repetition."""
    rows = store.measurements(run_id)
    objective = objective_of(spec)
    natives = native_means(rows, objective, spec.native.name if spec.native else None)
    cells = {c.name: c.platform_name for c in store.cells(run_id)}
    failed = {cells[f.cell] for f in store.failures(run_id) if f.cell in cells}
    return {n: scores(rows, n, objective, natives) for n in set(cells.values())}, failed


def diagnosis_seeds(store: Store, run_id: str, spec: TuneSpec) -> Seeds:
    """The fixes of the findings of ``platform`` in the objective's phases (dominant
    first), from the same rules as ``hvbench explain``: each finding's own fix for
    this platform (its configuration changes, together), then each better value of
    its rule's knob and the settings its fix text names, one at a time."""
    def seeds(platform: str) -> list[Seed]:
        run = store.get_run(run_id)
        cells = store.cells(run_id)
        rows = store.measurements(run_id)
        natives = {c.workload_name: c.platform_name for c in cells
                   if is_host_kind(c.identity.platform_kind)}
        definitions = {(c.platform_name, c.workload_name): (c.platform, c.workload)
                       for c in cells}
        stats = [s for s in phase_stats(rows)
                 if any((s.workload, s.phase) == (t.workload, t.phase) for t in spec.targets)]
        models = [m for m in build_models(stats, natives, definitions,
                                          accelerator=run.env.get("accelerator"))
                  if m.platform == platform]
        rules = {r.name: r for r in RULES}
        out: list[Seed] = []
        for verdict in diagnose_all(models):
            findings = [f for f in (verdict.dominant, *verdict.contributing) if f is not None]
            for finding in findings:
                rule = rules[finding.rule]
                platform_changes = tuple(c for c in finding.changes
                                         if not c[0].startswith("workload."))
                if platform_changes:
                    out.append(platform_changes)
                knobs = [(rule.knob, rule.better)] if rule.knob and rule.better else []
                for knob, values in [*knobs, *FIX_SETTINGS.get(rule.name, ())]:
                    out += [((knob, value),) for value in values]
        return list(dict.fromkeys(out))
    return seeds


def _native_repetitions(spec: TuneSpec) -> int:
    """Native runs without a boot: as many repetitions as a finalist may get, so that
    the winner's test against native can reach its significance level."""
    return spec.section.halving.max_repetitions


class TuneRunner:
    """Runs a :class:`Search` on real guests through :class:`StudyRunner`."""

    def __init__(self, spec: TuneSpec, store: Store, runner: StudyRunner, run_id: str) -> None:
        self.spec = spec
        self.store = store
        self.runner = runner
        self.run_id = run_id
        self.position = len(store.done(run_id)) + len(store.failures(run_id))

    def measure(self, variant: Variant[PlatformSpec], repetitions: Sequence[int]) -> None:
        """Measure ``variant`` x the objective's workloads for ``repetitions`` (one boot
        per repetition); each repetition is committed as it finishes."""
        cells = self.spec.cells(variant)
        self.runner.study = dataclasses.replace(self.spec.study, platforms=(variant,),
                                                cells=cells)
        ids = self.runner.cell_ids()
        done = self.store.done(self.run_id)
        items = []
        for rep in repetitions:
            for cell in cells:
                if (ids[cell.name], rep) not in done:
                    items.append(PlannedItem(rep, cell, self.position))
                    self.position += 1
        self.runner.execute(items, ids)
        interrupt.check()


def run_tune(spec: TuneSpec, store: Store, *, resume: str | None = None,
             progress: ProgressHook | None = None,
             on_start: Callable[[str], None] | None = None) -> TuneOutcome:
    """Run (or resume) a search into ``store`` under the host-wide run lock (the
    orphans of an earlier ``kill -9`` removed first). On any exception, including
    Ctrl-C / SIGTERM, the run is marked interrupted and the exception propagates;
    every repetition finished before is committed. Raises :class:`HostError` when
    another study holds the lock, :class:`StoreError` for an unknown run."""
    started = time.monotonic()
    lock = RunLock(work_dir())
    lock.acquire(resume or "(starting)", spec.study.study.name)
    try:
        remove_orphans()
        with contextlib.ExitStack() as stack:
            session = (stack.enter_context(LabSession(spec.study, native_server=False))
                       if spec.study.lab else None)
            runner = StudyRunner(spec.study, store, run_id=resume, session=session)
            spent_before = store.run_seconds(resume) if resume else 0.0
            run_id = runner.start_run()
            lock.describe(run_id, spec.study.study.name)
            if on_start is not None:
                on_start(run_id)
            try:
                search = _search(spec, store, runner, run_id, progress=progress,
                                 spent_before=spent_before)
                search.run()
            except BaseException:
                store.set_status(run_id, "interrupted", finished_at=_now())
                raise
            store.set_status(run_id, "complete", finished_at=_now())
            return TuneOutcome(run_id, search.explored(), time.monotonic() - started,
                               search.measure_s)
    finally:
        lock.release()


def _search(spec: TuneSpec, store: Store, runner: StudyRunner, run_id: str, *,
            progress: ProgressHook | None, spent_before: float) -> Search:
    tune_runner = TuneRunner(spec, store, runner, run_id)
    search = Search(spec, tune_runner.measure, lambda: stored_scores(store, run_id, spec),
                    seeds=diagnosis_seeds(store, run_id, spec), progress=progress,
                    spent_before_s=spent_before)
    native = spec.native
    stored = [(c.platform_name, c.platform) for c in store.cells(run_id)
              if native is None or c.platform_name != native.name]
    search.restore(list(dict(stored).items()))
    if native is not None:
        measured_native = time.monotonic()
        if progress is not None:
            progress(TuneEvent("native", 0, spec.section.budget.trials, native.name,
                               _native_repetitions(spec), "running", None, None, None))
        tune_runner.measure(native, range(_native_repetitions(spec)))
        search.measure_s += time.monotonic() - measured_native
    return search


def is_tune_text(text: str) -> bool:
    """Whether a stored study text is a tune file (has a ``[tune]`` table)."""
    try:
        return isinstance(tomllib.loads(text).get("tune"), dict)
    except tomllib.TOMLDecodeError:
        return False


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def resume_tune(store: Store, run_id: str) -> TuneSpec:
    """The tune spec of a stored run, parsed from the text stored with it, with the
    sampler's seed the run started with.

    Raises :class:`StoreError` (no such run) and :class:`SpecError` (the text is no tune
    file)."""
    record = store.get_run(run_id)
    if not is_tune_text(record.study_text):
        raise SpecError(f"run {run_id} is no tuning run (its study has no [tune] table)")
    return load_tune(record.study_path, record.study_text, seed=record.seed)
