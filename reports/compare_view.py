"""The view of a Comparison (``tracetriage.compare/2``): every figure and phrase its reports show, formatted once.

:func:`compare_view` builds a :class:`CompareView` once from the comparison's record (tracetriage/records/compare.py,
read from its contract dict); the text, Markdown and HTML reports are templates (reports/templates/compare.*.j2)
that lay it out and compute nothing. A field a format leaves out is listed, with the reason, in tests/test_view_parity.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracetriage.contract import load
from tracetriage.records.compare import (
    DOUBT_PREFIX,
    ComparedFinding,
    ComparisonRecord,
    DeviceRate,
    FindingEvidence,
    KernelRate,
    LongSteps,
    Metric,
    MovedKernel,
    Mover,
    Side,
    StepTime,
    read,
)
from tracetriage.reports.compare_across_view import AcrossDevicesView, across_view
from tracetriage.reports.compare_deploy_view import DeployView, deploy_view
from tracetriage.wording import (
    counted,
    duration_pair_ms,
    fmt_ns,
    long_steps_words,
    ms_decimals,
    ms_text,
    noise_words,
    ratio_text,
    speed_text,
)

LABELS = {
    "step_p50_ms": "step p50", "step_p99_ms": "step p99", "compute_ms": "compute, collectives excluded",
    "collective_ms": "exposed collective",
    "copy_ms": "copies only", "idle_ms": "GPU idle", "idle_sync_ms": "idle: host in blocking syncs",
    "idle_memcpy_sync_ms": "idle: host in synchronous copies", "idle_launch_ms": "idle: host in launch calls",
    "idle_other_cuda_ms": "idle: other CUDA/HIP calls", "idle_host_ms": "idle: host code, no CUDA call",
    "idle_unknown_ms": "idle: cause unknown",
    "idle_dependency_ms": "idle: dependency, work queued", "busy_pct": "GPU busy (share of its window)",
    "launches_per_step": "kernel launches", "graph_launches_per_step": "graph launches", "syncs_per_step": "blocking syncs",
    "dtoh_copies_per_step": "device-to-host copies", "ttft_p50_ms": "TTFT p50", "ttft_p99_ms": "TTFT p99",
    "tpot_p50_ms": "TPOT p50", "tpot_p99_ms": "TPOT p99", "itl_p50_ms": "ITL p50", "itl_p99_ms": "ITL p99",
    "e2el_p50_ms": "end-to-end latency p50", "throughput_rps": "request throughput",
    "input_len_mean": "input tokens per request (mean)", "output_len_mean": "output tokens per request (mean)",
}
VERDICT_WORDS = {"improved": "Improved", "regressed": "Regressed", "unchanged": "Unchanged (within the threshold)",
                 "within noise": "Within noise (not significant: the data cannot tell)",
                 "mixed": "Mixed", "inconclusive": "Inconclusive",
                 "across_devices": "Across devices, each against its own peaks"}
SERVING_PREFIXES = ("ttft_", "tpot_", "itl_", "e2el_", "throughput_", "input_len_", "output_len_")
STEP_NOTE = ("idle by cause says what the host was doing, a finding claims idle by when it happens, e.g. after each "
             "sync, so the two cut the same time differently")
SERVING_NOTE = "client percentiles and throughput from the serving benchmark, per request"


def ms(value, decimals: int | None = None, sign: str = "") -> str:
    """Milliseconds by compare's one precision rule (tracetriage/wording.py ms_decimals)."""
    return "n/a" if value is None else ms_text(value, decimals, sign)


def ms_of_ns(ns) -> str:
    """Nanoseconds shown as milliseconds by compare's precision rule."""
    return "n/a" if ns is None else ms(ns / 1e6)


def pct(value) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def metric_value(value, unit: str) -> str:
    """A metric's level in its unit: ms by compare's precision rule, % to a decimal, req/s to two."""
    if value is None:
        return "n/a"
    if unit in ("ms", "ms/step"):
        return ms(value)
    if unit == "%":
        return f"{value:.1f}%"
    if unit == "req/s":
        return f"{value:.2f} req/s"
    if unit == "tokens":
        return f"{value:,.1f} tokens"
    return f"{value:,.1f}".rstrip("0").rstrip(".")


