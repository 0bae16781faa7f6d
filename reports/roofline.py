"""The roofline picture of the ``efficiency`` block: achieved TFLOP/s against arithmetic intensity,
under the device's roofs (peak FLOP/s per data type, memory bandwidth), drawn by matplotlib."""

from __future__ import annotations

import numpy as np

from tracetriage.reports.charts import NEUTRAL, PLOT, _label, _legend_beside, _memo, _svg, plt

CLASS_COLORS = {"gemm": "#1f77b4", "attention": "#9467bd", "memory_bound": "#e4572e"}
ROOF_DTYPES = ("fp8", "bf16", "fp32")
ROOF_STYLES = {"fp8": "--", "bf16": "-", "fp32": ":"}
NEAR_DECADES = 0.3  # op markers of one name this close (log10 units, both axes) share one label


def axis_limits(dev: dict | None, xs: np.ndarray, ys: np.ndarray) -> tuple[tuple[float, float], tuple[float, float]]:
    """((x_lo, x_hi), (y_lo, y_hi)) of the log-log axes: the points with room around them and, on
    a known device, past the highest roof's ridge point (peak / bandwidth) and above that peak, so
    every roof the legend names is drawn: a decode's points (a few FLOP/byte, a few TFLOP/s) alone
    would end the axes below the compute peaks."""
    x_lo, x_hi = max(1e-3, float(xs.min()) / 4), float(xs.max()) * 4
    y_lo, y_hi = float(ys.min()) / 4, float(ys.max()) * 4
    peaks = [dev["peak_tflops"][d] for d in ROOF_DTYPES if d in dev["peak_tflops"]] if dev else []
    if peaks:
        bw = dev["bandwidth_gbps"]
        x_hi = max(x_hi, 2 * max(peaks) * 1e3 / bw)
        y_hi = max(y_hi, 2 * max(peaks))
        y_lo = min(y_lo, bw * x_lo / 1e3)
    return (x_lo, x_hi), (y_lo, y_hi)


@_memo
def roofline_chart(eff: dict | None) -> str | None:
    """Log-log roofline: one large marker per class, a small one per top op; the roofs of the
    device's fp8 / bf16 / fp32 peaks and its bandwidth, the axes reaching past the highest peak's
    ridge point so that each roof in the legend is drawn (a decode's points sit far below them).
    None when nothing was measured."""
    if not eff or not eff.get("classes"):
        return None
    points = [(c, True) for c in eff["classes"]] + [(o, False) for o in eff.get("top_ops", [])]
    points = [(p, big) for p, big in points if p.get("intensity") and p.get("achieved_tflops")]
    if not points:
        return None
    xs = np.array([p["intensity"] for p, _ in points])
    ys = np.array([p["achieved_tflops"] for p, _ in points])
    fig, ax = plt.subplots(figsize=(PLOT, 4.0))
    dev = eff.get("device")
    (x_lo, x_hi), (y_lo, y_hi) = axis_limits(dev, xs, ys)
    if dev:
        bw = dev["bandwidth_gbps"]
        peaks = [(dt, dev["peak_tflops"][dt]) for dt in ROOF_DTYPES if dt in dev["peak_tflops"]]
        # each roof in two parts, each with its legend entry: the bandwidth slope (one line, up to the
        # highest peak's ridge point) and each peak's flat roof from its own ridge point on
        ridge = max(peak for _, peak in peaks) * 1e3 / bw if peaks else x_hi
        ax.plot([x_lo, ridge], [bw * x_lo / 1e3, bw * ridge / 1e3], color=NEUTRAL[0], lw=1.4, ls="-.",
                label=f"bandwidth {bw:,.0f} GB/s (the slope)")
        for i, (dt, peak) in enumerate(peaks):
            ax.plot([max(x_lo, peak * 1e3 / bw), x_hi], [peak, peak], color="#555555", lw=1.2 if i == 0 else 0.9,
                    ls=ROOF_STYLES[dt], label=f"{dt.upper()} peak {peak:,.0f} TFLOP/s")
        title = f"Roofline: {_label(dev['model'], 40)} (datasheet peaks)"
    else:
        title = "Achieved rates (device not in the table: no roof)"
    # one label per name and place: ops of one name within NEAR_DECADES of each other on both axes (the
    # same GEMM at three shapes) are named once, with their number, not written over each other
    groups: list[list] = []  # [name, log10 x, log10 y, count, the point that carries the label]
    for p, big in points:
        if big:
            continue
        name = _label(p["name"].replace("aten::", ""), 18)
        x, y = np.log10(p["intensity"]), np.log10(p["achieved_tflops"])
        near = next((g for g in groups if g[0] == name and abs(g[1] - x) <= NEAR_DECADES and abs(g[2] - y) <= NEAR_DECADES), None)
        if near:
            near[3] += 1
        else:
            groups.append([name, x, y, 1, id(p)])
    labels = {group[4]: group[0] + (f" ×{group[3]}" if group[3] > 1 else "") for group in groups}
    for p, big in points:
        color = CLASS_COLORS.get(p["class"], "#333333")
        if big:
            ax.scatter(p["intensity"], p["achieved_tflops"], s=90, color=color, edgecolor="black", zorder=3,
                       label=f"{p['class']} ({p['pct_of_roofline']:.0f}% of roofline)" if p.get("pct_of_roofline") is not None
                       else p["class"])
        else:
            ax.scatter(p["intensity"], p["achieved_tflops"], s=18, color=color, alpha=0.7, zorder=2)
            if id(p) not in labels:  # named with the group it belongs to
                continue
            # beside its marker and clear of the class's large one at the same place
            ax.annotate(labels[id(p)], (p["intensity"], p["achieved_tflops"]), fontsize=7,
                        xytext=(8, 6), textcoords="offset points", color="#444444", ha="left", va="bottom",
                        bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.8})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(title, loc="left")
    _legend_beside(ax)
    ax.grid(True, which="major", alpha=0.3)
    return _svg(fig)
