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
from typing import Annotated, Any, Literal, TypeVar

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
from hvbench.model.lab import LabHostSpec, LabSpec, host_name_problems, parse_rate
from hvbench.model.names import check_name, name_problem
from hvbench.model.overrides import apply_overrides, blame, parse_override
from hvbench.model.problems import Loc, TomlLines, Where, did_you_mean, joined, printable
from hvbench.model.rates import Rate, check_rate, is_relative, rate_suffix
from hvbench.model.scenario import ALONE, SCENARIO_NAME_PATTERN, ScenarioSpec
from hvbench.model.spec import (
    ByteSize,
    DiskSpec,
    VmSpec,
    aoe_host,
    format_size,
    nbd_host,
    source_kind,
    spec_error,
)

T = TypeVar("T")

DiskProfile = Literal["iozone", "bonnie", "dd", "fio-job"]
#: The phases of each profile, in the order they run (later phases reuse earlier files).
PROFILE_PHASES: Mapping[str, tuple[str, ...]] = {
    "iozone": ("write", "rewrite", "read", "reread", "randread", "randwrite"),
    "bonnie": ("block-write", "block-rewrite", "block-read", "seq-create", "seq-stat",
               "seq-delete", "rand-create", "rand-stat", "rand-delete"),
    "dd": ("write", "read"),
    "fio-job": (),
}
_FILTER_KEYS = ("only", "exclude", "name")
#: List-valued fields that are values, not variant axes.
_NOT_AXES = ("disks", "nics", "filesystems", "phases", "forwards", "file_kb", "neighbours",
             "workloads", "host_paths")
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


class NativeDiskSpec(_Strict):
    """``disk = { source = ... }`` of a native platform: the storage the host itself
    measures in place of a file in its scratch directory, the same a guest is given
    (a host block device ``/dev/...``, or a lab host's NBD export ``nbd:HOST``)."""

    source: str

    @field_validator("source")
    @classmethod
    def _check_source(cls, value: str) -> str:
        kind = source_kind(value)
        if kind == "image":
            raise ValueError("expected a host block device (/dev/...) or nbd:HOST")
        if kind.startswith("aoe"):
            raise ValueError(f"{value}: this host's kernel has no aoe module, so only a "
                             "guest can attach an AoE export (initiator = \"guest\")")
        return value


class NativePlatformSpec(_Strict):
    """The host. ``memory_mib``: its commands run in a memory cgroup limited to that
    much (a guest's RAM), so a buffered test sees the page cache a guest of that size
    would; ``disk``: measure that storage instead of a scratch file."""

    kind: Literal["native"] = "native"
    memory_mib: int | None = Field(default=None, ge=64, le=1 << 20)
    disk: NativeDiskSpec | None = None


class QemuPlatformSpec(_Strict):
    """A guest: every VmSpec field, plus ``disk`` as a shorthand for one benchmark disk."""

    kind: Literal["qemu"] = "qemu"
    vm: VmSpec


#: A libvirt URI: ``driver[+transport]://[host]/path`` (``qemu:///system``,
#: ``qemu+ssh://host/system``).
_URI_RE = r"^[a-z0-9]+(\+[a-z0-9]+)?://[^\s]*$"
#: A disk's target name in a domain (``vdb``, ``sdb``, ``hdc``).
_TARGET_RE = r"^[a-z]{2,3}[a-z]{1,2}$"


class LibvirtPlatformSpec(_Strict):
    """A guest run by libvirt: either ``vm`` (hvbench defines a transient domain from the
    same axes as ``kind = "qemu"``) or ``domain`` (an existing domain of the user's,
    measured as it is, on the disk ``disk`` (a target such as ``vdb``) or under the
    guest directory ``path``). A ``disk`` that holds a mounted file system, swap or the
    guest's root, or whose contents cannot be checked, is refused unless
    ``destroy_contents`` is true: the study then says the disk's contents may be
    destroyed."""

    kind: Literal["libvirt"] = "libvirt"
    uri: str = Field(default="qemu:///system", pattern=_URI_RE)
    vm: VmSpec | None = None
    domain: str | None = Field(default=None, min_length=1, max_length=200)
    disk: str | None = Field(default=None, pattern=_TARGET_RE)
    path: str | None = Field(default=None, pattern=r"^/[^\s]*$")
    destroy_contents: bool = False

    @model_validator(mode="after")
    def _check_mode(self) -> LibvirtPlatformSpec:
        if (self.vm is None) == (self.domain is None):
            raise ValueError("give either the guest's axes (hvbench defines the domain) "
                             "or domain = \"NAME\" (an existing domain), not both")
        if self.domain is None and (self.disk or self.path):
            raise ValueError("disk = \"vdb\" / path = \"/dir\" name where an existing "
                             "domain is measured: they need domain = \"NAME\"")
        if self.disk and self.path:
            raise ValueError("give either disk (a target such as vdb) or path, not both")
        if self.destroy_contents and not self.disk:
            raise ValueError("destroy_contents = true allows hvbench to destroy what is on "
                             "an existing domain's disk: it needs disk = \"vdb\"")
        return self

    @property
    def existing(self) -> bool:
        """Whether this measures a domain the user already has."""
        return self.domain is not None


