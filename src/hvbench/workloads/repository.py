"""An image repository on a lab host (the "headnode"), and the node's cache of base
images: the serving side of the propagation workload (seed 000 §5.1).

:class:`ImageRepository` keeps system images (:func:`write_raw_image`: the guest's root
squashfs padded with seeded random filler to the requested size) in a private directory
and serves them from the lab host's network namespace, one class per server process:

- :class:`SshServer`: dropbear, for ``scp``. Its host key and a client key pair are
  generated into the repository; the client checks the host key against a
  ``known_hosts`` written from it (no prompt, no trust-on-first-use). dropbear reads
  ``authorized_keys`` only from the user's home, so it runs in a private mount
  namespace (``unshare --mount``) where a directory of the repository is bind-mounted
  over root's home: the machine's own ``~/.ssh`` is neither read nor changed, and the
  mount vanishes with the process. The client uses ``scp -O``, the classic SCP
  protocol (the remote side runs ``scp -f``): Debian 12's scp speaks SFTP by default,
  which dropbear only serves with an external sftp-server, and the seeds measured SCP.
- :class:`RsyncServer`: ``rsync --daemon --no-detach`` with a generated config, one
  read-only module ``images``.
- :class:`HttpServer`: lighttpd serving the image directory (static files, sendfile).
  For ``http-zstd`` the repository also stores ``<image>.zst``, compressed once
  (``zstd -T0 -3``) when first needed; that one-time cost is kept in
  :attr:`CompressedImage.seconds` and reported in the raw JSON, not in a transfer.
- :class:`GridftpServer`: ``globus-gridftp-server`` in the foreground, for the seeds'
  GridFTP (Nimbus's GSIFTP). Anonymous clear-text access mapped to root and restricted
  to the image directory: the lab host is private and reached only from this machine,
  and the seeds' GSI certificates would add a CA hvbench would have to create. Its data
  channel binds the lab address too; a forked child per connection stays in the
  server's process group, so stopping the server stops a transfer in flight. The
  server names its own address at start-up, which a lab namespace cannot resolve, so
  it runs in a private mount namespace with its own /etc/hosts (as dropbear gets its
  home).

Every server binds the lab host's address on its usual port (22, 873, 80, 2811): each
lab host is its own network namespace, so nothing else listens there.

The repository and the node share this machine's disk and page cache: the repository
serves images from its page cache (where writing them left them), as a repository
serves its popular images; a cold read would measure this machine's disk instead.

:class:`NodeImageCache` is the node's cache of checksum-verified base images (what
OpenStack Nova keeps in ``_base`` and Proxmox in its local image store), used by the
``overlay`` method; it lives as long as the repository (see :class:`ImageRepository`).
"""

from __future__ import annotations

import pwd
import re
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hvbench.errors import CommandError, HostError, ImageError, SpecError
from hvbench.host.commands import require_tool, run
from hvbench.host.paths import make_owned_dir
from hvbench.host.started import StartStop, StopOnExit
from hvbench.image.builder import GuestImage, find_image
from hvbench.image.system_image import check_free_disk, write_raw_image
from hvbench.netlab.lab import LabHost
from hvbench.workloads.endpoints import ServerHandle, lab_endpoint, start_server
from hvbench.workloads.web import lighttpd_config

#: Which server each propagation method needs.
METHOD_SERVERS: dict[str, str] = {
    "scp": "ssh", "rsync": "rsync", "http": "http", "http-zstd": "http", "overlay": "http",
    "gridftp": "gridftp",
}
SSH_PORT, RSYNC_PORT, HTTP_PORT, GRIDFTP_PORT = 22, 873, 80, 2811
#: The name the GridFTP server's private /etc/hosts gives its address.
GRIDFTP_HOST_NAME = "hvbench-repository"
RSYNC_MODULE = "images"
#: zstd settings of the repository's compressed copies.
ZSTD_LEVEL = 3
#: How long a server gets to listen, seconds.
SERVER_READY_S = 15.0
#: Timeout of key generation, seconds.
KEYGEN_TIMEOUT_S = 30.0
#: Timeout of compressing one image, seconds.
COMPRESS_TIMEOUT_S = 1800.0
#: Characters a path may hold to be named on a remote shell's command line (scp -O
#: passes the path to the repository's shell): no quoting is ever needed.
SAFE_PATH_RE = re.compile(r"^[A-Za-z0-9_./+-]+$")


