"""The typed metrics that flow from the analyzers to the rules and the renderers.

Every type is a frozen, slotted dataclass: what an analyzer produced is never changed
downstream (``dataclasses.replace`` makes a changed copy where one is needed, as the
accounting of each device after the rules ran). Contract types (:class:`Window`,
:class:`Gaps`, :class:`Copies`, :class:`StepStats`, :class:`DeviceMetrics`,
:class:`ProcessMetrics`) write the JSON contract with :meth:`Contract.to_contract`: their
fields in declaration order, which is the contract's key order, except the fields marked
``private`` (figures the rules read that the contract does not carry). The contract leaves
inside them (gap histograms, kernel rows, copy directions ...) stay plain dicts and lists,
as the JSON has them; frozen means a field is never rebound, not that those leaves are
deep-frozen: nothing writes into them after they are built.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from tracetriage.analyzers.efficiency_rows import ClassRow, DecodeFloor, NotMeasured, TopOp
from tracetriage.analyzers.findings import Abstention
from tracetriage.analyzers.queued import ClockCheck

if TYPE_CHECKING:  # busbw imports the device table and the topology, which import this module
    from tracetriage.analyzers.busbw import BusBandwidth

PRIVATE = {"private": True}  # field metadata: a figure the rules read that the JSON contract does not carry


def contract_value(value: Any) -> Any:
    """A field's value in the contract: a contract type's own contract, lists of them item by item."""
    if isinstance(value, Contract):
        return value.to_contract()
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], Contract):
        return [item.to_contract() for item in value]
    return value


class Contract:
    """A type that writes a block of the JSON contract."""

    __slots__ = ()

    @classmethod
    def contract_keys(cls) -> list[str]:
        """The contract keys this type can write, in the contract's order."""
        return [f.name for f in fields(cls) if not f.metadata.get("private")]

    def to_contract(self) -> dict:
        """This block of the JSON contract: every field not marked private, in declaration order."""
        return {name: contract_value(getattr(self, name)) for name in self.contract_keys()}


@dataclass(frozen=True, slots=True)
class Window(Contract):
    """The analysis window of one trace (ns on its clock): its steady phase (phases.py) — steady-state
    steps, else found from the GPU activity.
    ``setup_cause`` (what the host did before the window) is written only when set-up was excluded."""

    start_ns: int
    end_ns: int
    duration_ns: int
    source: str
    warmup_steps_excluded: int
    setup_excluded_ns: int
    setup_cause: dict | None = None

    def to_contract(self) -> dict:
        out = Contract.to_contract(self)
        if not self.setup_excluded_ns:
            del out["setup_cause"]
        return out


@dataclass(frozen=True, slots=True)
class Phase(Contract):
    """One phase of a trace (analyzers/phases.py): ``phase`` (setup, steady, teardown), [start_ns,
    end_ns) on its clock, and what fills it: the GPU's busy share (% of the phase, every device's
    activity as one), the kernels that start in it, its longest GPU-idle stretches (``host_only``:
    ``start_ns``, ``length_ns``, ``call`` the host call covering half of it or None, ``in_calls_pct``
    the share spent inside any runtime call — host-only under half, else inside CUDA/HIP calls), its
    synchronous copy calls (count, longest and summed host ns inside the phase), the bytes its
    GPU copies moved, its graph capture/instantiate calls, its allocator calls, the warm-up
    steps dropped in it and ``warmup_range``, the host range whose end it runs to (a warm-up
    pass inside the activity; None when the set-up ends otherwise)."""

    phase: str
    start_ns: int
    end_ns: int
    duration_ns: int
    busy_pct: float
    kernels: int
    host_only: list[dict]
    sync_copies: dict
    copy_bytes: int
    graph_capture_calls: int
    alloc_calls: int
    warmup_steps: int
    warmup_range: str | None = None


@dataclass(frozen=True, slots=True)
class Phases(Contract):
    """The phases of a trace (analyzers/phases.py): how the steady phase was found (``steps`` or
    ``activity``), the set-up before it and the tear-down after it (None when shorter than
    phases.PHASE_MIN_SHARE of the capture), the steady phase (the analysis window; None when there
    is none: ``no_steady`` then holds the window's kernel launches and how many repeat an earlier
    kernel), and the share of the window's kernel launches that repeat one (%)."""

    source: str
    setup: Phase | None
    steady: Phase | None
    teardown: Phase | None
    no_steady: dict | None
    repeat_pct: float | None

    @property
    def reported(self) -> bool:
        """Whether the capture holds more than one phase (or no steady one): the contract carries
        the phases only then."""
        return bool(self.setup or self.teardown or self.no_steady)