class DiskWorkloadSpec(_Strict):
    """``kind = "disk"``: fio reproducing IOzone, Bonnie++ or dd, or the user's job file."""

    kind: Literal["disk"] = "disk"
    profile: DiskProfile
    #: ``file``: a test file on a filesystem (the guest formats its benchmark disk);
    #: ``device``: the raw benchmark disk (natively, a file of the same size);
    #: ``filesystem``: the guest's first virtio-fs share (``filesystem = {...}`` on the
    #: platform), natively the same host directory (:func:`native_share_dir`). Each
    #: run works in a fresh subdirectory of the share, removed afterwards.
    target: Literal["file", "device", "filesystem"] = "file"
    file_size: ByteSize = 256 << 20
    #: I/O size: IOzone's record size, dd's block size, Bonnie++'s chunk size.
    record_size: ByteSize | None = None
    direct: bool = False
    allow_cached: bool = False
    ioengine: Literal["psync", "libaio", "io_uring", "sync"] = "psync"
    iodepth: int = Field(default=1, ge=1, le=1024)
    #: Bonnie++: how many zero-size files the create/stat/delete phases use.
    files: int = Field(default=1024, ge=1, le=1_000_000)
    #: fio-job: the user's job file, relative to the study file.
    job_file: str | None = None
    #: fio-job: replace every job's runtime / ramp_time (e.g. "20s"); None keeps the
    #: job file's. ``file_size`` replaces every job's size= only when the study gives
    #: it (see :meth:`file_size_given`); otherwise it only sizes jobs that have none.
    runtime: Duration | None = None
    ramp_time: Duration | None = None
    #: fio-job: host devices or paths outside the target that the job file may name
    #: natively (e.g. ["/dev/nvme1n1"]); everything else is pointed at the target.
    host_paths: tuple[str, ...] = ()
    #: A subset of the profile's phases; all by default.
    phases: tuple[str, ...] | None = None
    timeout_s: float = Field(default=1800.0, gt=0)

    @model_validator(mode="after")
    def _check(self) -> DiskWorkloadSpec:
        if self.profile == "fio-job" and not self.job_file:
            raise ValueError("profile fio-job needs job_file (path to a fio job file)")
        if self.profile != "fio-job" and self.job_file:
            raise ValueError(f"job_file is only valid with profile fio-job, not {self.profile}")
        job_only = [f for f in ("runtime", "ramp_time", "host_paths")
                    if f in self.model_fields_set]
        if self.profile != "fio-job" and job_only:
            raise ValueError(f"{job_only[0]} is only valid with profile fio-job")
        for path in self.host_paths:
            if not path.startswith("/") or name_problem(path) is not None:
                raise ValueError(f"host_paths: expected absolute paths, got {path!r}")
        known = PROFILE_PHASES[self.profile]
        for phase in self.phases or ():
            if known and phase not in known:
                raise ValueError(f"phase {phase!r} is not one of {', '.join(known)}")
        return self

    def file_size_given(self) -> bool:
        """True when the study set ``file_size`` (pydantic's ``model_fields_set``), as
        opposed to the default: only then does it replace a job file's sizes."""
        return "file_size" in self.model_fields_set

    def io_size(self) -> int:
        """The record size this profile uses when none is given."""
        if self.record_size is not None:
            return self.record_size
        return {"iozone": 16 << 20, "bonnie": 8 << 10, "dd": 64 << 10}.get(self.profile, 4096)

    def phase_list(self) -> tuple[str, ...]:
        return self.phases or PROFILE_PHASES[self.profile]


#: The lab host that runs the native platform's web server (added by the runner).
NATIVE_SERVER_HOST = "native"
#: The peers a network workload can talk to besides the study's lab hosts.
BUILTIN_PEERS = ("host", "guest")


class NetworkWorkloadSpec(_Strict):
    """``kind = "network"``: iperf3 between the platform and a peer (seed 001 §3.4).

    The platform runs the iperf3 client; ``direction = "tx"`` means it sends,
    ``"rx"`` that it receives (``iperf3 -R``). ``peer`` is ``host`` (the root
    namespace, the seeds' driver domain), a ``[[lab.host]]`` name (an external host), or
    ``guest`` (a second guest of the same platform spec on the same bridge).
    """

    kind: Literal["network"] = "network"
    tool: Literal["iperf3"] = "iperf3"
    peer: str = Field(default="host", min_length=1)
    direction: Literal["tx", "rx"] = "tx"
    protocol: Literal["tcp", "udp"] = "tcp"
    streams: int = Field(default=1, ge=1, le=128)
    duration_s: float = Field(default=10.0, gt=0, le=3600)
    #: Seconds at the start that iperf3 leaves out (TCP slow start).
    omit_s: float = Field(default=1.0, ge=0, le=60)
    #: UDP only: the offered rate in bits/s (iperf3 -b), e.g. "1G" or "100M".
    udp_bitrate: str | None = Field(default=None, pattern=r"^\d+(\.\d+)?[KMG]?$")
    port: int = Field(default=5201, ge=1024, le=65535)
    timeout_s: float = Field(default=300.0, gt=0)

    @model_validator(mode="after")
    def _check(self) -> NetworkWorkloadSpec:
        if self.udp_bitrate is not None and self.protocol != "udp":
            raise ValueError("udp_bitrate is only valid with protocol = \"udp\"")
        if self.omit_s >= self.duration_s:
            raise ValueError(f"omit_s ({self.omit_s:g}) must be shorter than duration_s "
                             f"({self.duration_s:g})")
        return self

    def phase_list(self) -> tuple[str, ...]:
        return (self.direction,)


