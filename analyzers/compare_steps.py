"""Step time per rank, before -> after: the statistics behind compare's step verdict.

Ranks are matched in order (lowest GPU index first). ``ratio`` = after p50 / before p50; its
95% interval is a percentile bootstrap (:data:`RESAMPLES` resamples, at most :data:`BOOT_MAX`
evenly spaced steps per side) of the ratio of medians, and the change is ``significant`` when a
two-sided Mann-Whitney U test (all steps) rejects "same distribution" at :data:`ALPHA`, the
interval excludes 1, *and* the change is at least the practical threshold (default 5% of the
step). The p99 ratio has its own interval; it is significant when that interval excludes 1 and
the change is at least the threshold. Two captures of one workload always differ a little.

A change that is not significant is one of two things, never confused: ``unchanged`` when the data
shows it small (the test resolved a change under the threshold, or the whole 95% interval lies within
the threshold of 1: 0.95-1.05 at 5%), ``within noise`` when the data cannot tell (the interval
reaches past the threshold and includes 1: decode_rare_prefill's p99 of 400 steps sits just under its
4th longest, 3 of them long, and a resample with a 4th long one moves it 20x). ``within noise`` is
said with the interval and the step counts, and is neither better nor worse.

A p99 is judged only on :data:`P99_MIN_STEPS` steps or more on both sides: under 100 steps numpy's p99
lies between the longest step and the second longest (at (n - 1) x 0.99 of the sorted steps), so it
is the longest step or two, and its interval is theirs; it then reads ``not judged (60 steps; a p99
needs 100)`` (``p99_reason``), whatever its ratio.

**Long steps** (``long_steps``): the rate of steps over :data:`LONG_STEP_FACTOR` x the *before* p50
(one cutoff for both sides: prefill_stall's long steps, measured against the before step) on each
side, tested with a two-sided Fisher exact test (analyzers/ranktest.fisher_p), and their cost, the
time above the before p50 of those steps in ms per step. A change is ``improved`` / ``regressed``
when p < :data:`ALPHA` and the cost moved by at least the threshold x the before p50 the same way as
the rate; ``unchanged`` when no step is long on either side, or the cost moved less than that;
``within noise`` otherwise. A tail too rare for a p99 of 60 steps to decide (3 long steps of 400 ->
5 of 60, Fisher p=0.0013) is decided by its rate.

Two identical samples (the same capture, or a copy of it) are no sample of a change: every ratio is
exactly 1 with the interval [1, 1], p = 1, and every status ``unchanged``, but for a p99 of under
:data:`P99_MIN_STEPS` steps: ``not judged`` there as on any other pair (the same longest step twice
says nothing of a p99 either).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tracetriage.analyzers.comparability import FULL_SAMPLE_STEPS, MIN_STEPS
from tracetriage.analyzers.compare_side import Rank
from tracetriage.analyzers.metrics import LONG_STEP_FACTOR
from tracetriage.wording import WITHIN_NOISE, long_steps_words

ALPHA = 0.05  # Mann-Whitney U, two-sided
RESAMPLES = 999  # bootstrap resamples of the median ratio (percentile interval)
BOOT_MAX = 1000  # steps per side fed to the bootstrap (evenly spaced); the test uses all of them
BOOTSTRAP_SEED = 20261201  # fixed: the same inputs give the same interval
NOT_MEASURED = "not measured"
NOT_JUDGED = "not judged"
P99_MIN_STEPS = FULL_SAMPLE_STEPS  # steps per side a p99 is judged on: under 100 it is the longest step or two


@dataclass(frozen=True, slots=True)
class StepVerdict:
    """The ranks' step p50 and p99 statuses in one, whether the p50 ``improved`` or ``regressed``, and
    the median of the ranks' p50 ratios after / before: the ``step`` the catalog's conditions read."""

    status: str
    improved: bool
    regressed: bool
    ratio: float | None
    p99_status: str
    long_status: str = NOT_MEASURED


@dataclass(frozen=True, slots=True)
class LongSteps:
    """The steps over :data:`LONG_STEP_FACTOR` x the before p50 (``cutoff_ns``) on each side: how many
    of how many, their time above the before p50 in ms per step, the Fisher exact test's p of the two
    rates, and the change's status."""

    factor: float
    cutoff_ns: int
    before: int
    before_steps: int
    after: int
    after_steps: int
    before_ms_per_step: float
    after_ms_per_step: float
    p_value: float
    status: str

    def significant(self) -> bool:
        return self.status in ("improved", "regressed")

    def text(self) -> str:
        """``long steps 3/400 -> 5/60 over 3x the before p50 (64.82 ms), Fisher p=0.0013, ...: regressed``."""
        return long_steps_words(self)

    def to_contract(self) -> dict:
        return {"factor": self.factor, "cutoff_ns": self.cutoff_ns, "before": self.before, "before_steps": self.before_steps,
                "after": self.after, "after_steps": self.after_steps,
                "before_ms_per_step": self.before_ms_per_step, "after_ms_per_step": self.after_ms_per_step,
                "p_value": self.p_value, "significant": self.significant(), "status": self.status}


