"""What the core knows of a workload: a typed base every kind's spec derives from, and
the registry of workload kinds the study parser reads entries through.

A kind package of :mod:`hvbench.kinds` defines its spec (a :class:`WorkloadSpec`
subclass: its fields, their checks, its phases and the few questions the parser asks
every workload) and registers it with :func:`register_workload_kind`, with the name an
entry of that kind takes by default and its cross-checks against the rest of the
study. :mod:`hvbench.model.study` parses and validates ``[[workload]]`` entries through
this registry only: it knows no kind's fields.

Pure: no file, no process.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from hvbench.errors import HvbenchError
from hvbench.model.rates import Rate
from hvbench.model.registry import register_once

if TYPE_CHECKING:
    from hvbench.model.lab import LabHostSpec, LabSpec
    from hvbench.model.platform import PlatformSpec
    from hvbench.model.scenario import ScenarioSpec
    from hvbench.model.study import Cell, Study, Variant


#: The kind of a ``[[workload]]`` entry (and of a stored definition) that names none.
DEFAULT_WORKLOAD_KIND = "disk"
#: How long httperf waits for a reply (``reply_timeout_s``) unless told: a web
#: workload's and a web neighbour's default, so both sides of a comparison between them
#: are measured alike.
DEFAULT_REPLY_TIMEOUT_S = 5.0


class WorkloadSpec(BaseModel):
    """One ``[[workload]]`` entry, validated: the base of every kind's spec.

    Frozen, unknown fields refused. A kind's spec sets ``kind`` (a ``Literal``),
    ``timeout_s`` and :meth:`phase_list`; the other methods have the answers of a
    workload that runs on any platform and needs nothing of the study's lab.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    #: Seconds one repetition of a cell may take before it is stopped.
    timeout_s: float

    #: The phases this kind may store, in the order a reader expects them (the
    #: reports sort known phases so); phases named from values (``10kB``) need none.
    ORDERED_PHASES: ClassVar[tuple[str, ...]] = ()
    #: Where this kind's :attr:`ORDERED_PHASES` go among all kinds' (lower first); a
    #: phase two kinds share takes the last place it is given.
    PHASE_GROUP: ClassVar[int] = 0
    #: True for kinds that boot (and stop) their own guests from the platform's spec:
    #: the runner does not boot the platform for them, and no scenario applies.
    SELF_BOOTING: ClassVar[bool] = False
    #: List-valued fields that are values, not variant axes (``file_kb = [1, 10]`` is
    #: one workload measuring two sizes).
    VALUE_LISTS: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def phase_list(self) -> tuple[str, ...]:
        """The phases one repetition runs, in order."""

    def runs_on(self, platform: PlatformSpec) -> bool:
        """Whether a cell of this workload on ``platform`` exists (some have no native
        counterpart, or need a guest hvbench boots itself)."""
        del platform
        return True

    def needs_lab(self) -> bool:
        """Whether this workload needs the study's net lab (an empty one is made when
        the study declares none)."""
        return False

    def lab_host(self) -> LabHostSpec | None:
        """A lab host this workload needs that the study may leave undeclared (added
        with the workload's own settings when missing); None: none."""
        return None

    def raw_device_bytes(self) -> int | None:
        """Bytes this workload writes on the platform's raw benchmark disk (its device
        must hold them); None: it does not run on the raw disk."""
        return None

    def is_rate_reference(self) -> bool:
        """Whether this workload measures the maxima relative rates are shares of."""
        return False

    def served_load(self) -> ServedLoad | None:
        """What a scenario's identical guests serve when they copy this workload (one
        file to a lab client at a rate); None: it serves nothing to copy."""
        return None


@dataclass(frozen=True)
class ServedLoad:
    """One file served to lab host ``client`` at ``rate`` (a share of the maximum
    workload ``rate_of`` measured, when relative), httperf waiting ``reply_timeout_s``
    for each reply: a web neighbour's load."""

    client: str
    file_kb: int
    rate: Rate
    rate_of: str | None = None
    reply_timeout_s: float = DEFAULT_REPLY_TIMEOUT_S


