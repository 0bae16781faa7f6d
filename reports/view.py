"""The view of one Analysis: every figure and phrase a report shows, formatted once.

:func:`report_view` builds a :class:`ReportView` from the Analysis once: its JSON contract ``data``
read as typed records (tracetriage.records), and its ``series``; the text, Markdown and HTML reports and the notebook card are
templates that lay it out (reports/templates/) and compute nothing. A figure is formatted here,
in one place, whatever format shows it; a field a format leaves out is listed, with the reason,
in tests/test_view_parity.py. ``None`` is a figure that was not measured: each format prints its
own placeholder (``-`` in text, ``–`` in tables of the pages).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tracetriage.captured import capture_start_utc
from tracetriage.records.analysis import AnalysisRecord, read
from tracetriage.records.export import PerfettoExport
from tracetriage.records.findings import Finding
from tracetriage.records.trace import CollectiveSkew, Input, Phase, Phases, Process, Window
from tracetriage.reports.device_view import (
    ClaimColumn,
    DeviceView,
    GapView,
    HostIdleView,
    copies_text,
    device_view,
    gap_histogram,
    idle_by_host_rows,
    idle_by_host_scope,
    longest_gaps,
)
from tracetriage.reports.efficiency_view import EfficiencyView, efficiency_view
from tracetriage.reports.palette import claim_columns as palette_claim_columns
from tracetriage.reports.palette import finding_color
from tracetriage.reports.perfetto_view import exported_record, hint_texts
from tracetriage.reports.side_views import (
    HostProfileView,
    HotFrameView,
    NcclLogView,
    ServingView,
    TopologyView,
    host_profile_view,
    nccl_view,
    serving_view,
    topology_view,
)
from tracetriage.wording import (
    RANGE_KINDS,
    as_text,
    count,
    fixed,
    fmt_bytes,
    fmt_ns,
    fmt_num,
    pct,
    plural,
    range_kind,
    short_middle,
    source_text,
)


@dataclass(frozen=True, slots=True)
class HeaderView:
    """What the page is about: the inputs by name, the device(s), the capture's date in words
    ('captured 2026-05-26 07:58:50 UTC', or 'capture time not recorded')."""
    inputs: str
    devices: str
    captured: str


@dataclass(frozen=True, slots=True)
class WindowView:
    """The analysis window: its length, how it was chosen, what was excluded before it."""
    duration: str
    source: str
    warmup: str
    setup: str


@dataclass(frozen=True, slots=True)
class PhaseView:
    """One phase of the capture (set-up, steady, tear-down, or that there is no steady one) and what fills it."""
    name: str
    text: str


@dataclass(frozen=True, slots=True)
class PerfettoView:
    """The Perfetto export written in this run (None when none was)."""
    file: str
    mode: str
    left_out: str


@dataclass(frozen=True, slots=True)
class ProcessView:
    """One process's step times and host calls per step (medians over steady-state steps)."""
    pid: str
    name: str
    steps: str
    step_source: str
    step_range: str | None
    step_p50: str
    step_p99: str
    step_max: str
    launches: str
    graph_launches: str
    syncs: str


@dataclass(frozen=True, slots=True)
class FindingView:
    """One finding, numbered in rank order; ``timeline`` says where the Perfetto export shows it."""
    number: str
    id: str
    severity: str
    axis: str
    title: str
    falsified: bool
    impact_pct: str
    impact_denominator: str
    explains_pct: str | None  # the measured share it takes, when more than what its fix removes (impact_pct)
    evidence: tuple[str, ...]
    timeline: str | None
    mechanism: str
    fix: str
    confirm: str
    falsifier: str
    color: str


@dataclass(frozen=True, slots=True)
class AbstentionView:
    """An analysis that did not have the data it needed, and how to capture it."""
    analysis: str
    scope: str
    reason: str
    capture_hint: str


@dataclass(frozen=True, slots=True)
class KernelView:
    """One kernel name: count, total, mean and median time, share of the window's kernel time (%)."""
    name: str
    short_name: str
    count: str
    total: str
    mean: str
    median: str
    share_pct: str