def metric_change(metric: Metric) -> str:
    """after - before: points for a share, ms as precise as the coarser of the two values, no finer;
    anything else at the precision of its level (metric_value) with its unit (req/s, tokens)."""
    delta, unit = metric.change, metric.unit
    if delta is None:
        return "n/a"
    if unit == "%":
        return f"{delta:+.1f} pt"
    if unit.startswith("ms"):
        coarser = max(abs(metric.before or 0.0), abs(metric.after or 0.0))
        return ms(delta, ms_decimals(coarser), sign="+")
    if unit == "req/s":
        return f"{delta:+.2f} req/s"
    if unit == "tokens":
        return f"{delta:+,.1f} tokens"
    return f"{delta:+,.1f}".rstrip("0").rstrip(".")


def metric_label(metric: Metric | dict, ranks: int = 1) -> str:
    """The row's name (of a metric's record or its contract dict) with its statistic (compare_metrics.statistic):
    a step percentile of several ranks says it is their median (the summary line names one rank's), a figure
    in ms per step that it is a mean, a count per step that it is the median step's."""
    metric = load(Metric, metric)
    label = LABELS.get(metric.name, metric.name)
    if metric.name in ("step_p50_ms", "step_p99_ms") and ranks > 1:
        return f"{label}, median of {ranks} ranks"
    if metric.unit == "ms/step":  # the window's slice over the steps: a mean, beside the step p50 and p99 rows
        return f"{label} (mean per step)"
    return f"{label} (median per step)" if metric.unit in ("calls/step", "copies/step") else label


def is_serving(metric: Metric) -> bool:
    """A serving figure (client percentiles, request throughput): per request, never per step."""
    return metric.name.startswith(SERVING_PREFIXES)


def side_steps(side: Side) -> str:
    if side.world_size > 1:
        return f"{counted(side.steps_per_rank, 'step')} per rank x {side.world_size} ranks"
    return counted(side.steps, "step")


def doubtful(comparison: ComparisonRecord) -> bool:
    """Whether the pair was judged comparable with low confidence (its summary leads with that doubt)."""
    return bool(comparison.comparable.ok) and comparison.summary.startswith(DOUBT_PREFIX)


def verdict_detail(comparison: ComparisonRecord) -> str:
    """The summary without its leading verdict word (the reports print the verdict in words themselves)."""
    summary, verdict = comparison.summary, comparison.verdict
    if doubtful(comparison):
        summary = summary.partition(f": {verdict}")[2].lstrip()
        return summary[1:].strip() if summary[:1] in (";", ":") else summary
    for separator in (";", ":"):
        if summary.startswith(verdict + separator):
            return summary[len(verdict) + 1:].strip()
    return summary


@dataclass(frozen=True, slots=True)
class SideView:
    """One side of the comparison: its inputs, devices, steps and its own headline (None: none recorded)."""
    label: str
    devices: str
    steps: str
    headline: str | None


@dataclass(frozen=True, slots=True)
class StepTimeView:
    """One rank's step time before and after: medians and p99 (ms), the ratio after/before with its 95%
    interval, the Mann-Whitney p; ``measured`` false when a side had too few steps to test."""
    rank: str
    before_pid: str
    after_pid: str
    measured: bool
    before_p50: str
    after_p50: str
    before_p99: str
    after_p99: str
    speed: str | None
    ratio: str | None
    ci_low: str | None
    ci_high: str | None
    p_value: str
    status: str
    p99_status: str
    before_steps: str
    after_steps: str
    status_words: str
    p99_ratio: str | None
    p99_ci_low: str | None
    p99_ci_high: str | None
    p99_words: str
    long_words: str | None