@dataclass(frozen=True)
class StudyChecks:
    """What a kind's cross-checks may read besides the cells: the study file's path
    (for messages), its lab and the host's memory."""

    path: str
    lab: LabSpec | None
    host_memory_bytes: int


#: A kind's check of one of its cells against the rest of the study.
CellCheck = Callable[["Cell", StudyChecks], None]
#: A kind's check of the whole study before it is assembled: its workloads, scenarios
#: and cells.
VariantsCheck = Callable[[Sequence["Variant[WorkloadSpec]"],
                          Sequence["Variant[ScenarioSpec]"], Sequence["Cell"], str], None]
#: A kind's check of the assembled study.
StudyCheck = Callable[["Study"], None]
#: The alone cells a cell's relative settings take a share of, by reference workload.
References = Callable[["Study", "Cell"], Mapping[str, "Cell"]]


@dataclass(frozen=True)
class IdentityFacts:
    """The facts of a stored workload definition that a cell's identity carries (the
    store's identity columns; the reports group by them, never by names)."""

    #: How the kind makes or moves its image (propagation's ``scp``, lifecycle's
    #: ``qcow2-overlay``); None: not a fact of the kind.
    method: str | None = None
    #: Bytes of the system image the workload makes or moves.
    image_size: int | None = None
    #: Bytes of the workload's test file.
    file_size: int | None = None


#: A kind's :class:`IdentityFacts` from one of its stored definitions: the JSON the store
#: holds, written by this or an older hvbench (a field may be missing: take the
#: default the spec had when the field was added, so stored identities never change).
Identity = Callable[[Mapping[str, Any]], IdentityFacts]


def stored_int(value: Any) -> int | None:
    """A stored JSON number as an int (None: missing, not a number, or a bool)."""
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


#: A change of one of a workload's own settings diagnosis may propose:
#: (``workload.<field>``, value).
SettingChange = tuple[str, Any]


@dataclass(frozen=True)
class WorkloadIntent:
    """What a stored workload definition asks of the I/O path, as diagnosis reads it,
    and which of its own settings would ask differently. A kind without requests of
    its own to describe keeps the empty default."""

    #: Requests the definition keeps in flight (None: the definition does not say,
    #: e.g. a user's job file sets it).
    depth: float | None = None
    #: Bytes per request the definition asks for (None: it does not say).
    request_bytes: float | None = None
    #: Changes of its own settings that keep more requests in flight.
    deeper: tuple[SettingChange, ...] = ()
    #: Changes of its own settings that bypass the guest's page cache.
    uncached: tuple[SettingChange, ...] = ()


#: A kind's :class:`WorkloadIntent` from one of its stored definitions (JSON of any
#: hvbench version, as for :data:`Identity`).
Intent = Callable[[Mapping[str, Any]], WorkloadIntent]


def _no_intent(workload: Mapping[str, Any]) -> WorkloadIntent:
    del workload
    return WorkloadIntent()


def _no_identity(workload: Mapping[str, Any]) -> IdentityFacts:
    del workload
    return IdentityFacts()


def _no_cell_check(cell: Cell, checks: StudyChecks) -> None:
    del cell, checks


def _no_variants_check(workloads: Sequence[Variant[WorkloadSpec]],
                       scenarios: Sequence[Variant[ScenarioSpec]],
                       cells: Sequence[Cell], path: str) -> None:
    del workloads, scenarios, cells, path


def _no_study_check(study: Study) -> None:
    del study


def _no_references(study: Study, cell: Cell) -> Mapping[str, Cell]:
    del study, cell
    return {}