def _latency_switch(value: object) -> object:
    """``latency = true`` is the default pass, ``false`` none."""
    if value is True:
        return {}
    if value is False:
        return None
    return value


class WebLatencySpec(_Strict):
    """``latency = { tool = "wrk", ... }`` of a web workload: after httperf, per file size,
    a closed-loop wrk run of ``seconds`` (whole seconds: wrk's ``-d`` takes no fraction)
    with ``connections`` open connections on ``threads`` threads, whose latency
    percentiles are stored next to httperf's means (docs/network-workloads.md)."""

    tool: Literal["wrk"] = "wrk"
    seconds: int = Field(default=5, ge=1, le=3600)
    connections: int = Field(default=4, ge=1, le=10000)
    threads: int = Field(default=1, ge=1, le=64)

    @model_validator(mode="after")
    def _check(self) -> WebLatencySpec:
        # wrk's own rule ("number of connections must be >= threads"), caught early.
        if self.connections < self.threads:
            raise ValueError(f"latency: connections ({self.connections}) must be at least "
                             f"threads ({self.threads})")
        return self


class WebWorkloadSpec(_Strict):
    """``kind = "web"``: an HTTP server on the platform, httperf on a lab host (seed 003).

    One phase per served file size (``1kB``, ``10kB``, ...). ``fixed`` offers ``rate``
    requests/s; ``max-rate`` ramps the rate and reports the highest one sustained with
    fewer than ``max_error_pct`` % errors and achieved/offered >= ``min_achieved_ratio``.
    ``latency`` (off unless given; ``true`` for the defaults) adds a wrk pass per size
    for latency percentiles (:class:`WebLatencySpec`).
    """

    kind: Literal["web"] = "web"
    client: str = Field(default="client", min_length=1)
    file_kb: tuple[int, ...] = Field(default=(1, 10, 30, 50, 70, 100, 200), min_length=1)
    mode: Literal["fixed", "max-rate"] = "fixed"
    #: fixed: requests/s, or ``"90%"``: that share of the maximum the platform sustained
    #: alone for each file size, measured in the same run (:mod:`hvbench.model.rates`).
    rate: Annotated[Rate, BeforeValidator(check_rate)] = 50.0
    #: With a relative rate: the max-rate web workload (variant name) whose maximum it
    #: is taken from; None: the study's only max-rate web workload.
    rate_of: str | None = Field(default=None, min_length=1)
    duration_s: float = Field(default=10.0, gt=0, le=3600)
    calls_per_conn: int = Field(default=1, ge=1, le=1000)
    reply_timeout_s: float = Field(default=5.0, gt=0, le=600)
    start_rate: float = Field(default=10.0, gt=0)
    rate_factor: float = Field(default=1.5, gt=1.0, le=10.0)
    max_rate: float = Field(default=20000.0, gt=0)
    max_error_pct: float = Field(default=1.0, ge=0, le=100)
    min_achieved_ratio: float = Field(default=0.99, gt=0, le=1)
    port: int = Field(default=8080, ge=1024, le=65535)
    timeout_s: float = Field(default=1800.0, gt=0)
    latency: Annotated[WebLatencySpec | None, BeforeValidator(_latency_switch)] = None

    @field_validator("file_kb")
    @classmethod
    def _check_sizes(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        for size in value:
            # Files are generated in memory and copied into a guest through its agent.
            if not 1 <= size <= 1 << 16:
                raise ValueError(f"file size {size} kB: expected 1 to 65536 kB")
        if len(set(value)) != len(value):
            raise ValueError("file sizes must be distinct")
        return value

    @model_validator(mode="after")
    def _check(self) -> WebWorkloadSpec:
        if self.mode == "max-rate" and is_relative(self.rate):
            raise ValueError("a relative rate applies to mode = \"fixed\" (a max-rate "
                             "search measures the maximum itself)")
        if self.rate_of is not None and not is_relative(self.rate):
            raise ValueError("rate_of applies to a relative rate such as \"90%\"")
        if self.start_rate > self.max_rate:
            raise ValueError(f"start_rate ({self.start_rate:g}) is above max_rate "
                             f"({self.max_rate:g})")
        return self

    def phase_list(self) -> tuple[str, ...]:
        return tuple(f"{kb}kB" for kb in self.file_kb)


#: The timed phases of one guest's life, in order (see :class:`LifecycleWorkloadSpec`).
LIFECYCLE_PHASES = ("create", "qemu", "kernel", "agent", "shutdown", "exit")
#: The phases of one propagation, in order (seed 000 §5.1 plus the VM's termination).
PROPAGATION_PHASES = ("initial", "transfer", "terminal", "shutdown")
#: The lab host that serves images to propagation workloads unless one is named.
REPOSITORY_HOST = "headnode"
#: Workload kinds that boot (and stop) their own guests from the platform's spec: the
#: runner does not boot the platform for them.
SELF_BOOTING_KINDS = ("lifecycle", "propagation")


class LifecycleWorkloadSpec(_Strict):
    """``kind = "lifecycle"``: one guest's life, each step timed (seed 003 Fig. 13).

    ``create`` makes the guest's system image of ``image_size`` from a repository copy
    (``copy``: a byte copy; ``convert``: qemu-img convert to ``image_format``;
    ``overlay``: a qcow2 copy-on-write overlay over it), then the guest is started,
    boots, its agent answers, it is shut down and its QEMU process exits. With
    ``idle_guests`` > 0 an ``idle`` phase also measures the host CPU that many idle
    guests use over ``idle_s`` seconds.
    """

    kind: Literal["lifecycle"] = "lifecycle"
    image_size: ByteSize = 256 << 20
    image_format: Literal["raw", "qcow2"] = "raw"
    create: Literal["copy", "convert", "overlay"] = "copy"
    idle_guests: int = Field(default=0, ge=0, le=32)
    idle_s: float = Field(default=10.0, gt=0, le=3600)
    timeout_s: float = Field(default=600.0, gt=0)

    @model_validator(mode="after")
    def _check(self) -> LifecycleWorkloadSpec:
        if self.create == "overlay" and self.image_format != "qcow2":
            raise ValueError("create = \"overlay\" makes a qcow2 image: set "
                             "image_format = \"qcow2\"")
        return self

    def phase_list(self) -> tuple[str, ...]:
        return LIFECYCLE_PHASES + (("idle",) if self.idle_guests else ())


class PropagationWorkloadSpec(_Strict):
    """``kind = "propagation"``: fetch a system image from a repository host, verify
    it, boot it and terminate it (seed 000 §5.1, Figs. 3-4).

    Phases: ``initial`` (request to first byte), ``transfer`` (first to last byte),
    ``terminal`` (last byte to the guest's agent answering: checksum, image set-up,
    boot) and ``shutdown``. ``method``: ``scp``, ``http``, ``rsync``, ``gridftp`` (the
    seeds' GSIFTP: globus-url-copy from an anonymous GridFTP server); the modern ones
    the seeds lacked: ``http-zstd`` (compressed on the wire) and ``overlay`` (the node
    keeps the base image in a cache and boots a qcow2 copy-on-write overlay over it;
    only a checksum-verified first fetch moves bytes).
    """

    kind: Literal["propagation"] = "propagation"
    method: Literal["scp", "http", "rsync", "gridftp", "http-zstd", "overlay"] = "scp"
    image_size: ByteSize = 256 << 20
    #: The [[lab.host]] that serves images; added with ``link_rate`` if not declared.
    repository: str = Field(default=REPOSITORY_HOST, min_length=1)
    #: The repository's link, when hvbench adds the repository host itself.
    link_rate: str = "1gbit"
    verify: bool = True
    timeout_s: float = Field(default=1800.0, gt=0)

    @field_validator("link_rate")
    @classmethod
    def _check_rate(cls, value: str) -> str:
        parse_rate(value)
        return value.strip().lower()

    def phase_list(self) -> tuple[str, ...]:
        return PROPAGATION_PHASES


PlatformSpec = NativePlatformSpec | QemuPlatformSpec | LibvirtPlatformSpec


def guest_vm(platform: PlatformSpec) -> VmSpec | None:
    """The VM a platform declares (a qemu guest, a libvirt domain hvbench defines);
    None natively and for an existing libvirt domain."""
    if isinstance(platform, NativePlatformSpec):
        return None
    return platform.vm
WorkloadSpec = (DiskWorkloadSpec | NetworkWorkloadSpec | WebWorkloadSpec
                | LifecycleWorkloadSpec | PropagationWorkloadSpec)
WORKLOAD_KINDS: Mapping[str, type[BaseModel]] = {
    "disk": DiskWorkloadSpec, "network": NetworkWorkloadSpec, "web": WebWorkloadSpec,
    "lifecycle": LifecycleWorkloadSpec, "propagation": PropagationWorkloadSpec,
}


@dataclass(frozen=True)
class Variant:
    """One expanded platform or workload: its derived name, spec and varying values."""

    name: str
    spec: Any
    values: Mapping[str, Any]


@dataclass(frozen=True)
class Cell:
    """One platform variant running one workload variant, alone or in a scenario."""

    name: str
    platform: Variant
    workload: Variant
    #: The scenario (a variant of a ``[[scenario]]`` entry); None: the platform alone.
    scenario: Variant | None = None

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
    platforms: tuple[Variant, ...]
    workloads: tuple[Variant, ...]
    cells: tuple[Cell, ...]
    #: The net lab: declared by ``[lab]``, or an empty one (a bridge only) when a
    #: network or web workload needs it; None for disk-only studies.
    lab: LabSpec | None = None
    scenarios: tuple[Variant, ...] = ()
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
def _axes(entry: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, list[Any]]]:
    """Dotted paths of list-valued scalars (the variant axes), depth first."""
    for key, value in entry.items():
        if key in _FILTER_KEYS or key in _NOT_AXES:
            continue
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _axes(value, f"{path}.")
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


