"""The propagation workload: fetch a system image from the repository host, verify it,
boot it, shut it down, each step timed (seed 000 §5.1, Figs. 3-4).

The *node* is the host's root namespace; the repository (:class:`ImageRepository`) runs
its servers in a lab host's namespace, reached over that host's (shaped) link. The
client runs in the root namespace against the repository's lab address:

===========  ==============================================================================
method       client (argv lists, no shell)
===========  ==============================================================================
scp          ``scp -O`` (classic SCP protocol) with the repository's key and known_hosts
rsync        ``rsync rsync://<repo>/images/<image> <dest>`` (daemon protocol, no ssh)
http         ``curl -o <dest>``
gridftp      ``globus-url-copy ftp://<repo>:2811<path> file://<dest>`` (one stream, the
             seeds' GSIFTP without GSI: anonymous, clear text)
http-zstd    ``curl <image>.zst | zstd -d -o <dest>``: two processes joined by a pipe
overlay      a cache hit: nothing moves; a miss: as ``http``, then the verified image
             enters the node's base cache (:class:`NodeImageCache`)
===========  ==============================================================================

Each client process is a :class:`~hvbench.platforms.process.BackgroundProcess`: in the
process registry while it runs (Ctrl-C's ``REGISTRY.stop_all()`` reaches it), stopped
soft then hard on a timeout, its output tail in the :class:`CommandError` of a failure.

All marks are on one monotonic clock (:class:`~hvbench.workloads.timeline.Timeline`):

- ``request``: just before the client is spawned (so process start-up, connection set-up,
  authentication and the server's own start of the transfer count as the seeds'
  *initial overhead*);
- ``first_byte``: when the first byte of the image is in a file on the node. A thread
  sums the sizes of the regular files in the transfer's private ``incoming`` directory
  every :data:`POLL_S` (5 ms): curl's and scp's output file, rsync's temporary
  ``.<name>.XXXXXX``, zstd's output. One definition for every method, late by at most
  one poll interval; curl's own ``time_starttransfer`` is kept in the raw JSON as a
  cross-check for http;
- ``last_byte``: the client exited (for a pipeline: its last process), i.e. the
  protocol says the transfer is complete (rsync has renamed its temporary file);
- ``agent_ready``: the booted guest's agent answered (``QemuPlatform.launch()``
  returned);
- ``shutdown_requested`` / ``guest_exited``: :meth:`QemuPlatform.shutdown`.

Phases: ``initial`` = request -> first_byte, ``transfer`` = first_byte -> last_byte,
``terminal`` = last_byte -> agent_ready (the checksum when ``verify``, the qcow2 overlay
for ``overlay``, the guest's boot from the fetched image), ``shutdown`` =
shutdown_requested -> guest_exited.

``overlay`` does what OpenStack Nova (``_base`` images with qcow2 instance disks) and
Proxmox (linked clones) do: the node keeps each base image it fetched, checksum-verified,
and boots every guest from a fresh copy-on-write overlay over it. The first use in a
repository's lifetime fetches the base (``cache_hit`` = 0; always verified, whatever
``verify`` says: only a verified base is cached), later uses are hits (``cache_hit`` = 1,
``size_bytes`` = 0: nothing is transferred; ``initial`` is the cache lookup).

Transfer metrics: ``size_bytes`` (the image; 0 on a cache hit), ``mb_s`` (image bytes
per second of ``transfer``, MB = 10^6 B), ``bytes_on_wire`` / ``bytes_to_repo`` (the
repository's root veth counters, read before ``request`` and after the client exited:
Ethernet frames toward the node, and back), ``link_rate_bits`` and ``link_share_pct``
(the image's bit rate as a share of the link's; above 100 % when compressed). Terminal
metrics: ``verify_s``, ``setup_s`` (the overlay), ``boot_s``. The ``window`` is entered
around the transfer (from before ``request`` to after the client's exit). For
``http-zstd`` the repository compressed ``<image>.zst`` once, outside any timing (its
cost is in the raw JSON under ``compressed``); the random filler does not compress,
the guest's root filesystem part does. The node writes into its page cache without
fsync, as the clients do; the verify and the boot then read the image from there.

The fetched image and any overlay are removed after each repetition; cached bases live
until the repository stops. Every process, guest and file of a repetition is removed
whether it succeeds or fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hvbench.errors import CommandError, HostError, ImageError
from hvbench.host.commands import require_tool
from hvbench.host.paths import make_owned_dir
from hvbench.host.started import StartStop
from hvbench.image.builder import GuestImage, find_image
from hvbench.image.system_image import check_free_disk, make_overlay, sha256_file
from hvbench.kinds.propagation.spec import PropagationWorkloadSpec
from hvbench.model.spec import VmSpec
from hvbench.platforms.process import BackgroundProcess
from hvbench.platforms.qemu import AccelChoice, QemuPlatform
from hvbench.workloads import timeline
from hvbench.workloads.outcome import PhaseOutcome
from hvbench.workloads.repository import (
    GridftpServer,
    HttpServer,
    ImageRepository,
    RepoImage,
    RsyncServer,
    SshServer,
    check_safe_path,
)

RAW_KIND = "propagation-json"
#: Interval of the arrival poll, seconds: the resolution of ``first_byte``.
POLL_S = 0.005
#: Interval of the transfer's progress series, seconds.
SERIES_S = 0.1
#: How long stopping the arrival poll waits for its thread, seconds.
_JOIN_S = 2.0
#: Bytes of each client output kept in the raw JSON (the tail).
_OUTPUT_KEEP = 16 << 10
SYS_NET = Path("/sys/class/net")
#: The marks of one propagation, in the order they must occur.
MARKS = ("request", "first_byte", "last_byte", "agent_ready", "shutdown_requested",
         "guest_exited")
PHASE_BOUNDS: Mapping[str, tuple[str, str]] = {
    "initial": ("request", "first_byte"),
    "transfer": ("first_byte", "last_byte"),
    "terminal": ("last_byte", "agent_ready"),
    "shutdown": ("shutdown_requested", "guest_exited"),
}
_SSH_OPTIONS = ("IdentitiesOnly=yes", "BatchMode=yes", "PasswordAuthentication=no",
                "StrictHostKeyChecking=yes", "GlobalKnownHostsFile=/dev/null",
                "UpdateHostKeys=no", "ConnectTimeout=30")


# -- pure: argv, phases, metrics ------------------------------------------------------
def scp_argv(*, address: str, port: int, key: str, known_hosts: str, remote_path: str,
             dest: str) -> list[str]:
    """``scp -O`` of ``remote_path`` on ``root@address`` to ``dest``: the classic SCP
    protocol, key only, the host key checked against ``known_hosts`` (no prompt), the
    user's ssh config ignored (``-F /dev/null``), ``-v`` for the negotiated cipher."""
    argv = ["scp", "-O", "-v", "-F", "/dev/null", "-P", str(port), "-i", key,
            "-o", f"UserKnownHostsFile={known_hosts}"]
    for option in _SSH_OPTIONS:
        argv += ["-o", option]
    return [*argv, f"root@{address}:{check_safe_path(remote_path)}", dest]


