"""Guest-side evidence: the guest's own view of its benchmark disk, CPU and NICs.

While a measured window runs, a small busybox ``sh`` loop inside the guest (started and
stopped through the guest agent, one ``guest-exec`` each) appends timestamped raw lines
to a file on the guest's tmpfs; at the end of the window the file comes back in the
stop command's output and is removed. Per sample the loop writes::

    T <guest /proc/uptime seconds>
    D <the benchmark disk's /sys/block/<dev>/stat line>     (disk cells)
    C <a cpu line of /proc/stat: the aggregate, then one per CPU>
    N <a /proc/net/dev line>                                 (network cells; not lo)

and ``E`` once it has stopped. No process is forked per sample: the shell loop only
ticks (builtins), sleeping in ``read -t`` on
a FIFO, which is also how it is told to stop; one busybox ``awk`` reads the files with
one buffered read each. Polling through the agent instead costs
several agent round trips per sample (open, read and close of each file, each a
virtio-serial exchange the guest's qemu-ga and vCPU must serve), see
``bench/guest_sampling_cost.py``.

The lines are parsed with the host monitors' parsers (:mod:`~hvbench.monitors.diskstats`,
:mod:`~hvbench.monitors.cpu`, :mod:`~hvbench.monitors.netdev`), into monitors named
``guest.disk.<dev>``, ``guest.cpu`` and ``guest.net`` with the host monitors' metric
names, plus ``await_ms`` (all requests' time / requests, iostat's classic ``await``) and
``guest.cpu``'s ``max_busy_pct``: the busiest CPU's share (its stolen time excluded),
which the aggregate halves
when one of two vCPUs does all the work (samplers of earlier versions wrote the
aggregate line only; their samples have no per-CPU figure).
Guest times are mapped onto the host's monotonic clock with the offset measured when
the sampler started (the guest's uptime echoed back by the start command); the
summaries cover the host window they are merged into (the guest samples nearest to
its start and end).
"""

from __future__ import annotations

import contextlib
import secrets
import time
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from hvbench.errors import HvbenchError
from hvbench.host import interrupt
from hvbench.monitors.base import MonitorReport, SeriesRow
from hvbench.monitors.cpu import cpu_time_metrics, parse_proc_stat
from hvbench.monitors.diskstats import DiskCounters, iostat_metrics, parse_diskstats_line
from hvbench.monitors.netdev import NetDevCounters, parse_net_dev, window_metrics
from hvbench.platforms.base import BenchDisk, Platform
from hvbench.platforms.registry import REGISTRY

#: Samples per second inside the guest. Lower than the host monitors' 10 Hz: under TCG
#: one sample costs the guest 4-5 ms of vCPU (bench/guest_sampling_cost.py
#: --micro-seconds), so 10 Hz would take ~4-5 % of a vCPU-bound guest's throughput and
#: 2 Hz about 1 %; the window summaries need only the first and last sample.
DEFAULT_GUEST_HZ = 2.0
#: The sampler ends by itself after this long even if nobody stops it (a host that
#: died without stopping a libvirt guest's sampler); a sample is about 250 bytes.
MAX_LIFETIME_S = 3600
#: Timeouts of the start and stop commands (agent round trips under TCG take ~0.5 s).
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
#: The raw-output kind the sampler's lines are stored under.
RAW_KIND = "guest-sampler"
#: The sampler's ``$0``, so it can be found in the guest's process list.
PROCESS_NAME = "hvb-sampler"

# $1 output file, $2 period (s), $3 most ticks, $4 disk ("" none), $5 "net" or "".
# The shell only ticks (its read -t on the FIFO is the sleep, and the stop signal);
# awk reads the files, each with one buffered read (busybox's own read builtin reads a
# byte per system call, which costs several ms per sample under TCG).
_SAMPLER = r"""
out=$1 period=$2 n=$3 disk=$4 net=$5
echo $$ >"$out.pid"
fifo=$out.stop
mkfifo "$fifo" || exit 1
exec 3<>"$fifo"
while [ "$n" -gt 0 ]; do
  echo
  if read -t "$period" -u 3 x; then break; fi
  n=$((n - 1))
done | awk -v out="$out" -v disk="$disk" -v net="$net" '
function line(path,   l) { l = ""; getline l < path; close(path); return l }
function sample(   up, l) {
  split(line("/proc/uptime"), up, " ")
  printf "T %s\n", up[1] > out
  if (disk != "") printf "D %s\n", line("/sys/block/" disk "/stat") > out
  while ((getline l < "/proc/stat") > 0 && l ~ /^cpu/) printf "C %s\n", l > out
  close("/proc/stat")
  if (net != "") {
    while ((getline l < "/proc/net/dev") > 0) {
      sub(/^ +/, "", l)
      if (l ~ /:/ && l !~ /^lo:/) printf "N %s\n", l > out
    }
    close("/proc/net/dev")
  }
  fflush(out)
}
{ sample() }
END { sample(); print "E" > out; close(out) }'
exec 3<&-
rm -f "$fifo"
"""

