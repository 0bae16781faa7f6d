"""Before/after comparison of two analyses (``tracetriage compare``): the method's confirm /
falsify step. Schema ``tracetriage.compare/2`` (``reports/compare.schema.json``).

Absolute time per step first. A share of a window never judges a change on its own: a
step three times shorter makes every remaining cost a bigger share. So, each in its module:

* **Comparability before judgement** (analyzers/comparability.py): the same device models and
  count, world size and program, and enough steps on both sides; the rest of the signature
  only moves the confidence.
* **Step time per rank** (analyzers/compare_steps.py): the ratio of medians with its bootstrap
  interval and a Mann-Whitney U test; a change within noise or under the threshold is no change.
* **Per-step figures** (analyzers/compare_metrics.py): each device's window decomposition in
  ms per step, each change against the noise (the threshold x the before step p50).
* **Findings** (analyzers/compare_findings.py): each finding of before checked on after by its
  catalog check: fixed, falsified, better, worse, persists; new when on the after side only.
* **Kernels** (analyzers/compare_kernels.py): the largest movers per matched device.
* **What moved** (analyzers/compare_metrics.py ``movers``): each rank's components in ms per
  step that moved beyond the threshold or grew by a quarter of themselves, largest first: the
  summary names them.
* **Serving across a deploy** (analyzers/compare_serving.py): the engine settings that changed
  (model, precision, engine named in the comparability section), the per-request input and output
  lengths with a two-sample KS test (inputs that shifted make latency not comparable as is), and
  the compare-stage rule ``quality_regression`` (analyzers/rules/quality.py) on them.
* **Captures without steps** (analyzers/compare_workrate.py): a benchmark loop or micro-benchmark
  is judged on its common kernels' time per call and their calls per second (budgets ``kernel
  time per call`` and ``kernel calls per second``), never on busy %: a faster kernel shortens the
  window and lowers busy %. A pair with no common kernel of enough calls is refused, with why.
* **Across devices** (analyzers/compare_devices.py, ``across_devices=True``): the same program on
  two GPUs, each op class and top op against its own device's peaks; the verdict is then
  ``across_devices`` (or ``inconclusive`` with the reason it was refused) and the gate exits 0
  (9 when refused). Without it a pair on different devices stays inconclusive, and says so.
* **Gate** (analyzers/compare_gate.py): ``--gate``'s exit code and line, read from the contract.
* **Verdict** (here): ``inconclusive`` (not comparable, or nothing to judge per step, per call or
  per request), else from the budgets (step p50, step p99, kernel time per call and calls per second, the serving
  percentiles and throughput): ``improved``, ``regressed``, ``mixed`` (some better, some worse)
  or ``unchanged``.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from tracetriage import __version__
from tracetriage.analyzers.comparability import Comparability, comparability, serving_comparable
from tracetriage.analyzers.compare_findings import Evidence, FindingContext, FindingRow, finding_rows
from tracetriage.analyzers.compare_gate import (  # noqa: F401 (compare's gate, importable from here)
    LONG_STEPS_BUDGET,
    STEP_P50_BUDGET,
    STEP_P99_BUDGET,
    THRESHOLD_PCT,
    gate_exit,
    gate_text,
)
from tracetriage.analyzers.compare_kernels import kernel_rows
from tracetriage.analyzers.compare_metrics import (
    METRICS,
    SERVING_BUDGETS,
    MetricRow,
    Mover,
    metric_rows,
    mover_text,
    movers,
)
from tracetriage.analyzers.compare_side import Side, devices_text, program_key, round4, serving_figures
from tracetriage.analyzers.compare_steps import (
    ALPHA,
    NOT_JUDGED,
    NOT_MEASURED,
    P99_MIN_STEPS,
    RESAMPLES,
    WITHIN_NOISE,
    StepTimeRow,
    StepVerdict,
    overall,
    step_test,
)
from tracetriage.analyzers.compare_workrate import WorkRate, is_stepless, work_rate
from tracetriage.analyzers.metrics import LONG_STEP_FACTOR
from tracetriage.contract import load
from tracetriage.records.compare import DOUBT_PREFIX
from tracetriage.records.findings import Finding
from tracetriage.wording import fmt_ns, ms_text, noise_words, ratio_text, short_middle, speed_words

if TYPE_CHECKING:  # imported by the pairs that use them: serving blocks on both sides, --across-devices
    from tracetriage.analyzers.compare_serving import ServingComparison

SCHEMA = "tracetriage.compare/2"
STEP_PERCENTILES = ("step_p50_ms", "step_p99_ms")
WORK_RATE_BUDGET = "kernel time per call"
CALL_RATE_BUDGET = "kernel calls per second"
QUALITY_BUDGET = "output quality"  # quality_regression: the answers changed with the deploy
SUMMARY_MOVERS = 3  # movers the one-line summary names
SUMMARY_NAME_CHARS = 90  # a kernel's name in the summary, cut in the middle: its start and end tell two apart
LOW_CONFIDENCE = 0.6  # a comparable pair below this confidence: its verdict line says so


def compare(before: dict, after: dict, before_label: str = "before", after_label: str = "after",
            threshold_pct: float = THRESHOLD_PCT, slo: dict | None = None, across_devices: bool = False) -> dict:
    """The compare contract of two analyses (``before`` and ``after``: analysis contracts); ``slo``:
    the budgets (``--slo``) checked on both sides' serving artifacts; ``across_devices``: also hold
    each op class against its own device's peaks (``--across-devices``), which then gives the verdict."""
    before_side, after_side = Side(before, before_label), Side(after, after_label)
    slo = dict(slo or {})
    serving = serving_side(before_side, after_side, threshold_pct)
    comparable = comparability(before_side, after_side, serving)
    rate = None
    if is_stepless(before_side) and is_stepless(after_side):
        rate = work_rate(before_side, after_side, threshold_pct)
        refusal = rate.refusal()
        if comparable.ok and refusal:
            comparable = comparable.refused(refusal)
        if not comparable.ok:
            rate = rate.not_judged()
    figures_before, figures_after = before_side.figures(), after_side.figures(before_side)  # one long-step cutoff
    step_rows = [step_test(rank, before_rank, after_rank, threshold_pct)
                 for rank, (before_rank, after_rank) in enumerate(zip(before_side.ranks, after_side.ranks))]
    if not comparable.ok:  # the numbers are shown, but nothing is judged on them
        step_rows = [row.not_judged() for row in step_rows]
    step = step_verdict(step_rows, comparable.ok)
    step_p50_ms = figures_before.get("step_p50_ms")
    noise_ms = threshold_pct / 100.0 * step_p50_ms if step_p50_ms else None
    metrics = judged_metrics(metric_rows(figures_before, figures_after, noise_ms, threshold_pct), step, comparable.ok,
                             stepless=rate is not None)
    serving_judged = comparable.ok and serving_comparable(before_side, after_side, serving)[0]
    metrics = serving_metrics(metrics, serving)
    budgets = budget_statuses(step, metrics, serving_judged, rate, serving)
    verdict, comparable = overall_verdict(budgets, comparable)
    slo_broken, slo_unmeasured = slo_breaks(before_side.serving, after_side.serving, slo)
    findings = finding_rows(FindingContext(before_side, after_side, figures_before, figures_after, step, noise_ms,
                                           comparable.ok, threshold_pct))
    findings += quality_rows(serving, comparable.ok)
    mover_rows = movers(before_side, after_side, threshold_pct) if comparable.ok else []
    summary = summary_line(SummaryInputs(verdict, comparable, threshold_pct, tuple(step_rows), rate, tuple(mover_rows),
                                         tuple(findings), tuple(metrics), tuple(slo_broken)))
    result = {
        "schema": SCHEMA,
        "tool_version": __version__,
        "verdict": verdict,
        "summary": summary,
        "comparable": comparable.to_contract(),
        "identical": comparable.identical,
        "threshold_pct": threshold_pct,
        "method": {
            "step_test": "two-sided Mann-Whitney U on the step durations of each rank, and a percentile bootstrap "
                         f"({RESAMPLES} resamples) of the ratio of medians; significant when p < {ALPHA}, the 95% "
                         f"interval excludes 1 and the change is at least {threshold_pct:g}% of the step; a p99 judged "
                         f"on {P99_MIN_STEPS} steps or more per side",
            "long_step_test": f"two-sided Fisher exact test of the rates of steps over {LONG_STEP_FACTOR:g}x the before "
                              f"p50 (one cutoff for both sides); significant when p < {ALPHA} and their time above the "
                              f"before p50 moved by at least {threshold_pct:g}% of the before step per step",
            "noise_ms_per_step": round4(noise_ms),
            "alpha": ALPHA,
        },
        "before": side_info(before_side, figures_before),
        "after": side_info(after_side, figures_after),
        "budgets": budgets,
        "slo_broken": slo_broken,
        "slo_not_measured": slo_unmeasured,
        "step_time": [row.to_contract() for row in step_rows],
        "metrics": [row.to_contract() for row in metrics],
        "findings": [row.to_contract() for row in findings],
        "kernels": [row.to_contract() for row in kernel_rows(before_side, after_side)] if comparable.ok else [],
        "movers": [row.to_contract() for row in mover_rows],
        "work_rate": None if rate is None else rate.to_contract(threshold_pct),
        "across_devices": None,
        "serving": None if serving is None else serving.to_contract(),
        "_series": {"before": _step_series(before_side), "after": _step_series(after_side)},
        "_slo": slo,  # the --slo budgets given (checked or not measured): the gate's line names them
    }
    if across_devices:
        from tracetriage.analyzers.compare_devices import across_devices as compare_across_devices

        across = compare_across_devices(before_side, after_side)
        result.update(verdict="across_devices" if across.ok else "inconclusive", summary=across.summary(),
                      across_devices=across.to_contract())
    return result