def rsync_argv(*, address: str, port: int, module: str, name: str, dest: str,
               timeout_s: int) -> list[str]:
    """rsync from the daemon's ``module``; ``--stats`` for the raw output; rsync's I/O
    timeout ``timeout_s`` (whole seconds, at least 1)."""
    return ["rsync", "--no-motd", "--stats", f"--timeout={max(1, timeout_s)}",
            f"rsync://{address}:{port}/{module}/{name}", dest]


def curl_argv(url: str, dest: str | None) -> list[str]:
    """curl of ``url`` into ``dest`` (None: to stdout, for a pipe); failing on HTTP
    errors, ignoring proxies from the environment, with its timing JSON on stderr."""
    argv = ["curl", "--silent", "--show-error", "--fail", "--noproxy", "*",
            "--write-out", "%{stderr}%{json}"]
    if dest is not None:
        argv += ["--output", dest]
    return [*argv, url]


def gridftp_argv(url: str, dest: str) -> list[str]:
    """globus-url-copy of ``url`` into the absolute path ``dest``: one data stream
    (the tool's default, as the seeds ran it), ``-vb`` for the transferred bytes in its
    output; no ``-rst``, so a failed transfer is reported, never silently restarted."""
    if not dest.startswith("/"):
        raise ValueError(f"globus-url-copy needs an absolute destination, got {dest!r}")
    return ["globus-url-copy", "-vb", url, f"file://{dest}"]