# Starts the sampler detached and waits (bounded, without forking) until its first
# sample is written; prints "PID UPTIME" so the host can map the guest's clock.
_START = r"""
script=$1; shift
setsid sh -c "$script" hvb-sampler "$@" </dev/null >/dev/null 2>&1 &
pid=$!
i=0
while [ ! -s "$1" ] && [ $i -lt 200000 ]; do i=$((i + 1)); done
read up _ </proc/uptime
echo "$pid $up"
"""

# Soft stop (a byte in the FIFO: one last sample, then exit), a bounded wait, a hard
# stop (SIGKILL to its process group: setsid made the sampler a group leader) if it
# is still there; then the lines, and nothing left behind. The sampler wrote its own
# pid, so this also finds one whose start command failed after launching it.
_STOP = r"""
out=$1 pid=
[ -f "$out.pid" ] && read -r pid <"$out.pid"
if [ -n "$pid" ]; then
  if kill -0 "$pid" 2>/dev/null && [ -p "$out.stop" ]; then echo q >"$out.stop"; fi
  i=0
  while kill -0 -"$pid" 2>/dev/null && [ $i -lt 200000 ]; do i=$((i + 1)); done
  kill -9 -"$pid" 2>/dev/null
fi
cat "$out" 2>/dev/null
rm -f "$out" "$out.stop" "$out.pid"
"""


@dataclass(frozen=True)
class GuestSample:
    """One pass of the guest sampler: guest uptime and the raw counters it read."""

    t: float
    disk: DiskCounters | None = None
    cpu: tuple[int, ...] | None = None
    net: dict[str, NetDevCounters] = field(default_factory=dict)
    #: Each CPU's line (``cpu0``, ``cpu1``...; empty from an earlier sampler).
    cpus: dict[str, tuple[int, ...]] = field(default_factory=dict)


def parse_sampler_output(text: str, disk: str | None) -> list[GuestSample]:
    """The samples in the sampler's output (pure). A sample cut short (the sampler was
    killed mid-write) is dropped. Raises ValueError on a line that is not the
    sampler's."""
    samples: list[GuestSample] = []
    current: dict[str, object] | None = None
    for line in text.splitlines():
        tag, _, rest = line.partition(" ")
        if tag == "T":
            _close(samples, current, disk)
            current = {"t": float(rest), "net": {}, "cpus": {}}
        elif tag == "E":
            break
        elif current is None:
            raise ValueError(f"guest sampler line before a timestamp: {line[:80]!r}")
        elif tag == "D":
            if disk is None:
                continue  # a disk line where none was asked for: not evidence
            parsed = parse_diskstats_line(f"0 0 {disk} {rest}")
            if parsed is None:
                raise ValueError(f"not a block stat line: {rest[:80]!r}")
            current["disk"] = parsed[1]
        elif tag == "C":
            _cpu_line(current, rest)
        elif tag == "N":
            net = current["net"]
            if isinstance(net, dict):
                net.update(parse_net_dev(rest))
        else:
            raise ValueError(f"not a guest sampler line: {line[:80]!r}")
    _close(samples, current, disk)
    return samples


def _cpu_line(current: dict[str, object], text: str) -> None:
    """Store one ``C`` line: the aggregate as ``cpu``, a CPU's under ``cpus``. Raises
    ValueError when it is not a cpu line of /proc/stat."""
    name = text.split(" ", 1)[0]
    if name == "cpu":
        current["cpu"] = parse_proc_stat(text)["cpu"]
        return
    if not name.startswith("cpu") or not name[3:].isdigit():
        raise ValueError(f"not a cpu line of /proc/stat: {text[:80]!r}")
    cpus = current["cpus"]
    if isinstance(cpus, dict):
        # parse_proc_stat wants the aggregate line: read this one's fields as its.
        cpus[name] = parse_proc_stat("cpu" + text[len(name):])["cpu"]


