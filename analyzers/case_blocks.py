"""The case-level blocks of the JSON contract (DESIGN.md "JSON output") that analysis.analyze
assembles beside the per-trace metrics: what was asked and read (:class:`CaseInputs`) and the
host profile of the py-spy captures (:class:`HostProfile`). Each writes its keys with
``to_contract()`` in the contract's order (metrics.Contract)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tracetriage import __version__
from tracetriage.analyzers import hotframes
from tracetriage.analyzers.metrics import PRIVATE, Contract, TraceMetrics, Window
from tracetriage.parsers.pyspy import PySpyCapture

SCHEMA = "tracetriage.analysis/1"
SNAPSHOT_MAX = 64  # threads listed in the host profile's snapshot


@dataclass(frozen=True, slots=True)
class CaseInputs(Contract):
    """The head of the contract: its schema and the tool's version, the inputs read and those skipped
    (with why), the user's symptom and SLO budgets, when the capture started on the wall clock (the
    earliest a trace records: nsys session, Kineto base time), and each trace's analysis window
    (``window``: the first trace's)."""

    schema: str
    tool_version: str
    inputs: list[dict]
    skipped: list[dict]
    symptom: str | None
    slo: dict
    captured_utc_ns: int | None
    window: Window | None
    windows: list[Window]

    @classmethod
    def of(cls, case, per_trace: list[TraceMetrics], symptom: str | None, slo: dict | None) -> CaseInputs:
        """The head of a case's contract."""
        started = [trace.meta["started_utc_ns"] for trace in per_trace if trace.meta.get("started_utc_ns")]
        return cls(schema=SCHEMA, tool_version=__version__, inputs=list(case.inputs), skipped=list(case.skipped),
                   symptom=symptom, slo=dict(slo or {}), captured_utc_ns=min(started, default=None),
                   window=per_trace[0].window if per_trace else None, windows=[trace.window for trace in per_trace])


def _capture_row(capture: PySpyCapture) -> dict:
    """One py-spy capture: its file, format, threads seen and idle, and its processes by pid."""
    return {"path": capture.path, "format": capture.format, "threads": capture.threads,
            "idle_threads": capture.idle_threads, "processes": {str(pid): name for pid, name in capture.processes.items()}}


def _snapshot(captures: list[PySpyCapture]) -> list[dict]:
    """Where each thread of the dumps is (a dump is a snapshot: the first thing to read in a hang):
    its process, thread, whether idle, its innermost frame and that frame's caller."""
    rows = [
        {"pid": sample.pid, "process": capture.processes.get(sample.pid, "") if sample.pid is not None else "",
         "thread": sample.thread, "idle": sample.idle, "frame": sample.stack[-1] if sample.stack else "",
         "caller": sample.stack[-2] if len(sample.stack) > 1 else ""}
        for capture in captures if capture.format in ("dump", "dump-json") for sample in capture.samples
    ]
    return rows[:SNAPSHOT_MAX]


@dataclass(frozen=True, slots=True)
class UserFrame(Contract):
    """A hot user frame of the host profile (hotframes.hot_frames: application code, not a framework or the
    interpreter): its share of the non-idle samples inclusive, of user samples, in its own code, whether a host
    sync runs under it and in what share of the samples."""

    frame: str
    function: str
    share_pct: float
    user_pct: float
    self_pct: float
    calls_sync: bool
    sync_pct: float


@dataclass(frozen=True, slots=True)
class HotFrame(Contract):
    """A hot frame of any code (the contract's top-level ``hot_frames``): its inclusive, own and user shares and
    whether a host sync runs under it."""

    frame: str
    share_pct: float
    self_pct: float
    user_pct: float
    calls_sync: bool


@dataclass(frozen=True, slots=True)
class HostProfile(Contract):
    """The contract's ``host_profile`` of a case's py-spy captures (hotframes.hot_frames defines the
    shares): samples in all and idle, the hot user frames, the captures, the dumps' snapshot; and the
    hot frames the contract carries at its top level (``hot_frames``)."""

    total_samples: int
    idle_samples: int
    user_frames: list[UserFrame]
    captures: list[dict]
    snapshot: list[dict]
    hot_frames: list[HotFrame] = field(default_factory=list, metadata=PRIVATE)

    @classmethod
    def of(cls, captures: list[PySpyCapture]) -> HostProfile:
        """The host profile of py-spy captures."""
        profile = hotframes.hot_frames(captures)
        hot = [HotFrame(*(frame[name] for name in HotFrame.contract_keys())) for frame in profile["frames"]]
        return cls(total_samples=profile["total_samples"], idle_samples=profile["idle_samples"],
                   user_frames=[UserFrame(**frame) for frame in profile["user"]],
                   captures=[_capture_row(capture) for capture in captures],
                   snapshot=_snapshot(captures), hot_frames=hot)