def zstd_argv(dest: str) -> list[str]:
    """zstd decompressing stdin into ``dest``; ``--no-sparse`` so every byte is
    written, as the other clients write them."""
    return ["zstd", "-d", "-q", "--no-progress", "--no-sparse", "-f", "-o", dest, "-"]


def split_phases(marks: Mapping[str, float]) -> dict[str, float]:
    """Each phase's duration from the marks (see :data:`PHASE_BOUNDS`)."""
    return timeline.phase_durations(marks, PHASE_BOUNDS)


def check_order(marks: Mapping[str, float]) -> None:
    """Raise ValueError unless every mark of :data:`MARKS` is present and none comes
    before the previous one."""
    timeline.check_order(marks, MARKS)


def first_arrival(samples: Sequence[tuple[float, int]]) -> float | None:
    """The time of the first sample with any bytes, from (time, bytes) samples."""
    return next((t for t, n in samples if n > 0), None)


def progress_series(samples: Sequence[tuple[float, int]], start: float,
                    interval: float = SERIES_S) -> list[tuple[float, dict[str, float]]]:
    """(seconds since ``start``, received MB and MB/s since the previous row) at least
    ``interval`` apart (MB = 10^6 bytes)."""
    rows: list[tuple[float, dict[str, float]]] = []
    last_t, last_n = start, 0
    for t, n in samples:
        if t < start or t - last_t < interval:
            continue
        rate = (n - last_n) / (t - last_t) / 1e6
        rows.append((t - start, {"received_mb": n / 1e6, "mb_s": rate}))
        last_t, last_n = t, n
    return rows


def transfer_metrics(*, size: int, seconds: float, rx_bytes: int, tx_bytes: int,
                     rate_bits: int | None, cache_hit: bool | None
                     ) -> dict[str, tuple[float, str]]:
    """The transfer phase's metrics: ``size_bytes`` moved (0 on a cache hit),
    ``mb_s`` (MB = 10^6 bytes, 0 for a zero-length transfer), ``bytes_on_wire`` (the
    repository's link, toward the node, Ethernet frames), ``bytes_to_repo`` (the other
    way: requests and ACKs), ``link_rate_bits`` and ``link_share_pct`` (the image's
    bits per second as a share of that rate) when the link is shaped, ``cache_hit``
    for ``overlay``."""
    metrics: dict[str, tuple[float, str]] = {
        "duration_s": (seconds, "s"),
        "size_bytes": (float(size), "bytes"),
        "mb_s": (size / seconds / 1e6 if seconds > 0 and size else 0.0, "MB/s"),
        "bytes_on_wire": (float(rx_bytes), "bytes"),
        "bytes_to_repo": (float(tx_bytes), "bytes"),
    }
    if rate_bits:
        metrics["link_rate_bits"] = (float(rate_bits), "bit/s")
        share = size * 8 / seconds / rate_bits * 100 if seconds > 0 else 0.0
        metrics["link_share_pct"] = (share, "%")
    if cache_hit is not None:
        metrics["cache_hit"] = (1.0 if cache_hit else 0.0, "flag")
    return metrics


# -- the client ------------------------------------------------------------------------
@dataclass
class ClientRun:
    """One run of the client (one process, or a pipeline of two)."""

    argvs: list[list[str]]
    started: float = 0.0
    ended: float = 0.0
    returncodes: list[int] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    @property
    def argv(self) -> list[str]:
        """The argvs joined by ``|`` (for errors)."""
        joined: list[str] = []
        for argv in self.argvs:
            joined += (["|"] if joined else []) + argv
        return joined

    @property
    def ok(self) -> bool:
        return bool(self.returncodes) and all(rc == 0 for rc in self.returncodes)

    def output(self) -> str:
        return "\n".join(o for o in self.outputs if o)

    def describe(self) -> dict[str, Any]:
        return {"argv": self.argvs, "exit": self.returncodes, "output": self.outputs}