def _close(samples: list[GuestSample], current: dict[str, object] | None,
           disk: str | None) -> None:
    """Append ``current`` if it is complete (its disk and CPU lines were written)."""
    if current is None or "cpu" not in current or (disk is not None and "disk" not in current):
        return
    t, cpu, net, cpus = current["t"], current["cpu"], current["net"], current.get("cpus")
    dc = current.get("disk")
    if isinstance(t, float) and isinstance(cpu, tuple) and isinstance(net, dict):
        samples.append(GuestSample(t, dc if isinstance(dc, DiskCounters) else None,
                                   cpu, dict(net),
                                   dict(cpus) if isinstance(cpus, dict) else {}))


def disk_metrics(a: DiskCounters, b: DiskCounters, seconds: float) -> dict[str, float]:
    """The host's ``iostat -x`` metrics of the interval plus ``await_ms``: the time all
    completed reads and writes spent, per request (0 without requests)."""
    out = iostat_metrics(a, b, seconds)
    ios = max(0, b.reads - a.reads) + max(0, b.writes - a.writes)
    ms = max(0, b.read_ms - a.read_ms) + max(0, b.write_ms - a.write_ms)
    out["await_ms"] = ms / ios if ios > 0 else 0.0
    return out


def _pair_metrics(a: GuestSample, b: GuestSample, disk: str | None,
                  interfaces: dict[str, str]) -> dict[str, dict[str, float]]:
    """Per guest monitor, the metrics from sample ``a`` to ``b``."""
    seconds = b.t - a.t
    out: dict[str, dict[str, float]] = {}
    if disk is not None and a.disk is not None and b.disk is not None:
        out[f"guest.disk.{disk}"] = disk_metrics(a.disk, b.disk, seconds)
    if a.cpu is not None and b.cpu is not None:
        out["guest.cpu"] = cpu_time_metrics(a.cpu, b.cpu)
        # Each CPU's own work: busy but stolen time (the aggregate keeps its steal).
        per_cpu = [cpu_time_metrics(a.cpus[n], b.cpus[n])
                   for n in sorted(a.cpus.keys() & b.cpus.keys())]
        if per_cpu:
            out["guest.cpu"]["max_busy_pct"] = max(
                max(0.0, m["busy_pct"] - m["steal_pct"]) for m in per_cpu)
    if interfaces:
        out["guest.net"] = window_metrics([(a.t, a.net), (b.t, b.net)], interfaces)
    return out


def guest_reports(samples: Sequence[GuestSample], disk: str | None, *, offset: float,
                  t0: float, t1: float) -> dict[str, MonitorReport]:
    """The guest monitors' reports (pure). ``offset`` maps guest uptime to the host's
    monotonic clock (host = guest + offset); series times are relative to ``t0``; the
    summary runs from the last sample at or before ``t0`` to the first at or after
    ``t1`` (the host window), or the nearest ones the sampler has."""
    ordered = sorted(samples, key=lambda s: s.t)
    interfaces = sorted({name for s in ordered for name in s.net})
    labels = {name: name for name in interfaces}
    reports: dict[str, MonitorReport] = {}
    for a, b in pairwise(ordered):
        if b.t <= a.t:
            continue
        for name, values in _pair_metrics(a, b, disk, labels).items():
            row: SeriesRow = (b.t + offset - t0, values)
            reports.setdefault(name, MonitorReport()).series.append(row)
    times = [s.t + offset for s in ordered]
    first = max(0, bisect_right(times, t0) - 1)
    last = min(len(ordered) - 1, bisect_right(times, t1 - 1e-9))
    if last > first and ordered[last].t > ordered[first].t:
        summary = _pair_metrics(ordered[first], ordered[last], disk, labels)
        for name, values in summary.items():
            reports.setdefault(name, MonitorReport()).summary = values
    return reports


@dataclass
class GuestWindow:
    """What one run of the guest sampler returned (raw lines and how to read them)."""

    raw: str
    disk: str | None
    #: host monotonic = guest uptime + offset.
    offset: float
    #: Why sampling failed or is incomplete (None: it worked).
    error: str | None = None

    def reports(self, t0: float, t1: float) -> dict[str, MonitorReport]:
        """The guest monitors' reports over the host window ``t0..t1`` (monotonic);
        a parse failure becomes the reports' ``error`` rather than an exception."""
        try:
            samples = parse_sampler_output(self.raw, self.disk)
        except ValueError as exc:
            return {"guest": MonitorReport(error=f"guest sampler: {exc}")}
        reports = guest_reports(samples, self.disk, offset=self.offset, t0=t0, t1=t1)
        if self.error is not None:
            reports.setdefault("guest", MonitorReport()).error = self.error
        return reports