@dataclass(frozen=True, slots=True)
class EvidencedFindingView:
    """A finding of the before capture checked on the after one (or new after), and what decided it."""
    id: str
    status: str
    status_class: str
    before_ms_per_step: str
    after_ms_per_step: str
    decided_by: str
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MetricView:
    """One metric's row: its label, before, after, the change and its direction."""
    label: str
    before: str
    after: str
    change: str
    direction: str


@dataclass(frozen=True, slots=True)
class MetricSectionView:
    """A part of the metrics table under a heading that applies to its rows (``note`` None: nothing to add)."""
    title: str
    note: str | None
    serving: bool
    rows: tuple[MetricView, ...]


@dataclass(frozen=True, slots=True)
class MovedKernelView:
    """A kernel that moved: ms per step and share of its device's window (%) on each side."""
    device: str
    name: str
    short_name: str
    graph: bool
    before_ms_per_step: str
    after_ms_per_step: str
    before_share: str
    after_share: str


@dataclass(frozen=True, slots=True)
class OneSideKernelView:
    """A kernel of a pair without steps that only one side ran (``side``: before or after): its time as a
    share of that side's device window; no time per call compares it, so the work rate does not judge it."""
    device: str
    name: str
    short_name: str
    side: str
    share: str


@dataclass(frozen=True, slots=True)
class MoverView:
    """A component of one rank's step that moved: ms per step on each side, the change, and why it
    counts (beyond the threshold, or grown by a quarter of itself while under it)."""
    label: str
    rank: str
    before: str
    after: str
    change: str
    why: str


@dataclass(frozen=True, slots=True)
class DeviceRateView:
    """One matched device pair of captures without steps: the kernel time per call after/before
    with its interval and status, the kernels it rests on and the share of kernel time they cover,
    their calls per second with its ratio after/before, interval, p and status; ``reason`` why it was
    not measured (None when it was)."""
    device: str
    measured: bool
    kernels: str
    before_covered: str
    after_covered: str
    before_calls_per_s: str
    after_calls_per_s: str
    ratio: str | None
    ci_low: str | None
    ci_high: str | None
    status: str
    reason: str | None
    rate_ratio: str | None
    rate_ci_low: str | None
    rate_ci_high: str | None
    rate_p_value: str
    rate_status: str


@dataclass(frozen=True, slots=True)
class KernelRateView:
    """One common kernel of captures without steps: calls and time per call on each side, the ratio
    after/before with its interval, the Mann-Whitney p and the status."""
    device: str
    name: str
    short_name: str
    before_calls: str
    after_calls: str
    before_per_call: str
    after_per_call: str
    ratio: str
    ci_low: str
    ci_high: str
    p_value: str
    status: str


@dataclass(frozen=True, slots=True)
class CompareView:
    """Everything a report of one Comparison shows, in the order the text report shows it: ``threshold``
    the practical minimum (% of the before step) as ``%g`` spells it, ``threshold_repr`` as the contract
    does; ``noise_ms_per_step`` None when the before step was not measured; ``step_test`` the test of the
    step times, None when no rank's steps were compared. A pair of captures without steps has
    ``work_rate`` (per device), ``rate_kernels``, ``one_side_kernels`` (those only one side ran: the
    JSON's ``kernels`` with a side at 0) and ``work_rate_method`` instead of step times and per-step kernels;
    ``movers`` are the per-step components that moved, largest first across ranks;
    ``across_devices`` the per-class table of compare --across-devices (None without it)."""
    tool_version: str
    schema: str
    summary: str
    verdict: str
    verdict_words: str
    detail: str
    before: SideView
    after: SideView
    comparable: bool
    doubtful: bool
    confidence: str
    reasons: tuple[str, ...]
    slo_broken: tuple[str, ...]
    slo_not_measured: tuple[str, ...]
    threshold: str
    threshold_repr: str
    noise_ms_per_step: str | None
    step_test: str | None
    step_time: tuple[StepTimeView, ...]
    findings: tuple[EvidencedFindingView, ...]
    sections: tuple[MetricSectionView, ...]
    kernels: tuple[MovedKernelView, ...]
    movers: tuple[MoverView, ...]
    work_rate_method: str | None
    work_rate: tuple[DeviceRateView, ...]
    rate_kernels: tuple[KernelRateView, ...]
    one_side_kernels: tuple[OneSideKernelView, ...]
    across_devices: AcrossDevicesView | None
    deploy: DeployView | None