def _read_tail(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - _OUTPUT_KEEP))
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def run_client(argvs: Sequence[Sequence[str]], *, cwd: Path, logs: Path,
               timeout: float) -> ClientRun:
    """Run one command, or two joined by a pipe, to completion, each a
    :class:`BackgroundProcess` (own session, ``PR_SET_PDEATHSIG=SIGKILL``, in the
    process registry, so Ctrl-C's ``REGISTRY.stop_all()`` reaches it), each one's output
    (stdout and stderr; a pipeline's first stdout goes into the pipe) in a file under
    ``logs``. ``started``/``ended``: just before the first spawn, just after the last
    exit.

    After ``timeout`` seconds (or on Ctrl-C) every process is stopped (SIGTERM to its
    group, SIGKILL after :data:`~hvbench.platforms.process.TERM_WAIT_S` s) and
    :class:`CommandError` (exit status None, "timed out", the output tails) raised; a
    non-zero exit is not an error here (see :attr:`ClientRun.ok`).
    :class:`ToolMissingError` if a program is missing."""
    if not 1 <= len(argvs) <= 2:
        raise ValueError("a client is one command or a pipeline of two")
    for argv in argvs:
        require_tool(argv[0])
    run = ClientRun([list(a) for a in argvs])
    procs: list[BackgroundProcess] = []
    try:
        run.started = _spawn(run.argvs, procs, logs, cwd)
        statuses = _wait_all(procs, run.started + timeout)
        run.ended = time.monotonic()
    finally:
        for proc in reversed(procs):
            proc.stop()
    run.outputs = [_read_tail(logs / f"client{i}.out") for i in range(len(argvs))]
    if statuses is None:
        raise CommandError(run.argv, None, run.output(),
                           f"fetching the image (no exit within {timeout:g} s)")
    run.returncodes = statuses
    return run


def _wait_all(procs: Sequence[BackgroundProcess], deadline: float) -> list[int] | None:
    """The exit statuses of ``procs`` (in their order), waiting for the last first (a
    pipeline ends when its reader does); None if one still runs at ``deadline``."""
    statuses: list[int] = []
    for proc in reversed(procs):
        status = proc.wait(deadline - time.monotonic())
        if status is None:
            return None
        statuses.insert(0, status)
    return statuses


def _spawn(argvs: list[list[str]], procs: list[BackgroundProcess], logs: Path,
           cwd: Path) -> float:
    """Start the pipeline's processes into ``procs`` (each appended before it starts, so
    the caller stops whatever got started); returns when the first was spawned."""
    piped = len(argvs) == 2
    first = BackgroundProcess(argvs[0], name=f"propagation client {argvs[0][0]}", cwd=cwd,
                              output=logs / "client0.out", pipe_stdout=piped)
    procs.append(first)
    first.start()
    if first.spawned_at is None:
        raise HostError(f"internal: {first.name} started without a spawn time")
    if not piped:
        return first.spawned_at
    try:
        second = BackgroundProcess(argvs[1], name=f"propagation client {argvs[1][0]}",
                                   cwd=cwd, output=logs / "client1.out", stdin=first.stdout)
        procs.append(second)
        second.start()
    finally:
        # Only the two children keep the pipe open: curl sees EPIPE if zstd dies.
        if first.stdout is not None:
            first.stdout.close()
    return first.spawned_at


# -- arrival poll ----------------------------------------------------------------------
def directory_bytes(directory: Path) -> int:
    """Total size of the regular files directly in ``directory`` (0 if it is gone)."""
    total = 0
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                if entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
    return total


class ArrivalWatch(StartStop):
    """Samples :func:`directory_bytes` of ``directory`` every ``interval`` seconds in a
    thread until the first byte is there, then every :data:`SERIES_S`, keeping (time,
    bytes) whenever the byte count changed (and the first sample). A context manager;
    :meth:`stop` takes a last sample and is safe twice."""

    def __init__(self, directory: Path, interval: float = POLL_S) -> None:
        self.directory = directory
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self.polls = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        size = directory_bytes(self.directory)
        # The clock after the scan: the bytes it counted were there by then, while a
        # clock read before it could predate a file the scan still saw.
        now = time.monotonic()
        self.polls += 1
        if not self.samples or self.samples[-1][1] != size:
            self.samples.append((now, size))

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            # The fast poll only times the first byte; after it, the progress series
            # keeps a point per SERIES_S, so polling faster would only cost syscalls.
            arrived = bool(self.samples) and self.samples[-1][1] > 0
            self._stop.wait(max(self.interval, SERIES_S) if arrived else self.interval)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="hvbench-arrival",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        thread.join(_JOIN_S)
        self._sample()

    @property
    def first_byte(self) -> float | None:
        return first_arrival(self.samples)


