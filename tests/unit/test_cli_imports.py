"""Every ``hvbench`` command, ``--help`` included, imports the CLI first: that import
must not pull in the heavy libraries only some commands use (issue 25). Each probe runs
in a new interpreter, since this test process has imported most of them already."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: What importing the CLI must leave unimported: Dask (fleets), matplotlib and what it
#: brings (HTML plots), Optuna (tune), libvirt's bindings (libvirt platforms),
#: cryptography (fleet certificates), SQLAlchemy and psycopg (commands that open a
#: store), PyYAML (the cpu kind's report), qemu.qmp (booting a guest), and the optional
#: or already deferred ones.
DEFERRED = ("distributed", "dask", "jinja2", "tornado", "matplotlib", "PIL", "numpy",
            "optuna", "libvirt", "libvirt_qemu", "cryptography", "sqlalchemy", "psycopg",
            "yaml", "qemu", "scipy", "pyarrow", "asyncssh")

#: Imports the modules named in argv[1] (comma-separated) and prints, as JSON, each
#: package of argv[2:] that got imported with the hvbench modules on the stack at its
#: first import (innermost first; "" when it was imported before the probe began).
PROBE = r"""
import importlib, json, sys

watched = set(sys.argv[2:])
first = {name: [""] for name in watched if name in sys.modules}


class Watch:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in watched and top not in first:
            frame, chain = sys._getframe(1), []
            while frame is not None:
                module = frame.f_globals.get("__name__", "")
                if module.startswith("hvbench") and module not in chain:
                    chain.append(module)
                frame = frame.f_back
            first[top] = chain
        return None


sys.meta_path.insert(0, Watch())
for module in sys.argv[1].split(","):
    importlib.import_module(module)
print(json.dumps({name: first.get(name, []) for name in sorted(watched)
                  if name in sys.modules}))
"""


def imported(modules: tuple[str, ...], watched: tuple[str, ...]) -> dict[str, list[str]]:
    """Which of ``watched`` a new interpreter imports when it imports ``modules``, each
    with the hvbench modules that imported it (innermost first)."""
    done = subprocess.run([sys.executable, "-c", PROBE, ",".join(modules), *watched],
                          capture_output=True, text=True, timeout=120, check=True)
    found: dict[str, list[str]] = json.loads(done.stdout)
    return found


def culprits(found: dict[str, list[str]]) -> str:
    """One line per imported package: the hvbench module that imported it, then the
    chain of modules that imported that one."""
    return "; ".join(f"{name} imported by {' <- '.join(chain) or 'no hvbench module'}"
                     for name, chain in sorted(found.items()))


@pytest.mark.parametrize(("modules", "watched"), [
    # What every command imports before it parses its arguments.
    (("hvbench.cli.main",), DEFERRED),
    # What `hvbench run` adds (it cleans up fleet bundles and tells a tuning run apart)
    # and what a table or HTML report adds: no Dask, certificates or Optuna.
    (("hvbench.cli.main", "hvbench.run.runner", "hvbench.run.fleet_tls", "hvbench.run.tune",
      "hvbench.report.render", "hvbench.report.html"),
     ("distributed", "cryptography", "optuna", "matplotlib")),
])
def test_importing_the_cli_leaves_heavy_libraries_unimported(
        modules: tuple[str, ...], watched: tuple[str, ...]) -> None:
    found = imported(modules, watched)
    assert not found, f"importing {', '.join(modules)}: {culprits(found)}"


def test_the_probe_names_the_module_that_imported_a_library() -> None:
    # The check above is only as good as its probe: a module known to import Dask.
    found = imported(("hvbench.run.fleet",), ("distributed",))
    assert found["distributed"][0] == "hvbench.run.fleet"


def test_dask_finds_the_worker_class_by_its_cli_name() -> None:
    # Dask's dask_spec resolves WORKER_CLASS with import_term (import the module, then
    # getattr); the CLI module provides HostWorker on first use only.
    from distributed.utils import import_term

    from hvbench.run.fleet import WORKER_CLASS, HostWorker

    assert import_term(WORKER_CLASS) is HostWorker
    with pytest.raises(AttributeError, match="NoSuchWorker"):
        import_term("hvbench.cli.worker.NoSuchWorker")
