"""Work rate, before -> after, of captures without steps (a benchmark loop, a micro-benchmark).

A capture without steps has no per-step time, and its window runs from the first to the last GPU
activity: a kernel that got 2x faster shortens the window, so busy % falls while the work got
faster. Such a pair is judged on the time per call of the same kernels instead, never on busy %.

* **Matched**: devices in rank order (as compare pairs them), kernels by name on each matched pair;
  a kernel counts when both sides sampled at least :data:`MIN_CALLS` of its calls (the analysis
  keeps up to 200 per kernel of a step-less capture, ``durations_ns``) and it took time on both.
* **Per kernel**: ``ratio`` = after time per call / before time per call (total ns / calls); its
  95% interval is a percentile bootstrap (:data:`RESAMPLES` resamples) of the ratio of the sampled
  calls' means, scaled to the exact ratio; a two-sided Mann-Whitney U test on the sampled calls;
  ``significant`` when p < :data:`ALPHA`, the interval excludes 1 and the change is at least the
  threshold (default 5%).
* **Per device**: ``ratio`` = sum over the common kernels of before calls x after time per call /
  sum of before calls x before time per call: what the before capture's calls of those kernels would
  take at the after speed, over what they took. Its interval is the same bootstrap, kernel by kernel;
  it is ``improved`` / ``regressed`` when the interval excludes 1 and the change is at least the
  threshold, else ``unchanged``. ``covered`` says which share of each side's kernel time the common
  kernels are: what the ratio speaks for. Under :data:`MIN_COVERED_PCT` on either side the device is
  not judged, and the pair is refused: most of the work ran in kernels one side has and the other
  does not (another implementation, or a graph-level capture whose replays hide their kernels), and
  the common kernels' speed says nothing of it.
* **Calls per second** (the loop's rate, which launch overhead or host work moves while every
  kernel keeps its speed): the common kernels' calls / window seconds, after / before (higher is
  better). Its noise is the spread of the rate over the window: the calls counted in each of 20
  equal parts of it (``calls_per_bin``), a bootstrap of their mean ratio and a Mann-Whitney U on
  the parts' rates; judged like time per call (not judged, no interval, where a resample of the
  before parts can hold no call: the ratio is then unbounded). Not judged where a side is a graph-level capture: its
  graph replays' kernels are not recorded, so the calls it counts are not the calls it ran (a graph
  capture of the same loop counts only the kernels launched outside its graphs).
* **Refused** (the pair is not judged, and why): no kernel name common to a matched device pair, or
  none with :data:`MIN_CALLS` calls on both sides, or a side saved without call samples.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tracetriage.analyzers.compare_side import Side, round4
from tracetriage.records.trace import Device, DeviceKernel

MIN_CALLS = 5  # sampled calls of a kernel on each side below this: no distribution to compare
ALPHA = 0.05  # Mann-Whitney U, two-sided (as the step test)
RESAMPLES = 999  # bootstrap resamples of the ratios (as the step test)
BOOTSTRAP_SEED = 20261201  # fixed: the same inputs give the same interval
MIN_COVERED_PCT = 80.0  # the common kernels' share of either side's kernel time under this: the device is not judged
TOP_KERNEL_ROWS = 10  # kernel rows per device in the output: the largest movers (before calls x change per call)
NOT_JUDGED = "not judged"


@dataclass(frozen=True, slots=True)
class KernelRate:
    """One kernel on one matched device pair: calls in the window and mean time per call (ns) on
    each side, the ratio after / before with its 95% interval, the Mann-Whitney p, and its status."""

    device: str
    name: str
    before_calls: int
    after_calls: int
    before_ns_per_call: float
    after_ns_per_call: float
    ratio: float
    ci95: tuple[float, float]
    p_value: float
    significant: bool
    status: str

    def to_contract(self) -> dict:
        return {"device": self.device, "name": self.name, "before_calls": self.before_calls, "after_calls": self.after_calls,
                "before_ns_per_call": round4(self.before_ns_per_call), "after_ns_per_call": round4(self.after_ns_per_call),
                "ratio": self.ratio, "ci95": list(self.ci95), "p_value": self.p_value, "significant": self.significant,
                "status": self.status}


@dataclass(frozen=True, slots=True)
class DeviceRate:
    """One matched device pair: how many kernels it was judged on, the share of each side's kernel
    time they cover (%), the common kernels' calls per second of window on each side with the ratio
    after / before, its interval, p and status, and the time-per-call ratio with its interval and
    status (``ratio`` None: nothing to judge, ``reason`` why)."""

    rank: int
    device: str
    kernels: int
    before_covered_pct: float | None
    after_covered_pct: float | None
    before_calls_per_s: float | None
    after_calls_per_s: float | None
    ratio: float | None
    ci95: tuple[float, float] | None
    significant: bool
    status: str
    reason: str | None
    rate_ratio: float | None = None
    rate_ci95: tuple[float, float] | None = None
    rate_p_value: float | None = None
    rate_status: str = "not measured"

    def not_judged(self) -> DeviceRate:
        return replace(self, significant=False, status=NOT_JUDGED, rate_status=NOT_JUDGED)

    def to_contract(self) -> dict:
        return {"rank": self.rank, "device": self.device, "kernels": self.kernels,
                "before_covered_pct": round4(self.before_covered_pct), "after_covered_pct": round4(self.after_covered_pct),
                "before_calls_per_s": round4(self.before_calls_per_s), "after_calls_per_s": round4(self.after_calls_per_s),
                "ratio": self.ratio, "ci95": None if self.ci95 is None else list(self.ci95),
                "significant": self.significant, "status": self.status, "reason": self.reason,
                "rate_ratio": self.rate_ratio, "rate_ci95": None if self.rate_ci95 is None else list(self.rate_ci95),
                "rate_p_value": self.rate_p_value, "rate_status": self.rate_status}


@dataclass(frozen=True, slots=True)
class WorkRate:
    """The work-rate comparison of a step-less pair: per device and the kernels that moved most."""

    devices: tuple[DeviceRate, ...]
    kernels: tuple[KernelRate, ...]

    def refusal(self) -> str | None:
        """Why the pair cannot be judged on work rate (None: at least one device pair was judged, and none
        left unjudged for what its common kernels cover)."""
        uncovered = next((device.reason for device in self.devices if device.ratio is not None and device.reason), None)
        if uncovered:
            return uncovered
        if any(device.ratio is not None for device in self.devices):
            return None
        if not self.devices:
            return "no device on both sides to compare kernels on"
        return self.devices[0].reason

    def not_judged(self) -> WorkRate:
        """The work rate of an incomparable pair: its devices' figures shown, no status, no kernel judged."""
        return WorkRate(tuple(device.not_judged() for device in self.devices), ())

    def to_contract(self, threshold_pct: float) -> dict:
        return {"method": (f"each common kernel's time per call (total / calls), after / before; 95% interval by a percentile "
                           f"bootstrap ({RESAMPLES} resamples) of the sampled calls, two-sided Mann-Whitney U on them; a device "
                           "is the before calls of its common kernels timed at the after speed over their before time, "
                           f"judged when its interval excludes 1 and the change is at least {threshold_pct:g}%; the common "
                           "kernels' calls per second, after / before, with a bootstrap and a Mann-Whitney U over the calls "
                           "in 20 equal parts of each window, judged the same way; busy % is not judged (a faster kernel "
                           "shortens a step-less window)"),
                "min_calls": MIN_CALLS,
                "devices": [device.to_contract() for device in self.devices],
                "kernels": [kernel.to_contract() for kernel in self.kernels]}


