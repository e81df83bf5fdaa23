"""The verdicts of ``hvbench explain`` presented: JSON-ready data, the report's
Diagnosis table (terminal and HTML) and the long text of ``explain``. The verdicts
themselves are pure analysis (:mod:`hvbench.analysis.diagnosis`)."""

from __future__ import annotations

import re
import statistics
import textwrap
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from hvbench.analysis.diagnosis import Finding, Verdict, change_text

__all__ = [
    "DIAGNOSIS_NOTE",
    "DIAGNOSIS_TITLE",
    "CellBlock",
    "FixGroup",
    "diagnosis_groups",
    "diagnosis_lines",
    "explain_lines",
    "headline",
    "listed",
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
            "abstained": [{"rule": r, "missing": list(m)} for r, m in verdict.abstained],
            "not_applicable": [{"rule": r, "why": w} for r, w in verdict.not_applicable]}


DIAGNOSIS_TITLE = "Diagnosis: the bottleneck of every cell (hvbench explain)"
DIAGNOSIS_NOTE = ("Cells are grouped under the fix of their dominant cause; 'also' names "
                  "the contributing causes. docs/diagnosis.md lists every rule with its "
                  "evidence and thresholds.")


def shown(verdicts: Iterable[Verdict]) -> list[Verdict]:
    """The verdicts a report lists: guest cells compared with native or with a cause."""
    return [v for v in verdicts
            if not v.native and (v.dominant is not None or v.pct_of_native is not None)]


def fix_text(finding: Finding) -> str:
    """The fix: its configuration change as a study file writes it (when it has one),
    then how QEMU and libvirt spell it."""
    changes = change_text(finding.changes)
    return f"{changes} ({finding.fix})" if changes else finding.fix


def _cause_text(finding: Finding, tcg: bool) -> str:
    share = "" if finding.share_pct is None else f" ({finding.share_pct:.0f} % of the gap)"
    kvm = "" if not tcg else (" [carries to KVM]" if finding.carries_to_kvm
                              else " [TCG artefact]")
    return finding.rule + share + kvm


@dataclass(frozen=True)
class CellBlock:
    """One cell of the Diagnosis layout: its name and % of native, then labelled
    lines (``cause``, ``evidence``, ...), each a label and its text."""

    cell: str
    pct: str
    lines: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class FixGroup:
    """The cells whose dominant cause has the same fix, under that fix printed once
    (``fix`` None: cells without a fix, e.g. unexplained ones)."""

    fix: str | None
    cells: tuple[CellBlock, ...]


def _pct(v: Verdict) -> str:
    return "" if v.pct_of_native is None else f"{v.pct_of_native:.1f} % of native"


def listed(verdicts: Iterable[Verdict], verbose: bool = False) -> list[Verdict]:
    """The verdicts the Diagnosis lays out: guest cells compared with native or with a
    cause, boot phases left out; with ``verbose`` every verdict (native and boot cells,
    and each block's abstentions)."""
    verdicts = list(verdicts)
    if verbose:
        return verdicts
    return [v for v in shown(verdicts) if v.phase != "boot"]


def _finding_lines(label: str, finding: Finding, tcg: bool, long: bool
                   ) -> list[tuple[str, str]]:
    # A contributing cause's own lines are indented under its "also".
    pad = "" if label == "cause" else "  "
    lines = [(label, f"{_cause_text(finding, tcg)}: {finding.title}")]
    lines += [(f"{pad}evidence", e) for e in finding.evidence]
    if long and label != "cause":
        lines.append((f"{pad}fix", fix_text(finding)))
    if finding.effect and (long or label == "cause"):
        lines.append((f"{pad}measured", finding.effect))
    return lines


