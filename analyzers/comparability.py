"""Comparability before judgement: whether two captures are runs of one program on the same
hardware shape, and how much the rest of their signature agrees.

* **Hard checks** (any failing makes the pair incomparable, the verdict ``inconclusive``, the
  reason naming the difference): the same device models and count, the same world size
  (processes driving GPUs), the same program (its executable and script or module, flags
  aside: the fix may be a flag), and enough steps on both sides (:data:`MIN_STEPS`) unless
  the serving artifacts alone can be judged, or both sides are captures without steps (judged
  on their kernels' time per call, analyzers/compare_workrate.py, which refuses a pair with no
  common kernel of enough calls); one side with steps and one without do not compare; a
  ``--step-range`` that named no range of a side's processes leaves the pair unjudged (the
  per-step comparison asked for cannot be made; a step-less reading would answer another question).
* **Confidence** (1 = every signal agrees; 0 when incomparable) is the product of the
  factors of the soft signals: programs overlapping only in part (x0.8), steps marked by other
  NVTX ranges (x0.8), captures by other tools (x0.9) and the time-weighted kernel overlap
  (x(0.5 + 0.5 overlap)), GPU compute per step further apart than 3x (x0.5: other work per
  step) and the smaller sample: the fewest steps on a rank of either side, x1 from 100 steps on, linear
  down to x0.75 at 5 (60 steps against 400 is judged as 60). The change under test may change the kernels (graphs turned on), and
  a graph-level capture records replays without their kernels: overlap not measured, x0.9 (a signal
  missing, held as captures by other tools are). Each reason that lowers the confidence ends with its
  factor (``: confidence x0.90``).
* **One capture twice** (:func:`identical`): the same files, or copies of them (the same bytes): said
  so (``identical``), confidence 1, and every change 0 (compare_steps: one sample twice is unchanged).
* **Serving** (analyzers/compare_serving.py): a changed model, precision or engine is named (the pair
  stays comparable for latency: another model's answers); input lengths that shifted, or request
  rates further apart than 5%, leave the serving latencies unjudged (the load changed).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tracetriage.analyzers.compare_side import Side, devices_text, program_key, serving_figures
from tracetriage.analyzers.compare_workrate import is_stepless
from tracetriage.analyzers.findings import UNMATCHED_STEP_RANGE
from tracetriage.wording import counted

if TYPE_CHECKING:  # compare_serving (and its serving records) is imported where a pair has serving blocks
    from tracetriage.analyzers.compare_serving import ServingComparison

MIN_STEPS = 5  # fewer steps on a rank than this: no distribution to compare
FULL_SAMPLE_STEPS = 100  # steps on the smaller side's rank for full confidence: a p99 then rests on more than its longest step
SMALL_SAMPLE_FLOOR = 0.75  # the confidence left at MIN_STEPS steps (linear up to 1 at FULL_SAMPLE_STEPS)
SAME_SIGNATURE = "same devices, world size and program"
REQUEST_RATE_TOLERANCE = 0.05  # serving benchmarks at request rates further apart than this share do not compare
WORK_RATIO_MAX = 3.0  # GPU compute per step this many times larger on one side: other work per step, not one program's change
WORK_FACTOR = 0.5  # the confidence left to a pair whose work per step differs that much
UNMEASURED_OVERLAP_FACTOR = 0.9  # kernel overlap not measured (a graph-level side): a signal missing, as other tools (x0.9)


@dataclass(frozen=True, slots=True)
class Comparability:
    """``ok``: the pair may be judged; ``confidence``: how much the rest of the signature agrees
    (0.0 when not ok, 3 decimals); ``reasons``: each difference found, in the order checked."""

    ok: bool
    confidence: float
    reasons: tuple[str, ...]
    identical: str | None = None  # SAME_PATH / SAME_BYTES: both sides are one capture (the contract's ``identical``)

    def with_reason(self, reason: str) -> Comparability:
        return Comparability(self.ok, self.confidence, (*self.reasons, reason), self.identical)

    def refused(self, reason: str) -> Comparability:
        """Not comparable after all, for ``reason`` (named first: it is why nothing is judged)."""
        return Comparability(False, 0.0, (reason, *(kept for kept in self.reasons if kept != SAME_SIGNATURE)),
                             self.identical)

    def to_contract(self) -> dict:
        return {"ok": self.ok, "confidence": self.confidence, "reasons": list(self.reasons)}


@dataclass(frozen=True, slots=True)
class Signal:
    """What one check of the signature found: whether the pair stays comparable, the factor it
    puts on the confidence, and the difference it names (None: nothing to say)."""

    comparable: bool = True
    confidence_factor: float = 1.0
    reason: str | None = None


AGREES = Signal()


def comparability(before: Side, after: Side, serving: ServingComparison | None = None) -> Comparability:
    """Every check of the pair's signature, in order; the reasons read in that order. ``serving``:
    the serving comparison, whose changed model, precision or engine is named (still comparable)."""
    serving_ok, serving_why = serving_comparable(before, after, serving)
    same = identical(before, after)
    signals = [_same_devices(before, after), _same_world_size(before, after), _same_program(before, after),
               _step_range_matched(before, after), _enough_steps(before, after, serving_ok), _same_step_ranges(before, after),
               _same_capture_tools(before, after), _kernel_agreement(before, after), _same_work(before, after),
               _sample_size(before, after),
               Signal(reason=serving_why), Signal(reason=serving.identity_reason() if serving else None),
               Signal(reason=None if same is None else identical_text(same))]
    ok, confidence, reasons = True, 1.0, []
    for signal in signals:
        ok = ok and signal.comparable
        confidence *= signal.confidence_factor  # x 1.0 is exact: the product of the factors that differ
        if signal.reason:
            reasons.append(_with_factor(signal))
    if ok and same is not None:  # one capture twice: nothing of the signature can differ, nothing to doubt
        return Comparability(True, 1.0, (identical_text(same),), same)
    if ok and not reasons:
        reasons.append(SAME_SIGNATURE)
    return Comparability(ok, round(confidence if ok else 0.0, 3), tuple(reasons), same)


def _with_factor(signal: Signal) -> str:
    """A signal's reason with the factor it puts on the confidence (``: confidence x0.90``), unless it is x1
    or the reason already says it: each caveat listed says what it cost."""
    if signal.confidence_factor == 1.0 or "confidence x" in signal.reason:
        return signal.reason
    return f"{signal.reason}: confidence x{signal.confidence_factor:.2f}"


def _same_devices(before: Side, after: Side) -> Signal:
    models_before = Counter(device.name for device in before.devices)
    models_after = Counter(device.name for device in after.devices)
    if models_before == models_after:
        return AGREES
    differ = f"devices differ: {devices_text(models_before)} before, {devices_text(models_after)} after"
    if set(models_before) == set(models_after):  # the same models, other counts: another parallel layout
        return Signal(False, reason=differ)
    if not (models_before and models_after):  # one side has no GPU trace: there is no hardware to hold it against
        without = "before" if not models_before else "after"
        return Signal(False, reason=f"{differ} (no GPU trace on the {without} side: a step time needs one on both; "
                                    "capture the same trace on both sides)")
    return Signal(False, reason=(f"{differ} (a step time does not compare across hardware; compare --across-devices "
                                  "holds each op class against its own device's peaks)"))


def _same_world_size(before: Side, after: Side) -> Signal:
    if len(before.ranks) == len(after.ranks):
        return AGREES
    return Signal(False, reason=(f"world size differs: {counted(len(before.ranks), 'GPU process', 'GPU processes')} before, "
                                  f"{len(after.ranks)} after: "
                                  "per-step times of different parallel layouts do not compare (compare throughput per GPU "
                                  "from serving benchmarks instead)"))


def _programs(side: Side) -> set[str]:
    return {key for key in (program_key(rank.name) for rank in side.ranks) if key}


def _same_program(before: Side, after: Side) -> Signal:
    programs_before, programs_after = _programs(before), _programs(after)
    if not (programs_before and programs_after) or programs_before == programs_after:
        return AGREES
    if not programs_before & programs_after:
        return Signal(False, reason=(f"another program: {', '.join(sorted(programs_before))} before, "
                                      f"{', '.join(sorted(programs_after))} after"))
    return Signal(confidence_factor=0.8, reason=(f"the programs overlap only in part "
                                                  f"({', '.join(sorted(programs_before ^ programs_after))} on one side)"))


def _step_range_matched(before: Side, after: Side) -> Signal:
    """The pair is not judged when ``--step-range`` named no range of a side's processes: that side's
    steps were not measured as asked, and judging it as a capture without steps (its window the GPU
    activity) would judge another question than the one asked."""
    unmatched = [(side.label, scope, reason) for side in (before, after) for scope, reason in side.unmatched_step_range]
    if not unmatched:
        return AGREES
    asked = unmatched[0][2].split(UNMATCHED_STEP_RANGE)[0].strip()  # "--step-range 'REGEX'", as the abstention wrote it
    where = "; ".join(dict.fromkeys(f"{label} {scope}" for label, scope, _ in unmatched[:4]))
    candidates = next((reason.split("not measured", 1)[1] for _, _, reason in unmatched if "not measured;" in reason), "")
    return Signal(False, reason=(f"{asked} matched no annotation range on {where}: the per-step comparison asked for "
                                 f"cannot be made (name a range both captures mark, or drop --step-range){candidates}"))


def _enough_steps(before: Side, after: Side, serving_ok: bool) -> Signal:
    """Step durations on both sides, at least MIN_STEPS on every rank; else the serving
    artifacts alone are judged when both sides have them."""
    if not (before.ranks or after.ranks):
        if before.serving and after.serving:  # the serving artifacts are all there is: their check decides (its reason)
            return AGREES if serving_ok else Signal(False)
        return Signal(False, reason="nothing to judge: neither a GPU trace with steps nor serving artifacts on both sides")
    if is_stepless(before) and is_stepless(after):
        return AGREES  # judged on time per call, which says itself when it cannot
    if is_stepless(before) != is_stepless(after):
        stepless, stepped = (before, after) if is_stepless(before) else (after, before)
        return Signal(serving_ok, reason=(f"{stepless.label} has no steps (its window is its GPU activity) and {stepped.label} "
                                           "has: a step time and a window of GPU activity do not compare; capture both with "
                                           "the same step marks (an NVTX/roctx range per step, --step-range)"
                                           + ("; judged on the serving artifacts only" if serving_ok else "")))
    ranks = [(side.label, rank) for side in (before, after) for rank in side.ranks]
    without_durations = [(label, rank) for label, rank in ranks
                         if rank.step_count >= MIN_STEPS and not rank.measured_durations]
    if without_durations:
        return Signal(False, reason=(f"{without_durations[0][0]} is a saved analysis without step durations (written by an "
                                      "older tracetriage): analyze the capture again, or save a new analysis.json"))
    few = [(label, rank) for label, rank in ranks if len(rank.durations) < MIN_STEPS]
    if not few:
        return AGREES
    label, rank = few[0]
    steps = counted(len(rank.durations), "measured step")
    return Signal(serving_ok, reason=(f"too few steps: {label} pid {rank.pid} has {steps} "
                                       f"(at least {MIN_STEPS} are needed for a step-time distribution)"
                                       + ("; judged on the serving artifacts only" if serving_ok else "")))


def _step_ranges(side: Side) -> set:
    return {rank.range_name for rank in side.ranks if rank.step_source == "nvtx"} - {None}


def _same_step_ranges(before: Side, after: Side) -> Signal:
    ranges_before, ranges_after = _step_ranges(before), _step_ranges(after)
    if not (ranges_before and ranges_after) or ranges_before == ranges_after:
        return AGREES
    return Signal(confidence_factor=0.8, reason=(f"steps marked by other ranges: {', '.join(sorted(ranges_before))} before, "
                                                  f"{', '.join(sorted(ranges_after))} after"))


def _capture_tools(side: Side) -> set:
    return {source.kind for source in side.record.inputs}


def _same_capture_tools(before: Side, after: Side) -> Signal:
    tools_before, tools_after = _capture_tools(before), _capture_tools(after)
    if not (tools_before and tools_after) or tools_before & tools_after:
        return AGREES
    return Signal(confidence_factor=0.9, reason=(f"captured by other tools ({', '.join(sorted(map(str, tools_before)))} vs "
                                                  f"{', '.join(sorted(map(str, tools_after)))})"))


def _kernel_agreement(before: Side, after: Side) -> Signal:
    """The kernel time overlap as a confidence factor, or why it is not measured (a graph-level side)."""
    if not (before.devices and after.devices):
        return AGREES
    if before.graph_level or after.graph_level:
        which = " and ".join(dict.fromkeys(side.label for side in (before, after) if side.graph_level))
        verb = "are" if before.graph_level and after.graph_level else "is"
        return Signal(confidence_factor=UNMEASURED_OVERLAP_FACTOR,
                      reason=(f"kernel overlap not measured: {which} {verb} a graph-level CUDA-graph capture (replays "
                              "recorded without their kernels); compared on the rest of the signature"))
    overlap = kernel_overlap(before, after)
    if overlap is None:
        return AGREES
    return Signal(confidence_factor=0.5 + 0.5 * overlap,
                  reason=f"kernel time overlap {100 * overlap:.0f}% (names weighted by their share of kernel time)")


def _same_work(before: Side, after: Side) -> Signal:
    """The GPU work per step of both sides (compute per step, collectives excluded): a change of one
    program (graphs, a flag, a faster kernel) moves it by less than :data:`WORK_RATIO_MAX` times;
    more is another model, batch or sequence length, unless the change removed most of the GPU work."""
    work = [side.mean_slice_ms(["compute"]) for side in (before, after)]
    if any(value is None or value <= 0 for value in work):
        return AGREES
    ratio = max(work) / min(work)
    if ratio < WORK_RATIO_MAX:
        return AGREES
    return Signal(confidence_factor=WORK_FACTOR,
                  reason=(f"compute per step {work[0]:.3f} ms -> {work[1]:.3f} ms ({ratio:.1f}x): work per step that "
                          "differs this much is another model, batch or sequence length, unless the change removed most "
                          "of the GPU work"))


def _sample_size(before: Side, after: Side) -> Signal:
    """The smaller sample as a confidence factor: a pair is judged no surer than its side with the fewest
    steps on a rank, whatever the other has (60 steps against 400 is a 60-step comparison). At
    :data:`FULL_SAMPLE_STEPS` or more, x1; fewer, linear down to :data:`SMALL_SAMPLE_FLOOR` at
    :data:`MIN_STEPS` (under that the pair is refused by :func:`_enough_steps`)."""
    counted_ranks = [(side.label, rank) for side in (before, after) for rank in side.ranks if len(rank.durations)]
    if not counted_ranks:
        return AGREES
    label, rank = min(counted_ranks, key=lambda item: len(item[1].durations))
    steps = len(rank.durations)
    if steps >= FULL_SAMPLE_STEPS or steps < MIN_STEPS:
        return AGREES
    share = (steps - MIN_STEPS) / (FULL_SAMPLE_STEPS - MIN_STEPS)
    factor = round(SMALL_SAMPLE_FLOOR + (1.0 - SMALL_SAMPLE_FLOOR) * share, 3)
    others = [len(other.durations) for side in (before, after) for other in side.ranks if len(other.durations)]
    return Signal(confidence_factor=factor, reason=(
        f"the smaller sample: {counted(steps, 'step')} on {label} pid {rank.pid} (of {min(others)}-{max(others)} a rank "
        f"across both sides; under {FULL_SAMPLE_STEPS} a p99 rests on the longest step or two): confidence x{factor:.2f}"))


SAME_PATH, SAME_BYTES = "same path", "same bytes"


def identical(before: Side, after: Side) -> str | None:
    """Whether both sides are one capture: :data:`SAME_PATH` when they read the same files and their steps
    are the same (a saved analysis of a path that now holds another capture is not the same capture),
    :data:`SAME_BYTES` when their steps (step-less: their devices' measures) are the same and each file of
    one side has a copy on the other (parsers.head.same_content: the same bytes, as analyze refuses two
    copies of one capture); None otherwise, or when a file cannot be read (a saved analysis whose capture
    is gone is judged as the other pairs)."""
    from tracetriage.parsers.head import same_content

    paths_before = sorted(str(source.path) for source in before.record.inputs)
    paths_after = sorted(str(source.path) for source in after.record.inputs)
    if not paths_before or len(paths_before) != len(paths_after):
        return None
    if before.ranks or after.ranks:
        same_steps = len(before.ranks) == len(after.ranks) and all(
            np.array_equal(first.durations, second.durations) for first, second in zip(before.ranks, after.ranks))
    else:  # step-less: what each device ran, as measured
        same_steps = before.devices == after.devices
    if not same_steps:  # a saved analysis of a path whose file has since been replaced is another capture
        return None  # a copy has the same steps: files of equal size (nightly exports) are not read whole for nothing
    if paths_before == paths_after or sorted(map(os.path.realpath, paths_before)) == sorted(map(os.path.realpath,
                                                                                                  paths_after)):
        return SAME_PATH  # also x against ./x, or a link to it
    by_name = sorted(paths_after, key=lambda path: (Path(path).name, path))
    pairs = zip(sorted(paths_before, key=lambda path: (Path(path).name, path)), by_name)
    if all(same_content([first, second]) for first, second in pairs):
        return SAME_BYTES
    return None


def identical_text(kind: str) -> str:
    """The one reason an identical pair gets: ``BEFORE and AFTER are the same capture (same bytes): nothing to
    compare``."""
    return f"BEFORE and AFTER are the same capture ({kind}): nothing to compare, every change is 0"



def serving_comparable(before: Side, after: Side, serving: ServingComparison | None = None) -> tuple[bool, str | None]:
    """Whether the serving artifacts of both sides can be judged (a TTFT p50 on each, request
    rates within 5%, input lengths that did not shift: ``serving``'s test), and why not when their
    request rates or inputs differ."""
    if not (before.serving and after.serving):
        return False, None
    if serving is not None and serving.input_shift_reason():
        return False, serving.input_shift_reason()
    figures_before, figures_after = serving_figures(before.serving), serving_figures(after.serving)
    if figures_before["ttft_p50_ms"] is None or figures_after["ttft_p50_ms"] is None:
        lacking = [side.label for side, figures in ((before, figures_before), (after, figures_after))
                   if figures["ttft_p50_ms"] is None]
        return False, (f"no TTFT p50 of a serving benchmark on {' and '.join(lacking)}: its serving latencies are not compared "
                       "(capture the same benchmark on both sides)")
    rate_before, rate_after = figures_before["request_rate"], figures_after["request_rate"]
    if (rate_before is not None and rate_after is not None
            and abs(rate_before - rate_after) > REQUEST_RATE_TOLERANCE * max(rate_before, rate_after)):
        return False, (f"serving benchmarks ran at other request rates ({rate_before:g} vs {rate_after:g} req/s): their "
                       "latencies are not compared")
    return True, None


def kernel_overlap(before: Side, after: Side) -> float | None:
    """Sum over kernel names of min(share before, share after), shares of all kernel time on
    all devices of the side (1 = the same kernels in the same proportions)."""
    shares_before, shares_after = _kernel_shares(before), _kernel_shares(after)
    if not shares_before or not shares_after:
        return None
    return float(sum(min(share, shares_after.get(name, 0.0)) for name, share in shares_before.items()))


def _kernel_shares(side: Side) -> dict[str, float] | None:
    """Each kernel name's share of all kernel time on the side's devices (None when no kernel time)."""
    total_ns = Counter()
    for device in side.devices:
        for kernel in device.kernels:
            total_ns[kernel.name] += kernel.total_ns
    all_ns = sum(total_ns.values())
    return {name: ns / all_ns for name, ns in total_ns.items()} if all_ns else None
