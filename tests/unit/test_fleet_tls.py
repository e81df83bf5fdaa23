"""Fleet TLS: which scheduler addresses are refused, and the CA and bundles of
``hvbench fleet init`` (files, modes, the chain, reuse of the CA), the bundles
installed for ``--hosts`` workers and what ``cleanup`` and ``fleet remove-bundle`` remove
of them; the handshakes
themselves are tests/integration/test_fleet_tls.py."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization

from hvbench.errors import SpecError
from hvbench.host.paths import claim_dir
from hvbench.run import fleet_tls
from hvbench.run.fleet_tls import init_fleet, plaintext_refusal


@pytest.mark.parametrize(("address", "certs", "insecure", "refused"), [
    ("tcp://127.0.0.1:8786", False, False, None),
    ("tcp://127.3.4.5:8786", False, False, None),
    ("tcp://localhost:8786", False, False, None),
    ("tcp://[::1]:8786", False, False, None),
    ("127.0.0.1:8786", False, False, None),
    ("tcp://10.0.0.1:8786", False, False, "refusing the plaintext scheduler"),
    ("10.0.0.1:8786", False, False, "refusing the plaintext scheduler"),
    ("tcp://coordinator:8786", False, False, "refusing the plaintext scheduler"),
    ("tcp://[2001:db8::1]:8786", False, False, "refusing the plaintext scheduler"),
    ("ws://10.0.0.1:8786", False, False, "refusing the plaintext scheduler"),
    ("tcp://10.0.0.1:8786", False, True, None),
    ("tls://10.0.0.1:8786", True, False, None),
    ("tls://10.0.0.1:8786", False, False, "is TLS: give --certs"),
    ("tls://10.0.0.1:8786", False, True, "is TLS: give --certs"),
    ("tcp://127.0.0.1:8786", True, False, "--certs is for a tls:// scheduler"),
])
def test_plaintext_refusal(address: str, certs: bool, insecure: bool,
                           refused: str | None) -> None:
    reason = plaintext_refusal(address, certs=certs, insecure=insecure)
    if refused is None:
        assert reason is None
    else:
        assert reason is not None and refused in reason and "\n" not in reason


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_init_makes_a_ca_and_private_bundles_signed_by_it(tmp_path: Path) -> None:
    root = tmp_path / "certs"
    assert init_fleet(root, ["h1", "h2"]) == ["scheduler", "coordinator", "h1", "h2"]
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    ca = _cert(root / "ca.pem")
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for member in ("scheduler", "coordinator", "h1", "h2"):
        bundle = root / member
        assert stat.S_IMODE(bundle.stat().st_mode) == 0o700
        for name in ("ca.pem", "cert.pem", "key.pem"):
            assert stat.S_IMODE((bundle / name).stat().st_mode) == 0o600
        assert (bundle / "ca.pem").read_bytes() == (root / "ca.pem").read_bytes()
        cert = _cert(bundle / "cert.pem")
        cert.verify_directly_issued_by(ca)
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert names.get_values_for_type(x509.DNSName) == [member]
        key = serialization.load_pem_private_key((bundle / "key.pem").read_bytes(), None)
        assert key.public_key() == cert.public_key()
    assert stat.S_IMODE((root / "ca-key.pem").stat().st_mode) == 0o600


def test_init_again_keeps_the_ca_and_only_adds_new_hosts(tmp_path: Path) -> None:
    root = tmp_path / "certs"
    init_fleet(root, ["h1"])
    ca, h1 = (root / "ca.pem").read_bytes(), (root / "h1" / "cert.pem").read_bytes()
    assert init_fleet(root, ["h1", "h3"]) == ["h3"]
    assert (root / "ca.pem").read_bytes() == ca
    assert (root / "h1" / "cert.pem").read_bytes() == h1
    _cert(root / "h3" / "cert.pem").verify_directly_issued_by(_cert(root / "ca.pem"))
    assert init_fleet(root, []) == []


def test_a_certificate_of_another_ca_does_not_verify(tmp_path: Path) -> None:
    init_fleet(tmp_path / "a", ["h1"])
    init_fleet(tmp_path / "b", ["h1"])
    with pytest.raises(InvalidSignature):
        _cert(tmp_path / "b" / "h1" / "cert.pem").verify_directly_issued_by(
            _cert(tmp_path / "a" / "ca.pem"))


@pytest.mark.parametrize("member", ["", "..", "a/b", "ca.pem"])
def test_init_refuses_a_name_that_is_not_a_directory_name(tmp_path: Path,
                                                          member: str) -> None:
    with pytest.raises(SpecError, match="not a host name usable as a directory name"):
        init_fleet(tmp_path / "certs", [member])
    assert not (tmp_path / "certs").exists()


def test_init_refuses_a_ca_without_its_key(tmp_path: Path) -> None:
    root = tmp_path / "certs"
    init_fleet(root, [])
    (root / "ca-key.pem").unlink()
    with pytest.raises(SpecError, match=r"ca\.pem and ca-key\.pem go together"):
        init_fleet(root, ["h1"])


def test_security_requires_encryption_and_names_a_missing_file(tmp_path: Path) -> None:
    init_fleet(tmp_path, ["h1"])
    security = fleet_tls.security(tmp_path / "h1")
    assert security.require_encryption
    assert security.get_tls_config_for_role("worker")["cert"] == str(tmp_path / "h1" / "cert.pem")
    (tmp_path / "h1" / "key.pem").unlink()
    with pytest.raises(SpecError, match=r"no key\.pem in it"):
        fleet_tls.security(tmp_path / "h1")


def test_install_writes_a_new_private_directory(tmp_path: Path) -> None:
    ca_cert, ca_key = fleet_tls.new_ca()
    bundle = fleet_tls.issue(ca_cert, ca_key, "h1")
    first = fleet_tls.install(fleet_tls.bundle_json(bundle), tmp_path / "work")
    second = fleet_tls.install(fleet_tls.bundle_json(bundle), tmp_path / "work")
    assert first != second and first.parent == tmp_path / "work"
    assert stat.S_IMODE(first.stat().st_mode) == 0o700
    assert (first / "key.pem").read_text() == bundle.key
    assert stat.S_IMODE((first / "key.pem").stat().st_mode) == 0o600
    with pytest.raises(SpecError, match="the bundle on stdin is not hvbench's"):
        fleet_tls.install('{"ca": "x"}', tmp_path / "work")


STUDY = """
[study]
name = "refused"
repetitions = 1

