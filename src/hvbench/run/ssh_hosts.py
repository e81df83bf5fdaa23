"""``hvbench run --hosts h1,h2,...``: one hvbench fleet worker per host, started over SSH
by Dask distributed (docs/fleet.md, "Fleet runs over SSH").

The workers are the pieces Dask's ``SSHCluster`` is made of: a ``SpecCluster`` whose
workers are ``distributed.deploy.ssh.Worker`` (asyncssh; on each host it runs
``REMOTE_PYTHON -m distributed.cli.dask_spec`` with :class:`~hvbench.run.fleet.HostWorker`
as the worker class, so each is what ``hvbench worker`` serves: one thread, the
``host`` resource). Unlike ``SSHCluster``, whose scheduler is itself started over SSH
on the first host, the scheduler runs in this process: the coordinator, which holds the
database, needs no sshd and no second hop, and the scheduler ends with it.

Where the remote Python is: ``remote_python`` (``--remote-python``), by default the
path of this process's interpreter, i.e. hvbench installed at the same path on every
host (a venv rsynced to the same place, or the same distribution package). SSH settings
(user, port, keys, known hosts) come from OpenSSH client configuration, as ``ssh``
reads it: ``~/.ssh/config`` or the file given as ``ssh_config`` (``--ssh-config``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import shlex
import shutil
import socket
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from distributed import Client, Scheduler, SpecCluster
from distributed.deploy.ssh import Worker as SshWorker

from hvbench.host.paths import make_owned_dir, work_dir
from hvbench.run import fleet_tls
from hvbench.run.fleet import WORKER_CLASS, FleetError, hvbench_workers

#: How long one SSH connection may take to be set up, seconds.
CONNECT_TIMEOUT_S = 30.0
#: How long the checks of every host (in parallel) may take, seconds.
CHECK_TIMEOUT_S = 60.0
#: How long every worker may take to start and register with the scheduler, seconds.
START_TIMEOUT_S = 120.0
#: How long closing the cluster (workers retired, then their SSH processes killed) may
#: take before it is abandoned, seconds.
STOP_TIMEOUT_S = 60.0
#: What a host's Python must import: hvbench's fleet worker and Dask's spec launcher.
REMOTE_IMPORTS = "import hvbench.run.fleet, distributed.cli.dask_spec"


def _one_line(text: str) -> str:
    return " ".join(text.split())


#: What ``--host-workdir`` replaces with each host's name.
HOST_PLACEHOLDER = "{host}"


def host_workdir(template: str, host: str) -> str:
    """``--host-workdir`` for one host: ``{host}`` replaced by its name, so two names of
    one machine (or two accounts of one server) get a work directory and run lock each
    (pure)."""
    return template.replace(HOST_PLACEHOLDER, host)


def listen_address(host: str) -> str:
    """The local address the scheduler listens on for workers on ``host``: the one the
    kernel routes to it (127.0.0.1 for a loopback host); all interfaces (``""``) when
    the name does not resolve here (an alias of the SSH configuration)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            # a UDP connect sends nothing; it only picks the route
            probe.connect((host, 9))
            return str(probe.getsockname()[0])
    except OSError:
        return ""


async def _check_host(host: str, options: dict[str, Any], remote_python: str) -> str | None:
    """None if ``host`` answers over SSH and its Python imports hvbench; else one line
    naming the host with asyncssh's or the remote shell's own words."""
    import asyncssh  # noqa: PLC0415 - only fleet runs over SSH need it

    argv = [remote_python, "-c", REMOTE_IMPORTS]
    try:
        async with asyncssh.connect(host, **options) as conn:
            result = await conn.run(shlex.join(argv), check=False)
    except (OSError, asyncssh.Error, TimeoutError) as exc:
        words = _one_line(str(exc)) or type(exc).__name__
        return f"host {host}: ssh: {words}"
    if result.exit_status != 0:
        stderr = str(result.stderr or "").strip().splitlines()
        return (f"host {host}: `{shlex.join(argv)}` exited with {result.exit_status}: "
                f"{_one_line(stderr[-1]) if stderr else 'no output'} (is hvbench installed "
                f"at that path there? see --remote-python)")
    return None


