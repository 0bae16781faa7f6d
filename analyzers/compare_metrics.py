"""Per-step figures, before -> after: each metric's change and whether it counts, and the one
way compare writes milliseconds.

A metric's change counts when it is at least the threshold x the before step p50 (ms per
step figures), :data:`SHARE_NOISE_PTS` points (shares), or the threshold in relative terms
(percentiles, rates, counts per step; a count also by at least half a call). Its direction
is ``improved`` / ``regressed`` by the metric's better side, ``changed`` for a metric that
is neither better nor worse by itself, ``unchanged`` within noise, ``n/a`` when a side lacks it.

**What moved** (:func:`movers`): the window's components in ms per step (compute, exposed
collective, copies only, idle by cause) rank by rank, ranks matched in order. A component
moved when its change is at least the threshold x that rank's before step p50 (``beyond_noise``),
or when it grew by at least :data:`GROWTH_PCT` % of itself and by at least
:data:`GROWTH_FLOOR_PCT_OF_STEP` % of the step (``grown``: a component that grew by a third is a
cause in the making even while it is under the step threshold). Movers rank by the size of their
change, across ranks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from tracetriage.analyzers.compare_side import Rank, Side, round4
from tracetriage.analyzers.timeline import CAUSES  # the host's causes, then the GPU's dependency waits
from tracetriage.model import collective_op
from tracetriage.wording import WITHIN_NOISE, ms_text

SHARE_NOISE_PTS = 5.0  # a change of a share (busy %) under this many points is no change
GROWTH_PCT = 25.0  # a component that grew by this share of itself is reported as grown, even under the step threshold
GROWTH_FLOOR_PCT_OF_STEP = 1.0  # ... when it grew by at least this share of the step (finer is jitter of two captures)
JUDGED_DIRECTIONS = ("improved", "regressed", "mixed")

METRICS = [
    # name, unit, lower is better
    ("step_p50_ms", "ms", True), ("step_p99_ms", "ms", True),
    # more compute per step is more work, or slower kernels: a change, neither better nor worse by itself
    ("compute_ms", "ms/step", None), ("collective_ms", "ms/step", True), ("copy_ms", "ms/step", True),
    ("idle_ms", "ms/step", True), *[(f"idle_{cause}_ms", "ms/step", True) for cause in CAUSES],
    # a share of each side's own window: a change, never better or worse by itself (the per-step times judge)
    ("busy_pct", "%", None),
    ("launches_per_step", "calls/step", True), ("graph_launches_per_step", "calls/step", None),
    ("syncs_per_step", "calls/step", True), ("dtoh_copies_per_step", "copies/step", True),
    ("ttft_p50_ms", "ms", True), ("ttft_p99_ms", "ms", True), ("tpot_p50_ms", "ms", True), ("tpot_p99_ms", "ms", True),
    ("itl_p50_ms", "ms", True), ("itl_p99_ms", "ms", True), ("e2el_p50_ms", "ms", True), ("throughput_rps", "req/s", False),
    # the traffic's shape per request (serving.requests): a change, neither better nor worse by itself
    ("input_len_mean", "tokens", None), ("output_len_mean", "tokens", None),
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
                       direction=status if judged or status in ("unchanged", WITHIN_NOISE, "not judged") else "n/a")

    def not_judged(self) -> MetricRow:
        return replace(self, direction="not judged", significant=False)

    def explained(self, direction: str) -> MetricRow:
        """The row with the direction its cause gives it (an end-to-end latency that moved with the
        outputs' length is ``changed``: neither better nor worse by itself)."""
        return replace(self, direction=direction)

    def to_contract(self) -> dict:
        return {"name": self.name, "unit": self.unit, "before": self.before, "after": self.after,
                "change": self.change, "direction": self.direction, "significant": self.significant,
                "statistic": statistic(self.name, self.unit)}


def statistic(name: str, unit: str) -> str:
    """The statistic a metric's figure is, said beside it (the JSON's ``statistic``; the reports' labels): the
    step percentiles and serving percentiles by their own name, ms per step a mean (a window slice over the
    steps), a count per step the median step's, a share of the window, a rate, a mean per request."""
    percentile = re.search(r"_(p\d\d)_ms$", name)
    if percentile:
        return percentile.group(1)
    return {"ms/step": "mean", "calls/step": "median", "copies/step": "median", "%": "share of the window",
            "req/s": "rate", "tokens": "mean"}.get(unit, "mean")


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


# ---------------------------------------------------------------------------
# What moved, per rank

COMPONENT_WORDS = {"compute_ms": "compute, collectives excluded", "collective_ms": "exposed collective", "copy_ms": "copies only",
                   "idle_sync_ms": "idle in blocking syncs", "idle_memcpy_sync_ms": "idle in synchronous copies",
                   "idle_launch_ms": "idle in launch calls", "idle_other_cuda_ms": "idle in other CUDA/HIP calls",
                   "idle_host_ms": "host idle (no CUDA call)", "idle_unknown_ms": "idle, cause unknown",
                   "idle_dependency_ms": "idle with its next work queued (a dependency wait)"}
COMPONENTS = (("compute_ms", ["compute"]), ("collective_ms", ["collective"]), ("copy_ms", ["copy"]),
              *[(f"idle_{cause}_ms", [f"idle:*:{cause}"]) for cause in CAUSES])


@dataclass(frozen=True, slots=True)
class Mover:
    """One component of one matched rank that moved: ms per step on each side, the change in ms
    and in % of its before value, and why it counts (beyond the step threshold, or grown)."""

    component: str
    label: str
    rank: int
    before_ms: float
    after_ms: float
    change_ms: float
    change_pct: float | None
    beyond_noise: bool
    grown: bool

    def to_contract(self) -> dict:
        return {"component": self.component, "label": self.label, "rank": self.rank, "before_ms": round4(self.before_ms),
                "after_ms": round4(self.after_ms), "change_ms": round4(self.change_ms),
                "change_pct": None if self.change_pct is None else round(self.change_pct, 1),
                "beyond_noise": self.beyond_noise, "grown": self.grown,
                "statistic": "mean"}  # ms per step: the component's slice of the window over the steps


def movers(before: Side, after: Side, threshold_pct: float) -> list[Mover]:
    """The components that moved on each matched rank with steps on both sides, largest change first."""
    found = []
    for index, (rank_before, rank_after) in enumerate(zip(before.ranks, after.ranks)):
        step_ns = rank_before.p50_ns
        if not step_ns or not rank_after.step_count:
            continue
        step_ms = step_ns / 1e6
        for component, patterns in COMPONENTS:
            if component == "idle_dependency_ms" and not (before.dependency_measured and after.dependency_measured):
                continue  # not measured on a side whose clocks are offset (Side.dependency_measured)
            before_ms, after_ms = before.rank_slice_ms(rank_before, patterns), after.rank_slice_ms(rank_after, patterns)
            if before_ms is None or after_ms is None:
                continue
            change = after_ms - before_ms
            change_pct = 100.0 * change / before_ms if before_ms > 0 else None
            beyond = abs(change) >= threshold_pct / 100.0 * step_ms
            grown = (change >= GROWTH_FLOOR_PCT_OF_STEP / 100.0 * step_ms
                     and (change_pct is None or change_pct >= GROWTH_PCT))
            if beyond or grown:
                found.append(Mover(component, _component_label(component, rank_before, rank_after, change), index,
                                   before_ms, after_ms, change, change_pct, beyond, grown))
    found.sort(key=lambda mover: (-abs(mover.change_ms), mover.rank, mover.component))
    return found


def _component_label(component: str, rank_before: Rank, rank_after: Rank, change: float) -> str:
    """The component in words; exposed collective time named by the collective that ran most on
    the side where the time is larger (``exposed SendRecv``)."""
    if component != "collective_ms":
        return COMPONENT_WORDS[component]
    busier = rank_after if change > 0 else rank_before
    time_of: dict[str, int] = {}
    for device in busier.devices:
        for kernel in device.kernels:
            operation = collective_op(kernel.name)
            if operation:
                time_of[operation] = time_of.get(operation, 0) + kernel.total_ns
    return f"exposed {max(time_of, key=time_of.get)}" if time_of else COMPONENT_WORDS[component]


def mover_text(mover: Mover, threshold_pct: float, ranks: int) -> str:
    """One mover in words, its figures as the contract rounds them:
    ``exposed SendRecv +0.301 ms/step on rank1 (grew 37%, below the 5%-of-step threshold)``."""
    text = f"{mover.label} {ms_text(round4(mover.change_ms), sign='+')}/step" + (f" on rank{mover.rank}" if ranks > 1 else "")
    if mover.grown and not mover.beyond_noise:
        grew = f"grew {round(mover.change_pct, 1):.0f}%" if mover.change_pct is not None else "grew from nothing"
        text += f" ({grew}, below the {threshold_pct:g}%-of-step threshold)"
    return text
