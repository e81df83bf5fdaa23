"""The exception tree of hvbench.

Every error hvbench raises on purpose derives from :class:`HvbenchError`. Only the CLI
turns them into exit codes (see :data:`EXIT_CODES` use in ``hvbench.cli``)::

    HvbenchError
    ├── SpecError            bad user input: a study, a VmSpec option, a CLI value (exit 2)
    ├── HostError            this host cannot do what was asked
    │   ├── RootRequiredError     the operation needs root; names the operation
    │   └── ToolMissingError      an external program is not installed
    ├── CommandError         an external command failed: argv, exit code, output tail
    ├── ImageError           the guest image could not be built or is incomplete
    ├── GuestError           a guest misbehaved: QEMU argv, exit status, console tail
    │   ├── GuestBootError        QEMU exited or the agent never answered while booting
    │   ├── GuestTimeoutError     a command in the guest outlived its timeout
    │   └── AgentError            the guest agent answered with an error or garbage
    └── InterruptedRun       SIGINT/SIGTERM arrived: the run stops (exit 130/143)
"""

from __future__ import annotations

from collections.abc import Sequence


class HvbenchError(Exception):
    """Base of every error hvbench raises on purpose."""

    exit_code = 1


class SpecError(HvbenchError):
    """Invalid user input. The message names where (file/option), the field and what was
    expected."""

    exit_code = 2


class HostError(HvbenchError):
    """The host lacks a capability the operation needs."""


class RootRequiredError(HostError):
    """The operation needs root privileges."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what} needs root (run hvbench as root, e.g. with sudo)")
        self.what = what


class ToolMissingError(HostError):
    """An external program is not on PATH."""

    def __init__(self, tool: str, package: str | None = None) -> None:
        hint = f" (Debian package: {package})" if package else ""
        super().__init__(f"required program {tool!r} was not found on PATH{hint}")
        self.tool = tool


def tail(text: str, lines: int = 30) -> str:
    """Return the last ``lines`` lines of ``text`` (for error messages)."""
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def stderr_tail(text: str, lines: int = 5) -> str:
    """The last ``lines`` non-blank lines of a tool's stderr: where tools put the reason
    they failed."""
    kept = [line.rstrip() for line in text.splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


class CommandError(HvbenchError):
    """An external command failed. Carries its argv, exit code, output tail and, when the
    caller could extract it, the tool's own error message (``tool_error``: its error
    lines on stderr, or the error field of its JSON), which leads the message."""

    def __init__(
        self, argv: Sequence[str], returncode: int | None, output: str, what: str = "",
        *, tool_error: str = "",
    ) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.output = output
        self.tool_error = tool_error.strip()
        status = "timed out" if returncode is None else f"exited with {returncode}"
        head = f"{what}: " if what else ""
        command = f"command {' '.join(self.argv)!r} {status}"
        # The tool's own reason first: it is what the user needs to read.
        msg = f"{head}{self.tool_error}\n({command})" if self.tool_error else head + command
        if output.strip():
            msg += "\n--- output (tail) ---\n" + tail(output)
        super().__init__(msg)


class ImageError(HvbenchError):
    """The guest image could not be built, or a cached image is incomplete."""


class GuestError(HvbenchError):
    """A guest failed. Carries the QEMU argv, its exit status and the console tail."""

    def __init__(
        self,
        message: str,
        *,
        argv: Sequence[str] = (),
        exit_status: int | None = None,
        console_tail: str = "",
    ) -> None:
        self.argv = list(argv)
        self.exit_status = exit_status
        self.console_tail = console_tail
        parts = [message]
        if self.argv:
            parts.append("QEMU argv: " + " ".join(self.argv))
        parts.append(
            "QEMU exit status: "
            + ("still running" if exit_status is None else str(exit_status))
        )
        if console_tail:
            parts.append("--- serial console (tail) ---\n" + console_tail)
        super().__init__("\n".join(parts))


class GuestBootError(GuestError):
    """The guest did not come up: QEMU exited early or its agent never answered."""


class GuestTimeoutError(GuestError):
    """A command in the guest did not finish within its timeout."""


class AgentError(GuestError):
    """The guest agent returned an error or a malformed reply."""


class InterruptedRun(HvbenchError):
    """SIGINT or SIGTERM arrived. Raised where the signal found the main thread; code
    that catches :class:`HvbenchError` to record a failure and go on must let it
    propagate (``hvbench.host.interrupt.check``). The CLI then stops every guest, lab
    and process tree and exits with 128 + ``signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by signal {signum}")
        self.signum = signum
        self.exit_code = 128 + signum