def compare_view(comparison: dict | ComparisonRecord) -> CompareView:
    """The view of one Comparison (its contract dict or record), built once for every format."""
    comparison = read(comparison)
    comparable, noise, rate = comparison.comparable, comparison.method.noise_ms_per_step, comparison.work_rate
    return CompareView(
        tool_version=str(comparison.tool_version), schema=str(comparison.schema), summary=comparison.summary,
        verdict=comparison.verdict, detail=verdict_detail(comparison),
        verdict_words=VERDICT_WORDS[comparison.verdict] + (f" (low confidence {comparison.comparable.confidence:.2f}: the "
                                                          "captures' signatures differ)" if doubtful(comparison) else ""),
        before=_side(comparison.before), after=_side(comparison.after),
        comparable=bool(comparable.ok), doubtful=doubtful(comparison), confidence=f"{comparable.confidence:.2f}",
        reasons=tuple(comparable.reasons),
        slo_broken=tuple(comparison.slo_broken), slo_not_measured=tuple(comparison.slo_not_measured),
        threshold=f"{comparison.threshold_pct:g}", threshold_repr=str(comparison.threshold_pct),
        noise_ms_per_step=None if noise is None else ms(noise),
        step_test=str(comparison.method.step_test) if comparison.step_time and rate is None else None,
        step_time=() if rate is not None else tuple(_step_time(rank, comparison.threshold_pct)
                                                      for rank in comparison.step_time),
        findings=tuple(_finding(finding) for finding in comparison.findings),
        sections=metric_sections(comparison.metrics, len(comparison.step_time), stepless=rate is not None),
        kernels=() if rate is not None else tuple(_kernel(kernel) for kernel in comparison.kernels),
        movers=tuple(_mover(mover, comparison.threshold_pct) for mover in comparison.movers),
        work_rate_method=None if rate is None else str(rate.method),
        work_rate=() if rate is None else tuple(_device_rate(device) for device in rate.devices),
        rate_kernels=() if rate is None else tuple(_kernel_rate(kernel) for kernel in rate.kernels),
        one_side_kernels=() if rate is None else one_side_kernels(comparison.kernels),
        across_devices=None if comparison.across_devices is None else across_view(comparison.across_devices),
        deploy=deploy_view(comparison.serving))


def _side(side: Side) -> SideView:
    return SideView(label=str(side.label), devices=str(side.devices), steps=side_steps(side), headline=side.headline)


def _ratio(value: float | None) -> str | None:
    return None if value is None else ratio_text(value)


def _bounds(interval: list[float] | None) -> tuple[str | None, str | None]:
    """A 95% interval's two ends as ratios are printed (wording.ratio_text; None, None: not measured)."""
    return (None, None) if interval is None else (ratio_text(interval[0]), ratio_text(interval[1]))


def _p(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2g}"


