"""A fleet over TLS for real: `hvbench fleet init`, Dask's own `dask scheduler` with the
scheduler's bundle on 127.0.0.1, an `hvbench worker` with its host's bundle. The normal
path runs a one-repetition native study; a worker with a certificate of another CA
cannot join, and a client without a valid certificate cannot submit."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hvbench.run.fleet import hvbench_workers
from hvbench.run.fleet_tls import init_fleet, security
from hvbench.store.database import Store
from tests.integration.test_fleet import _env, _stop, native_only

pytestmark = pytest.mark.integration


class TlsFleet:
    """A TLS scheduler and worker h1, certificates of ``root/certs``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.certs = root / "certs"
        self.processes: list[subprocess.Popen[bytes]] = []
        self.address = ""

    def start(self) -> None:
        init_fleet(self.certs, ["h1"])
        info, tmp = self.root / "scheduler.json", self.root / "scheduler-tmp"
        tmp.mkdir()
        bundle = self.certs / "scheduler"
        self.processes.append(subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler",
             "--host", "tls://127.0.0.1", "--port", "0", "--no-dashboard",
             "--tls-ca-file", str(bundle / "ca.pem"), "--tls-cert", str(bundle / "cert.pem"),
             "--tls-key", str(bundle / "key.pem"), "--scheduler-file", str(info)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=_env(TMPDIR=str(tmp))))
        deadline = time.monotonic() + 30
        while not info.exists():
            assert time.monotonic() < deadline, "the TLS scheduler never wrote its file"
            time.sleep(0.1)
        self.address = json.loads(info.read_text())["address"]
        assert self.address.startswith("tls://127.0.0.1:")
        self.processes.append(subprocess.Popen(
            [sys.executable, "-m", "hvbench.cli.main", "worker", "--scheduler", self.address,
             "--name", "h1", "--workdir", str(self.root / "work-h1"),
             "--certs", str(self.certs / "h1")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env()))
        self._wait_for("h1")

    def workers(self) -> dict[str, str]:
        from distributed import Client

        with Client(self.address, timeout=30,
                    security=security(self.certs / "coordinator")) as client:
            return hvbench_workers(client)

    def _wait_for(self, host: str) -> None:
        deadline = time.monotonic() + 60
        while host not in self.workers():
            assert time.monotonic() < deadline, f"worker {host} never registered"
            time.sleep(0.2)

    def stop(self) -> None:
        for process in reversed(self.processes):
            _stop(process)


@pytest.fixture(scope="module")
def tls_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsFleet]:
    running = TlsFleet(tmp_path_factory.mktemp("tls-fleet"))
    try:
        running.start()
        yield running
    finally:
        running.stop()


def test_a_study_runs_over_tls(tls_fleet: TlsFleet, tmp_path: Path) -> None:
    study = tmp_path / "tls.toml"
    study.write_text(native_only(1))
    db = str(tmp_path / "tls.db")
    done = subprocess.run(
        [sys.executable, "-m", "hvbench.cli.main", "run", str(study), "--scheduler",
         tls_fleet.address, "--certs", str(tls_fleet.certs / "coordinator"), "--db", db],
        capture_output=True, text=True, env=_env(COLUMNS="400"), timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    with Store(db) as store:
        [run_id] = store.run_ids()
        run = store.get_run(run_id)
        assert (run.host, run.status) == ("h1", "complete")
        assert len(store.done(run_id)) == 1


def test_a_worker_of_another_ca_cannot_join(tls_fleet: TlsFleet, tmp_path: Path) -> None:
    init_fleet(tmp_path / "other", ["h2"])
    joined = subprocess.run(
        [sys.executable, "-m", "hvbench.cli.main", "worker", "--scheduler",
         tls_fleet.address, "--name", "h2", "--workdir", str(tmp_path / "work-h2"),
         "--certs", str(tmp_path / "other" / "h2"), "--connect-timeout", "3"],
        capture_output=True, text=True, env=_env(), timeout=120, check=False)
    assert joined.returncode == 1, joined.stderr
    [line] = joined.stderr.splitlines()[1:]
    assert line.startswith(f"hvbench: error: the TLS handshake with the Dask scheduler at "
                           f"{tls_fleet.address} failed: [SSL: CERTIFICATE_VERIFY_FAILED]"
                           ), joined.stderr
    assert "h2" not in tls_fleet.workers()
    assert list((tmp_path / "work-h2").iterdir()) == []


#: Connect a Dask client in a fresh interpreter (a refused client's event-loop thread
#: must not share a process with the rest of the suite) and print how it failed.
_CLIENT = """
import json, sys
from pathlib import Path
from distributed import Client
from hvbench.run.fleet_tls import security
address, certs = sys.argv[1], sys.argv[2]
try:
    Client(address, timeout=3, security=security(Path(certs)) if certs else None).close()
    print(json.dumps({"connected": True}))
except Exception as exc:
    print(json.dumps({"connected": False, "type": type(exc).__name__,
                      "oserror": isinstance(exc, OSError), "text": str(exc)}))
"""


def _client(address: str, certs: Path | None) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", _CLIENT, address, str(certs or "")],
                          capture_output=True, text=True, timeout=120, env=_env(),
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_client_without_a_valid_certificate_cannot_submit(tls_fleet: TlsFleet,
                                                            tmp_path: Path) -> None:
    init_fleet(tmp_path / "other", [])
    other = _client(tls_fleet.address, tmp_path / "other" / "coordinator")
    assert other["oserror"] and "TLS certificate does not match" in str(other["text"]), other
    # no certificate at all: Dask will not even try a tls:// address in the clear
    bare = _client(tls_fleet.address, None)
    assert bare["connected"] is False and bare["type"] in (
        "OSError", "TypeError", "ValueError", "TimeoutError"), bare
    # plaintext to the TLS port: no scheduler answers
    plain = _client(tls_fleet.address.replace("tls://", "tcp://"), None)
    assert plain["connected"] is False and plain["oserror"], plain
    # the fleet's own coordinator bundle does connect (the refusals are the certificate's)
    assert _client(tls_fleet.address, tls_fleet.certs / "coordinator") == {"connected": True}
