"""Each finding of a comparison, checked on the other side.

Each finding of the before side gets a status from its catalog check (``[<id>.compare]`` in
findings.toml: ``slices``, ``applied``, ``confirm``, ``falsifier``, ``evidence``): ``fixed``
(confirm met), ``falsified`` (the fix was applied, its falsifier met), else ``better`` /
``worse`` / ``persists`` by the ms per step of its own measured quantity — the catalog's slices,
the same measure on both sides whether or not the rule fires there (a slice another finding now
claims first does not make it better) — against the noise (the threshold x the before step p50).
A pair without steps measures the same slices in ns per GPU op, against the threshold x the before
window per GPU op (not where one side only is a graph-level capture: a GPU op is a whole replay
there). A finding the rule no longer fires after never reads ``persists`` while its own quantity says
otherwise: ``fixed`` when that quantity fell beyond the noise, ``worse`` when it grew;
``persists`` only when it held within the noise (the cause is still there, the rule's firing aside)
or when nothing of its own is measured on both sides and its catalog confirm fails ("not shown fixed"),
and ``decided_by`` says the rule no longer fires, with the quantity before -> after.
Findings only on the after side are ``new``. ``healthy`` is
a state, never a finding. An incomparable pair gets no status (None): nothing is judged; neither does a
finding that either side's analysis abstained from (dependency_wait on offset host/GPU clocks:
queued.clock_check), its figures left out, ``decided_by`` naming the side and its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tracetriage.analyzers import conditions
from tracetriage.analyzers.compare_metrics import METRICS, figure_text
from tracetriage.analyzers.compare_side import CompareCheck, Side, check_of, round4
from tracetriage.analyzers.compare_steps import WITHIN_NOISE, StepVerdict
from tracetriage.records.findings import Finding
from tracetriage.wording import fmt_ns, ms_text, ratio_text

NOT_COMPARABLE = "not judged: the captures are not comparable"
CAUSE_KEY, CLAIM_KEY = "cause_ms", "claim_ms"  # a finding's own figures, beside the side's figures

FIGURE_UNITS = {name: unit for name, unit, _ in METRICS} | {"cause_ms": "ms/step", "claim_ms": "ms/step", "idle_pct": "%",
                                                            "pageable_copies_per_step": "copies/step", "tail_ms": "ms",
                                                            "long_step_excess_ms": "ms/step"}
CAUSE_TEXT = "its slices, ms per step"
FIGURE_TEXT = {"cause_ms": CAUSE_TEXT, "claim_ms": "what each analysis says it claims, ms per step",
               "step_p50_ms": "step p50", "step_p99_ms": "step p99",
               "launches_per_step": "kernel launches per step", "graph_launches_per_step": "graph launches per step",
               "syncs_per_step": "blocking syncs per step", "busy_pct": "GPU busy", "idle_ms": "GPU idle per step",
               "idle_pct": "GPU idle", "copy_ms": "copy-only time per step", "collective_ms": "exposed collective per step",
               "compute_ms": "compute per step, collectives excluded", "tail_ms": "step p99 - p50",
               "pageable_copies_per_step": "pageable async copies per step",
               "long_step_excess_ms": "the long steps' time above the before p50 (steps over 3x the before p50), "
                                      "ms per step"}
UNEXPLAINED_TEXT = "its slices no other finding claims, ms per step"
# A measure whose change a test of the steps decides (StepVerdict's field): beyond the threshold, it moved only
# when that test resolved it. The long steps' time per step moves with each long step over few steps (5 of 60
# -> 5 of 59 moves it 1.3 ms); the test of their rate (Fisher) says whether that is more than chance.
TESTED_BY = {"long_step_excess_ms": "long_status"}
EMPTY_EPSILON = 1e-9  # ms per step or ns per GPU op: at or under this on both sides, a measure of nothing


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
    """The name of a finding's own measured quantity (``cause_ms``): its catalog ``measure``, its slices, or
    where its catalog check says ``unexplained``, the part of them no other finding claims
    (compare_side.Side.finding_ms)."""
    if check.measure:
        return FIGURE_TEXT.get(check.measure, check.measure.replace("_", " "))
    return UNEXPLAINED_TEXT if check.unexplained else CAUSE_TEXT


def finding_rows(context: FindingContext) -> list[FindingRow]:
    """The before side's findings, each checked on after, then those reported after only."""
    rows = [_checked_finding(context, finding_id, finding) for finding_id, finding in context.before.findings.items()]
    rows.extend(_new_finding(context, finding_id, finding) for finding_id, finding in context.after.findings.items()
                if finding_id not in context.before.findings)
    return rows