def serving_side(before: Side, after: Side, threshold_pct: float) -> ServingComparison | None:
    """The serving comparison (analyzers/compare_serving.py) with the compare-stage rules' finding
    (analyzers/rules/quality.py) in its ``quality``; None unless both sides have serving artifacts."""
    if not before.serving or not after.serving:  # compare_serving's None, without importing it (its records: ~28 ms)
        return None
    from tracetriage.analyzers.compare_serving import compare_serving

    serving = compare_serving(before.serving, after.serving, serving_figures(before.serving),
                              serving_figures(after.serving), threshold_pct)
    if serving is None:  # the pair rule requires a serving comparison: without one, no rule module is imported
        return None  # (importing the rules package loads every rule family, the efficiency analyzer and pandas)
    from tracetriage.analyzers.rules.quality import evaluate_pair

    finding = evaluate_pair(serving)
    return serving if finding is None else replace(serving, quality=finding.to_contract())


SERVING_FIGURES = ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "itl_p50_ms", "itl_p99_ms", "e2el_p50_ms",
                   "throughput_rps")


def serving_metrics(metrics: list[MetricRow], serving: ServingComparison | None) -> list[MetricRow]:
    """The serving rows not judged when the inputs shifted (the load changed); the end-to-end p50
    ``changed`` (neither better nor worse) when it moved only with the outputs' length
    (``serving.latency``); the mean lengths per request changed or unchanged by their shape's
    two-sample test (not judged without one)."""
    out = []
    for metric in metrics:
        if metric.name in SERVING_FIGURES and serving is not None and serving.inputs_shifted:
            metric = metric.not_judged()
        elif metric.name == "e2el_p50_ms" and serving is not None and serving.latency:
            metric = metric.explained("changed")
        elif metric.name in ("input_len_mean", "output_len_mean") and serving is not None:
            shape = serving.shape(metric.name.split("_")[0])  # its two-sample test decides, not the means' difference
            shifted = shape.shifted if shape else None
            metric = metric.not_judged() if shifted is None else metric.explained("changed" if shifted else "unchanged")
        out.append(metric)
    return out