@dataclass(frozen=True, slots=True)
class StepTimeRow:
    """One matched rank's step p50 and p99, before and after (ns), their ratios after / before
    with 95% bootstrap intervals, the test's p value, and each change's status (improved,
    regressed, unchanged, not measured; not judged when the pair is not comparable)."""

    rank: int
    before_pid: int
    after_pid: int
    before_count: int
    after_count: int
    before_p50_ns: int | None
    after_p50_ns: int | None
    before_p99_ns: int | None
    after_p99_ns: int | None
    ratio: float | None = None
    ci95: tuple[float, float] | None = None
    p_value: float | None = None
    significant: bool = False
    status: str = NOT_MEASURED
    p99_ratio: float | None = None
    p99_ci95: tuple[float, float] | None = None
    p99_significant: bool = False
    p99_status: str = NOT_MEASURED
    p99_reason: str | None = None
    long_steps: LongSteps | None = None

    def not_judged(self) -> StepTimeRow:
        """The row of an incomparable pair: its numbers shown, nothing judged on them."""
        long_steps = None if self.long_steps is None else replace(self.long_steps, status=NOT_JUDGED)
        return replace(self, significant=False, status=NOT_JUDGED, p99_significant=False, p99_status=NOT_JUDGED,
                       long_steps=long_steps)

    @property
    def long_status(self) -> str:
        return NOT_MEASURED if self.long_steps is None else self.long_steps.status

    def to_contract(self) -> dict:
        return {"rank": self.rank, "before_pid": self.before_pid, "after_pid": self.after_pid,
                "before_count": self.before_count, "after_count": self.after_count,
                "before_p50_ns": self.before_p50_ns, "after_p50_ns": self.after_p50_ns,
                "before_p99_ns": self.before_p99_ns, "after_p99_ns": self.after_p99_ns,
                "ratio": self.ratio, "ci95": _listed(self.ci95), "p_value": self.p_value,
                "significant": self.significant, "status": self.status,
                "p99_ratio": self.p99_ratio, "p99_ci95": _listed(self.p99_ci95),
                "p99_significant": self.p99_significant, "p99_status": self.p99_status,
                "p99_reason": self.p99_reason,
                "long_steps": None if self.long_steps is None else self.long_steps.to_contract()}


def _listed(interval: tuple[float, float] | None) -> list[float] | None:
    return None if interval is None else list(interval)


def _spaced(durations: np.ndarray, limit: int) -> np.ndarray:
    """At most ``limit`` of ``durations``, evenly spaced."""
    return durations if durations.size <= limit else durations[np.linspace(0, durations.size - 1, limit).astype(np.int64)]


def _row_percentile(draws: np.ndarray, percentile: float) -> np.ndarray:
    """``np.percentile(draws, percentile, axis=1)`` of finite values, bit for bit: numpy's linear
    method (the order statistics at floor and ceil of (n - 1) q, and its lerp, which takes the
    upper neighbour from gamma 0.5 on) read from rows sorted once. numpy selects them by a
    partition of a moved-axis copy, slow on many short rows: 999 resamples of 40 steps 0.81 ms,
    sorted 0.15 ms."""
    rows = np.sort(draws, axis=1)
    size = rows.shape[1]
    virtual = (size - 1) * np.true_divide(percentile, 100)
    if virtual >= size - 1:
        return rows[:, -1].copy()
    low = 0 if virtual < 0 else int(np.floor(virtual))
    gamma = float(virtual - low)
    below, above = rows[:, low], rows[:, low + 1]
    diff = above - below
    return above - diff * (1 - gamma) if gamma >= 0.5 else below + diff * gamma