def is_stepless(side: Side) -> bool:
    """A side with devices whose window is its GPU activity, not its steps: no steps on any rank, or too few
    for the window to be theirs (one or two engine iterations or ProfilerStep ranges: steps.MIN_STEPS)."""
    return bool(side.devices) and not str(side.record.window.source or "").startswith("steps")


def work_rate(before: Side, after: Side, threshold_pct: float) -> WorkRate:
    """Each matched device pair's time per call of the common kernels, before -> after."""
    devices, kernels = [], []
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    graph_level = before.graph_level or after.graph_level
    for rank, (device_before, device_after) in enumerate(zip(before.devices_in_rank_order(), after.devices_in_rank_order())):
        label = f"rank{rank}: {device_before.id} -> {device_after.id}"
        device, rows = _device_rate(rank, label, device_before, device_after, threshold_pct, rng)
        if graph_level and device.rate_ratio is not None:  # the calls a side counts are not the calls it ran
            device = replace(device, rate_status=NOT_JUDGED)
        devices.append(device)
        rows.sort(key=lambda row: (-abs(row.before_calls * (row.after_ns_per_call - row.before_ns_per_call)), row.name))
        kernels.extend(rows[:TOP_KERNEL_ROWS])
    return WorkRate(tuple(devices), tuple(kernels))


