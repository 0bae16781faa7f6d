"""Typed, frozen records of the comparison contract (``tracetriage.compare/2``, reports/compare.schema.json),
read once from a Comparison's ``data`` by :func:`tracetriage.contract.load`: :func:`read` builds the whole
comparison as a :class:`ComparisonRecord`; the compare view (reports/compare_view.py) reads its fields.

Each record mirrors one object of the schema, field for field (``class`` is read through
``contract.key``); tests/test_compare_trend_records.py checks them against the schema. The per-request
lengths of a shape are the analysis's :class:`~tracetriage.records.serving.LengthStats` (compare writes
five of its keys), the quality finding the analysis's
:class:`~tracetriage.records.findings.Finding`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracetriage.contract import key, load
from tracetriage.records.findings import Finding
from tracetriage.records.serving import LengthStats

# How the summary of a pair compared with low confidence begins, before its verdict (analyzers/compare.py
# writes it, the compare view reads it to word the verdict with its doubt)
DOUBT_PREFIX = "low confidence"


@dataclass(frozen=True, slots=True)
class Comparable:
    """Whether the two captures can be compared, how sure (0-1), and why not (or what it rests on)."""
    ok: bool = False
    confidence: float = 0.0
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Method:
    """How the step times were tested, the noise floor (ms per step; None: not measured) and the level alpha."""
    step_test: str = ""
    long_step_test: str = ""
    noise_ms_per_step: float | None = None
    alpha: float = 0.0


@dataclass(frozen=True, slots=True)
class Side:
    """One side of the comparison: its label and headline (None: none recorded), the files analysed, its
    devices in words, ranks, steps (in all and per rank), the step p50 (ms) and whether steps are graphs."""
    label: str = ""
    headline: str | None = None
    inputs: tuple[str, ...] = ()
    devices: str = ""
    world_size: int = 1
    steps: int = 0
    step_p50_ms: float | None = None
    graph_level: bool = False
    steps_per_rank: int = 0


@dataclass(frozen=True, slots=True)
class LongSteps:
    """A rank's steps over 3x the before p50 (``cutoff_ns``) on each side, their time above the before
    p50 per step, the Fisher exact test's p of the two rates and the status (analyzers/compare_steps.py)."""
    factor: float = 0.0  # a long step is over this many times the before p50
    cutoff_ns: int = 0
    before: int = 0
    before_steps: int = 0
    after: int = 0
    after_steps: int = 0
    before_ms_per_step: float = 0.0
    after_ms_per_step: float = 0.0
    p_value: float = 1.0
    significant: bool = False
    status: str = ""


@dataclass(frozen=True, slots=True)
class StepTime:
    """One rank's step times before and after (ns): counts, p50 and p99, the ratio after/before of each with
    its 95% interval (None: too few steps to test), the Mann-Whitney p, significance and status."""
    rank: int = 0
    before_pid: int = 0
    after_pid: int = 0
    before_count: int = 0
    after_count: int = 0
    before_p50_ns: int | None = None
    after_p50_ns: int | None = None
    before_p99_ns: int | None = None
    after_p99_ns: int | None = None
    ratio: float | None = None
    ci95: list[float] | None = None  # a list: a null interval stays None (not measured)
    p_value: float | None = None
    significant: bool = False
    status: str = ""
    p99_ratio: float | None = None
    p99_ci95: list[float] | None = None  # a list: a null interval stays None (not measured)
    p99_significant: bool = False
    p99_status: str = ""
    p99_reason: str | None = None  # why the p99 is not judged (too few steps), None when judged
    long_steps: LongSteps | None = None


@dataclass(frozen=True, slots=True)
class Metric:
    """One figure on both sides in its unit, the change after - before, its direction and significance."""
    name: str = ""
    unit: str = ""
    before: float | None = None
    after: float | None = None
    change: float | None = None
    direction: str = ""
    significant: bool = False
    statistic: str = ""  # p50, p99, mean, median, share of the window, rate (compare_metrics.statistic)


@dataclass(frozen=True, slots=True)
class FindingEvidence:
    """One figure a finding's status was decided on, both sides, and its sentence."""
    name: str = ""
    before: Any = None  # a number or a flag, as the finding's evidence holds it
    after: Any = None
    unit: str = ""
    text: str = ""


