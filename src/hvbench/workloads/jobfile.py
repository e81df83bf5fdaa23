"""fio job files as users have them: read the INI, point every job at the target.

Stock job files name places on the machine they were written for (``directory=
/mount-point-of-ssd``, ``filename=/dev/sda``, a relative ``filename=`` that lands in
whatever directory fio starts in) and sizes and runtimes for real disks (``size=10g``,
``runtime=900``). hvbench reads the file as fio does (``[global]`` sections inherited by
the jobs after them, ``include`` lines, ``;``/``#`` comments, ``${VAR}`` expansion) and
writes a new file in which every job:

- works on the benchmark target: the target directory (file targets; a ``filename=`` keeps
  its base name inside it) or the target device (device targets);
- takes the workload's ``file_size``, ``runtime`` and ``ramp_time`` when the study gives
  them;

and lists each change in words. Options that name other host paths (logs, iologs,
``opendir``) or act on the host (``exec_prerun``, ``ioscheduler``) are refused natively
unless the study lists the path in ``host_paths``. Pure: reading includes goes through a
callback, so everything here is unit-tested on text.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from hvbench.errors import SpecError
from hvbench.model.spec import format_size

#: fio reads ``include FILE`` lines; nesting deeper than this is a loop.
MAX_INCLUDE_DEPTH = 8
GLOBAL = "global"
#: Option aliases fio accepts, mapped to the name hvbench reasons about.
ALIASES: Mapping[str, str] = {"timeout": "runtime", "nr_files": "nrfiles",
                              "io_limit": "io_size"}
#: Options naming the place where a job's data goes; hvbench sets them per job.
TARGET_OPTIONS = frozenset({"directory", "filename"})
#: Options naming other host paths: allowed natively only inside the target, relative
#: (they then land in the platform's scratch directory) or listed in ``host_paths``.
PATH_OPTIONS = frozenset({"opendir", "filename_format", "read_iolog", "write_iolog",
                          "replay_redirect", "write_bw_log", "write_lat_log",
                          "write_iops_log", "write_hist_log", "ioscheduler_file"})
#: Options that act on the host itself (run a command, change a device's scheduler).
HOST_ACTIONS = frozenset({"exec_prerun", "exec_postrun", "ioscheduler"})
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?)b?$", re.IGNORECASE)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


@dataclass
class Section:
    """One ``[name]`` section: its options in file order (``None`` for a flag such as
    ``stonewall``), keys canonical (aliases resolved)."""

    name: str
    options: list[tuple[str, str | None]] = field(default_factory=list)

    @property
    def is_global(self) -> bool:
        return self.name == GLOBAL


@dataclass(frozen=True)
class JobTarget:
    """Where the jobs must work: a directory on a filesystem (``device`` False) or a
    block device / its native stand-in file ``path`` (``device`` True)."""

    directory: str
    path: str
    device: bool


@dataclass(frozen=True)
class Overrides:
    """The workload's fields that replace the job file's numbers (None: keep the file's).

    ``default_size`` is the size given to a job that has none on a file target (fio
    refuses such a job: it cannot know how large a new file should be).
    """

    size: int | None = None
    runtime_s: float | None = None
    ramp_s: float | None = None
    default_size: int = 256 << 20


@dataclass(frozen=True)
class JobPlan:
    """One job as it will run: name, clones (``numjobs``), the files or device it uses
    and its size in bytes (None: fio decides, e.g. the whole device or a percentage)."""

    name: str
    clones: int
    files: tuple[str, ...]
    size: int | None


@dataclass(frozen=True)
class Rewrite:
    """The rewritten job file, the changes in words, and the jobs as they will run."""

    text: str
    changes: tuple[str, ...]
    jobs: tuple[JobPlan, ...]


# -- reading -----------------------------------------------------------------------------
def _strip_comment(line: str) -> str:
    """The line without its comment: fio cuts a line at the first ``;`` or ``#``."""
    cut = min((i for i in (line.find(";"), line.find("#")) if i >= 0), default=len(line))
    return line[:cut].strip()


def _canonical(key: str) -> str:
    key = key.strip().lower()
    return ALIASES.get(key, key)


def parse_job_text(text: str, source: str, read_include: Callable[[str], str]) -> list[Section]:
    """The sections of a job file, ``include`` lines replaced by the included file's
    lines (``read_include(name)`` returns its text; the caller resolves the path). As
    in fio, an included file's options before any header belong to the section the
    ``include`` line is in, and options before the first header to a ``[global]``.

    Raises :class:`SpecError` naming ``source`` and the line for a malformed section
    header or an include nested more than :data:`MAX_INCLUDE_DEPTH` deep.
    """
    sections: list[Section] = []
    _parse_into(sections, text, source, read_include, 0)
    return sections


def _parse_into(sections: list[Section], text: str, source: str,
                read_include: Callable[[str], str], depth: int) -> None:
    if depth > MAX_INCLUDE_DEPTH:
        raise SpecError(f"{source}: include nested more than {MAX_INCLUDE_DEPTH} deep "
                        "(an include loop?)")
    for number, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw)
        if not line:
            continue
        if line.startswith(("include ", "include\t")):
            name = line.split(None, 1)[1].strip()
            _parse_into(sections, read_include(name), f"{source}: include {name}",
                        read_include, depth + 1)
        elif line.startswith("["):
            if not line.endswith("]") or len(line) < 3:
                raise SpecError(f"{source}: line {number}: expected a section header such "
                                f"as [job1], got {line!r}")
            sections.append(Section(line[1:-1].strip()))
        else:
            if not sections:
                sections.append(Section(GLOBAL))
            key, sep, value = line.partition("=")
            sections[-1].options.append((_canonical(key), value.strip() if sep else None))


