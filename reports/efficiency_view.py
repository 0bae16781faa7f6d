"""The efficiency section of the report's view: each kernel class and top operator against the
roofline, the roofs, the decode floor, the coverage and what was not measured. Built by
:func:`tracetriage.reports.view.report_view` from the ``efficiency`` record; figures formatted once."""

from __future__ import annotations

from dataclasses import dataclass

from tracetriage.records.efficiency import Efficiency, KernelClass, NotMeasured, PeakDevice, TopOp
from tracetriage.wording import as_text, count, fixed, fmt_ns


@dataclass(frozen=True, slots=True)
class ClassView:
    """One kernel class against the roofline."""
    name: str
    time: str
    tflops: str | None
    gbps: str | None
    intensity: str | None
    bound: str | None
    pct_of_roofline: str | None
    measured_pct: str | None
    peak: str | None
    pct_of_achievable: str | None


@dataclass(frozen=True, slots=True)
class OpView:
    """One operator (shapes measured) against the roofline."""
    name: str
    input_dims: str
    dtype: str
    calls: str
    time: str
    tflops: str | None
    gbps: str | None
    pct_of_roofline: str | None
    pct_of_achievable: str | None


@dataclass(frozen=True, slots=True)
class CoverageView:
    """How much of one kernel class's time the efficiency figures speak for."""
    name: str
    time: str
    measured: str
    measured_pct: str


@dataclass(frozen=True, slots=True)
class DecodeFloorView:
    """The bytes a decode step reads, the time they take at the datasheet bandwidth, the measured step."""
    gb_per_step: str
    floor: str
    measured: str
    pct_of_floor: str
    source: str


@dataclass(frozen=True, slots=True)
class NotMeasuredView:
    """Kernel classes whose efficiency was not measured for one reason, and how to capture it;
    ``share_words`` their share of their class's time in words (None: no share)."""
    what: str
    share_pct: str | None
    reason: str
    capture_hint: str
    share_words: str | None = None


@dataclass(frozen=True, slots=True)
class EfficiencyView:
    """Efficiency against the roofline: the device (``model`` None when it is not in the device table)."""
    model: str | None
    peaks_source: str | None
    device_name: str | None
    dominant_class: str | None
    classes: tuple[ClassView, ...]
    top_ops: tuple[OpView, ...]
    decode_floor: DecodeFloorView | None
    not_measured: tuple[NotMeasuredView, ...]
    coverage: tuple[CoverageView, ...]
    achievable_source: str | None
    roofs: str | None


def _peak(row: KernelClass, device: PeakDevice | None) -> str | None:
    """The roof a class is held against: a compute-bound one's 'BF16 1,307 TFLOP/s' (datasheet
    dense), '/ 708 achievable' where the vendor publishes a measured max-achievable peak; a
    memory-bound one's datasheet bandwidth."""
    if row.bound == "memory" and device:
        return f"{device.bandwidth_gbps:,.0f} GB/s"
    if not row.peak_dtype or not row.peak_tflops:
        return None
    words = f"{row.peak_dtype.upper()} {row.peak_tflops:,.0f} TFLOP/s"
    return words + (f" / {row.achievable_tflops:,.0f} achievable" if row.achievable_tflops else "")


ROOF_ORDER = ("fp8", "int8", "bf16", "fp16", "tf32", "fp32", "fp64")


def _roofs(device: PeakDevice | None) -> str | None:
    """The device's roofs, named: 'datasheet dense FP8 2,615, BF16 1,307 ... TFLOP/s; 5,300 GB/s; measured
    max-achievable FP8 1,273, BF16 708, FP16 654 TFLOP/s'."""
    if not device:
        return None

    def listed(table: dict[str, float]) -> str:
        return ", ".join(f"{dtype.upper()} {table[dtype]:,.0f}" for dtype in ROOF_ORDER if dtype in table)

    words = f"datasheet dense {listed(device.peak_tflops)} TFLOP/s; {device.bandwidth_gbps:,.0f} GB/s"
    if device.achievable_tflops:
        words += f"; measured max-achievable {listed(device.achievable_tflops)} TFLOP/s"
    return words