def image_name(size: int) -> str:
    """The repository's file name of the raw image of ``size`` bytes."""
    return f"system-{size}.raw"


def check_safe_path(path: Path | str) -> str:
    """``path`` as text if a remote shell may see it unquoted; else :class:`HostError`."""
    text = str(path)
    if not SAFE_PATH_RE.match(text):
        raise HostError(f"path {text!r} holds characters a remote shell would interpret "
                        "(scp -O passes it to one); use a work directory without them")
    return text


# -- generated configuration (pure) ---------------------------------------------------
def rsyncd_config(*, module: str, path: str, log_file: str) -> str:
    """rsyncd.conf text: one read-only, unlisted module serving ``path``.

    ``uid``/``gid`` root: the daemon runs as root and the repository's directory is
    private to root (0700), so the default ``nobody`` could not read it. No chroot: the
    module only reads one directory and chroot buys nothing for a benchmark daemon.
    Raises :class:`HostError` for a value holding a newline."""
    if any("\n" in value for value in (module, path, log_file)) or "]" in module:
        raise HostError(f"rsyncd.conf values {module!r}, {path!r}, {log_file!r}: a "
                        "newline, or a bracket in the module name")
    return "\n".join([
        "use chroot = no",
        "max connections = 16",
        f"log file = {log_file}",
        f"[{module}]",
        f"    path = {path}",
        "    read only = yes",
        "    list = no",
        "    uid = root",
        "    gid = root",
    ]) + "\n"


def known_hosts_line(address: str, port: int, public_key: str) -> str:
    """A ``known_hosts`` line for ``address:port``: OpenSSH writes ``[addr]:port`` for
    ports other than 22. ``public_key`` is ``<type> <base64>`` (a comment is dropped)."""
    parts = public_key.split()
    if len(parts) < 2 or not parts[0].startswith("ssh-"):
        raise HostError(f"not an SSH public key: {public_key!r}")
    host = address if port == SSH_PORT else f"[{address}]:{port}"
    return f"{host} {parts[0]} {parts[1]}\n"


def dropbear_public_key(output: str) -> str:
    """The ``ssh-...`` line of ``dropbearkey -y`` output. Raises :class:`HostError`."""
    for line in output.splitlines():
        if line.startswith("ssh-"):
            return line.strip()
    raise HostError(f"dropbearkey printed no public key: {output!r}")


#: Bind-mount $1 over $2 in the private mount namespace, then exec the rest (dropbear).
_BIND_AND_EXEC = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'


def dropbear_argv(*, address: str, port: int, host_key: str, pid_file: str, home: str,
                  root_home: str) -> list[str]:
    """dropbear in the foreground (``-F``), logging to stderr (``-E``), keys only
    (``-s``), no motd or port forwarding, run in a private mount namespace where
    ``home`` (holding ``.ssh/authorized_keys``) is bind-mounted over ``root_home``."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", _BIND_AND_EXEC,
            "sh", home, root_home,
            "dropbear", "-F", "-E", "-s", "-m", "-j", "-k", "-p", f"{address}:{port}",
            "-r", host_key, "-P", pid_file]


def rsync_daemon_argv(*, config: str, address: str, port: int) -> list[str]:
    return ["rsync", "--daemon", "--no-detach", f"--config={config}",
            f"--address={address}", f"--port={port}"]


def lighttpd_argv(config: str) -> list[str]:
    return ["lighttpd", "-D", "-f", config]


def gridftp_hosts(address: str) -> str:
    """The ``/etc/hosts`` the GridFTP server sees: the server resolves its own listening
    address to a name at start-up, and a lab namespace reaches no DNS server (the
    lookup fails, "Temporary failure in name resolution", and the server exits)."""
    return f"127.0.0.1 localhost\n{address} {GRIDFTP_HOST_NAME}\n"


def gridftp_server_argv(*, address: str, port: int, images: str, config: str, hosts: str
                        ) -> list[str]:
    """``globus-gridftp-server`` in the foreground (no ``-S``), logging to stderr:
    anonymous access (``-aa``) as root (``-anonymous-user root -allow-root``: the
    images are root's), only ``images`` readable (``-rp``), control and data channels
    on ``address``, ``config`` as its only configuration file (not the machine's
    /etc/gridftp.conf). It runs in a private mount namespace where ``hosts`` (see
    :func:`gridftp_hosts`) is bind-mounted over /etc/hosts, as dropbear gets its home:
    the machine's file is never changed and the mount vanishes with the process."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", _BIND_AND_EXEC,
            "sh", hosts, "/etc/hosts",
            "globus-gridftp-server", "-c", config, "-aa", "-anonymous-user", "root",
            "-allow-root", "-p", str(port), "-control-interface", address,
            "-data-interface", address, "-rp", images, "-chdir-to", images,
            "-d", "error,warn,info,transfer"]