def _step_time(rank: StepTime, threshold_pct: float) -> StepTimeView:
    measured = rank.ratio is not None
    ci_low, ci_high = _bounds(rank.ci95) if measured else (None, None)
    p99_low, p99_high = _bounds(rank.p99_ci95) if rank.p99_ratio is not None else (None, None)
    counts = (rank.before_count, rank.after_count, threshold_pct)
    return StepTimeView(
        rank=str(rank.rank), before_pid=str(rank.before_pid), after_pid=str(rank.after_pid), measured=measured,
        before_p50=ms_of_ns(rank.before_p50_ns), after_p50=ms_of_ns(rank.after_p50_ns),
        before_p99=ms_of_ns(rank.before_p99_ns), after_p99=ms_of_ns(rank.after_p99_ns),
        speed=speed_text(rank.before_p50_ns, rank.after_p50_ns) if measured else None,
        ratio=_ratio(rank.ratio), ci_low=ci_low, ci_high=ci_high, p_value=_p(rank.p_value),
        status=str(rank.status), p99_status=str(rank.p99_status),
        before_steps=str(rank.before_count), after_steps=str(rank.after_count),
        status_words=noise_words(str(rank.status), *counts),
        p99_ratio=_ratio(rank.p99_ratio) if rank.p99_ci95 is not None else None, p99_ci_low=p99_low, p99_ci_high=p99_high,
        p99_words=rank.p99_reason or noise_words(str(rank.p99_status), *counts), long_words=_long_words(rank.long_steps))


def _long_words(long: LongSteps | None) -> str | None:
    """A rank's long steps in the words of the summary (wording.long_steps_words); None when no step is long
    on either side."""
    if long is None or not (long.before or long.after):
        return None
    return long_steps_words(long)


def _finding(finding: ComparedFinding) -> EvidencedFindingView:
    lines = {evidence.text: _evidence_text(evidence) for evidence in finding.evidence}
    decided_by = finding.decided_by
    for written, shown in lines.items():  # "...: its slices, ms per step: 2.120 ms -> 0.000 ms" ends some decisions
        if written != shown and decided_by.endswith(f": {written}"):
            decided_by = decided_by[:-len(written)] + shown
    return EvidencedFindingView(
        id=finding.id, status=finding.status or "not judged", status_class=finding.status or "unchanged",
        before_ms_per_step=ms(finding.before_ms_per_step), after_ms_per_step=ms(finding.after_ms_per_step),
        decided_by=decided_by, evidence=tuple(lines[evidence.text] for evidence in finding.evidence))


def _evidence_text(evidence: FindingEvidence) -> str:
    """A finding's figure as the contract's sentence says it, its durations written as analyze writes them
    (wording.duration_ms): "what each analysis says it claims, per step: 18.9 µs -> 25.0 µs" where the
    contract says "..., ms per step: 0.019 ms -> 0.025 ms" (the JSON keeps its text and its values)."""
    figures = (evidence.before, evidence.after)
    if not evidence.unit.startswith("ms") or any(isinstance(value, bool) or not isinstance(value, (int, float, type(None)))
                                                 for value in figures):
        return evidence.text
    written = ": " + " -> ".join("not measured" if value is None else ms_text(value) for value in figures)
    if not evidence.text.endswith(written):  # a sentence of another form: as the contract says it
        return evidence.text
    label = evidence.text[:-len(written)].replace(", ms per step", ", per step")
    return f"{label}: {duration_pair_ms(evidence.before, evidence.after)}"


def metric_sections(metrics: tuple[Metric, ...], ranks: int = 1, stepless: bool = False) -> tuple[MetricSectionView, ...]:
    """The metrics table in two parts, each under a heading that applies to its rows: the per-step figures
    (with a note on idle by cause when they have idle rows), per call for captures without steps
    (``stepless``: compare reads their work rate), then the serving figures."""
    step = [metric for metric in metrics if not is_serving(metric)]
    serving = [metric for metric in metrics if is_serving(metric)]
    sections = []
    if step:
        idle = any(metric.name.startswith("idle_") for metric in step)
        heading = "Per call, absolute" if stepless else "Per step, absolute"
        sections.append(MetricSectionView(heading, STEP_NOTE if idle else None, False, _metric_rows(step, ranks)))
    if serving:
        sections.append(MetricSectionView("Serving", SERVING_NOTE, True, _metric_rows(serving)))
    return tuple(sections)


def _metric_rows(metrics: list[Metric], ranks: int = 1) -> tuple[MetricView, ...]:
    return tuple(MetricView(metric_label(metric, ranks), metric_value(metric.before, metric.unit),
                            metric_value(metric.after, metric.unit), metric_change(metric), metric.direction)
                 for metric in metrics)


