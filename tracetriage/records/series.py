"""Records of an Analysis's ``series``: the arrays its charts draw, kept beside the JSON contract,
never in it (busy over time per device, each process's step durations, the timeline's lanes, the
serving engine's load over time), with the ledger's claims and the Perfetto export of this run."""

from __future__ import annotations

from dataclasses import dataclass, field

from tracetriage.records.export import PerfettoExport


@dataclass(frozen=True, slots=True)
class LaneDevice:
    """One device's lanes in a timeline window: (start, end) ns of its kernels, collectives, copies and
    graph replays; (start, end, category) of its process's host calls; (start, end, cause) of its idle gaps."""
    id: str = ""
    pid: int | None = None
    kernels: tuple[tuple[int, int], ...] = ()
    collectives: tuple[tuple[int, int], ...] = ()
    copies: tuple[tuple[int, int], ...] = ()
    graphs: tuple[tuple[int, int], ...] = ()
    host: tuple[tuple[int, int, str], ...] = ()
    gaps: tuple[tuple[int, int, str], ...] = ()

    def gpu_lanes(self) -> tuple[tuple[str, tuple[tuple[int, int], ...]], ...]:
        """(name, spans) of the GPU lanes, in the order they are drawn: kernels, collectives, copies, graphs."""
        return (("kernels", self.kernels), ("collectives", self.collectives), ("copies", self.copies), ("graphs", self.graphs))


@dataclass(frozen=True, slots=True)
class TimelineWindow:
    """A span the timeline draws (the median step, the longest step, or the window's start): its label,
    its span (ns, the capture's clock), the first devices' lanes and how many devices were left out."""
    label: str = ""
    start: int = 0
    end: int = 0
    devices: tuple[LaneDevice, ...] = ()
    more_devices: int = 0


@dataclass(frozen=True, slots=True)
class Timeline:
    """The timeline figure's spans."""
    windows: tuple[TimelineWindow, ...] = ()


@dataclass(frozen=True, slots=True)
class StepSeries:
    """One process's steady-state step durations (ns), and which were prefill steps."""
    durations: tuple[int, ...] = ()
    is_prefill: tuple[bool, ...] = ()


@dataclass(frozen=True, slots=True)
class LoadPoint:
    """One stats line of the serving engine: seconds since the first, running and waiting requests, KV cache %."""
    t: float = 0.0
    running: float | None = None
    waiting: float | None = None
    kv_usage_pct: float | None = None


@dataclass(frozen=True, slots=True)
class ServingSeries:
    """The serving engine's load over time (its stats lines, at most 5,000)."""
    stats: tuple[LoadPoint, ...] = ()


@dataclass(frozen=True, slots=True)
class AnalysisSeries:
    """An Analysis's series: busy % per bin per device, step durations per process (keyed by pid, with
    the trace's prefix on several traces), the timeline, the serving load, the ledger's claims (device ->
    finding -> slice -> ns) and the Perfetto export written in this run."""
    busy: dict[str, list[float]] = field(default_factory=dict)
    steps: dict[str, StepSeries] = field(default_factory=dict)
    timeline: Timeline | None = None
    serving: ServingSeries | None = None
    claims: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    perfetto_export: PerfettoExport | None = None
