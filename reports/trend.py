"""Reports of a trend (``tracetriage.trend/1``): json (the contract), the series as a table, and text,
md, html laid out from its TrendView (reports/trend_view.py) by templates/trend.*.j2."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tracetriage.contract import load, load_all
from tracetriage.reports.jsonout import _clean

if TYPE_CHECKING:
    from tracetriage.records.trend import Case, Group, Series, TrendChange, TrendRecord

# the views (trend_view, compare_view and theirs: ~40 ms of imports) and the trend's records (13 dataclasses,
# ~13-20 ms) are loaded by the formats that lay them out, not by --format json

__all__ = ["CHART_SERIES", "render_trend", "series_frame", "trend_charts"]

CHART_SERIES = ("step_p50_ms", "step_p99_ms", "busy_pct", "idle_ms", "launches_per_step", "syncs_per_step",
                "ttft_p50_ms", "tpot_p50_ms", "throughput_rps")


def series_frame(result: dict | TrendRecord):
    """One row per group, case and series: the long table ``--format parquet`` writes."""
    import pandas as pd

    from tracetriage.records.trend import read

    rows = []
    for group in read(result).groups:
        for name, series in group.series.items():
            for case, value in zip(group.cases, series.values):
                rows.append({"group": group.key, "case": case.name, "time": case.time, "label": case.label,
                             "metric": name, "unit": series.unit, "value": value})
    return pd.DataFrame(rows, columns=["group", "case", "time", "label", "metric", "unit", "value"])


def render_trend(result: dict, fmt: str, links: str | None = None, store=None) -> str:
    """The trend in one format: json, html, md or text. ``links``: the batch folder relative to the
    report (the captures link to their reports); ``store`` (the analysis cache, or None) keeps the HTML's
    compiled template. The reports are the same with and without --gate, as compare's are: the gate's
    result line is the command's (stderr, or the -o note), never part of the document."""
    if fmt == "json":
        return json.dumps(_clean(result), indent=2, ensure_ascii=False) + "\n"
    from tracetriage.records.trend import read
    from tracetriage.reports.trend_view import series_title, trend_view

    trend = read(result)
    view = trend_view(trend, links)
    if fmt == "html":
        from tracetriage.reports.html import environment

        charts = {group.key: trend_charts(record, trend.changes_of(record), CHART_SERIES,
                                          [case.href for case in group.cases], title=series_title)
                  for record, group in zip(trend.groups, view.groups)}
        from tracetriage import __version__

        return environment(store).get_template("trend.html.j2").render(v=view, charts=charts, tool_version=__version__)
    if fmt == "md":
        from tracetriage.reports.markdown import environment

        return environment().get_template("trend.md.j2").render(v=view)
    from tracetriage.reports.text import environment

    return environment().get_template("trend.txt.j2").render(v=view)


SHIFT_COLORS = {"regressed": "#d62828", "improved": "#2a9d8f", "changed": "#6c757d"}  # changed: moved, explained, not judged


def _value_axis(ax, values: list[float]) -> None:
    """A series' value axis: whole-number ticks for a count-like series (every value an integer), and
    a constant series centred in a range that shows it as one (not 0.950-1.050 around a 1)."""
    from matplotlib.ticker import MaxNLocator

    known = [v for v in values if v == v]  # NaN (a capture without the series) left out
    if not known:
        return
    whole = all(float(v).is_integer() for v in known)
    if whole:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if max(known) == min(known):
        pad = max(1.0, abs(known[0]) * 0.1) if whole else (abs(known[0]) * 0.1 or 1.0)
        ax.set_ylim(known[0] - pad, known[0] + pad)