def check_hosts(hosts: Sequence[str], options: dict[str, Any], remote_python: str) -> None:
    """Connect to every host in parallel and run ``REMOTE_PYTHON -c 'import hvbench...'``.

    Waits up to :data:`CHECK_TIMEOUT_S`.

    Raises:
        FleetError: one line per failed host (refused, unknown host key, authentication,
            the remote Python missing or without hvbench), with asyncssh's or the
            remote shell's own words.
    """

    async def check_all() -> list[str | None]:
        return list(await asyncio.wait_for(
            asyncio.gather(*(_check_host(h, options, remote_python) for h in hosts)),
            CHECK_TIMEOUT_S))

    try:
        problems = [p for p in asyncio.run(check_all()) if p]
    except TimeoutError as exc:
        raise FleetError(f"hosts {', '.join(hosts)}: the SSH checks took longer than "
                         f"{CHECK_TIMEOUT_S:g} s") from exc
    if problems:
        raise FleetError("\n".join(problems))


async def _install_bundle(host: str, options: dict[str, Any], remote_python: str,
                          parent: str | None, bundle: fleet_tls.Bundle) -> str:
    """Install ``host``'s TLS bundle there through the authenticated SSH channel (the
    bundle on the remote command's stdin, not in its argv): the directory it went to.

    Raises:
        FleetError: the connection or the remote command failed, with its own words.
    """
    import asyncssh  # noqa: PLC0415 - only fleet runs over SSH need it

    argv = [remote_python, "-m", "hvbench.cli.main", "fleet", "install-bundle",
            *([parent] if parent else [])]
    try:
        async with asyncssh.connect(host, **options) as conn:
            result = await conn.run(shlex.join(argv), input=fleet_tls.bundle_json(bundle),
                                    check=False)
    except (OSError, asyncssh.Error, TimeoutError) as exc:
        raise FleetError(f"host {host}: ssh: {_one_line(str(exc)) or type(exc).__name__}"
                         ) from exc
    lines = str(result.stdout or "").strip().splitlines()
    if result.exit_status != 0 or not lines:
        stderr = str(result.stderr or "").strip().splitlines()
        raise FleetError(f"host {host}: installing its TLS certificate: `{shlex.join(argv)}` "
                         f"exited with {result.exit_status}: "
                         f"{_one_line(stderr[-1]) if stderr else 'no output'}")
    return lines[-1].strip()


def install_bundles(bundles: Mapping[str, fleet_tls.Bundle], options: dict[str, Any],
                    remote_python: str, parents: Mapping[str, str | None]) -> dict[str, str]:
    """Install each host's bundle on it, in parallel: host -> the directory there.

    Waits up to :data:`CHECK_TIMEOUT_S`.

    Raises:
        FleetError: a host's install failed (the first such host's line).
    """

    async def install_all() -> list[str | BaseException]:
        return list(await asyncio.wait_for(asyncio.gather(*(
            _install_bundle(h, options, remote_python, parents.get(h), b)
            for h, b in bundles.items()), return_exceptions=True), CHECK_TIMEOUT_S))

    try:
        results = dict(zip(bundles, asyncio.run(install_all()), strict=True))
    except TimeoutError as exc:
        raise FleetError(f"hosts {', '.join(bundles)}: installing their TLS certificates "
                         f"took longer than {CHECK_TIMEOUT_S:g} s") from exc
    installed = {h: r for h, r in results.items() if isinstance(r, str)}
    failed = [r for r in results.values() if not isinstance(r, str)]
    if failed:
        # the hosts where it worked get no worker: their bundles go now
        remove_bundles(installed, options, remote_python)
        raise failed[0]
    return installed


