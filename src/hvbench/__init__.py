"""hvbench: measure what virtualization costs I/O, explain why, and find the fix."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hvbench")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