def expand_entry(entry: Mapping[str, Any], base: str) -> list[tuple[str, dict[str, Any],
                                                                     dict[str, Any]]]:
    """Expand one raw entry into ``(name, concrete entry, varying values)`` triples,
    filtered by its ``only`` / ``exclude`` lists."""
    axes = list(_axes(entry))
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


#: The platform kinds a study may declare.
PLATFORM_KINDS = ("native", "qemu", "libvirt")
#: The fields of a native platform besides kind and name.
NATIVE_FIELDS = ("memory_mib", "disk")


def _platform_spec(concrete: dict[str, Any], where: Where) -> PlatformSpec:
    kind = concrete.pop("kind", "qemu")
    if kind == "native":
        extra = sorted(set(concrete) - set(NATIVE_FIELDS))
        if extra:
            raise joined([where.error(key, "a native platform takes no fields besides "
                                           "kind, name, memory_mib and disk"
                                      + did_you_mean(key, NATIVE_FIELDS)) for key in extra])
        try:
            return NativePlatformSpec.model_validate(concrete)
        except ValidationError as exc:
            raise spec_error(exc, where, model=NativePlatformSpec) from exc
    if kind not in PLATFORM_KINDS[1:]:
        raise where.error("kind", "expected \"native\", \"qemu\" or \"libvirt\", got "
                                  f"{kind!r}{did_you_mean(str(kind), PLATFORM_KINDS)}")
    if kind == "libvirt":
        return _libvirt_spec(concrete, where)
    return QemuPlatformSpec(vm=_vm_spec(concrete, where))