# -- link counters ---------------------------------------------------------------------
def link_bytes(veth: str) -> tuple[int, int]:
    """(rx_bytes, tx_bytes) of root-namespace interface ``veth``: on a lab host's root
    veth end, rx is what the host sent, tx what it received. Raises :class:`HostError`."""
    base = SYS_NET / veth / "statistics"
    try:
        return int((base / "rx_bytes").read_text()), int((base / "tx_bytes").read_text())
    except (OSError, ValueError) as exc:
        raise HostError(f"reading the byte counters of {veth}: {exc}") from exc


# -- one propagation -------------------------------------------------------------------


@dataclass
class _Fetch:
    """What the fetch step produced."""

    marks: dict[str, float]
    client: ClientRun | None
    samples: list[tuple[float, int]]
    polls: int
    rx_bytes: int
    tx_bytes: int
    path: Path | None          # the fetched file (None on a cache hit)
    cache_hit: bool | None     # None unless overlay
    curl: dict[str, Any] | None = None


def client_commands(method: str, repo: ImageRepository, image: RepoImage,
                    dest: Path, timeout_s: float) -> list[list[str]]:
    """The client argv (or two, a pipeline) fetching ``image`` into ``dest``."""
    server = repo.server(method)
    if method == "scp" and isinstance(server, SshServer):
        return [scp_argv(address=server.address, port=server.port,
                         key=str(server.client_key), known_hosts=str(server.known_hosts),
                         remote_path=str(image.path), dest=str(dest))]
    if method == "rsync" and isinstance(server, RsyncServer):
        return [rsync_argv(address=server.address, port=server.port, module=server.module,
                           name=image.name, dest=str(dest), timeout_s=int(timeout_s))]
    if method == "gridftp" and isinstance(server, GridftpServer):
        return [gridftp_argv(server.url(image.path), str(dest))]
    if isinstance(server, HttpServer):
        if method == "http-zstd":
            packed = repo.ensure_compressed(image)
            return [curl_argv(server.url(packed.name), None), zstd_argv(str(dest))]
        return [curl_argv(server.url(image.name), str(dest))]
    raise HostError(f"propagation method {method!r} has no client for {server.kind}")


def _curl_json(output: str) -> dict[str, Any] | None:
    """curl's ``--write-out %{json}`` object: the last line of its output that parses."""
    for line in reversed(output.splitlines()):
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                data = json.loads(line)
                return data if isinstance(data, dict) else None
    return None


