"""Records of the trace blocks of the analysis contract: the inputs, the analysis window and the
capture's phases, each device (idle gaps, copies, window accounting, idle by host activity), each
process's steps, the top kernels, the window's copies and the collective skew across ranks.
Times are ns on the capture's clock, shares % (of the window unless said)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class CaptureKind:
    """What was captured: the GPU vendor (cuda, rocm), the workload (training, serving), the host language."""
    vendor: str | None = None
    workload: str | None = None
    language: str | None = None


@dataclass(frozen=True, slots=True)
class InputCounts:
    """What was read from one input: kernels, copies, memsets, graph replays, API calls, ranges."""
    kernels: int | None = None
    memcpy: int | None = None
    memset: int | None = None
    graph_replays: int | None = None
    api_calls: int | None = None
    ranges: int | None = None


@dataclass(frozen=True, slots=True)
class Input:
    """One input file: its kind and version, what was read from it (``counts``, its keys in order), its
    warnings and notes. ``counts`` stays a map: the report lists whatever keys the reader wrote."""
    path: str = ""
    kind: str = ""
    version: str | None = None
    warnings: tuple[str, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)
    report_version: str | None = None
    exporter_version: str | None = None
    export_reused: bool | None = None
    files: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Skipped:
    """A file of the case that was not read, and why."""
    path: str = ""
    reason: str = ""


@dataclass(frozen=True, slots=True)
class SetupCause:
    """What the host was doing before the window: the runtime call over the excluded set-up."""
    call: str = ""
    category: str | None = None
    overlap_ns: int | None = None
    call_ns: int | None = None
    caller: str | None = None


@dataclass(frozen=True, slots=True)
class Window:
    """The analysis window: its span, how it was chosen, the warm-up steps and set-up excluded before it."""
    start_ns: int | None = None
    end_ns: int | None = None
    duration_ns: int | None = None
    source: str = ""
    warmup_steps_excluded: int | None = None
    setup_excluded_ns: int | None = None
    setup_cause: SetupCause | None = None


@dataclass(frozen=True, slots=True)
class HostOnlyStretch:
    """A stretch of a phase where the GPU is idle and the host works; ``in_calls_pct`` of it inside runtime calls."""
    start_ns: int | None = None
    length_ns: int = 0
    call: str | None = None
    in_calls_pct: float = 0


@dataclass(frozen=True, slots=True)
class SyncCopies:
    """A phase's synchronous copies: how many, the longest, the host time they hold."""
    count: int = 0
    longest_ns: int | None = None
    host_ns: int | None = None


@dataclass(frozen=True, slots=True)
class Phase:
    """One phase of the capture (set-up, steady, tear-down) and what fills it."""
    phase: str = ""
    start_ns: int | None = None
    end_ns: int | None = None
    duration_ns: int | None = None
    busy_pct: float | None = None
    kernels: int = 0
    host_only: tuple[HostOnlyStretch, ...] = ()
    sync_copies: SyncCopies = SyncCopies()
    copy_bytes: int = 0
    graph_capture_calls: int = 0
    alloc_calls: int = 0
    warmup_steps: int = 0
    warmup_range: str | None = None


@dataclass(frozen=True, slots=True)
class NoSteady:
    """Why a capture has no steady phase: a stall between a few GPU operations, or only first launches."""
    why: str = ""
    kernels: int = 0
    repeated: int = 0
    stall_ns: int | None = None
    stall_call: str | None = None


@dataclass(frozen=True, slots=True)
class Phases:
    """The capture's phases (by steps or by GPU activity); ``steady`` None with ``no_steady`` saying why."""
    source: str = ""
    setup: Phase | None = None
    steady: Phase | None = None
    teardown: Phase | None = None
    no_steady: NoSteady | None = None
    repeat_pct: float | None = None


@dataclass(frozen=True, slots=True)
class Gap:
    """One of a device's longest idle gaps: its start, length and main cause."""
    start_ns: int = 0
    length_ns: int = 0
    cause: str = ""


@dataclass(frozen=True, slots=True)
class Gaps:
    """A device's idle gaps in the window: count, total, percentiles, time by cause and by length
    (``histogram``, its bins in order), the longest ones."""
    count: int = 0
    total_ns: int = 0
    p50_ns: int | None = None
    p99_ns: int | None = None
    max_ns: int | None = None
    by_cause: dict[str, int] = field(default_factory=dict)
    by_cause_pct_of_window: dict[str, float] = field(default_factory=dict)
    histogram: dict[str, int] = field(default_factory=dict)
    top: tuple[Gap, ...] = ()


@dataclass(frozen=True, slots=True)
class DirectionTotals:
    """One copy direction's (or the memsets') operations: count, bytes (``bytes_unrecorded`` of them
    of a size the format does not record), time."""
    count: int = 0
    bytes: int = 0
    bytes_unrecorded: int = 0
    time_ns: int | None = None


@dataclass(frozen=True, slots=True)
class DeviceCopies:
    """A device's copies and memsets in the window, by direction (its keys as the contract orders them)."""
    count: int = 0
    busy_ns: int | None = None
    copy_only_ns: int | None = None
    bytes: int = 0
    by_direction: dict[str, DirectionTotals] = field(default_factory=dict)
    pageable: int | None = None
    overlap_pct: float | None = None


