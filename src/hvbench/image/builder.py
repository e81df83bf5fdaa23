"""Build and cache the bundled guest image (kernel, initramfs, root disk) from Debian packages.

The image is assembled on the host from the candidate versions of a fixed set of
Debian packages: they are downloaded with ``apt-get download``, unpacked with
``dpkg-deb -x`` (no maintainer scripts run) and only the files the guest needs are
copied into a root tree. That tree becomes a read-only file system image (``rootfs.img``)
the host attaches as a virtio disk with serial ``hvb-root``; a tiny initramfs (busybox,
``stage1.sh`` and the modules to reach that disk) mounts it under a tmpfs overlay and
switch_roots into it, where ``init.sh`` brings the guest up. Images are cached under
``<cache>/images/<key>/`` where the key hashes the package versions, both init scripts
and FORMAT_VERSION, so an image is rebuilt exactly when one of those changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

from hvbench.errors import ImageError
from hvbench.image import apt, elf, kmod, resolution, rootimg
from hvbench.image.cpio import write_newc
from hvbench.image.vmlinux import extract_vmlinux

#: Bump whenever the image layout or the way it is built changes: it is part of the key.
#: 6: the nvme and virtiofs modules. 7: the aoe module and aoe-discover. 8: the
#: initramfs holds only stage 1's applets and modprobe's files, and the overlay's
#: upper and work directories; the root disk has /etc/fstab. 9: the initramfs has the
#: mount tables stage 1 mounts everything with (/etc/fstab, /etc/fstab.newroot) and
#: the overlay's busybox as a hard link.
FORMAT_VERSION = 9

#: Kernel command line to boot the image with. ``panic=-1`` turns a broken /init into an
#: immediate reboot, which QEMU's ``-no-reboot`` turns into an exit. The rest trims boot
#: time under TCG without changing how the guest does I/O: no console chatter (``quiet``;
#: every byte on the emulated UART is a VM exit), no PS/2 mouse probe, one 8250 UART
#: only, no timer check, no crypto self-tests at module load, and
#: two built-in initcalls skipped: the SP800-108 KDF self-test (0.75 s under TCG, not
#: governed by cryptomgr.notests) and kprobe-event tracing setup (0.18 s).
#: Speculative-execution mitigations stay at the kernel's default (on), as in a stock
#: cloud guest: they tax every system call and interrupt, so turning them off is a
#: declared platform setting (``mitigations = false``), never a hidden trim. So is the
#: clocksource (``clocksource``, hvbench.model.qemu_argv.clock_cmdline): the
#: ``tsc=reliable`` this line once carried made TCG guests use the TSC where a stock
#: kernel picks the HPET.
RECOMMENDED_CMDLINE = (
    "console=ttyS0 panic=-1 quiet i8042.noaux 8250.nr_uarts=1 "
    "no_timer_check random.trust_cpu=on cryptomgr.notests "
    "initcall_blacklist=crypto_kdf108_init,init_kprobe_trace"
)

#: Programs copied into the guest, with their shared-library closure.
GUEST_PROGRAMS: tuple[str, ...] = (
    "/usr/bin/fio",
    "/usr/bin/iperf3",
    "/usr/bin/stress-ng",
    "/usr/sbin/lighttpd",
    "/usr/sbin/qemu-ga",
    "/sbin/mke2fs",
    "/sbin/mkfs.ext4",
    "/sbin/nbd-client",
)
#: Loaded with dlopen(), so not visible as DT_NEEDED: lighttpd's modules, and libgcc_s
#: which glibc dlopens for pthread_cancel and backtraces.
DLOPENED_GLOBS: tuple[str, ...] = (
    "usr/lib/lighttpd/mod_*.so",
    "lib/x86_64-linux-gnu/libgcc_s.so.1",
)
#: Plain files copied as they are.
#: aoe-discover is a POSIX shell script (busybox's sh runs it).
GUEST_DATA: tuple[str, ...] = ("/etc/mke2fs.conf", "/sbin/aoe-discover")
BUSYBOX = "/bin/busybox"

_MANIFEST = "manifest.json"
_KERNEL_PVH = "vmlinux"
_KERNEL_BZIMAGE = "vmlinuz"
_INITRD = "initrd.img"
_ROOTFS = "rootfs.img"
#: File system of rootfs.img (recorded in the manifest; stage1.sh loads and mounts it).
#: squashfs beat a journal-less ext4 by about 0.3 s per boot under TCG: its module is
#: a tenth of ext4's (plus jbd2, mbcache, crc16 and crc32c) to load and relocate.
ROOTFS_TYPE = "squashfs"
_KEY_LENGTH = 24
#: dpkg-deb and depmod take seconds; a stuck one is a broken host.
_TOOL_TIMEOUT_S = 600.0

_ETC_FILES: dict[str, str] = {
    "etc/passwd": "root:x:0:0:root:/root:/bin/sh\n",
    "etc/group": "root:x:0:\ntty:x:5:\n",
    "etc/shadow": "root:*:19000:0:99999:7:::\n",
    "etc/hostname": "hvbench-guest\n",
    "etc/hosts": "127.0.0.1\tlocalhost\n127.0.1.1\thvbench-guest\n::1\tlocalhost\n",
    "etc/nsswitch.conf": (
        "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
        "networks: files\nprotocols: files\nservices: files\n"
    ),
    "etc/protocols": "ip\t0\tIP\nicmp\t1\tICMP\ntcp\t6\tTCP\nudp\t17\tUDP\n",
    "etc/services": "http\t80/tcp\niperf3\t5201/tcp\nfio\t8765/tcp\n",
    # sym53c8xx waits 3 s for the SCSI bus to settle after its reset; QEMU's lsi53c895a
    # is ready at once. busybox modprobe applies modprobe.d options.
    "etc/modprobe.d/hvbench.conf": "options sym53c8xx settle=0\n",
}
#: The guest's own file systems besides /proc, /sys and /dev: (source, mount point,
#: type, options). The root disk's /etc/fstab lists them (for a stage 2 run as the
#: first /init, and for anyone reading the guest); stage 1 mounts them under the new
#: root before switching to it (newroot_table).
_GUEST_MOUNTS: tuple[tuple[str, str, str, str], ...] = (
    ("devpts", "/dev/pts", "devpts", "gid=5,mode=620,ptmxmode=666"),
    ("tmpfs", "/tmp", "tmpfs", "mode=1777"),
    ("tmpfs", "/run", "tmpfs", "mode=755"),
    ("tmpfs", "/dev/shm", "tmpfs", "mode=1777"),
)
#: Stage 1's first ``mount -a`` (the initramfs's /etc/fstab).
_STAGE1_FSTAB = (
    "proc /proc proc defaults 0 0\n"
    "sysfs /sys sysfs defaults 0 0\n"
    "devtmpfs /dev devtmpfs defaults 0 0\n"
)
#: The overlay stage 1 mounts on /newroot (its lower layer is the root disk on /lower).
_OVERLAY_LINE = "overlay /newroot overlay lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work 0 0"
_MOVED_TO_NEWROOT = ("dev", "proc", "sys")
#: qemu-ga's guest-shutdown runs ``/sbin/shutdown -h -P +0 "msg"`` (or ``-H`` halt,
#: ``-r`` reboot). There is no init system to ask, so power off directly; QEMU (run
#: with -no-reboot) then exits for poweroff and reboot alike.
_SHUTDOWN = """#!/bin/sh
# hvbench guest: shutdown(8) replacement used by qemu-ga's guest-shutdown.
action=poweroff
for arg in "$@"; do
    case "$arg" in
    -r) action=reboot ;;
    -H) action=halt ;;
    esac
