"""Across devices (``compare --across-devices``): the same program on two GPUs, each op class and
top op held against its own device's peaks.

A before/after comparison refuses a pair on different devices: a step time on an H100 and one on
an MI300X differ by the hardware, not by a change. What a user moving hardware asks is another
question: which ops are slower on the new device *relative to what each device can do*. So:

* **Figures per side** (from each side's ``efficiency`` block, the analysis contract): per op
  class (and per top op, matched by name, input shapes and dtype), the kernel time of its
  measured ops (those with a work model) per step, or per call where either side has no steps;
  the achieved rate (TFLOP/s, GB/s) and the % of the device's roofline bound (its datasheet peak
  of the class's dtype when compute-bound, its memory bandwidth when memory-bound), both as the
  efficiency block gives them; the measured share of the class's kernel time they speak for.
* **ratio** = after time per unit / before time per unit (> 1: slower after).
* **predicted ratio** = the roofline time per unit of work after / before (roofline time =
  % of roofline x measured time; work = FLOPs, bytes where there are none): the ratio the two
  devices' peaks predict when both run their kernels at the same share of them.
* **normalised ratio** = ratio / predicted ratio (for the same work it is the before % of peak
  over the after one): above 1, the after device's kernels reach less of its peak than the
  before device's do of theirs.
* **verdict** per class and op: ``slower`` (than the peaks predict) when the normalised ratio's
  95% interval lies above 1 + the band (:data:`THRESHOLDS` ``as_predicted_band_pct``),
  ``faster`` when it lies below 1 / (1 + band), else ``as the peaks predict``. A claim that the
  kernels, not the hardware, make the difference needs the whole interval beyond the band.
* **noise**: time per step: a percentile bootstrap (:data:`RESAMPLES` resamples) of each side's
  mean step time, the class assumed as steady as the step it is a part of; time per call: a
  bootstrap of the sampled calls (the analysis keeps up to 200 per kernel of a capture without
  steps) of the listed kernels of that class (named by op_kernels.kernel_class), each weighted by
  its kernel time. No sample: no interval, and the verdict rests on the point estimate (said so).
  A top op's interval is drawn the same way: per step, the op as steady as the step (the class
  rows' step draws); per call, as steady as the sampled kernels of its class (its class row's
  draws: the profile keeps no per-call samples of an op).
* **Refused** (``ok`` false, the reason first): a side without op-class figures or without device
  peaks; the same device model on both sides (the before/after comparison judges that pair);
  another program (the processes' programs disjoint); no op class measured on both sides with
  the same work per unit (:data:`THRESHOLDS` ``same_work_tolerance_pct``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import numpy as np

from tracetriage.analyzers.compare_side import Rank, Side, program_key, round4
from tracetriage.records.efficiency import Efficiency, KernelClass, PeakDevice, TopOp

# name: (value, why)
THRESHOLDS = {
    "as_predicted_band_pct": (20.0, "datasheet peaks are boost-clock figures that each vendor's parts sustain to a "
                                    "different degree (power and clock limits, a measured achievable BF16 peak of ~54% "
                                    "of the datasheet on MI300X); a normalised ratio within a fifth of 1 is what the "
                                    "hardware explains, beyond it the kernels differ"),
    "same_work_tolerance_pct": (10.0, "the same program does the same work per step or per call; FLOPs (bytes) per "
                                      "unit further apart than a tenth mean other batches, shapes or a partial capture"),
}
BAND_PCT = THRESHOLDS["as_predicted_band_pct"][0]
WORK_TOLERANCE_PCT = THRESHOLDS["same_work_tolerance_pct"][0]
BAND = BAND_PCT / 100.0
WORK_TOLERANCE = WORK_TOLERANCE_PCT / 100.0
RESAMPLES = 999
BOOTSTRAP_SEED = 20261202  # fixed: the same inputs give the same interval
TOP_OP_ROWS = 10
CLASS_WORDS = {"gemm": "GEMMs", "attention": "attention", "memory_bound": "memory-bound kernels"}
DTYPE_WORDS = {"bf16": "BF16", "fp16": "FP16", "fp32": "FP32", "tf32": "TF32", "fp8": "FP8", "int8": "INT8", "fp64": "FP64"}
SLOWER, FASTER, AS_PREDICTED, NOT_JUDGED = "slower", "faster", "as the peaks predict", "not judged"


@dataclass(frozen=True, slots=True)
class SideFigures:
    """One op class (or op) on one side: kernel time per unit (ms), calls (op calls), the achieved
    rates, the % of the roofline bound and the peak it is held against in words, the share (%) of
    the class's kernel time measured, and the work per unit (FLOPs, else bytes)."""

    ms_per_unit: float
    calls: int
    achieved_tflops: float | None
    achieved_gbps: float | None
    pct_of_peak: float | None
    peak: str | None
    bound: str | None
    measured_share_pct: float | None
    work_per_unit: float

    def to_contract(self) -> dict:
        return {"ms_per_unit": round(self.ms_per_unit, 6), "calls": self.calls, "achieved_tflops": self.achieved_tflops,
                "achieved_gbps": self.achieved_gbps, "pct_of_peak": self.pct_of_peak, "peak": self.peak,
                "bound": self.bound, "measured_share_pct": self.measured_share_pct}


