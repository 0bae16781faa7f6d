"""Each finding of a comparison, checked on the other side.

Each finding of the before side gets a status from its catalog check (``[<id>.compare]`` in
findings.toml: ``slices``, ``applied``, ``confirm``, ``falsifier``, ``evidence``): ``fixed``
(confirm met), ``falsified`` (the fix was applied, its falsifier met), else ``better`` /
``worse`` / ``persists`` by the ms per step of its own measured quantity — the catalog's slices,
the same measure on both sides whether or not the rule fires there (a slice another finding now
claims first does not make it better) — against the noise (the threshold x the before step p50);
a finding the rule no longer fires after is said to be so in ``decided_by``, whatever its status.
Findings only on the after side are ``new``. ``healthy`` is
a state, never a finding. An incomparable pair gets no status (None): nothing is judged.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracetriage.analyzers import conditions
from tracetriage.analyzers.compare_metrics import METRICS, figure_text
from tracetriage.analyzers.compare_side import Side, check_of, round4
from tracetriage.wording import ms_text

NOT_COMPARABLE = "not judged: the captures are not comparable"

FIGURE_UNITS = {name: unit for name, unit, _ in METRICS} | {"cause_ms": "ms/step", "claim_ms": "ms/step", "idle_pct": "%",
                                                            "pageable_copies_per_step": "copies/step"}
FIGURE_TEXT = {"cause_ms": "its slices, ms per step", "claim_ms": "what each analysis says it claims, ms per step",
               "step_p50_ms": "step p50", "step_p99_ms": "step p99",
               "launches_per_step": "kernel launches per step", "graph_launches_per_step": "graph launches per step",
               "syncs_per_step": "blocking syncs per step", "busy_pct": "GPU busy", "idle_ms": "GPU idle per step",
               "idle_pct": "GPU idle", "copy_ms": "copy-only time per step", "collective_ms": "exposed collective per step",
               "compute_ms": "compute per step", "tail_ms": "step p99 - p50",
               "pageable_copies_per_step": "pageable async copies per step"}
UNEXPLAINED_TEXT = "its slices no other finding claims, ms per step"


@dataclass(frozen=True, slots=True)
class Evidence:
    """One figure a finding's status rests on, before and after, with its line of text."""

    name: str
    before: float | None
    after: float | None
    unit: str
    text: str

    def to_contract(self) -> dict:
        return {"name": self.name, "before": self.before, "after": self.after, "unit": self.unit, "text": self.text}


@dataclass(frozen=True, slots=True)
class FindingRow:
    """A finding's status after the change, the rule that decided it, whether its fix was
    applied, its severity on each side, the ms per step of the time it is about, and the evidence."""

    id: str
    axis: str | None
    status: str | None
    decided_by: str
    applied: bool | None
    before_severity: str | None
    after_severity: str | None
    before_ms_per_step: float | None
    after_ms_per_step: float | None
    evidence: tuple[Evidence, ...]

    def to_contract(self) -> dict:
        return {"id": self.id, "axis": self.axis, "status": self.status, "decided_by": self.decided_by,
                "applied": self.applied, "before_severity": self.before_severity, "after_severity": self.after_severity,
                "before_ms_per_step": self.before_ms_per_step, "after_ms_per_step": self.after_ms_per_step,
                "evidence": [item.to_contract() for item in self.evidence]}


@dataclass(frozen=True, slots=True)
class FindingContext:
    """What every finding of one comparison is judged against: both sides with their figures,
    the step verdict (``status``, ``ratio``, ...), the noise in ms per step, whether the pair is
    comparable, and the threshold in % of the before step."""

    before: Side
    after: Side
    figures_before: dict
    figures_after: dict
    step: dict
    noise_ms: float | None
    judged: bool
    threshold_pct: float


def cause_words(check: dict) -> str:
    """The name of a finding's own measured quantity (``cause_ms``): its slices, or where its catalog check
    says ``unexplained``, the part of them no other finding claims (compare_side.Side.finding_ms)."""
    return UNEXPLAINED_TEXT if check.get("unexplained") else FIGURE_TEXT["cause_ms"]


def finding_rows(context: FindingContext) -> list[FindingRow]:
    """The before side's findings, each checked on after, then those reported after only."""
    rows = [_checked_finding(context, finding_id, finding) for finding_id, finding in context.before.findings.items()]
    rows.extend(_new_finding(context, finding_id, finding) for finding_id, finding in context.after.findings.items()
                if finding_id not in context.before.findings)
    return rows


