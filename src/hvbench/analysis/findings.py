"""The seed papers' findings next to a run's numbers (``hvbench report --findings``).

A *finding* is one comparison a paper made: two sides (A and B), each a set of cells
chosen by the facts of their stored platform and workload definitions, one phase and
one metric of the catalogue (:mod:`hvbench.analysis.metrics`), the direction the paper
found (``a<b``, ``a>b``, or ``a=b``: no difference), the paper's own numbers and what
the set-up must provide for the comparison to mean anything
(:mod:`hvbench.analysis.preconditions`).

Each finding is judged by the verdict scheme of :mod:`hvbench.analysis.replication`:
our A/B ratio per repetition round, in logs, with a t-interval, against the paper's A/B
and a margin δ (10 %, or the host's noise floor when stored and larger).

Pure: the findings data (parsed TOML), the run's cells and measurements in,
:class:`FindingResult` out (the table, its wording and the JSON shape:
:mod:`hvbench.report.findings`). :func:`parse_findings` checks the data and names the
file, the finding and the field of the first mistake; :func:`evaluate` compares one run.

Selectors: each key is a dotted path into a cell's *facts* (:func:`cell_facts`): the
stored platform definition flattened (``kind``, ``vcpus``, ``disk.bus``, ``nic.model``,
``scenario.weights.io``, ...; a guest's ``vm.`` prefix dropped and its first disk and NIC
named ``disk`` and ``nic``), ``scenario`` (its name, "" alone) and ``neighbours`` (the
neighbours' roles joined by ``+``, "" alone); and, under ``workload``, the stored
workload definition. A selector value is a shell pattern for text, an exact number or
boolean, or a list of those (any may match).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from hvbench.analysis.metrics import MetricSpec, lookup
from hvbench.analysis.noise import NoiseFloor
from hvbench.analysis.preconditions import (
    Check,
    HostFacts,
    Requirements,
    check,
    parse_requirements,
)
from hvbench.analysis.replication import (
    MIN_MARGIN,
    Classification,
    RatioInterval,
    Verdict,
    classify,
    log_ratio_interval,
    margin,
)
from hvbench.analysis.stats import Summary, summarize
from hvbench.analysis.summaries import Row, fmt_value
from hvbench.errors import SpecError

__all__ = [
    "EXPECTATIONS",
    "CellLike",
    "Finding",
    "FindingResult",
    "FindingsError",
    "Side",
    "catalogue_entry",
    "cell_facts",
    "evaluate",
    "matches",
    "parse_findings",
]

Expectation = Literal["a<b", "a>b", "a=b"]
EXPECTATIONS: tuple[Expectation, ...] = ("a<b", "a>b", "a=b")
#: The papers' numbers (``paper``) name these seeds (001 and 002 are one paper).
SEEDS = ("000", "001", "003", "004")
_SIDE_KEYS = frozenset({"label", "value", "platform", "workload", "fixed", "metric"})
_FINDING_KEYS = frozenset({"id", "seed", "source", "statement", "unit", "metric", "phase",
                           "expect", "tcg_distorted", "same_workload", "workload",
                           "paper_setting", "requires",
                           "a", "b"})
_TCG_NOTE = ("TCG emulates the guest CPU: a finding whose cause is CPU cost or latency "
             "measures the emulator here")
#: The multiplication sign of "paper x2, ours x1.9 [1.7, 2.1]" (a ratio factor).
TIMES = "\u00d7"
#: The noise floor's level: the same 95 % as the intervals it widens the margin of.
_FLOOR_ALPHA = 0.05


class Identity(Protocol):
    """The identity fields evaluation reads (the store's CellIdentity)."""

    @property
    def scenario(self) -> str | None: ...
    @property
    def neighbour_roles(self) -> tuple[str, ...]: ...


class CellLike(Protocol):
    """What evaluation reads of a cell (the store's CellRow)."""

    @property
    def name(self) -> str: ...
    @property
    def platform(self) -> Mapping[str, Any]: ...
    @property
    def workload(self) -> Mapping[str, Any]: ...
    @property
    def workload_name(self) -> str: ...
    @property
    def identity(self) -> Identity: ...


class FindingsError(SpecError):
    """The findings data is wrong: the message names the file, the finding and the
    field."""


@dataclass(frozen=True)
class Side:
    """One side of a comparison: which cells, and the paper's number for it."""

    label: str
    #: The paper's number, in the finding's unit.
    value: float
    platform: Mapping[str, Any]
    workload: Mapping[str, Any]
    #: True (side B only): a reference both the paper and this host share, not a
    #: measurement (the theoretical NIC line as 100 % of the link): our B is ``value``
    #: in every round, so the interval is a one-sample t of A against it.
    fixed: bool = False
    #: This side's metric instead of the finding's (None: the finding's): one guest
    #: against its neighbour in the same cells (the neighbour's ``nb0.load.*``).
    metric: str | None = None


@dataclass(frozen=True)
class Finding:
    """One comparison a seed paper made, and how to make it on a run."""

    id: str
    seed: str
    #: The table or figure it comes from (``Table 1``, ``Fig. 3(b)``).
    source: str
    statement: str
    unit: str
    metric: str
    phase: str
    expect: Expectation
    a: Side
    b: Side
    #: True when the finding's cause is CPU cost or latency magnitude, which TCG's
    #: emulated CPU distorts: under TCG it is ``not assessable under TCG``.
    tcg_distorted: bool = False
    #: True: compare only workloads (by name) both sides ran, so that "alone" means the
    #: same workload the scenario ran, not every workload of the platform.
    same_workload: bool = False
    #: What the paper compared, in short (its platforms and settings).
    paper_setting: str = ""
    #: What the set-up must provide (``requires`` in the data file).
    requires: Requirements = dataclasses.field(default_factory=Requirements)

    def direction_text(self) -> str:
        """The paper's direction as text (``A < B``, ``A > B``, ``A = B``)."""
        return {"a<b": "A < B", "a>b": "A > B"}.get(self.expect, "A = B")

    def metric_of(self, side: Side) -> str:
        """The metric ``side`` is measured by: its own, else the finding's."""
        return side.metric or self.metric

    @property
    def paper_ratio(self) -> float:
        """The paper's A/B (its two numbers are positive: the parser checks)."""
        return self.a.value / self.b.value


@dataclass(frozen=True)
class FindingResult:
    """A finding evaluated on one run."""

    finding: Finding
    #: The cells of each side (empty: the run lacks them).
    a_cells: tuple[str, ...]
    b_cells: tuple[str, ...]
    a: Summary | None
    b: Summary | None
    verdict: Verdict
    #: Why, in a few words ("" when the verdict says it all): the failed precondition
    #: with its measured value, the repetitions a decision needs, the TCG caveat.
    reason: str = ""
    #: Our A/B with its interval (None: not measured, or a value <= 0).
    interval: RatioInterval | None = None
    #: The margin δ (a fraction) the verdict used.
    delta: float = MIN_MARGIN
    #: For ``inconclusive``: the repetitions per side a decision would need.
    needed_repetitions: int | None = None
    #: Every precondition checked, met or not.
    checks: tuple[Check, ...] = ()

    @property
    def measured(self) -> bool:
        """True when both sides have values."""
        return self.a is not None and self.b is not None

    def ours_direction(self) -> str:
        """The direction our means show, in the finding's terms."""
        if self.a is None or self.b is None:
            return "-"
        if self.a.mean == self.b.mean:
            return "A = B"
        return "A < B" if self.a.mean < self.b.mean else "A > B"


# -- parsing ---------------------------------------------------------------------------


def _fail(path: str, fid: str, field: str, expected: str) -> FindingsError:
    return FindingsError(f"{path}: finding {fid!r}: {field}: {expected}")


def _text(raw: Mapping[str, Any], key: str, path: str, fid: str, where: str = "") -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _fail(path, fid, where + key, "expected a non-empty string")
    return value


def _optional_text(raw: Mapping[str, Any], key: str, path: str, fid: str) -> str:
    return _text(raw, key, path, fid) if key in raw else ""


def _number(raw: Mapping[str, Any], key: str, path: str, fid: str, where: str = "") -> float:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(path, fid, where + key, "expected a number (the paper's value)")
    return float(value)


def _selector(raw: Mapping[str, Any], key: str, path: str, fid: str, where: str
              ) -> dict[str, Any]:
    value = raw.get(key, {})
    if not isinstance(value, Mapping):
        raise _fail(path, fid, where + key, "expected a table of fact = value")
    for fact, want in value.items():
        options = want if isinstance(want, list) else [want]
        if not options or not all(isinstance(o, str | int | float | bool) for o in options):
            raise _fail(path, fid, f"{where}{key}.{fact}",
                        "expected text, a number, a boolean or a non-empty list of them")
    return dict(value)


def _side(raw: Any, key: str, path: str, fid: str) -> Side:
    if not isinstance(raw, Mapping):
        raise _fail(path, fid, key, "expected a table with label, value, platform")
    unknown = sorted(set(raw) - _SIDE_KEYS)
    if unknown:
        raise _fail(path, fid, f"{key}.{unknown[0]}",
                    f"unknown field (expected one of {', '.join(sorted(_SIDE_KEYS))})")
    where = f"{key}."
    fixed = raw.get("fixed", False)
    if not isinstance(fixed, bool):
        raise _fail(path, fid, f"{key}.fixed", "expected true or false")
    if fixed and (key != "b" or "platform" in raw or "workload" in raw):
        raise _fail(path, fid, f"{key}.fixed", "only side b may be a fixed reference, "
                    "and it selects no cells (no platform or workload)")
    if fixed and "metric" in raw:
        raise _fail(path, fid, f"{key}.metric", "a fixed reference is measured by nothing")
    return Side(label=_text(raw, "label", path, fid, where),
                value=_number(raw, "value", path, fid, where),
                platform=_selector(raw, "platform", path, fid, where),
                workload=_selector(raw, "workload", path, fid, where), fixed=fixed,
                metric=_metric(raw, path, fid, where) if "metric" in raw else None)


def catalogue_entry(metric: str) -> MetricSpec | None:
    """The catalogue entry a finding's metric names (None: not declared). A ``*`` stands
    for one device or interface label (host.disk.*.util_pct) or one number
    (ondemand.*.startup_s: every guest started on demand, averaged per round)."""
    for part in ("x", "0"):
        spec = lookup(metric.replace("*", part))
        if spec is not None:
            return spec
    return None


def _metric(raw: Mapping[str, Any], path: str, fid: str, where: str = "") -> str:
    metric = _text(raw, "metric", path, fid, where)
    if catalogue_entry(metric) is None:
        raise _fail(path, fid, f"{where}metric",
                    f"{metric!r} is not in the metric catalogue (analysis/metrics.py)")
    return metric


def _requires(raw: Mapping[str, Any], path: str, fid: str) -> Requirements:
    parsed, problem = parse_requirements(raw.get("requires"))
    if parsed is None:
        field, _, expected = problem.partition(": ")
        raise _fail(path, fid, f"requires.{field}" if expected else "requires",
                    expected or problem)
    return parsed


def _check_paper_agrees(finding: Finding, path: str) -> None:
    """The paper's own numbers must show the direction the finding states (a typo in a
    value or in ``expect`` fails here)."""
    paper_a, paper_b = finding.a.value, finding.b.value
    if paper_a <= 0 or paper_b <= 0:
        raise _fail(path, finding.id, "a.value" if paper_a <= 0 else "b.value",
                    "expected a positive number (the verdict reads the paper's A/B)")
    if not _holds(finding, paper_a, paper_b):
        raise _fail(path, finding.id, "expect",
                    f"the paper's values {fmt_value(paper_a)} and {fmt_value(paper_b)} do "
                    f"not show {finding.direction_text()}")


def _finding(raw: Any, index: int, path: str) -> Finding:
    if not isinstance(raw, Mapping):
        raise FindingsError(f"{path}: finding #{index + 1}: expected a table")
    fid = raw.get("id")
    if not isinstance(fid, str) or not fid.strip():
        raise FindingsError(f"{path}: finding #{index + 1}: id: expected a non-empty string")
    unknown = sorted(set(raw) - _FINDING_KEYS)
    if unknown:
        raise _fail(path, fid, unknown[0], "unknown field")
    seed = _text(raw, "seed", path, fid)
    if seed not in SEEDS:
        raise _fail(path, fid, "seed", f"expected one of {', '.join(SEEDS)}")
    expect = _text(raw, "expect", path, fid)
    if expect not in EXPECTATIONS:
        raise _fail(path, fid, "expect", f"expected one of {', '.join(EXPECTATIONS)}")
    distorted, same = raw.get("tcg_distorted", False), raw.get("same_workload", False)
    for key, flag in (("tcg_distorted", distorted), ("same_workload", same)):
        if not isinstance(flag, bool):
            raise _fail(path, fid, key, "expected true or false")
    finding = Finding(
        id=fid, seed=seed, source=_text(raw, "source", path, fid),
        statement=_text(raw, "statement", path, fid), unit=_text(raw, "unit", path, fid),
        metric=_metric(raw, path, fid), phase=_text(raw, "phase", path, fid),
        expect=expect,  # checked against EXPECTATIONS above
        a=_side(raw.get("a"), "a", path, fid), b=_side(raw.get("b"), "b", path, fid),
        tcg_distorted=distorted, same_workload=same,
        paper_setting=_optional_text(raw, "paper_setting", path, fid),
        requires=_requires(raw, path, fid))
    if finding.b.fixed and same:
        raise _fail(path, fid, "same_workload", "a fixed side b has no workloads to share")
    shared = _selector(raw, "workload", path, fid, "")
    finding = _with_shared_workload(finding, shared)
    _check_paper_agrees(finding, path)
    return finding


def _with_shared_workload(finding: Finding, shared: Mapping[str, Any]) -> Finding:
    """The finding-level ``workload`` selector applies to both sides (a side's own keys
    win)."""
    if not shared:
        return finding
    a = dataclasses.replace(finding.a, workload={**shared, **finding.a.workload})
    b = finding.b if finding.b.fixed else dataclasses.replace(
        finding.b, workload={**shared, **finding.b.workload})
    return dataclasses.replace(finding, a=a, b=b)


def parse_findings(data: Mapping[str, Any], path: str) -> list[Finding]:
    """The findings of a parsed findings file (``[[finding]]`` tables).

    Raises:
        FindingsError: a field is missing or wrong, an id repeats, or the paper's values
            contradict the stated direction; one line naming ``path``, the finding and
            the field.
    """
    raw = data.get("finding")
    if not isinstance(raw, list) or not raw:
        raise FindingsError(f"{path}: finding: expected one or more [[finding]] tables")
    findings = [_finding(item, i, path) for i, item in enumerate(raw)]
    seen: set[str] = set()
    for finding in findings:
        if finding.id in seen:
            raise _fail(path, finding.id, "id", "used by an earlier finding")
        seen.add(finding.id)
    return findings


# -- matching --------------------------------------------------------------------------


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            _flatten(item, f"{prefix}{key}.", out)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _flatten(item, f"{prefix}{index}.", out)
    else:
        out[prefix[:-1]] = value


def _alias(key: str) -> str:
    key = key.removeprefix("vm.")
    for plural, singular in (("disks.0.", "disk."), ("nics.0.", "nic.")):
        if key.startswith(plural):
            return singular + key.removeprefix(plural)
    return key


def cell_facts(platform: Mapping[str, Any], workload: Mapping[str, Any],
               scenario: str | None = None, neighbour_roles: Sequence[str] = (),
               workload_name: str = "") -> dict[str, Any]:
    """The facts a selector reads: the stored platform definition flattened with the
    aliases of the module docstring, ``scenario``, ``neighbours``, ``workload_name``
    and ``workload.*``."""
    flat: dict[str, Any] = {}
    _flatten(platform, "", flat)
    facts = {_alias(key): value for key, value in flat.items()}
    # The stored scenario name sits in the definition too; the identity field wins.
    facts["scenario"] = scenario or ""
    facts["neighbours"] = "+".join(neighbour_roles)
    facts["workload_name"] = workload_name
    flat_workload: dict[str, Any] = {}
    _flatten(workload, "workload.", flat_workload)
    facts.update(flat_workload)
    return facts


def _value_matches(have: Any, want: Any) -> bool:
    if isinstance(want, bool) or isinstance(have, bool):
        return have is want
    if isinstance(want, int | float):
        return isinstance(have, int | float) and float(have) == float(want)
    return fnmatch.fnmatchcase("" if have is None else str(have), want)


def matches(facts: Mapping[str, Any], platform: Mapping[str, Any],
            workload: Mapping[str, Any]) -> bool:
    """True when a cell's facts satisfy a side's platform and workload selectors (a
    missing fact reads as "")."""
    wanted = [*platform.items(), *((f"workload.{k}", v) for k, v in workload.items())]
    for key, want in wanted:
        options = want if isinstance(want, list) else [want]
        if not any(_value_matches(facts.get(key), option) for option in options):
            return False
    return True


# -- evaluation ------------------------------------------------------------------------


def _holds(finding: Finding, a: float, b: float) -> bool:
    """The paper's own numbers show its direction (``a=b``: A/B inside 1 ± 10 %)."""
    if finding.expect == "a<b":
        return a < b
    if finding.expect == "a>b":
        return a > b
    return b > 0 and 1 / (1 + MIN_MARGIN) <= a / b <= 1 + MIN_MARGIN


def _side_values(cells: Sequence[str], values: Mapping[str, Mapping[int, list[float]]]
                 ) -> list[float]:
    """One value per (cell, repetition): the metric's mean over the matching names (a
    ``*`` metric may match several devices)."""
    out: list[float] = []
    for cell in cells:
        for per_rep in values.get(cell, {}).values():
            if per_rep:
                out.append(sum(per_rep) / len(per_rep))
    return out


def _rounds(cells: Sequence[str], values: Mapping[str, Mapping[int, list[float]]]
            ) -> dict[int, float]:
    """One value per repetition round: the mean of the side's cells in that round (the
    runner measures every cell of a repetition in one round, back to back)."""
    per_round: dict[int, list[float]] = defaultdict(list)
    for cell in cells:
        for rep, per_rep in values.get(cell, {}).items():
            if per_rep:
                per_round[rep].append(sum(per_rep) / len(per_rep))
    return {rep: sum(v) / len(v) for rep, v in per_round.items()}


def _phase_matches(finding: Finding, phase: str) -> bool:
    return fnmatch.fnmatchcase(phase, finding.phase)


def _values_by_cell(finding: Finding, metric: str, rows: Iterable[Row]
                    ) -> dict[str, dict[int, list[float]]]:
    found: dict[str, dict[int, list[float]]] = defaultdict(
        lambda: defaultdict(list))
    for row in rows:
        if (fnmatch.fnmatchcase(row.metric, metric)
                and _phase_matches(finding, row.phase)):
            found[row.cell][row.repetition].append(float(row.value))
    return found


def _common_workloads(a_cells: tuple[str, ...], b_cells: tuple[str, ...],
                      facts: Mapping[str, Mapping[str, Any]]
                      ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Both sides restricted to the workloads (by name) the other side has too."""
    common = ({facts[c]["workload_name"] for c in a_cells}
              & {facts[c]["workload_name"] for c in b_cells})
    return (tuple(c for c in a_cells if facts[c]["workload_name"] in common),
            tuple(c for c in b_cells if facts[c]["workload_name"] in common))


@dataclass(frozen=True)
class _Context:
    facts: Mapping[str, Mapping[str, Any]]
    rows: Sequence[Row]
    tcg: bool
    host: HostFacts
    floors: Mapping[tuple[str, str, str], NoiseFloor]


#: What the saturation checks read: the measured guest's served and offered rates and
#: each web neighbour's.
_RATE_METRIC = re.compile(r"^(replies_s|offered_rps|nb\d+\.load\.(replies_per_s|offered_rps))$")


def _rates_of(phase: str, cells: Sequence[str], rows: Sequence[Row]) -> dict[str, list[float]]:
    wanted = set(cells)
    out: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if r.cell in wanted and _RATE_METRIC.match(r.metric) \
                and fnmatch.fnmatchcase(r.phase, phase):
            out[r.metric].append(float(r.value))
    return dict(out)


def _checks(finding: Finding, a_cells: Sequence[str], b_cells: Sequence[str],
            ctx: _Context) -> tuple[Check, ...]:
    if not finding.requires.any():
        return ()
    facts = [ctx.facts[c] for c in (*a_cells, *b_cells)]
    # A fixed side B (the paper's reference, no cells) has no guest to be saturated.
    sides = (a_cells,) if finding.b.fixed else (a_cells, b_cells)
    rates = [_rates_of(finding.phase, side, ctx.rows) for side in sides]
    return tuple(check(finding.requires, facts, ctx.host, rates))


def _delta(finding: Finding, cells: Sequence[str], interval: RatioInterval,
           floors: Mapping[tuple[str, str, str], NoiseFloor]) -> float:
    """δ: 10 %, or the largest stored noise floor of the compared cells, phase and
    metrics (either side's) at these sample sizes when larger."""
    wanted = set(cells)
    metrics = {finding.metric_of(finding.a), finding.metric_of(finding.b)}
    found = [f.floor_pct(interval.n_a, interval.n_b, _FLOOR_ALPHA)
             for (cell, phase, metric), f in floors.items()
             if cell in wanted and fnmatch.fnmatchcase(phase, finding.phase)
             and any(fnmatch.fnmatchcase(metric, m) for m in metrics)]
    return margin(found)


def _judge(finding: Finding, interval: RatioInterval | None, delta: float,
           checks: Sequence[Check], tcg: bool) -> Classification:
    failed = "; ".join(f"{c.name}: {c.measured}" for c in checks if not c.met)
    if tcg and finding.tcg_distorted:
        # A failed precondition is named too: it would still stand under KVM.
        return Classification("not assessable under TCG", _TCG_NOTE + (
            f"; precondition not met: {failed}" if failed else ""))
    if failed:
        return Classification("precondition not met", failed)
    if interval is None:
        return Classification("inconclusive", "a value <= 0: the ratio has no log")
    return classify(interval, finding.paper_ratio, equivalence=finding.expect == "a=b",
                    delta=delta)


def _evaluate_one(finding: Finding, ctx: _Context) -> FindingResult:
    facts = ctx.facts
    a_cells = tuple(n for n, f in facts.items()
                    if matches(f, finding.a.platform, finding.a.workload))
    b_cells = () if finding.b.fixed else tuple(
        n for n, f in facts.items() if matches(f, finding.b.platform, finding.b.workload))
    if finding.same_workload:
        a_cells, b_cells = _common_workloads(a_cells, b_cells, facts)
    a_metric, b_metric = finding.metric_of(finding.a), finding.metric_of(finding.b)
    values = _values_by_cell(finding, a_metric, ctx.rows)
    a_values = _side_values(a_cells, values)
    a_rounds = _rounds(a_cells, values)
    if finding.b.fixed:
        # The reference in every round A ran: the paired interval is then a one-sample
        # t of ln A against ln(reference).
        b_values = [finding.b.value] * len(a_values)
        b_rounds = dict.fromkeys(a_rounds, finding.b.value)
    else:
        if b_metric != a_metric:
            values = _values_by_cell(finding, b_metric, ctx.rows)
        b_values, b_rounds = _side_values(b_cells, values), _rounds(b_cells, values)
    if not a_values or not b_values:
        return FindingResult(finding, a_cells, b_cells, None, None, "not measured")
    interval = log_ratio_interval(a_rounds, b_rounds)
    delta = (_delta(finding, (*a_cells, *b_cells), interval, ctx.floors)
             if interval is not None else MIN_MARGIN)
    checks = _checks(finding, a_cells, b_cells, ctx)
    judged = _judge(finding, interval, delta, checks, ctx.tcg)
    return FindingResult(finding, a_cells, b_cells, summarize(a_values),
                         summarize(b_values), judged.verdict, judged.reason, interval,
                         delta, judged.needed_repetitions, checks)


def evaluate(findings: Sequence[Finding], cells: Iterable[CellLike],
             rows: Sequence[Row], *, accelerator: str | None = None,
             host: HostFacts | None = None,
             floors: Mapping[tuple[str, str, str], NoiseFloor] | None = None
             ) -> list[FindingResult]:
    """Every finding on one run: ``cells`` are the store's CellRows (``name``,
    ``platform``, ``workload``, ``identity``), ``rows`` its measurements, ``host`` what
    the run stored of its host and lab (the preconditions), ``floors`` this host's
    noise floors by (cell, phase, metric) (the margin δ). Both sides must have values
    for a verdict; else the result is ``not measured``."""
    facts = {c.name: cell_facts(c.platform, c.workload, c.identity.scenario,
                                c.identity.neighbour_roles, c.workload_name)
             for c in cells}
    ctx = _Context(facts, rows, accelerator == "tcg", host or HostFacts(), floors or {})
    return [_evaluate_one(f, ctx) for f in findings]
