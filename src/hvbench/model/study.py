"""Study files: platforms x workloads x repetitions, declared in TOML.

A ``[[platform]]`` or ``[[workload]]`` entry whose scalar field holds a list is a set of
variants: the study expands the cross product (as avocado-vt's variants do), names each
variant from the values that vary, and applies ``only`` / ``exclude`` filters. Cells are
the product of platform variants and workload variants.

Pure: parsing text and expanding it touch no file (the caller reads the file and passes
its text and path), so every error path is unit- and fuzz-tested.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import itertools
import random
import re
import tomllib
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from hvbench.errors import SpecError
from hvbench.model.lab import DEFAULT_MTU, LabHostSpec, LabSpec, host_name_problems
from hvbench.model.names import check_name, name_problem
from hvbench.model.overrides import apply_overrides, blame, parse_override
from hvbench.model.platform import DEFAULT_PLATFORM_KIND, PlatformSpec, platform_spec_kinds
from hvbench.model.problems import TomlLines, Where, did_you_mean, joined, printable
from hvbench.model.rates import check_rate, rate_suffix
from hvbench.model.scenario import ALONE, SCENARIO_NAME_PATTERN, ScenarioSpec
from hvbench.model.spec import (
    DiskSpec,
    VmSpec,
    aoe_host,
    format_size,
    nbd_host,
    spec_error,
)
from hvbench.model.workload import (
    DEFAULT_WORKLOAD_KIND,
    StudyChecks,
    WorkloadSpec,
    spec_classes,
    workload_kinds,
)

T = TypeVar("T")
S_co = TypeVar("S_co", covariant=True)

_FILTER_KEYS = ("only", "exclude", "name")
#: List-valued fields of platforms and scenarios that are values, not variant axes (a
#: workload kind names its own: :attr:`WorkloadSpec.VALUE_LISTS`).
_NOT_AXES = ("disks", "nics", "filesystems", "forwards", "neighbours", "workloads",
             "kernel_args")
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_DURATION_UNITS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(value: object) -> float:
    """Seconds of a duration: a number of seconds, or a string such as ``"20s"``,
    ``"500ms"``, ``"2m"``, ``"1h"``. Raises ValueError naming the accepted forms."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    match = _DURATION_RE.match(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"expected a duration such as 20s, 500ms, 2m or a number of "
                         f"seconds, got {value!r}")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2)]