def _class_view(row: KernelClass, device: PeakDevice | None) -> ClassView:
    return ClassView(row.kernel_class, fmt_ns(row.time_ns), fixed(row.achieved_tflops, 1), fixed(row.achieved_gbps, 0),
                     fixed(row.intensity, 2), row.bound or None, fixed(row.pct_of_roofline, 0),
                     fixed(row.measured_share_pct, 0), _peak(row, device), fixed(row.pct_of_achievable, 0))


def _op_view(op: TopOp) -> OpView:
    return OpView(as_text(op.name), str([dims for dims in op.input_dims if dims]), as_text(op.dtype), count(op.count),
                  fmt_ns(op.time_ns), fixed(op.achieved_tflops, 1), fixed(op.achieved_gbps, 0),
                  fixed(op.pct_of_roofline, 0), fixed(op.pct_of_achievable, 0))


def efficiency_view(eff: Efficiency | None) -> EfficiencyView | None:
    """The efficiency section (None without an efficiency block)."""
    if not eff:
        return None
    device, floor = eff.device, eff.decode_floor
    return EfficiencyView(
        model=as_text(device.model) if device else None,
        peaks_source=as_text(device.source) if device else None,
        device_name=eff.device_name or None, dominant_class=eff.dominant_class or None,
        classes=tuple(_class_view(row, device) for row in eff.classes),
        top_ops=tuple(_op_view(op) for op in eff.top_ops),
        coverage=tuple(CoverageView(row.kernel_class, fmt_ns(row.time_ns),
                                    fmt_ns(row.measured_ns) if row.measured_ns else "none",  # not "0 ns": no time was measured
                                    fixed(row.measured_share_pct, 0))
                       for row in eff.coverage),
        achievable_source=as_text(device.achievable_source) if device and device.achievable_source else None,
        roofs=_roofs(device),
        decode_floor=DecodeFloorView(fixed(floor.bytes_per_step / 1e9, 2), fmt_ns(floor.floor_ns),
                                     fmt_ns(floor.measured_ns), fixed(floor.pct_of_floor, 0),
                                     as_text(floor.source)) if floor else None,
        not_measured=not_measured_views(eff.not_measured))


def not_measured_views(items: tuple[NotMeasured, ...]) -> tuple[NotMeasuredView, ...]:
    """The efficiency analyses not measured; classes not measured for one reason are one line
    ("attention and memory_bound kernels without shapes", each with its share of its class's time),
    and a capture that decides several is written once, at the first."""
    groups: dict[tuple, list[NotMeasured]] = {}
    for item in items:
        kernel_class, _, rest = item.what.partition(" ")
        key = (rest, item.reason, item.capture_hint)
        if item.share_pct is None or any(other.what == item.what for other in groups.get(key, ())):
            key = (item.what, item.reason, item.capture_hint, len(groups))  # a line of its own
        groups.setdefault(key, []).append(item)
    first: dict[str, str] = {}
    out = []
    for group in groups.values():
        what = group[0].what if len(group) == 1 else \
            f"{_and([item.what.partition(' ')[0] for item in group])} {group[0].what.partition(' ')[2]}"
        hint = group[0].capture_hint
        first.setdefault(hint, what)
        shares = [f"{fixed(item.share_pct, 0)}%" for item in group if item.share_pct is not None]
        words = f"{_and(shares)} of {'that' if len(group) == 1 else 'each'} class's time" if shares else None
        out.append(NotMeasuredView(what, fixed(group[0].share_pct, 0) if len(group) == 1 else None, group[0].reason,
                                   hint if first[hint] == what else f"the same as for {first[hint]} above", words))
    return tuple(out)


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