async def _remove_bundle(host: str, options: dict[str, Any], remote_python: str,
                         directory: str) -> str | None:
    """Remove ``host``'s installed bundle ``directory`` there: None if done (or already
    gone), else one line naming the host in the SSH or remote command's words."""
    import asyncssh  # noqa: PLC0415 - only fleet runs over SSH need it

    argv = [remote_python, "-m", "hvbench.cli.main", "fleet", "remove-bundle", directory]
    try:
        async with asyncssh.connect(host, **options) as conn:
            result = await conn.run(shlex.join(argv), check=False)
    except (OSError, asyncssh.Error, TimeoutError) as exc:
        return f"host {host}: ssh: {_one_line(str(exc)) or type(exc).__name__}"
    if result.exit_status != 0:
        stderr = str(result.stderr or "").strip().splitlines()
        return (f"host {host}: `{shlex.join(argv)}` exited with {result.exit_status}: "
                f"{_one_line(stderr[-1]) if stderr else 'no output'}")
    return None


def remove_bundles(directories: Mapping[str, str], options: dict[str, Any],
                   remote_python: str) -> list[str]:
    """Remove each host's installed bundle (host -> its directory there) over SSH, in
    parallel, for workers that did not start (a worker that did removes its own when it
    closes; removing one already gone is no error). Waits up to
    :data:`CHECK_TIMEOUT_S`; returns one line per host where it failed (``hvbench
    cleanup`` there removes it later)."""
    if not directories:
        return []

    async def remove_all() -> list[str | None]:
        return list(await asyncio.wait_for(asyncio.gather(*(
            _remove_bundle(h, options, remote_python, d)
            for h, d in directories.items())), CHECK_TIMEOUT_S))

    try:
        return [p for p in asyncio.run(remove_all()) if p]
    except TimeoutError:
        return [f"hosts {', '.join(directories)}: removing their TLS certificates took "
                f"longer than {CHECK_TIMEOUT_S:g} s"]