def quality_rows(serving: ServingComparison | None, judged: bool) -> list[FindingRow]:
    """The compare-stage finding as a row of the comparison's findings: new after the change (no
    status on a pair that is not comparable), its evidence the shapes that moved."""
    if serving is None or serving.quality is None:
        return []
    quality = load(Finding, serving.quality)
    evidence = tuple(Evidence(f"{shape.name}_len_mean", shape.before["mean"], shape.after["mean"], "tokens", shape.text)
                     for shape in serving.shapes if shape.before and shape.after)
    return [FindingRow(quality.id, quality.axis, "new" if judged else None,
                       "the outputs shifted after a change of model or precision, on the same inputs" if judged
                       else "not judged: the captures are not comparable", None, None, quality.severity, None, None,
                       evidence)]


def step_verdict(step_rows: list[StepTimeRow], judged: bool) -> StepVerdict:
    """The ranks' step p50 and p99 statuses in one (not measured when the pair is not judged), and
    the median of their p50 ratios: the ``step`` the findings' conditions read."""
    p50_status = overall([row.status for row in step_rows]) if judged else NOT_MEASURED
    p99_status = overall([row.p99_status for row in step_rows]) if judged else NOT_MEASURED
    long_status = overall([row.long_status for row in step_rows]) if judged else NOT_MEASURED
    ratios = [row.ratio for row in step_rows if row.ratio is not None]
    return StepVerdict(p50_status, p50_status == "improved", p50_status == "regressed",
                       float(np.median(ratios)) if ratios else None, p99_status, long_status)


