"""Resolve, version and download the Debian packages the guest image is made of.

Everything goes through the ordinary apt clients (``apt-cache``, ``apt-get download``) so
the host's configured mirrors, proxies and pinning apply.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from urllib.parse import quote

from hvbench.errors import CommandError, ImageError, ToolMissingError

#: The packages whose dependency closure makes up the image. ``linux-image-amd64`` is the
#: metapackage; its closure brings the real, versioned ``linux-image-6.1.0-NN-amd64``.
ROOT_PACKAGES: tuple[str, ...] = (
    "linux-image-amd64",
    "busybox-static",
    "fio",
    "iperf3",
    "stress-ng",
    "lighttpd",
    "qemu-guest-agent",
    "e2fsprogs",
    # The NBD client of a guest-initiator disk (seed 001's network storage, attached
    # by the guest itself over its NIC).
    "nbd-client",
    # aoe-discover, the ATA over Ethernet initiator's discovery trigger (seed 001's
    # storage protocol; the aoe module is the kernel's, see kmod.WANTED_MODULES).
    "aoetools",
)

_DEPENDS_FLAGS = (
    "--recurse",
    "--no-recommends",
    "--no-suggests",
    "--no-conflicts",
    "--no-breaks",
    "--no-replaces",
    "--no-enhances",
)
#: apt-cache answers from its local cache in about a second; a minute means apt is stuck
#: on a lock or a broken configuration.
APT_CACHE_TIMEOUT_S = 60.0
#: Downloading the ~160 MB closure takes seconds on a mirror, minutes on a slow link.
DOWNLOAD_TIMEOUT_S = 1800.0


def run_tool(
    argv: list[str], *, what: str, timeout: float, cwd: Path | None = None, package: str = ""
) -> str:
    """Run ``argv`` and return its stdout (stderr merged).

    Raises:
        ToolMissingError: the program is not installed.
        ImageError: it failed or outlived ``timeout`` seconds (chained to CommandError).
    """
    if shutil.which(argv[0]) is None:
        raise ToolMissingError(argv[0], package or None)
    try:
        proc = subprocess.run(
            argv,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.output if isinstance(exc.output, str) else ""
        err = CommandError(argv, None, out, what)
        raise ImageError(str(err)) from err
    if proc.returncode != 0:
        err = CommandError(argv, proc.returncode, proc.stdout, what)
        raise ImageError(str(err)) from err
    return proc.stdout


def parse_depends_closure(output: str) -> list[str]:
    """Return the real package names of ``apt-cache depends --recurse`` output.

    Each package of the closure appears once as an unindented line; virtual packages
    appear as ``<name>`` and are skipped, because apt also recursed into their providers
    (which then appear as unindented lines of their own).
    """
    names: list[str] = []
    for line in output.splitlines():
        if not line or line[0].isspace() or line.startswith("<"):
            continue
        name = line.strip()
        # "perl:any"-style architecture qualifiers name virtual packages as well.
        if ":" in name or name in names:
            continue
        names.append(name)
    return names


def parse_policy_candidates(output: str) -> dict[str, str]:
    """Map package names to their candidate version from ``apt-cache policy`` output.

    Raises:
        ImageError: a package has no installable candidate.
    """
    versions: dict[str, str] = {}
    current: str | None = None
    for line in output.splitlines():
        if line and not line[0].isspace() and line.rstrip().endswith(":"):
            current = line.rstrip()[:-1]
        elif current is not None and line.strip().startswith("Candidate:"):
            version = line.split(":", 1)[1].strip()
            if version == "(none)":
                raise ImageError(f"package {current} has no installable candidate version")
            versions[current] = version
            current = None
    return versions


def resolve_packages(roots: Iterable[str] = ROOT_PACKAGES) -> dict[str, str]:
    """Return ``{package: candidate version}`` for the dependency closure of ``roots``.

    Two apt-cache calls, about 2 s in all; each is limited to APT_CACHE_TIMEOUT_S.

    Raises:
        ToolMissingError: apt-cache is not installed (not a Debian-like host).
        ImageError: apt-cache failed, or a package cannot be installed.
    """
    roots = list(roots)
    out = run_tool(
        ["apt-cache", "depends", *_DEPENDS_FLAGS, *roots],
        what="resolving the guest package closure",
        timeout=APT_CACHE_TIMEOUT_S,
        package="apt",
    )
    names = parse_depends_closure(out)
    if not names:
        raise ImageError("apt-cache depends returned no packages; run apt-get update")
    policy = run_tool(
        ["apt-cache", "policy", *names],
        what="reading candidate package versions",
        timeout=APT_CACHE_TIMEOUT_S,
        package="apt",
    )
    versions = parse_policy_candidates(policy)
    missing = sorted(set(names) - set(versions))
    if missing:
        raise ImageError(f"apt-cache policy did not report: {', '.join(missing)}")
    return dict(sorted(versions.items()))


def deb_glob(name: str, version: str) -> str:
    """Return the glob matching the file ``apt-get download`` writes for name=version.

    apt escapes the epoch colon (and other reserved characters) as ``%3a``.
    """
    return f"{name}_{quote(version, safe='+~.-').replace('%3A', '%3a')}_*.deb"


def find_deb(directory: Path, name: str, version: str) -> Path | None:
    """Return the already-downloaded .deb for name=version in ``directory``, or None."""
    return next(iter(sorted(directory.glob(deb_glob(name, version)))), None)


def download_debs(
    packages: Mapping[str, str], directory: Path, log: Callable[[str], None]
) -> dict[str, Path]:
    """Download the missing ``.deb`` files into ``directory``; return name -> file.

    Files already there are reused. Downloads land in a temporary subdirectory and are
    renamed into place only once apt-get finished, so an interrupted download never
    leaves a truncated .deb behind. Limited to DOWNLOAD_TIMEOUT_S.

    Raises:
        ImageError: apt-get failed or did not produce an expected file.
    """
    directory.mkdir(parents=True, exist_ok=True)
    missing = {n: v for n, v in packages.items() if find_deb(directory, n, v) is None}
    if missing:
        log(f"downloading {len(missing)} of {len(packages)} packages")
        _download_into(missing, directory)
    result: dict[str, Path] = {}
    for name, version in packages.items():
        deb = find_deb(directory, name, version)
        if deb is None:
            raise ImageError(f"apt-get download did not produce {name} {version}")
        result[name] = deb
    return result


def _download_into(packages: Mapping[str, str], directory: Path) -> None:
    with tempfile.TemporaryDirectory(prefix=".partial-", dir=directory) as tmp:
        # apt drops to the _apt user for downloads, which cannot write into root's
        # private cache; running the download as root avoids a warning per package.
        argv = ["apt-get", "download", "-q"]
        if os.geteuid() == 0:
            argv += ["-o", "APT::Sandbox::User=root"]
        argv += [f"{n}={v}" for n, v in packages.items()]
        run_tool(
            argv,
            what="downloading guest packages",
            timeout=DOWNLOAD_TIMEOUT_S,
            cwd=Path(tmp),
            package="apt",
        )
        for deb in Path(tmp).glob("*.deb"):
            deb.replace(directory / deb.name)