def _block(v: Verdict, verbose: bool, long: bool) -> CellBlock:
    lines: list[tuple[str, str]] = []
    if v.native:
        lines.append(("outcome", OUTCOME_TEXT["baseline"]))
    elif v.outcome != "cause" and not (v.outcome == "near-native" and v.dominant):
        lines.append(("outcome", OUTCOME_TEXT.get(v.outcome, v.outcome)))
    lines += [("evidence", e) for e in v.validity]
    lines += [("furthest from native", e) for e in v.unusual]
    if v.outcome == "unexplained" and not v.unusual:
        lines.append(("furthest from native", NOTHING_UNUSUAL))
    if v.dominant is not None:
        lines += _finding_lines("cause", v.dominant, v.tcg, long)
    for finding in v.contributing:
        if long:
            lines += _finding_lines("also", finding, v.tcg, long)
        else:
            lines.append(("also", _cause_text(finding, v.tcg)))
    if v.abstained and verbose:
        lines.append(("abstained", ", ".join(
            f"{rule} (missing {', '.join(missing)})" for rule, missing in v.abstained)))
    return CellBlock(v.cell, _pct(v), tuple(lines))


def diagnosis_groups(verdicts: Iterable[Verdict], *, verbose: bool = False,
                     long: bool = False) -> list[FixGroup]:
    """The Diagnosis layout: the :func:`listed` cells in blocks, grouped by the fix of
    their dominant cause (in order of first appearance; cells without one last).
    ``long`` (``hvbench explain``): every contributing cause with its evidence and
    fix; ``verbose``: native and boot cells too, and the abstentions."""
    groups: dict[str | None, list[CellBlock]] = {}
    for v in listed(verdicts, verbose):
        fix = None if v.dominant is None or v.native else fix_text(v.dominant)
        groups.setdefault(fix, []).append(_block(v, verbose, long))
    ordered = [k for k in groups if k is not None] + ([None] if None in groups else [])
    return [FixGroup(k, tuple(groups[k])) for k in ordered]


#: A number and its unit, joined so that wrapping never splits them.
_NUMBER_UNIT = re.compile(
    r"(\d) ((?:%|[kKMG]i?B/s|[kKMG]i?B|[kMG]bit/s|ms|us|µs|s|x|sectors)(?![\w/]))")
NBSP = "\u00a0"


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    """``text`` wrapped at ``width`` after the prefix ``first`` (``rest`` on the
    following lines): words are never broken, nor a number split from its unit."""
    joined = _NUMBER_UNIT.sub(lambda m: f"{m.group(1)}{NBSP}{m.group(2)}", text)
    lines = textwrap.wrap(joined, width=max(width, len(first) + 20), initial_indent=first,
                          subsequent_indent=rest, break_long_words=False,
                          break_on_hyphens=False)
    return [line.replace(NBSP, " ") for line in lines] or [first.rstrip()]


def diagnosis_lines(groups: Sequence[FixGroup], width: int) -> list[str]:
    """The Diagnosis as left-aligned text wrapped at ``width`` columns: per group its
    fix, then each cell's block indented under it."""
    out: list[str] = []
    for group in groups:
        head = "fix: " if group.fix is not None else ""
        out += _wrap(group.fix or "no fix: no cause named", width, head, " " * len(head))
        for block in group.cells:
            out += _wrap(f"{block.cell}{'  ' if block.pct else ''}{block.pct}", width,
                         "  ", "    ")
            for label, text in block.lines:
                first = f"    {label}: "
                out += _wrap(text, width, first, " " * len(first))
        out.append("")
    return out[:-1] if out else out


def _about(pct: float) -> str:
    """A percentage as a headline says it: two significant digits, never exponents."""
    return f"{pct:.0f}" if pct >= 10 else f"{pct:.2g}"


def headline(verdicts: Iterable[Verdict]) -> str | None:
    """One sentence that sums the run up: the median % of native of the guest cells
    compared with native (boot phases left out) with their range, and the dominant
    cause named most often, or "unexplained" when no cell has one; None when no guest
    cell was compared with native."""
    guests = [v for v in verdicts if not v.native and v.phase != "boot"
              and v.pct_of_native is not None]
    pcts = sorted(v.pct_of_native for v in guests if v.pct_of_native is not None)
    if not pcts:
        return None
    middle = statistics.median(pcts)
    text = (f"guests reach about {_about(middle)} % of native (median of {len(pcts)} "
            f"cells, {_about(pcts[0])}-{_about(pcts[-1])} %); ")
    causes = Counter(v.dominant.rule for v in guests if v.dominant is not None)
    if not causes:
        return text + "the dominant cause is unexplained (explain names none)"
    rule, count = causes.most_common(1)[0]
    return text + f"the dominant cause is {rule} ({count} of {len(pcts)} cells)"


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