done
echo "hvbench-init: $action requested" >/dev/console
sync
exec busybox "$action" -f
"""
#: ``mnt/hvbench``: the host mounts benchmark file systems there, and the root is only
#: writable through the overlay, so the directory ships in the image.
_GUEST_DIRS = ("proc", "sys", "dev", "tmp", "run", "root", "etc", "var", "mnt", "mnt/hvbench")
#: The stage-1 initramfs: mount points, /etc for its mount tables, the switch_root
#: target and the root overlay's writable layer (upper and work directories, in the
#: initramfs's own tmpfs; upper/bin holds the hard link to busybox, see stage1.sh).
_STAGE1_DIRS = ("proc", "sys", "dev", "etc", "newroot", "lower", "rw/upper/bin", "rw/work")
#: The busybox applets stage1.sh runs, as links in the initramfs. Only these: the kernel
#: unpacks every entry of the initramfs before /init runs, and busybox's other ~260
#: applet links were entries no step used.
_STAGE1_APPLETS = ("bin/sh", "bin/mount", "bin/mkdir", "bin/usleep", "sbin/modprobe",
                   "usr/sbin/chroot")
#: What busybox modprobe reads under /lib/modules/<release>; depmod's other outputs
#: (modules.order alone is 160 kB) stay out of the initramfs, which the kernel unpacks
#: on every boot.
_MODPROBE_FILES = ("modules.dep", "modules.alias", "modules.builtin", "modules.symbols")


@dataclass(frozen=True)
class GuestImage:
    """A built guest image in the cache."""

    kernel: Path
    initrd: Path
    key: str
    kernel_release: str
    packages: dict[str, str]
    directory: Path
    #: A read-only root filesystem image the guest overlays; None: initramfs only.
    rootfs: Path | None = None


def _noop(_message: str) -> None:
    return None


def guest_fstab() -> str:
    """The root disk's /etc/fstab: the guest's file systems besides /proc, /sys, /dev."""
    return "".join(f"{src} {target} {fstype} {opts} 0 0\n"
                   for src, target, fstype, opts in _GUEST_MOUNTS)


def newroot_table() -> str:
    """The initramfs's /etc/fstab.newroot: what stage 1 mounts after the root disk's
    squashfs, in order (the overlay on /newroot; the guest's file systems, under
    /newroot except those under /dev, which still is the initramfs's and moves with
    its submounts; then /dev, /proc and /sys moved into the new root)."""
    lines = [_OVERLAY_LINE]
    for src, target, fstype, opts in _GUEST_MOUNTS:
        where = target if target.startswith("/dev/") else f"/newroot{target}"
        lines.append(f"{src} {where} {fstype} {opts} 0 0")
    lines += [f"/{fs} /newroot/{fs} none move 0 0" for fs in _MOVED_TO_NEWROOT]
    return "\n".join(lines) + "\n"


def default_cache_dir() -> Path:
    """Return hvbench's cache directory.

    ``$HVBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/hvbench``, else ``~/.cache/hvbench``.
    Images live under ``<cache>/images/<key>/``, downloaded packages under ``<cache>/debs``.
    """
    explicit = os.environ.get("HVBENCH_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "hvbench"


def resolve_packages() -> dict[str, str]:
    """Return ``{package: candidate version}`` for every .deb the image is made of.

    Asks apt-cache (about 2 s, each call limited to 60 s).

    Raises:
        ToolMissingError: apt-cache is not installed.
        ImageError: apt-cache failed or a package has no candidate.
    """
    return apt.resolve_packages()


def init_script() -> bytes:
    """Return the guest's stage-2 /init script (package data ``init.sh``)."""
    return resources.files("hvbench.image").joinpath("init.sh").read_bytes()