@dataclass(frozen=True, slots=True)
class InputView:
    """One input file: its kind and version, what was read from it, its warnings and notes (what it
    was read for, e.g. a graph capture phase profiled apart)."""
    path: str
    kind: str
    version: str | None
    counts: str
    warnings: tuple[str, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SkippedView:
    """A file of the case that was not read, and why."""
    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class ReportView:
    """Everything a report of one Analysis shows, in the order the text report shows it."""
    tool_version: str
    schema: str
    header: HeaderView
    headline: str
    headline_by_axis: tuple[tuple[str, str], ...]
    symptom: str | None
    perfetto: PerfettoView | None
    window: WindowView | None
    phases: tuple[PhaseView, ...]
    inputs: tuple[InputView, ...]
    skipped: tuple[SkippedView, ...]
    devices: tuple[DeviceView, ...]
    claim_columns: tuple[ClaimColumn, ...]
    longest_gaps: tuple[GapView, ...]
    longest_gaps_scope: str
    idle_by_host: tuple[HostIdleView, ...]
    idle_by_host_scope: str
    gap_histogram: str | None
    copies: str | None
    collective_skew: str | None
    processes: tuple[ProcessView, ...]
    efficiency: EfficiencyView | None
    findings: tuple[FindingView, ...]
    topology: TopologyView | None
    nccl: tuple[NcclLogView, ...]
    serving: ServingView | None
    host_profile: HostProfileView | None
    hot_frames: tuple[HotFrameView, ...]
    abstentions: tuple[AbstentionView, ...]
    kernels: tuple[KernelView, ...]
    rocm: bool = False  # an AMD capture: the templates' own capture advice names rocprofv3, not nsys

def report_view(analysis, record: AnalysisRecord | None = None) -> ReportView:
    """The view of one Analysis, built once for every format from its contract read as records (``record``
    when the caller read it already)."""
    record = record or read(analysis.data)
    vendor = record.capture_kind.vendor
    devices = record.devices
    claim_columns = palette_claim_columns(devices)  # the accounting bar chart's order too
    hints = hint_texts(analysis, record)
    return ReportView(
        tool_version=as_text(record.tool_version), schema=as_text(record.schema),
        header=_header(record, capture_start_utc(analysis.data)),
        headline=record.headline, headline_by_axis=tuple(record.headline_by_axis.items()),
        symptom=record.symptom or None, perfetto=_perfetto(exported_record(analysis.series)),
        window=_window(record.window, record.phases, _trace_formats(record)), phases=_phases(record.phases),
        inputs=tuple(_input(entry) for entry in record.inputs),
        skipped=tuple(SkippedView(skipped.path, skipped.reason) for skipped in record.skipped),
        devices=tuple(device_view(device, list(claim_columns), vendor) for device in devices),
        claim_columns=tuple(ClaimColumn(k, color) for k, color in claim_columns.items()),
        longest_gaps=longest_gaps(devices, record.window, vendor),
        longest_gaps_scope=f" (first two devices of {len(devices)})" if len(devices) > 2 else "",
        idle_by_host=idle_by_host_rows(devices), idle_by_host_scope=idle_by_host_scope(devices),
        gap_histogram=gap_histogram(devices), copies=copies_text(record.copies, devices),
        collective_skew=_skew(record.collective_skew),
        processes=tuple(_process(process, _trace_formats(record)) for process in record.processes),
        efficiency=efficiency_view(record.efficiency),
        findings=tuple(_finding(n, finding, hints.get(finding.id)) for n, finding in enumerate(record.findings, 1)),
        topology=topology_view(record.topology), nccl=tuple(nccl_view(log) for log in record.nccl),
        serving=serving_view(record.serving), host_profile=host_profile_view(record.host_profile),
        hot_frames=tuple(HotFrameView(as_text(frame.frame), fixed(frame.share_pct, 1), fixed(frame.self_pct, 1),
                                      bool(frame.calls_sync)) for frame in record.hot_frames),
        abstentions=tuple(AbstentionView(a.analysis, a.scope, a.reason, a.capture_hint) for a in record.abstentions),
        kernels=tuple(KernelView(k.name, short_middle(k.name), count(k.count), fmt_ns(k.total_ns), fmt_ns(k.mean_ns),
                                 fmt_ns(k.median_ns), fixed(k.share_pct, 1)) for k in record.kernels),
        rocm=vendor == "rocm",
    )


def _perfetto(exported: PerfettoExport | None) -> PerfettoView | None:
    """The Perfetto export written in this run, for the page."""
    return PerfettoView(exported.path, exported.mode, exported.left_out_text) if exported else None


def _bundle_names(paths: list[str]) -> list[str]:
    """The inputs by name: one bundle's folder then its files, else each path."""
    parents = {p.rsplit("/", 1)[0] if "/" in p else "" for p in paths}
    if len(parents) == 1 and len(paths) > 1 and next(iter(parents)):  # one bundle: its folder, then the files
        return [f"{next(iter(parents))}/ ({', '.join(p.rsplit('/', 1)[-1] for p in paths)})"]
    return paths


def _header(record: AnalysisRecord, captured: str | None) -> HeaderView:
    """What the page is about, before any number: the inputs by name, the capture's date when
    the capture records one, and the device(s)."""
    names = _bundle_names([str(entry.path or "") for entry in record.inputs])
    eff = record.efficiency
    known = eff.device.model if eff and eff.device else None  # matched by its properties when the name is blank
    devices: dict[str, int] = {}
    for device in record.devices:
        name = device.name or "unknown GPU"
        if name == "unknown GPU" and known and device.trace == eff.trace:
            name = f"{known} (by its properties: the capture names no device)"
        devices[name] = devices.get(name, 0) + 1
    return HeaderView(inputs=", ".join(names), devices=", ".join(f"{n} x {k}" if n > 1 else k for k, n in devices.items()),
                      captured=f"captured {captured}" if captured else "capture time not recorded")


def _trace_formats(record: AnalysisRecord) -> dict[str | None, str | None]:
    """Each trace's format by its path (``None``: the case's, when its traces share one; else None, read as nsys'),
    for the range kind its step sources name (wording.source_text)."""
    formats: dict[str | None, str | None] = {entry.path: entry.kind for entry in record.inputs
                                             if entry.kind in RANGE_KINDS}  # the traces, not the logs beside them
    kinds = {range_kind(fmt) for fmt in formats.values()}
    formats[None] = next(iter(formats.values())) if len(kinds) == 1 else None
    return formats


def _window(window: Window | None, phases: Phases | None = None, formats: dict | None = None) -> WindowView | None:
    if not window:
        return None
    setup = window.setup_excluded_ns or 0
    # past the first kernel when the phase rule moved the window beyond start-up work (phases.py)
    before = ("the first kernel" if not (phases and phases.setup) else
              "the steady work" if phases.steady else "the window")
    setup_text = f"; {fmt_ns(setup)} of set-up before {before} excluded" if setup else ""
    cause = window.setup_cause
    if setup and cause:
        setup_text = (f"; {fmt_ns(setup)} of set-up before the work excluded: the host was in {cause.call}"
                      + (f" ({cause.caller})" if cause.caller else ""))
    return WindowView(duration=fmt_ns(window.duration_ns), source=source_text(window.source, (formats or {}).get(None)),
                      warmup=plural(window.warmup_steps_excluded or 0, "warm-up step"), setup=setup_text)


def _no_steady_text(phases: Phases) -> str:
    """Why there is no steady phase, in words."""
    no_steady = phases.no_steady
    why = (f"{_a(fmt_ns(no_steady.stall_ns))} stall with a handful of GPU operations either side"
           if no_steady.why == "stall" else
           f"{no_steady.repeated:,} of {plural(no_steady.kernels, 'kernel launch', 'kernel launches')} "
           "repeat a kernel that ran before (first launches)")
    return f"none: {why}: start-up only, not judged"


def _phases(phases: Phases | None) -> tuple[PhaseView, ...]:
    """The capture's phases, one line each (empty when it holds only a steady phase): the set-up and
    tear-down with their length and what fills them, the steady phase judged, or why there is none."""
    if not phases:
        return ()
    by_steps = phases.source == "steps"
    out = []
    if phases.setup:
        before = "first step" if by_steps else ("steady work" if phases.steady else "window")
        out.append(PhaseView("set-up", f"{fmt_ns(phases.setup.duration_ns)} before the {before}: "
                                       f"{_phase_contents(phases.setup)}"))
    if phases.steady:
        repeat = f"; {pct(phases.repeat_pct)} of its kernel launches repeat an earlier kernel" \
            if phases.repeat_pct is not None else ""
        out.append(PhaseView("steady", f"{fmt_ns(phases.steady.duration_ns)}: the window{repeat}"))
    else:
        out.append(PhaseView("steady", _no_steady_text(phases)))
    if phases.teardown:
        # without steps a tear-down that runs a few kernels of its own starts after the steady work's last one
        last = "last step" if by_steps else "last steady kernel" if phases.teardown.kernels else "last kernel"
        out.append(PhaseView("tear-down", f"{fmt_ns(phases.teardown.duration_ns)} after the {last}: "
                                          f"{_phase_contents(phases.teardown)}"))
    return tuple(out)


def _a(figure: str) -> str:
    """The figure with its article, as it is read aloud: "an 80.01 ms copy", "an 11.2 s stretch", "a 2.14 s"."""
    whole = re.match(r"[\d,]+", figure)
    digits = whole.group(0).replace(",", "") if whole else ""
    spoken_an = digits.startswith("8") or (digits[:2] in ("11", "18") and len(digits) in (2, 5, 8))
    return ("an " if spoken_an else "a ") + figure


def _host_only_parts(phase: Phase) -> list[str]:
    """A phase's host-only stretches, and those inside runtime calls (the driver's time; phases.py) with their call."""
    parts = []
    stretches = [fmt_ns(stretch.length_ns) for stretch in phase.host_only if stretch.in_calls_pct < 50]
    inside = [f"{fmt_ns(stretch.length_ns)} in {stretch.call or 'runtime calls'}"
              for stretch in phase.host_only if stretch.in_calls_pct >= 50]
    if stretches:
        parts.append(f"{_a(stretches[0])} host-only stretch" if len(stretches) == 1 else
                     "host-only stretches " + ", ".join(stretches[:-1]) + " and " + stretches[-1])
    if inside:
        parts.append("GPU idle inside runtime calls " + ", ".join(inside[:-1]) + (" and " if inside[1:] else "") + inside[-1])
    return parts


def _phase_contents(phase: Phase) -> str:
    """What fills a set-up or tear-down: host-only stretches, stretches inside runtime calls,
    synchronous copies, bytes copied, graph captures, allocator calls, warm-up, kernels."""
    parts = _host_only_parts(phase)
    sync = phase.sync_copies
    if sync.count == 1:
        parts.append(f"{_a(fmt_ns(sync.longest_ns))} synchronous copy")
    elif sync.count:
        parts.append(f"{sync.count:,} synchronous copies (longest {fmt_ns(sync.longest_ns)})")
    if phase.copy_bytes:
        parts.append(f"{fmt_bytes(phase.copy_bytes)} copied")
    if phase.graph_capture_calls:
        parts.append(plural(phase.graph_capture_calls, "graph capture/instantiate call"))
    if phase.alloc_calls:
        parts.append(plural(phase.alloc_calls, "allocator call"))
    if phase.warmup_steps:
        parts.append(plural(phase.warmup_steps, "warm-up step"))
    if phase.warmup_range:
        parts.append(f"a warm-up pass to the end of {phase.warmup_range} (first launches of what the steady work repeats)")
    parts.append(f"{plural(phase.kernels, 'kernel')}, GPU busy {pct(phase.busy_pct)}")
    return ", ".join(parts)


def _input(entry: Input) -> InputView:
    version = as_text(entry.version) if entry.version else None
    if version and version.startswith(f"{entry.kind} "):  # "rocpd schema 3" beside the kind rocpd: said once
        version = version[len(entry.kind) + 1:]
    return InputView(path=entry.path, kind=entry.kind, version=version,
                     counts=", ".join(f"{k} {count(n)}" for k, n in entry.counts.items()),
                     warnings=tuple(entry.warnings), notes=tuple(entry.notes))


def _late_rank_text(skew: CollectiveSkew) -> str:
    """How long the ranks wait for the last to start, and how much of that for the late rank."""
    late = skew.late_rank
    if skew.wait_share_pct is None or not late:
        return ""
    rank = f"rank {late.rank} ({late.device})" if late.rank is not None else late.device
    return (f"; {skew.wait_share_pct:.1f}% of their time is ranks waiting for the last to start, "
            f"{late.waited_share_pct:.0f}% of that for {rank}")


def _skew(skew: CollectiveSkew | None) -> str | None:
    """How far apart the ranks start the same collective."""
    if not skew:
        return None
    if not skew.matched:
        return f"not measured ({skew.reason})"
    words = (f"{skew.matched} collectives matched, start spread p50 {fmt_ns(skew.p50_ns)}, max {fmt_ns(skew.max_ns)}"
             + _late_rank_text(skew) + (f"; {skew.reason}" if skew.reason else ""))
    if skew.end_spread_p50_ns is not None:
        words += f"; ends within {fmt_ns(skew.end_spread_p50_ns)} (p50)" + (
            ", each rank on its own trace's clock" if skew.clock == "files" else "")
    return words


def _process(process: Process, formats: dict | None = None) -> ProcessView:
    steps = process.steps
    fmt = (formats or {}).get(process.trace) or (formats or {}).get(None)
    return ProcessView(pid=as_text(process.pid), name=as_text(process.name), steps=as_text(steps.count),
                       step_source=source_text(as_text(steps.source), fmt), step_range=steps.range_name or None,
                       step_p50=fmt_ns(steps.p50_ns), step_p99=fmt_ns(steps.p99_ns), step_max=fmt_ns(steps.max_ns),
                       launches=fmt_num(process.launches_per_step), graph_launches=fmt_num(process.graph_launches_per_step),
                       syncs=fmt_num(process.syncs_per_step))


def _finding(number: int, finding: Finding, timeline: str | None) -> FindingView:
    return FindingView(
        number=str(number), id=finding.id, severity=finding.severity, axis=finding.axis, title=finding.title,
        falsified=bool(finding.falsified), impact_pct=fixed(finding.impact_pct, 1),
        impact_denominator=as_text(finding.impact_denominator),
        explains_pct=fixed(finding.explains_pct, 1) if finding.explains_pct is not None else None,
        evidence=tuple(e.text for e in finding.evidence),
        timeline=timeline, mechanism=finding.mechanism, fix=finding.fix, confirm=finding.confirm,
        falsifier=finding.falsifier, color=finding_color(finding.id))
