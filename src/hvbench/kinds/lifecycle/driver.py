"""The lifecycle workload: one guest's life with each step timed (seed 003 §4.2, Fig. 13:
creation time against disk size, start-up time), and what idle guests cost their host's
CPU (seed 003 §4.1).

A *repository copy* of the guest's system image (:func:`write_raw_image`: the root
squashfs padded with seeded random filler to ``image_size``) is written once, fsynced,
and reused by repetitions when the caller passes a ``source_cache``. Then, on one
monotonic clock, with these boundaries (the *marks*)::

    create    create_start       -> create_end          make the guest's image
    (gap)     create_end         -> qemu_start          hvbench prepares the launch
    qemu      qemu_start         -> qmp_answered        QEMU initialises
    kernel    qmp_answered       -> init_started        firmware, kernel load and boot
    agent     init_started       -> agent_answered      init, drivers, guest agent
    (gap)     agent_answered     -> shutdown_requested  nothing (microseconds)
    shutdown  shutdown_requested -> powered_off         the guest powers off
    exit      powered_off        -> files_removed       QEMU exits, hvbench cleans up

- ``create``: ``copy`` is a byte copy of the repository image (``shutil.copyfile``,
  i.e. sendfile(2), never a reflink) in ``image_format`` (a qcow2 repository copy is
  converted once, outside the timing); ``convert`` is ``qemu-img convert`` of the raw
  repository image to ``image_format``; ``overlay`` is ``qemu-img create -b`` of a qcow2
  overlay over it. Page cache: the source is dropped from the page cache before
  (``posix_fadvise(DONTNEED)`` of that file only, after it was fsynced), so it is read
  from disk like a repository's image; the new image is fsynced *inside* the timing,
  so the time includes writing it out, not just filling the page cache. Metrics
  ``duration_s``, ``size_bytes`` (the new file's length: about ``image_size`` for a
  copy or conversion, a few hundred kB for an overlay) and ``mb_s`` (that length per
  second, MB = 10^6 bytes). Afterwards the new image (and an overlay's base) are
  dropped from the page cache as well, so every mode boots from a cold image.
- ``qemu``: from the ``Popen`` call that starts QEMU (``timings["prepared_s"]``) until
  QMP answered its capabilities negotiation (``spawned_s + qmp_s``; with tap NICs this
  includes bringing the taps up). QEMU answers QMP once its main loop runs, which is
  when the virtual machine starts, so this is QEMU's own start-up.
- ``kernel``: from there until the guest's first userspace line on the serial console
  (``hvbench-stage1:``, printed by the initramfs /init right after it mounted /proc:
  the kernel has handed over). A thread reads the console log file every
  :data:`CONSOLE_POLL_S` seconds and stamps a line with the time its first bytes were
  read, so this boundary is late by at most that interval plus the UART's time for the
  line's first bytes. This phase holds the firmware, the loading of the kernel and
  initramfs through fw_cfg and the kernel's own boot: the metric ``guest_uptime_s`` (the
  guest's /proc/uptime printed in that line) is the kernel's own share of it.
- ``agent``: from there until the guest agent answered ``guest-sync-delimited``
  (``spawned_s + agent_s``): stage 1 mounts the root, stage 2 loads drivers and starts
  qemu-ga.
- ``shutdown``: from the agent's ``guest-shutdown`` request until QEMU's QMP
  ``SHUTDOWN`` event (the guest powered off; the event's own timestamp). If QMP never
  delivered the event, until QEMU exited instead, and the phase's ``qmp_event`` metric
  is 0 (the ``exit`` phase then holds only hvbench's clean-up).
- ``exit``: from then until the QEMU process was reaped and its run files removed.

The phases do not sum to the wall time exactly: the two gaps are reported in the raw
JSON (``gaps``), and the ``qemu`` phase carries the first one as ``prepare_s``.

``idle`` (when ``idle_guests`` > 0): that many guests of the same VmSpec boot one after
another from the bundled (read-only, shared) root disk; once every agent answered,
host CPU (/proc/stat) and every QEMU process's threads are sampled at 1 Hz for
``idle_s`` seconds (:class:`MonitorSet`). Metrics ``host_busy_pct`` (% of all host
CPUs), ``qemu_cpu_pct`` (utime+stime of the guests' QEMU processes, summed, % of one
core; clock ticks of 10 ms, so coarse for idle guests over short windows),
``qemu_cpu_pct_per_guest``, ``qemu_vcpu_pct`` (their vCPU threads only),
``qemu_run_pct`` (the same sum from the scheduler's nanosecond run time,
/proc/PID/task/*/schedstat), ``host_cpus``, ``guests`` and ``window_s``; the 1 Hz
series (host busy, QEMU CPU and run time) is in the outcome's ``series``. Idle guests
are sampled as soon as the last one's agent answered, so the first second may still
hold its boot's tail.

Every phase's outcome carries the same raw JSON (``lifecycle-json``): every mark, the
console lines with their times, the repository and created image, QEMU's argv and
timings, and the idle guests' data. Every guest, image and directory is removed
whether the run succeeds or fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from io import FileIO
from pathlib import Path
from typing import Any, Literal, Protocol

from hvbench.errors import GuestBootError, GuestError, HostError, ImageError
from hvbench.host.paths import make_owned_dir
from hvbench.host.started import StartStop
from hvbench.image.builder import GuestImage, find_image
from hvbench.image.system_image import (
    SystemFormat,
    check_free_disk,
    convert_image,
    make_overlay,
    write_raw_image,
)
from hvbench.model.spec import VmSpec
from hvbench.monitors.base import SeriesRow
from hvbench.monitors.readers import HostCpuSampler, ThreadCpuSampler
from hvbench.monitors.sampler import MonitorResult, MonitorSet
from hvbench.platforms.qemu import AccelChoice, QemuPlatform
from hvbench.workloads import timeline
from hvbench.workloads.outcome import PhaseOutcome

#: The timed phases of one guest's life, in order (``idle`` follows with idle guests).
LIFECYCLE_PHASES = ("create", "qemu", "kernel", "agent", "shutdown", "exit")


class Life(Protocol):
    """What one guest's timed life is run with (the lifecycle kind's spec)."""

    @property
    def image_size(self) -> int: ...
    @property
    def image_format(self) -> Literal["raw", "qcow2"]: ...
    @property
    def create(self) -> Literal["copy", "convert", "overlay"]: ...
    @property
    def idle_guests(self) -> int: ...
    @property
    def idle_s(self) -> float: ...
    @property
    def timeout_s(self) -> float: ...

    def phase_list(self) -> tuple[str, ...]: ...

    def model_dump(self, *, mode: str = ...) -> dict[str, Any]: ...

RAW_KIND = "lifecycle-json"
#: How often the console watcher reads the console log, seconds: the resolution of the
#: kernel/agent boundary.
CONSOLE_POLL_S = 0.002
#: Console lines that only the guest's /init scripts print (stage 1, then stage 2).
INIT_MARKERS = ("hvbench-stage1:", "hvbench-init:")
#: How long stopping the console watcher waits for its thread, seconds.
_WATCH_JOIN_S = 2.0
#: Console lines kept in the raw JSON (a guest that floods its console is cut there).
_MAX_CONSOLE_LINES = 200
IDLE_HZ = 1.0
#: The marks of one guest's life, in the order they must occur.
MARKS = ("create_start", "create_end", "qemu_start", "qmp_answered", "init_started",
         "agent_answered", "shutdown_requested", "powered_off", "qemu_exited",
         "files_removed")
#: Each phase's (start mark, end mark).
PHASE_BOUNDS: Mapping[str, tuple[str, str]] = {
    "create": ("create_start", "create_end"),
    "qemu": ("qemu_start", "qmp_answered"),
    "kernel": ("qmp_answered", "init_started"),
    "agent": ("init_started", "agent_answered"),
    "shutdown": ("shutdown_requested", "powered_off"),
    "exit": ("powered_off", "files_removed"),
}
#: The stretches between phases that belong to none (hvbench's own work).
GAP_BOUNDS: Mapping[str, tuple[str, str]] = {
    "prepare": ("create_end", "qemu_start"),
    "between": ("agent_answered", "shutdown_requested"),
}
_UPTIME_RE = re.compile(r"^hvbench-[a-z0-9]+: \[(\d+(?:\.\d+)?)\]")
_NAME_RE = re.compile(r"[^A-Za-z0-9_.-]+")
CreateMode = Literal["copy", "convert", "overlay"]


# -- phase arithmetic (pure) -----------------------------------------------------------
def boot_marks(launch_at: float, timings: Mapping[str, float]) -> dict[str, float]:
    """``qemu_start``, ``qmp_answered`` and ``agent_answered`` from the time ``launch()``
    was called and :attr:`QemuPlatform.timings` (``prepared_s``/``spawned_s`` count from
    the start of launch(), ``qmp_s``/``agent_s`` from the start of waiting, right after
    the spawn). Raises ValueError if a timing is missing."""
    try:
        spawned = launch_at + timings["spawned_s"]
        return {"qemu_start": launch_at + timings["prepared_s"],
                "qmp_answered": spawned + timings["qmp_s"],
                "agent_answered": spawned + timings["agent_s"]}
    except KeyError as exc:
        raise ValueError(f"QEMU timing {exc} missing: {dict(timings)}") from exc


def shutdown_marks(requested_at: float, timings: Mapping[str, float]) -> dict[str, float]:
    """``shutdown_requested``, ``powered_off``, ``qemu_exited`` and ``files_removed``
    from the time ``shutdown()`` was called and its timings (offsets from the request).
    Without ``shutdown_event_s`` (no QMP SHUTDOWN event), ``powered_off`` is QEMU's exit.
    Raises ValueError if ``exited_s`` or ``removed_s`` is missing."""
    try:
        exited = requested_at + timings["exited_s"]
        removed = requested_at + timings["removed_s"]
    except KeyError as exc:
        raise ValueError(f"shutdown timing {exc} missing: {dict(timings)}") from exc
    event = timings.get("shutdown_event_s")
    return {"shutdown_requested": requested_at,
            "powered_off": exited if event is None else requested_at + event,
            "qemu_exited": exited, "files_removed": removed}


def check_order(marks: Mapping[str, float]) -> None:
    """Raise ValueError unless every mark of :data:`MARKS` is present and none comes
    before the one listed ahead of it."""
    timeline.check_order(marks, MARKS)


def split_phases(marks: Mapping[str, float]) -> dict[str, float]:
    """Each lifecycle phase's duration in seconds, in :data:`LIFECYCLE_PHASES` order.
    Raises ValueError when marks are missing or out of order (see :func:`check_order`)."""
    check_order(marks)
    return timeline.phase_durations(marks, PHASE_BOUNDS, LIFECYCLE_PHASES)


def gaps(marks: Mapping[str, float]) -> dict[str, float]:
    """The stretches between phases (:data:`GAP_BOUNDS`), seconds."""
    return timeline.phase_durations(marks, GAP_BOUNDS)


def guest_uptime(line: str) -> float | None:
    """The guest uptime an ``hvbench-...: [UPTIME] ...`` console line carries, if any."""
    match = _UPTIME_RE.match(line)
    return float(match.group(1)) if match else None


def first_init_line(lines: Iterable[tuple[float, str]]) -> tuple[float, str] | None:
    """The first console line the guest's /init printed (:data:`INIT_MARKERS`)."""
    return next(((t, line) for t, line in lines if line.startswith(INIT_MARKERS)), None)


