"""The seed papers' findings (``findings.toml``, shipped with the package) loaded and
evaluated on a report's run: the Findings table of ``hvbench report --findings``, the
HTML report's Findings section and the ``findings`` key of ``--format json``."""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Any

from hvbench.analysis.findings import (
    Finding,
    FindingResult,
    FindingsError,
    evaluate,
    parse_findings,
)
from hvbench.analysis.preconditions import HostFacts
from hvbench.report.model import RunReport, link_rates

__all__ = ["FINDINGS_FILE", "SEED_STUDY_PREFIX", "host_facts", "is_seed_study", "load_findings",
           "parse_findings_text", "run_findings"]

#: The data file, inside the ``hvbench.report`` package.
FINDINGS_FILE = "findings.toml"
#: The studies of ``examples/seeds/`` are named ``seed-000-storage``, ``seed-003-web``...:
#: their JSON report carries the findings without being asked.
SEED_STUDY_PREFIX = "seed-"


def parse_findings_text(text: str, path: str) -> list[Finding]:
    """The findings of a findings file's text.

    Raises:
        FindingsError: the text is not TOML, or a finding is wrong (one line naming
            ``path``, the finding and the field).
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FindingsError(f"{path}: not valid TOML: {exc}") from None
    return parse_findings(data, path)


def load_findings() -> list[Finding]:
    """The shipped findings.

    Raises:
        FindingsError: the shipped file is wrong (a unit test keeps it right).
    """
    source = resources.files("hvbench.report").joinpath(FINDINGS_FILE)
    return parse_findings_text(source.read_text(encoding="utf-8"),
                               f"src/hvbench/report/{FINDINGS_FILE}")


def is_seed_study(report: RunReport) -> bool:
    """True when the run's study is one of ``examples/seeds/``."""
    return report.run.study_name.startswith(SEED_STUDY_PREFIX)


def host_facts(report: RunReport) -> HostFacts:
    """What the run stored of its host (cores, memory) and lab (shaped links)."""
    env = report.run.env
    cpus, memory = env.get("cpus"), env.get("memory_bytes")
    return HostFacts(cpus=cpus if isinstance(cpus, int) else None,
                     memory_bytes=memory if isinstance(memory, int) else None,
                     lab_rates=link_rates(report.run.study_text))


def run_findings(report: RunReport, findings: list[Finding] | None = None
                 ) -> list[FindingResult]:
    """Every finding evaluated on the report's run (measured or not), with the
    host's stored noise floors (the report's ``noise_floors``) as the margin."""
    chosen = load_findings() if findings is None else findings
    accelerator: Any = report.run.env.get("accelerator")
    return evaluate(chosen, report.cells, report.rows,
                    accelerator=accelerator if isinstance(accelerator, str) else None,
                    host=host_facts(report), floors=report.noise_floors)