class _Propagation:
    """One call of :func:`run_propagation`: its inputs and private directory ``tmp``."""

    def __init__(self, spec: PropagationWorkloadSpec, vm: VmSpec, *, repo: ImageRepository,
                 tmp: Path, name: str, image: GuestImage,
                 window: contextlib.AbstractContextManager[Any] | None,
                 accel: AccelChoice | None = None) -> None:
        self.spec, self.vm, self.repo, self.tmp = spec, vm, repo, tmp
        self.accel = accel
        self.name, self.image, self.window = name, image, window
        self.times = timeline.Timeline(spec.timeout_s, "propagation")
        self.incoming = tmp / "incoming"
        self.logs = tmp / "logs"
        self.incoming.mkdir()
        self.logs.mkdir()

    def _window(self) -> contextlib.AbstractContextManager[Any]:
        return self.window if self.window is not None else contextlib.nullcontext()

    def fetch(self, source: RepoImage) -> _Fetch:
        """Fetch ``source`` into ``incoming`` (or find it in the node cache), with the
        window and the link counters around it. Raises :class:`CommandError` (the
        client failed, timed out, or left a file of the wrong size)."""
        veth = self.repo.host.veth
        if self.spec.method == "overlay":
            request = time.monotonic()
            cached = self.repo.node_cache.lookup(source)
            looked = time.monotonic()
            if cached is not None:
                # Nothing moves: the window and the counters cover the empty transfer.
                with self._window():
                    rx0, tx0 = link_bytes(veth)
                    rx1, tx1 = link_bytes(veth)
                marks = {"request": request, "first_byte": looked, "last_byte": looked}
                return _Fetch(marks, None, [], 0, rx1 - rx0, tx1 - tx0, None, True)
        check_free_disk(self.tmp, source.size, "the fetched image")
        dest = self.incoming / source.name
        argvs = client_commands(self.spec.method, self.repo, source, dest,
                                self.times.remaining("the transfer"))
        with self._window():
            rx0, tx0 = link_bytes(veth)
            with ArrivalWatch(self.incoming) as watch:
                client = run_client(argvs, cwd=self.tmp, logs=self.logs,
                                    timeout=self.times.remaining("the transfer"))
            rx1, tx1 = link_bytes(veth)
        if not client.ok:
            failed = next(rc for rc in client.returncodes if rc != 0)
            raise CommandError(client.argv, failed, client.output(),
                               f"fetching {source.name} from {self.repo.host.name}")
        self._check_size(client, dest, source.size)
        first = watch.first_byte
        # A transfer shorter than one poll interval shows its bytes only after the exit.
        first = client.ended if first is None or first > client.ended else first
        marks = {"request": client.started, "first_byte": first, "last_byte": client.ended}
        curl = _curl_json(client.outputs[0]) if argvs[0][0] == "curl" else None
        hit = False if self.spec.method == "overlay" else None
        return _Fetch(marks, client, watch.samples, watch.polls, rx1 - rx0, tx1 - tx0,
                      dest, hit, curl)

    def _check_size(self, client: ClientRun, dest: Path, size: int) -> None:
        got = dest.stat().st_size if dest.is_file() else None
        if got != size:
            raise CommandError(client.argv, 0, client.output(),
                               f"the client exited 0 but left {got} bytes in {dest}, "
                               f"expected {size}")

    def terminal(self, source: RepoImage, fetch: _Fetch
                 ) -> tuple[QemuPlatform, dict[str, Any]]:
        """Verify, set up and boot the image: the guest is returned running (stopped
        on failure). Raises :class:`ImageError` (checksum mismatch), what
        :meth:`QemuPlatform.launch` raises (:class:`GuestBootError`)."""
        info: dict[str, Any] = {"verified": False, "sha256": None, "verify_s": 0.0,
                                "setup_s": 0.0}
        start = time.monotonic()
        disk, fmt = fetch.path, "raw"
        if fetch.path is not None and (self.spec.verify or self.spec.method == "overlay"):
            info["sha256"] = sha256_file(fetch.path)
            info["verified"] = True
            if info["sha256"] != source.sha256:
                raise ImageError(f"{fetch.path.name} fetched by {self.spec.method}: SHA-256 "
                                 f"{info['sha256']}, the repository's is {source.sha256}")
        verified = time.monotonic()
        info["verify_s"] = verified - start
        if self.spec.method == "overlay":
            base = (self.repo.node_cache.lookup(source) if fetch.path is None
                    else self.repo.node_cache.admit(source, fetch.path))
            if base is None:
                raise HostError(f"the node cache lost its base image of {source.name}")
            disk, fmt = self.tmp / "overlay.qcow2", "qcow2"
            make_overlay(base, "raw", disk)
            info["base"] = str(base)
        info["setup_s"] = time.monotonic() - verified
        if disk is None:
            raise HostError("internal: no image to boot")
        guest = QemuPlatform(self.vm, name=self.name, image=self.image, base_dir=self.tmp,
                             boot_timeout=self.times.remaining("the guest's boot"),
                             root_disk=disk, root_format=fmt, accel_choice=self.accel)
        boot_start = time.monotonic()
        guest.launch()  # stops itself if it raises
        info["agent_ready"] = time.monotonic()
        info["boot_s"] = info["agent_ready"] - boot_start
        return guest, info


@dataclass
class PropagationRecord:
    """Everything measured about one propagation."""

    source: RepoImage
    fetch: _Fetch
    marks: dict[str, float]
    terminal: dict[str, Any]
    guest: dict[str, Any]


def _raw_document(run: _Propagation, record: PropagationRecord) -> str:
    source, fetch, marks = record.source, record.fetch, record.marks
    t0 = marks["request"]
    repo = run.repo
    document = {
        "workload": run.spec.model_dump(mode="json"), "vm": run.vm.model_dump(mode="json"),
        "method": run.spec.method,
        "clock": "seconds since request (time.monotonic)",
        "marks": {m: marks[m] - t0 for m in MARKS},
        "phases": split_phases(marks),
        "first_byte": f"first bytes in the node's incoming directory (polled every "
                      f"{POLL_S * 1000:g} ms)",
        "image": source.describe(),
        "compressed": (repo.compressed[source.size].describe()
                       if run.spec.method == "http-zstd" else None),
        "cache": ({"hit": fetch.cache_hit, **repo.node_cache.describe()}
                  if fetch.cache_hit is not None else None),
        "client": fetch.client.describe() if fetch.client else None,
        "curl": fetch.curl,
        "wire": {"veth": repo.host.veth, "rx_bytes": fetch.rx_bytes,
                 "tx_bytes": fetch.tx_bytes, "link_rate": repo.host.spec.rate},
        "arrival": {"polls": fetch.polls,
                    "samples": [[t - t0, n] for t, n in fetch.samples]},
        "terminal": record.terminal,
        "repository": repo.describe(),
        "guest": record.guest,
    }
    return json.dumps(document, indent=1, sort_keys=True)