# -- the serial console ----------------------------------------------------------------
class LineClock:
    """Splits console bytes into lines, each stamped with the time its first bytes were
    read (a serial line arrives over several reads)."""

    def __init__(self) -> None:
        self._partial = b""
        self._since = 0.0

    def feed(self, data: bytes, now: float) -> list[tuple[float, str]]:
        """The lines ``data`` completes, as (time first seen, text without newline)."""
        out: list[tuple[float, str]] = []
        while data:
            if not self._partial:
                self._since = now
            head, newline, data = data.partition(b"\n")
            self._partial += head
            if not newline:
                break
            out.append((self._since, self._partial.decode(errors="replace").rstrip("\r")))
            self._partial = b""
        return out


class ConsoleWatch(StartStop):
    """Reads a guest's console log in a thread while the guest boots, keeping each line
    with the time it appeared (see :class:`LineClock`).

    ``locate`` returns the log's path once known (:attr:`QemuPlatform.console_log`);
    the file may appear later still. Reading a regular file never blocks, so the thread
    polls every ``interval`` seconds. Use as a context manager or start()/stop().
    """

    def __init__(self, locate: Callable[[], Path | None],
                 interval: float = CONSOLE_POLL_S) -> None:
        self._locate = locate
        self.interval = interval
        self.lines: list[tuple[float, str]] = []
        self._clock = LineClock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hvbench-console",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (waits up to :data:`_WATCH_JOIN_S` seconds). Safe twice."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(_WATCH_JOIN_S)

    def _run(self) -> None:
        handle = None
        try:
            while True:
                stopping = self._stop.wait(self.interval)
                if handle is None:
                    handle = self._open()
                if handle is not None:
                    self._read(handle)
                if stopping:
                    return
        finally:
            if handle is not None:
                handle.close()

    def _open(self) -> FileIO | None:
        path = self._locate()
        if path is None:
            return None
        try:
            return path.open("rb", buffering=0)
        except OSError:
            return None  # QEMU has not created it yet

    def _read(self, handle: FileIO) -> None:
        while data := handle.read(1 << 16):
            if len(self.lines) < _MAX_CONSOLE_LINES:
                self.lines.extend(self._clock.feed(data, time.monotonic()))