def expand_vars(value: str, env: Mapping[str, str]) -> str:
    """``${VAR}`` replaced by ``env[VAR]``; unknown variables are left for fio."""
    return _VAR.sub(lambda m: env.get(m.group(1), m.group(0)), value)


def parse_fio_size(value: str) -> int | None:
    """Bytes of a fio size such as ``10g``, ``512m``, ``4k``, ``1GiB`` (fio's default
    base: k = 1024); None for what is not an absolute size (``50%``, a range)."""
    match = _SIZE.match(value.strip())
    if match is None:
        return None
    return int(float(match.group(1)) * 1024 ** _POWERS[match.group(2).lower()])


def fio_seconds(seconds: float) -> str:
    """A duration as fio reads it: whole seconds, else milliseconds."""
    return f"{seconds:g}s" if float(seconds).is_integer() else f"{round(seconds * 1000)}ms"


# -- resolving jobs ----------------------------------------------------------------------
def effective_jobs(sections: Sequence[Section]) -> list[tuple[Section, dict[str, str | None]]]:
    """Every job section with its effective options: the ``[global]`` sections before
    it (in order), then its own; the last value of an option wins, as in fio."""
    inherited: dict[str, str | None] = {}
    jobs = []
    for section in sections:
        if section.is_global:
            inherited.update(section.options)
        else:
            jobs.append((section, {**inherited, **dict(section.options)}))
    return jobs


def _inside(path: str, directory: str) -> bool:
    path, directory = posixpath.normpath(path), posixpath.normpath(directory)
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _target_files(name: str, options: Mapping[str, str | None], target: JobTarget,
                  keep: frozenset[str]) -> tuple[list[str], list[str]]:
    """The files the job will use on ``target`` and the changes that took, for one job
    whose effective options (variables expanded) are ``options``."""
    directory, filename = options.get("directory"), options.get("filename")
    changes: list[str] = []
    if target.device:
        wanted = filename.split(":") if filename else []
        if wanted and all(f == target.path or f in keep for f in wanted):
            return wanted, []
        was = f"filename={filename}" if filename else f"directory={directory or '.'}"
        changes.append(f"job {name}: {was} -> filename={target.path} (the target device)")
        return [target.path], changes
    if filename:
        files = []
        for item in filename.split(":"):
            full = item if item.startswith("/") else posixpath.join(directory or ".", item)
            if _inside(full, target.directory) or item in keep:
                files.append(full if _inside(full, target.directory) else item)
                continue
            files.append(posixpath.join(target.directory, posixpath.basename(item) or name))
        if files != filename.split(":"):
            old = f"filename={filename}" + (f" in directory={directory}" if directory else "")
            changes.append(f"job {name}: {old} -> filename={':'.join(files)}")
        return files, changes
    if directory is None or not _inside(directory, target.directory):
        changes.append(f"job {name}: directory={directory or '(fio working directory)'} -> "
                       f"{target.directory}")
    return [], changes