class GuestSampler:
    """The sampler loop in one guest for one window: :meth:`start`, then :meth:`stop`
    (safe twice, also after a failed start); :attr:`window` then holds the
    :class:`GuestWindow`. Registered in the process registry while it runs.

    Nothing is left in the guest after :meth:`stop`: the loop is told to stop, killed
    if it has not, and its files are removed; if the agent no longer answers (the
    guest died), it ends with the guest or after :data:`MAX_LIFETIME_S`.
    """

    def __init__(self, platform: Platform, disk: str | None, net: bool,
                 hz: float = DEFAULT_GUEST_HZ) -> None:
        """``disk``: the benchmark disk's name in the guest (``vdb``), None for none;
        ``net``: also sample /proc/net/dev. Raises :class:`HvbenchError` for ``hz``
        not positive."""
        if not hz > 0:
            raise HvbenchError(f"guest sampling rate must be > 0 Hz, got {hz!r}")
        self.platform = platform
        self.disk = disk
        self.net = net
        self.period = 1.0 / hz
        self.name = f"{PROCESS_NAME} in {platform.name}"
        self.path = f"/run/{PROCESS_NAME}-{secrets.token_hex(4)}"
        self.pid: int | None = None
        self._launched = False
        self.offset = 0.0
        #: Set by :meth:`stop`.
        self.window: GuestWindow | None = None
        self._error: str | None = None

    def start(self) -> None:
        """Start the loop and wait for its first sample. Raises :class:`HvbenchError`
        (from the agent, :data:`START_TIMEOUT_S`) when it cannot be started."""
        REGISTRY.add(self)
        argv = ["sh", "-c", _START, "hvb-sampler-start", _SAMPLER, self.path,
                f"{self.period:.3f}", str(int(MAX_LIFETIME_S / self.period)), self.disk or "",
                "net" if self.net else ""]
        self._launched = True
        result = self.platform.exec(argv, timeout=START_TIMEOUT_S)
        host_now = time.monotonic()
        fields = result.text().split()
        if not result.ok or len(fields) != 2:
            raise HvbenchError(f"guest sampler did not start in {self.platform.name}: exit "
                               f"{result.exit_code}, output {result.text()[:200]!r}, "
                               f"stderr {result.stderr[-500:]!r}")
        self.pid = int(fields[0])
        self.offset = host_now - float(fields[1])

    def stop(self) -> None:
        """Stop the loop, fetch its lines into :attr:`window` and remove its files
        (:data:`STOP_TIMEOUT_S`). Never raises for the guest's failure: the window's
        ``error`` says what went wrong. Safe twice."""
        if self.window is not None:
            return
        try:
            self.window = self._stop()
        finally:
            REGISTRY.discard(self)

    def _stop(self) -> GuestWindow:
        if not self._launched:
            return GuestWindow("", self.disk, self.offset, "guest sampler never started")
        if interrupt.received() is not None:
            # The run is going down with its guests: no agent round trip now (the
            # agent may hold an interrupted command's reply); the loop ends with
            # the guest, or after MAX_LIFETIME_S in a guest hvbench does not stop.
            return GuestWindow("", self.disk, self.offset, "interrupted")
        raw = ""
        try:
            result = self.platform.exec(["sh", "-c", _STOP, "hvb-sampler-stop", self.path],
                                        timeout=STOP_TIMEOUT_S)
            raw = result.text()
        except HvbenchError as exc:
            self._error = f"guest sampler could not be stopped: {exc}"
        return GuestWindow(raw, self.disk, self.offset, self._error)

    def fail(self, exc: BaseException) -> None:
        """Record why :meth:`start` failed (the window then carries it)."""
        self._error = f"guest sampler did not start: {exc}"


def guest_disk_name(platform: Platform) -> str | None:
    """The guest's benchmark disk as /sys/block names it (``vdb``), when the platform
    has one (:class:`~hvbench.platforms.base.BenchDisk`) and finds it; else None."""
    if not isinstance(platform, BenchDisk):
        return None
    with contextlib.suppress(HvbenchError):
        node = platform.bench_disk()
        if node is not None and node.startswith("/dev/"):
            return node.removeprefix("/dev/")
    return None
