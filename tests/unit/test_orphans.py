"""What ``hvbench cleanup`` kills of a run that died: a guest or daemon whose socket lies
in a dead run's directory, and nothing whose socket is elsewhere (real processes under
QEMU's name, no QEMU)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from hvbench.platforms.socket_daemon import kill_orphaned_daemons


def _posing_as_qemu(socket_dir: Path) -> subprocess.Popen[bytes]:
    """A process whose argv says ``qemu-system-x86_64 ... -qmp unix:SOCKET,server=on``
    (a Python sleep under that name): how a guest that outlived its hvbench looks."""
    script = ('exec -a qemu-system-x86_64 "$0" -c "import time; time.sleep(30)" '
              '-qmp "unix:$1/qmp.sock,server=on,wait=off"')
    return subprocess.Popen(["bash", "-c", script, sys.executable, str(socket_dir)])


def test_cleanup_kills_a_guest_whose_socket_is_in_a_dead_runs_dir(tmp_path: Path) -> None:
    dead, other = tmp_path / "hvb-x.hvb999999", tmp_path / "operator"
    dead.mkdir()
    other.mkdir()
    orphan, operators = _posing_as_qemu(dead), _posing_as_qemu(other)
    try:
        deadline = time.monotonic() + 5
        # Until both have exec'd: bash's own command line names qemu-system too (in its
        # script), so wait for argv[0] itself.
        while time.monotonic() < deadline and not all(
                Path(f"/proc/{p.pid}/cmdline").read_bytes().split(b"\0")[0]
                == b"qemu-system-x86_64" for p in (orphan, operators)):
            time.sleep(0.02)
        killed = kill_orphaned_daemons([dead])
        assert killed == [f"guest {orphan.pid} ({dead}/qmp.sock)"]
        assert orphan.wait(timeout=5) == -signal.SIGKILL
        assert operators.poll() is None, "a VM whose socket is not hvbench's was touched"
    finally:
        for proc in (orphan, operators):
            proc.kill()
            proc.wait()