def _libvirt_spec(concrete: dict[str, Any], where: Where) -> LibvirtPlatformSpec:
    uri = concrete.pop("uri", None)
    fields: dict[str, Any] = {} if uri is None else {"uri": uri}
    if "domain" in concrete:
        fields.update(concrete)
    else:
        fields["vm"] = _vm_spec(concrete, where)
    try:
        return LibvirtPlatformSpec.model_validate(fields)
    except ValidationError as exc:
        raise spec_error(exc, where, model=LibvirtPlatformSpec) from exc


def _vm_spec(concrete: dict[str, Any], where: Where) -> VmSpec:
    renames: dict[Loc, Loc] = {}
    for one, many in (("disk", "disks"), ("nic", "nics"), ("filesystem", "filesystems")):
        if one in concrete:
            if many in concrete:
                raise where.error(one, f"give either {one} (one) or {many}, not both")
            concrete[many] = [concrete.pop(one)]
            # The study wrote one table: name it as written, not as the model's list.
            renames[(many, 0)] = (one,)
    try:
        return VmSpec.model_validate(concrete)
    except ValidationError as exc:
        raise spec_error(exc, where, model=VmSpec, renames=renames) from exc


def _workload_spec(concrete: dict[str, Any], where: Where) -> WorkloadSpec:
    kind = concrete.get("kind", "disk")
    model = WORKLOAD_KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        kinds = ", ".join(f'"{k}"' for k in WORKLOAD_KINDS)
        raise where.error("kind", f"expected one of {kinds}, got {kind!r}"
                                  + did_you_mean(str(kind), list(WORKLOAD_KINDS)))
    try:
        return model.model_validate(concrete)  # type: ignore[return-value]
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


def _variants(raw: Any, section: str, path: str,
              lines: TomlLines | None = None) -> list[Variant]:
    return [v for v, _ in _indexed_variants(raw, section, path, lines)]


def _indexed_variants(raw: Any, section: str, path: str,
                      lines: TomlLines | None = None) -> list[tuple[Variant, int]]:
    """Every variant with the index of the entry it came from. Raises
    :class:`SpecError` listing the problem of every entry that has one (the first
    variant's problem for an entry that expands to several)."""
    if not isinstance(raw, list) or not raw or not all(isinstance(e, dict) for e in raw):
        raise SpecError(f"{path}: {section}: expected at least one [[{section}]] table")
    out: list[tuple[Variant, int]] = []
    errors: list[SpecError] = []
    for index, entry in enumerate(raw):
        try:
            out += _entry_variants(entry, section, path, index, lines)
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
                    lines: TomlLines | None) -> list[tuple[Variant, int]]:
    """The variants of one ``[[platform]]`` or ``[[workload]]`` entry."""
    _check_filters(entry, Where(path, section, index, lines=lines))
    base = entry.get("name") or _default_name(section, entry)
    out: list[tuple[Variant, int]] = []
    for name, concrete, values in expand_entry(entry, base):
        where = _where(path, section, index, values, lines)
        _check_variant_name(name, where)
        spec = (_platform_spec(concrete, where) if section == "platform"
                else _workload_spec(concrete, where))
        out.append((Variant(name, spec, values), index))
    return out


def _default_name(section: str, entry: Mapping[str, Any]) -> str:
    if section == "platform":
        return "native" if entry.get("kind") == "native" else "qemu"
    kind = entry.get("kind", "disk")
    if kind == "network":
        return "iperf3"
    if kind in ("web", "lifecycle", "propagation"):
        return str(kind)
    profile = entry.get("profile", "disk")
    return profile if isinstance(profile, str) else "disk"


def check_cache_rule(cell: Cell, host_memory_bytes: int) -> None:
    """Seed 000's rule: a buffered test file smaller than 2 x the platform's RAM measures
    the page cache. Refused unless the workload sets ``allow_cached = true``."""
    workload = cell.workload.spec
    if not isinstance(workload, DiskWorkloadSpec) or workload.direct or workload.allow_cached:
        return
    if workload.profile == "fio-job":
        return  # the user's job file decides its own caching
    platform = cell.platform.spec
    vm = guest_vm(platform)
    ram = vm.memory_mib << 20 if vm is not None else host_memory_bytes
    if isinstance(platform, NativePlatformSpec) and platform.memory_mib is not None:
        # The native side's page cache is bounded by its memory cgroup.
        ram = platform.memory_mib << 20
    if workload.file_size < 2 * ram:
        raise SpecError(
            f"cell {cell.name}: file_size {format_size(workload.file_size)} is smaller than "
            f"2 x the platform's RAM ({format_size(ram)}): buffered results would measure "
            "the page cache. Set direct = true, a larger file_size, or allow_cached = true"
        )


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
                                                   lines))
    pair = _collect(errors, lambda: _pop_rules(raw.get("workload"), path))
    indexed = _collect(errors, lambda: _indexed_variants(
        pair[0] if pair else raw.get("workload"), "workload", path, lines))
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
    check_rates(workloads, scenarios, path)
    check_identical(cells, path)
    for cell in cells:
        check_cache_rule(cell, host_memory_bytes)
        check_native_source_cell(cell, path)
        check_filesystem_cell(cell, path)
        check_network_cell(cell, lab, path)
        check_scenario_cell(cell, lab, path)
    study = Study(path, text, section, tuple(platforms), tuple(workloads), cells, lab,
                  tuple(scenarios), workload_rules, overrides)
    for cell in cells:
        if _is_share_cell(cell) and isinstance(cell.platform.spec, NativePlatformSpec):
            native_share_dir(study, cell.workload.name)
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