# -- images ----------------------------------------------------------------------------
@dataclass(frozen=True)
class RepositoryImage:
    """A repository copy of a system image: what ``create`` copies, converts or
    overlays. ``write_s`` is how long writing (or converting) it took."""

    path: Path
    size: int
    format: SystemFormat
    sha256: str
    write_s: float

    def describe(self) -> dict[str, Any]:
        return {"path": str(self.path), "size": self.size, "format": self.format,
                "sha256": self.sha256, "write_s": self.write_s}


#: Repository images by (image size, format); pass one to :func:`run_lifecycle` so
#: repetitions reuse them, and :func:`remove_repository` it when done.
RepositoryCache = dict[tuple[int, str], RepositoryImage]


def remove_repository(cache: RepositoryCache) -> None:
    """Remove every repository image of ``cache`` (each sits in its own directory)
    and empty it. Never raises."""
    for entry in cache.values():
        shutil.rmtree(entry.path.parent, ignore_errors=True)
    cache.clear()


@dataclass(frozen=True)
class CreatedImage:
    """The guest's image as ``create`` made it."""

    path: Path
    format: SystemFormat
    mode: CreateMode
    start: float
    end: float
    size_bytes: int

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def mb_s(self) -> float:
        return self.size_bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0


def fsync_file(path: Path) -> None:
    """fsync ``path`` (its data and metadata reach the disk). Raises OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def drop_page_cache(path: Path) -> None:
    """Evict ``path``'s clean pages from the page cache (``posix_fadvise DONTNEED`` of
    this file only: other users' caches stay). Dirty pages stay, so fsync first."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _host_error(what: str, exc: OSError) -> HostError:
    return HostError(f"{what}: {exc}")