@dataclass(frozen=True, slots=True)
class Measure:
    """A finding's own measured quantity on both sides (``words`` name it), in ms per step (``per="step"``)
    or, on a pair without steps, in ns per GPU op (``per="op"``), and the noise threshold in the same unit."""

    words: str
    before: float | None
    after: float | None
    noise: float | None
    per: str = "step"
    empty: bool = False  # measured 0 on both sides: no measure of the finding (_unless_empty)

    @property
    def delta(self) -> float | None:
        return None if self.before is None or self.after is None else self.after - self.before

    def amount(self, value: float, sign: str = "") -> str:
        """``value`` in the measure's unit, with its unit of work."""
        if self.per == "op":
            text = fmt_ns(value)
            return f"{'+' if sign == '+' and value >= 0 else ''}{text} per GPU op"
        return f"{ms_text(value, sign=sign)} per step"

    def change_text(self) -> str:
        """``its slices, ms per step: 1.20 ms -> 0.03 ms`` (the figures as the contract rounds them)."""
        before, after = round4(self.before), round4(self.after)
        if self.per == "op":
            return f"{self.words}: {fmt_ns(before)} -> {fmt_ns(after)}"
        return f"{self.words}: {figure_text(before, 'ms')} -> {figure_text(after, 'ms')}"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a finding's compare check found: whether its ``confirm`` and ``falsifier`` conditions hold,
    the change ``delta`` of its ms per step (after - before; None unless measured on both sides), and
    whether the rule still fires after; ``measure`` the quantity ``delta`` is of (its words, values and
    noise; None: ms per step against the context's noise)."""

    confirm: bool | None
    falsifier: bool | None
    delta: float | None
    reported_after: bool
    measure: Measure | None = None


def _abstained(context: FindingContext, finding_id: str) -> str | None:
    """Why compare abstains on a finding: a side whose analysis abstained from it (dependency_wait where the
    host and GPU clocks are offset, queued.clock_check), as analyze did; None when both sides judged it."""
    for side in (context.before, context.after):
        reason = side.abstained.get(finding_id)
        if reason is not None:
            return f"not judged: the {side.label} analysis abstained from {finding_id} ({reason})"
    return None


def _abstained_row(finding_id: str, finding: Finding, why: str, after: Finding | None, before: Finding | None) -> FindingRow:
    """A finding compare does not judge, its figures left out: a number measured on offset clocks is no figure."""
    return FindingRow(finding_id, finding.axis, None, why, None, before.severity if before else None,
                      after.severity if after else None, None, None, ())


def _checked_finding(context: FindingContext, finding_id: str, finding: Finding) -> FindingRow:
    check = check_of(finding_id)
    abstained = _abstained(context, finding_id)
    if abstained:
        return _abstained_row(finding_id, finding, abstained, context.after.findings.get(finding_id), finding)
    after_finding = context.after.findings.get(finding_id)
    cause_before, cause_after = context.before.finding_ms(finding_id), context.after.finding_ms(finding_id, context.before)
    before_names = {**context.figures_before, "present": True, "cause_ms": cause_before,
                    "claim_ms": context.before.claim_ms(finding_id)}
    after_names = {**context.figures_after, "present": after_finding is not None, "cause_ms": cause_after,
                   "claim_ms": context.after.claim_ms(finding_id) if after_finding is not None else None}
    names = {"before": before_names, "after": after_names, "step": context.step, "noise_ms": context.noise_ms}
    applied = conditions.holds(check.applied, names)
    names["applied"] = applied
    measure = _measure(context, finding_id, check, cause_before, cause_after)
    outcome = Outcome(conditions.holds(check.confirm, names), conditions.holds(check.falsifier, names),
                      measure.delta, after_finding is not None, measure)
    status, decided = _status(context, check, outcome)
    evidence = _evidence(context, check, before_names, after_names)
    if measure.per == "op":
        evidence = _per_op_evidence(context, measure) + evidence
    return FindingRow(finding_id, finding.axis, status, decided, applied, finding.severity,
                      after_finding.severity if after_finding is not None else None,
                      round4(cause_before), round4(cause_after), evidence)


def _measure(context: FindingContext, finding_id: str, check: CompareCheck, cause_before: float | None,
             cause_after: float | None) -> Measure:
    """The finding's own quantity: its ms per step where both sides have steps, else (a pair without steps)
    its ns per GPU op, the noise then the threshold x the before window per GPU op."""
    if cause_before is not None and cause_after is not None:
        return _unless_empty(Measure(cause_words(check), cause_before, cause_after, context.noise_ms))
    if context.before.graph_level != context.after.graph_level:  # a GPU op is a whole replay on one side only
        return Measure(cause_words(check), cause_before, cause_after, context.noise_ms)
    before, after = context.before.finding_ns_per_op(finding_id), context.after.finding_ns_per_op(finding_id)
    window = context.before.window_ns_per_op()
    if before is None or after is None or window is None:
        return Measure(cause_words(check), cause_before, cause_after, context.noise_ms)
    words = cause_words(check).replace("ms per step", "per GPU op")
    return _unless_empty(Measure(words, before, after, context.threshold_pct / 100.0 * window, per="op"))


def _unless_empty(measure: Measure) -> Measure:
    """``measure``, or none where it is 0 on both sides: a finding the rule fired on is not 0 where it fired,
    so a quantity that is 0 on both sides is not its quantity, and a change against it says nothing
    (prefill_stall claims no slice of the window: its slices measured 0 ns -> 0 ns per GPU op)."""
    if abs(measure.before) < EMPTY_EPSILON and abs(measure.after) < EMPTY_EPSILON:
        return replace(measure, before=None, after=None, empty=True)
    return measure


def _per_op_evidence(context: FindingContext, measure: Measure) -> tuple[Evidence, ...]:
    """A pair without steps: the finding's own quantity in ns per GPU op, and host calls per GPU op (what
    launches per step say where there are steps)."""
    before, after = round4(measure.before), round4(measure.after)
    rows = [Evidence("cause_ns_per_op", before, after, "ns/op", measure.change_text())]
    calls_before, calls_after = context.before.host_calls_per_op(), context.after.host_calls_per_op()
    if calls_before is not None and calls_after is not None:
        calls_before, calls_after = round4(calls_before), round4(calls_after)
        rows.append(Evidence("host_calls_per_op", calls_before, calls_after, "calls/op",
                             f"host runtime calls per GPU op: {calls_before:.2f} -> {calls_after:.2f}"))
    return tuple(rows)


def _status(context: FindingContext, check: CompareCheck, outcome: Outcome) -> tuple[str | None, str]:
    """(status, the rule that decided it) of a finding of the before side from its check's
    ``outcome``: whether confirm and falsifier hold, the change ``delta`` of its own quantity,
    and whether it is still reported after. A finding the rule no longer fires after is judged on
    that quantity too, and never reads ``persists`` unless the quantity held."""
    measure = outcome.measure or Measure(CAUSE_TEXT, None, None, context.noise_ms)
    noise, delta = measure.noise, outcome.delta
    if not context.judged:
        return None, NOT_COMPARABLE
    if outcome.confirm:
        return "fixed", f"confirmed: {check.confirm_says or 'it is no longer reported after the change'}"
    if outcome.falsifier:
        return "falsified", f"the fix was applied but its falsifier holds: {check.falsifier_says or check.falsifier}"
    gone = not outcome.reported_after
    figures = f": {measure.change_text()}" if measure.before is not None and measure.after is not None else ""
    if delta is not None and noise is not None and abs(delta) >= noise:
        threshold = f"the threshold of {measure.amount(noise)} ({context.threshold_pct:g}% of the before " \
                    f"{'step' if measure.per == 'step' else 'window per GPU op'})"
        untested = _not_resolved(context, check)
        if untested:
            return "persists", (f"the time it is about moved {measure.amount(delta, sign='+')}, beyond {threshold}, "
                                f"but {untested}")
        if gone and delta < 0:
            return "fixed", f"the rule no longer fires after the change, and its own time fell beyond {threshold}{figures}"
        return ("better" if delta < 0 else "worse",
                f"the time it is about moved {measure.amount(delta, sign='+')}, beyond {threshold}"
                + ("; the rule no longer fires after the change" if gone else ""))
    if delta is not None and noise is not None:
        if gone:
            return "persists", (f"its own time held within the threshold of {measure.amount(noise)}{figures}: the cause "
                                "is still there, though the rule no longer fires after the change")
        return "persists", f"the time it is about moved less than the threshold of {measure.amount(noise)}"
    if measure.empty:  # its evidence is 0 on both sides: it does not persist on it; the rule's firing after decides
        return _empty_status(gone)
    if gone:  # nothing of its own measured on both sides, and its catalog confirm (what would show it fixed) fails
        return "persists", (f"not shown fixed: the rule no longer fires after the change, but its confirm "
                            f"({check.confirm_says or check.confirm}) does not hold, and the time it is about has no "
                            "measure on both sides")
    return "persists", "still reported after"


def _not_resolved(context: FindingContext, check: CompareCheck) -> str | None:
    """Why a change of the finding's measure beyond the threshold is not one: the test of the steps that decides
    it (:data:`TESTED_BY`) did not resolve it; None when it did, or when no test decides the measure."""
    field = TESTED_BY.get(check.measure or "")
    status = getattr(context.step, field) if field else None
    if status in (WITHIN_NOISE, "unchanged"):
        return f"the test of the long steps' rate reads {status}: not more than chance"
    return None


def _empty_status(gone: bool) -> tuple[str, str]:
    """The status of a finding whose own quantity is 0 on both sides (_unless_empty): fixed when the rule no
    longer fires after, else persists on the after analysis's own evidence, never on the empty measure."""
    if gone:
        return "fixed", ("the rule no longer fires after the change, and the quantity compare measures for it is 0 on "
                         "both sides: nothing of it is left to measure")
    return "persists", ("still reported after; the quantity compare measures for it is 0 on both sides, so its "
                        "size is the after analysis's own evidence")


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
                                 f"step p50 after/before {ratio_text(step.ratio)} ({step.status})"))
    return tuple(evidence)