class _RemoteLines(logging.Handler):
    """The last lines Dask's SSH workers read from the hosts' stderr (Dask logs each at
    INFO): what a host said when its worker did not start."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: collections.deque[str] = collections.deque(maxlen=20)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(_one_line(record.getMessage()))


#: Dask's logger of what the SSH workers read from the hosts.
SSH_LOGGER = "distributed.deploy.ssh"
#: The loggers a cluster's teardown reports its background tasks' errors on (tornado
#: logs the exception of a callback's task, e.g. the cluster's worker bookkeeping
#: timing out while the workers are retired).
TEARDOWN_LOGGERS = ("tornado.application", "asyncio", "distributed")


class _TeardownLines(logging.Handler):
    """What the libraries logged at WARNING or above while the workers were stopped,
    one line each (message and, when there is one, the exception's type and words)
    instead of tracebacks over the run's last table."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        line = _one_line(record.getMessage())[:300]
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            line += f" ({type(exc).__name__}: {_one_line(str(exc))})"
        self.lines.append(f"{record.name}: {line}")


@contextlib.contextmanager
def _teardown_logs(into: _TeardownLines) -> Iterator[None]:
    """Route :data:`TEARDOWN_LOGGERS` into ``into`` alone while the block runs."""
    saved = []
    for name in TEARDOWN_LOGGERS:
        log = logging.getLogger(name)
        saved.append((log, log.handlers[:], log.propagate))
        log.handlers[:] = [into]
        log.propagate = False
    try:
        yield
    finally:
        for log, handlers, propagate in saved:
            log.handlers[:] = handlers
            log.propagate = propagate


class HostSshWorker(SshWorker):
    """Dask's SSH worker (``distributed.deploy.ssh.Worker``) whose failure to start
    names its host (Dask's own raises a bare ``Exception("Worker failed to start")``)."""

    async def start(self) -> None:
        """Start the worker over SSH (Dask's code).

        Raises:
            FleetError: it did not start, naming the host, with Dask's words.
        """
        try:
            # Dask's SSH module is not annotated
            await super().start()  # type: ignore[no-untyped-call]
        except Exception as exc:
            raise FleetError(f"host {self.address}: its Dask worker did not start: "
                             f"{_one_line(str(exc))}") from exc


class SshWorkers:
    """A Dask scheduler in this process and one hvbench worker per host over SSH.

    ``start()`` checks every host (:func:`check_hosts`), makes a CA for this run and
    installs each host's TLS bundle over SSH (:func:`install_bundles`), then starts the
    scheduler (``tls://``, encryption and a certificate of the run's CA required) and
    the workers and waits until each registered; ``stop()`` closes the client, retires
    the workers (each closes its Dask worker: a host task still running gets its child
    stopped by ``PR_SET_PDEATHSIG``), kills what is left of their SSH processes, and
    stops the scheduler. ``stop()`` is safe twice and after a failed ``start()``.
    Used as a context manager: ``with SshWorkers(hosts) as workers: workers.client``.
    """

    def __init__(self, hosts: Sequence[str], *, remote_python: str,
                 ssh_config: Path | None = None, host_workdir: str | None = None,
                 listen: str | None = None, classes: Mapping[str, str] | None = None
                 ) -> None:
        if not hosts:
            raise FleetError("--hosts: no host given")
        self.hosts = list(hosts)
        self.remote_python = remote_python
        self.options: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_S}
        if ssh_config is not None:
            self.options["config"] = [str(ssh_config)]
        self.host_workdir = host_workdir
        self.classes = dict(classes or {})
        self.listen = listen_address(self.hosts[0]) if listen is None else listen
        self.cluster: SpecCluster | None = None
        self._client: Client | None = None
        self._log_level: int | None = None
        self._scratch: Path | None = None
        self._remote = _RemoteLines()
        #: What Dask, tornado or asyncio logged while the workers were stopped (one
        #: line each): teardown only, after every result was taken.
        self.teardown: list[str] = []

    @property
    def client(self) -> Client:
        """The client of the running scheduler.

        Raises:
            FleetError: not started.
        """
        if self._client is None:
            raise FleetError("the SSH workers are not started")
        return self._client

    def _workdir(self, host: str) -> str | None:
        return None if self.host_workdir is None else host_workdir(self.host_workdir, host)

    def _worker_spec(self, host: str, certs: str) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"name": host, "host_class": self.classes.get(host, ""),
                                  "certs": certs, "remove_certs": True}
        if self.host_workdir is not None:
            kwargs["work"] = self._workdir(host)
        return {"cls": HostSshWorker, "options": {
            "address": host, "connect_options": self.options, "kwargs": kwargs,
            "worker_class": WORKER_CLASS, "remote_python": self.remote_python}}

    def start(self) -> Client:
        """Check the hosts, start the scheduler and the workers.

        Waits up to :data:`CHECK_TIMEOUT_S`, then :data:`START_TIMEOUT_S`.

        Raises:
            FleetError: a host failed its check, or a worker did not start (with Dask's
                words), or not every worker registered in time.
        """
        check_hosts(self.hosts, self.options, self.remote_python)
        # Dask logs every worker's start and stop at INFO on stderr, over the progress
        # bars; its warnings and errors still show
        dask_log = logging.getLogger("distributed")
        self._log_level = dask_log.level
        dask_log.setLevel(max(logging.WARNING, dask_log.getEffectiveLevel()))
        # ... but the hosts' own words are kept (not shown) for the error of a worker
        # that did not start
        ssh_log = logging.getLogger(SSH_LOGGER)
        ssh_log.setLevel(logging.INFO)
        ssh_log.propagate = False
        ssh_log.addHandler(self._remote)
        # the scheduler's scratch space: owned by this process, not TMPDIR's
        # dask-scratch-space, which would outlive it
        self._scratch = make_owned_dir(work_dir(), "hvbench-dask-")
        # TLS with a CA of this run only: the coordinator's bundle in its scratch space,
        # each host's installed over SSH (removed by its worker when it closes)
        ca_cert, ca_key = fleet_tls.new_ca("hvbench fleet CA (one --hosts run)")
        fleet_tls.write_bundle(self._scratch / "tls",
                               fleet_tls.issue(ca_cert, ca_key, fleet_tls.COORDINATOR))
        security = fleet_tls.security(self._scratch / "tls")
        # no dashboard; the HTTP server Dask starts anyway on a free loopback port, not
        # on 8787, which another scheduler may have
        scheduler = {"cls": Scheduler, "options": {
            "host": self.listen, "port": 0, "protocol": fleet_tls.TLS_SCHEME,
            "security": security, "dashboard": False,
            "dashboard_address": "127.0.0.1:0", "local_directory": str(self._scratch)}}
        certs: dict[str, str] = {}
        try:
            certs = install_bundles(
                {h: fleet_tls.issue(ca_cert, ca_key, h) for h in self.hosts}, self.options,
                self.remote_python, {h: self._workdir(h) for h in self.hosts})
            self.cluster = SpecCluster({h: self._worker_spec(h, certs[h]) for h in self.hosts},
                                       scheduler, security=security, name="hvbench-ssh")
            self._client = Client(self.cluster, timeout=CONNECT_TIMEOUT_S)
            self._client.wait_for_workers(len(self.hosts), timeout=START_TIMEOUT_S)
        # a HostSshWorker's FleetError, or whatever Dask raised (it wraps some in
        # RuntimeError, raises others bare)
        except Exception as exc:
            what = _one_line(str(exc)) if isinstance(exc, FleetError) else \
                f"hosts {', '.join(self.hosts)}: the Dask workers did not start: " \
                f"{_one_line(str(exc))}"
            said = f"; the last line from the hosts: {self._remote.lines[-1]}" \
                if self._remote.lines else ""
            self.stop()
            raise FleetError(what + said + self._remove_unused(certs)) from exc
        missing = [h for h in self.hosts if h not in hvbench_workers(self._client)]
        if missing:
            self.stop()
            raise FleetError(f"host(s) {', '.join(missing)}: no hvbench worker registered"
                             + self._remove_unused(certs))
        return self._client

    def _remove_unused(self, certs: Mapping[str, str]) -> str:
        """After a failed start (workers stopped): remove the hosts' installed bundles
        over SSH, those whose worker never started among them; what could not be
        removed, as text to add to the error."""
        problems = remove_bundles(certs, self.options, self.remote_python)
        return "".join(f"; its TLS certificate stays: {p} (`hvbench cleanup` there "
                       "removes it)" for p in problems)

    def stop(self) -> None:
        """Close the client and the cluster (soft: retire the workers; then hard: kill
        their SSH processes), waiting up to :data:`STOP_TIMEOUT_S`. What the libraries
        log meanwhile goes to :attr:`teardown`, one line each. Safe twice."""
        client, self._client = self._client, None
        cluster, self.cluster = self.cluster, None
        lines = _TeardownLines()
        with _teardown_logs(lines):
            if client is not None:
                with contextlib.suppress(Exception):  # a lost scheduler: nothing to close
                    client.close(timeout=STOP_TIMEOUT_S)
            if cluster is not None:
                cluster.close(timeout=STOP_TIMEOUT_S)
        self.teardown += lines.lines
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
        if self._log_level is not None:
            logging.getLogger("distributed").setLevel(self._log_level)
            ssh_log = logging.getLogger(SSH_LOGGER)
            ssh_log.removeHandler(self._remote)
            ssh_log.setLevel(logging.NOTSET)
            ssh_log.propagate = True
            self._log_level = None

    def __enter__(self) -> SshWorkers:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
