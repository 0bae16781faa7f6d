"""What the reports say about the Perfetto export: the file written in this run, what it left
out, and under each finding which track and time range of the export shows it.

Computed from the Analysis alone (the ledger's claims and the longest gaps), so a report
written without an export can still say where to look in one. Light on purpose: the
``perfetto`` package is imported only by the export itself (reports/perfetto.py, perfetto_writer.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracetriage.contract import load
from tracetriage.records.analysis import AnalysisRecord
from tracetriage.records.analysis import read as read_analysis
from tracetriage.records.export import PerfettoExport
from tracetriage.records.findings import Finding
from tracetriage.records.series import AnalysisSeries
from tracetriage.records.trace import Device, Gap, Window
from tracetriage.wording import fmt_ns

LONG_STEP_TRACK = "tracetriage: flags › worst step"
# A gap under this is "short" unless it follows a sync: the timeline analyzer's bound
# (analyzers.timeline.SHORT_GAP_NS, stated here so reports import no analyzer; a test checks they agree).
SHORT_GAP_NS = 1_000_000


@dataclass(frozen=True, slots=True)
class TimelineHint:
    """Where the Perfetto export shows one finding: the track (as the Perfetto UI nests it), the time
    range (ns, the capture's clock) and what is there."""
    track: str
    start_ns: int
    end_ns: int
    what: str


def left_out_text(summary: PerfettoExport | dict) -> str:
    """One line: what the export holds and what it leaves out (from the export's summary, or its record)."""
    parts = []
    for trace in load(PerfettoExport, summary).traces:
        out = ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in trace.left_out.items() if v)
        parts.append(trace.what + (f"; left out {out} outside it (--perfetto-window all keeps everything)" if out
                                   else "; nothing left out"))
    return " | ".join(parts)


def _fits(gap: Gap, slices) -> bool:
    """Whether one of the analysis's longest gaps can be in one of these accounting slices: its
    main cause is claimed, and a claim on short gaps only takes gaps under 1 ms."""
    idle = [s.split(":") for s in slices if s.startswith("idle:")]
    if not any(c in ("*", gap.cause) for _, _, c in idle):
        return False
    return any(cls != "short" or gap.length_ns < SHORT_GAP_NS for _, cls, c in idle if c in ("*", gap.cause))


def _claimed_hint(fid: str, dev: str, claims: dict, device: Device | None, largest: dict,
                  window: Window | None) -> TimelineHint | None:
    """A finding that claims slices of ``dev``'s window: the longest piece the export drew of its claim,
    else the longest gap that can be in a slice it claims, else its slices across the window."""
    track = f"{dev} › tracetriage: findings"
    if (dev, fid) in largest:
        a, b = largest[(dev, fid)]
        return TimelineHint(track, a, b, f"its longest claimed slice ({fmt_ns(b - a)}); the track holds every slice it claims")
    top = [gap for gap in (device.gaps.top if device else ()) if _fits(gap, claims[dev][fid])]
    if top:
        gap = top[0]
        return TimelineHint(track, int(gap.start_ns), int(gap.start_ns) + int(gap.length_ns),
                            f"the longest gap it claims ({gap.cause}, {fmt_ns(gap.length_ns)}); the track "
                            "holds every slice it claims")
    if window:
        return TimelineHint(track, window.start_ns, window.end_ns, "the slices it claims, across the window")
    return None


def _verdict_hint(finding: Finding, window: Window, worst: list) -> TimelineHint:
    """A finding that claims no slice: the worst step drawn for a tail finding, else the window."""
    fid = finding.id
    if finding.axis == "tail" and worst:
        pid, (a, b) = worst[0]
        return TimelineHint(f"tracetriage: verdict › {fid}, and pid {pid}'s {LONG_STEP_TRACK}", a, b,
                            f"the worst step ({fmt_ns(b - a)}); the verdict track marks every long step")
    if finding.axis == "tail":
        return TimelineHint(f"tracetriage: verdict › {fid}, and each process's {LONG_STEP_TRACK}",
                            window.start_ns, window.end_ns, "the long steps")
    return TimelineHint(f"tracetriage: verdict › {fid}", window.start_ns, window.end_ns, "the analysis window")


def exported_record(series: AnalysisSeries | dict | None) -> PerfettoExport | None:
    """The Perfetto export written in this run (an Analysis's series, beside the contract), or None."""
    return load(AnalysisSeries, series or {}).perfetto_export


def hints(analysis, record: AnalysisRecord | None = None) -> dict[str, TimelineHint]:
    """Per finding, where the export shows it. With an export written in this run: the longest
    piece it drew of the finding's claim, the worst step of a tail finding. Otherwise, from the
    Analysis: the longest gap that can be in a slice the finding claims, else its claimed slices
    across the window; the window for a tail finding (the steps track flags the worst step).
    ``record`` is the analysis's record when the caller read it already."""
    record = record or read_analysis(analysis.data)
    series = load(AnalysisSeries, analysis.series or {})
    claims = series.claims  # device -> finding -> slice -> ns: maps keyed by names
    exported = series.perfetto_export or PerfettoExport()
    devices = {device.id: device for device in record.devices}
    largest = {(dev, fid): piece for trace in exported.traces for dev, by_finding in trace.largest_claim.items()
               for fid, piece in by_finding.items()}
    worst = [(pid, span) for trace in exported.traces for pid, span in trace.worst_step.items()]
    out = {}
    for finding in record.findings:
        fid = finding.id
        best = max(((dev, sum(c[fid].values())) for dev, c in claims.items() if fid in c), key=lambda x: x[1], default=None)
        if best and best[1]:
            hint = _claimed_hint(fid, best[0], claims, devices.get(best[0]), largest, record.window)
        elif record.window and devices:
            hint = _verdict_hint(finding, record.window, worst)
        else:
            hint = None
        if hint:
            out[fid] = hint
    return out


def hint_texts(analysis, record: AnalysisRecord | None = None) -> dict[str, str]:
    """Per finding, a text saying where to look in the export."""
    record = record or read_analysis(analysis.data)
    w0 = (record.window.start_ns if record.window else 0) or 0
    return {fid: (f"track “{h.track}”, {fmt_ns(h.start_ns - w0)} to {fmt_ns(h.end_ns - w0)} into the "
                  f"analysis window (capture clock {h.start_ns:,} – {h.end_ns:,} ns): {h.what}")
            for fid, h in hints(analysis, record).items()}