@dataclass(frozen=True, slots=True)
class DeviceRow:
    """One op class or top op on both devices: the ratio after / before of time per unit with its
    95% interval (None: no samples), the ratio the peaks predict, the normalised ratio with its
    interval, the verdict and the sentence that says it (``reason``: why it was not judged)."""

    what: str
    op_class: str
    before: SideFigures | None
    after: SideFigures | None
    ratio: float | None
    ci95: tuple[float, float] | None
    predicted_ratio: float | None
    normalised_ratio: float | None
    normalised_ci95: tuple[float, float] | None
    verdict: str
    words: str

    def to_contract(self) -> dict:
        return {"what": self.what, "class": self.op_class,
                "before": None if self.before is None else self.before.to_contract(),
                "after": None if self.after is None else self.after.to_contract(),
                "ratio": round4(self.ratio), "ci95": None if self.ci95 is None else list(self.ci95),
                "predicted_ratio": round4(self.predicted_ratio), "normalised_ratio": round4(self.normalised_ratio),
                "normalised_ci95": None if self.normalised_ci95 is None else list(self.normalised_ci95),
                "verdict": self.verdict, "words": self.words}


@dataclass(frozen=True, slots=True)
class AcrossDevices:
    """The across-devices comparison: whether it was made (``reasons``: why not, or what it rests
    on), the unit (``step`` or ``call``), each side's device model, the class rows, the top op rows."""

    ok: bool
    reasons: tuple[str, ...]
    unit: str
    before_device: str | None
    after_device: str | None
    classes: tuple[DeviceRow, ...]
    ops: tuple[DeviceRow, ...]

    def summary(self) -> str:
        """The comparison in one line: each judged class's sentence, or why none was."""
        if not self.ok:
            return f"inconclusive: {self.reasons[0]}"
        judged = [row.words for row in self.classes if row.verdict != NOT_JUDGED]
        return (f"across_devices: {self.before_device} -> {self.after_device}, per {self.unit}: " + "; ".join(judged))

    def to_contract(self) -> dict:
        return {"ok": self.ok, "reasons": list(self.reasons), "unit": self.unit,
                "before_device": self.before_device, "after_device": self.after_device,
                "band_pct": BAND_PCT,
                "work_tolerance_pct": WORK_TOLERANCE_PCT,
                "method": (f"time per {self.unit} of each op class's measured ops, after / before, over the ratio the "
                           "devices' roofline bounds predict for the same work (the normalised ratio); slower or faster "
                           f"than the peaks predict when its 95% interval lies beyond {BAND * 100:g}% of 1, else as the "
                           f"peaks predict; interval by a percentile bootstrap ({RESAMPLES} resamples) of the "
                           + ("steps" if self.unit == "step" else "sampled kernel calls of the class")),
                "classes": [row.to_contract() for row in self.classes],
                "ops": [row.to_contract() for row in self.ops]}


# ---------------------------------------------------------------------------
# One side's figures


def _efficiency(side: Side) -> Efficiency:
    """The side's efficiency block (an empty one when the analysis has none)."""
    return side.record.efficiency or Efficiency()


def _measured_ranks(side: Side) -> list[Rank]:
    """The processes of the trace the efficiency block measured (all ranks when none is named so)."""
    trace = _efficiency(side).trace
    return [rank for rank in side.ranks if rank.trace == trace] or side.ranks


def _step_count(side: Side) -> int:
    return sum(rank.step_count for rank in _measured_ranks(side))