@dataclass(frozen=True)
class WorkloadKind:
    """A registered workload kind: its spec class, the name an entry takes when it
    gives none (from the raw entry), and its cross-checks (each raises
    :class:`~hvbench.errors.SpecError` naming the file, the cell and the field)."""

    name: str
    spec: type[WorkloadSpec]
    default_name: Callable[[Mapping[str, Any]], str]
    check_cell: CellCheck = _no_cell_check
    check_variants: VariantsCheck = _no_variants_check
    check_study: StudyCheck = _no_study_check
    #: The cells whose results any cell's relative settings take a share of (the
    #: runner measures them first in each round).
    references: References = _no_references
    #: The facts of its stored definitions that a cell's identity carries.
    identity: Identity = _no_identity
    #: What its stored definitions ask of the I/O path (diagnosis reads it).
    intent: Intent = _no_intent


#: Every registered kind by ``kind`` value, in registration order.
_KINDS: dict[str, WorkloadKind] = {}


def register_workload_kind(kind: WorkloadKind) -> None:
    """Make the study parser read ``kind = "<kind.name>"`` entries with ``kind``.
    Registering the same name again with another kind raises :class:`HvbenchError`
    (two packages claim one kind); the same registration again does nothing."""
    register_once(_KINDS, kind.name, kind, "workload kind")


def workload_kinds() -> Mapping[str, WorkloadKind]:
    """The registered kinds by name, in registration order."""
    return dict(_KINDS)


def spec_classes() -> Mapping[str, type[WorkloadSpec]]:
    """Each registered kind's spec class, by name, in registration order."""
    return {name: kind.spec for name, kind in _KINDS.items()}


def kind_phases(name: str) -> tuple[str, ...]:
    """The :attr:`~WorkloadSpec.ORDERED_PHASES` of kind ``name`` (empty when no kind
    of that name is registered)."""
    kind = _KINDS.get(name)
    return kind.spec.ORDERED_PHASES if kind is not None else ()


def ordered_phases() -> tuple[str, ...]:
    """Every registered kind's ordered phases, by :attr:`~WorkloadSpec.PHASE_GROUP`
    and then registration order; a phase named twice keeps its last place (``shutdown``
    ends a propagation and a lifecycle: it goes after the lifecycle's ``agent``)."""
    kinds = sorted(_KINDS.values(), key=lambda k: k.spec.PHASE_GROUP)
    named = [p for k in kinds for p in k.spec.ORDERED_PHASES]
    return tuple(p for i, p in enumerate(named) if p not in named[i + 1:])


def identity_facts(workload: Mapping[str, Any]) -> IdentityFacts:
    """The identity facts of a stored workload definition, asked of its kind (a
    definition without ``kind`` is :data:`DEFAULT_WORKLOAD_KIND`'s; one of a kind this
    version does not know has none). Raises :class:`HvbenchError` when no kind is
    registered at all (the caller forgot :func:`hvbench.kinds.install`: every identity
    would silently lose its facts)."""
    kind = _registered(workload)
    return kind.identity(workload) if kind is not None else IdentityFacts()


def _registered(workload: Mapping[str, Any]) -> WorkloadKind | None:
    """The registered kind of a stored definition (None: a kind this version does not
    know). Raises :class:`HvbenchError` when no kind is registered at all: the caller
    forgot :func:`hvbench.kinds.install`, and every answer would silently be the
    unknown kind's."""
    if not _KINDS:
        raise HvbenchError("internal: no workload kind is registered (call "
                           "hvbench.kinds.install() first)")
    return _KINDS.get(str(workload.get("kind", DEFAULT_WORKLOAD_KIND)))


def workload_intent(workload: Mapping[str, Any]) -> WorkloadIntent:
    """What a stored workload definition asks of the I/O path, asked of its kind (as
    :func:`identity_facts` finds it; an unknown kind asks nothing). Raises
    :class:`HvbenchError` when no kind is registered at all."""
    kind = _registered(workload)
    return kind.intent(workload) if kind is not None else WorkloadIntent()
