"""A trend group's verdict line and its gate: which series are budgets, and whether the latest capture
sits in a regressed segment of one (or is worse than the baseline capture) (analyzers/trend.py)."""

from __future__ import annotations

import re

import numpy as np

from tracetriage.analyzers.compare_metrics import SERVING_BUDGETS
from tracetriage.analyzers.trend_changes import MIN_SERIES, SHIFT_SPREAD_FACTOR, practical_min, robust_sigma
from tracetriage.analyzers.trend_records import Change
from tracetriage.casenames import matches_baseline
from tracetriage.wording import counted, fmt_ns, ms_text

# The budgets the gate and the verdict line read: step time, serving figures.
BUDGETS = ("step_p50_ms", "step_p99_ms", *SERVING_BUDGETS)
QUALITY_FINDINGS = ("quality_regression",)  # compare's finding at a change of the outputs' shape (rules/quality.py)
QUALITY_SERIES = ("output_len_mean",)


def is_budget(metric: str) -> bool:
    """A series the verdict line and the gate read: step time and serving figures, and the kernels'
    time per call of a group without steps."""
    return metric in BUDGETS or metric.startswith("kernel_call:")


def metric_rank(metric: str) -> int:
    return 0 if is_budget(metric) else 1 if metric.startswith("finding:") else 3 if metric.startswith("kernel:") else 2


def budget_series(series: dict) -> list[str]:
    """The budget series the gate reads, in order: step time and serving figures, then the kernels' time per
    call of a group without steps."""
    return [*BUDGETS, *(name for name in series if name.startswith("kernel_call:"))]


def gate(changes, cases, series, baseline, step_p50, threshold_pct, latest=()) -> bool:
    """True when the latest case sits in a regressed segment of a budget series: a regressed
    level shift with no later shift of that series back, or the latest case alone worse than the
    captures before it beyond their noise (``latest``: analyzers/trend_latest.py). With ``baseline``
    (a case name), the latest case's level is compared with the baseline case's segment level instead."""
    if baseline is not None:
        return _worse_than_baseline(cases, series, baseline, step_p50, threshold_pct)
    if any(judged.status == "regressed" for judged in latest):
        return True
    for metric in budget_series(series):
        shifts = _level_shifts(changes, metric)
        if shifts and shifts[-1].direction == "regressed":
            return True
    for metric in QUALITY_SERIES:  # the latest segment of the outputs' shape opened by a quality finding
        shifts = _level_shifts(changes, metric)
        if shifts and _quality_findings(shifts[-1]):
            return True
    return False


def _level_shifts(changes: list[Change], metric: str) -> list[Change]:
    return [change for change in changes if change.metric == metric and change.kind == "level_shift"]


def _quality_findings(change: Change) -> list[str]:
    """``<id> new`` for each quality finding compare found new at a change (the answers changed with a deploy)."""
    return [f"{finding.id} {finding.status}" for finding in change.findings
            if finding.id in QUALITY_FINDINGS and finding.status == "new"]


def _worse_than_baseline(cases, series, baseline, step_p50, threshold_pct) -> bool:
    """The latest case worse than the baseline case on some budget series, by the practical minimum and
    beyond twice the series' noise; False when no case is the baseline."""
    hit = [index for index, case in enumerate(cases) if matches_baseline(case.name, baseline)]
    if not hit:
        return False
    for metric in budget_series(series):
        if metric not in series:
            continue
        unit, lower, values = series[metric]
        values = np.asarray(values, np.float64)
        base, last = values[hit[0]], values[-1]
        if not (np.isfinite(base) and np.isfinite(last)):
            continue
        worse = (last - base) if lower else (base - last)
        if worse >= practical_min(unit, base, step_p50, threshold_pct) and worse > SHIFT_SPREAD_FACTOR * robust_sigma(values):
            return True
    return False


def _metric_words(metric: str) -> str:
    if metric.startswith("kernel_call:"):
        return f"{metric[12:][:60]} time per call"
    return re.sub(r"_(p\d\d)_ms$", r" \1", metric).replace("_", " ")


