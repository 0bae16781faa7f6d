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
from tracetriage.analyzers.compare_side import CompareCheck, Side, check_of, round4
from tracetriage.analyzers.compare_steps import StepVerdict
from tracetriage.records.findings import Finding
from tracetriage.wording import ms_text

NOT_COMPARABLE = "not judged: the captures are not comparable"
CAUSE_KEY, CLAIM_KEY = "cause_ms", "claim_ms"  # a finding's own figures, beside the side's figures

FIGURE_UNITS = {name: unit for name, unit, _ in METRICS} | {"cause_ms": "ms/step", "claim_ms": "ms/step", "idle_pct": "%",
                                                            "pageable_copies_per_step": "copies/step"}
CAUSE_TEXT = "its slices, ms per step"
FIGURE_TEXT = {"cause_ms": CAUSE_TEXT, "claim_ms": "what each analysis says it claims, ms per step",
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
    step: StepVerdict
    noise_ms: float | None
    judged: bool
    threshold_pct: float


def cause_words(check: CompareCheck) -> str:
    """The name of a finding's own measured quantity (``cause_ms``): its slices, or where its catalog check
    says ``unexplained``, the part of them no other finding claims (compare_side.Side.finding_ms)."""
    return UNEXPLAINED_TEXT if check.unexplained else CAUSE_TEXT


def finding_rows(context: FindingContext) -> list[FindingRow]:
    """The before side's findings, each checked on after, then those reported after only."""
    rows = [_checked_finding(context, finding_id, finding) for finding_id, finding in context.before.findings.items()]
    rows.extend(_new_finding(context, finding_id, finding) for finding_id, finding in context.after.findings.items()
                if finding_id not in context.before.findings)
    return rows


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a finding's compare check found: whether its ``confirm`` and ``falsifier`` conditions hold,
    the change ``delta`` of its ms per step (after - before; None unless measured on both sides), and
    whether the rule still fires after."""

    confirm: bool | None
    falsifier: bool | None
    delta: float | None
    reported_after: bool


def _checked_finding(context: FindingContext, finding_id: str, finding: Finding) -> FindingRow:
    check = check_of(finding_id)
    after_finding = context.after.findings.get(finding_id)
    cause_before, cause_after = context.before.finding_ms(finding_id), context.after.finding_ms(finding_id)
    before_names = {**context.figures_before, "present": True, "cause_ms": cause_before,
                    "claim_ms": context.before.claim_ms(finding_id)}
    after_names = {**context.figures_after, "present": after_finding is not None, "cause_ms": cause_after,
                   "claim_ms": context.after.claim_ms(finding_id) if after_finding is not None else None}
    names = {"before": before_names, "after": after_names, "step": context.step, "noise_ms": context.noise_ms}
    applied = conditions.holds(check.applied, names)
    names["applied"] = applied
    outcome = Outcome(conditions.holds(check.confirm, names), conditions.holds(check.falsifier, names),
                      None if cause_before is None or cause_after is None else cause_after - cause_before,
                      after_finding is not None)
    status, decided = _status(context, check, outcome)
    return FindingRow(finding_id, finding.axis, status, decided, applied, finding.severity,
                      after_finding.severity if after_finding is not None else None,
                      round4(cause_before), round4(cause_after), _evidence(context, check, before_names, after_names))


def _status(context: FindingContext, check: CompareCheck, outcome: Outcome) -> tuple[str | None, str]:
    """(status, the rule that decided it) of a finding of the before side from its check's
    ``outcome``: whether confirm and falsifier hold, the change ``delta`` of its ms per step,
    and whether it is still reported after."""
    noise_ms, delta = context.noise_ms, outcome.delta
    if not context.judged:
        return None, NOT_COMPARABLE
    if outcome.confirm:
        return "fixed", f"confirmed: {check.confirm_says or 'it is no longer reported after the change'}"
    if outcome.falsifier:
        return "falsified", f"the fix was applied but its falsifier holds: {check.falsifier_says or check.falsifier}"
    # judged on its own measured quantity; whether the rule still fires after is said, never implied by the status
    fires = "" if outcome.reported_after else "; the rule no longer fires after the change"
    if delta is not None and noise_ms is not None and abs(delta) >= noise_ms:
        return ("better" if delta < 0 else "worse",
                (f"the time it is about moved {ms_text(delta, sign='+')} per step, beyond the threshold of "
                 f"{ms_text(noise_ms)} ({context.threshold_pct:g}% of the before step){fires}"))
    if delta is not None and noise_ms is not None:
        if not outcome.reported_after:
            return "persists", (f"the rule no longer fires after the change, but the time it is about moved less than "
                                f"the threshold of {ms_text(noise_ms)} per step: its cause is still there")
        return "persists", f"the time it is about moved less than the threshold of {ms_text(noise_ms)} per step"
    return "persists", "still reported after" if outcome.reported_after else \
        "the rule no longer fires after the change, and the time it is about has no per-step measure on both sides"


def _evidence(context: FindingContext, check: CompareCheck, before_names: dict, after_names: dict) -> tuple[Evidence, ...]:
    """The figures the catalog check names (its slices' ms per step first) measured on either
    side (``*_names``: each side's figures by the names the conditions read), and the step ratio
    when the pair is judged."""
    evidence = []
    causes = before_names.get(CAUSE_KEY), after_names.get(CAUSE_KEY)
    for key in [CAUSE_KEY, CLAIM_KEY, *check.evidence]:
        before, after = before_names.get(key), after_names.get(key)
        if before is None and after is None:
            continue
        if key == CLAIM_KEY and all(claim is None or abs(claim - (cause or 0.0)) < 5e-4
                                    for claim, cause in zip((before, after), causes)):
            continue  # the slices are what the analyses claim: one figure, said once
        unit = FIGURE_UNITS.get(key, "")
        label = cause_words(check) if key == CAUSE_KEY else FIGURE_TEXT.get(key, key.replace("_", " "))
        before, after = round4(before), round4(after)  # the text formats the values the contract holds
        evidence.append(Evidence(key, before, after, unit, f"{label}: {figure_text(before, unit)} -> {figure_text(after, unit)}"))
    step = context.step
    if step.ratio is not None and context.judged:
        evidence.append(Evidence("step_ratio", None, step.ratio, "ratio",
                                 f"step p50 after/before {step.ratio:.3f} ({step.status})"))
    return tuple(evidence)


def _new_finding(context: FindingContext, finding_id: str, finding: Finding) -> FindingRow:
    """A finding reported after only: ``new`` (when judged), with its slices' ms per step on both sides."""
    cause_before, cause_after = round4(context.before.finding_ms(finding_id)), round4(context.after.finding_ms(finding_id))
    text = f"{cause_words(check_of(finding_id))}: {figure_text(cause_before, 'ms')} -> {figure_text(cause_after, 'ms')}"
    return FindingRow(finding_id, finding.axis, "new" if context.judged else None,
                      "reported after only" if context.judged else NOT_COMPARABLE, None, None, finding.severity,
                      cause_before, cause_after, (Evidence("cause_ms", cause_before, cause_after, "ms/step", text),))