Duration = Annotated[float, BeforeValidator(parse_duration), Field(gt=0, le=7 * 86400)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AdaptiveRepetitions(_Strict):
    """``repetitions = { min = 3, max = 30, ci_pct = 2 }``: every cell runs ``min``
    repetitions, then more, one round at a time, until the 95 % CI half-width of its
    main metric (each phase's) is within ``ci_pct`` % of the mean or it has had ``max``
    rounds (see :mod:`hvbench.run.adaptive`)."""

    min: int = Field(default=3, ge=2, le=1000)
    max: int = Field(default=30, ge=2, le=1000)
    ci_pct: float = Field(gt=0, le=100)

    @model_validator(mode="after")
    def _check(self) -> AdaptiveRepetitions:
        if self.max < self.min:
            raise ValueError(f"max ({self.max}) is below min ({self.min})")
        return self


def _repetitions_form(data: Any) -> Any:
    """``repetitions`` as a table is the adaptive form: the minimum becomes
    ``repetitions`` and the table ``adaptive``."""
    if isinstance(data, dict) and isinstance(data.get("repetitions"), dict):
        table = data["repetitions"]
        data = {**data, "repetitions": table.get("min", 3), "adaptive": table}
    return data


class StudySection(_Strict):
    """``[study]``: name, repetitions (a count, or the adaptive table), warm-up runs,
    the shuffle seed and an A/B pair run in ABBA order."""

    name: str = Field(min_length=1)
    description: str = ""
    #: Measured repetitions of every cell (the minimum, when ``adaptive``).
    repetitions: int = Field(default=3, ge=1, le=1000)
    #: Set from ``repetitions = { min, max, ci_pct }``.
    adaptive: AdaptiveRepetitions | None = None
    #: Unrecorded runs of each cell before the measured repetitions begin.
    warmup: int = Field(default=0, ge=0, le=100)
    seed: int = 0
    #: Two platform names run back to back in every repetition, A before B in even
    #: repetitions and B before A in odd ones (ABBA: drift cancels in the pairs).
    ab: tuple[str, str] | None = None
    #: Sample the guest's own disk, CPU and NIC counters inside every guest while a
    #: phase is measured (``hvbench.monitors.guest``); false to measure without it.
    guest_sampling: bool = True

    _form = model_validator(mode="before")(_repetitions_form)

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        return check_name(value)

    @field_validator("ab")
    @classmethod
    def _check_ab(cls, value: tuple[str, str] | None) -> tuple[str, str] | None:
        if value is not None and value[0] == value[1]:
            raise ValueError("the A/B pair names one platform twice")
        return value


#: The lab host that runs the native platform's web server (added by the runner).
NATIVE_SERVER_HOST = "native"


def declared_vm(platform: PlatformSpec) -> VmSpec:
    """The VM ``platform`` declares (see :func:`guest_vm`). Raises :class:`SpecError`
    for a platform that declares none (the host, an existing libvirt domain)."""
    vm = guest_vm(platform)
    if vm is None:
        raise SpecError(f"a {platform.kind} platform declares no guest here")
    return vm


def guest_vm(platform: PlatformSpec) -> VmSpec | None:
    """The VM a platform declares (:meth:`PlatformSpec.guest_vm`)."""
    return platform.guest_vm()


@dataclass(frozen=True)
class Variant(Generic[S_co]):
    """One expanded platform, workload or scenario: its derived name, spec and varying
    values."""

    name: str
    spec: S_co
    values: Mapping[str, Any]


@dataclass(frozen=True)
class Cell:
    """One platform variant running one workload variant, alone or in a scenario."""

    name: str
    platform: Variant[PlatformSpec]
    workload: Variant[WorkloadSpec]
    #: The scenario (a variant of a ``[[scenario]]`` entry); None: the platform alone.
    scenario: Variant[ScenarioSpec] | None = None

    @property
    def platform_name(self) -> str:
        """The platform as the store and the reports see it: ``vm`` alone, ``vm@idle-3``
        in scenario ``idle-3`` (neighbours are part of the measured environment)."""
        if self.scenario is None:
            return self.platform.name
        return f"{self.platform.name}@{self.scenario.name}"


@dataclass(frozen=True)
class Study:
    """A parsed, expanded study."""

    path: str
    text: str
    study: StudySection
    platforms: tuple[Variant[PlatformSpec], ...]
    workloads: tuple[Variant[WorkloadSpec], ...]
    cells: tuple[Cell, ...]
    #: The net lab: declared by ``[lab]``, or an empty one (a bridge only) when a
    #: network or web workload needs it; None for disk-only studies.
    lab: LabSpec | None = None
    scenarios: tuple[Variant[ScenarioSpec], ...] = ()
    #: ``repetitions`` set in a ``[[workload]]`` entry, by workload variant name: it
    #: replaces the study's for that workload's cells (:func:`repetition_rule`).
    workload_repetitions: Mapping[str, RepetitionRule] = dataclasses.field(
        default_factory=dict)
    #: The ``--set PATH=VALUE`` changes applied to ``text`` (which is the file as
    #: written); stored with the run and applied again on resume.
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class RepetitionRule:
    """How many repetitions a cell gets: ``min`` always; up to ``max`` until the CI
    half-width is within ``ci_pct`` % when ``ci_pct`` is set (adaptive)."""

    min: int
    max: int
    ci_pct: float | None = None

    @property
    def adaptive(self) -> bool:
        return self.ci_pct is not None and self.max > self.min


def repetition_rule(study: Study, cell: Cell) -> RepetitionRule:
    """The cell's workload's ``repetitions`` if it set one, else the study's."""
    own = study.workload_repetitions.get(cell.workload.name)
    if own is not None:
        return own
    adaptive = study.study.adaptive
    if adaptive is not None:
        return RepetitionRule(study.study.repetitions, adaptive.max, adaptive.ci_pct)
    return RepetitionRule(study.study.repetitions, study.study.repetitions)


def base_rounds(study: Study) -> int:
    """The rounds every run has: the largest minimum of any cell."""
    return max(repetition_rule(study, c).min for c in study.cells)


def _workload_rule(value: Any, where: str) -> RepetitionRule:
    """A ``[[workload]]`` entry's ``repetitions``: a count or the adaptive table."""
    try:
        if isinstance(value, dict):
            table = AdaptiveRepetitions.model_validate(value)
            return RepetitionRule(table.min, table.max, table.ci_pct)
        section = StudySection.model_validate({"name": "x", "repetitions": value})
    except ValidationError as exc:
        raise spec_error(exc, f"{where}: repetitions") from exc
    return RepetitionRule(section.repetitions, section.repetitions)


# -- expansion ---------------------------------------------------------------------------
def _axes(entry: Mapping[str, Any], prefix: str = "", values: Collection[str] = ()
          ) -> Iterator[tuple[str, list[Any]]]:
    """Dotted paths of list-valued scalars (the variant axes), depth first; ``values``:
    more list-valued fields that are values."""
    for key, value in entry.items():
        if key in _FILTER_KEYS or key in _NOT_AXES or key in values:
            continue
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _axes(value, f"{path}.", values)
        elif isinstance(value, list):
            yield path, value


def _set_path(entry: dict[str, Any], path: str, value: Any) -> None:
    keys = path.split(".")
    node = entry
    for key in keys[:-1]:
        node[key] = dict(node[key])
        node = node[key]
    node[keys[-1]] = value


def matches_filter(values: Mapping[str, Any], pattern: Mapping[str, Any]) -> bool:
    """A filter entry matches when each of its keys (a full dotted path, or the last
    part of one) equals the variant's value."""
    for key, wanted in pattern.items():
        hits = [v for path, v in values.items() if path == key or path.endswith(f".{key}")]
        if not hits or any(str(v) != str(wanted) for v in hits):
            return False
    return True


def value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int) and value >= 1 << 10 and value % (1 << 10) == 0:
        return format_size(value)
    return str(value)


def expand_entry(entry: Mapping[str, Any], base: str, value_lists: Collection[str] = ()
                 ) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Expand one raw entry into ``(name, concrete entry, varying values)`` triples,
    filtered by its ``only`` / ``exclude`` lists. ``value_lists``: list-valued fields of
    the entry's kind that are values, not axes."""
    axes = list(_axes(entry, values=value_lists))
    only = entry.get("only", [])
    exclude = entry.get("exclude", [])
    clean = {k: v for k, v in entry.items() if k not in _FILTER_KEYS}
    out = []
    for combo in itertools.product(*(values for _, values in axes)):
        concrete = dict(clean)
        values: dict[str, Any] = {}
        for (path, _), value in zip(axes, combo, strict=True):
            _set_path(concrete, path, value)
            values[path] = value
        if only and not any(matches_filter(values, p) for p in only):
            continue
        if any(matches_filter(values, p) for p in exclude):
            continue
        suffix = "-".join(value_text(v) for v in combo)
        out.append((f"{base}.{suffix}" if suffix else base, concrete, values))
    return out