def _peak_words(device: PeakDevice, row: KernelClass | TopOp) -> str | None:
    """The bound a class or op is held against, in words: its dtype's peak or the memory bandwidth."""
    if row.bound == "memory":
        return f"{float(device.bandwidth_gbps):,.0f} GB/s memory bandwidth"
    dtype = row.peak_dtype
    peaks = device.peak_tflops or {}
    if row.bound == "compute" and dtype in peaks:
        return f"{float(peaks[dtype]):,.1f} TFLOP/s {DTYPE_WORDS.get(dtype, dtype)} peak"
    return None


def _figures(row: KernelClass | TopOp, device: PeakDevice, units: float, calls: int, share) -> SideFigures:
    work = float(row.flops or 0.0) or float(row.bytes or 0.0)
    return SideFigures(ms_per_unit=float(row.time_ns) / units / 1e6 if units else 0.0, calls=calls,
                       achieved_tflops=row.achieved_tflops, achieved_gbps=row.achieved_gbps,
                       pct_of_peak=row.pct_of_roofline, peak=_peak_words(device, row), bound=row.bound,
                       measured_share_pct=share, work_per_unit=work / units if units else 0.0)


def _roofline_per_work(row: KernelClass | TopOp) -> float | None:
    """The roofline time (ns) per unit of work of a class or op row."""
    work = float(row.flops or 0.0) or float(row.bytes or 0.0)
    pct = row.pct_of_roofline
    return pct / 100.0 * float(row.time_ns) / work if pct and work and row.time_ns else None


# ---------------------------------------------------------------------------
# Noise


def _step_draws(side: Side, rng) -> np.ndarray | None:
    """Bootstrap draws of the side's mean step time over its exact mean (1 = no change)."""
    durations = [rank.durations for rank in _measured_ranks(side) if rank.durations.size]
    if not durations:
        return None
    pooled = np.concatenate(durations).astype(np.float64)
    draws = pooled[rng.integers(0, pooled.size, (RESAMPLES, pooled.size))].mean(axis=1)
    return draws / pooled.mean()


def _call_draws(side: Side, op_class: str, rng) -> np.ndarray | None:
    """Bootstrap draws of the class's time over its exact time, from the sampled calls of the listed
    kernels of that class (weighted by their kernel time), None when none were sampled."""
    from tracetriage.analyzers.op_kernels import kernel_class  # op_kernels loads pandas: only an across-devices pair pays

    trace = _efficiency(side).trace
    kernels = [kernel for device in side.devices if device.trace == trace for kernel in device.kernels
               if kernel.kind == "kernel" and kernel_class(str(kernel.name)) == op_class
               and len(kernel.durations_ns) >= 2 and kernel.total_ns > 0]
    if not kernels:
        return None
    weights = np.array([kernel.total_ns for kernel in kernels], np.float64)
    draws = np.zeros(RESAMPLES)
    for weight, kernel in zip(weights, kernels):
        samples = np.asarray(kernel.durations_ns, np.float64)
        draws += weight * samples[rng.integers(0, samples.size, (RESAMPLES, samples.size))].mean(axis=1) / samples.mean()
    return draws / weights.sum()


def _interval(ratio: float, before_draws, after_draws) -> tuple[float, float] | None:
    if before_draws is None or after_draws is None:
        return None
    low, high = np.percentile(ratio * after_draws / before_draws, [2.5, 97.5])
    return round(float(low), 4), round(float(high), 4)


# ---------------------------------------------------------------------------
# Rows


def verdict_of(normalised: float, interval: tuple[float, float] | None) -> str:
    """slower / faster than the peaks predict when the normalised ratio (its whole 95% interval,
    the point where there is none) lies beyond the band, else as the peaks predict."""
    low, high = interval if interval is not None else (normalised, normalised)
    if low > 1.0 + BAND:
        return SLOWER
    if high < 1.0 / (1.0 + BAND):
        return FASTER
    return AS_PREDICTED


def _times_words(ratio: float, interval: tuple[float, float] | None, device: str) -> str:
    if interval is not None and interval[0] <= 1.0 <= interval[1]:
        return f"as fast on {device} (within noise)"
    return f"{ratio:.2f}× slower on {device}" if ratio >= 1.0 else f"{1.0 / ratio:.2f}× faster on {device}"