def write_repository(*, image: GuestImage, size: int, fmt: SystemFormat, directory: Path,
                     raw: RepositoryImage | None = None, timeout: float = 1800.0
                     ) -> RepositoryImage:
    """Write a repository image of ``size`` bytes in ``fmt`` into ``directory`` and fsync
    it. A qcow2 one is converted from ``raw`` (the raw repository image of that size).

    Raises :class:`ImageError` (size below the root filesystem), :class:`HostError`
    (no room, or a write failed), :class:`CommandError` (qemu-img failed or outlived
    ``timeout`` seconds).
    """
    dest = directory / f"repository-{size}.{fmt}"
    started = time.monotonic()
    try:
        if fmt == "raw":
            digest = write_raw_image(image, size, dest)
        else:
            if raw is None:
                raise ImageError("internal: a qcow2 repository image needs the raw one")
            check_free_disk(directory, size, f"a {fmt} repository image")
            convert_image(raw.path, dest, fmt, timeout=timeout)
            digest = raw.sha256  # the same guest-visible bytes
        fsync_file(dest)
    except OSError as exc:
        raise _host_error(f"writing the repository image {dest}", exc) from exc
    return RepositoryImage(dest, size, fmt, digest, time.monotonic() - started)


def create_image(mode: CreateMode, source: RepositoryImage, fmt: SystemFormat,
                 dest_dir: Path, timeout: float) -> CreatedImage:
    """Make the guest's system image from ``source`` as ``mode`` says (see the module
    docstring), fsynced; the time covers exactly the creation and the fsync.

    ``copy`` needs ``source`` in ``fmt``; ``convert`` and ``overlay`` a raw ``source``.
    Raises :class:`HostError` (I/O error), :class:`CommandError` (qemu-img failed or
    outlived ``timeout`` seconds), :class:`ImageError` for a source of the wrong format.
    """
    wanted = fmt if mode == "copy" else "raw"
    if source.format != wanted:
        raise ImageError(f"internal: create={mode} needs a {wanted} source, "
                         f"got {source.format}")
    dest = dest_dir / f"system.{fmt}"
    try:
        start = time.monotonic()
        if mode == "copy":
            shutil.copyfile(source.path, dest)
        elif mode == "convert":
            convert_image(source.path, dest, fmt, timeout=timeout)
        else:
            make_overlay(source.path, "raw", dest)
        fsync_file(dest)
        end = time.monotonic()
        size = dest.stat().st_size
    except OSError as exc:
        raise _host_error(f"creating the system image {dest}", exc) from exc
    return CreatedImage(dest, fmt, mode, start, end, size)