def _new_finding(context: FindingContext, finding_id: str, finding: Finding) -> FindingRow:
    """A finding reported after only: ``new`` (when judged), with its slices' ms per step on both sides; not judged
    where the before analysis abstained from it (its absence there is no measurement)."""
    abstained = _abstained(context, finding_id)
    if abstained:
        return _abstained_row(finding_id, finding, abstained, finding, None)
    cause_before = round4(context.before.finding_ms(finding_id))
    cause_after = round4(context.after.finding_ms(finding_id, context.before))
    text = f"{cause_words(check_of(finding_id))}: {figure_text(cause_before, 'ms')} -> {figure_text(cause_after, 'ms')}"
    status, decided = ("new", "reported after only") if context.judged else (None, NOT_COMPARABLE)
    noise = context.noise_ms
    if (context.judged and cause_before is not None and cause_after is not None and noise is not None
            and cause_before > EMPTY_EPSILON and abs(cause_after - cause_before) < noise):
        # its time was there before and held: the before analysis left it under its reporting threshold, it is not new
        # (new-user trial 49: "new: host_sync_per_step" where both sides sync once a step, 14.8 -> 14.9 us of slices)
        status, decided = "persists", (f"reported after only, but its own time was there before and held within the "
                                       f"threshold of {noise:.3f} ms per step ({text}): not new")
    return FindingRow(finding_id, finding.axis, status, decided, None, None, finding.severity,
                      cause_before, cause_after, (Evidence("cause_ms", cause_before, cause_after, "ms/step", text),))