def step_test(rank: int, before_rank: Rank, after_rank: Rank, threshold_pct: float) -> StepTimeRow:
    """p50 and p99 before -> after of one matched rank with bootstrap intervals of their ratios
    (after / before), a Mann-Whitney U test, and whether the change is beyond noise and the threshold."""
    from tracetriage.analyzers.ranktest import mannwhitney_p

    before = np.asarray(before_rank.durations, np.float64)
    after = np.asarray(after_rank.durations, np.float64)
    row = StepTimeRow(
        rank=rank, before_pid=before_rank.pid, after_pid=after_rank.pid,
        before_count=int(before.size), after_count=int(after.size),
        before_p50_ns=int(np.median(before)) if before.size else None, after_p50_ns=int(np.median(after)) if after.size else None,
        before_p99_ns=int(np.percentile(before, 99)) if before.size else None,
        after_p99_ns=int(np.percentile(after, 99)) if after.size else None)
    if before.size < MIN_STEPS or after.size < MIN_STEPS or not np.median(before) > 0:
        return row
    fewest = min(before.size, after.size)
    p99_reason = None if fewest >= P99_MIN_STEPS else f"not judged ({fewest} steps; a p99 needs {P99_MIN_STEPS})"
    if np.array_equal(before, after):  # one sample twice: nothing moved, and no resampling says otherwise
        p99_ci95, p99_status = ((1.0, 1.0), "unchanged") if p99_reason is None else (None, NOT_JUDGED)
        return replace(row, ratio=1.0, ci95=(1.0, 1.0), p_value=1.0, status="unchanged", p99_ratio=1.0,
                       p99_ci95=p99_ci95, p99_status=p99_status, p99_reason=p99_reason,
                       long_steps=long_step_test(before, after, threshold_pct))
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    before_sample, after_sample = _spaced(before, BOOT_MAX), _spaced(after, BOOT_MAX)

    def interval(percentile) -> tuple[float, float]:
        before_draws = rng.integers(0, before_sample.size, (RESAMPLES, before_sample.size))
        after_draws = rng.integers(0, after_sample.size, (RESAMPLES, after_sample.size))
        ratios = (_row_percentile(after_sample[after_draws], percentile)
                  / np.maximum(_row_percentile(before_sample[before_draws], percentile), 1.0))
        low, high = np.percentile(ratios, [2.5, 97.5])
        return round(float(low), 4), round(float(high), 4)

    p_value = mannwhitney_p(before, after)
    ratio = float(np.median(after) / np.median(before))
    ci95 = interval(50)
    status = judged_status(ratio, ci95, p_value < ALPHA and _excludes_one(ci95), threshold_pct)
    p99_ratio = float(np.percentile(after, 99) / max(np.percentile(before, 99), 1.0))
    if p99_reason is not None:  # the longest step or two: no percentile to test
        p99_ci95, p99_status = None, NOT_JUDGED
    else:
        p99_ci95 = interval(99)
        p99_status = judged_status(p99_ratio, p99_ci95, _excludes_one(p99_ci95), threshold_pct)
    return replace(row, ratio=round(ratio, 4), ci95=ci95, p_value=float(f"{p_value:.3g}"),
                   significant=status in ("improved", "regressed"), status=status,
                   p99_ratio=round(p99_ratio, 4), p99_ci95=p99_ci95,
                   p99_significant=p99_status in ("improved", "regressed"), p99_status=p99_status,
                   p99_reason=p99_reason, long_steps=long_step_test(before, after, threshold_pct))


def long_step_test(before: np.ndarray, after: np.ndarray, threshold_pct: float) -> LongSteps:
    """The long steps of both sides against one cutoff, :data:`LONG_STEP_FACTOR` x the before p50: their
    counts, their time above the before p50 per step, the Fisher exact test of the two rates, and the
    status (module docstring)."""
    from tracetriage.analyzers.ranktest import fisher_p

    p50 = float(np.median(before))
    cutoff = LONG_STEP_FACTOR * p50
    long_before, long_after = before[before > cutoff], after[after > cutoff]
    cost_before = float(np.sum(long_before - p50) / before.size / 1e6)
    cost_after = float(np.sum(long_after - p50) / after.size / 1e6)
    p_value = fisher_p(long_before.size, before.size, long_after.size, after.size)
    rate_change = long_after.size / after.size - long_before.size / before.size
    cost_change = cost_after - cost_before
    band_ms = threshold_pct / 100.0 * p50 / 1e6
    if not (long_before.size or long_after.size) or abs(cost_change) < band_ms:
        status = "unchanged"
    elif p_value < ALPHA and rate_change * cost_change > 0:
        status = "regressed" if rate_change > 0 else "improved"
    else:
        status = WITHIN_NOISE
    return LongSteps(LONG_STEP_FACTOR, int(cutoff), int(long_before.size), int(before.size), int(long_after.size),
                     int(after.size), round(cost_before, 4), round(cost_after, 4), float(f"{p_value:.3g}"), status)


def _excludes_one(interval: tuple[float, float]) -> bool:
    return interval[0] > 1.0 or interval[1] < 1.0


def judged_status(ratio: float, interval: tuple[float, float], resolved: bool, threshold_pct: float) -> str:
    """A ratio after / before judged with its 95% interval: improved / regressed when the test
    ``resolved`` a change (the interval excludes 1) of at least the threshold; ``unchanged`` when the
    data shows the change small (resolved under the threshold, or the whole interval within the
    threshold of 1); else :data:`WITHIN_NOISE`: not significant, the data cannot tell."""
    band = threshold_pct / 100.0
    if resolved and abs(ratio - 1.0) >= band:
        return _direction(ratio)
    if resolved or (interval[0] >= 1.0 - band and interval[1] <= 1.0 + band):
        return "unchanged"
    return WITHIN_NOISE


def _direction(ratio: float) -> str:
    return "improved" if ratio < 1 else "regressed"


def overall(statuses: list[str]) -> str:
    """The ranks' statuses in one: mixed when some improved and some regressed, within noise when none
    did and some could not tell, not measured when none was measured, not judged when none of those
    measured was judged (a p99 of too few steps; those not judged are left out otherwise)."""
    judged = [status for status in statuses if status != NOT_MEASURED]
    if not judged:
        return NOT_MEASURED
    if all(status == NOT_JUDGED for status in judged):
        return NOT_JUDGED
    judged = [status for status in judged if status != NOT_JUDGED]
    up, down = "improved" in judged, "regressed" in judged
    if up or down:
        return "mixed" if up and down else "improved" if up else "regressed"
    return WITHIN_NOISE if WITHIN_NOISE in judged else "unchanged"

