"""``hvbench tune``: the search a ``[tune]`` table declares over a study's default guest.

A tune file is a study file (``[study]``, ``[[platform]]``, ``[[workload]]``) with a
``[tune]`` table. Its one guest platform without variants is the *default
configuration*; its native platform, if any, the baseline of "% of native". The
``[tune]`` table names the objective (a catalogue metric of some workload phases, with
weights), the axes to search (dotted paths of the guest's settings, ``disk.cache``), the
constraints (``exclude`` tables; invalid combinations are never tried; settings that
give up durability only with ``allow_unsafe``), the budget and the successive-halving
schedule.

Pure: parsing and expanding touch no file and start nothing; the host's capabilities
(the AIO modes QEMU offers here) are passed in.
"""

from __future__ import annotations

import dataclasses
import itertools
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hvbench.errors import SpecError
from hvbench.model import settings
from hvbench.model.libvirt_xml import DomainPlan, build_domain_xml
from hvbench.model.platform import PlatformSpec
from hvbench.model.problems import did_you_mean
from hvbench.model.qemu_argv import LaunchPlan, io_args
from hvbench.model.spec import (
    VmSpec,
    spec_error,
)
from hvbench.model.study import (
    Cell,
    Study,
    Variant,
    matches_filter,
    parse_study,
    value_text,
)
from hvbench.model.workload import WorkloadSpec

#: Cache modes that give up durability (QEMU ignores the guest's flushes): never tried
#: unless the tune file says ``allow_unsafe = true``.
UNSAFE_SETTINGS: Mapping[str, tuple[Any, ...]] = {"disk.cache": ("unsafe",)}
#: The axes a search can vary, with every value QEMU knows (AIO modes are narrowed to
#: those this host's QEMU opens, see :func:`default_axes`).
AXIS_VALUES: Mapping[str, tuple[Any, ...]] = {
    **{name: settings.lookup(name).choices for name in (
        "disk.bus", "disk.cache", "disk.aio", "disk.format", "disk.allocation",
        "disk.iothread")},
    #: Not a default axis: several request queues only help a guest with several vCPUs.
    "disk.queues": (1, 2, 4),
    #: Not default axes either (each needs an iothread, a virtio disk or a tap NIC with
    #: several vCPUs; invalid combinations are dropped from the space): adaptive polling
    #: off, QEMU's default, and 8x it; virtqueue sizes; discard and zero detection.
    "disk.poll_max_ns": (0, 32768, 262144),
    "disk.queue_size": (128, 256, 1024),
    **{name: settings.lookup(name).choices for name in (
        "disk.discard", "disk.detect_zeroes")},
    "nic.queues": (1, 2, 4),
    **{name: settings.lookup(name).choices for name in ("nic.model", "nic.backend",
                                                        "machine")},
    "vcpus": (1, 2, 4),
}
DISK_AXES = ("disk.bus", "disk.cache", "disk.aio", "disk.format", "disk.allocation",
             "disk.iothread")
NIC_AXES = ("nic.model", "nic.backend")
#: Workload kinds whose cells go through the platform's NIC: tune's default axes
#: include :data:`NIC_AXES` for them. A kind package adds itself with
#: :func:`register_nic_kind`.
NIC_KINDS: set[str] = set()


def register_nic_kind(kind: str) -> None:
    """Workload kind ``kind`` measures the NIC: tune searches the NIC axes for it."""
    NIC_KINDS.add(kind)


#: The workload kinds that measure the benchmark disk (filled by their packages with
#: :func:`register_disk_kind`): tune searches the disk axes for them.
DISK_KINDS: set[str] = set()


def register_disk_kind(kind: str) -> None:
    """Workload kind ``kind`` measures the disk: tune searches the disk axes for it."""
    DISK_KINDS.add(kind)


#: Spelling of the largest space hvbench enumerates (every valid combination is listed
#: up front, so that invalid ones are never handed to a guest).
MAX_SPACE = 20_000