def trend_charts(group: Group | dict, changes, names: tuple, links: list[str | None], title=None) -> str | None:
    """Small multiples of a group's main series over its captures: level shifts as dashed vertical
    lines before the first bad capture, outliers circled, red when regressed and teal when improved,
    with one legend above the charts naming each mark drawn; each point links to its case report.
    ``group`` and ``changes``: the trend's records (or their contract dicts); ``title(name, unit)``: a
    series as the page's tables name it (reports/trend.py series_title)."""
    from tracetriage.records.trend import Group, TrendChange
    from tracetriage.reports.charts import NEUTRAL, WIDTH, _label
    from tracetriage.reports.figures import figure
    from tracetriage.reports.figures import svg as _svg

    group, changes = load(Group, group), load_all(TrendChange, changes)
    series = _charted_series(group, changes, names)
    if not series:
        return None
    cases = group.cases
    xs = list(range(len(cases)))
    cols = 2
    rows = (len(series) + cols - 1) // cols
    fig, axes = figure(WIDTH, 1.9 * rows, rows, cols, squeeze=False, sharex=True)
    ticks = [case.label or case.name for case in cases]
    drawn: set[tuple[str, str]] = set()  # (kind, direction) of the marks on some chart
    for ax, (name, values) in zip(axes.flat, series):
        ys = [float("nan") if v is None else v for v in values.values]
        ax.plot(xs, ys, color=NEUTRAL[1], lw=1, zorder=1)
        pts = ax.scatter(xs, ys, s=14, color=NEUTRAL[0], zorder=3)
        pts.set_urls(links)
        _value_axis(ax, ys)
        drawn |= _mark_changes(ax, [change for change in changes if change.metric == name], cases, ys)
        ax.set_title(_label(title(name, values.unit) if title else f"{name} ({values.unit})", 60), loc="left", fontsize=9)
    for ax in axes.flat[len(series):]:
        ax.set_visible(False)
    step = max(1, len(cases) // 10)
    for ax in axes.flat[:len(series)]:  # every chart names its captures (under the last row alone, the top charts had none)
        ax.set_xticks(xs[::step])
        ax.set_xticklabels([_label(t, 14) for t in ticks[::step]], rotation=30, ha="right", fontsize=7)
        ax.tick_params(labelbottom=True)
    fig.tight_layout()
    keys = _legend_keys(drawn, NEUTRAL)
    fig.legend(handles=keys, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=min(3, len(keys)), frameon=False)
    return _svg(fig)


def _charted_series(group: Group, changes: tuple[TrendChange, ...], names: tuple) -> list[tuple[str, Series]]:
    """The series drawn: the main ``names`` the group has, then up to four the page names a change of,
    then up to three findings' series."""
    by_name = group.series
    series = [(name, by_name[name]) for name in names if name in by_name]
    shown = {name for name, _ in series}
    changed = dict.fromkeys(change.metric for change in changes if change.metric in by_name and change.metric not in shown)
    series += [(name, by_name[name]) for name in changed][:4]  # a series the page names a change of is drawn too
    series += [(name, values) for name, values in by_name.items() if name.startswith("finding:") and name not in changed][:3]
    return series


def _mark_changes(ax, changes: list[TrendChange], cases: tuple[Case, ...], ys: list[float]) -> set[tuple[str, str]]:
    """One series' changes on its chart: a dashed line before a level shift's first bad capture, a circle
    round an outlier; the (kind, direction) of each mark drawn."""
    drawn = set()
    for change in changes:
        i = next((k for k, case in enumerate(cases) if case.name == change.first_bad), None)
        if i is None:
            continue
        direction = change.direction if change.direction in SHIFT_COLORS else "improved"
        color = SHIFT_COLORS[direction]
        if change.kind == "level_shift":
            ax.axvline(i - 0.5, color=color, lw=1.2, ls="--", zorder=2)
            drawn.add(("level_shift", direction))
        else:
            ax.scatter([i], [ys[i]], s=90, facecolors="none", edgecolors=color, lw=1.5, zorder=4)
            drawn.add(("outlier", direction))
    return drawn


def _legend_keys(drawn: set[tuple[str, str]], neutral) -> list:
    """The legend: a capture, then each kind of mark drawn (sorted)."""
    from matplotlib.lines import Line2D

    keys = [Line2D([], [], marker="o", ls="-", color=neutral[1], markerfacecolor=neutral[0], markeredgecolor=neutral[0],
                   markersize=4, label="a capture (click: its report)")]
    for kind, direction in sorted(drawn):
        color = SHIFT_COLORS[direction]
        if kind == "level_shift":
            keys.append(Line2D([], [], color=color, ls="--", lw=1.2,
                               label=f"level shift, {direction} (from the next capture on)"))
        else:
            keys.append(Line2D([], [], marker="o", ls="", markersize=9, markerfacecolor="none", markeredgecolor=color,
                               markeredgewidth=1.5, label=f"outlier, {direction}"))
    return keys