def stage1_script() -> bytes:
    """Return the initramfs's /init (package data ``stage1.sh``)."""
    return resources.files("hvbench.image").joinpath("stage1.sh").read_bytes()


def boot_scripts() -> bytes:
    """Return both init scripts as one blob: what :func:`image_key` hashes as ``init``."""
    return stage1_script() + b"\0" + init_script()


def image_key(packages: Mapping[str, str], init: bytes) -> str:
    """Return the cache key: a hash of FORMAT_VERSION, the package versions and ``init``
    (the init scripts, see :func:`boot_scripts`)."""
    digest = hashlib.sha256()
    payload = {"format": FORMAT_VERSION, "packages": dict(sorted(packages.items()))}
    digest.update(json.dumps(payload, sort_keys=True).encode())
    digest.update(hashlib.sha256(init).digest())
    return digest.hexdigest()[:_KEY_LENGTH]


def _has_size(path: Path, size: object) -> bool:
    # A size check catches the truncated files an interrupted copy or a full disk leaves.
    return path.is_file() and path.stat().st_size == size


def _load_image(directory: Path, key: str) -> GuestImage | None:
    """Return the image in ``directory`` if its manifest matches ``key`` and its files."""
    try:
        manifest: dict[str, Any] = json.loads((directory / _MANIFEST).read_text())
        kernel, initrd = directory / str(manifest["kernel_file"]), directory / _INITRD
        rootfs = directory / str(manifest["rootfs_file"])
        valid = (
            manifest.get("key") == key
            and manifest.get("format_version") == FORMAT_VERSION
            and kernel.name in (_KERNEL_PVH, _KERNEL_BZIMAGE)
            and rootfs.name == _ROOTFS
            and kernel.is_file()
            and _has_size(initrd, manifest.get("initrd_size"))
            and _has_size(rootfs, manifest.get("rootfs_size"))
        )
        if not valid:
            return None
        return GuestImage(
            kernel=kernel,
            initrd=initrd,
            key=key,
            kernel_release=str(manifest["kernel_release"]),
            packages={str(k): str(v) for k, v in manifest["packages"].items()},
            directory=directory,
            rootfs=rootfs,
        )
    except (OSError, ValueError, KeyError, AttributeError):
        return None


