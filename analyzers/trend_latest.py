"""The latest capture of a budget series judged on its own (analyzers/trend.py, the gate).

A level shift needs two captures on each side (PELT's minimum segment), and a one-off point is an
outlier only against neighbours on both sides: the newest capture has no capture after it, so a jump
there is neither, whatever its size (new-user trial 53: four nightly captures whose last step p50 was
2.5x the others passed the gate). The first capture is never an outlier for the same reason, with no
history before it; the last one is judged against its history instead:

* **History**: the captures of the latest segment before the latest capture (after the last level
  shift of the series; all of them without one), outliers replaced by their neighbours' median.
* **Test**: a one-sided prediction test of the latest value against them: with n earlier captures of
  mean m and standard deviation s, ``(latest - m) / (s * sqrt(1 + 1/n))`` is Student-t with n - 1
  degrees of freedom when nothing changed (normal noise), so the few-captures case pays for its
  uncertain s (n = 3: the 0.1% bound is 22.3 s, not 3.1 s). s is floored at a tenth of the practical
  minimum, as the series' noise is (noise under it decides nothing).
* **regressed** (the gate fails): worse than m by the practical minimum and p < :data:`FAIL_P`;
  **undecided** (the gate is inconclusive): worse by the practical minimum and p < :data:`UNDECIDED_P`
  but not under :data:`FAIL_P`: beyond what the history's spread explains, not far enough beyond it to
  call, the next capture (or a ``--baseline``) decides. Otherwise the latest capture is within its
  history's noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tracetriage.analyzers.trend_changes import practical_min

FAIL_P = 0.001  # one-sided: a flat series fails the gate on one latest capture in a thousand
UNDECIDED_P = 0.01  # one-sided: between the two, the gate says it could not tell
MIN_HISTORY = 2  # earlier captures in the latest segment: fewer give no spread to test against


@dataclass(frozen=True, slots=True)
class Latest:
    """The latest capture of one budget series against the earlier captures of its segment: ``status``
    regressed or undecided, the history's mean, standard deviation (as tested: floored) and count, the
    latest value and the one-sided p of the prediction test."""

    metric: str
    unit: str
    status: str
    level: float
    sd: float
    captures: int
    value: float
    p: float

    def to_contract(self, group: str, latest: str) -> dict:
        return {"group": group, "metric": self.metric, "unit": self.unit, "status": self.status, "latest": latest,
                "value": round(self.value, 6), "level": round(self.level, 6), "sd": round(self.sd, 6),
                "captures": self.captures, "p": float(f"{self.p:.3g}"),
                "change_pct": round(100.0 * (self.value - self.level) / abs(self.level), 6) if self.level else None}


def t_sf(t: float, df: int) -> float:
    """P(T > t) for Student's t with ``df`` (a whole number >= 1) degrees of freedom, by the finite series
    of Abramowitz & Stegun 26.7.3 / 26.7.4 (no scipy import: scipy.stats costs a trend 1-3 s)."""
    if not math.isfinite(t):
        return 0.0 if t > 0 else 1.0
    theta = math.atan(abs(t) / math.sqrt(df))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2:  # odd: A = (2/pi) (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...))
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 3) // 2 + 1):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        inside = 2.0 / math.pi * (theta + s * math.cos(theta) * total)
    else:  # even: A = sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
        term, total = 1.0, 1.0
        for k in range(1, (df - 2) // 2 + 1):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        inside = s * total
    upper = max(0.0, (1.0 - inside) / 2.0)
    return upper if t >= 0 else 1.0 - upper


def judge_latest(series: dict, changes, cases: list, step_p50: float | None, threshold_pct: float) -> list[Latest]:
    """Each budget series (``series``: name -> (unit, lower is better, values per case)) whose latest
    capture is worse than its history beyond the noise (regressed) or beyond its spread (undecided); the
    others are left out. ``changes``: the group's outliers and level shifts (the segment, the outliers'
    replacements)."""
    from tracetriage.analyzers.trend_verdict import budget_series

    out = []
    last = len(cases) - 1
    for metric in budget_series(series):
        if metric not in series or series[metric][1] is None:
            continue
        unit, lower, values = series[metric]
        judged = _judged(metric, unit, lower, np.asarray(values, np.float64), last, changes, step_p50, threshold_pct)
        if judged is not None:
            out.append(judged)
    return out


def _judged(metric, unit, lower, values, last, changes, step_p50, threshold_pct) -> Latest | None:
    if last < 1 or not np.isfinite(values[last]):
        return None  # the latest capture did not measure it: nothing of it to judge here
    mine = [change for change in changes if change.metric == metric]
    starts = [change.first_row for change in mine if change.kind == "level_shift" and change.first_row < last]
    start = max(starts, default=0)
    history = values[start:last].copy()
    for change in mine:  # an outlier of the history counts as its neighbours' median, as in the level search
        if change.kind == "outlier" and start <= change.first_row < last and change.before.level is not None:
            history[change.first_row - start] = change.before.level
    history = history[np.isfinite(history)]
    if history.size < MIN_HISTORY:
        return None
    level, value = float(np.mean(history)), float(values[last])
    minimum = practical_min(unit, level, step_p50, threshold_pct)
    worse = (value - level) if lower else (level - value)
    if worse < minimum:
        return None
    sd = max(float(np.std(history, ddof=1)), 0.1 * minimum, 1e-12 * max(abs(level), 1e-12))
    p = t_sf(worse / (sd * math.sqrt(1.0 + 1.0 / history.size)), int(history.size) - 1)
    if p >= UNDECIDED_P:
        return None
    return Latest(metric, unit, "regressed" if p < FAIL_P else "undecided", level, sd, int(history.size), value, p)