# -- parsing -----------------------------------------------------------------------------
def _printable(text: str) -> str:
    """``text``, quoted with escapes when it holds characters that would break a one-line
    message (a newline, a control character)."""
    return text if text.isprintable() else repr(text)


def _where(path: str, section: str, index: int, values: Mapping[str, Any],
           lines: TomlLines | None = None) -> Where:
    variant = ""
    if values:
        variant = " (variant " + ", ".join(f"{k}={_printable(value_text(v))}"
                                           for k, v in values.items()) + ")"
    return Where(path, section, index, variant, lines)


def _check_filters(entry: Mapping[str, Any], where: str | Where) -> None:
    for key in ("only", "exclude"):
        value = entry.get(key, [])
        if not isinstance(value, list) or not all(isinstance(p, dict) for p in value):
            raise SpecError(f"{where}: {key}: expected a list of tables such as "
                            f"[{{ cache = \"none\" }}]")
    if "name" in entry and not isinstance(entry["name"], str):
        raise SpecError(f"{where}: name: expected a string")
    _check_variant_name(entry.get("name"), where)


def _check_variant_name(name: object, where: str | Where) -> None:
    """Names (given, or derived from the values that vary) carry no control character:
    they are printed, stored and used in file names."""
    problem = name_problem(name) if isinstance(name, str) else None
    if problem is not None:
        raise SpecError(f"{where}: name {name!r}: {problem}")


def _platform_spec(concrete: dict[str, Any], where: Where) -> PlatformSpec:
    kind = concrete.pop("kind", DEFAULT_PLATFORM_KIND)
    kinds = platform_spec_kinds()
    found = kinds.get(kind) if isinstance(kind, str) else None
    if found is None:
        raise where.error("kind", f"expected {_alternatives(kinds)}, got "
                                  f"{kind!r}{did_you_mean(str(kind), list(kinds))}")
    return found.parse(concrete, where)


def _alternatives(names: Collection[str]) -> str:
    """``"a", "b" or "c"``: the names quoted, as a message lists what it expected."""
    quoted = [f'"{name}"' for name in names]
    return " or ".join(filter(None, (", ".join(quoted[:-1]), *quoted[-1:])))


def _workload_spec(concrete: dict[str, Any], where: Where) -> WorkloadSpec:
    kind = concrete.get("kind", DEFAULT_WORKLOAD_KIND)
    classes = spec_classes()
    model = classes.get(kind) if isinstance(kind, str) else None
    if model is None:
        kinds = ", ".join(f'"{k}"' for k in classes)
        raise where.error("kind", f"expected one of {kinds}, got {kind!r}"
                                  + did_you_mean(str(kind), list(classes)))
    try:
        return model.model_validate(concrete)
    except ValidationError as exc:
        raise spec_error(exc, where, model=model) from exc


def _pop_rules(raw: Any, path: str) -> tuple[Any, dict[int, RepetitionRule]]:
    """The ``[[workload]]`` entries without their ``repetitions``, and each entry's rule
    by index (a run-control setting, not part of what the workload measures)."""
    if not isinstance(raw, list) or not all(isinstance(e, dict) for e in raw):
        return raw, {}
    rules = {i: _workload_rule(e["repetitions"], f"{path}: workload[{i}]")
             for i, e in enumerate(raw) if "repetitions" in e}
    return [{k: v for k, v in e.items() if k != "repetitions"} for e in raw], rules


#: How an expanded entry of a section becomes its spec.
_Parse = Callable[[dict[str, Any], Where], T]


def _variants(raw: Any, section: str, path: str, parse: _Parse[T],
              lines: TomlLines | None = None) -> list[Variant[T]]:
    return [v for v, _ in _indexed_variants(raw, section, path, parse, lines)]


def _indexed_variants(raw: Any, section: str, path: str, parse: _Parse[T],
                      lines: TomlLines | None = None) -> list[tuple[Variant[T], int]]:
    """Every variant with the index of the entry it came from. Raises
    :class:`SpecError` listing the problem of every entry that has one (the first
    variant's problem for an entry that expands to several)."""
    if not isinstance(raw, list) or not raw or not all(isinstance(e, dict) for e in raw):
        raise SpecError(f"{path}: {section}: expected at least one [[{section}]] table")
    out: list[tuple[Variant[T], int]] = []
    errors: list[SpecError] = []
    for index, entry in enumerate(raw):
        try:
            out += _entry_variants(entry, section, path, index, parse, lines=lines)
        except SpecError as exc:
            errors.append(exc)
    if errors:
        raise joined(errors)
    names = [v.name for v, _ in out]
    for name in names:
        if names.count(name) > 1:
            raise SpecError(f"{path}: {section}: two variants are both named {name!r}; "
                            "give the entries distinct names")
    if not out:
        raise SpecError(f"{path}: {section}: the only/exclude filters removed every variant")
    return out


def _entry_variants(entry: dict[str, Any], section: str, path: str, index: int,
                    parse: _Parse[T], *, lines: TomlLines | None
                    ) -> list[tuple[Variant[T], int]]:
    """The variants of one ``[[platform]]`` or ``[[workload]]`` entry."""
    _check_filters(entry, Where(path, section, index, lines=lines))
    base = entry.get("name") or _default_name(section, entry)
    out: list[tuple[Variant[T], int]] = []
    for name, concrete, values in expand_entry(entry, base, _value_lists(section, entry)):
        where = _where(path, section, index, values, lines)
        _check_variant_name(name, where)
        out.append((Variant(name, parse(concrete, where), values), index))
    return out


