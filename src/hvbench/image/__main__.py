"""``python -m hvbench.image [--force]``: build the guest image and print its manifest."""

from __future__ import annotations

import sys

from hvbench.errors import HvbenchError
from hvbench.image.builder import build_image


def _log(message: str) -> None:
    print(f"hvbench image: {message}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    """Build (unless cached) and print ``manifest.json``; return the exit status."""
    try:
        image = build_image(force="--force" in argv, log=_log)
    except HvbenchError as exc:
        _log(f"error: {exc}")
        return exc.exit_code
    print((image.directory / "manifest.json").read_text(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