def _host_checks(name: str, options: Mapping[str, str | None], target: JobTarget,
                 keep: frozenset[str], source: str) -> None:
    """Refuse (natively) options that reach host paths outside the target or act on the
    host; ``keep`` holds the paths the study allows."""
    for key, value in options.items():
        if key in HOST_ACTIONS and value not in keep:
            raise SpecError(f"{source}: job {name}: {key}={value} acts on the host; natively "
                            "hvbench refuses it (list it in the workload's host_paths to "
                            "allow it)")
        if key in PATH_OPTIONS and value and value.startswith("/") \
                and not _inside(value, target.directory) and value not in keep:
            raise SpecError(f"{source}: job {name}: {key}={value} names a host path outside "
                            f"the benchmark target {target.directory}; list it in the "
                            "workload's host_paths to allow it")


def _job_size(name: str, options: Mapping[str, str | None], target: JobTarget,
              overrides: Overrides, changes: list[str]) -> tuple[int | None, str | None]:
    """The job's size after the overrides: bytes (None when fio decides, e.g. the whole
    device or a percentage) and the ``size=`` value to write (None: none)."""
    given = options.get("size")
    if overrides.size is not None:
        text = format_size(overrides.size)
        if given != text:
            changes.append(f"job {name}: size={given or '(unset)'} -> {text} "
                           "(the workload's file_size)")
        return overrides.size, text
    if given is None and not target.device and options.get("filesize") is None:
        text = format_size(overrides.default_size)
        changes.append(f"job {name}: size unset -> {text} (the workload's default "
                       "file_size: a new file needs a size)")
        return overrides.default_size, text
    return (parse_fio_size(given) if given else None), given


def _size_lines(name: str, options: Mapping[str, str | None], target: JobTarget,
                overrides: Overrides, changes: list[str]) -> tuple[int | None, list[str]]:
    """The job's size in bytes and its ``size=``/``filesize=`` lines."""
    size, text = _job_size(name, options, target, overrides, changes)
    lines = [] if text is None else [f"size={text}"]
    filesize = options.get("filesize")
    if filesize is not None and overrides.size is None:
        lines.append(f"filesize={filesize}")
    elif filesize is not None:
        changes.append(f"job {name}: filesize={filesize} dropped (the workload's "
                       "file_size sets the size)")
    return size, lines


def _timing(name: str, options: Mapping[str, str | None], overrides: Overrides,
            changes: list[str]) -> list[str]:
    """The runtime and ramp_time lines the job gets from the workload."""
    lines = []
    for key, seconds, field_name in (("runtime", overrides.runtime_s, "runtime"),
                                     ("ramp_time", overrides.ramp_s, "ramp_time")):
        if seconds is None:
            continue
        value = fio_seconds(seconds)
        lines.append(f"{key}={value}")
        if options.get(key) != value:
            changes.append(f"job {name}: {key}={options.get(key) or '(unset)'} -> {value} "
                           f"(the workload's {field_name})")
    return lines


_SET_PER_JOB = TARGET_OPTIONS | {"size", "filesize", "runtime", "ramp_time"}


def render_sections(sections: Sequence[Section], header: str = "") -> str:
    """Job-file text of ``sections`` (comments gone, includes already inlined)."""
    return _render(sections, {}, frozenset(), header)