def judged_metrics(metrics: list[MetricRow], step: StepVerdict, judged: bool, stepless: bool = False) -> list[MetricRow]:
    """Nothing judged on an incomparable pair; the step percentiles judged by the step test, not by
    their difference; busy % of a pair without steps not judged (its window is its GPU activity,
    which a faster kernel shortens), and never better or worse with steps (a share of each side's own
    window, METRICS); where the step p50 held (unchanged or within noise) a per-step component that
    moved is ``changed``: the verdict follows the step time with its noise."""
    if not judged:
        return [metric.not_judged() for metric in metrics]
    status_of = {"step_p50_ms": step.status, "step_p99_ms": step.p99_status}
    step_held = step.status in ("unchanged", WITHIN_NOISE) and step.long_status not in ("improved", "regressed")
    out = []
    for metric in metrics:
        if metric.name in STEP_PERCENTILES:
            metric = metric.judged_by(status_of[metric.name])
        elif stepless and metric.unit == "%":
            metric = metric.not_judged()
        elif step_held and metric.unit == "ms/step" and metric.direction in ("improved", "regressed"):
            # the step held: a component that moved is time moved between causes (a graph replay now spans the
            # gaps it hid), not a step that got better or worse
            metric = metric.explained("changed")
        out.append(metric)
    return out


def budget_statuses(step: StepVerdict, metrics: list[MetricRow], serving_judged: bool, rate: WorkRate | None = None,
                    serving: ServingComparison | None = None) -> dict[str, str]:
    """The budgets the verdict reads: step p50 and p99, the long steps' rate (when measured), the kernel time
    per call of a pair without steps (over its matched devices), with comparable serving artifacts each serving budget
    measured on both sides (improved, regressed or unchanged), and ``output quality``: regressed when
    quality_regression fired, unchanged when the output lengths were tested and held."""
    budgets = {STEP_P50_BUDGET: step.status, STEP_P99_BUDGET: step.p99_status}
    if step.long_status != NOT_MEASURED:
        budgets[LONG_STEPS_BUDGET] = step.long_status
    if rate is not None:
        budgets[WORK_RATE_BUDGET] = overall([device.status for device in rate.devices])
        budgets[CALL_RATE_BUDGET] = overall([device.rate_status for device in rate.devices])
    if serving_judged:
        for metric in metrics:
            if metric.name in SERVING_BUDGETS and metric.change is not None:
                budgets[metric.name] = metric.direction if metric.direction in ("improved", "regressed") else "unchanged"
    output = serving.shape("output") if serving is not None else None
    if serving is not None and serving.quality is not None:
        budgets[QUALITY_BUDGET] = "regressed"
    elif output is not None and output.shifted is False and serving.inputs_shifted is False:
        budgets[QUALITY_BUDGET] = "unchanged"
    return budgets


def overall_verdict(budgets: dict[str, str], comparable: Comparability) -> tuple[str, Comparability]:
    """The verdict from the budgets (those not judged, a p99 of too few steps, left out), and the
    comparability with the reason when nothing was measured."""
    measured = [status for status in budgets.values() if status not in (NOT_MEASURED, NOT_JUDGED)]
    if not comparable.ok:
        return "inconclusive", comparable
    if not measured:
        return "inconclusive", comparable.with_reason(
            "nothing measured on both sides to judge: no step durations, no kernel times per call, no serving percentiles")
    ups = any(status in ("improved", "mixed") for status in measured)
    downs = any(status in ("regressed", "mixed") for status in measured)
    if ups or downs:
        return "mixed" if ups and downs else "improved" if ups else "regressed", comparable
    # nothing moved beyond the noise: unchanged only where every budget shows it small, never where one cannot tell
    return (WITHIN_NOISE if WITHIN_NOISE in measured else "unchanged"), comparable