def _resolution_inputs() -> list[str]:
    """What besides apt's state decides the resolved packages (see :mod:`.resolution`)."""
    return [f"format={FORMAT_VERSION}", "roots=" + ",".join(apt.ROOT_PACKAGES)]


def current_packages(cache_dir: Path | None = None) -> dict[str, str]:
    """Return the candidate package versions, from the resolution cache when apt's state
    files are unchanged since the last resolution (a few ms), else from apt-cache
    (about 2 s, each call limited to 60 s), refreshing the cache.

    Raises:
        ToolMissingError: apt-cache is not installed (only when the cache misses).
        ImageError: the package versions cannot be resolved (idem).
    """
    cache = cache_dir or default_cache_dir()
    return resolution.resolve_cached(
        cache / resolution.CACHE_FILE, _resolution_inputs(), resolve_packages
    )


def find_image(cache_dir: Path | None = None) -> GuestImage | None:
    """Return the cached image for the current candidate package versions, or None.

    Cheap (a few ms): the versions come from the resolution cache unless apt's lists,
    dpkg status, sources or pinning changed, in which case apt-cache runs (about 2 s).
    Checks that the manifest matches and that the kernel, initrd and root disk image
    exist with the recorded sizes.

    Raises:
        ToolMissingError: apt-cache is needed and not installed.
        ImageError: the package versions cannot be resolved.
    """
    cache = cache_dir or default_cache_dir()
    packages = current_packages(cache)
    key = image_key(packages, boot_scripts())
    return _load_image(cache / "images" / key, key)


