"""The report's simple charts (bars, lines, a histogram, timeline lanes) as SVG written from their data.

matplotlib drew them at ~40-100 ms of CPU a figure (its tick objects and text layout) after a ~0.2 s
import: a batch case with reports paid more for its pictures than for its analysis. These are the
same data, axes, labels and titles, written as a few ``<path>`` / ``<text>`` elements: a frame with
its ticks, the marks in data coordinates, and the legend below the plot (never over the data), all
in one width that fits an 800 px page. Every text is XML-escaped here (a capture names devices,
frames and ranges); the data are clipped to the plot (``<clipPath id="plot">``, its id prefixed by the
caller like matplotlib's, so two charts on one page never share an id).

Text widths are estimated (0.6 em a character, a sans-serif font's average), so a layout never
depends on the fonts of the machine that drew it: the same data give the same bytes.
"""

from __future__ import annotations

import math
from html import escape

WIDTH = 760  # px: the whole chart, legend included (an 800 px page less its margins)
TITLE_PX, LABEL_PX, TICK_PX, LEGEND_PX = 13, 12, 11, 11
EM = 0.6  # a character's estimated width, in font sizes
ROW_PX = 22  # a bar chart's row
TICK_LEN = 4


def text_width(text: str, size: float) -> float:
    return len(text) * size * EM


def _num(value: float) -> str:
    """A coordinate: two decimals, no trailing zeros."""
    out = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if out in ("-0", "") else out


def nice_ticks(lo: float, hi: float, count: int = 6, integer: bool = False) -> list[float]:
    """Round tick values (1, 2, 2.5 or 5 times a power of ten apart) covering [lo, hi]."""
    if not hi > lo:
        hi = lo + 1.0
    raw = (hi - lo) / count
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    if integer:
        step = max(1.0, math.ceil(step))
    first = math.ceil(lo / step - 1e-9)
    return [round(k * step, 10) for k in range(first, math.floor(hi / step + 1e-9) + 1)]


def tick_text(value: float) -> str:
    return f"{round(value, 10):g}".replace("-", "−")


def wrap(text: str, size: float, width: float) -> list[str]:
    """``text`` in lines no wider than ``width`` (estimated), broken between words."""
    lines, line = [], ""
    for word in text.split(" "):
        if line and text_width(f"{line} {word}", size) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line]