def _step_series(side: Side) -> dict[str, list[int]]:
    """Each rank's step durations (ns), for the HTML chart: not part of the contract."""
    return {f"rank{index}": rank.durations.tolist() for index, rank in enumerate(side.ranks)}


def side_info(side: Side, figures: dict) -> dict:
    """One side as the contract describes it: label, headline, inputs, devices, world size, steps."""
    models = Counter(device.name for device in side.devices)
    return {"label": side.label, "headline": side.record.headline,
            "inputs": [str(source.path) for source in side.record.inputs],
            "devices": devices_text(models), "world_size": len(side.ranks), "steps": figures.get("steps") or 0,
            "steps_per_rank": int(statistics.median([rank.step_count for rank in side.ranks]))
            if side.ranks else 0,
            "step_p50_ms": round4(figures.get("step_p50_ms")), "graph_level": side.graph_level}


def slo_breaks(before: dict | None, after: dict | None, slo: dict) -> tuple[list[str], list[str]]:
    """SLO budgets (``--slo``): those met before and broken after, and those that could not be
    checked on a side; each side's budget is checked by the one check analyze uses
    (rules.slo.slo_check on that side's serving artifacts)."""
    if not slo:  # no budgets: the rules package (every rule module) stays unloaded
        return [], []
    from tracetriage.analyzers.rules.slo import slo_check

    broken, unmeasured = [], []
    for key, budget in slo.items():
        check_before, check_after = slo_check(before, key, budget), slo_check(after, key, budget)
        if "not_measured" in (check_before["status"], check_after["status"]):
            sides = " and ".join(label for label, check in (("before", check_before), ("after", check_after))
                                 if check["status"] == "not_measured")
            unmeasured.append(f"{key}={budget:g}: no {check_before['percentile']} of {check_before['metric']} {sides}")
        elif check_before["status"] == "met" and check_after["status"] == "broken":
            broken.append(f"{key}={budget:g}: {ms_text(check_before['measured_ms'])} -> {ms_text(check_after['measured_ms'])}")
    return broken, unmeasured


@dataclass(frozen=True, slots=True)
class SummaryInputs:
    """What the one-line summary of a comparison reads: the verdict and comparability, the threshold,
    the step rows, the work rate of a pair without steps (None otherwise), the movers, the finding rows,
    the metric rows and the broken --slo budgets."""

    verdict: str
    comparable: Comparability
    threshold_pct: float
    step_rows: tuple[StepTimeRow, ...]
    rate: WorkRate | None
    movers: tuple[Mover, ...]
    findings: tuple[FindingRow, ...]
    metrics: tuple[MetricRow, ...]
    slo_broken: tuple[str, ...]


def summary_line(summary: SummaryInputs) -> str:
    """The verdict in one line: the step p50 change of the rank that moved most the verdict's way
    (named with its pids; a pair without steps: the first judged device's kernel time per call, its
    rank named), the largest per-step movers across ranks,
    the findings that changed status (a finding that merely persists is in the findings, not
    here), broken SLOs. Figures are worded as the contract rounds them."""
    verdict = summary.verdict
    if verdict == "inconclusive":
        why = next((reason for reason in summary.comparable.reasons), "nothing to judge")
        return f"inconclusive: {why}"
    if summary.comparable.identical:  # one capture twice: every change is 0, said first
        return f"{verdict}: the same capture ({summary.comparable.identical}): nothing to compare, every change is 0"
    confidence = summary.comparable.confidence
    # A doubtful pair leads with its doubt: who skims the first words must not read "improved" alone
    doubt = f"{DOUBT_PREFIX} {confidence:.2f}, the captures' signatures differ (see comparable): "
    parts = [(doubt if confidence < LOW_CONFIDENCE else "") + verdict]
    measured = [row for row in summary.step_rows if row.ratio is not None]
    ranks = len(summary.step_rows)
    if measured:
        row = _summary_rank(measured, verdict)
        noise = "" if row.significant else ", " + noise_words(row.status, row.before_count, row.after_count,
                                                                summary.threshold_pct)
        parts.append(f"step p50 {ms_text(row.before_p50_ns / 1e6)} -> {ms_text(row.after_p50_ns / 1e6)}"
                     f" ({speed_words(row.to_contract())}, after/before {ratio_text(row.ratio)} "
                     f"[95% CI {ratio_text(row.ci95[0])}-{ratio_text(row.ci95[1])}]{noise})"
                     + (f" on rank{row.rank} of {ranks} (pid {row.before_pid} -> {row.after_pid})" if ranks > 1 else ""))
        parts.extend(_p99_words(measured, summary.threshold_pct, ranks))
        parts.extend(_long_step_words(measured, ranks))
    if summary.rate is not None:
        parts.extend(_work_rate_words(summary.rate, summary.metrics))
    moved = [mover_text(mover, summary.threshold_pct, ranks) for mover in summary.movers[:SUMMARY_MOVERS]]
    if moved:
        parts.append("moved (mean per step): " + ", ".join(moved))  # a mean beside the p50 above: said so
    parts.extend(_finding_words(summary))
    if summary.slo_broken:
        parts.append("SLO broken: " + "; ".join(summary.slo_broken))
    return "; ".join(parts)