def build_image(
    cache_dir: Path | None = None,
    *,
    force: bool = False,
    log: Callable[[str], None] | None = None,
) -> GuestImage:
    """Return the image for the current package versions, building it if needed.

    Idempotent: an existing valid image is returned unless ``force``. The build happens in
    a temporary directory inside the cache and is renamed into place at the end, so a
    failed or interrupted build (KeyboardInterrupt included) leaves nothing behind but
    the downloaded .debs, which later builds reuse. Downloads are limited to 30 min, each
    unpack/depmod step to 10 min.

    Raises:
        ToolMissingError: apt-get, apt-cache, dpkg-deb, depmod or mksquashfs is not
            installed.
        ImageError: a package could not be resolved, downloaded or unpacked, a needed
            file or library is missing, or a command failed (chained to CommandError).
    """
    say = log or _noop
    cache = cache_dir or default_cache_dir()
    # Always a full resolution: a build is rare and must not trust a stale cache. It
    # refreshes the resolution cache so the next find_image() is cheap. Fingerprint
    # first: if apt's state changes meanwhile, the entry is stale and merely misses.
    fingerprint = resolution.apt_fingerprint(_resolution_inputs())
    packages = resolve_packages()
    resolution.store(cache / resolution.CACHE_FILE, fingerprint, packages)
    key = image_key(packages, boot_scripts())
    final = cache / "images" / key
    if not force:
        existing = _load_image(final, key)
        if existing is not None:
            say(f"image {key} is up to date")
            return existing
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".build-{key}-", dir=final.parent))
    try:
        # mkdtemp makes it 0700; QEMU may run as another user than the builder.
        tmp.chmod(0o755)
        _build_into(tmp, deb_dir=cache / "debs", packages=packages, key=key, say=say)
        _publish(tmp, final)
    except BaseException:
        # BaseException on purpose: Ctrl-C must not leave a half-built tree in the cache.
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    image = _load_image(final, key)
    if image is None:
        raise ImageError(f"the image just built in {final} failed verification")
    say(
        f"image {key} ready: {image.initrd} ({image.initrd.stat().st_size} bytes), "
        f"{image.rootfs} ({image.rootfs.stat().st_size if image.rootfs else 0} bytes)"
    )
    return image