# -- the servers -----------------------------------------------------------------------
class RepoServer(StartStop):
    """One server process of the repository on its lab host.

    ``__init__`` only stores; :meth:`start` writes the server's files into
    ``directory`` and starts it, ready once its port accepts connections (15 s);
    :meth:`stop` sends SIGTERM, then SIGKILL after 3 s (``BackgroundProcess``), and is
    safe twice. A context manager."""

    kind = ""
    port = 0

    def __init__(self, host: LabHost, directory: Path) -> None:
        self.host = host
        self.directory = directory
        self._handle: ServerHandle | None = None
        self.argv: list[str] = []

    @property
    def address(self) -> str:
        return self.host.address

    def is_running(self) -> bool:
        return self._handle is not None and self._handle.is_running()

    def prepare(self) -> list[str]:
        """Write the server's files; return its argv."""
        raise NotImplementedError

    def start(self) -> None:
        """Prepare and start the server. Raises :class:`CommandError` (argv, the
        server's log) if it does not listen within :data:`SERVER_READY_S`,
        :class:`ToolMissingError` if a program is missing; nothing stays running."""
        if self._handle is not None:
            raise HostError(f"{self.kind} server on {self.host.name} is already running")
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.argv = self.prepare()
        self._handle = start_server(lab_endpoint(self.host), self.argv,
                                    name=f"{self.kind}-{self.host.name}", port=self.port,
                                    timeout=SERVER_READY_S)

    def stop(self) -> None:
        """Stop the process (soft, then hard). Safe twice; the files stay (the
        repository removes its directory)."""
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.stop()

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "argv": self.argv, "address": self.address,
                "port": self.port}


class SshServer(RepoServer):
    """dropbear for ``scp -O`` (see the module docstring). After :meth:`start`,
    :attr:`client_key` and :attr:`known_hosts` are what the client needs."""

    kind = "ssh"
    port = SSH_PORT

    @property
    def host_key(self) -> Path:
        return self.directory / "dropbear_ed25519_host_key"

    @property
    def client_key(self) -> Path:
        return self.directory / "client_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.directory / "known_hosts"

    @property
    def home(self) -> Path:
        """Mounted over root's home for dropbear: holds ``.ssh/authorized_keys``."""
        return self.directory / "home"

    def prepare(self) -> list[str]:
        """Generate the host key and the client key pair, write ``authorized_keys`` and
        ``known_hosts``. Raises :class:`CommandError` (30 s per key)."""
        for tool in ("dropbear", "dropbearkey", "ssh-keygen", "unshare", "scp"):
            require_tool(tool)
        for path in (self.host_key, self.client_key, self.client_key.with_suffix(".pub")):
            path.unlink(missing_ok=True)
        run(["dropbearkey", "-t", "ed25519", "-f", str(self.host_key)],
            timeout=KEYGEN_TIMEOUT_S, what="generating the repository's SSH host key")
        host_public = dropbear_public_key(run(
            ["dropbearkey", "-y", "-f", str(self.host_key)], timeout=KEYGEN_TIMEOUT_S,
            what="reading the repository's SSH host key"))
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "hvbench-propagation",
             "-f", str(self.client_key)], timeout=KEYGEN_TIMEOUT_S,
            what="generating the node's SSH key")
        ssh_dir = self.home / ".ssh"
        ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.home.chmod(0o700)  # dropbear refuses keys under a group-writable home
        keys = ssh_dir / "authorized_keys"
        keys.write_text(self.client_key.with_suffix(".pub").read_text())
        keys.chmod(0o600)
        self.known_hosts.write_text(known_hosts_line(self.address, self.port, host_public))
        return dropbear_argv(address=self.address, port=self.port,
                             host_key=str(self.host_key),
                             pid_file=str(self.directory / "dropbear.pid"),
                             home=str(self.home), root_home=pwd.getpwuid(0).pw_dir)