def _finding_words(summary: SummaryInputs) -> list[str]:
    """The findings that changed status, by status; those not judged on a pair without steps (shares of two
    windows) and those a side's analysis abstained from (compare_findings._abstained: offset clocks)."""
    ids_by_status: dict[str, list[str]] = {}
    unmeasured: list[str] = []
    abstained: list[str] = []
    for finding in summary.findings:
        per_op = any(evidence.name == "cause_ns_per_op" for evidence in finding.evidence)
        if finding.status and summary.rate is not None and not per_op:
            unmeasured.append(f"{finding.id} {finding.status}")
        elif finding.status:
            ids_by_status.setdefault(finding.status, []).append(finding.id)
        elif summary.comparable.ok:
            abstained.append(finding.id)
    parts = []
    if unmeasured:
        # without steps and without a per-GPU-op measure a finding's size is a share of its own window: named, not judged
        parts.append("findings not judged (shares of two different windows): " + ", ".join(unmeasured))
    for status in ("fixed", "falsified", "worse", "new", "better"):
        if status in ids_by_status:
            parts.append(f"{status}: {', '.join(ids_by_status[status])}")
    if abstained:
        parts.append(f"not judged (a side's analysis abstained from it): {', '.join(abstained)}")
    return parts


def _p99_words(measured: list[StepTimeRow], threshold_pct: float, ranks: int) -> list[str]:
    """The step p99 in the summary when it is not shown unchanged: the rank whose p99 moved most, its
    change with its interval, and its status (``within noise / not significant (...; 60 / 400 steps)``
    when the interval includes 1 and reaches past the threshold: never "unchanged")."""
    told = [row for row in measured if row.p99_ratio is not None and row.p99_status != "unchanged"]
    if not told:
        return []
    row = max(told, key=lambda row: (abs(math.log(max(row.p99_ratio, 1e-9))), -row.rank))
    on_rank = f" on rank{row.rank} of {ranks}" if ranks > 1 else ""
    if row.p99_ci95 is None:  # too few steps for a p99: said, not judged
        return [f"step p99 {ms_text(row.before_p99_ns / 1e6)} -> {ms_text(row.after_p99_ns / 1e6)} "
                f"{row.p99_reason or row.p99_status}{on_rank}"]
    low, high = row.p99_ci95
    status = (row.p99_status if row.p99_significant
              else noise_words(row.p99_status, row.before_count, row.after_count, threshold_pct))
    return [f"step p99 {ms_text(row.before_p99_ns / 1e6)} -> {ms_text(row.after_p99_ns / 1e6)} (after/before "
            f"{ratio_text(row.p99_ratio)} [95% CI {ratio_text(low)}-{ratio_text(high)}], {status})"
            + (f" on rank{row.rank} of {ranks}" if ranks > 1 else "")]


def _long_step_words(measured: list[StepTimeRow], ranks: int) -> list[str]:
    """The long steps in the summary when they did not hold (no long step on either side, or their cost
    moved less than the threshold): the rank whose rate moved most, its counts, Fisher p and status."""
    told = [row for row in measured if row.long_steps is not None and row.long_status != "unchanged"]
    if not told:
        return []
    row = max(told, key=lambda row: (abs(row.long_steps.after / row.long_steps.after_steps
                                         - row.long_steps.before / row.long_steps.before_steps), -row.rank))
    return [row.long_steps.text() + (f" on rank{row.rank} of {ranks}" if ranks > 1 else "")]