# -- one guest's life ------------------------------------------------------------------
@dataclass
class LifeRecord:
    """Everything measured about the one guest of a lifecycle run."""

    marks: dict[str, float]
    created: CreatedImage
    repository: RepositoryImage
    repository_cached: bool
    guest: dict[str, Any]
    console: list[tuple[float, str]]
    init_line: str
    qmp_event: bool


@dataclass
class IdleRecord:
    """What the idle phase measured."""

    metrics: dict[str, tuple[float, str]]
    series: list[SeriesRow]
    raw: dict[str, Any] = field(default_factory=dict)


def _guest_name(name: str) -> str:
    """``name`` made safe for a directory prefix and QEMU's -name."""
    return _NAME_RE.sub("-", name).strip("-") or "lifecycle"


def _boot_error(guest: QemuPlatform, message: str) -> GuestBootError:
    return GuestBootError(message, argv=guest.argv, console_tail=guest.console_tail())


def _cold(paths: Iterable[Path]) -> None:
    for path in paths:
        try:
            drop_page_cache(path)
        except OSError as exc:
            raise _host_error(f"dropping {path} from the page cache", exc) from exc


def _launch_watched(guest: QemuPlatform) -> tuple[float, list[tuple[float, str]]]:
    """Launch ``guest`` while watching its console; returns (when launch() was called,
    the console lines). Raises what launch() raises (GuestBootError with the console)."""
    with ConsoleWatch(lambda: guest.console_log) as watch:
        launch_at = time.monotonic()
        guest.launch()
    return launch_at, watch.lines