@dataclass(frozen=True, slots=True)
class Gaps(Contract):
    """The idle gaps of one device in the window: their count, lengths, causes, histogram, the longest."""

    count: int
    total_ns: int
    p50_ns: int
    p99_ns: int
    max_ns: int
    by_cause: dict[str, int]
    by_cause_pct_of_window: dict[str, float]
    histogram: dict[str, int]
    top: list[dict]


@dataclass(frozen=True, slots=True)
class DeviceTimeline:
    """timeline.device_timeline of one device: busy ns and %, the gaps, busy over time, and the
    idle figures the rules read (after a sync, short gaps in launch/host code, idle by gap class
    and cause, busy ns inside the long steps)."""


    busy_ns: int
    window_ns: int
    busy_pct: float
    gaps: Gaps
    busy_timeline: list[float]
    after_sync_ns: int
    after_sync_count: int
    short_launch_host_ns: int
    short_gap_count: int
    idle_by_class: dict[str, dict[str, int]]
    busy_in_spans_ns: int
    idle_in_pageable_copies_ns: int = 0
    idle_in_calls: dict[str, int] = field(default_factory=dict)
    # the idle ns inside any call of the owning process (the union of its calls): the idle-by-host pass's
    # host-code figure reads it (host_activity.idle_by_host); None where the pass did not measure it
    idle_in_any_call_ns: int | None = None


@dataclass(frozen=True, slots=True, eq=False)
class CollectiveCalls:
    """The collective kernels of one device (its index in the trace's devices) that start in the
    window, by start: start and end ns and op (collectives.py), the skew's input."""

    device: int
    starts: np.ndarray
    ends: np.ndarray
    ops: np.ndarray

    @classmethod
    def empty(cls, device: int) -> CollectiveCalls:
        return cls(device=device, starts=np.empty(0, np.int64), ends=np.empty(0, np.int64), ops=np.empty(0, object))


@dataclass(frozen=True, slots=True, eq=False)
class DeviceCollectives:
    """collectives.device_collectives of one device (see that module for the definitions), with the
    exposed ns and its collective calls in the window (the skew's input)."""

    collective_ns: int
    collective_share_pct: float
    collective_exposed_pct: float
    collectives_by_op: dict[str, float]
    collective_count: int
    calls: CollectiveCalls
    exposed_ns: int
    bus: BusBandwidth | None = None


@dataclass(frozen=True, slots=True)
class LateRank(Contract):
    """The rank the others waited for most (collectives.rank_skew): its device label and rank (the
    trace's distributed rank, when the ranks are separate traces that name it), the matched calls
    it was the last to start, the share of all the waiting that was for it, and what it did
    meanwhile (collectives.what_came_before: ``before_where`` gpu or host, ``before`` the kernel or
    range, ``before_ns`` the kernel's overlap with the waits, or for a host range the late device's
    GPU idle under it in the window — its idle-by-host row, one figure in the table and the finding
    (host_activity.idle_under when the table does not list it); ``before`` empty when the trace
    shows nothing)."""

    device: str
    rank: int | None
    late_calls: int
    waited_share_pct: float
    before_where: str
    before: str
    before_ns: int


@dataclass(frozen=True, slots=True, eq=False)
class CollectiveSkew(Contract):
    """Start spread of the same collective across ranks (collectives.py: calls matched by their
    ends): ``matched``, ``p50_ns``, ``max_ns``, ``reason``; ``wait_share_pct`` the share of the matched
    calls' time that ranks spent waiting for the last one to start; ``end_spread_p50_ns`` the median
    spread of their ends (it bounds the clocks' offset); ``clock`` "one trace" or "files" (each rank
    its own trace and clock); ``late_rank`` the rank waited for most, None when the ranks compared are
    fewer than the job's world size (``reason`` says how many of how many). Private: the late rank's
    median call (the transfer without the wait), the intervals it was late in (2 x calls), each
    rank's waiting in the matched calls (device label -> ns), the median matched call of every rank,
    the ranks compared and the world size the traces record (None where none does)."""

    matched: int
    p50_ns: int | None
    max_ns: int | None
    reason: str | None
    wait_share_pct: float | None = None
    end_spread_p50_ns: int | None = None
    clock: str | None = None
    late_rank: LateRank | None = None
    duration_p50_ns: int = field(default=0, metadata=PRIVATE)
    late_intervals: np.ndarray = field(default_factory=lambda: np.empty((2, 0), np.int64), metadata=PRIVATE)
    wait_ns: dict[str, int] = field(default_factory=dict, metadata=PRIVATE)
    call_p50_ns: int = field(default=0, metadata=PRIVATE)
    ranks_captured: int = field(default=0, metadata=PRIVATE)
    world_size: int | None = field(default=None, metadata=PRIVATE)

    @property
    def partial(self) -> bool:
        """Fewer ranks captured than the job's world size: the late rank may be one not captured."""
        return bool(self.world_size and self.ranks_captured and self.world_size > self.ranks_captured)

    @classmethod
    def unmeasured(cls, reason: str) -> CollectiveSkew:
        return cls(matched=0, p50_ns=None, max_ns=None, reason=reason)