@dataclass(frozen=True, slots=True)
class ComparedFinding:
    """A finding of either side: its status after (None: not judged), what decided it, whether its fix
    applies, each side's severity and ms per step, and the evidence."""
    id: str = ""
    axis: str | None = None
    status: str | None = None
    decided_by: str = ""
    applied: bool | None = None
    before_severity: str | None = None
    after_severity: str | None = None
    before_ms_per_step: float | None = None
    after_ms_per_step: float | None = None
    evidence: tuple[FindingEvidence, ...] = ()


@dataclass(frozen=True, slots=True)
class MovedKernel:
    """A kernel (or graph) that moved: ms per step on each side and the change, share of its device's window (%)."""
    device: str = ""
    name: str = ""
    kind: str = ""
    before_ms_per_step: float | None = None
    after_ms_per_step: float | None = None
    change_ms_per_step: float | None = None
    before_share_pct: float | None = None
    after_share_pct: float | None = None


@dataclass(frozen=True, slots=True)
class Mover:
    """A component of one rank's step that moved (ms per step each side, the change, in % of before: None
    when it grew from nothing), whether beyond the threshold, whether it grew."""
    component: str = ""
    label: str = ""
    rank: int = 0
    before_ms: float = 0.0
    after_ms: float = 0.0
    change_ms: float = 0.0
    change_pct: float | None = None
    beyond_noise: bool = False
    grown: bool = False
    statistic: str = "mean"  # ms per step: the component's slice of the window over the steps


@dataclass(frozen=True, slots=True)
class DeviceRate:
    """One matched device pair of captures without steps: the kernels compared and the share of kernel time
    they cover, calls per second, the time-per-call ratio and the call-rate ratio with intervals and status;
    ``reason``: why it was not measured (None when it was)."""
    rank: int = 0
    device: str = ""
    kernels: int = 0
    before_covered_pct: float | None = None
    after_covered_pct: float | None = None
    before_calls_per_s: float | None = None
    after_calls_per_s: float | None = None
    ratio: float | None = None
    ci95: list[float] | None = None  # a list: a null interval stays None (not measured)
    significant: bool = False
    status: str = ""
    reason: str | None = None
    rate_ratio: float | None = None
    rate_ci95: list[float] | None = None  # a list: a null interval stays None (not measured)
    rate_p_value: float | None = None
    rate_status: str = ""


@dataclass(frozen=True, slots=True)
class KernelRate:
    """One kernel common to both captures without steps: calls and ns per call each side, the ratio with
    its interval, the Mann-Whitney p, significance and status."""
    device: str = ""
    name: str = ""
    before_calls: int = 0
    after_calls: int = 0
    before_ns_per_call: float = 0.0
    after_ns_per_call: float = 0.0
    ratio: float = 0.0
    ci95: list[float] = field(default_factory=list)
    p_value: float = 0.0
    significant: bool = False
    status: str = ""