[[platform]]
kind = "native"

[[workload]]
name = "dd"
kind = "disk"
profile = "dd"
file_size = "4M"
"""


@pytest.mark.parametrize("command", ["run", "worker"])
def test_the_cli_refuses_a_plaintext_scheduler_off_loopback_in_one_line(
        tmp_path: Path, command: str) -> None:
    from tests.unit.test_fixture_runs import hvbench

    (tmp_path / "s.toml").write_text(STUDY)
    args = ["run", "s.toml", "--db", "x.db"] if command == "run" else ["worker"]
    done = hvbench(tmp_path, *args, "--scheduler", "tcp://192.0.2.1:8786")
    assert done.returncode == 2
    assert done.stderr.decode().splitlines() == [
        "hvbench: error: refusing the plaintext scheduler tcp://192.0.2.1:8786: anyone who "
        "reaches it runs code as root on every worker; use a tls:// scheduler with --certs "
        "(`hvbench fleet init`), or --insecure on a network only the fleet reaches"]
    assert not (tmp_path / "x.db").exists()


def test_fleet_init_prints_what_it_made(tmp_path: Path) -> None:
    from tests.unit.test_fixture_runs import hvbench

    done = hvbench(tmp_path, "fleet", "init", "certs", "--hosts", "h1,h2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines() == [
        f"certs/{m}: made" for m in ("scheduler", "coordinator", "h1", "h2")]
    again = hvbench(tmp_path, "fleet", "init", "certs", "--hosts", "h2")
    assert again.stdout.decode().splitlines() == [
        "certs: every bundle exists already; nothing made"]


def _installed(parent: Path, age: float) -> Path:
    """A bundle installed under ``parent`` ``age`` seconds ago (its marker back-dated)."""
    ca_cert, ca_key = fleet_tls.new_ca()
    directory = fleet_tls.install(
        fleet_tls.bundle_json(fleet_tls.issue(ca_cert, ca_key, "h1")), parent)
    marker = directory / fleet_tls.INSTALLED_MARKER
    marker.write_text(json.dumps({"installed_at": time.time() - age}))
    return directory


def test_only_unclaimed_installed_bundles_past_their_wait_are_leftovers(tmp_path: Path
                                                                        ) -> None:
    work = tmp_path / "work"
    left = _installed(work, fleet_tls.CLAIM_S + 60)  # its worker never started
    fresh = _installed(work, 5)  # its worker may be starting now
    claimed = _installed(work, fleet_tls.CLAIM_S + 60)
    claim_dir(claimed)  # a live worker uses it (this process)
    # named like ours, but without the marker: never hvbench's to touch
    (work / f"{fleet_tls.INSTALLED_PREFIX}theirs").mkdir()
    (work / f"{fleet_tls.INSTALLED_PREFIX}link").symlink_to(left)
    assert fleet_tls.unclaimed_bundles(work) == [left]
    assert fleet_tls.remove_unclaimed_bundles(work, dry_run=True) == [left]
    assert left.exists()
    assert fleet_tls.remove_unclaimed_bundles(work) == [left]
    assert sorted(p.name for p in work.iterdir()) == sorted(
        [fresh.name, claimed.name, f"{fleet_tls.INSTALLED_PREFIX}theirs",
         f"{fleet_tls.INSTALLED_PREFIX}link"])


def test_cleanup_finds_a_leftover_bundle_of_a_worker_that_never_started(
        tmp_path: Path) -> None:
    from tests.unit.test_fixture_runs import hvbench

    left = _installed(tmp_path / "work", fleet_tls.CLAIM_S + 60)
    done = hvbench(tmp_path, "cleanup", "--dry-run",
                   env={"HVBENCH_WORKDIR": str(tmp_path / "work")})
    assert done.returncode == 0, done.stderr
    assert f"would remove fleet TLS bundle {left}" in done.stdout.decode().splitlines()
    assert left.exists()


def test_remove_bundle_removes_only_what_install_made(tmp_path: Path) -> None:
    from tests.unit.test_fixture_runs import hvbench

    mine = _installed(tmp_path / "work", 0)
    theirs = tmp_path / "work" / "precious"
    theirs.mkdir()
    done = hvbench(tmp_path, "fleet", "remove-bundle", str(mine))
    assert (done.returncode, done.stdout.decode()) == (0, f"{mine}: removed\n")
    assert not mine.exists()
    again = hvbench(tmp_path, "fleet", "remove-bundle", str(mine))
    assert (again.returncode, again.stdout.decode()) == (0, f"{mine}: not there\n")
    refused = hvbench(tmp_path, "fleet", "remove-bundle", str(theirs))
    assert refused.returncode == 2
    assert refused.stderr.decode().splitlines() == [
        f"hvbench: error: fleet remove-bundle {theirs}: not a bundle hvbench installed (no "
        f"{fleet_tls.INSTALLED_MARKER} in it); left alone"]
    assert theirs.is_dir()