Goal = Literal["maximize", "minimize"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TargetSpec(_Strict):
    """One workload phase of the objective and its weight."""

    workload: str = Field(min_length=1)
    #: The phase; None: the workload's only phase (an error when it has several).
    phase: str | None = None
    weight: float = Field(default=1.0, gt=0, le=1000)


class BudgetSpec(_Strict):
    """How much the search may spend: distinct configurations and/or wall seconds."""

    trials: int | None = Field(default=None, ge=1, le=10_000)
    seconds: float | None = Field(default=None, gt=0, le=7 * 86400)

    @model_validator(mode="after")
    def _check(self) -> BudgetSpec:
        if self.trials is None and self.seconds is None:
            raise ValueError("give trials, seconds or both")
        return self


class HalvingSpec(_Strict):
    """Successive halving: ``rungs`` are the repetitions a configuration has after each
    promotion; the best ``1/eta`` of a rung is promoted; the ``finalists`` best are then
    repeated, one repetition each round, until their confidence intervals separate or
    they reach ``max_repetitions``."""

    rungs: tuple[int, ...] = (1, 3)
    eta: int = Field(default=3, ge=2, le=10)
    finalists: int = Field(default=3, ge=2, le=10)
    max_repetitions: int = Field(default=6, ge=2, le=100)
    #: Share of the time budget after which no new configuration is explored (the rest
    #: goes to promotions and finals).
    explore_share: float = Field(default=0.6, gt=0, le=1)
    #: Share of the exploration (trials, or time) spent last on the one-axis neighbours
    #: of the best configuration so far (a local step after the sampler's global one).
    neighbour_share: float = Field(default=0.34, ge=0, lt=1)

    @model_validator(mode="after")
    def _check(self) -> HalvingSpec:
        rungs = self.rungs
        if not rungs or rungs[0] < 1 or any(b <= a for a, b in itertools.pairwise(rungs)):
            raise ValueError(f"rungs: expected increasing repetition counts from 1 up, "
                             f"got {list(rungs)}")
        if rungs[-1] < 2:
            raise ValueError("rungs: the last rung needs at least 2 repetitions (a "
                             "confidence interval)")
        if self.max_repetitions < rungs[-1]:
            raise ValueError(f"max_repetitions ({self.max_repetitions}) is below the last "
                             f"rung ({rungs[-1]})")
        return self


class TuneSection(_Strict):
    """The ``[tune]`` table."""

    metric: str = Field(min_length=1)
    goal: Goal | None = None
    targets: tuple[TargetSpec, ...] = ()
    axes: dict[str, tuple[Any, ...]] | None = None
    exclude: tuple[dict[str, Any], ...] = ()
    allow_unsafe: bool = False
    budget: BudgetSpec = BudgetSpec(trials=12)
    halving: HalvingSpec = HalvingSpec()
    #: The sampler's seed; None: the study's seed.
    seed: int | None = None
    #: Significance level of the winner's tests against the default and native.
    alpha: float = Field(default=0.05, gt=0, lt=1)
    #: Whether a configuration whose objective cells were served by the host page cache
    #: under an O_DIRECT workload (``hvbench explain``'s *not a device measurement*) may
    #: be crowned: by default it is flagged and the best device measurement wins.
    crown_cached: bool = False


Params = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Target:
    """A resolved objective term."""

    workload: str
    phase: str
    weight: float


@dataclass(frozen=True)
class TuneSpec:
    """A parsed tune file: the study, the default guest, the objective and the space."""

    study: Study
    section: TuneSection
    #: The default configuration's platform variant (a guest without variants).
    base: Variant[PlatformSpec]
    native: Variant[PlatformSpec] | None
    metric: str
    goal: Goal
    targets: tuple[Target, ...]
    #: axis -> the values searched, in the file's order.
    axes: Mapping[str, tuple[Any, ...]]
    #: Every valid configuration (constraints applied), in enumeration order.
    space: tuple[Params, ...]
    seed: int

    @property
    def default_params(self) -> Params:
        """The default configuration's value on every axis."""
        return params_of(self.base.spec, tuple(self.axes))

    @property
    def workloads(self) -> tuple[Variant[WorkloadSpec], ...]:
        """The workloads the objective measures (each trial runs all of them)."""
        names = {t.workload for t in self.targets}
        return tuple(w for w in self.study.workloads if w.name in names)

    def trial_variant(self, params: Params) -> Variant[PlatformSpec]:
        """The platform variant of a configuration, named from its values
        (``vm.writeback-io_uring-on``). Raises :class:`SpecError` when the combination
        is invalid or excluded."""
        return trial_variant(self, params)

    def cells(self, variant: Variant[PlatformSpec]) -> tuple[Cell, ...]:
        """The cells one platform variant runs: itself times the objective's workloads."""
        return tuple(Cell(f"{variant.name}/{w.name}", variant, w) for w in self.workloads)


def _vm(spec: PlatformSpec) -> VmSpec | None:
    return spec.guest_vm()


def params_of(spec: Any, axes: Sequence[str]) -> Params:
    """A platform's value on every axis (from its spec, never its name)."""
    return params_of_definition(spec.model_dump(mode="json"), axes)


def params_of_definition(platform: Mapping[str, Any], axes: Sequence[str]) -> Params:
    """A stored platform definition's value on every axis (what resume reads): the
    benchmark disk's and first NIC's, which a search varies."""
    return tuple((axis, settings.get(platform, axis)) for axis in axes)


def _apply(vm: Mapping[str, Any], params: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """A dumped VmSpec with the axes' values set on the benchmark disk (a tune file
    declares one) and the first NIC."""
    out = dict(vm)
    for axis, value in params:
        out = settings.with_setting(out, axis, value, index=0)
    return out


def trial_name(base: str, params: Params) -> str:
    """``base.<value>-<value>...``: a configuration's platform name."""
    return f"{base}.{'-'.join(value_text(v) for _, v in params)}"


def trial_variant(spec: TuneSpec, params: Params) -> Variant[PlatformSpec]:
    """See :meth:`TuneSpec.trial_variant`."""
    values = dict(params)
    if any(matches_filter(values, rule) for rule in spec.section.exclude):
        raise SpecError(f"{spec.study.path}: tune.exclude: {_params_text(params)} is excluded")
    vm = _vm(spec.base.spec)
    if vm is None:  # parse_tune only accepts a guest as the base
        raise SpecError(f"{spec.study.path}: platform: the default configuration is no guest")
    dumped = _apply(vm.model_dump(mode="json"), params)
    try:
        new_vm = VmSpec.model_validate(dumped)
    except ValidationError as exc:
        raise spec_error(exc, f"{spec.study.path}: tune ({_params_text(params)})") from exc
    platform = spec.base.spec.with_vm(new_vm)
    return Variant(trial_name(spec.base.name, params), platform, values)


def _params_text(params: Params) -> str:
    return ", ".join(f"{k}={value_text(v)}" for k, v in params)


def default_axes(study: Study, aio_modes: Iterable[str], allow_unsafe: bool
                 ) -> dict[str, tuple[Any, ...]]:
    """Every I/O axis QEMU offers here for the study's workloads: the disk's bus, cache
    (without ``unsafe`` unless allowed), AIO modes this QEMU opens (``aio_modes``, as
    ``hvbench doctor`` reports them), format, allocation and iothread for disk
    workloads (:data:`DISK_KINDS`); the NIC's model and backend for workloads of
    :data:`NIC_KINDS`."""
    kinds = {w.spec.kind for w in study.workloads}
    axes: dict[str, tuple[Any, ...]] = {}
    if kinds & DISK_KINDS:
        for axis in DISK_AXES:
            values = AXIS_VALUES[axis]
            if axis == "disk.aio":
                values = tuple(v for v in values if v in set(aio_modes))
            if not allow_unsafe:
                values = tuple(v for v in values if v not in UNSAFE_SETTINGS.get(axis, ()))
            axes[axis] = values
    if kinds & NIC_KINDS:
        axes.update({axis: AXIS_VALUES[axis] for axis in NIC_AXES})
    return axes


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{disk = {cache = [..]}}`` and ``{"disk.cache" = [..]}`` alike as dotted keys."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _check_axes(axes: Mapping[str, Any], where: str, allow_unsafe: bool
                ) -> dict[str, tuple[Any, ...]]:
    out: dict[str, tuple[Any, ...]] = {}
    for axis, values in axes.items():
        if axis not in AXIS_VALUES:
            known = "a platform setting tune cannot vary" if axis in settings.SETTINGS \
                else "unknown axis"
            raise SpecError(f"{where}.{axis}: {known} (expected one of "
                            f"{', '.join(AXIS_VALUES)}){did_you_mean(axis, list(AXIS_VALUES))}")
        if not isinstance(values, list | tuple) or not values:
            raise SpecError(f"{where}.{axis}: expected a non-empty list of values")
        for value in values:
            if value not in AXIS_VALUES[axis] or isinstance(value, bool) != isinstance(
                    AXIS_VALUES[axis][0], bool):
                raise SpecError(f"{where}.{axis}: {value!r} is not one of "
                                f"{', '.join(map(str, AXIS_VALUES[axis]))}")
            if value in UNSAFE_SETTINGS.get(axis, ()) and not allow_unsafe:
                raise SpecError(f"{where}.{axis}: {value!r} gives up durability (the guest's "
                                "flushes are ignored): set allow_unsafe = true in [tune] to "
                                "search it")
        if len(set(values)) != len(values):
            raise SpecError(f"{where}.{axis}: values must be distinct")
        out[axis] = tuple(values)
    return out


def _base_platform(study: Study) -> tuple[Variant[PlatformSpec], Variant[PlatformSpec] | None]:
    guests = [p for p in study.platforms if _vm(p.spec) is not None]
    natives = [p for p in study.platforms if p.spec.IS_HOST]
    others = [p for p in study.platforms if p not in guests and p not in natives]
    if len(guests) != 1 or others:
        raise SpecError(f"{study.path}: platform: a tune file declares one guest platform "
                        "without variants (the default configuration the search starts "
                        f"from) and optionally kind = \"native\"; found {len(guests)} guests"
                        + (f" and {others[0].name}" if others else ""))
    vm = _vm(guests[0].spec)
    if vm is not None and len(vm.disks) > 1:
        raise SpecError(f"{study.path}: platform {guests[0].name}: the search varies one "
                        "benchmark disk; declare one")
    return guests[0], natives[0] if natives else None


def _targets(section: TuneSection, study: Study, where: str) -> tuple[Target, ...]:
    wanted = section.targets or tuple(TargetSpec(workload=w.name) for w in study.workloads)
    workloads = {w.name: w for w in study.workloads}
    out: list[Target] = []
    for index, target in enumerate(wanted):
        workload = workloads.get(target.workload)
        if workload is None:
            raise SpecError(f"{where}.targets[{index}].workload: no workload is named "
                            f"{target.workload!r} (known: {', '.join(workloads)})")
        phases = workload.spec.phase_list()
        phase = target.phase
        if phase is None:
            if len(phases) != 1:
                raise SpecError(f"{where}.targets[{index}].phase: workload "
                                f"{target.workload!r} has phases {', '.join(phases)}: name one")
            phase = phases[0]
        elif phases and phase not in phases:
            raise SpecError(f"{where}.targets[{index}].phase: {phase!r} is not a phase of "
                            f"{target.workload!r} ({', '.join(phases)})")
        out.append(Target(target.workload, phase, target.weight))
    return tuple(out)


def enumerate_space(spec: TuneSpec) -> tuple[Params, ...]:
    """Every combination of the axes that is valid and not excluded."""
    names = tuple(spec.axes)
    out: list[Params] = []
    for combo in itertools.product(*spec.axes.values()):
        params = tuple(zip(names, combo, strict=True))
        try:
            spec.trial_variant(params)
        except SpecError:
            continue
        out.append(params)
    return tuple(out)


def parse_tune(text: str, path: str, host_memory_bytes: int,
               aio_modes: Iterable[str] | Callable[[], Iterable[str]],
               direction_of: Callable[[str], str | None], *, seed: int | None = None
               ) -> TuneSpec:
    """Parse a tune file. ``aio_modes``: the AIO modes this host's QEMU opens (the
    default ``disk.aio`` axis; a callable is only asked when the file gives no axes);
    ``direction_of``: metric -> ``higher``/``lower``/
    ``neutral`` (the catalogue's, passed in from the analysis layer); ``seed``
    overrides the file's.

    Raises :class:`SpecError` naming the file, the field and what was expected: no
    ``[tune]`` table, an unknown metric or axis, an unsafe value without
    ``allow_unsafe``, a space with no valid configuration, or any study error.
    """
    study = parse_study(text, path, host_memory_bytes)
    raw = tomllib.loads(text).get("tune")
    where = f"{path}: tune"
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: expected a [tune] table (metric, axes, budget)")
    data = dict(raw)
    axes_raw = data.pop("axes", None)
    if axes_raw is not None and not isinstance(axes_raw, dict):
        raise SpecError(f"{where}.axes: expected a table of axis = [values]")
    try:
        section = TuneSection.model_validate(data)
    except ValidationError as exc:
        raise spec_error(exc, where) from exc
    base, native = _base_platform(study)
    direction = direction_of(section.metric)
    if direction is None:
        raise SpecError(f"{where}.metric: {section.metric!r} is not a catalogue metric "
                        "(e.g. mb_s, iops, lat_p99_ms, mbit_s, replies_s)")
    goal: Goal | None = section.goal or {"higher": "maximize", "lower": "minimize"}.get(
        direction)  # type: ignore[assignment]
    if goal is None:
        raise SpecError(f"{where}.goal: {section.metric} has no better direction: set "
                        "goal = \"maximize\" or \"minimize\"")
    targets = _targets(section, study, where)
    if len(targets) > 1 and native is None:
        raise SpecError(f"{where}.targets: several targets are combined as % of native: "
                        "add a [[platform]] with kind = \"native\"")
    if axes_raw is None:
        modes = aio_modes() if callable(aio_modes) else aio_modes
        axes = default_axes(study, modes, section.allow_unsafe)
    else:
        axes = _check_axes(_flatten(axes_raw), f"{where}.axes", section.allow_unsafe)
    if not axes:
        raise SpecError(f"{where}.axes: nothing to search (no axis given and no disk, "
                        "network or web workload to take the defaults from)")
    _check_space_size(axes, where)
    section = section.model_copy(update={"axes": axes})
    spec = TuneSpec(study=study, section=section, base=base, native=native,
                    metric=section.metric, goal=goal, targets=targets, axes=axes, space=(),
                    seed=seed if seed is not None else
                    (section.seed if section.seed is not None else study.study.seed))
    spec = dataclasses.replace(spec, space=enumerate_space(spec))
    if len(spec.space) < 2:
        raise SpecError(f"{where}.axes: the constraints leave {len(spec.space)} valid "
                        "configurations: nothing to choose from")
    return spec


def _check_space_size(axes: Mapping[str, tuple[Any, ...]], where: str) -> None:
    size = 1
    for values in axes.values():
        size *= len(values)
    if size > MAX_SPACE:
        raise SpecError(f"{where}.axes: {size} combinations; at most {MAX_SPACE}")


# -- the winner as ready-to-use configuration ---------------------------------------------
def toml_value(value: Any) -> str:
    """``value`` as a TOML value (inline tables skip None entries; strings quoted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, Mapping):
        inner = ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items() if v is not None)
        return "{ " + inner + " }"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    escaped = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def platform_toml(variant: Variant[PlatformSpec], name: str = "tuned") -> str:
    """The study ``[[platform]]`` entry of a guest variant, ready to paste into a study:
    the fields that differ from the defaults, plus every searched setting (its
    ``values``) spelled out even where it is the default."""
    spec = variant.spec
    vm = _vm(spec)
    if vm is None:
        raise SpecError(f"platform {variant.name}: not a guest")
    dumped = _apply(vm.model_dump(mode="json", exclude_defaults=True), variant.values.items())
    lines = ["[[platform]]", f'kind = "{spec.kind}"', f'name = "{name}"']
    lines += [f"{key} = {toml_value(value)}" for key, value in spec.location_fields().items()]
    lines += [f"{key} = {toml_value(value)}" for key, value in dumped.items()]
    return "\n".join(lines) + "\n"


#: Placeholders of the ready-to-use fragments: paths and names the user replaces.
IMAGE_PLACEHOLDER = "/var/lib/images/data{index}.{format}"
BRIDGE_PLACEHOLDER = "br0"


def _placeholders(vm: VmSpec) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str | None, ...]]:
    images = tuple(IMAGE_PLACEHOLDER.format(index=i, format=d.format)
                   for i, d in enumerate(vm.disks))
    macs = tuple(f"52:54:00:12:34:{56 + i:02x}" for i in range(len(vm.nics)))
    taps = tuple(f"tap{i}" if n.backend == "tap" else None for i, n in enumerate(vm.nics))
    return images, macs, taps


def qemu_fragment(vm: VmSpec) -> list[str]:
    """The QEMU command-line fragment of a guest's I/O path (image paths, MACs and tap
    names are placeholders)."""
    images, macs, taps = _placeholders(vm)
    plan = LaunchPlan(spec=vm, accel="kvm", name="tuned", kernel="", initrd="",
                      kernel_cmdline="", qmp_socket="", agent_socket="", console_log="",
                      disk_images=images, tap_names=taps, macs=macs, vhost=True)
    return io_args(plan)


def libvirt_domain(vm: VmSpec) -> str:
    """A complete libvirt domain XML of the guest (placeholder paths; a tap NIC on
    bridge :data:`BRIDGE_PLACEHOLDER`), the form ``virt-xml-validate`` checks.

    Raises :class:`SpecError` when libvirt cannot express the configuration (IDE on q35,
    microvm)."""
    nics = tuple(n.model_copy(update={"bridge": n.bridge or BRIDGE_PLACEHOLDER})
                 if n.backend == "tap" else n for n in vm.nics)
    vm = vm.model_copy(update={"nics": nics})
    images, macs, taps = _placeholders(vm)
    plan = DomainPlan(spec=vm, accel="kvm", name="tuned", owner_pid=0,
                      kernel="/boot/vmlinuz", initrd="/boot/initrd.img",
                      kernel_cmdline="console=ttyS0", root_disk="/var/lib/images/root.img",
                      console_log="/var/log/libvirt/qemu/tuned-console.log",
                      disk_images=images, tap_names=tuple(None for _ in taps), macs=macs)
    return build_domain_xml(plan)


def libvirt_elements(domain_xml: str) -> str:
    """The I/O elements of a domain XML built by :func:`libvirt_domain`: ``<iothreads>``,
    the benchmark ``<disk>`` elements (``<driver cache= io= iothread=>``), SCSI
    ``<controller>`` elements and ``<interface>`` elements (``<model type=>``)."""
    root = ET.fromstring(domain_xml)  # noqa: S314 - XML this module just built
    picked = list(root.findall("iothreads"))
    devices = root.find("devices")
    if devices is not None:
        picked += [d for d in devices.findall("disk")
                   if (t := d.find("target")) is not None and t.get("dev") != "vda"]
        picked += [c for c in devices.findall("controller") if c.get("type") == "scsi"]
        picked += devices.findall("interface")
    out = []
    for element in picked:
        ET.indent(element)
        out.append(ET.tostring(element, encoding="unicode").strip())
    return "\n".join(out) + "\n"