def _check_ab(section: StudySection, platforms: Sequence[Variant], path: str) -> None:
    """``ab`` names two platform variants of the study."""
    names = [p.name for p in platforms]
    for name in section.ab or ():
        if name not in names:
            raise SpecError(f"{path}: study: ab: {name!r} is not a platform of the study "
                            f"(platforms: {', '.join(names)})")


def _cells(platforms: Sequence[Variant], workloads: Sequence[Variant],
           scenarios: Sequence[Variant]) -> Iterator[Cell]:
    """Every platform x workload alone, and every qemu one in each scenario that applies
    to the workload (lifecycle and propagation boot their own guests: alone only)."""
    for p in platforms:
        for w in workloads:
            if not cell_exists(p.spec, w.spec):
                continue
            yield Cell(f"{p.name}/{w.name}", p, w)
            if not isinstance(p.spec, QemuPlatformSpec) or w.spec.kind in SELF_BOOTING_KINDS:
                continue
            for sc in scenarios:
                wanted = sc.spec.workloads
                if not wanted or any(w.name == n or w.name.startswith(f"{n}.") for n in wanted):
                    yield Cell(f"{p.name}@{sc.name}/{w.name}", p, w, sc)


def _scenarios(raw: Any, path: str, workloads: Sequence[Variant] | None,
               lines: TomlLines | None = None) -> list[Variant]:
    """The ``[[scenario]]`` entries, expanded like platforms (``weights.io = [0.5, 1, 2]``
    gives three variants). Each entry needs a ``name``. ``workloads``: the study's, to
    check the names an entry applies to (None: not checked, the workloads had problems).
    Raises :class:`SpecError` listing the problems of every entry."""
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(e, dict) for e in raw):
        raise SpecError(f"{path}: scenario: expected [[scenario]] tables")
    out: list[Variant] = []
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
                    workloads: Sequence[Variant] | None,
                    lines: TomlLines | None) -> list[Variant]:
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
    out: list[Variant] = []
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