def _live(guest: QemuPlatform, times: timeline.Timeline) -> tuple[list[tuple[float, str]], str]:
    """Boot ``guest`` and shut it down, marking ``times`` from qemu_start on; returns
    (console lines, the first /init line). Raises GuestBootError (no /init line before
    the agent answered), GuestError (shutdown failed), GuestTimeoutError."""
    launch_at, console = _launch_watched(guest)
    boot = boot_marks(launch_at, guest.timings)
    first = first_init_line(console)
    if first is None or first[0] > boot["agent_answered"]:
        markers = " or ".join(INIT_MARKERS)
        raise _boot_error(guest, f"guest {guest.name}: no /init line ({markers}) on the "
                          "console before the agent answered: cannot split kernel from agent")
    times.update(boot)
    times.mark("init_started", first[0])
    requested_at = times.now()
    guest.shutdown(times.remaining("the guest's shutdown"))
    times.update(shutdown_marks(requested_at, guest.timings))
    return console, first[1]


@dataclass
class _Run:
    """One call of :func:`run_lifecycle`: its inputs and private directory ``tmp``."""

    spec: Life
    vm: VmSpec
    name: str
    image: GuestImage
    scratch: Path
    tmp: Path
    cache: RepositoryCache | None
    times: timeline.Timeline
    #: The guests' accelerator, decided by the caller (required for accel=auto).
    accel: AccelChoice | None = None

    def repository(self, fmt: SystemFormat) -> tuple[RepositoryImage, bool]:
        """The repository image of ``image_size`` in ``fmt``: from the cache if there,
        else written (into ``tmp`` without a cache, into a new owned directory under
        ``scratch`` with one; a qcow2 one from the raw one). Returns (image, cached)."""
        key = (self.spec.image_size, fmt)
        if self.cache is not None and key in self.cache and self.cache[key].path.is_file():
            return self.cache[key], True
        raw = None if fmt == "raw" else self.repository("raw")[0]
        directory = (self.tmp if self.cache is None
                     else make_owned_dir(self.scratch, "lifecycle-repo-"))
        entry = write_repository(image=self.image, size=self.spec.image_size, fmt=fmt,
                                 directory=directory, raw=raw,
                                 timeout=self.times.remaining("writing the repository image"))
        if self.cache is not None:
            self.cache[key] = entry
        return entry, False

    def life(self) -> LifeRecord:
        """Create the guest's image, boot the guest, shut it down (stopped on failure).
        Raises as :func:`run_lifecycle`."""
        spec = self.spec
        # A copy copies the repository's image in the guest's format; the others read
        # the raw one.
        source, cached = self.repository(spec.image_format if spec.create == "copy"
                                         else "raw")
        if spec.create != "overlay":
            check_free_disk(self.tmp, spec.image_size, "the guest's system image")
        _cold([source.path])
        created = create_image(spec.create, source, spec.image_format, self.tmp,
                               self.times.remaining("creating the system image"))
        _cold([created.path] + ([source.path] if spec.create == "overlay" else []))
        guest = QemuPlatform(self.vm, name=self.name, image=self.image, base_dir=self.tmp,
                             boot_timeout=self.times.remaining("the guest's boot"),
                             root_disk=created.path, root_format=created.format,
                             accel_choice=self.accel)
        self.times.update({"create_start": created.start, "create_end": created.end})
        try:
            console, init_line = _live(guest, self.times)
        finally:
            guest.stop()
        marks = dict(self.times.marks)
        try:
            check_order(marks)
        except ValueError as exc:
            raise GuestError(f"guest {guest.name}: lifecycle marks out of order: {exc}",
                             argv=guest.argv) from exc
        return LifeRecord(marks, created, source, cached, guest.describe(), console,
                          init_line, "shutdown_event_s" in guest.timings)

    def idle(self) -> IdleRecord:
        """Boot ``idle_guests`` guests one after another (from the bundled root), sample
        them idle for ``idle_s`` seconds, and stop them all (also on failure).

        Raises :class:`GuestBootError` (a guest did not boot), :class:`GuestError` (one
        died), :class:`GuestTimeoutError` (``timeout_s`` ran out)."""
        guests: list[QemuPlatform] = []
        try:
            for i in range(self.spec.idle_guests):
                guest = QemuPlatform(
                    self.vm, name=f"{self.name}-idle{i}", image=self.image, base_dir=self.tmp,
                    boot_timeout=self.times.remaining(f"booting idle guest {i}"),
                    accel_choice=self.accel)
                guests.append(guest)
                guest.launch()
            self.times.remaining("sampling the idle guests", need=self.spec.idle_s)
            result = _sample_idle(guests, self.spec.idle_s)
            described = [g.describe() for g in guests]
        finally:
            for guest in guests:
                guest.stop()
        metrics, series = idle_metrics(result, len(guests), os.cpu_count() or 1)
        raw = {"guests": described, "window_s": result.seconds, "samples": result.samples,
               "hz": IDLE_HZ, "sampler_cpu_pct": result.sampler_cpu_pct,
               "summary": result.summary, "series": series}
        return IdleRecord(metrics, series, raw)