def _named(device: Device) -> dict[str, DeviceKernel]:
    return {kernel.name: kernel for kernel in device.kernels if kernel.count}


def _device_rate(rank: int, label: str, device_before: Device, device_after: Device, threshold_pct: float,
                 rng) -> tuple[DeviceRate, list[KernelRate]]:
    kernels_before, kernels_after = _named(device_before), _named(device_after)
    common = [name for name in kernels_before if name in kernels_after]
    empty = DeviceRate(rank, label, 0, None, None, None, None, None, None, False, "not measured", None)
    if not common:
        return replace(empty, reason=f"no kernel in common on {label}: the captures ran other kernels "
                                     "(another program or another device), so no time per call compares"), []
    if any(not kernels[name].durations_ns or not kernels[name].calls_per_bin  # a counted kernel has both when saved
           for kernels in (kernels_before, kernels_after) for name in common):
        return replace(empty, reason=("a side is a saved analysis without per-call durations (written by an older "
                                      "tracetriage): analyze the capture again, or save a new analysis.json")), []
    judged = [name for name in common
              if min(len(kernels_before[name].durations_ns), len(kernels_after[name].durations_ns)) >= MIN_CALLS
              and kernels_before[name].total_ns > 0 and kernels_after[name].total_ns > 0]
    if not judged:
        most = max(common, key=lambda name: min(kernels_before[name].count, kernels_after[name].count))
        return replace(empty, reason=(f"too few calls: no kernel common to both sides runs at least {MIN_CALLS} times on "
                                      f"{label} (the most: {most}, {kernels_before[most].count} before and "
                                      f"{kernels_after[most].count} after): no per-call distribution to compare")), []
    rows, before_ns, after_ns, draws_before, draws_after = [], [], [], [], []
    for name in judged:
        row, draw_before, draw_after = _kernel_rate(label, name, kernels_before[name], kernels_after[name], threshold_pct, rng)
        rows.append(row)
        calls = kernels_before[name].count
        before_ns.append(calls * row.before_ns_per_call)
        after_ns.append(calls * row.after_ns_per_call)
        draws_before.append(calls * draw_before)
        draws_after.append(calls * draw_after)
    ratio = float(sum(after_ns) / sum(before_ns))
    boot = np.sum(draws_after, axis=0) / np.maximum(np.sum(draws_before, axis=0), 1e-9)
    low, high = np.percentile(boot, [2.5, 97.5])
    ci95 = (round(float(low), 4), round(float(high), 4))
    significant = bool((ci95[0] > 1.0 or ci95[1] < 1.0) and abs(ratio - 1.0) * 100.0 >= threshold_pct)
    device = DeviceRate(rank, label, len(judged), _covered(kernels_before, judged), _covered(kernels_after, judged),
                        _calls_per_s(kernels_before, judged, device_before), _calls_per_s(kernels_after, judged, device_after),
                        round(ratio, 4), ci95, significant, _direction(ratio) if significant else "unchanged", None)
    device = _with_rate(device, [kernels_before[name] for name in judged], [kernels_after[name] for name in judged],
                        threshold_pct, rng)
    return _unless_uncovered(device), rows


def _unless_uncovered(device: DeviceRate) -> DeviceRate:
    """The device, not judged (with why) where its common kernels are under MIN_COVERED_PCT of a side's kernel time."""
    low = [(side, covered) for side, covered in (("before", device.before_covered_pct), ("after", device.after_covered_pct))
           if covered is not None and covered < MIN_COVERED_PCT]
    if not low:
        return device
    side, covered = low[0]
    return replace(device.not_judged(), reason=(
        f"the common kernels are {covered:.1f}% of the {side} kernel time on {device.device} (at least "
        f"{MIN_COVERED_PCT:g}% needed): most of the work ran in kernels only one side has (another implementation, or "
        "a graph-level capture whose replays hide their kernels), and their time per call says nothing of it"))