def _row_words(label: str, row: DeviceRow, device: str) -> str:
    pcts = ""
    if row.before.pct_of_peak is not None and row.after.pct_of_peak is not None:
        pcts = f" at {row.after.pct_of_peak:.0f}% vs {row.before.pct_of_peak:.0f}% of peak"
    noise = "" if row.normalised_ci95 is not None else "; noise not measured"
    if row.verdict == SLOWER:
        cause = f"the kernels, not the hardware ({row.normalised_ratio:.2f}× slower than the peaks predict{noise})"
    elif row.verdict == FASTER:
        cause = (f"the kernels, not the hardware ({1.0 / row.normalised_ratio:.2f}× faster than the peaks "
                 f"predict{noise})")
    else:
        cause = f"the hardware, as the peaks predict (they predict x{row.predicted_ratio:.2f} the time{noise})"
    return f"{label} {_times_words(row.ratio, row.ci95, device)}{pcts}: {cause}"


def _judged(what: str, op_class: str, before: SideFigures, after: SideFigures, predicted: float,
            interval: tuple[float, float] | None, label: str, device: str) -> DeviceRow:
    ratio = after.ms_per_unit / before.ms_per_unit
    normalised = ratio / predicted
    normalised_ci = None if interval is None else (round(interval[0] / predicted, 4), round(interval[1] / predicted, 4))
    row = DeviceRow(what, op_class, before, after, ratio, interval, predicted, normalised, normalised_ci,
                    verdict_of(normalised, normalised_ci), "")
    return replace(row, words=_row_words(label, row, device))


def _not_judged(what: str, op_class: str, before: SideFigures | None, after: SideFigures | None, why: str) -> DeviceRow:
    return DeviceRow(what, op_class, before, after, None, None, None, None, None, NOT_JUDGED, why)


def _same_work(before: SideFigures, after: SideFigures) -> bool:
    larger = max(before.work_per_unit, after.work_per_unit)
    return larger > 0 and abs(before.work_per_unit - after.work_per_unit) <= WORK_TOLERANCE * larger


def _pair_row(what: str, op_class: str, label: str, rows: tuple[KernelClass | TopOp, KernelClass | TopOp],
              figures: tuple[SideFigures, SideFigures],
              draws: tuple, device: str) -> DeviceRow:
    """One class or op on both sides: judged, or why not."""
    before, after = figures
    predicted_before, predicted_after = _roofline_per_work(rows[0]), _roofline_per_work(rows[1])
    if not before.ms_per_unit or not after.ms_per_unit:
        return _not_judged(what, op_class, before, after, f"{label}: no kernel time or no calls on a side")
    if not _same_work(before, after):
        return _not_judged(what, op_class, before, after,
                           f"{label}: not the same work per unit ({before.work_per_unit:.4g} before, "
                           f"{after.work_per_unit:.4g} after, more than {WORK_TOLERANCE * 100:g}% apart)")
    if predicted_before is None or predicted_after is None:
        return _not_judged(what, op_class, before, after, f"{label}: no roofline on a side (device or dtype peak unknown)")
    ratio = after.ms_per_unit / before.ms_per_unit
    return _judged(what, op_class, before, after, predicted_after / predicted_before, _interval(ratio, *draws), label,
                   device)


# ---------------------------------------------------------------------------
# The comparison


def _refusal(before: Side, after: Side) -> str | None:
    """Why the pair cannot be compared across devices (None: it can)."""
    for side in (before, after):
        efficiency = _efficiency(side)
        if not efficiency.classes:
            missing = next((row.reason for row in efficiency.not_measured), "no operator shapes")
            return f"no op class measured on {side.label}: {missing}"
        if not efficiency.device:
            return (f"{side.label}'s device {efficiency.device_name!r} is not in the device table: no peak to "
                    "hold its kernels against (add it to analyzers/devices.toml)")
    models = [_efficiency(side).device.model for side in (before, after)]
    if models[0] == models[1]:
        return f"the same device ({models[0]}) on both sides: compare them without --across-devices"
    programs = [{key for key in (program_key(rank.name) for rank in side.ranks) if key} for side in (before, after)]
    if programs[0] and programs[1] and not programs[0] & programs[1]:
        return f"another program: {', '.join(sorted(programs[0]))} before, {', '.join(sorted(programs[1]))} after"
    return None


def _device_name(side: Side) -> str | None:
    """The side's device: its device-table model, else the name the capture gave it."""
    efficiency = _efficiency(side)
    model = efficiency.device.model if efficiency.device else None
    name = model or efficiency.device_name or next((device.name for device in side.devices), None)
    return str(name) if name else None


