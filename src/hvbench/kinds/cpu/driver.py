"""stress-ng's CPU stressor on a platform: its argv, and its YAML report read into the
cpu kind's metrics (``--yaml``; never the human-readable table on stderr)."""

from __future__ import annotations

from typing import Any

from hvbench.errors import CommandError, HvbenchError
from hvbench.kinds.cpu.spec import PHASE, CpuWorkloadSpec
from hvbench.platforms.base import Platform
from hvbench.workloads.outcome import PhaseOutcome

#: The raw output kind stored with each phase: stress-ng's YAML report.
RAW_KIND = "stress-ng-yaml"
#: Seconds stress-ng takes beyond ``--timeout`` to start and reap its workers.
SLACK_S = 30.0


#: Runs its arguments (stress-ng) with ``--yaml`` into a temporary file, its log on
#: stderr, then prints the file: stdout holds the YAML report alone. (``--yaml
#: /dev/stdout`` loses the report through a guest agent's captured stdout.) The file is
#: removed when the script ends; it lives in the working directory (natively the
#: platform's scratch directory, which the platform removes at its stop) because a
#: timeout or an interrupt kills the whole process group, traps included.
_WITH_REPORT = ('f=$(mktemp ./stress-ng-report.XXXXXX) || exit 1; trap \'rm -f "$f"\' EXIT; '
                'trap "exit 143" TERM INT; "$@" --yaml "$f" >&2; rc=$?; cat "$f"; exit $rc')


def stress_argv(spec: CpuWorkloadSpec) -> list[str]:
    """The stress-ng command: the CPU stressor with ``spec``'s workers, duration and
    method, with its metrics (their report is added by :func:`report_argv`)."""
    argv = ["stress-ng", "--cpu", str(spec.workers), "--timeout", f"{spec.duration_s}s",
            "--metrics"]
    if spec.method is not None:
        argv += ["--cpu-method", spec.method]
    return argv


def report_argv(spec: CpuWorkloadSpec) -> list[str]:
    """:func:`stress_argv` run so that stdout carries its YAML report and nothing else
    (``sh -c`` with a fixed script; the stress-ng argv are its positional arguments)."""
    return ["sh", "-c", _WITH_REPORT, "sh", *stress_argv(spec)]


def parse_report(text: str) -> dict[str, tuple[float, str]]:
    """The metrics of stress-ng's YAML report (its ``metrics`` entry for the ``cpu``
    stressor). Raises :class:`HvbenchError` naming what is missing when the report is
    not YAML or holds no such entry."""
    # Imported here, where a report is read: every command imports this module when the
    # kinds register, and PyYAML is the cpu kind's alone.
    import yaml  # noqa: PLC0415 - deferred

    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise HvbenchError(f"stress-ng: its report is not YAML: {exc}") from exc
    entry = _cpu_entry(document)
    try:
        return {
            "bogo_ops_s": (float(entry["bogo-ops-per-second-real-time"]), "ops/s"),
            "bogo_ops_s_cpu": (float(entry["bogo-ops-per-second-usr-sys-time"]), "ops/s"),
            "bogo_ops": (float(entry["bogo-ops"]), "count"),
            "stress_cpu_pct": (float(entry["cpu-usage-per-instance"]), "%"),
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise HvbenchError(f"stress-ng: its report's cpu metrics lack {exc}") from exc


def _cpu_entry(document: Any) -> dict[str, Any]:
    metrics = document.get("metrics") if isinstance(document, dict) else None
    for entry in metrics if isinstance(metrics, list) else []:
        if isinstance(entry, dict) and entry.get("stressor") == "cpu":
            return entry
    raise HvbenchError("stress-ng: its report has no metrics for the cpu stressor "
                       "(was it run with --metrics?)")


#: stress-ng's log lines that say nothing went wrong.
_LOG_PREFIXES = ("stress-ng: info:", "stress-ng: metrc:", "stress-ng: debug:")


def tool_error(stderr: str) -> str:
    """stress-ng's own words on stderr about why it failed: every line but its info,
    metrics and debug log (an option's refusal has no prefix at all)."""
    return "\n".join(line for line in stderr.splitlines()
                     if line.strip() and not line.startswith(_LOG_PREFIXES))


def run_cpu(platform: Platform, spec: CpuWorkloadSpec) -> PhaseOutcome:
    """One stress-ng run on ``platform``, bounded by ``spec.timeout_s``. Raises
    :class:`CommandError` with stress-ng's own words when it fails or its report
    cannot be read (a guest's failure raises what its agent raises)."""
    argv = report_argv(spec)
    done = platform.exec(argv, timeout=min(spec.timeout_s, spec.duration_s + SLACK_S))
    stderr = done.stderr.decode(errors="replace")
    if not done.ok:
        raise CommandError(argv, done.exit_code, stderr, f"stress-ng on {platform.name}",
                           tool_error=tool_error(stderr))
    text = done.text()
    try:
        metrics = parse_report(text)
    except HvbenchError as exc:
        raise CommandError(argv, done.exit_code, f"{exc}\n{stderr}",
                           f"stress-ng on {platform.name}") from exc
    return PhaseOutcome(phase=PHASE, metrics=metrics, raw=text, raw_kind=RAW_KIND)