class ImagesServer(RepoServer):
    """A server of the repository's image directory ``images``."""

    def __init__(self, host: LabHost, directory: Path, images: Path) -> None:
        super().__init__(host, directory)
        self.images = images


class RsyncServer(ImagesServer):
    """``rsync --daemon`` serving ``images`` as module :data:`RSYNC_MODULE`."""

    kind = "rsync"
    port = RSYNC_PORT
    module = RSYNC_MODULE

    def prepare(self) -> list[str]:
        config = self.directory / "rsyncd.conf"
        config.write_text(rsyncd_config(module=self.module, path=str(self.images),
                                        log_file=str(self.directory / "rsyncd.log")))
        return rsync_daemon_argv(config=str(config), address=self.address, port=self.port)


class HttpServer(ImagesServer):
    """lighttpd serving ``images`` as its document root."""

    kind = "http"
    port = HTTP_PORT

    def prepare(self) -> list[str]:
        config = self.directory / "lighttpd.conf"
        config.write_text(lighttpd_config(
            docroot=str(self.images), bind_address=self.address, port=self.port,
            pid_file=str(self.directory / "lighttpd.pid"),
            error_log=str(self.directory / "error.log")))
        return lighttpd_argv(str(config))

    def url(self, name: str) -> str:
        return f"http://{self.address}:{self.port}/{name}"


class GridftpServer(ImagesServer):
    """``globus-gridftp-server`` serving ``images`` to anonymous ``ftp://`` clients."""

    kind = "gridftp"
    port = GRIDFTP_PORT

    def prepare(self) -> list[str]:
        """Write the empty configuration and the private hosts file; the client is
        required too, so a missing one fails before the server starts."""
        for tool in ("globus-gridftp-server", "globus-url-copy", "unshare"):
            require_tool(tool)
        config, hosts = self.directory / "gridftp.conf", self.directory / "hosts"
        config.write_text("# hvbench: every setting is on the command line\n")
        hosts.write_text(gridftp_hosts(self.address))
        return gridftp_server_argv(address=self.address, port=self.port,
                                   images=check_safe_path(self.images), config=str(config),
                                   hosts=str(hosts))

    def url(self, path: Path) -> str:
        """The ``ftp://`` URL of ``path`` (absolute: the server has no chroot)."""
        return f"ftp://{self.address}:{self.port}{check_safe_path(path)}"


# -- images ----------------------------------------------------------------------------
@dataclass(frozen=True)
class CompressedImage:
    """The zstd copy of a repository image; ``seconds``: the one-time compression."""

    name: str
    path: Path
    size: int
    seconds: float
    level: int = ZSTD_LEVEL

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "path": str(self.path), "size": self.size,
                "compress_s": self.seconds, "level": self.level, "threads": "all (-T0)"}


@dataclass(frozen=True)
class RepoImage:
    """A raw system image in the repository. ``write_s``: how long writing it took."""

    name: str
    path: Path
    size: int
    sha256: str
    write_s: float = 0.0

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "path": str(self.path), "size": self.size,
                "sha256": self.sha256, "write_s": self.write_s}


