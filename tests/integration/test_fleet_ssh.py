"""``hvbench run --hosts`` for real: a throwaway sshd on a loopback port (its own host
key and client key), one host, a reduced study (native dd and one TCG guest) run by an
hvbench worker Dask started over SSH; then what a refused connection, a rejected key, a
missing remote Python and a worker that cannot start say, and that the TLS bundle
installed for a worker that never started is removed over SSH."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hvbench.image.builder import GuestImage
from hvbench.run import fleet_tls
from hvbench.store.database import Store
from tests.integration.sshd import SshServer
from tests.integration.test_fleet import REPETITIONS as FLEET_REPETITIONS
from tests.integration.test_fleet import STUDY as FLEET_STUDY
from tests.integration.test_fleet import _env, _processes_under

pytestmark = pytest.mark.integration

HOST = "127.0.0.1"
REPETITIONS = 1
# test_fleet's reduced study (native dd and one TCG guest), one repetition: the point is
# the worker started over SSH, not the repetitions
STUDY = FLEET_STUDY.replace(f"repetitions = {FLEET_REPETITIONS}",
                            f"repetitions = {REPETITIONS}")


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[SshServer]:
    root = tmp_path / "ssh"
    root.mkdir()
    with SshServer(root, HOST) as server:
        yield server


def _hvbench_run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hvbench.cli.main", "run", *args],
                          capture_output=True, text=True, env=_env(COLUMNS="400"),
                          timeout=timeout,
                          check=False)


def _hvbench_runs(*runs: list[str], timeout: float = 600
                  ) -> list[subprocess.CompletedProcess[str]]:
    """``hvbench run`` with each of ``runs`` (argument lists), all at once: runs that
    share nothing need not wait for each other's start-up and SSH handshakes."""
    started = [(args, subprocess.Popen(
        [sys.executable, "-m", "hvbench.cli.main", "run", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_env(COLUMNS="400"))) for args in runs]
    done = []
    for args, process in started:
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for _, each in started:
                each.kill()
                each.wait()
            raise
        done.append(subprocess.CompletedProcess(args, process.returncode, out, err))
    return done


def _gone(path: Path, seconds: float = 30.0) -> list[int]:
    """The processes still naming something under ``path`` after up to ``seconds``."""
    deadline = time.monotonic() + seconds
    while (left := _processes_under(path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def test_a_study_on_one_host_over_ssh(image: GuestImage, sshd: SshServer,
                                      tmp_path: Path) -> None:
    study = tmp_path / "fleet-ssh.toml"
    study.write_text(STUDY)
    host_work = tmp_path / f"host-work-{HOST}"  # from --host-workdir's {host}
    db = tmp_path / "fleet.db"
    started = time.monotonic()
    done = _hvbench_run(str(study), "--hosts", HOST, "--ssh-config",
                        str(sshd.client_config), "--host-workdir",
                        str(tmp_path / "host-work-{host}"),
                        "--db", str(db))
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    # no Dask log lines or tracebacks (the coordinator never waits in a queue get); what
    # Dask's teardown may log (a background task timing out while the workers are
    # retired, seen once in CI) is one warning line, never a traceback
    assert "Traceback" not in done.stderr
    assert all(line.startswith("warning: stopping the SSH workers")
               for line in done.stderr.splitlines() if "TimeoutError" in line), done.stderr
    with Store(db) as store:
        (run_id,) = store.run_ids()
    [row] = [line for line in done.stdout.splitlines() if line.startswith(f"│ {HOST}")]
    assert run_id in row and "complete" in row and "finished what it was given" in row
    with Store(db) as store:
        run = store.get_run(run_id)
        assert (run.host, run.status) == (HOST, "complete")
        assert run.fleet_id is not None and run.fleet_id.startswith("fleet-")
        assert run.env["hostname"] and run.env.get("accelerator") in ("tcg", "kvm")
        assert run.env.get("qemu_version") and run.env.get("hvbench_version")
        assert len(store.done(run_id)) == 2 * REPETITIONS and store.failures(run_id) == []
        assert {m.platform for m in store.measurements(run_id)} == {"native", "vm"}
    # the worker (its command line names the host work dir), its hvbench child and the
    # guest (their files are in it) are gone; the worker's scratch dirs with them
    assert _gone(host_work) == []
    assert [p.name for p in host_work.glob("hvbench-*")] == []
    sshd.stop()
    assert _gone(sshd.root, 5) == []
    print(f"--hosts study: {took:.1f} s")


def test_ssh_errors_name_the_host_in_ssh_words(sshd: SshServer, tmp_path: Path) -> None:
    study = tmp_path / "fleet-ssh.toml"
    study.write_text(STUDY)  # nothing of it runs: the host is refused first
    base = ["--ssh-config", str(sshd.client_config), "--db", str(tmp_path / "x.db")]

    refused_config = tmp_path / "refused_config"
    refused_config.write_text(sshd.client_config.read_text().replace(
        f"Port {sshd.port}", "Port 1"))
    # Three refusals that share nothing run at once; the rejected key comes after them
    # (it takes the key away from the first and third).
    missing, refused, no_workdir = _hvbench_runs(
        [str(study), "--hosts", HOST, "--remote-python", "/nonexistent/py", *base],
        [str(study), "--hosts", HOST, "--ssh-config", str(refused_config),
         "--db", str(tmp_path / "x.db")],
        # the host answers, but its work dir cannot be made (its TLS certificate goes
        # there first): the host's words
        [str(study), "--hosts", HOST, "--host-workdir", "/proc/none", *base])
    (sshd.root / "authorized_keys").write_text("")  # the client key no longer gets in
    denied = _hvbench_run(str(study), "--hosts", HOST, *base)

    for result, words in ((missing, "/nonexistent/py: No such file or directory"),
                          (refused, "Connect call failed"),
                          (no_workdir, f"installing its TLS certificate: `{sys.executable} "
                                       "-m hvbench.cli.main fleet install-bundle /proc/none` "
                                       "exited with 1: FileNotFoundError: [Errno 2] No such "
                                       "file or directory: '/proc/none'"),
                          (denied, "Permission denied")):
        assert result.returncode == 1, result.stderr
        # one line: after the line saying what starts, the error
        *_, line = result.stderr.strip().splitlines()
        assert result.stderr.count("hvbench: error:") == 1, result.stderr
        assert line.startswith(f"hvbench: error: host {HOST}: ") and words in line, line
    # nothing was created before the hosts answered
    assert not (tmp_path / "x.db").exists()


def test_a_worker_that_never_starts_leaves_no_certificate(sshd: SshServer,
                                                          tmp_path: Path) -> None:
    study = tmp_path / "fleet-ssh.toml"
    study.write_text(STUDY)  # nothing of it runs: the worker does not start
    host_work = tmp_path / "host-work"
    # the host's Python passes the checks and installs the bundle, but Dask's worker
    # launcher exits at once
    python = tmp_path / "python-without-worker"
    python.write_text(f'#!/bin/sh\nif [ "$2" = distributed.cli.dask_spec ]; then\n'
                      f'  echo "no worker on this host" >&2; exit 1\nfi\n'
                      f'exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    done = _hvbench_run(str(study), "--hosts", HOST, "--remote-python", str(python),
                        "--ssh-config", str(sshd.client_config), "--host-workdir",
                        str(host_work), "--db", str(tmp_path / "x.db"), timeout=300)
    assert done.returncode == 1, done.stderr
    *_, line = done.stderr.strip().splitlines()
    assert line.startswith(f"hvbench: error: host {HOST}: its Dask worker did not start"), \
        line
    assert "stays" not in line, line  # its certificate was removed over SSH
    assert host_work.is_dir()  # the bundle was installed there ...
    assert list(host_work.glob(f"{fleet_tls.INSTALLED_PREFIX}*")) == []  # ... and removed