def _with_rate(device: DeviceRate, kernels_before: list[DeviceKernel], kernels_after: list[DeviceKernel], threshold_pct: float,
               rng) -> DeviceRate:
    """The device with its calls-per-second test: the common kernels' calls per part of the window."""
    from tracetriage.analyzers.ranktest import mannwhitney_p

    if not (device.before_calls_per_s and device.after_calls_per_s):
        return device
    before = np.sum([kernel.calls_per_bin for kernel in kernels_before], axis=0).astype(np.float64)
    after = np.sum([kernel.calls_per_bin for kernel in kernels_after], axis=0).astype(np.float64)
    if not (before.sum() and after.sum()):
        return device
    # each part's calls per second: its share of the side's calls x the side's rate x the parts
    before_rates = before / before.mean() * device.before_calls_per_s
    after_rates = after / after.mean() * device.after_calls_per_s
    ratio = device.after_calls_per_s / device.before_calls_per_s
    p_value = mannwhitney_p(before_rates, after_rates)
    numerators = after_rates[rng.integers(0, after.size, (RESAMPLES, after.size))].mean(axis=1)
    denominators = before_rates[rng.integers(0, before.size, (RESAMPLES, before.size))].mean(axis=1)
    if not (denominators > 0).all():  # resampled parts with no call at all: the ratio has no upper bound
        return replace(device, rate_ratio=round(ratio, 4), rate_ci95=None, rate_p_value=float(f"{p_value:.3g}"),
                       rate_status=NOT_JUDGED)
    draws = numerators / denominators
    low, high = np.percentile(draws, [2.5, 97.5])
    ci95 = (round(float(low), 4), round(float(high), 4))
    significant = bool(p_value < ALPHA and (ci95[0] > 1.0 or ci95[1] < 1.0) and abs(ratio - 1.0) * 100.0 >= threshold_pct)
    status = ("improved" if ratio > 1 else "regressed") if significant else "unchanged"
    return replace(device, rate_ratio=round(ratio, 4), rate_ci95=ci95, rate_p_value=float(f"{p_value:.3g}"),
                   rate_status=status)


def _kernel_rate(label: str, name: str, kernel_before: DeviceKernel, kernel_after: DeviceKernel, threshold_pct: float,
                 rng) -> tuple[KernelRate, np.ndarray, np.ndarray]:
    """One common kernel's row, and the bootstrap draws of its before and after mean time per call,
    scaled to the exact means (the device ratio's interval adds them up kernel by kernel)."""
    from tracetriage.analyzers.ranktest import mannwhitney_p

    before = np.asarray(kernel_before.durations_ns, np.float64)
    after = np.asarray(kernel_after.durations_ns, np.float64)
    before_mean = kernel_before.total_ns / kernel_before.count
    after_mean = kernel_after.total_ns / kernel_after.count
    draw_before = before[rng.integers(0, before.size, (RESAMPLES, before.size))].mean(axis=1)
    draw_after = after[rng.integers(0, after.size, (RESAMPLES, after.size))].mean(axis=1)
    draw_before *= before_mean / max(before.mean(), 1e-9)
    draw_after *= after_mean / max(after.mean(), 1e-9)
    ratio = after_mean / max(before_mean, 1e-9)
    low, high = np.percentile(draw_after / np.maximum(draw_before, 1e-9), [2.5, 97.5])
    ci95 = (round(float(low), 4), round(float(high), 4))
    p_value = mannwhitney_p(before, after)
    significant = bool(p_value < ALPHA and (ci95[0] > 1.0 or ci95[1] < 1.0) and abs(ratio - 1.0) * 100.0 >= threshold_pct)
    row = KernelRate(label, name, int(kernel_before.count), int(kernel_after.count), before_mean, after_mean,
                     round(ratio, 4), ci95, float(f"{p_value:.3g}"), significant,
                     _direction(ratio) if significant else "unchanged")
    return row, draw_before, draw_after


def _covered(kernels: dict[str, DeviceKernel], names: list[str]) -> float | None:
    """The share (%) of the device's listed kernel time that ``names`` are."""
    total = sum(kernel.total_ns for kernel in kernels.values())
    return 100.0 * sum(kernels[name].total_ns for name in names) / total if total else None


def _calls_per_s(kernels: dict[str, DeviceKernel], names: list[str], device: Device) -> float | None:
    window_ns = device.window_ns or 0
    return sum(kernels[name].count for name in names) / (window_ns / 1e9) if window_ns else None


def _direction(ratio: float) -> str:
    return "improved" if ratio < 1 else "regressed"
