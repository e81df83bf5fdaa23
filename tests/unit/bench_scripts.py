"""Load a script of bench/ as a module, for unit tests of its pure parts."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"


def load_bench(name: str) -> ModuleType:
    """bench/NAME.py as module NAME. bench/ goes on sys.path (scripts import their
    siblings, e.g. machine_lock) and the module into sys.modules (a dataclass looks its
    module up there while it is defined)."""
    if str(BENCH_DIR) not in sys.path:
        sys.path.insert(0, str(BENCH_DIR))
    spec = importlib.util.spec_from_file_location(name, BENCH_DIR / f"{name}.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"no bench script {BENCH_DIR / name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
