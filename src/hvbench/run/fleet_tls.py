"""Authenticated, encrypted fleets: Dask comms over TLS with mutual certificates
(docs/fleet.md, "Security").

A fleet's certificate directory (``hvbench fleet init DIR --hosts h1,h2``) holds the
fleet's certificate authority (``ca.pem``, ``ca-key.pem``) and one bundle per member,
``DIR/NAME/{ca.pem,cert.pem,key.pem}``: one per host, ``scheduler`` and
``coordinator``. A member is admitted by the scheduler (and admits the scheduler)
when its certificate is signed by the fleet's CA: Dask's TLS contexts require a peer
certificate both ways (``ssl.CERT_REQUIRED``) and skip the host name check (the fleet's
own CA, addresses rather than names), and ``require_encryption`` refuses any plaintext
comm. Keys are written 0600 in 0700 directories.

``--hosts`` needs no directory: :class:`~hvbench.run.ssh_hosts.SshWorkers` makes a CA
for the run in memory and installs each host's bundle over SSH (:func:`install`, run
on the host by ``REMOTE_PYTHON -m hvbench.cli.main fleet install-bundle PARENT``, the
bundle on stdin, never in argv).

A plaintext scheduler address (``tcp://``) is refused unless it is on loopback or the
user said ``--insecure`` (:func:`plaintext_refusal`).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hvbench.errors import SpecError
from hvbench.host.paths import is_claimed

# cryptography and Dask (~0.4 s) are imported by the functions that make certificates or
# Dask's security: every `hvbench run` imports this module to clean up unclaimed bundles.
if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec
    from distributed.security import Security

#: The files of a member's bundle and of the fleet's CA.
CA_FILE, CERT_FILE, KEY_FILE, CA_KEY_FILE = "ca.pem", "cert.pem", "key.pem", "ca-key.pem"
#: The members every fleet directory has besides its hosts.
SCHEDULER, COORDINATOR = "scheduler", "coordinator"
#: How long certificates are valid, days.
VALID_DAYS = 825
#: The URL scheme of an encrypted Dask comm.
TLS_SCHEME = "tls"
#: The name prefix of a bundle directory ``fleet install-bundle`` makes on a host.
INSTALLED_PREFIX = "hvbench-tls-"
#: The file in it that says hvbench installed it, and when (``cleanup`` and ``fleet
#: remove-bundle`` remove no directory without it).
INSTALLED_MARKER = "hvbench-installed.json"
#: How long an installed bundle may wait for its worker to claim it before ``cleanup``
#: takes it for the leftover of a worker that never started, seconds: well past the
#: time ``--hosts`` gives its workers to start.
CLAIM_S = 900.0


@dataclass(frozen=True)
class Bundle:
    """One member's credentials as PEM text: the fleet CA's certificate, its own
    certificate and its private key."""

    ca: str
    cert: str
    key: str


def _pem_key(key: ec.EllipticCurvePrivateKey) -> str:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 - deferred

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _pem_cert(cert: x509.Certificate) -> str:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 - deferred

    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _name(common_name: str) -> x509.Name:
    from cryptography import x509  # noqa: PLC0415 - deferred
    from cryptography.x509.oid import NameOID  # noqa: PLC0415 - deferred

    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "hvbench fleet"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(subject: x509.Name, issuer: x509.Name, public: ec.EllipticCurvePublicKey
             ) -> x509.CertificateBuilder:
    from cryptography import x509  # noqa: PLC0415 - deferred

    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(public).serial_number(x509.random_serial_number())
            # an hour back: a member whose clock is a little behind still accepts it
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS)))


def new_ca(common_name: str = "hvbench fleet CA") -> tuple[str, str]:
    """A new certificate authority: (certificate PEM, private key PEM)."""
    from cryptography import x509  # noqa: PLC0415 - deferred
    from cryptography.hazmat.primitives import hashes  # noqa: PLC0415 - deferred
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415 - deferred

    key = ec.generate_private_key(ec.SECP256R1())
    cert = (_builder(_name(common_name), _name(common_name), key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=False, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return _pem_cert(cert), _pem_key(key)


def issue(ca_cert: str, ca_key: str, member: str) -> Bundle:
    """A certificate for ``member`` (its name as common name and DNS name), signed by
    the CA, usable as TLS server and client (a worker is both).

    Raises:
        SpecError: the CA's certificate or key is not PEM of an EC key.
    """
    from cryptography import x509  # noqa: PLC0415 - deferred
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415 - deferred
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415 - deferred
    from cryptography.x509.oid import ExtendedKeyUsageOID  # noqa: PLC0415 - deferred

    try:
        authority = x509.load_pem_x509_certificate(ca_cert.encode())
        signer = serialization.load_pem_private_key(ca_key.encode(), password=None)
    except ValueError as exc:
        raise SpecError(f"the fleet CA cannot be read: {exc}") from exc
    if not isinstance(signer, ec.EllipticCurvePrivateKey):
        raise SpecError("the fleet CA's key is not an EC key (not made by hvbench fleet init)")
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (_builder(_name(member), authority.subject, key.public_key())
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(member)]),
                           critical=False)
            .sign(signer, hashes.SHA256()))
    return Bundle(ca_cert, _pem_cert(cert), _pem_key(key))


def _write_private(path: Path, text: str) -> None:
    """``text`` into a new file readable by its owner only (created 0600, not chmod-ed
    after: no moment where another user can open it)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def write_bundle(directory: Path, bundle: Bundle) -> None:
    """The bundle as ``directory/{ca.pem,cert.pem,key.pem}``; ``directory`` is created
    0700 and must not exist (credentials are never overwritten)."""
    directory.mkdir(mode=0o700)
    _write_files(directory, bundle)