def propagation_outcomes(record: PropagationRecord, rate_bits: int | None,
                         raw: str) -> list[PhaseOutcome]:
    """One outcome per phase (:data:`PHASE_BOUNDS`), each with ``raw``."""
    marks, fetch, terminal = record.marks, record.fetch, record.terminal
    durations = split_phases(marks)
    moved = 0 if fetch.cache_hit else record.source.size
    extra: dict[str, dict[str, tuple[float, str]]] = {
        "transfer": transfer_metrics(size=moved, seconds=durations["transfer"],
                                     rx_bytes=fetch.rx_bytes, tx_bytes=fetch.tx_bytes,
                                     rate_bits=rate_bits, cache_hit=fetch.cache_hit),
        "terminal": {k: (float(terminal.get(k, 0.0)), "s")
                     for k in ("verify_s", "setup_s", "boot_s")},
    }
    series = progress_series(fetch.samples, marks["first_byte"])
    return [PhaseOutcome(phase=p, metrics={"duration_s": (d, "s")} | extra.get(p, {}),
                            raw=raw, raw_kind=RAW_KIND,
                            series=series if p == "transfer" else [])
            for p, d in durations.items()]


def run_propagation(spec: PropagationWorkloadSpec, vm: VmSpec, *, repo: ImageRepository,
                    node_dir: Path, image: GuestImage | None = None,
                    window: contextlib.AbstractContextManager[Any] | None = None,
                    name: str = "hvbench-propagation",
                    accel: AccelChoice | None = None) -> list[PhaseOutcome]:
    """Propagate one image of ``spec.image_size`` from ``repo`` to the node (this host),
    boot it as ``vm`` and shut it down; one outcome per phase of ``spec.phase_list()``
    (see the module docstring). ``accel``: the guest's accelerator (required when
    ``vm`` says ``auto``: :func:`hvbench.platforms.accel.choose_accel`).

    ``repo`` must be started with ``spec.method``; its image of that size is written on
    first use. ``node_dir`` gets a private directory for the fetched image, the overlay,
    the client's output and the guest's run files, removed before returning or raising.
    ``window`` (e.g. host monitors) is entered around the transfer. ``spec.timeout_s``
    bounds the whole run: each step gets what is left of it.

    Raises :class:`ImageError` (no guest image; a checksum mismatch),
    :class:`HostError` (no room on a disk; the repository lacks the method's server),
    :class:`CommandError` (the client failed or timed out: argv, exit status, output
    tail; qemu-img), :class:`GuestBootError` (the image did not boot),
    :class:`GuestError` (shutdown failed), :class:`GuestTimeoutError` (``timeout_s``
    ran out between steps).
    """
    guest_image = image or find_image()
    if guest_image is None:
        raise ImageError("no guest image is built yet: run `hvbench image build`")
    source = repo.ensure_image(spec.image_size, guest_image)
    node_dir.mkdir(parents=True, exist_ok=True)
    tmp = make_owned_dir(node_dir, "propagation-")
    guest: QemuPlatform | None = None
    try:
        run = _Propagation(spec, vm, repo=repo, tmp=tmp, name=name, image=guest_image,
                           window=window, accel=accel)
        fetch = run.fetch(source)
        guest, terminal = run.terminal(source, fetch)
        times = run.times
        times.update(fetch.marks)
        times.mark("agent_ready", terminal.pop("agent_ready"))
        requested = times.mark("shutdown_requested")
        times.mark("guest_exited",
                   requested + guest.shutdown(times.remaining("the guest's shutdown")))
        marks = dict(times.marks)
        described = guest.describe()
    finally:
        if guest is not None:
            guest.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    try:
        check_order(marks)
    except ValueError as exc:
        raise HostError(f"propagation of {source.name}: marks out of order: {exc}") from exc
    record = PropagationRecord(source, fetch, marks, terminal, described)
    return propagation_outcomes(record, repo.host.spec.rate_bits, _raw_document(run, record))