def _units(before: Side, after: Side) -> tuple[str, int, int]:
    """``step`` and each side's steps when both have steps, else ``call`` (0, 0)."""
    steps = _step_count(before), _step_count(after)
    return ("step", *steps) if all(steps) else ("call", 0, 0)


def across_devices(before: Side, after: Side) -> AcrossDevices:
    """The across-devices comparison of two sides (module docstring)."""
    refusal = _refusal(before, after)
    unit, steps_before, steps_after = _units(before, after)
    if refusal:
        return AcrossDevices(False, (refusal,), unit, _device_name(before), _device_name(after), (), ())
    efficiency_before, efficiency_after = _efficiency(before), _efficiency(after)
    devices = efficiency_before.device, efficiency_after.device
    device_after = str(devices[1].model)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    step_draws = (_step_draws(before, rng), _step_draws(after, rng)) if unit == "step" else None
    classes_after = {row.kernel_class: row for row in efficiency_after.classes}
    class_rows, class_draws = [], {}
    for row_before in efficiency_before.classes:
        op_class = row_before.kernel_class
        label = CLASS_WORDS.get(op_class, op_class)
        row_after = classes_after.get(op_class)
        if row_after is None:
            class_rows.append(_not_judged(op_class, op_class, None, None, f"{label}: measured on {before.label} only"))
            continue
        rows = (row_before, row_after)
        units = (steps_before, steps_after) if unit == "step" else (row_before.ops, row_after.ops)
        figures = tuple(_figures(row, device, count, row.ops, row.measured_share_pct)
                        for row, device, count in zip(rows, devices, units))
        draws = step_draws or (_call_draws(before, op_class, rng), _call_draws(after, op_class, rng))
        class_draws[op_class] = draws
        class_rows.append(_pair_row(op_class, op_class, label, rows, figures, draws, device_after))
    class_rows.extend(_not_judged(op_class, op_class, None, None,
                                  f"{CLASS_WORDS.get(op_class, op_class)}: measured on {after.label} only")
                      for op_class in classes_after if op_class not in {row.kernel_class for row in efficiency_before.classes})
    judged = [row for row in class_rows if row.verdict != NOT_JUDGED]
    if not judged:
        why = "; ".join(row.words for row in class_rows) or "no op class on both sides"
        return AcrossDevices(False, (f"no common op class with the same work per {unit}: {why}",), unit,
                             str(devices[0].model), device_after, tuple(class_rows), ())
    reasons = (f"each op class held against its own device's roofline: {devices[0].model} before, {device_after} after",
               *(row.words for row in class_rows if row.verdict == NOT_JUDGED))
    return AcrossDevices(True, reasons, unit, str(devices[0].model), device_after, tuple(class_rows),
                         tuple(_op_rows(efficiency_before, efficiency_after, devices, unit, (steps_before, steps_after),
                                        class_draws)))


def _op_key(op: TopOp) -> tuple[str, str, str]:
    return str(op.name), json.dumps(op.input_dims), str(op.dtype)


def _op_rows(efficiency_before: Efficiency, efficiency_after: Efficiency, devices: tuple[PeakDevice, PeakDevice], unit: str,
             steps: tuple[int, int], class_draws: dict) -> list[DeviceRow]:
    """The top ops of the before side found on the after side (same name, shapes and dtype), per
    step or per call, their interval from their class row's draws (``class_draws``: the step's, or the
    class's sampled kernels'; none when the class was not on both sides)."""
    ops_after = {_op_key(op): op for op in efficiency_after.top_ops}
    rows = []
    for op_before in efficiency_before.top_ops[:TOP_OP_ROWS]:
        op_after = ops_after.get(_op_key(op_before))
        if op_after is None:
            continue
        pair = (op_before, op_after)
        units = steps if unit == "step" else (op_before.count, op_after.count)
        figures = tuple(_figures(op, device, count, op.count, None) for op, device, count in zip(pair, devices, units))
        shapes = [dims for dims in op_before.input_dims or [] if dims]  # scalars' [] say nothing
        what = f"{op_before.name} {shapes} {op_before.dtype}"
        draws = class_draws.get(str(op_before.kernel_class), (None, None))
        rows.append(_pair_row(what, str(op_before.kernel_class), str(op_before.name), pair, figures, draws,
                              str(devices[1].model)))
    return rows