class NodeImageCache:
    """The node's cache of verified base images, one per repository image (size and
    checksum): what the ``overlay`` method boots copy-on-write overlays over.

    ``directory`` is created if missing; :meth:`clear` removes the files this cache
    admitted (and the directory if it created it). Entries are trusted once admitted,
    as Nova trusts its ``_base`` images: a hit is not re-hashed."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._created = False
        self._entries: dict[str, Path] = {}

    def path_for(self, image: RepoImage) -> Path:
        return self.directory / f"base-{image.size}-{image.sha256[:16]}.raw"

    def lookup(self, image: RepoImage) -> Path | None:
        """The cached base of ``image``, if admitted and still whole."""
        path = self._entries.get(image.sha256)
        if path is not None and path.is_file() and path.stat().st_size == image.size:
            return path
        return None

    def admit(self, image: RepoImage, fetched: Path) -> Path:
        """Move a verified fetch of ``image`` into the cache (a rename: the node and the
        cache share a filesystem, else a copy). Raises :class:`HostError`."""
        if not self.directory.exists():
            self.directory.mkdir(mode=0o700, parents=True)
            self._created = True
        dest = self.path_for(image)
        try:
            shutil.move(fetched, dest)
        except OSError as exc:
            raise HostError(f"caching {fetched} as {dest}: {exc}") from exc
        self._entries[image.sha256] = dest
        return dest

    def clear(self) -> None:
        """Remove every admitted file (and the directory if this cache made it)."""
        for path in self._entries.values():
            path.unlink(missing_ok=True)
        self._entries.clear()
        if self._created:
            shutil.rmtree(self.directory, ignore_errors=True)
            self._created = False

    def describe(self) -> dict[str, Any]:
        return {"directory": str(self.directory),
                "entries": {sha: str(p) for sha, p in self._entries.items()}}


# -- the repository --------------------------------------------------------------------
class ImageRepository(StopOnExit):
    """Images served from lab host ``host``; see the module docstring.

    ``__init__`` only stores. :meth:`start` creates a private directory under
    ``directory`` (an owned ``image-repo-*`` one, so ``hvbench cleanup`` finds it after
    a ``kill -9``) and the servers the given methods need; :meth:`ensure_image` writes
    images lazily, once per size. :meth:`stop` stops the servers and removes everything
    the repository created: its directory and the node cache's entries. Safe twice; a
    context manager (entering does not start servers: call :meth:`start`).

    ``node_cache``: the node's base-image cache directory (``overlay`` method). The
    caller owns it (e.g. a directory of its own lifetime); None puts it inside the
    repository's directory. Either way the cached images live until :meth:`stop`.
    """

    def __init__(self, host: LabHost, directory: Path, *,
                 node_cache: Path | None = None) -> None:
        self.host = host
        self.directory = directory
        self._node_cache_dir = node_cache
        self.root: Path | None = None
        self.servers: dict[str, RepoServer] = {}
        self.images: dict[int, RepoImage] = {}
        self.compressed: dict[int, CompressedImage] = {}
        self._cache: NodeImageCache | None = None

    @property
    def address(self) -> str:
        return self.host.address

    @property
    def images_dir(self) -> Path:
        return self._require_root() / "images"

    @property
    def node_cache(self) -> NodeImageCache:
        """The node's base-image cache (created with the repository's directory)."""
        if self._cache is None:
            directory = self._node_cache_dir or self._require_root() / "node-cache"
            self._cache = NodeImageCache(directory)
        return self._cache

    def _require_root(self) -> Path:
        if self.root is None:
            raise HostError(f"the image repository on {self.host.name} is not started")
        return self.root

    def _make_root(self) -> Path:
        if self.root is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self.root = make_owned_dir(self.directory, "image-repo-")
            (self.root / "images").mkdir(mode=0o700)
        return self.root

    def start(self, methods: Iterable[str]) -> None:
        """Start the servers ``methods`` need that are not running yet (may be called
        again with more methods). Raises :class:`SpecError` for an unknown method, else
        as :meth:`RepoServer.start`; on failure the servers of this call are stopped."""
        kinds = []
        for method in methods:
            if method not in METHOD_SERVERS:
                known = ", ".join(sorted(METHOD_SERVERS))
                raise SpecError(f"propagation method {method!r}: expected one of {known}")
            kind = METHOD_SERVERS[method]
            if kind not in kinds and kind not in self.servers:
                kinds.append(kind)
        root = self._make_root()
        started: list[RepoServer] = []
        try:
            for kind in kinds:
                server = self._new_server(kind, root)
                server.start()
                started.append(server)
                self.servers[kind] = server
        except BaseException:
            for server in started:
                server.stop()
                self.servers.pop(server.kind, None)
            raise

    def _new_server(self, kind: str, root: Path) -> RepoServer:
        images = root / "images"
        if kind == "ssh":
            return SshServer(self.host, root / "ssh")
        if kind == "rsync":
            return RsyncServer(self.host, root / "rsync", images)
        if kind == "gridftp":
            return GridftpServer(self.host, root / "gridftp", images)
        return HttpServer(self.host, root / "http", images)

    def server(self, method: str) -> RepoServer:
        """The running server of ``method``. Raises :class:`HostError` if not started."""
        kind = METHOD_SERVERS.get(method)
        server = self.servers.get(kind or "")
        if server is None:
            raise HostError(f"the image repository on {self.host.name} serves no "
                            f"{method!r} (start it with that method)")
        return server

    def ensure_image(self, size: int, image: GuestImage | None = None) -> RepoImage:
        """The raw image of ``size`` bytes, written on first use (``image``: the guest
        image whose root it holds, default the built one).

        Raises :class:`ImageError` (no guest image; ``size`` below its root),
        :class:`HostError` (not started; the disk would fill: checked first)."""
        if size in self.images and self.images[size].path.is_file():
            return self.images[size]
        guest = image or find_image()
        if guest is None:
            raise ImageError("no guest image is built yet: run `hvbench image build`")
        dest = self.images_dir / image_name(size)
        started = time.monotonic()
        try:
            digest = write_raw_image(guest, size, dest)
        except BaseException:
            dest.unlink(missing_ok=True)
            raise
        entry = RepoImage(dest.name, dest, size, digest, time.monotonic() - started)
        self.images[size] = entry
        return entry

    def ensure_compressed(self, image: RepoImage) -> CompressedImage:
        """The zstd copy of ``image`` (``zstd -T0 -3``), written on first use next to
        it. Raises :class:`HostError` (no room), :class:`CommandError` (zstd failed or
        took longer than 1800 s), :class:`ToolMissingError`."""
        if image.size in self.compressed and self.compressed[image.size].path.is_file():
            return self.compressed[image.size]
        dest = image.path.with_name(image.name + ".zst")
        check_free_disk(dest.parent, image.size, f"compressing {image.name}")
        started = time.monotonic()
        try:
            run(["zstd", "-q", "-T0", f"-{ZSTD_LEVEL}", "--no-progress", "-f", "-o",
                 str(dest), str(image.path)], timeout=COMPRESS_TIMEOUT_S,
                what=f"compressing {image.name}")
        except BaseException:
            dest.unlink(missing_ok=True)
            raise
        entry = CompressedImage(dest.name, dest, dest.stat().st_size,
                                time.monotonic() - started)
        self.compressed[image.size] = entry
        return entry

    def stop(self) -> None:
        """Stop every server, then remove the repository's directory and the node
        cache's entries. Safe twice; raises nothing for what is already gone (a
        server's stop error is raised after the files are removed)."""
        errors: list[BaseException] = []
        for server in reversed(list(self.servers.values())):
            try:
                server.stop()
            except (OSError, CommandError) as exc:
                errors.append(exc)
        self.servers.clear()
        if self._cache is not None:
            self._cache.clear()
            self._cache = None
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
        self.images.clear()
        self.compressed.clear()
        if errors:
            raise errors[0]

    def describe(self) -> dict[str, Any]:
        """The repository's host, servers and images (for the raw JSON)."""
        return {
            "host": self.host.name, "address": self.address,
            "link_rate": self.host.spec.rate,
            "directory": str(self.root) if self.root else None,
            "servers": {k: s.describe() for k, s in self.servers.items()},
            "images": {str(k): v.describe() for k, v in self.images.items()},
            "compressed": {str(k): v.describe() for k, v in self.compressed.items()},
            "page_cache": "served hot: the repository and the node share this machine",
        }