# -- idle guests -----------------------------------------------------------------------
def idle_metrics(result: MonitorResult, guests: int, host_cpus: int
                 ) -> tuple[dict[str, tuple[float, str]], list[SeriesRow]]:
    """The idle phase's metrics and 1 Hz series from a window that sampled monitor
    ``host.cpu`` and ``qemu0`` .. ``qemu<guests-1>`` (:class:`ThreadCpuSampler`)."""
    summary = result.summary
    def total(metric: str) -> float:
        return sum(summary.get(f"qemu{i}.{metric}", 0.0) for i in range(guests))

    qemu = total("total.cpu_pct")
    metrics: dict[str, tuple[float, str]] = {
        "host_busy_pct": (summary.get("host.cpu.busy_pct", 0.0), "%"),
        "qemu_cpu_pct": (qemu, "%"),
        "qemu_cpu_pct_per_guest": (qemu / guests if guests else 0.0, "%"),
        "qemu_vcpu_pct": (total("vcpu.cpu_pct"), "%"),
        "qemu_run_pct": (total("total.run_pct"), "%"),
        "host_cpus": (float(host_cpus), "count"),
        "guests": (float(guests), "count"),
        "window_s": (result.seconds, "s"),
    }
    host = result.series.get("host.cpu", [])
    per_guest = [result.series.get(f"qemu{i}", []) for i in range(guests)]
    rows = min([len(host)] + [len(s) for s in per_guest])
    series: list[SeriesRow] = []
    for k in range(rows):
        cpu = sum(s[k][1].get("total.cpu_pct", 0.0) for s in per_guest)
        series.append((host[k][0], {
            "host_busy_pct": host[k][1].get("busy_pct", 0.0), "qemu_cpu_pct": cpu,
            "qemu_cpu_pct_per_guest": cpu / guests if guests else 0.0,
            "qemu_run_pct": sum(s[k][1].get("total.run_pct", 0.0) for s in per_guest)}))
    return metrics, series


def _sample_idle(guests: Sequence[QemuPlatform], seconds: float) -> MonitorResult:
    """Sample host CPU and every guest's QEMU threads at :data:`IDLE_HZ` for
    ``seconds``. Raises :class:`GuestError` if a guest died meanwhile."""
    monitors: list[HostCpuSampler | ThreadCpuSampler] = [HostCpuSampler()]
    for i, guest in enumerate(guests):
        pid = guest.pid
        if pid is None or not guest.is_running():
            raise _boot_error(guest, f"idle guest {guest.name} is not running")
        monitors.append(ThreadCpuSampler(pid, guest.vcpu_threads().values(), name=f"qemu{i}"))
    with MonitorSet(monitors, hz=IDLE_HZ) as window:
        time.sleep(seconds)
    result = window.stop()
    for guest in guests:
        if not guest.is_running():
            raise _boot_error(guest, f"idle guest {guest.name} died while idle")
    if result.errors:
        raise GuestError(f"idle guests: sampling failed: {result.errors}")
    return result