def _short(name: str) -> str:
    """A kernel's name cut in the middle past 90 characters."""
    return name if len(name) <= 90 else name[:44] + "…" + name[-44:]


def _kernel(kernel: MovedKernel) -> MovedKernelView:
    name = str(kernel.name)
    return MovedKernelView(
        device=str(kernel.device), name=name, short_name=_short(name), graph=kernel.kind == "graph",
        before_ms_per_step=ms(kernel.before_ms_per_step), after_ms_per_step=ms(kernel.after_ms_per_step),
        before_share=pct(kernel.before_share_pct), after_share=pct(kernel.after_share_pct))


def one_side_kernels(kernels: tuple[MovedKernel, ...]) -> tuple[OneSideKernelView, ...]:
    """The kernels of a pair without steps that one side ran and the other did not (its share 0, or not
    measured on a graph-level side), largest share first: the contract's ``kernels`` rows the work rate,
    which compares the common kernels only, leaves out."""
    rows = []
    for kernel in kernels:
        shares = {"before": kernel.before_share_pct, "after": kernel.after_share_pct}
        ran = [side for side, share in shares.items() if share]
        if len(ran) == 1:
            rows.append((shares[ran[0]], kernel, ran[0]))
    rows.sort(key=lambda row: (-row[0], row[1].name))
    return tuple(OneSideKernelView(device=str(kernel.device), name=str(kernel.name), short_name=_short(str(kernel.name)),
                                   side=side, share=pct(share)) for share, kernel, side in rows)


def _mover(mover: Mover, threshold_pct: float) -> MoverView:
    coarser = max(abs(mover.before_ms), abs(mover.after_ms))
    if mover.beyond_noise:
        why = f"beyond the {threshold_pct:g}%-of-step threshold"
    elif mover.change_pct is not None:
        why = f"grew {mover.change_pct:.0f}%, below the {threshold_pct:g}%-of-step threshold"
    else:
        why = f"grew from nothing, below the {threshold_pct:g}%-of-step threshold"
    return MoverView(label=str(mover.label), rank=str(mover.rank), before=ms(mover.before_ms),
                     after=ms(mover.after_ms), change=ms(mover.change_ms, ms_decimals(coarser), sign="+"), why=why)


def _rate(value) -> str:
    return "n/a" if value is None else f"{value:,.0f}/s"


def _device_rate(device: DeviceRate) -> DeviceRateView:
    measured = device.ratio is not None
    ci_low, ci_high = _bounds(device.ci95) if measured else (None, None)
    rate_ci_low, rate_ci_high = _bounds(device.rate_ci95)
    return DeviceRateView(
        device=str(device.device), measured=measured, kernels=str(device.kernels),
        before_covered=pct(device.before_covered_pct), after_covered=pct(device.after_covered_pct),
        before_calls_per_s=_rate(device.before_calls_per_s), after_calls_per_s=_rate(device.after_calls_per_s),
        ratio=_ratio(device.ratio), ci_low=ci_low, ci_high=ci_high, status=str(device.status), reason=device.reason,
        rate_ratio=_ratio(device.rate_ratio), rate_ci_low=rate_ci_low, rate_ci_high=rate_ci_high,
        rate_p_value=_p(device.rate_p_value), rate_status=str(device.rate_status))


def _kernel_rate(kernel: KernelRate) -> KernelRateView:
    name = str(kernel.name)
    ci_low, ci_high = _bounds(kernel.ci95)
    return KernelRateView(
        device=str(kernel.device), name=name, short_name=_short(name),
        before_calls=f"{kernel.before_calls:,}", after_calls=f"{kernel.after_calls:,}",
        before_per_call=fmt_ns(kernel.before_ns_per_call), after_per_call=fmt_ns(kernel.after_ns_per_call),
        ratio=ratio_text(kernel.ratio), ci_low=ci_low, ci_high=ci_high, p_value=f"{kernel.p_value:.2g}",
        status=str(kernel.status))