def verdict(label, changes, cases, latest=()) -> str:
    """A group's verdict line: too few captures, no change, or one part per change point (its first budget
    series, a deploy that changed the answers, an outlier of a budget series), in capture order, then the
    latest capture where it is worse than the captures before it (``latest``: analyzers/trend_latest.py)."""
    shifts = [change for change in changes if change.kind == "level_shift"]
    newest = (cases[-1]["name"] if isinstance(cases[-1], dict) else cases[-1].name) if cases else None  # a contract's too
    # an outlier at the latest capture is not said to be alone: nothing after it says so (trend_latest)
    outliers = [change for change in changes if change.kind == "outlier" and is_budget(change.metric)
                and not (latest and change.first_bad == newest)]
    if len(cases) < MIN_SERIES:
        return (f"{label}: {counted(len(cases), 'capture')}, too few to tell a change from noise (at least {MIN_SERIES}); "
                "compare two of them with tracetriage compare")
    if not shifts and not outliers and not latest:
        return f"{label}: no change beyond noise over {counted(len(cases), 'capture')}"
    seen: set[str] = set()  # one part per change point
    parts = [_budget_shift_words(change) for change in _first_at_each(shifts, seen, lambda c: is_budget(c.metric))]
    parts += [_quality_shift_words(change) for change in
              _first_at_each(shifts, seen, lambda c: c.metric in QUALITY_SERIES and bool(_quality_findings(c)))]
    parts += [f"{change.first_bad} " + ("alone" if change.first_bad != newest else "alone so far, the latest capture")
              + f": {_metric_words(change.metric)} {change.change_pct:+.0f}% "
              + ("(an outlier, not a shift)" if change.first_bad != newest else "(a one-off or a new level: no capture "
                                                                                 "after it tells yet)")
              + (f"; {change.pair_test}" if change.pair_test else "")
              for change in _first_at_each(outliers, seen, lambda c: True)]
    parts += [latest_words(latest[0], newest)] if latest else []
    if not parts:
        parts = [f"{counted(len(shifts), 'shift')} in secondary series; the budgets (step time, serving percentiles, kernel time "
                 "per call) held"]
    return f"{label}: " + "; ".join(parts)


def latest_words(judged, newest: str) -> str:
    """The latest capture against the captures before it (analyzers/trend_latest.py), in one part of a line:
    ``night-4, the latest capture: step p50 4.78 ms against 1.59 ms over the 3 captures before it (+201%,
    one-sided p 2e-05): worse beyond their noise, a one-off or a new level (the next capture tells)``."""
    if judged.unit == "ns/call":
        levels = f"{fmt_ns(judged.value)} against {fmt_ns(judged.level)} per call"
    elif judged.unit in ("ms", "ms/step"):
        levels = f"{ms_text(judged.value)} against {ms_text(judged.level)}"
    else:
        levels = f"{judged.value:.3g} against {judged.level:.3g} {judged.unit}"
    change = f"{100.0 * (judged.value - judged.level) / abs(judged.level):+.0f}%, " if judged.level else ""
    said = ("worse beyond their noise, a one-off or a new level (the next capture tells)" if judged.status == "regressed"
            else "worse beyond their spread but not beyond their noise: too few captures to tell (the gate is inconclusive)")
    return (f"{newest}, the latest capture: {_metric_words(judged.metric)} {levels} over the "
            f"{counted(judged.captures, 'capture')} before it ({change}one-sided p {judged.p:.2g}): {said}")


def _first_at_each(changes: list[Change], seen: set[str], wanted) -> list[Change]:
    """The changes ``wanted`` picks, the first at each first bad capture not yet in ``seen`` (which grows)."""
    picked = []
    for change in changes:
        if wanted(change) and change.first_bad not in seen:
            seen.add(change.first_bad)
            picked.append(change)
    return picked


def _levels_words(change: Change) -> str:
    """The levels before and after a change: a duration per call, ms as every ms figure is written
    (wording.ms_text), anything else to three figures with its unit."""
    before, after, unit = change.before.level, change.after.level, change.unit
    if unit == "ns/call":
        return f"{fmt_ns(before)} -> {fmt_ns(after)} per call"
    if unit in ("ms", "ms/step"):
        return f"{ms_text(before).removesuffix(' ms')} -> {ms_text(after)}" + ("/step" if unit == "ms/step" else "")
    return f"{before:.3g} -> {after:.3g} {unit}"


def _budget_shift_words(change: Change) -> str:
    causes = [f"{finding.id} {finding.status}"
              + (f" at {ms_text(finding.after_ms_per_step)}/step" if finding.status == "new"
                 and finding.after_ms_per_step is not None else "") for finding in change.findings]
    return (f"from {change.first_bad} on: {_metric_words(change.metric)} {change.change_pct:+.0f}% "
            f"({_levels_words(change)}), {_direction_words(change)}" + (f"; {', '.join(causes)}" if causes else ""))


def _direction_words(change: Change) -> str:
    """A change's direction with the test behind it: the series' level shift beyond its noise over the
    captures, and, for a step percentile, compare's step test on the two captures either side."""
    basis = "beyond the series' noise over the captures" if change.direction in ("improved", "regressed") else ""
    words = f"{change.direction} ({basis})" if basis else change.direction
    return words + (f"; {change.pair_test}" if change.pair_test else "")


def _quality_shift_words(change: Change) -> str:
    return (f"from {change.first_bad} on: {', '.join(_quality_findings(change))} ({_metric_words(change.metric)} "
            f"{change.change_pct:+.0f}%, {_levels_words(change)}: the answers changed with the deploy)")