@dataclass(frozen=True, slots=True)
class Copies(Contract):
    """accounting.copy_activity of one device: copies and memsets in the window."""

    count: int
    busy_ns: int
    copy_only_ns: int
    bytes: int
    by_direction: dict[str, dict]
    pageable: int
    overlap_pct: float


@dataclass(frozen=True, slots=True)
class IdleByHost(Contract):
    """A device's idle time in the window by the host range that covers it (analyzers/host_activity.py):
    ``idle_ns`` its gaps, ``host_code_idle_ns`` the part outside every runtime/driver call of its process,
    ``attributed_ns`` the part some host range covers, ``sources`` the kinds of host range the process
    recorded (``user_annotation``, ``cpu_op``, an NVTX domain, ``python``), ``ranges`` the top ranges
    (name, source, idle_ns, pct_of_window, gaps, host_code_ns), most idle first."""

    idle_ns: int
    host_code_idle_ns: int
    attributed_ns: int
    sources: list[str]
    ranges: list[dict]
    api_calls_recorded: bool = field(default=True, metadata=PRIVATE)
    # per row of ``ranges`` (empty when not measured): of the gaps the range covers, how many end with a GPU
    # operation launched by a call inside one of the range's own intervals (the range feeds the GPU itself)
    launched_gaps: tuple[int, ...] = field(default=(), metadata=PRIVATE)


@dataclass(frozen=True, slots=True, eq=False)
class DeviceMetrics(Contract):
    """One device of a trace: what the timeline, collectives, copies and kernels analyzers measured
    in the trace's window, its decomposition (``slices``, accounting.py) and, once the rules ran,
    its ``accounting`` (``dataclasses.replace`` adds it)."""


    id: str
    name: str
    pid: int
    ordinal: int
    gpu_index: int
    trace: str
    busy_ns: int
    window_ns: int
    busy_pct: float
    gaps: Gaps
    collective_ns: int
    collective_share_pct: float
    collective_exposed_pct: float
    collectives_by_op: dict[str, float]
    collective_count: int
    copies: Copies
    kernels: list[dict]
    accounting: dict | None = None
    idle_by_host: IdleByHost | None = None
    after_sync_ns: int = field(default=0, metadata=PRIVATE)
    after_sync_count: int = field(default=0, metadata=PRIVATE)
    short_launch_host_ns: int = field(default=0, metadata=PRIVATE)
    short_gap_count: int = field(default=0, metadata=PRIVATE)
    idle_by_class: dict[str, dict[str, int]] = field(default_factory=dict, metadata=PRIVATE)
    slices: dict[str, int] = field(default_factory=dict, metadata=PRIVATE)
    busy_in_long_steps_ns: int = field(default=0, metadata=PRIVATE)
    collective_exposed_ns: int = field(default=0, metadata=PRIVATE)
    idle_in_pageable_copies_ns: int = field(default=0, metadata=PRIVATE)
    idle_in_calls: dict[str, int] = field(default_factory=dict, metadata=PRIVATE)
    collective_calls: CollectiveCalls | None = field(default=None, metadata=PRIVATE)
    collective_bus: BusBandwidth | None = field(default=None, metadata=PRIVATE)


@dataclass(frozen=True, slots=True)
class StepStats(Contract):
    """The steps of one process (steps.py says where they come from) as the contract states them:
    durations p50/p99/max and a bounded sample of them (analysis.step_sample)."""

    source: str
    range_name: str | None
    count: int
    warmup_dropped: int
    prefill_count: int
    p50_ns: int | None
    p99_ns: int | None
    max_ns: int | None
    durations_ns: list[int]