def _scenario_workload_problems(wanted: Sequence[object], workloads: Sequence[Variant],
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
    hosts = [h.name for h in lab.hosts] if lab else []
    for client in sorted(spec.lab_clients()):
        if client not in hosts:
            raise SpecError(f"{path}: cell {cell.name}: neighbours: client {client!r} is "
                            f"not a [[lab.host]] name ({', '.join(hosts) or 'none declared'})")


def cell_exists(platform: PlatformSpec, workload: WorkloadSpec) -> bool:
    """Guest-to-guest traffic, a guest's lifecycle and an image's propagation to a
    guest have no native counterpart: such cells are not formed."""
    if isinstance(platform, LibvirtPlatformSpec) and platform.existing:
        # The user's own domain is never booted, copied or peered by hvbench.
        return not isinstance(workload, LifecycleWorkloadSpec | PropagationWorkloadSpec) \
            and not (isinstance(workload, NetworkWorkloadSpec) and workload.peer == "guest")
    if not isinstance(platform, NativePlatformSpec):
        return True
    if isinstance(workload, LifecycleWorkloadSpec | PropagationWorkloadSpec):
        return False
    return not (isinstance(workload, NetworkWorkloadSpec) and workload.peer == "guest")


def _lab_spec(raw: Any, path: str, workloads: Sequence[Variant],
              scenarios: Sequence[Variant] = (),
              lines: TomlLines | None = None) -> LabSpec | None:
    """The ``[lab]`` section (``subnet``, ``mtu``, ``[[lab.host]]``); an empty lab when a network,
    web or propagation workload, or a network neighbour, needs it but none is declared.
    Raises :class:`SpecError` listing every problem: each host's, each reserved or
    repeated host name, and the lab's own fields."""
    needs = any(isinstance(w.spec, NetworkWorkloadSpec | WebWorkloadSpec
                           | PropagationWorkloadSpec) for w in workloads)
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


def _with_repositories(lab: LabSpec, workloads: Sequence[Variant]) -> LabSpec:
    """``lab`` plus the repository host of every propagation workload it lacks, on a
    link shaped to the workload's ``link_rate`` (the first such workload's)."""
    hosts = list(lab.hosts)
    for variant in workloads:
        spec = variant.spec
        if isinstance(spec, PropagationWorkloadSpec) and \
                not any(h.name == spec.repository for h in hosts):
            hosts.append(LabHostSpec(name=spec.repository, rate=spec.link_rate))
    return lab if len(hosts) == len(lab.hosts) else lab.model_copy(update={"hosts": tuple(hosts)})


def check_network_cell(cell: Cell, lab: LabSpec | None, path: str) -> None:
    """A network or web cell names hosts the lab has, and a guest has a NIC to use."""
    workload = cell.workload.spec
    if not isinstance(workload, NetworkWorkloadSpec | WebWorkloadSpec):
        return
    hosts = [h.name for h in lab.hosts] if lab else []
    where = f"{path}: cell {cell.name}"
    if isinstance(workload, NetworkWorkloadSpec):
        if workload.peer not in (*BUILTIN_PEERS, *hosts):
            raise SpecError(f"{where}: peer: expected host, guest or a [[lab.host]] name "
                            f"({', '.join(hosts) or 'none declared'}), got {workload.peer!r}")
    elif workload.client not in hosts:
        raise SpecError(f"{where}: client: expected a [[lab.host]] name "
                        f"({', '.join(hosts) or 'none declared'}), got {workload.client!r}")
    platform = cell.platform.spec
    vm = guest_vm(platform)
    if vm is not None:
        if not vm.nics:
            raise SpecError(f"{where}: the guest has no NIC: give the platform a nic table, "
                            "e.g. nic = { model = \"virtio-net\", backend = \"tap\" }")
        if isinstance(workload, NetworkWorkloadSpec) and workload.peer == "guest" and \
                vm.nics[0].backend != "tap":
            raise SpecError(f"{where}: peer = \"guest\" needs backend = \"tap\" (two "
                            "user-mode guests cannot reach each other)")


def platform_sources(spec: PlatformSpec) -> list[tuple[str, DiskSpec | None, str]]:
    """Each disk source a platform names, as ``(field, guest disk or None natively,
    source)``: the field as the study spells it (``disk.source``, ``disks[1].source``)."""
    if isinstance(spec, NativePlatformSpec):
        return [("disk.source", None, spec.disk.source)] if spec.disk is not None else []
    vm = guest_vm(spec)
    disks = vm.disks if vm is not None else ()
    return [("disk.source" if len(disks) == 1 else f"disks[{i}].source", d, d.source)
            for i, d in enumerate(disks) if d.source is not None]


def nbd_exports(platforms: Sequence[Variant], host_of: Callable[[str | None], str | None]
                = nbd_host) -> dict[str, DiskSpec]:
    """Lab host -> the export it serves (the first guest disk naming it gives size,
    format and allocation; a host only natives name serves a default 1 GiB raw image).
    ``host_of``: :func:`nbd_host` for NBD exports, :func:`aoe_host` for AoE ones."""
    exports: dict[str, DiskSpec] = {}
    found = [(host_of(source), disk) for v in platforms
             for _, disk, source in platform_sources(v.spec)]
    for host, disk in found:
        if host is not None and disk is not None:
            exports.setdefault(host, disk)
    for host, _ in found:
        if host is not None:
            exports.setdefault(host, DiskSpec())
    return exports


def check_storage_sources(platforms: Sequence[Variant], lab: LabSpec | None,
                          path: str) -> None:
    """Every ``nbd:HOST`` and ``aoe:HOST`` names a ``[[lab.host]]`` of the study, and
    the guest disks naming one export agree on the export's size, format and allocation
    (one export per host and protocol, read by native and guest alike). Raises
    :class:`SpecError` naming the file, platform and field."""
    hosts = {h.name for h in lab.hosts} if lab else set()
    seen: dict[str, tuple[str, tuple[int, str, str]]] = {}
    for variant in platforms:
        for field, disk, source in platform_sources(variant.spec):
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


def check_native_source_cell(cell: Cell, path: str) -> None:
    """A native platform with a disk source measures it raw: its disk workloads need
    ``target = "device"`` (hvbench formats no host device). Raises :class:`SpecError`."""
    platform, workload = cell.platform.spec, cell.workload.spec
    if isinstance(platform, NativePlatformSpec) and platform.disk is not None and \
            isinstance(workload, DiskWorkloadSpec) and workload.target != "device":
        raise SpecError(f"{path}: cell {cell.name}: disk.source {platform.disk.source}: the "
                        "host measures its device raw: set target = \"device\" (hvbench "
                        "makes no file system on a host device)")


def _is_share_cell(cell: Cell) -> bool:
    workload = cell.workload.spec
    return isinstance(workload, DiskWorkloadSpec) and workload.target == "filesystem"


def check_filesystem_cell(cell: Cell, path: str) -> None:
    """A ``target = "filesystem"`` disk workload runs on a guest's first virtio-fs
    share: every guest it runs on declares one (a qemu platform: hvbench's virtiofsd
    serves QEMU only). Raises :class:`SpecError` naming the platform and the field."""
    if not _is_share_cell(cell):
        return
    platform = cell.platform.spec
    where = f"{path}: platform {cell.platform.name}: workload {cell.workload.name}"
    if isinstance(platform, LibvirtPlatformSpec):
        raise SpecError(f"{where}: target = \"filesystem\" needs a virtio-fs share, "
                        "which hvbench serves to kind = \"qemu\" guests only; expected "
                        "kind = \"qemu\" with filesystem = { cache = \"auto\" }")
    vm = guest_vm(platform)
    if vm is not None and not vm.filesystems:
        raise SpecError(f"{where}: target = \"filesystem\" runs on the guest's first "
                        "shared directory; expected filesystem = { cache = \"auto\" } "
                        "(or filesystems = [...]) on the platform")


def native_share_dir(study: Study, workload: str) -> str | None:
    """The host directory where the native side of ``target = "filesystem"`` workload
    ``workload`` runs: the ``source`` the study's guests share (the first shared
    directory of every declared guest that has one: ``--only`` may leave no guest cell
    in this invocation, the directory is still theirs); None when they name none: then
    hvbench makes each guest's share in the work directory and the host runs in a
    directory of its own there, on the same filesystem. Raises :class:`SpecError` when
    the guests share different directories (the host runs on one)."""
    sources: dict[str | None, str] = {}
    for platform in study.platforms:
        vm = guest_vm(platform.spec)
        if vm is not None and vm.filesystems:
            sources.setdefault(vm.filesystems[0].source, platform.name)
    if len(sources) > 1:
        named = ", ".join(f"{name} ({source or 'none: in the work directory'})"
                          for source, name in sources.items())
        raise SpecError(f"{study.path}: workload {workload}: target = \"filesystem\": the "
                        f"guests share different directories ({named}); expected one "
                        "filesystem.source for all, which the host measures natively")
    return next(iter(sources), None)


def raw_file_sizes(study: Study, platform: str) -> list[tuple[str, int]]:
    """(workload name, file_size) of every disk workload run raw (``target =
    "device"``) on platform variant ``platform``: what its device must hold."""
    return [(c.workload.name, c.workload.spec.file_size) for c in study.cells
            if c.platform.name == platform and isinstance(c.workload.spec, DiskWorkloadSpec)
            and c.workload.spec.target == "device"]


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
def rate_reference(workloads: Sequence[Variant], rate_of: str | None, where: str) -> Variant:
    """The max-rate web workload a relative rate is a share of: ``rate_of`` when given,
    else the study's only one. Raises :class:`SpecError` (``where`` names the file and
    entry) when there is none, several without ``rate_of``, or ``rate_of`` names none."""
    found = [w for w in workloads
             if isinstance(w.spec, WebWorkloadSpec) and w.spec.mode == "max-rate"]
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


def _check_sizes(reference: Variant, sizes: Sequence[int], where: str) -> None:
    missing = [kb for kb in sizes if kb not in reference.spec.file_kb]
    if missing:
        raise SpecError(f"{where}: file_kb: {missing[0]} kB is not measured by the "
                        f"reference max-rate workload {reference.name!r} (its file_kb: "
                        f"{', '.join(map(str, reference.spec.file_kb))})")


def check_rates(workloads: Sequence[Variant], scenarios: Sequence[Variant], path: str) -> None:
    """Every relative rate has a reference that measures its file sizes."""
    for w in workloads:
        spec = w.spec
        if isinstance(spec, WebWorkloadSpec) and is_relative(spec.rate):
            where = f"{path}: workload {w.name}"
            _check_sizes(rate_reference(workloads, spec.rate_of, where), spec.file_kb, where)
    for sc in scenarios:
        for index, nb in enumerate(sc.spec.neighbours):
            if nb.role == "net" and nb.load == "web" and is_relative(nb.rate):
                where = f"{path}: scenario {sc.name}: neighbours[{index}]"
                _check_sizes(rate_reference(workloads, nb.rate_of, where), (nb.file_kb,),
                             where)


def check_identical(cells: Sequence[Cell], path: str) -> None:
    """A scenario with ``identical`` applies to one fixed-rate web workload with one
    file size: its neighbours serve that workload's file at its rate."""
    seen: dict[str, str] = {}
    for cell in cells:
        if cell.scenario is None or cell.scenario.spec.identical is None:
            continue
        where = f"{path}: scenario {cell.scenario.name}: identical"
        spec = cell.workload.spec
        if not isinstance(spec, WebWorkloadSpec) or spec.mode != "fixed" \
                or len(spec.file_kb) != 1:
            raise SpecError(f"{where}: applies to a web workload with mode = \"fixed\" and "
                            f"one file size; workload {cell.workload.name} is not one (set "
                            "the scenario's workloads)")
        first = seen.setdefault(cell.scenario.name, cell.workload.name)
        if first != cell.workload.name:
            raise SpecError(f"{where}: applies to one workload, got {first} and "
                            f"{cell.workload.name} (set the scenario's workloads)")


def cell_references(study: Study, cell: Cell) -> dict[str, Cell]:
    """The alone max-rate cells (on the cell's platform) whose measured maxima the cell's
    relative rates are shares of, by reference workload name: its own rate's, its
    scenario's web neighbours' and identical guests'. Empty without relative rates."""
    rates: list[tuple[Rate, str | None]] = []
    spec = cell.workload.spec
    if isinstance(spec, WebWorkloadSpec):
        rates.append((spec.rate, spec.rate_of))
    if cell.scenario is not None:
        rates += [(nb.rate, nb.rate_of) for nb in cell.scenario.spec.neighbours
                  if nb.role == "net" and nb.load == "web"]
    out: dict[str, Cell] = {}
    for rate, rate_of in rates:
        if not is_relative(rate):
            continue
        ref = rate_reference(study.workloads, rate_of, f"{study.path}: cell {cell.name}")
        for other in study.cells:
            if other.scenario is None and other.platform.name == cell.platform.name \
                    and other.workload.name == ref.name:
                out[ref.name] = other
    return out