def _render(sections: Sequence[Section], per_job: Mapping[int, list[str]],
            dropped: frozenset[str], header: str) -> str:
    """The job file again: every section with its options minus ``dropped`` (which each
    job now sets itself), each job followed by its own lines."""
    out = [f"; {header}"] if header else []
    for index, section in enumerate(sections):
        out.append(f"[{section.name}]")
        out += [key if value is None else f"{key}={value}"
                for key, value in section.options if key not in dropped]
        out += per_job.get(index, [])
        out.append("")
    return "\n".join(out)


def rewrite_jobs(sections: Sequence[Section], target: JobTarget, overrides: Overrides, *,
                 env: Mapping[str, str], native: bool, host_paths: Sequence[str] = (),
                 source: str = "job file") -> Rewrite:
    """Point every job of ``sections`` at ``target`` and apply ``overrides`` (pure).

    ``env`` expands ``${VAR}`` (``HVBENCH_TARGET_DIR`` and ``HVBENCH_TARGET`` among
    them). ``native``: the job runs on the host, where options that reach host paths
    outside the target or act on the host are refused unless in ``host_paths``; there a
    ``filename=`` listed in ``host_paths`` is also kept as written. Raises
    :class:`SpecError` naming ``source`` and the job.
    """
    keep = frozenset(host_paths) if native else frozenset()
    jobs = effective_jobs(sections)
    if not jobs:
        raise SpecError(f"{source}: no job section (only [global])")
    index_of = {id(s): i for i, s in enumerate(sections)}
    per_job: dict[int, list[str]] = {}
    changes: list[str] = []
    plans = []
    for section, raw in jobs:
        options = {k: None if v is None else expand_vars(v, env) for k, v in raw.items()}
        name = section.name
        if native:
            _host_checks(name, options, target, keep, source)
        files, moved = _target_files(name, options, target, keep)
        changes += moved
        size, size_lines = _size_lines(name, options, target, overrides, changes)
        lines = [f"filename={':'.join(files)}"] if files else \
            [f"directory={target.directory}"]
        lines += size_lines + _timing(name, options, overrides, changes)
        for key in ("runtime", "ramp_time"):
            if options.get(key) is not None and not any(x.startswith(key + "=") for x in lines):
                lines.append(f"{key}={options[key]}")
        per_job[index_of[id(section)]] = lines
        clones = _int(options.get("numjobs"), 1)
        plans.append(JobPlan(name, clones, tuple(files), size))
    text = _render(sections, per_job, _SET_PER_JOB,
                   "rewritten by hvbench: every job points at the benchmark target")
    return Rewrite(text, tuple(changes), tuple(plans))


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value else default
    except ValueError:
        return default


# -- fitting -----------------------------------------------------------------------------
def space_needed(plans: Sequence[JobPlan], target: JobTarget) -> int:
    """Bytes the jobs need on ``target``: on a device the largest job (jobs share it);
    on a filesystem every file, a file named by several jobs counted once (fio keeps
    the files of earlier jobs) and one file set per clone otherwise."""
    if target.device:
        return max((p.size or 0 for p in plans), default=0)
    shared: dict[str, int] = {}
    total = 0
    for plan in plans:
        size = plan.size or 0
        if plan.files:
            for name in plan.files:
                shared[name] = max(shared.get(name, 0), size // len(plan.files))
        else:
            total += size * plan.clones
    return total + sum(shared.values())


def check_fits(plans: Sequence[JobPlan], target: JobTarget, available: int,
               source: str, where: str) -> None:
    """Raises :class:`SpecError` with both numbers when the jobs need more than
    ``available`` bytes on ``target`` (``where`` says which target)."""
    needed = space_needed(plans, target)
    if needed > available:
        raise SpecError(f"{source}: the jobs need {_mib(needed)} but {where} has "
                        f"{_mib(available)}; set the workload's file_size (e.g. "
                        "file_size = \"256M\") or use a larger disk")


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.0f} MiB ({size} bytes)"


def target_env(target: JobTarget) -> dict[str, str]:
    """The variables hvbench defines for job files (fio expands any others itself)."""
    return {"HVBENCH_TARGET_DIR": target.directory, "HVBENCH_TARGET": target.path}