def _value_lists(section: str, entry: Mapping[str, Any]) -> tuple[str, ...]:
    """The list-valued fields a workload entry's kind takes as values (none for
    platforms and for a kind no package registered)."""
    if section == "platform":
        return ()
    classes = spec_classes()
    model = classes.get(str(entry.get("kind", DEFAULT_WORKLOAD_KIND)))
    return model.VALUE_LISTS if model is not None else ()


def _default_name(section: str, entry: Mapping[str, Any]) -> str:
    if section == "platform":
        found = platform_spec_kinds().get(str(entry.get("kind", DEFAULT_PLATFORM_KIND)))
        # An unknown kind is refused when the entry is validated; the default kind's
        # name is a stand-in.
        return found.default_name if found is not None else DEFAULT_PLATFORM_KIND
    kind = workload_kinds().get(str(entry.get("kind", DEFAULT_WORKLOAD_KIND)))
    # An unknown kind is refused when the entry is validated; the name is a stand-in.
    return kind.default_name(entry) if kind is not None else str(entry.get("kind"))


def parse_study(text: str, path: str, host_memory_bytes: int,
                overrides: Sequence[str] = ()) -> Study:
    """Parse and expand a study, after applying ``overrides`` (``PATH=VALUE`` of
    ``--set``, :mod:`hvbench.model.overrides`) to its parsed TOML. Raises
    :class:`SpecError` naming the file, the field and what was expected (never a
    traceback for bad input), and the ``--set`` a bad value came from."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML: {exc}") from exc
    changes = [parse_override(o) for o in overrides]
    raw = apply_overrides(raw, changes, path)
    try:
        return _parse_raw(raw, text, path, host_memory_bytes, tuple(overrides))
    except SpecError as exc:
        if not changes:
            raise
        raise SpecError(blame(str(exc), changes)) from exc


def _parse_raw(raw: dict[str, Any], text: str, path: str, host_memory_bytes: int,
               overrides: tuple[str, ...]) -> Study:
    """:func:`parse_study` after TOML parsing and the overrides."""
    # [tune] is the search of `hvbench tune` (hvbench.model.tune validates it); a run of
    # the study itself measures the platforms as declared and leaves it aside.
    lines = TomlLines(text)
    # The sections' names, the study table and every platform and workload entry are
    # checked before the first problem is raised: the message lists all of them.
    errors: list[SpecError] = []
    _collect(errors, lambda: _check_sections(raw, path, lines))
    section = _collect(errors, lambda: _study_section(raw.get("study", {}), path, lines))
    platforms = _collect(errors, lambda: _variants(raw.get("platform"), "platform", path,
                                                   _platform_spec, lines))
    pair = _collect(errors, lambda: _pop_rules(raw.get("workload"), path))
    indexed = _collect(errors, lambda: _indexed_variants(
        pair[0] if pair else raw.get("workload"), "workload", path, _workload_spec, lines))
    known = [v for v, _ in indexed] if indexed is not None else None
    if section is not None and platforms is not None:
        _collect(errors, lambda: _check_ab(section, platforms, path))
    # Scenarios and the lab are checked too; workload names only when the workloads are.
    scenarios = _collect(errors, lambda: _scenarios(raw.get("scenario"), path, known, lines))
    lab = _collect(errors, lambda: _lab_spec(raw.get("lab"), path, known or [],
                                             scenarios or [], lines))
    if errors or section is None or platforms is None or pair is None or indexed is None \
            or scenarios is None:
        raise joined(errors)
    rules = pair[1]
    workloads = [v for v, _ in indexed]
    workload_rules = {v.name: rules[i] for v, i in indexed if i in rules}
    cells = tuple(_cells(platforms, workloads, scenarios))
    if not cells:
        raise SpecError(f"{path}: workload: no cell remains (peer = \"guest\", lifecycle "
                        "and propagation workloads have no native counterpart; add a qemu "
                        "platform)")
    check_storage_sources(platforms, lab, path)
    check_lab_mtu(platforms, lab, path)
    kinds = workload_kinds()
    for kind in kinds.values():
        kind.check_variants(workloads, scenarios, cells, path)
    checks = StudyChecks(path, lab, host_memory_bytes)
    for cell in cells:
        kinds[cell.workload.spec.kind].check_cell(cell, checks)
        check_scenario_cell(cell, lab, path)
    study = Study(path, text, section, tuple(platforms), tuple(workloads), cells, lab,
                  tuple(scenarios), workload_rules, overrides)
    for kind in kinds.values():
        kind.check_study(study)
    return study


#: The sections of a study file.
SECTIONS = ("study", "platform", "workload", "lab", "scenario", "tune")


def _check_sections(raw: Mapping[str, Any], path: str, lines: TomlLines) -> None:
    """Every top-level name is a section of a study. Raises :class:`SpecError` naming
    each unknown one with its line and the closest section."""
    unknown = sorted(set(raw) - set(SECTIONS))
    if unknown:
        raise joined([SpecError(
            f"{path}{_line_suffix(lines.header_line(name))}: {printable(name)}: unknown section"
            f"{did_you_mean(name, SECTIONS)} (expected [study], [lab], [[platform]], "
            "[[workload]], [[scenario]] and [tune])") for name in unknown])


def _line_suffix(line: int | None) -> str:
    return "" if line is None else f":{line}"


def _study_section(study_raw: Any, path: str, lines: TomlLines) -> StudySection:
    """The ``[study]`` table."""
    where = Where(path, "study", lines=lines)
    try:
        if isinstance(study_raw, dict) and isinstance(study_raw.get("repetitions"), dict):
            # Checked alone first, so a message names the field the user wrote.
            AdaptiveRepetitions.model_validate(study_raw["repetitions"])
    except ValidationError as exc:
        raise spec_error(exc, where, model=AdaptiveRepetitions,
                         renames={(): ("repetitions",)}) from exc
    try:
        return StudySection.model_validate(study_raw)
    except ValidationError as exc:
        raise spec_error(exc, where, model=StudySection) from exc


def _collect(errors: list[SpecError], check: Callable[[], T]) -> T | None:
    """``check()``, or None with its :class:`SpecError` appended to ``errors``."""
    try:
        return check()
    except SpecError as exc:
        errors.append(exc)
        return None


def _check_ab(section: StudySection, platforms: Sequence[Variant[PlatformSpec]], path: str) -> None:
    """``ab`` names two platform variants of the study."""
    names = [p.name for p in platforms]
    for name in section.ab or ():
        if name not in names:
            raise SpecError(f"{path}: study: ab: {name!r} is not a platform of the study "
                            f"(platforms: {', '.join(names)})")


def _cells(platforms: Sequence[Variant[PlatformSpec]],
           workloads: Sequence[Variant[WorkloadSpec]],
           scenarios: Sequence[Variant[ScenarioSpec]]) -> Iterator[Cell]:
    """Every platform x workload alone, and every one whose kind hosts scenarios (qemu:
    :attr:`PlatformSpec.HOSTS_SCENARIOS`) in each scenario that applies
    to the workload (lifecycle and propagation boot their own guests: alone only)."""
    for p in platforms:
        for w in workloads:
            if not cell_exists(p.spec, w.spec):
                continue
            yield Cell(f"{p.name}/{w.name}", p, w)
            if not p.spec.HOSTS_SCENARIOS or w.spec.SELF_BOOTING:
                continue
            for sc in scenarios:
                wanted = sc.spec.workloads
                if not wanted or any(w.name == n or w.name.startswith(f"{n}.") for n in wanted):
                    yield Cell(f"{p.name}@{sc.name}/{w.name}", p, w, sc)


def _scenarios(raw: Any, path: str, workloads: Sequence[Variant[WorkloadSpec]] | None,
               lines: TomlLines | None = None) -> list[Variant[ScenarioSpec]]:
    """The ``[[scenario]]`` entries, expanded like platforms (``weights.io = [0.5, 1, 2]``
    gives three variants). Each entry needs a ``name``. ``workloads``: the study's, to
    check the names an entry applies to (None: not checked, the workloads had problems).
    Raises :class:`SpecError` listing the problems of every entry."""
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(e, dict) for e in raw):
        raise SpecError(f"{path}: scenario: expected [[scenario]] tables")
    out: list[Variant[ScenarioSpec]] = []
    errors: list[SpecError] = []
    for index, entry in enumerate(raw):
        try:
            out += _scenario_entry(entry, path, index, workloads, lines)
        except SpecError as exc:
            errors.append(exc)
    # Entries' names as written (an entry with other problems still has its name) and
    # the variants' names.
    names = [e.get("name") for e in raw]
    variants = [v.name for v in out]
    errors += [Where(path, "scenario", i, lines=lines).error(
        "name", f"{name!r} is the name of scenario[{names.index(name)}] too")
        for i, name in enumerate(names) if isinstance(name, str) and names.index(name) < i]
    errors += [SpecError(f"{path}: scenario: two scenarios are both named {name!r}")
               for name in dict.fromkeys(n for n in variants if variants.count(n) > 1)
               if name not in names]
    if errors:
        raise joined(errors)
    return out


def _scenario_entry(entry: dict[str, Any], path: str, index: int,
                    workloads: Sequence[Variant[WorkloadSpec]] | None,
                    lines: TomlLines | None) -> list[Variant[ScenarioSpec]]:
    """The variants of one ``[[scenario]]`` entry. Raises :class:`SpecError` listing its
    problems: the name, the filters, the rates, the first variant's fields (as for
    platforms) and every unknown workload name."""
    where = Where(path, "scenario", index, lines=lines)
    errors: list[SpecError] = []
    _collect(errors, lambda: _check_filters(entry, where))
    name = entry.get("name")
    if not isinstance(name, str) or not re.fullmatch(SCENARIO_NAME_PATTERN, name) \
            or name == ALONE:
        errors.append(where.error("name", "expected a name of lowercase letters, digits, "
                                          f"- and _ (not {ALONE!r}), got {name!r}"))
        name = "scenario"  # a stand-in, so the rest of the entry is checked too
    out: list[Variant[ScenarioSpec]] = []
    for full, concrete, values in _collect(errors, lambda: list(
            _rate_expanded(entry, name, where))) or []:
        try:
            spec = ScenarioSpec.model_validate(concrete)
        except ValidationError as exc:
            errors.append(spec_error(exc, _where(path, "scenario", index, values, lines),
                                     model=ScenarioSpec))
            break
        out.append(Variant(full, spec, values))
    wanted = entry.get("workloads")
    if workloads is not None and isinstance(wanted, list):
        errors += _scenario_workload_problems(wanted, workloads, where)
    if errors:
        raise joined(errors)
    return out


def _rate_expanded(entry: dict[str, Any], name: str, where: Where
                   ) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """:func:`expand_entry` after the neighbour rate axis: a web neighbour's list of
    rates (``rate = ["30%", "60%"]``) gives one scenario per rate, named with a suffix
    (``colo.r30pct``) for reading; the rate itself stays in the definition. Raises
    :class:`SpecError` listing every rate that is not one, before the first variant."""
    neighbours = entry.get("neighbours") or []
    swept = [(i, nb["rate"]) for i, nb in enumerate(neighbours)
             if isinstance(nb, dict) and isinstance(nb.get("rate"), list)]
    if not swept:
        yield from expand_entry(entry, name)
        return
    errors: list[SpecError] = []
    checked: dict[tuple[int, int], float | str] = {}
    for i, rates in swept:
        key = f"neighbours[{i}].rate"
        if not rates:
            errors.append(SpecError(f"{where.at(('neighbours', i, 'rate'))}: {key}: "
                                    "expected a rate or a non-empty list of rates"))
        for position, rate in enumerate(rates):
            try:
                checked[i, position] = check_rate(rate)
            except ValueError as exc:
                errors.append(SpecError(f"{where.at(('neighbours', i, 'rate'))}: {key}: {exc}"))
    if errors:
        raise joined(errors)
    for combo in itertools.product(*(enumerate(rates) for _, rates in swept)):
        concrete_nbs = [dict(nb) if isinstance(nb, dict) else nb for nb in neighbours]
        suffix = []
        for (i, _), (position, rate) in zip(swept, combo, strict=True):
            concrete_nbs[i]["rate"] = rate
            suffix.append(rate_suffix(checked[i, position]))
        variant = {**entry, "neighbours": concrete_nbs}
        axis = {f"neighbours[{i}].rate": rate for (i, _), (_, rate) in
                zip(swept, combo, strict=True)}
        for full, concrete, values in expand_entry(variant, f"{name}.{'-'.join(suffix)}"):
            yield full, concrete, {**axis, **values}


def _scenario_workload_problems(wanted: Sequence[object],
                                workloads: Sequence[Variant[WorkloadSpec]],
                                where: Where) -> list[SpecError]:
    """One problem per name of an entry's ``workloads`` list that names no workload of
    the study (a value that is not a string is the model's to refuse)."""
    names = {w.name for w in workloads} | {w.name.split(".")[0] for w in workloads}
    return [where.error("workloads", f"no workload is named {name!r}"
                        f"{did_you_mean(name, sorted(names))} (known: "
                        f"{', '.join(sorted(names))})")
            for name in wanted if isinstance(name, str) and name not in names]


def check_scenario_cell(cell: Cell, lab: LabSpec | None, path: str) -> None:
    """A scenario's network neighbours are driven from lab hosts the lab has."""
    if cell.scenario is None:
        return
    spec: ScenarioSpec = cell.scenario.spec
    vm = guest_vm(cell.platform.spec)
    if spec.weights is not None and vm is not None and vm.host_limits is not None:
        # Both move the QEMU's threads into cgroups of their own: the last move wins,
        # and the run would be stored under limits it did not have.
        raise SpecError(f"{path}: cell {cell.name}: host_limits and the scenario's weights "
                        "both place the guest's QEMU threads in cgroups; use one of them")
    hosts = [h.name for h in lab.hosts] if lab else []
    for client in sorted(spec.lab_clients()):
        if client not in hosts:
            raise SpecError(f"{path}: cell {cell.name}: neighbours: client {client!r} is "
                            f"not a [[lab.host]] name ({', '.join(hosts) or 'none declared'})")


def cell_exists(platform: PlatformSpec, workload: WorkloadSpec) -> bool:
    """Whether the cell of ``workload`` on ``platform`` is formed (the workload's kind
    says: guest-to-guest traffic, for one, has no native counterpart)."""
    return workload.runs_on(platform)


def _lab_spec(raw: Any, path: str, workloads: Sequence[Variant[WorkloadSpec]],
              scenarios: Sequence[Variant[ScenarioSpec]] = (),
              lines: TomlLines | None = None) -> LabSpec | None:
    """The ``[lab]`` section (``subnet``, ``mtu``, ``[[lab.host]]``); an empty lab when a network,
    web or propagation workload, or a network neighbour, needs it but none is declared.
    Raises :class:`SpecError` listing every problem: each host's, each reserved or
    repeated host name, and the lab's own fields."""
    needs = any(w.spec.needs_lab() for w in workloads)
    needs = needs or any(s.spec.lab_clients() for s in scenarios)
    if raw is None:
        return _with_repositories(LabSpec(), workloads) if needs else None
    where = Where(path, "lab", lines=lines)
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: expected a table with subnet and [[lab.host]] entries")
    data = dict(raw)
    key = "host" if "host" in data else "hosts"
    entries = data.pop(key, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise where.error(key, "expected [[lab.host]] tables, each with a name")
    # The lab's own fields, spelled as the file spells them (host, not the model's hosts).
    errors = [where.error(name, "unknown field" + (did_you_mean(name, LAB_FIELDS)
                                                   or f" (fields: {', '.join(LAB_FIELDS)})"))
              for name in sorted(set(data) - set(LAB_FIELDS))]
    try:
        lab = LabSpec.model_validate({k: v for k, v in data.items() if k in LAB_FIELDS})
    except ValidationError as exc:
        errors.append(spec_error(exc, where, model=LabSpec))
    hosts = [_lab_host(entry, Where(path, "lab.host", i, lines=lines), errors)
             for i, entry in enumerate(entries)]
    # Names as written, so a host with another problem is still checked for them.
    names = [str(e.get("name")) for e in entries]
    reserved = {NATIVE_SERVER_HOST: "the native web server's host"}
    errors += [Where(path, "lab.host", i, lines=lines).error("name", problem)
               for i, problem in host_name_problems(names, reserved)]
    if errors:
        raise joined(errors)
    full = lab.model_copy(update={"hosts": tuple(h for h in hosts if h is not None)})
    return _with_repositories(full, workloads)


#: The fields of ``[lab]`` besides its ``[[lab.host]]`` tables, which are ``host``.
LAB_FIELDS = ("host", "subnet", "mtu")


def _lab_host(entry: dict[str, Any], where: Where,
              errors: list[SpecError]) -> LabHostSpec | None:
    """One ``[[lab.host]]``, or None with its problems appended to ``errors``."""
    try:
        return LabHostSpec.model_validate(entry)
    except ValidationError as exc:
        errors.append(spec_error(exc, where, model=LabHostSpec))
        return None


def _with_repositories(lab: LabSpec, workloads: Sequence[Variant[WorkloadSpec]]) -> LabSpec:
    """``lab`` plus the lab host each workload needs (:meth:`WorkloadSpec.lab_host`: a
    propagation's repository) that it lacks, as the first workload naming it gives it."""
    hosts = list(lab.hosts)
    for variant in workloads:
        host = variant.spec.lab_host()
        if host is not None and not any(h.name == host.name for h in hosts):
            hosts.append(host)
    return lab if len(hosts) == len(lab.hosts) else lab.model_copy(update={"hosts": tuple(hosts)})


def nbd_exports(platforms: Sequence[Variant[PlatformSpec]],
                host_of: Callable[[str | None], str | None] = nbd_host) -> dict[str, DiskSpec]:
    """Lab host -> the export it serves (the first guest disk naming it gives size,
    format and allocation; a host only natives name serves a default 1 GiB raw image).
    ``host_of``: :func:`nbd_host` for NBD exports, :func:`aoe_host` for AoE ones."""
    exports: dict[str, DiskSpec] = {}
    found = [(host_of(source), disk) for v in platforms
             for _, disk, source in v.spec.disk_sources()]
    for host, disk in found:
        if host is not None and disk is not None:
            exports.setdefault(host, disk)
    for host, _ in found:
        if host is not None:
            exports.setdefault(host, DiskSpec())
    return exports


#: NIC models whose guest driver takes no frame above 1500 bytes (8139too).
NO_JUMBO_NICS = ("rtl8139",)


def check_lab_mtu(platforms: Sequence[Variant[PlatformSpec]], lab: LabSpec | None,
                  path: str) -> None:
    """A lab MTU above 1500 reaches each guest NIC on the lab bridge: hvbench sets it
    inside ``kind = "qemu"`` guests, whose NIC model must carry such frames; a libvirt
    domain's NIC would stay at 1500. Raises :class:`SpecError` naming the platform."""
    if lab is None or lab.mtu <= DEFAULT_MTU:
        return
    for variant in platforms:
        vm = guest_vm(variant.spec)
        taps = [nic for nic in (vm.nics if vm is not None else ()) if nic.backend == "tap"]
        if not taps:
            continue
        if not variant.spec.SETS_NIC_MTU:
            raise SpecError(f"{path}: [lab] mtu {lab.mtu}: platform {variant.name} is "
                            f"kind = \"{variant.spec.kind}\", whose NIC MTU hvbench does "
                            "not set; use kind = \"qemu\" or the default mtu")
        for nic in taps:
            if nic.model in NO_JUMBO_NICS:
                raise SpecError(f"{path}: [lab] mtu {lab.mtu}: platform {variant.name}: "
                                f"nic model {nic.model} carries no frame above "
                                f"{DEFAULT_MTU} bytes; use virtio-net or e1000")


def check_storage_sources(platforms: Sequence[Variant[PlatformSpec]], lab: LabSpec | None,
                          path: str) -> None:
    """Every ``nbd:HOST`` and ``aoe:HOST`` names a ``[[lab.host]]`` of the study, and
    the guest disks naming one export agree on the export's size, format and allocation
    (one export per host and protocol, read by native and guest alike). Raises
    :class:`SpecError` naming the file, platform and field."""
    hosts = {h.name for h in lab.hosts} if lab else set()
    seen: dict[str, tuple[str, tuple[int, str, str]]] = {}
    for variant in platforms:
        for field, disk, source in variant.spec.disk_sources():
            host = nbd_host(source) or aoe_host(source)
            if host is None:
                continue
            where = f"{path}: platform {variant.name}: {field} {source}"
            if host not in hosts:
                raise SpecError(f"{where}: no [[lab.host]] is named {host!r} (the "
                                "storage server runs there, behind its shaped link)")
            if disk is None:
                continue
            shape = (disk.size, disk.format, disk.allocation)
            first = seen.setdefault(f"{source}", (variant.name, shape))
            if first[1] != shape:
                raise SpecError(f"{where}: size, format and allocation differ from "
                                f"platform {first[0]}'s disk on the same export")


def raw_file_sizes(study: Study, platform: str) -> list[tuple[str, int]]:
    """(workload name, bytes) of every workload run raw on the benchmark disk of platform
    variant ``platform`` (:meth:`WorkloadSpec.raw_device_bytes`): what its device must
    hold."""
    return [(c.workload.name, size) for c in study.cells if c.platform.name == platform
            for size in (c.workload.spec.raw_device_bytes(),) if size is not None]


def disk_for(spec: PlatformSpec) -> DiskSpec | None:
    """The guest's first benchmark disk, where disk workloads run (None natively and for
    an existing libvirt domain, whose disk hvbench does not declare)."""
    vm = guest_vm(spec)
    return vm.disks[0] if vm is not None and vm.disks else None


def cell_order(cells: Sequence[Cell], seed: int, repetition: int,
               ab: tuple[str, str] | None = None) -> list[Cell]:
    """The run order of one repetition: platforms shuffled, then each platform's
    workloads shuffled, from ``seed`` and the repetition number. Grouping by platform
    lets the runner boot each guest once per repetition. With ``ab`` (two platform
    names) those two run back to back where the first of them fell, A first in even
    repetitions and B first in odd ones (ABBA)."""
    rng = random.Random(seed * 1_000_003 + repetition)  # noqa: S311 - not for secrets
    by_platform: dict[str, list[Cell]] = {}
    for cell in cells:
        by_platform.setdefault(cell.platform_name, []).append(cell)
    groups = list(by_platform.values())
    rng.shuffle(groups)
    if ab is not None:
        groups = _abba(groups, ab, repetition)
    order: list[Cell] = []
    for group in groups:
        shuffled = list(group)
        rng.shuffle(shuffled)
        order += shuffled
    return order


def _abba(groups: list[list[Cell]], ab: tuple[str, str], repetition: int
          ) -> list[list[Cell]]:
    """``groups`` (one per platform, alone cells only are paired) with A's and B's put
    side by side, in ABBA order over the repetitions."""
    pair = ab if repetition % 2 == 0 else (ab[1], ab[0])
    found = {g[0].platform_name: g for g in groups if g and g[0].scenario is None}
    if not all(name in found for name in pair):
        return groups
    rest = [g for g in groups if g is not found[pair[0]] and g is not found[pair[1]]]
    at = min(i for i, g in enumerate(groups) if g is found[pair[0]] or g is found[pair[1]])
    before = [g for g in groups[:at] if g in rest]
    after = [g for g in rest if g not in before]
    return [*before, found[pair[0]], found[pair[1]], *after]


def select_cells(study: Study, only: Sequence[str] = (), exclude: Sequence[str] = ()) -> Study:
    """``study`` with the cells whose names match a pattern of ``only`` (all when none
    is given) and no pattern of ``exclude`` (shell patterns, as ``vm/*`` or
    ``*/iperf3*``). Its platforms, workloads, lab and text stay as declared.

    Raises :class:`SpecError` naming the patterns when no cell remains.
    """
    cells = tuple(c for c in study.cells
                  if (not only or any(fnmatch.fnmatchcase(c.name, p) for p in only))
                  and not any(fnmatch.fnmatchcase(c.name, p) for p in exclude))
    if not cells:
        given = [*(f"only {p!r}" for p in only), *(f"exclude {p!r}" for p in exclude)]
        raise SpecError(f"{study.path}: no cell remains after {', '.join(given)} (cells: "
                        f"{', '.join(c.name for c in study.cells)})")
    return dataclasses.replace(study, cells=cells)


def keep_cells(study: Study, names: Collection[str]) -> Study:
    """``study`` with only the cells named in ``names`` (exact names: a resumed run
    keeps the cells its start selected). Raises :class:`SpecError` when none is left."""
    cells = tuple(c for c in study.cells if c.name in names)
    if not cells:
        raise SpecError(f"{study.path}: none of the stored cells is in the study any more")
    return dataclasses.replace(study, cells=cells)


def with_repetitions(study: Study, repetitions: int) -> Study:
    """``study`` with ``repetitions`` measured repetitions instead of its own: a fixed
    count for every cell (an adaptive rule, the study's or a workload's, is dropped).

    Raises :class:`SpecError` for a count the study file could not give (1 to 1000).
    """
    try:
        section = StudySection.model_validate(
            {**study.study.model_dump(), "repetitions": repetitions, "adaptive": None})
    except ValidationError as exc:
        raise spec_error(exc, f"{study.path}: study") from exc
    return dataclasses.replace(study, study=section, workload_repetitions={})


# -- relative rates and identical guests ---------------------------------------------------
def rate_reference(workloads: Sequence[Variant[WorkloadSpec]], rate_of: str | None,
                   where: str) -> Variant[WorkloadSpec]:
    """The max-rate web workload a relative rate is a share of (one whose spec
    :meth:`~WorkloadSpec.is_rate_reference`): ``rate_of`` when given, else the study's
    only one. Raises :class:`SpecError` (``where`` names the file and entry) when there
    is none, several without ``rate_of``, or ``rate_of`` names none."""
    found = [w for w in workloads if w.spec.is_rate_reference()]
    names = ", ".join(w.name for w in found) or "none"
    if rate_of is not None:
        for workload in found:
            if workload.name == rate_of:
                return workload
        raise SpecError(f"{where}: rate_of: {rate_of!r} is not a max-rate web workload of "
                        f"the study (max-rate web workloads: {names})")
    if len(found) == 1:
        return found[0]
    if not found:
        raise SpecError(f"{where}: rate: a relative rate needs a [[workload]] of kind = "
                        "\"web\" and mode = \"max-rate\" in the study to measure the maximum "
                        "it is a share of; none is declared")
    raise SpecError(f"{where}: rate_of: several max-rate web workloads ({names}); name "
                    "the one the relative rate is a share of")


def cell_references(study: Study, cell: Cell) -> dict[str, Cell]:
    """The alone cells (on the cell's platform) whose measured results the cell's
    relative settings are shares of, by reference workload name, as every registered
    kind finds them (:attr:`WorkloadKind.references`: the web kind's relative rates,
    its own and its scenario's web neighbours'). Empty without such settings."""
    out: dict[str, Cell] = {}
    for kind in workload_kinds().values():
        out.update(kind.references(study, cell))
    return out


def require_nic(vm: VmSpec | None, where: str) -> None:
    """A guest (``vm``; None natively) has a NIC for a workload that talks over one.
    Raises :class:`SpecError` (``where`` names the file and the cell)."""
    if vm is not None and not vm.nics:
        raise SpecError(f"{where}: the guest has no NIC: give the platform a nic table, "
                        "e.g. nic = { model = \"virtio-net\", backend = \"tap\" }")