def _publish(tmp: Path, final: Path) -> None:
    """Atomically move the finished build ``tmp`` to ``final``, replacing an old one."""
    old: Path | None = None
    if final.exists():
        old = final.with_name(f".old-{final.name}-{os.getpid()}")
        final.rename(old)
    try:
        tmp.rename(final)
    except OSError:
        # Another process published the same key meanwhile: theirs is as good as ours.
        if not final.exists():
            raise
        shutil.rmtree(tmp, ignore_errors=True)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _build_into(
    out: Path,
    *,
    deb_dir: Path,
    packages: Mapping[str, str],
    key: str,
    say: Callable[[str], None],
) -> None:
    started = time.time()
    debs = apt.download_debs(packages, deb_dir, say)
    staging, rootfs, stage1 = out / "staging", out / "rootfs", out / "stage1"
    say(f"unpacking {len(debs)} packages")
    unpack_debs(debs.values(), staging)
    release = kmod.kernel_release(staging)
    say(f"assembling the root file system and initramfs for kernel {release}")
    assemble_rootfs(staging, rootfs, release, init_script())
    assemble_initramfs(staging, stage1, release, stage1_script())
    kernel_file = _install_kernel(staging / "boot" / f"vmlinuz-{release}", out, say)
    with (out / _INITRD).open("wb") as f:
        write_newc(stage1, f)
    say(f"writing {_ROOTFS} ({ROOTFS_TYPE})")
    rootimg.make_squashfs(rootfs, out / _ROOTFS)
    for tree in (staging, rootfs, stage1):
        shutil.rmtree(tree)
    manifest = {
        "key": key,
        "format_version": FORMAT_VERSION,
        "kernel_release": release,
        "kernel_file": kernel_file,
        "packages": dict(packages),
        "initrd_size": (out / _INITRD).stat().st_size,
        "initrd_compression": "none",
        "rootfs_file": _ROOTFS,
        "rootfs_size": (out / _ROOTFS).stat().st_size,
        "rootfs_type": ROOTFS_TYPE,
        "recommended_cmdline": RECOMMENDED_CMDLINE,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "build_seconds": round(time.time() - started, 1),
    }
    (out / _MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def _install_kernel(bzimage: Path, out: Path, say: Callable[[str], None]) -> str:
    """Write the kernel to ``out``; return its file name (see :mod:`.vmlinux`)."""
    vmlinux = extract_vmlinux(bzimage.read_bytes())
    if vmlinux is None:
        say("kernel has no PVH entry point; using the compressed bzImage (slower boot)")
        shutil.copyfile(bzimage, out / _KERNEL_BZIMAGE)
        return _KERNEL_BZIMAGE
    (out / _KERNEL_PVH).write_bytes(vmlinux)
    return _KERNEL_PVH


def unpack_debs(debs: Iterable[Path], staging: Path) -> None:
    """Unpack every .deb into ``staging`` with ``dpkg-deb -x`` (no maintainer scripts).

    Runs a few dpkg-deb processes in parallel: the kernel package alone takes seconds.

    Raises:
        ToolMissingError: dpkg-deb is not installed.
        ImageError: a package failed to unpack.
    """
    staging.mkdir(parents=True, exist_ok=True)

    def unpack(deb: Path) -> None:
        apt.run_tool(
            ["dpkg-deb", "-x", str(deb), str(staging)],
            what=f"unpacking {deb.name}",
            timeout=_TOOL_TIMEOUT_S,
            package="dpkg",
        )

    # Largest first so the kernel does not start last and serialize the tail.
    ordered = sorted(debs, key=lambda p: p.stat().st_size, reverse=True)
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        for future in [pool.submit(unpack, deb) for deb in ordered]:
            future.result()


def copy_guest_path(src_root: Path, dst_root: Path, guest: PurePosixPath) -> None:
    """Copy ``guest`` from ``src_root`` to ``dst_root``, recreating symlinks on the way.

    Every symlink met while walking the path (``/lib64``, ``libfoo.so.1``) is copied as a
    symlink and its target copied too, so the guest sees the same layout.

    Raises:
        ImageError: the path does not exist in ``src_root``.
    """
    current = PurePosixPath("/")
    parts = guest.parts[1:]
    for i, part in enumerate(parts):
        candidate = current / part
        src = src_root / str(candidate).lstrip("/")
        dst = dst_root / str(candidate).lstrip("/")
        if src.is_symlink():
            target = src.readlink()
            if not dst.is_symlink():
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.symlink_to(target)
            base = PurePosixPath(str(target))
            base = base if base.is_absolute() else current / base
            rest = PurePosixPath(*parts[i + 1 :]) if i + 1 < len(parts) else PurePosixPath()
            copy_guest_path(src_root, dst_root, PurePosixPath(os.path.normpath(base / rest)))
            return
        if not src.exists():
            raise ImageError(f"{guest} is missing from the unpacked packages")
        current = candidate
    src = src_root / str(current).lstrip("/")
    dst = dst_root / str(current).lstrip("/")
    if src.is_dir():
        dst.mkdir(parents=True, exist_ok=True)
    elif not dst.exists():
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


def _library_dirs(staging: Path) -> list[str]:
    """Default loader directories plus those of the tree's /etc/ld.so.conf.d."""
    dirs = list(elf.DEFAULT_LIBRARY_DIRS)
    conf = staging / "etc" / "ld.so.conf.d"
    for path in sorted(conf.glob("*.conf")) if conf.is_dir() else []:
        for line in path.read_text().splitlines():
            entry = line.split("#", 1)[0].strip()
            if entry.startswith("/") and entry not in dirs:
                dirs.append(entry)
    return dirs


def _glob_guest(root: Path, patterns: Iterable[str]) -> list[PurePosixPath]:
    found = [
        PurePosixPath("/") / p.relative_to(root).as_posix() for g in patterns for p in root.glob(g)
    ]
    return sorted(found)


def assemble_rootfs(staging: Path, rootfs: Path, release: str, init: bytes) -> None:
    """Populate ``rootfs`` (the root disk's tree) with what the guest needs from
    ``staging``; ``init`` becomes its /init, the stage-2 init.

    Raises:
        ImageError: a program, library or module is missing, or depmod failed.
    """
    for name in _GUEST_DIRS:
        (rootfs / name).mkdir(parents=True, exist_ok=True)
    (rootfs / "var" / "run").symlink_to("/run")
    (rootfs / "etc" / "mtab").symlink_to("/proc/self/mounts")
    programs = [PurePosixPath(p) for p in GUEST_PROGRAMS]
    programs += _glob_guest(staging, DLOPENED_GLOBS)
    closure = elf.library_closure(staging, programs, _library_dirs(staging))
    for guest in (
        sorted(closure) + [PurePosixPath(BUSYBOX)] + [PurePosixPath(p) for p in GUEST_DATA]
    ):
        copy_guest_path(staging, rootfs, guest)
    _install_applets(staging, rootfs)
    _install_modules(staging, rootfs, release, kmod.WANTED_MODULES + kmod.STAGE1_MODULES)
    for rel, text in {**_ETC_FILES, "etc/fstab": guest_fstab()}.items():
        (rootfs / rel).parent.mkdir(parents=True, exist_ok=True)
        (rootfs / rel).write_text(text)
    _write_executable(rootfs / "init", init)
    _write_executable(rootfs / "sbin" / "shutdown", _SHUTDOWN.encode())


def assemble_initramfs(staging: Path, tree: Path, release: str, init: bytes) -> None:
    """Populate ``tree`` with the stage-1 initramfs: busybox, the applets stage 1 runs
    (_STAGE1_APPLETS), the modules that reach the root disk (kmod.STAGE1_MODULES) with
    the files busybox modprobe reads (_MODPROBE_FILES), stage 1's mount tables, the
    overlay's busybox (a hard link, see stage1.sh) and ``init`` as /init.

    Raises:
        ImageError: busybox or a module is missing, or depmod failed.
    """
    for name in _STAGE1_DIRS:
        (tree / name).mkdir(parents=True, exist_ok=True)
    copy_guest_path(staging, tree, PurePosixPath(BUSYBOX))
    busybox = tree / BUSYBOX.lstrip("/")
    os.link(busybox, tree / "rw" / "upper" / BUSYBOX.lstrip("/"))
    (tree / "etc" / "fstab").write_text(_STAGE1_FSTAB)
    (tree / "etc" / "fstab.newroot").write_text(newroot_table())
    for applet in _STAGE1_APPLETS:
        (tree / applet).parent.mkdir(parents=True, exist_ok=True)
        (tree / applet).symlink_to(BUSYBOX)
    _install_modules(staging, tree, release, kmod.STAGE1_MODULES)
    modules = tree / "lib" / "modules" / release
    for path in modules.glob("modules.*"):
        if path.name not in _MODPROBE_FILES:
            path.unlink()
    _write_executable(tree / "init", init)


def _write_executable(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    path.chmod(0o755)


def _install_applets(staging: Path, rootfs: Path) -> None:
    """Link every busybox applet to /bin/busybox unless a real program is there.

    Done at build time rather than with ``busybox --install`` at boot, which would cost
    a few hundred file creations on every boot. The list comes from running the static
    busybox of the package itself (it runs on any x86-64 host).
    """
    out = apt.run_tool(
        [str(staging / BUSYBOX.lstrip("/")), "--list-full"],
        what="listing busybox applets",
        timeout=_TOOL_TIMEOUT_S,
    )
    for line in out.split():
        link = rootfs / line.strip().lstrip("/")
        if link.name == "busybox" or link.exists() or link.is_symlink():
            continue
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(BUSYBOX)


def _install_modules(staging: Path, rootfs: Path, release: str, wanted: Iterable[str]) -> None:
    """Copy the ``wanted`` modules and their dependencies, then run depmod for the guest."""
    src = staging / "lib" / "modules" / release
    dst = rootfs / "lib" / "modules" / release
    # The package ships no modules.dep (its postinst would run depmod): make one, once
    # (the initramfs and the root disk both need it).
    if not (src / "modules.dep").is_file():
        _depmod(staging, release)
    deps = kmod.parse_modules_dep((src / "modules.dep").read_text())
    for rel in kmod.module_closure(deps, wanted):
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, dst / rel)
    for name in ("modules.order", "modules.builtin", "modules.builtin.modinfo"):
        if (src / name).exists():
            shutil.copy2(src / name, dst / name)
    _depmod(rootfs, release)


def _depmod(root: Path, release: str) -> None:
    apt.run_tool(
        ["depmod", "-b", str(root), release],
        what=f"depmod for {root}",
        timeout=_TOOL_TIMEOUT_S,
        package="kmod",
    )