def _write_files(directory: Path, bundle: Bundle) -> None:
    for name, text in ((CA_FILE, bundle.ca), (CERT_FILE, bundle.cert),
                       (KEY_FILE, bundle.key)):
        _write_private(directory / name, text)


def bundle_files(directory: Path) -> tuple[Path, Path, Path]:
    """The CA, certificate and key files of the bundle in ``directory``.

    Raises:
        SpecError: one of them is missing, naming it.
    """
    files = tuple(directory / name for name in (CA_FILE, CERT_FILE, KEY_FILE))
    for path in files:
        if not path.is_file():
            raise SpecError(f"--certs {directory}: no {path.name} in it; expected a member's "
                            "bundle of `hvbench fleet init` (DIR/NAME with ca.pem, cert.pem, "
                            "key.pem)")
    ca, cert, key = files
    return ca, cert, key


def security(directory: Path) -> Security:
    """Dask security of the bundle in ``directory`` for every role (client, worker,
    scheduler), encryption required.

    Raises:
        SpecError: a file of the bundle is missing.
    """
    from distributed.security import Security  # noqa: PLC0415 - deferred

    ca, cert, key = (str(p) for p in bundle_files(directory))
    return Security(require_encryption=True, tls_ca_file=ca,
                    tls_client_cert=cert, tls_client_key=key,
                    tls_worker_cert=cert, tls_worker_key=key,
                    tls_scheduler_cert=cert, tls_scheduler_key=key)


def init_fleet(directory: Path, members: Sequence[str]) -> list[str]:
    """``hvbench fleet init``: the fleet's CA in ``directory`` (made once, then reused)
    and a bundle for each of ``members``, ``scheduler`` and ``coordinator`` that has
    none yet. Returns the members whose bundle was made now (in order).

    Raises:
        SpecError: a member name that is not a plain file name, or a CA file missing
            its key (or the other way round).
    """
    for member in members:
        if not member or member in (".", "..") or "/" in member or member == CA_FILE:
            raise SpecError(f"fleet init: {member!r} is not a host name usable as a "
                            "directory name")
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca_path, key_path = directory / CA_FILE, directory / CA_KEY_FILE
    if ca_path.exists() != key_path.exists():
        raise SpecError(f"fleet init {directory}: {ca_path.name} and {key_path.name} go "
                        "together; one of them is missing")
    if not ca_path.exists():
        ca_cert, ca_key = new_ca()
        _write_private(key_path, ca_key)
        _write_private(ca_path, ca_cert)
    ca_cert, ca_key = ca_path.read_text(), key_path.read_text()
    made = []
    for member in dict.fromkeys([SCHEDULER, COORDINATOR, *members]):
        if not (directory / member).exists():
            write_bundle(directory / member, issue(ca_cert, ca_key, member))
            made.append(member)
    return made


# -- which scheduler addresses are allowed (pure) -----------------------------------------