@dataclass(frozen=True, slots=True)
class WorkRate:
    """The work rate of a pair of captures without steps: the method, the fewest calls a kernel needs,
    per device and per kernel."""
    method: str = ""
    min_calls: int = 0
    devices: tuple[DeviceRate, ...] = ()
    kernels: tuple[KernelRate, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceSide:
    """One op class or op on one device: ms per unit of work, calls, achieved rates, % of peak, the peak in
    words, the bound, and the share of the class's kernel time measured."""
    ms_per_unit: float = 0.0
    calls: int = 0
    achieved_tflops: float | None = None
    achieved_gbps: float | None = None
    pct_of_peak: float | None = None
    peak: str | None = None
    bound: str | None = None
    measured_share_pct: float | None = None


@dataclass(frozen=True, slots=True)
class AcrossRow:
    """One op class or top op on both devices: each side, the ratio after/before with its interval, the
    ratio the peaks predict, the normalised ratio with its interval, the verdict and its sentence."""
    what: str = ""
    op_class: str = key("class", "")
    before: DeviceSide | None = None
    after: DeviceSide | None = None
    ratio: float | None = None
    ci95: list[float] | None = None  # a list: a null interval stays None (not measured)
    predicted_ratio: float | None = None
    normalised_ratio: float | None = None
    normalised_ci95: list[float] | None = None  # a list: a null interval stays None (not measured)
    verdict: str = ""
    words: str = ""


@dataclass(frozen=True, slots=True)
class AcrossDevices:
    """compare --across-devices: made or refused (and why), the unit, the two devices, the band and work
    tolerance (%), the method, the class rows and the top op rows."""
    ok: bool = False
    reasons: tuple[str, ...] = ()
    unit: str = ""
    before_device: str | None = None
    after_device: str | None = None
    band_pct: float = 0.0
    work_tolerance_pct: float = 0.0
    method: str = ""
    classes: tuple[AcrossRow, ...] = ()
    ops: tuple[AcrossRow, ...] = ()


@dataclass(frozen=True, slots=True)
class Setting:
    """One engine setting on both sides, where each value comes from, whether it changed, and its sentence."""
    name: str = ""
    kind: str = ""
    before: Any = None  # a flag, a number or a text, as the engine printed it
    after: Any = None
    before_source: str = ""
    after_source: str = ""
    changed: bool = False
    text: str = ""


@dataclass(frozen=True, slots=True)
class Shape:
    """One per-request length distribution on both sides, the change of its mean (%), the two-sample KS test
    (statistic, p; None: not tested) and whether it shifted."""
    name: str = ""
    before: LengthStats | None = None
    after: LengthStats | None = None
    mean_change_pct: float | None = None
    ks_statistic: float | None = None
    p_value: float | None = None
    shifted: bool | None = None
    test: str = ""
    text: str = ""


@dataclass(frozen=True, slots=True)
class Share:
    """A share of requests (length-capped, failed) on both sides, the test's p and whether it shifted."""
    name: str = ""
    before_count: int = 0
    before_total: int = 0
    after_count: int = 0
    after_total: int = 0
    p_value: float | None = None
    shifted: bool = False
    text: str = ""


@dataclass(frozen=True, slots=True)
class LoadSide:
    """The benchmark's load on one side: request rate (req/s) and concurrency cap (None: none)."""
    request_rate: float | None = None
    max_concurrency: float | None = None


@dataclass(frozen=True, slots=True)
class Load:
    """The benchmark's load before and after."""
    before: LoadSide = LoadSide()
    after: LoadSide = LoadSide()


@dataclass(frozen=True, slots=True)
class ServingChange:
    """The serving side of the change: the engines, the settings, the changed identity in words, the
    per-request shapes, the shares, the load, whether the inputs and outputs shifted, whether the
    latencies compare (and the note when not), and the quality finding (None: it did not fire)."""
    engines: str = ""
    settings: tuple[Setting, ...] = ()
    identity: tuple[str, ...] = ()
    shapes: tuple[Shape, ...] = ()
    shares: tuple[Share, ...] = ()
    load: Load = Load()
    inputs_shifted: bool | None = None
    outputs_shifted: bool | None = None
    latency_comparable: bool = False
    latency: str | None = None
    quality: Finding | None = None  # the analysis contract's finding


@dataclass(frozen=True, slots=True)
class StepSeries:
    """Each side's step durations (ns) per rank: what the HTML report's step chart draws, kept beside the
    contract (the private ``_series`` of a Comparison's data), never written to the JSON."""
    before: dict[str, list[int]] = field(default_factory=dict)
    after: dict[str, list[int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ComparisonRecord:
    """One comparison: the verdict and summary, whether comparable, the threshold (% of the before step),
    the method, the two sides, the directions it was decided on (``budgets``), the --slo budgets broken and
    not measured, the step time per rank, the metrics, the findings, the kernels and components that moved,
    and the work rate, across-devices and serving blocks (None: not made). ``step_series``: the private
    ``_series`` beside the contract (None: not kept, as in a saved comparison)."""
    schema: str = ""
    tool_version: str = ""
    verdict: str = ""
    summary: str = ""
    comparable: Comparable = Comparable()
    identical: str | None = None  # "same path" / "same bytes": both sides are one capture
    threshold_pct: float = 0.0
    method: Method = Method()
    before: Side = Side()
    after: Side = Side()
    budgets: dict[str, str] = field(default_factory=dict)
    slo_broken: tuple[str, ...] = ()
    step_time: tuple[StepTime, ...] = ()
    metrics: tuple[Metric, ...] = ()
    findings: tuple[ComparedFinding, ...] = ()
    kernels: tuple[MovedKernel, ...] = ()
    slo_not_measured: tuple[str, ...] = ()
    movers: tuple[Mover, ...] = ()
    work_rate: WorkRate | None = None
    across_devices: AcrossDevices | None = None
    serving: ServingChange | None = None
    step_series: StepSeries | None = key("_series")


def read(data: dict[str, Any] | ComparisonRecord) -> ComparisonRecord:
    """The record of a comparison's contract dict (a record as it is)."""
    return load(ComparisonRecord, data)
