"""Per-step figures, before -> after: each metric's change and whether it counts, and the one
way compare writes milliseconds.

A metric's change counts when it is at least the threshold x the before step p50 (ms per
step figures), :data:`SHARE_NOISE_PTS` points (shares), or the threshold in relative terms
(percentiles, rates, counts per step; a count also by at least half a call). Its direction
is ``improved`` / ``regressed`` by the metric's better side, ``changed`` for a metric that
is neither better nor worse by itself, ``unchanged`` within noise, ``n/a`` when a side lacks it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tracetriage.analyzers.compare_side import round4
from tracetriage.analyzers.timeline import CAUSES
from tracetriage.wording import ms_text

SHARE_NOISE_PTS = 5.0  # a change of a share (busy %) under this many points is no change
JUDGED_DIRECTIONS = ("improved", "regressed", "mixed")

METRICS = [
    # name, unit, lower is better
    ("step_p50_ms", "ms", True), ("step_p99_ms", "ms", True),
    # more compute per step is more work, or slower kernels: a change, neither better nor worse by itself
    ("compute_ms", "ms/step", None), ("collective_ms", "ms/step", True), ("copy_ms", "ms/step", True),
    ("idle_ms", "ms/step", True), *[(f"idle_{cause}_ms", "ms/step", True) for cause in CAUSES],
    ("busy_pct", "%", False),
    ("launches_per_step", "calls/step", True), ("graph_launches_per_step", "calls/step", None),
    ("syncs_per_step", "calls/step", True), ("dtoh_copies_per_step", "copies/step", True),
    ("ttft_p50_ms", "ms", True), ("ttft_p99_ms", "ms", True), ("tpot_p50_ms", "ms", True), ("tpot_p99_ms", "ms", True),
    ("itl_p50_ms", "ms", True), ("itl_p99_ms", "ms", True), ("e2el_p50_ms", "ms", True), ("throughput_rps", "req/s", False),
]
SERVING_BUDGETS = ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "itl_p99_ms", "throughput_rps")


@dataclass(frozen=True, slots=True)
class MetricRow:
    """One figure before and after (4 decimals), its change (after - before), direction and
    whether the change is beyond noise."""

    name: str
    unit: str
    before: float | None
    after: float | None
    change: float | None
    direction: str
    significant: bool

    def judged_by(self, status: str) -> MetricRow:
        """The row of a step percentile, judged by the step test's ``status``, not by its difference."""
        judged = status in JUDGED_DIRECTIONS
        return replace(self, significant=judged,
                       direction=status if judged else "unchanged" if status == "unchanged" else "n/a")

    def not_judged(self) -> MetricRow:
        return replace(self, direction="not judged", significant=False)

    def to_contract(self) -> dict:
        return {"name": self.name, "unit": self.unit, "before": self.before, "after": self.after,
                "change": self.change, "direction": self.direction, "significant": self.significant}


def metric_rows(figures_before: dict, figures_after: dict, noise_ms: float | None, threshold_pct: float) -> list[MetricRow]:
    """A row per metric measured on either side, in :data:`METRICS` order."""
    rows = []
    for name, unit, lower_better in METRICS:
        before, after = figures_before.get(name), figures_after.get(name)
        if before is None and after is None:
            continue
        change = None if before is None or after is None else after - before
        significant = change is not None and _beyond_noise(change, before, unit, noise_ms, threshold_pct)
        rows.append(MetricRow(name, unit, round4(before), round4(after), round4(change),
                              _direction(change, significant, lower_better), significant))
    return rows


def _beyond_noise(change: float, before: float, unit: str, noise_ms: float | None, threshold_pct: float) -> bool:
    if unit == "%":
        return abs(change) >= SHARE_NOISE_PTS
    if unit == "ms/step" and noise_ms is not None:
        return abs(change) >= noise_ms
    # a percentile, a rate or a count: relative to its own size
    return abs(change) >= threshold_pct / 100.0 * max(abs(before), 1e-12) and abs(change) >= (
        0.5 if unit.startswith(("calls", "copies")) else 0.0)


def _direction(change: float | None, significant: bool, lower_better: bool | None) -> str:
    if change is None:
        return "n/a"
    if not significant:
        return "unchanged"
    if lower_better is None:  # neither better nor worse by itself
        return "changed"
    return "improved" if (change < 0) == lower_better else "regressed"


# ---------------------------------------------------------------------------
# Milliseconds and figures in words


def figure_text(value, unit: str = "") -> str:
    """A figure in words by its unit: ms by :func:`ms_text`, shares to a decimal, yes/no, else 3 figures."""
    if value is None:
        return "not measured"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if unit.startswith("ms"):
        return ms_text(value)
    if unit == "%":
        return f"{value:.1f}%"
    return f"{value:,.3g}" if isinstance(value, float) else f"{value:,}"
