"""The verdicts of ``hvbench explain`` presented: JSON-ready data, the report's
Diagnosis table (terminal and HTML) and the long text of ``explain``. The verdicts
themselves are pure analysis (:mod:`hvbench.analysis.diagnosis`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hvbench.analysis.diagnosis import Finding, Verdict, change_text
from hvbench.analysis.summaries import TextTable

__all__ = [
    "DIAGNOSIS_HEADERS",
    "DIAGNOSIS_TITLE",
    "diagnosis_table",
    "explain_lines",
    "shown",
    "verdict_json",
]

#: How each outcome reads in the table and the long text.
OUTCOME_TEXT = {
    "cause": "cause named",
    "unexplained": "unexplained: below native and no rule fired",
    "not-a-device-measurement": "not a device measurement: the host device is not what "
                                "this number measured",
    "near-native": "near native: no gap to explain",
    "baseline": "baseline (native): not diagnosed",
}


#: An unexplained cell whose derived metrics all stay near native's.
NOTHING_UNUSUAL = "no derived metric 1.5x from native's or more"


def _finding_json(finding: Finding) -> dict[str, Any]:
    return {"rule": finding.rule, "title": finding.title, "score": finding.score,
            "evidence": list(finding.evidence), "share_of_gap_pct": finding.share_pct,
            "fix": fix_text(finding), "fix_detail": finding.fix,
            "changes": [{"key": k, "value": v} for k, v in finding.changes],
            "measured_effect": finding.effect, "carries_to_kvm": finding.carries_to_kvm}


def verdict_json(verdict: Verdict) -> dict[str, Any]:
    """A verdict as JSON-ready data (the report's ``diagnosis`` entries)."""
    return {"cell": verdict.cell, "workload": verdict.workload, "phase": verdict.phase,
            "platform": verdict.platform, "pct_of_native": verdict.pct_of_native,
            "native": verdict.native, "tcg": verdict.tcg, "why": verdict.why(),
            "outcome": verdict.outcome, "validity": list(verdict.validity),
            "unusual": list(verdict.unusual),
            "dominant": None if verdict.dominant is None else _finding_json(verdict.dominant),
            "contributing": [_finding_json(f) for f in verdict.contributing],
            "abstained": [{"rule": r, "missing": list(m)} for r, m in verdict.abstained]}


DIAGNOSIS_TITLE = "Diagnosis: the bottleneck of every cell (hvbench explain)"
DIAGNOSIS_HEADERS = ("cell", "% of native", "why", "evidence", "fix")


def shown(verdicts: Iterable[Verdict]) -> list[Verdict]:
    """The verdicts a report lists: guest cells compared with native or with a cause."""
    return [v for v in verdicts
            if not v.native and (v.dominant is not None or v.pct_of_native is not None)]


def fix_text(finding: Finding) -> str:
    """The fix: its configuration change as a study file writes it (when it has one),
    then how QEMU and libvirt spell it."""
    changes = change_text(finding.changes)
    return f"{changes} ({finding.fix})" if changes else finding.fix


def _fix_cell(finding: Finding) -> str:
    effect = f" [measured: {finding.effect}]" if finding.effect else ""
    return fix_text(finding) + effect


def _cause_text(finding: Finding, tcg: bool) -> str:
    share = "" if finding.share_pct is None else f" ({finding.share_pct:.0f} % of the gap)"
    kvm = "" if not tcg else (" [carries to KVM]" if finding.carries_to_kvm
                              else " [TCG artefact]")
    return finding.rule + share + kvm


def _row(v: Verdict) -> tuple[str, ...]:
    pct = "-" if v.pct_of_native is None else f"{v.pct_of_native:.1f} %"
    if v.outcome == "not-a-device-measurement":
        fix = "-" if v.dominant is None else _fix_cell(v.dominant)
        return (v.cell, pct, "not a device measurement", "; ".join(v.validity), fix)
    if v.outcome == "unexplained":
        return (v.cell, pct, "unexplained", "furthest from native: "
                + ("; ".join(v.unusual) or NOTHING_UNUSUAL), "-")
    if v.dominant is None:
        return (v.cell, pct, "-", "near native: no rule fired", "-")
    why = _cause_text(v.dominant, v.tcg)
    if v.contributing:
        why += "; also " + ", ".join(_cause_text(f, v.tcg) for f in v.contributing)
    return (v.cell, pct, why, "; ".join(v.dominant.evidence), _fix_cell(v.dominant))


def diagnosis_table(verdicts: Iterable[Verdict]) -> TextTable:
    """One row per diagnosed cell: % of native, the outcome or the dominant cause (and
    the contributing ones), its evidence and its fix."""
    return TextTable(DIAGNOSIS_TITLE, DIAGNOSIS_HEADERS,
                     tuple(_row(v) for v in shown(verdicts)), left=1,
                     note="why: the dominant cause first, or the outcome when no cause "
                          "explains the cell (unexplained, not a device measurement); "
                          "docs/diagnosis.md lists every rule with its evidence and "
                          "thresholds.")


def explain_lines(verdict: Verdict) -> list[str]:
    """The long form of one verdict (``hvbench explain``): the outcome, every cause
    with its evidence, share of the gap, fix and measured effect, then the
    abstentions."""
    pct = "" if verdict.pct_of_native is None else f" ({verdict.pct_of_native:.1f} % of native)"
    lines = [f"{verdict.cell}{pct}"]
    if verdict.native:
        return [*lines, f"  {OUTCOME_TEXT['baseline']}"]
    if verdict.outcome != "cause":
        lines.append(f"  outcome: {OUTCOME_TEXT.get(verdict.outcome, verdict.outcome)}")
    lines += [f"    evidence: {e}" for e in verdict.validity]
    lines += [f"    furthest from native: {e}" for e in verdict.unusual]
    if verdict.outcome == "unexplained" and not verdict.unusual:
        lines.append(f"    furthest from native: {NOTHING_UNUSUAL}")
    for label, finding in ([("dominant", verdict.dominant)] if verdict.dominant else []) + [
            ("contributing", f) for f in verdict.contributing]:
        lines.append(f"  {label}: {_cause_text(finding, verdict.tcg)}: {finding.title}")
        lines += [f"    evidence: {e}" for e in finding.evidence]
        lines.append(f"    fix: {fix_text(finding)}")
        if finding.effect:
            lines.append(f"    measured: {finding.effect}")
    if verdict.abstained:
        lines.append("  abstained (evidence missing): " + ", ".join(
            f"{rule} ({', '.join(missing)})" for rule, missing in verdict.abstained))
    return lines
