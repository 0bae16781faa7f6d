"""compare's gate (``compare --gate``) read from a compare contract by its keys: the exit code and its
line. 0 improved / unchanged / mixed within budgets, 8 regressed, 9 inconclusive (tracetriage/errors.py).

It fails (8) when the verdict is ``regressed``; when a mixed verdict's step-level test regressed (the
step p50, or the long steps' rate: compare_steps.long_step_test); when a finding reads ``worse`` (its
own time grew beyond its threshold, the threshold x the before step: compare_findings); or when a
--slo budget broke. The line names each reason with its evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tracetriage.analyzers.comparability import Comparability
from tracetriage.contract import key, load
from tracetriage.errors import EXIT_INCONCLUSIVE, EXIT_REGRESSED
from tracetriage.records.compare import ComparedFinding, StepTime
from tracetriage.wording import long_steps_words

THRESHOLD_PCT = 5.0  # the practical minimum: a change under 5% of the step is no change (--gate-threshold)
STEP_P50_BUDGET, STEP_P99_BUDGET = "step p50", "step p99"
LONG_STEPS_BUDGET = "long steps"  # the rate of steps over 3x the before p50 (compare_steps.long_step_test)


@dataclass(frozen=True, slots=True)
class GateReading:
    """What the gate reads of a compare contract (read by its keys): the verdict, the threshold, the
    budgets' statuses, the broken --slo budgets and those not measured, the --slo budgets given (the
    comparison's private ``_slo``: a saved comparison has none), the comparability (its reasons), the
    findings and the step rows' long steps."""

    verdict: str = ""
    threshold_pct: float = THRESHOLD_PCT
    budgets: dict[str, str] = field(default_factory=dict)
    slo_broken: tuple[str, ...] = ()
    slo_not_measured: tuple[str, ...] = ()
    slo_given: dict[str, float] | None = key("_slo")
    comparable: Comparability = Comparability(False, 0.0, ())
    findings: tuple[ComparedFinding, ...] = ()
    step_time: tuple[StepTime, ...] = ()

    def worse(self) -> list[ComparedFinding]:
        """The findings that read ``worse``: their own time grew beyond their threshold."""
        return [finding for finding in self.findings if finding.status == "worse"]

    def step_regressed(self) -> bool:
        """A step-level test that is significant and over the threshold says slower: the step p50 or
        the long steps' rate."""
        return any(self.budgets.get(name) == "regressed" for name in (STEP_P50_BUDGET, LONG_STEPS_BUDGET))


def gate_exit(result: dict | GateReading) -> int:
    """``--gate``: 0 improved / unchanged / mixed within budgets, 8 regressed, 9 inconclusive.
    A mixed verdict fails when a step-level test regressed (the step p50, the long steps' rate) or a
    --slo budget broke; any verdict fails when a finding reads ``worse`` (its own time grew beyond its
    threshold). Across devices: 0 when the comparison was made, 9 when refused."""
    reading = load(GateReading, result)
    verdict = reading.verdict
    if verdict == "across_devices":
        return 0
    if verdict == "inconclusive":
        return EXIT_INCONCLUSIVE
    if verdict == "regressed" or reading.slo_broken or reading.worse():
        return EXIT_REGRESSED
    if verdict == "mixed" and reading.step_regressed():
        return EXIT_REGRESSED
    return 0


def gate_text(result: dict | GateReading) -> str:
    """``compare --gate``'s result in one line, as ``trend --gate`` prints its own: passed, failed
    (and why: the step verdict, a mixed verdict whose step p50 regressed, a broken --slo budget) or
    inconclusive, with the exit code :func:`gate_exit` returns."""
    reading = load(GateReading, result)
    code = gate_exit(reading)
    verdict = reading.verdict
    if code == EXIT_INCONCLUSIVE:
        why = next((reason for reason in reading.comparable.reasons), "nothing to judge")
        return f"gate: inconclusive (exit {code}): {why}"
    if code == EXIT_REGRESSED:
        reasons = []
        if verdict == "regressed":
            regressed = [name for name, status in reading.budgets.items() if status == "regressed"]
            steps = [name for name in regressed if name.startswith("step ")]
            others = [name for name in regressed if name not in steps]
            others = [name for name in others if name != LONG_STEPS_BUDGET]
            if steps:
                reasons.append("the after capture regressed beyond the noise and the "
                               f"{reading.threshold_pct:g}%-of-step threshold")
            if others:  # a serving budget or the output quality, judged on its own figures
                reasons.append("regressed: " + ", ".join(others))
        elif verdict == "mixed" and reading.step_regressed():
            reasons.append("mixed, and the step p50 is what regressed" if reading.budgets.get(STEP_P50_BUDGET) ==
                           "regressed" else "mixed, and the long steps are what regressed")
        reasons.extend(_long_step_reasons(reading))
        reasons.extend(f"finding worse: {finding.id} ({finding.decided_by})" for finding in reading.worse())
        if reading.slo_broken:
            reasons.append("SLO broken: " + "; ".join(reading.slo_broken))
        return f"gate: failed (exit {code}): " + "; ".join(reasons)
    return f"gate: passed: {verdict}, " + _passed_words(reading)


def _passed_words(reading: GateReading) -> str:
    """What a passed gate checked: the budgets and findings, and the --slo budgets only where some were given:
    none newly broken (met before and broken after, the one break the gate fails on; a budget broken on both
    sides is no regression, and "no budget broken" would be false), with those a side could not measure."""
    if not (reading.slo_given or reading.slo_not_measured):
        return "no budget regressed and no finding worse"
    given = len(reading.slo_given) or len(reading.slo_not_measured)
    unmeasured = len(reading.slo_not_measured)
    checked = (f" ({unmeasured} of {given} not measured: {'; '.join(reading.slo_not_measured)})" if unmeasured else "")
    return f"no budget regressed, no finding worse and no --slo budget newly broken (met before, broken after){checked}"


def _long_step_reasons(reading: GateReading) -> list[str]:
    """The ranks whose long steps regressed, with their evidence: ``long steps 3/400 -> 5/60 over 3x the before
    p50 (64.82 ms), Fisher p=0.0013, 3.277 -> 35.25 ms per step above the before p50: regressed``."""
    if reading.budgets.get(LONG_STEPS_BUDGET) not in ("regressed", "mixed"):
        return []
    rows = [(step.rank, step.long_steps) for step in reading.step_time
            if step.long_steps is not None and step.long_steps.status == "regressed"]
    ranks = len(reading.step_time)
    return [long_steps_words(long) + (f" on rank{rank}" if ranks > 1 else "") for rank, long in rows]