def _split_address(address: str) -> tuple[str, str]:
    """(scheme, host) of a Dask address; a bare ``host:port`` is Dask's default tcp."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if rest.startswith("["):  # [IPv6]:port
        return scheme, rest[1:].partition("]")[0]
    return scheme, rest.rpartition(":")[0] if ":" in rest else rest


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IP address (a name is not resolved: it may say
    loopback here and mean another machine elsewhere)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def plaintext_refusal(address: str, *, certs: bool, insecure: bool) -> str | None:
    """Why the scheduler ``address`` may not be used (None: it may): a ``tls://``
    address needs a bundle (``certs``); a bundle is for a ``tls://`` address only; any
    other scheme is plaintext, allowed on loopback, elsewhere only with ``insecure``."""
    scheme, host = _split_address(address)
    if scheme == TLS_SCHEME:
        if not certs:
            return (f"the scheduler {address} is TLS: give --certs DIR/NAME, a bundle made "
                    "by `hvbench fleet init DIR`")
        return None
    if certs:
        return f"--certs is for a tls:// scheduler; {address} is {scheme}://"
    if insecure or is_loopback(host):
        return None
    return (f"refusing the plaintext scheduler {address}: anyone who reaches it runs code "
            "as root on every worker; use a tls:// scheduler with --certs (`hvbench fleet "
            "init`), or --insecure on a network only the fleet reaches")


# -- --hosts: a host's bundle installed over SSH --------------------------------------------


def bundle_json(bundle: Bundle) -> str:
    """The bundle as the installer reads it on its stdin."""
    return json.dumps({"ca": bundle.ca, "cert": bundle.cert, "key": bundle.key})


def install(text: str, parent: Path) -> Path:
    """Write a bundle received as :func:`bundle_json` into a new private directory under
    ``parent``; the worker that uses it removes it when it closes.

    Raises:
        SpecError: ``text`` is not such a bundle.
    """
    try:
        fields = json.loads(text)
        bundle = Bundle(str(fields["ca"]), str(fields["cert"]), str(fields["key"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise SpecError(f"fleet TLS install: the bundle on stdin is not hvbench's: {exc}"
                        ) from exc
    parent.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix=INSTALLED_PREFIX, dir=parent))  # made 0700
    # first: a directory of this name without the marker is never hvbench's to remove
    (directory / INSTALLED_MARKER).write_text(json.dumps({"installed_at": time.time()}))
    _write_files(directory, bundle)
    return directory


def _installed_at(directory: Path) -> float | None:
    """When hvbench installed the bundle in ``directory`` (None: not a bundle it
    installed: no readable marker, or a symbolic link)."""
    if directory.is_symlink() or not directory.is_dir():
        return None
    try:
        return float(json.loads((directory / INSTALLED_MARKER).read_text())["installed_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remove_installed(directory: Path) -> bool:
    """Remove a bundle directory :func:`install` made (``--hosts`` does it over SSH for a
    worker that did not start): True if removed, False if there is none.

    Raises:
        SpecError: ``directory`` exists but is not a bundle hvbench installed (no
            marker); it is left alone.
    """
    if not directory.exists() and not directory.is_symlink():
        return False
    if _installed_at(directory) is None:
        raise SpecError(f"fleet remove-bundle {directory}: not a bundle hvbench installed "
                        f"(no {INSTALLED_MARKER} in it); left alone")
    shutil.rmtree(directory)
    return True


def unclaimed_bundles(parent: Path, now: float | None = None) -> list[Path]:
    """The bundles installed under ``parent`` that no worker claimed within
    :data:`CLAIM_S` of their install (its worker never started). A claimed one records
    its worker's pid (:func:`hvbench.host.paths.claim_dir`) and is a leftover when that
    process is gone, like any owned directory; a directory without the marker is never
    listed."""
    now = time.time() if now is None else now
    found = []
    for directory in sorted(parent.glob(f"{INSTALLED_PREFIX}*")) if parent.is_dir() else []:
        installed = _installed_at(directory)
        if installed is not None and not is_claimed(directory) and \
                now - installed > CLAIM_S:
            found.append(directory)
    return found


def remove_unclaimed_bundles(parent: Path, *, dry_run: bool = False) -> list[Path]:
    """Remove what :func:`unclaimed_bundles` lists (``dry_run``: only list it)."""
    found = unclaimed_bundles(parent)
    if not dry_run:
        for directory in found:
            shutil.rmtree(directory, ignore_errors=True)
    return found

