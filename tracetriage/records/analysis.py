"""The analysis contract's top level as one record: :func:`read` builds it from an Analysis's ``data``
(the JSON ``--format json`` writes, or a saved one), once; the reports read its fields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracetriage.contract import load
from tracetriage.records.efficiency import Efficiency
from tracetriage.records.findings import Abstention, Finding
from tracetriage.records.serving import Serving
from tracetriage.records.side import HostProfile, HotFrame, NcclLog, Topology
from tracetriage.records.trace import (
    CaptureKind,
    CollectiveSkew,
    Copies,
    Device,
    Input,
    Kernel,
    Phases,
    Process,
    Skipped,
    Window,
)


@dataclass(frozen=True, slots=True)
class AnalysisRecord:
    """One analysis (schema ``tracetriage.analysis/1``): the verdict (headline, findings, abstentions),
    what was read, the window and phases, each device and process, the kernels, copies, collective
    skew, the side artifacts (topology, NCCL, serving, py-spy) and the efficiency block. ``slo`` is the
    --slo budgets by name (ms); ``headline_by_axis`` the headline per axis, in rank order."""
    schema: str | None = None
    tool_version: str | None = None
    headline: str = ""
    headline_by_axis: dict[str, str] = field(default_factory=dict)
    symptom: str | None = None
    slo: dict[str, float] = field(default_factory=dict)
    capture_kind: CaptureKind = CaptureKind()
    captured_utc_ns: int | None = None
    inputs: tuple[Input, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    window: Window | None = None
    windows: tuple[Window, ...] = ()
    phases: Phases | None = None
    devices: tuple[Device, ...] = ()
    processes: tuple[Process, ...] = ()
    kernels: tuple[Kernel, ...] = ()
    copies: Copies | None = None
    collective_skew: CollectiveSkew | None = None
    topology: Topology | None = None
    nccl: tuple[NcclLog, ...] = ()
    serving: Serving | None = None
    hot_frames: tuple[HotFrame, ...] = ()
    host_profile: HostProfile | None = None
    efficiency: Efficiency | None = None
    findings: tuple[Finding, ...] = ()
    abstentions: tuple[Abstention, ...] = ()
    warnings: tuple[str, ...] = ()


def read(data: dict[str, Any] | AnalysisRecord) -> AnalysisRecord:
    """The record of an analysis's contract dict (a record as it is)."""
    return load(AnalysisRecord, data)