def _summary_rank(measured: list[StepTimeRow], verdict: str) -> StepTimeRow:
    """The rank the summary's step figure is of: of the ranks whose step p50 moved the verdict's way
    (all measured ones when none did), the one whose ratio is farthest from 1 (the lowest rank on a tie)."""
    agreeing = [row for row in measured if row.status == verdict] or measured
    return max(agreeing, key=lambda row: (abs(math.log(max(row.ratio, 1e-9))), -row.rank))


def _work_rate_words(rate: WorkRate, metrics: tuple[MetricRow, ...]) -> list[str]:
    """A pair without steps in words: the first judged device's kernel time per call, the kernel
    that moved most, and busy % said to be not judged."""
    judged = [(rank, device) for rank, device in enumerate(rate.devices) if device.ratio is not None]
    if not judged:
        return []
    rank, device = judged[0]
    low, high = device.ci95
    words = [f"kernel time per call x{ratio_text(device.ratio)} of before [95% CI {ratio_text(low)}-{ratio_text(high)}]"
             f"{'' if device.significant else ', within noise'} over {device.kernels} common kernels "
             f"({round4(device.before_covered_pct):.0f}% of the kernel time before)"
             + (f" on rank{rank} of {len(rate.devices)}" if len(rate.devices) > 1 else "")]
    if device.rate_ratio is not None:
        why = ": a graph-level capture counts no replayed kernel" if device.rate_status == "not judged" else ""
        words.append(f"their calls per second x{ratio_text(device.rate_ratio)} ({device.rate_status}{why})")
    # the kernels whose time moved most in absolute terms (calls before x the change per call: rate.kernels'
    # order), of those that moved beyond the noise; an unchanged kernel is never named as a mover
    moved = [row for row in rate.kernels if row.device == device.device and row.status in ("improved", "regressed")]
    if moved:
        words.append("moved most: " + ", ".join(
            f"{short_middle(row.name, SUMMARY_NAME_CHARS)} {fmt_ns(round4(row.before_ns_per_call))} -> "
            f"{fmt_ns(round4(row.after_ns_per_call))} per call (x{ratio_text(row.ratio)}, {row.status})"
            for row in moved[:SUMMARY_MOVERS]))
    else:
        words.append("no common kernel's time per call moved beyond the noise")
    busy = next((metric for metric in metrics if metric.name == "busy_pct"), None)
    if busy is not None and busy.before is not None and busy.after is not None:
        words.append(f"GPU busy {busy.before:.1f}% -> {busy.after:.1f}% not judged (a window without steps "
                     "is the GPU activity itself: it shrinks when the kernels get faster)")
    return words


# ---------------------------------------------------------------------------
# The record batch keeps per case, so trend never re-reads a capture


SERIES_FIGURES = tuple(name for name, _unit, _lower in METRICS)  # every per-step metric compare shows


def trend_record(data: dict) -> dict:
    """What ``trend`` reads of one analysis (flat, for the batch Parquet tables): the
    comparability signature, the per-step figures, each finding's ms per step, and each
    device's kernels in ms per step and ns per call (rank order)."""
    side = Side(data, "")
    figures = side.figures()
    models = Counter(device.name for device in side.devices)
    program = ",".join(sorted({key for key in (program_key(rank.name) for rank in side.ranks) if key}))
    if not side.devices and side.serving:
        program = "serving:" + str(side.record.serving.engine or "unknown")
    signature = {
        "device_model": devices_text(models) if models else "",  # counts per model: 1x A100, 3x H100
        "device_count": len(side.devices),
        "world_size": len(side.ranks),
        "program": program,
        "step_ranges": ",".join(sorted({str(rank.range_name) for rank in side.ranks if rank.range_name})),
    }
    findings = {finding_id: round4(side.finding_ms(finding_id)) for finding_id in side.findings}
    kernels = []
    for rank, device in enumerate(side.devices_in_rank_order()):
        steps = side.device_steps(device)
        for kernel in device.kernels:
            kernels.append({"device_rank": rank, "name": kernel.name, "kind": kernel.kind,
                            "ms_per_step": round(kernel.total_ns / steps / 1e6, 6) if steps else None,
                            "ns_per_call": round(kernel.total_ns / kernel.count, 1) if kernel.count else None})
    return {"signature": signature, "figures": {name: round4(figures.get(name)) for name in SERIES_FIGURES},
            "findings_ms": findings, "kernels": kernels}
