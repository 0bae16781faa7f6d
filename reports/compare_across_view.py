"""The across-devices part of a Comparison's view (compare --across-devices, analyzers/compare_devices.py): each
op class and top op on both devices, the ratio against the ratio their peaks predict, formatted once for every
format (reports/compare_view.py holds the rest of the view)."""

from __future__ import annotations

from dataclasses import dataclass

from tracetriage.records.compare import AcrossDevices, AcrossRow, DeviceSide
from tracetriage.wording import fmt_ns, plural, ratio_text


def _pct(value) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


@dataclass(frozen=True, slots=True)
class DeviceSideView:
    """One op class or op on one device: time per unit, op calls, achieved rates, % of its peak and the
    peak in words, and the share of the class's kernel time measured (None for an op)."""
    time: str
    calls: str
    rate: str
    pct_of_peak: str
    peak: str
    measured: str | None


@dataclass(frozen=True, slots=True)
class AcrossRowView:
    """One op class or top op on both devices: the ratio after/before with its interval, the ratio the
    peaks predict, the normalised ratio with its interval, the verdict, and the sentence; ``judged``
    false when it was not (``words`` says why, the sides may be None)."""
    what: str
    judged: bool
    before: DeviceSideView | None
    after: DeviceSideView | None
    ratio: str
    interval: str
    predicted: str
    normalised: str
    normalised_interval: str
    verdict: str
    words: str


@dataclass(frozen=True, slots=True)
class AcrossDevicesView:
    """compare --across-devices: made or refused (``reasons``: why, or what it rests on), the unit, the
    two devices, the band, the method, the class rows and the top op rows."""
    ok: bool
    unit: str
    before_device: str
    after_device: str
    band: str
    method: str
    reasons: tuple[str, ...]
    classes: tuple[AcrossRowView, ...]
    ops: tuple[AcrossRowView, ...]


def _times(value) -> str:
    return "n/a" if value is None else f"x{ratio_text(value)}"


def _span(interval) -> str:
    return "noise not measured" if interval is None else f"95% CI {ratio_text(interval[0])}-{ratio_text(interval[1])}"


def _device_side(side: DeviceSide | None, unit: str) -> DeviceSideView | None:
    if side is None:
        return None
    tflops, gbps = side.achieved_tflops, side.achieved_gbps
    rate = ", ".join(part for part in ("" if tflops is None else f"{tflops:,.1f} TFLOP/s",
                                       "" if gbps is None else f"{gbps:,.0f} GB/s") if part) or "n/a"
    return DeviceSideView(time=f"{fmt_ns(side.ms_per_unit * 1e6)} per {unit}", calls=plural(side.calls, "call"),
                          rate=rate, pct_of_peak=_pct(side.pct_of_peak), peak=side.peak or "no peak known",
                          measured=None if side.measured_share_pct is None else _pct(side.measured_share_pct))


def _across_row(row: AcrossRow, unit: str) -> AcrossRowView:
    return AcrossRowView(
        what=str(row.what), judged=row.ratio is not None, before=_device_side(row.before, unit),
        after=_device_side(row.after, unit), ratio=_times(row.ratio), interval=_span(row.ci95),
        predicted=_times(row.predicted_ratio), normalised=_times(row.normalised_ratio),
        normalised_interval=_span(row.normalised_ci95), verdict=str(row.verdict), words=str(row.words))


def across_view(across: AcrossDevices) -> AcrossDevicesView:
    unit = str(across.unit)
    return AcrossDevicesView(
        ok=bool(across.ok), unit=unit, before_device=str(across.before_device or "n/a"),
        after_device=str(across.after_device or "n/a"), band=f"{across.band_pct:g}%", method=str(across.method),
        reasons=tuple(across.reasons), classes=tuple(_across_row(row, unit) for row in across.classes),
        ops=tuple(_across_row(row, unit) for row in across.ops))
