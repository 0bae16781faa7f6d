"""The roofline picture of the ``efficiency`` block: achieved TFLOP/s against arithmetic intensity,
under the device's roofs (peak FLOP/s per data type, memory bandwidth), drawn by matplotlib."""

from __future__ import annotations

import numpy as np

from tracetriage.contract import load
from tracetriage.records.efficiency import Efficiency, KernelClass, PeakDevice, TopOp
from tracetriage.reports.charts import NEUTRAL, PLOT, _label, _legend_beside, _memo, _title
from tracetriage.reports.figures import figure
from tracetriage.reports.figures import svg as _svg

CLASS_COLORS = {"gemm": "#1f77b4", "attention": "#9467bd", "memory_bound": "#e4572e"}
ROOF_DTYPES = ("fp8", "bf16", "fp32")
ROOF_STYLES = {"fp8": "--", "bf16": "-", "fp32": ":"}
NEAR_DECADES = 0.3  # op markers of one name this close (log10 units, both axes) share one label


def _peaks(dev: PeakDevice | None) -> list[tuple[str, float]]:
    """(dtype, datasheet dense TFLOP/s) of the roofs drawn, of the device's data types in ROOF_DTYPES."""
    return [(dtype, dev.peak_tflops[dtype]) for dtype in ROOF_DTYPES if dtype in dev.peak_tflops] if dev else []


def axis_limits(dev: PeakDevice | dict | None, xs: np.ndarray, ys: np.ndarray) -> tuple[tuple[float, float], tuple[float, float]]:
    """((x_lo, x_hi), (y_lo, y_hi)) of the log-log axes: the points with room around them and, on
    a known device, past the highest roof's ridge point (peak / bandwidth) and above that peak, so
    every roof the legend names is drawn: a decode's points (a few FLOP/byte, a few TFLOP/s) alone
    would end the axes below the compute peaks. ``dev``: the peaks record, or its contract dict."""
    dev = load(PeakDevice, dev)
    x_lo, x_hi = max(1e-3, float(xs.min()) / 4), float(xs.max()) * 4
    y_lo, y_hi = float(ys.min()) / 4, float(ys.max()) * 4
    peaks = [peak for _, peak in _peaks(dev)]
    if peaks:
        bw = dev.bandwidth_gbps
        x_hi = max(x_hi, 2 * max(peaks) * 1e3 / bw)
        y_hi = max(y_hi, 2 * max(peaks))
        y_lo = min(y_lo, bw * x_lo / 1e3)
    return (x_lo, x_hi), (y_lo, y_hi)


def _draw_roofs(ax, dev: PeakDevice | None, x_lo: float, x_hi: float) -> str:
    """The device's roofs, each with its legend entry: the bandwidth slope (one line, up to the highest
    peak's ridge point) and each peak's flat roof from its own ridge point on. Returns the chart's title."""
    if not dev:
        return "Achieved rates (device not in the table: no roof)"
    bw = dev.bandwidth_gbps
    peaks = _peaks(dev)
    ridge = max(peak for _, peak in peaks) * 1e3 / bw if peaks else x_hi
    ax.plot([x_lo, ridge], [bw * x_lo / 1e3, bw * ridge / 1e3], color=NEUTRAL[0], lw=1.4, ls="-.",
            label=f"bandwidth {bw:,.0f} GB/s (the slope)")
    for i, (dtype, peak) in enumerate(peaks):
        ax.plot([max(x_lo, peak * 1e3 / bw), x_hi], [peak, peak], color="#555555", lw=1.2 if i == 0 else 0.9,
                ls=ROOF_STYLES[dtype], label=f"{dtype.upper()} peak {peak:,.0f} TFLOP/s")
    return f"Roofline: {_label(dev.model, 40)} (datasheet peaks)"


def _op_labels(ops: list[TopOp]) -> dict[int, str]:
    """One label per name and place: ops of one name within NEAR_DECADES of each other on both axes (the
    same GEMM at three shapes) are named once, with their number, not written over each other. Keyed by
    the id of the op that carries the label."""
    groups: list[list] = []  # [name, log10 x, log10 y, count, the op that carries the label]
    for op in ops:
        name = _label(op.name.replace("aten::", ""), 18)
        x, y = np.log10(op.intensity), np.log10(op.achieved_tflops)
        near = next((g for g in groups if g[0] == name and abs(g[1] - x) <= NEAR_DECADES and abs(g[2] - y) <= NEAR_DECADES), None)
        if near:
            near[3] += 1
        else:
            groups.append([name, x, y, 1, id(op)])
    return {group[4]: group[0] + (f" ×{group[3]}" if group[3] > 1 else "") for group in groups}


def _class_label(row: KernelClass) -> str:
    """A class's legend entry, with its share of the roofline when measured."""
    if row.pct_of_roofline is None:
        return row.kernel_class
    return f"{row.kernel_class} ({row.pct_of_roofline:.0f}% of roofline)"


def _draw_points(ax, classes: list[KernelClass], ops: list[TopOp]) -> None:
    """A large marker per class, a small one per top op, each op group's label beside its marker."""
    labels = _op_labels(ops)
    for row in classes:
        ax.scatter(row.intensity, row.achieved_tflops, s=90, color=CLASS_COLORS.get(row.kernel_class, "#333333"),
                   edgecolor="black", zorder=3, label=_class_label(row))
    for op in ops:
        ax.scatter(op.intensity, op.achieved_tflops, s=18, color=CLASS_COLORS.get(op.kernel_class, "#333333"), alpha=0.7,
                   zorder=2)
        if id(op) not in labels:  # named with the group it belongs to
            continue
        # beside its marker and clear of the class's large one at the same place
        ax.annotate(labels[id(op)], (op.intensity, op.achieved_tflops), fontsize=7,
                    xytext=(8, 6), textcoords="offset points", color="#444444", ha="left", va="bottom",
                    bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.8})


@_memo
def roofline_chart(eff: Efficiency | dict | None) -> str | None:
    """Log-log roofline: one large marker per class, a small one per top op; the roofs of the
    device's fp8 / bf16 / fp32 peaks and its bandwidth, the axes reaching past the highest peak's
    ridge point so that each roof in the legend is drawn (a decode's points sit far below them).
    None when nothing was measured. ``eff``: the efficiency record, or its contract dict."""
    eff = load(Efficiency, eff)
    if not eff or not eff.classes:
        return None
    classes = [row for row in eff.classes if row.intensity and row.achieved_tflops]
    ops = [op for op in eff.top_ops if op.intensity and op.achieved_tflops]
    if not classes and not ops:
        return None
    points = classes + ops
    xs = np.array([p.intensity for p in points])
    ys = np.array([p.achieved_tflops for p in points])
    fig, ax = figure(PLOT, 4.0)
    (x_lo, x_hi), (y_lo, y_hi) = axis_limits(eff.device, xs, ys)
    title = _draw_roofs(ax, eff.device, x_lo, x_hi)
    _draw_points(ax, classes, ops)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved TFLOP/s")
    _title(ax, title)
    _legend_beside(ax)
    ax.grid(True, which="major", alpha=0.3)
    return _svg(fig)