@dataclass(frozen=True, slots=True)
class HostActivity:
    """steps.host_activity of one process: medians per step (None without steps)."""

    launches_per_step: float | None = None
    graph_launches_per_step: float | None = None
    syncs_per_step: float | None = None
    dtoh_copies_per_step: float | None = None
    dtoh_bytes_per_step: float | None = None


LONG_STEP_FACTOR = 3.0  # a step longer than 3x the median is a stall a user sees (analyze's long steps, compare's measure)


@dataclass(frozen=True, slots=True)
class LongSteps:
    """The long steps of a process (analysis.long_steps): how many, whether labelled prefill, how busy
    its GPUs were during them, and their time above p50 as a % of all step time."""

    count: int = 0
    prefill_labelled: bool = False
    busy_pct: float = 0.0
    excess_pct: float = 0.0


@dataclass(frozen=True, slots=True)
class ProcessMetrics(Contract):
    """One process of a trace: its steps, host activity per step, call and GPU-operation counts,
    and its long steps (``long_steps``, read by the prefill-stall rule, not in the contract)."""


    pid: int
    name: str
    trace: str
    steps: StepStats
    launches_per_step: float | None
    graph_launches_per_step: float | None
    syncs_per_step: float | None
    dtoh_copies_per_step: float | None
    dtoh_bytes_per_step: float | None
    api_calls: int
    gpu_ops: int
    long_steps: LongSteps = field(default_factory=LongSteps, metadata=PRIVATE)


@dataclass(frozen=True, slots=True)
class Efficiency:
    """efficiency.measure of one trace (see that module): the device's peaks, the classes and top
    ops with their rates and roofline, the decode floor, what was not measured, the dominant class;
    and for the rules the kernel ns without work per class, the kernel ns in all, and the ns the
    dominant class wastes below its roofline (``{"class", "ns"}``, empty when not measured)."""


    device: dict | None = None
    device_name: str | None = None
    classes: list[ClassRow] = field(default_factory=list)
    top_ops: list[TopOp] = field(default_factory=list)
    decode_floor: DecodeFloor | None = None
    not_measured: list[NotMeasured] = field(default_factory=list)
    dominant: str | None = None
    unmeasured_ns: dict[str, float] = field(default_factory=dict)
    kernel_ns: float = 0
    wasted_ns: dict = field(default_factory=dict)
    conv_ns: float = 0  # of kernel_ns, convolution kernels' (op_kernels.is_convolution: in the gemm class)


@dataclass(frozen=True, slots=True)
class MathPrecision:
    """math_precision.measure of one trace: per device (the trace's device order) the kernel ns of GEMMs and
    convolutions whose names say FP32 on the CUDA cores (``fp32_ns``) or a tensor-core path (``tensor_ns``),
    and of all kernels (``kernel_ns``); ``top_fp32`` the FP32 kernel names with most time, (name, % of the
    trace's kernel time)."""

    fp32_ns: tuple[float, ...] = ()
    tensor_ns: tuple[float, ...] = ()
    kernel_ns: tuple[float, ...] = ()
    top_fp32: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True)
class TraceSeries:
    """What only the charts need of one trace: busy % over time per device label, step durations
    per process label, the lanes of the timeline chart."""

    busy: dict[str, list[float]]
    steps: dict[str, dict]
    timeline: dict


@dataclass(frozen=True, slots=True, eq=False)
class TraceMetrics:
    """Metrics of one trace in its own window and clock (analysis.analyze_trace); the analysis cache
    keeps them. ``odd`` says why the trace is too small or odd to judge (rules.oddities), empty when
    it can be judged; ``coll_calls`` holds each device's collective calls, for the skew."""


    window: Window
    devices: tuple[DeviceMetrics, ...]
    processes: tuple[ProcessMetrics, ...]
    kernels: list[dict]
    kernels_in_window: int
    gpu_ops_in_window: dict[str, int]
    capture_calls: int
    launches_in_window: int
    launches_total: int
    executed_total: int
    kernel_median_ns: int | None
    copies: dict
    coll_calls: tuple[CollectiveCalls, ...]
    graph_replays_in_window: int
    graph_launches_in_window: int
    has_api: bool
    meta: dict
    series: TraceSeries
    efficiency: Efficiency
    phases: Phases | None = None
    odd: list[Abstention] = field(default_factory=list)
    clock_offsets: tuple[ClockCheck, ...] = ()  # processes whose host and GPU clocks are offset (queued.clock_check)
    precision: MathPrecision = field(default_factory=MathPrecision)  # math_precision.measure
    waits: tuple = ()  # per device, what the trace holds of its dependency waits (wait_sources.measure)