def _checked_finding(context: FindingContext, finding_id: str, finding: dict) -> FindingRow:
    check = check_of(finding_id)
    after_findings = context.after.findings
    cause_before, cause_after = context.before.finding_ms(finding_id), context.after.finding_ms(finding_id)
    names = {
        "before": {**context.figures_before, "present": True, "cause_ms": cause_before,
                   "claim_ms": context.before.claim_ms(finding_id)},
        "after": {**context.figures_after, "present": finding_id in after_findings, "cause_ms": cause_after,
                  "claim_ms": context.after.claim_ms(finding_id) if finding_id in after_findings else None},
        "step": context.step, "noise_ms": context.noise_ms,
    }
    applied = conditions.holds(check.get("applied"), names)
    names["applied"] = applied
    outcome = {"confirm": conditions.holds(check.get("confirm"), names),
               "falsifier": conditions.holds(check.get("falsifier"), names),
               "delta": None if cause_before is None or cause_after is None else cause_after - cause_before,
               "reported_after": finding_id in after_findings}
    status, decided = _status(context, check, outcome)
    return FindingRow(finding_id, finding.get("axis"), status, decided, applied, finding.get("severity"),
                      after_findings[finding_id]["severity"] if finding_id in after_findings else None,
                      round4(cause_before), round4(cause_after), _evidence(context, check, names))


def _status(context: FindingContext, check: dict, outcome: dict) -> tuple[str | None, str]:
    """(status, the rule that decided it) of a finding of the before side from its check's
    ``outcome``: whether confirm and falsifier hold, the change ``delta`` of its ms per step,
    and whether it is still reported after."""
    noise_ms, delta = context.noise_ms, outcome["delta"]
    if not context.judged:
        return None, NOT_COMPARABLE
    if outcome["confirm"]:
        return "fixed", f"confirmed: {check.get('confirm_says') or 'it is no longer reported after the change'}"
    if outcome["falsifier"]:
        return "falsified", f"the fix was applied but its falsifier holds: {check.get('falsifier_says') or check['falsifier']}"
    # judged on its own measured quantity; whether the rule still fires after is said, never implied by the status
    fires = "" if outcome["reported_after"] else "; the rule no longer fires after the change"
    if delta is not None and noise_ms is not None and abs(delta) >= noise_ms:
        return ("better" if delta < 0 else "worse",
                (f"the time it is about moved {ms_text(delta, sign='+')} per step, beyond the threshold of "
                 f"{ms_text(noise_ms)} ({context.threshold_pct:g}% of the before step){fires}"))
    if delta is not None and noise_ms is not None:
        if not outcome["reported_after"]:
            return "persists", (f"the rule no longer fires after the change, but the time it is about moved less than "
                                f"the threshold of {ms_text(noise_ms)} per step: its cause is still there")
        return "persists", f"the time it is about moved less than the threshold of {ms_text(noise_ms)} per step"
    return "persists", "still reported after" if outcome["reported_after"] else \
        "the rule no longer fires after the change, and the time it is about has no per-step measure on both sides"


def _evidence(context: FindingContext, check: dict, names: dict) -> tuple[Evidence, ...]:
    """The figures the catalog check names (its slices' ms per step first) measured on either
    side, and the step ratio when the pair is judged."""
    evidence = []
    for key in ["cause_ms", "claim_ms", *check.get("evidence", [])]:
        before, after = names["before"].get(key), names["after"].get(key)
        if before is None and after is None:
            continue
        if key == "claim_ms" and all(claim is None or abs(claim - (names[side]["cause_ms"] or 0.0)) < 5e-4
                                     for side, claim in (("before", before), ("after", after))):
            continue  # the slices are what the analyses claim: one figure, said once
        unit = FIGURE_UNITS.get(key, "")
        label = cause_words(check) if key == "cause_ms" else FIGURE_TEXT.get(key, key.replace("_", " "))
        before, after = round4(before), round4(after)  # the text formats the values the contract holds
        evidence.append(Evidence(key, before, after, unit, f"{label}: {figure_text(before, unit)} -> {figure_text(after, unit)}"))
    step = context.step
    if step.get("ratio") is not None and context.judged:
        evidence.append(Evidence("step_ratio", None, step["ratio"], "ratio",
                                 f"step p50 after/before {step['ratio']:.3f} ({step['status']})"))
    return tuple(evidence)


def _new_finding(context: FindingContext, finding_id: str, finding: dict) -> FindingRow:
    """A finding reported after only: ``new`` (when judged), with its slices' ms per step on both sides."""
    cause_before, cause_after = round4(context.before.finding_ms(finding_id)), round4(context.after.finding_ms(finding_id))
    text = f"{cause_words(check_of(finding_id))}: {figure_text(cause_before, 'ms')} -> {figure_text(cause_after, 'ms')}"
    return FindingRow(finding_id, finding.get("axis"), "new" if context.judged else None,
                      "reported after only" if context.judged else NOT_COMPARABLE, None, None, finding.get("severity"),
                      cause_before, cause_after, (Evidence("cause_ms", cause_before, cause_after, "ms/step", text),))