# -- the workload ----------------------------------------------------------------------
def _raw_document(spec: Life, vm: VmSpec, life: LifeRecord,
                  idle: IdleRecord | None) -> str:
    t0 = life.marks["create_start"]
    document = {
        "workload": spec.model_dump(mode="json"), "vm": vm.model_dump(mode="json"),
        "clock": "seconds since create_start (time.monotonic)",
        "marks": {m: life.marks[m] - t0 for m in MARKS},
        "phases": split_phases(life.marks), "gaps": gaps(life.marks),
        "wall_s": life.marks["files_removed"] - t0,
        "shutdown_boundary": "qmp-shutdown-event" if life.qmp_event else "qemu-exit",
        "repository": life.repository.describe() | {"cached": life.repository_cached},
        "created": {"path": str(life.created.path), "mode": life.created.mode,
                    "format": life.created.format, "size_bytes": life.created.size_bytes,
                    "page_cache": "source dropped before; image fsynced inside the timing, "
                                  "then dropped before boot"},
        "init_line": life.init_line,
        "console": [{"t": t - t0, "line": line, "guest_uptime_s": guest_uptime(line)}
                    for t, line in life.console],
        "guest": life.guest,
        "idle": idle.raw if idle is not None else None,
    }
    return json.dumps(document, indent=1, sort_keys=True)


def lifecycle_outcomes(spec: Life, life: LifeRecord, raw: str,
                       idle: IdleRecord | None) -> list[PhaseOutcome]:
    """One outcome per phase of ``spec.phase_list()``, each with ``raw``."""
    durations = split_phases(life.marks)
    extra: dict[str, dict[str, tuple[float, str]]] = {
        "create": {"size_bytes": (float(life.created.size_bytes), "bytes"),
                   "mb_s": (life.created.mb_s, "MB/s")},
        "qemu": {"prepare_s": (gaps(life.marks)["prepare"], "s")},
        "kernel": {"guest_uptime_s": (guest_uptime(life.init_line) or 0.0, "s")},
        "shutdown": {"qmp_event": (1.0 if life.qmp_event else 0.0, "flag")},
    }
    out = [PhaseOutcome(phase=p, metrics={"duration_s": (d, "s")} | extra.get(p, {}),
                           raw=raw, raw_kind=RAW_KIND) for p, d in durations.items()]
    if idle is not None:
        out.append(PhaseOutcome(phase="idle", metrics=idle.metrics, raw=raw,
                                   raw_kind=RAW_KIND, series=idle.series))
    return out


def run_lifecycle(spec: Life, vm: VmSpec, *, name: str, scratch: Path,
                  image: GuestImage | None = None,
                  source_cache: RepositoryCache | None = None,
                  accel: AccelChoice | None = None) -> list[PhaseOutcome]:
    """Run one lifecycle measurement (see the module docstring): one outcome per phase
    of ``spec.phase_list()``. ``accel``: the guests' accelerator (required when ``vm``
    says ``auto``: :func:`hvbench.platforms.accel.choose_accel`).

    ``scratch`` holds a private owned directory for the run (images, the guests' run
    directories), removed before returning or raising. With ``source_cache`` the
    repository image is taken from it or written into it (its directory then outlives
    the call: :func:`remove_repository`); without, it is written and removed per call.
    ``spec.timeout_s`` bounds the whole run: each step gets what is left of it.

    Raises :class:`ImageError` (no guest image, or ``image_size`` below its root
    filesystem), :class:`HostError` (no room, I/O error), :class:`CommandError`
    (qemu-img), :class:`GuestBootError` (a guest did not boot, or its console showed no
    /init line to split kernel from agent), :class:`GuestError` (shutdown failed, an
    idle guest died), :class:`GuestTimeoutError` (``timeout_s`` ran out).
    """
    image = image or find_image()
    if image is None:
        raise ImageError("no guest image is built yet: run `hvbench image build`")
    times = timeline.Timeline(spec.timeout_s, "lifecycle")
    tmp = make_owned_dir(scratch, "lifecycle-")
    try:
        run = _Run(spec, vm, _guest_name(name), image, scratch, tmp, source_cache, times,
                   accel)
        life = run.life()
        idle = run.idle() if spec.idle_guests else None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return lifecycle_outcomes(spec, life, _raw_document(spec, vm, life, idle), idle)