class Chart:
    """One chart: a plot area with an x axis (linear) and a y axis (linear, logarithmic, or named rows),
    marks drawn in data coordinates (:meth:`rects`, :meth:`line`, :meth:`polygon`, :meth:`vline`), a title
    over it and a legend under it (:meth:`svg`)."""

    def __init__(self, title: str, xlim: tuple[float, float], ylim: tuple[float, float], plot_height: float,
                 xlabel: str, ylabel: str | None = None, yticks: list[tuple[float, str]] | None = None,
                 ylog: bool = False, yinteger: bool = False, xticks: list[float] | None = None):
        self.xlim, self.ylim, self.ylog = xlim, ylim, ylog
        if yticks is None:
            lo, hi = ylim
            values = ([10.0 ** k for k in range(math.ceil(math.log10(lo)), math.floor(math.log10(hi)) + 1)] if ylog
                      else nice_ticks(lo, hi, 5, yinteger))
            yticks = [(v, tick_text(v)) for v in values if lo - 1e-9 <= v <= hi + 1e-9]
        self.yticks = yticks
        self.xticks = [v for v in (xticks or nice_ticks(*xlim)) if xlim[0] - 1e-9 <= v <= xlim[1] + 1e-9]
        label_room = max((text_width(label, TICK_PX) for _, label in yticks), default=0.0)
        self.left = math.ceil(label_room + TICK_LEN + 6 + (LABEL_PX + 8 if ylabel else 0) + 4)
        self.plot_w = WIDTH - self.left - 14
        self.plot_h = plot_height
        self.titles = wrap(title, TITLE_PX, WIDTH - 8)
        self.top = 8 + len(self.titles) * (TITLE_PX + 4) + 4
        self.xlabel, self.ylabel = xlabel, ylabel
        self.marks: list[str] = []
        self.legend: list[tuple[str, str]] = []  # (label, the sample's SVG at the origin)

    # data -> px
    def x(self, value: float) -> float:
        lo, hi = self.xlim
        return self.left + (value - lo) / ((hi - lo) or 1.0) * self.plot_w

    def y(self, value: float) -> float:
        lo, hi = self.ylim
        if self.ylog:
            value, lo, hi = (math.log10(max(v, 1e-300)) for v in (value, lo, hi))
        return self.top + self.plot_h - (value - lo) / ((hi - lo) or 1.0) * self.plot_h

    def rects(self, spans, y0: float, height: float, color: str, stroke: str | None = None) -> None:
        """Rectangles ``(x, width)`` over data rows ``y0 .. y0 + height``, as one path; rectangles that touch
        or overlap once in pixels are one (a lane's thousands of kernels: the same picture, fewer bytes)."""
        top, bottom = self.y(y0 + height), self.y(y0)
        boxes = sorted((self.x(x), self.x(x + w)) for x, w in spans)
        merged: list[list[float]] = []
        for a, b in boxes:
            b = max(b, a + 0.25)  # a sliver still shows
            if stroke is None and merged and a <= merged[-1][1] + 0.05:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        if not merged:
            return
        h = _num(bottom - top)
        d = "".join(f"M{_num(a)} {_num(top)}h{_num(b - a)}v{h}h{_num(a - b)}z" for a, b in merged)
        edge = f"; stroke: {stroke}; stroke-width: 0.5" if stroke else ""
        self.marks.append(f'<path d="{d}" style="fill: {color}{edge}"/>')

    def line(self, xs, ys, color: str, width: float = 1.2, dash: str | None = None) -> None:
        points = " ".join(f"{_num(self.x(a))},{_num(self.y(b))}" for a, b in zip(xs, ys))
        self.marks.append(f'<polyline points="{points}" style="{_stroke(color, width, dash)}"/>')

    def polygon(self, points, color: str, opacity: float | None = None) -> None:
        text = " ".join(f"{_num(self.x(a))},{_num(self.y(b))}" for a, b in points)
        alpha = f"; fill-opacity: {opacity}" if opacity is not None else ""
        self.marks.append(f'<polygon points="{text}" style="fill: {color}{alpha}"/>')

    def vline(self, value: float, color: str, dash: str | None = None, width: float = 1.5) -> None:
        x = _num(self.x(value))
        self.marks.append(f'<line x1="{x}" y1="{_num(self.top)}" x2="{x}" y2="{_num(self.top + self.plot_h)}" '
                          f'style="{_stroke(color, width, dash)}"/>')

    def patch_entry(self, label: str, color: str) -> None:
        self.legend.append((label, f'<rect width="14" height="9" y="-8" style="fill: {color}"/>'))

    def line_entry(self, label: str, color: str, dash: str | None = None, width: float = 1.5) -> None:
        self.legend.append((label, f'<line x1="0" y1="-4" x2="14" y2="-4" style="{_stroke(color, width, dash)}"/>'))

    def _axes(self) -> list[str]:
        left, top, right, bottom = self.left, self.top, self.left + self.plot_w, self.top + self.plot_h
        out = [f'<path d="M{left} {_num(top)}V{_num(bottom)}H{_num(right)}" style="{_stroke("#000000", 0.8)}"/>']
        ticks = "".join(f"M{_num(self.x(v))} {_num(bottom)}v{TICK_LEN}" for v in self.xticks)
        ticks += "".join(f"M{left} {_num(self.y(v))}h-{TICK_LEN}" for v, _ in self.yticks)
        if ticks:
            out.append(f'<path d="{ticks}" style="{_stroke("#000000", 0.8)}"/>')
        label_y = _num(bottom + TICK_LEN + TICK_PX + 2)
        out += [f'<text x="{_num(self.x(v))}" y="{label_y}" text-anchor="middle" font-size="{TICK_PX}">'
                f'{escape(tick_text(v))}</text>' for v in self.xticks]
        out += [f'<text x="{left - TICK_LEN - 3}" y="{_num(self.y(v) + TICK_PX * 0.35)}" text-anchor="end" '
                f'font-size="{TICK_PX}">{escape(label)}</text>' for v, label in self.yticks]
        out.append(f'<text x="{_num(left + self.plot_w / 2)}" y="{_num(bottom + TICK_LEN + TICK_PX + LABEL_PX + 8)}" '
                   f'text-anchor="middle" font-size="{LABEL_PX}">{escape(self.xlabel)}</text>')
        if self.ylabel:
            middle = _num(top + self.plot_h / 2)
            out.append(f'<text transform="translate({LABEL_PX + 2} {middle}) rotate(-90)" text-anchor="middle" '
                       f'font-size="{LABEL_PX}">{escape(self.ylabel)}</text>')
        return out

    def _legend(self, top: float) -> tuple[list[str], float]:
        """The legend's entries in rows under the x label, wrapped at the chart's width: (elements, its bottom)."""
        if not self.legend:
            return [], top
        # in columns of the widest entry's width, as many as the width holds, filled row by row
        column = max(20 + text_width(label, LEGEND_PX) + 14 for label, _ in self.legend)
        columns = max(1, min(len(self.legend), int((WIDTH - 4 - self.left) // column)))
        out, y = [], top + LEGEND_PX
        for k, (label, sample) in enumerate(self.legend):
            x = self.left + (k % columns) * column
            y = top + LEGEND_PX + (k // columns) * (LEGEND_PX + 6)
            out.append(f'<g transform="translate({_num(x)} {_num(y)})">{sample}<text x="20" font-size="{LEGEND_PX}">'
                       f'{escape(label)}</text></g>')
        box = f"{self.left} {_num(top)} {WIDTH - 4} {_num(y + 4)}"
        return [f'<g class="legend" data-box="{box}">', *out, "</g>"], y + 4

    def svg(self) -> str:
        """The chart as an ``<svg>`` element, ``WIDTH`` px wide, its height what it holds."""
        bottom = self.top + self.plot_h + TICK_LEN + TICK_PX + LABEL_PX + 12
        legend, bottom = self._legend(bottom)
        height = math.ceil(bottom + 6)
        titles = [f'<text x="4" y="{8 + (k + 1) * (TITLE_PX + 4) - 4}" font-size="{TITLE_PX}">{escape(line)}</text>'
                  for k, line in enumerate(self.titles)]
        plot = f'x="{self.left}" y="{_num(self.top)}" width="{_num(self.plot_w)}" height="{_num(self.plot_h)}"'
        return "\n".join([
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
            'style="font-family: DejaVu Sans, Arial, Helvetica, sans-serif">',
            f'<defs><clipPath id="plot"><rect {plot}/></clipPath></defs>',
            f'<rect class="plot" {plot} style="fill: #ffffff"/>',
            '<g clip-path="url(#plot)">', *self.marks, "</g>",
            *self._axes(), *titles, *legend, "</svg>"])


def _stroke(color: str, width: float, dash: str | None = None) -> str:
    return f"fill: none; stroke: {color}; stroke-width: {width}" + (f"; stroke-dasharray: {dash}" if dash else "")


DASHED, DOTTED, DASH_DOT = "5 2.5", "1.5 2.5", "6 2.5 1.5 2.5"  # matplotlib's --, : and -. at a 1.5 px line