@dataclass(frozen=True, slots=True)
class DeviceKernel:
    """One kernel (or graph) name on a device: calls and total time, durations and calls per bin."""
    name: str = ""
    kind: str = ""
    count: int = 0
    total_ns: int = 0
    durations_ns: tuple[int, ...] = ()
    calls_per_bin: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Accounting:
    """A device's window decomposed: each activity's slice and each finding's claim (% of the window),
    what no finding claims by slice (``unclaimed_pct``, None in analyses saved before it)."""
    slices_pct: dict[str, float] = field(default_factory=dict)
    claims_pct: dict[str, float] = field(default_factory=dict)
    unclaimed_pct: dict[str, float] | None = None


@dataclass(frozen=True, slots=True)
class HostRange:
    """A host range and the device idle time it covers (ns, % of the window, gaps), ``host_code_ns``
    of it outside every runtime call."""
    name: str = ""
    source: str = ""
    idle_ns: int = 0
    pct_of_window: float | None = None
    gaps: int = 0
    host_code_ns: int = 0


@dataclass(frozen=True, slots=True)
class IdleByHost:
    """A device's idle time by the host range covering it: the idle time, the part inside some range."""
    idle_ns: int = 0
    host_code_idle_ns: int = 0
    attributed_ns: int = 0
    sources: tuple[str, ...] = ()
    ranges: tuple[HostRange, ...] = ()


@dataclass(frozen=True, slots=True)
class Device:
    """One device over its window: busy time, idle gaps, collectives, copies, kernels, the window
    accounting and the idle time by host activity."""
    id: str = ""
    name: str = ""
    pid: int | None = None
    ordinal: int | None = None
    gpu_index: int | None = None
    trace: str | None = None
    busy_ns: int = 0
    window_ns: int = 0
    busy_pct: float | None = None
    gaps: Gaps = Gaps()
    collective_ns: int | None = None
    collective_share_pct: float | None = None
    collective_exposed_pct: float | None = None
    collectives_by_op: dict[str, float] = field(default_factory=dict)
    collective_count: int | None = None
    copies: DeviceCopies | None = None
    kernels: tuple[DeviceKernel, ...] = ()
    accounting: Accounting | None = None
    idle_by_host: IdleByHost | None = None


@dataclass(frozen=True, slots=True)
class Steps:
    """A process's steady-state steps: how they were found, how many, their percentiles and durations."""
    source: str = ""
    range_name: str | None = None
    count: int = 0
    warmup_dropped: int | None = None
    prefill_count: int | None = None
    p50_ns: int | None = None
    p99_ns: int | None = None
    max_ns: int | None = None
    durations_ns: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Process:
    """One process: its steps and its host calls per step (medians over steady-state steps)."""
    pid: int | None = None
    name: str = ""
    trace: str | None = None
    steps: Steps = Steps()
    launches_per_step: float | None = None
    graph_launches_per_step: float | None = None
    syncs_per_step: float | None = None
    dtoh_copies_per_step: float | None = None
    dtoh_bytes_per_step: float | None = None
    api_calls: int | None = None
    gpu_ops: int | None = None


@dataclass(frozen=True, slots=True)
class Kernel:
    """One kernel name over the window: calls, total, mean and median time, share of the kernel time."""
    name: str = ""
    count: int = 0
    total_ns: int = 0
    mean_ns: int | None = None
    median_ns: int | None = None
    share_pct: float | None = None


@dataclass(frozen=True, slots=True)
class PageableAsync:
    """Async copies from or to pageable memory (the driver stages them: not async): count, bytes,
    time, the time hidden behind other GPU work, per device."""
    count: int = 0
    bytes: int = 0
    time_ns: int | None = None
    hidden_ns: int | None = None
    by_device: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SyncCopyCalls:
    """Synchronous copy calls: how many, the host time in them."""
    count: int = 0
    time_ns: int | None = None


@dataclass(frozen=True, slots=True)
class CopyCount:
    """A count of copies (or page migrations) and their bytes."""
    count: int = 0
    bytes: int = 0


@dataclass(frozen=True, slots=True)
class Copies:
    """The window's copies: async copies from or to pageable memory, synchronous copy calls, device-to-host
    copies, unified-memory migrations, any pageable copy."""
    pageable_async: PageableAsync = PageableAsync()
    sync_copy_calls: SyncCopyCalls = SyncCopyCalls()
    dtoh: CopyCount = CopyCount()
    migrations: CopyCount = CopyCount()
    pageable_any: CopyCount | None = None


@dataclass(frozen=True, slots=True)
class LateRank:
    """The rank the others wait for at the collectives: its device and rank, what it did before."""
    device: str = ""
    rank: int | None = None
    late_calls: int | None = None
    waited_share_pct: float | None = None
    before_where: str | None = None
    before: str | None = None
    before_ns: int | None = None


@dataclass(frozen=True, slots=True)
class CollectiveSkew:
    """How far apart the ranks start (and end) the same collective, and the late rank."""
    matched: int | None = None
    p50_ns: int | None = None
    max_ns: int | None = None
    reason: str | None = None
    wait_share_pct: float | None = None
    end_spread_p50_ns: int | None = None
    clock: str | None = None
    late_rank: LateRank | None = None


def merged_directions(devices: tuple[Device, ...]) -> dict[str, DirectionTotals]:
    """The devices' copies by direction summed, in first-seen order (count, bytes and unrecorded bytes)."""
    out: dict[str, DirectionTotals] = {}
    for device in devices:
        for direction, totals in (device.copies.by_direction if device.copies else {}).items():
            seen = out.get(direction, DirectionTotals())
            out[direction] = DirectionTotals(seen.count + (totals.count or 0), seen.bytes + (totals.bytes or 0),
                                             seen.bytes_unrecorded + (totals.bytes_unrecorded or 0))
    return out
