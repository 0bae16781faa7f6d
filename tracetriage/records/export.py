"""Records of what the Perfetto export of this run wrote (an Analysis's ``series["perfetto_export"]``,
beside the contract, never in it): the file, the mode, and per trace what it holds and left out,
the longest slice each finding's claim drew per device, and the worst step per process."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ExportedTrace:
    """One trace of the export: the spans it holds in words (``what``), the rows it left out by table
    (gpu_ops, api_calls, ranges), per device and finding the longest claimed slice drawn ((start, end)
    ns), per pid the worst step drawn ((start, end) ns)."""
    path: str = ""
    what: str = ""
    left_out: dict[str, int] = field(default_factory=dict)
    largest_claim: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    worst_step: dict[int | str, tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PerfettoExport:
    """The Perfetto export written in this run: where, in which mode, its traces, and the one line
    saying what it left out (``left_out_text``, written with it)."""
    path: str = ""
    mode: str = ""
    traces: tuple[ExportedTrace, ...] = ()
    left_out_text: str = ""
