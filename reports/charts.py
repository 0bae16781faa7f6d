"""Charts as inline SVG. The report's simple ones (the timeline, GPU busy over time, the window's
accounting, idle by cause, step durations, collective share, hot frames) are written from their data by
:mod:`tracetriage.reports.svgchart`, which escapes every text; the serving charts (a twin axis, a scatter
and its fit) are drawn by matplotlib's SVG backend, whose figures and SVG text come from
:mod:`tracetriage.reports.figures`: text stays text (``svg.fonttype = none``), XML-escaped by matplotlib.
Labels from traces are stripped of ``$`` so mathtext cannot interpret them.
"""

from __future__ import annotations

import re

from tracetriage.contract import load, load_all
from tracetriage.records.analysis import AnalysisRecord
from tracetriage.records.analysis import read as read_analysis
from tracetriage.records.series import AnalysisSeries, LaneDevice, LoadPoint, StepSeries, Timeline
from tracetriage.records.serving import TpotFit
from tracetriage.records.side import HotFrame
from tracetriage.records.trace import Accounting, Device
from tracetriage.reports.chart_cache import _memo
from tracetriage.reports.figures import figure
from tracetriage.reports.figures import svg as _svg
from tracetriage.reports.palette import (
    ACTIVITY_COLORS,
    CAUSE_COLORS,
    COLLECTIVES_COLOR,
    KERNELS_COLOR,
    LAUNCH_COLOR,
    NEUTRAL,
    OTHER_CALL_COLOR,
    SYNC_COLOR,
    UNCLAIMED_COLOR,
    UNKNOWN_COLOR,
    cause_label,
    claim_columns,
)
from tracetriage.reports.svgchart import DASH_DOT, DASHED, DOTTED, ROW_PX, Chart
from tracetriage.wording import for_vendor, ms

# Every chart is drawn this wide (inches, legend beside it included) and shown at its own size, never
# stretched: one font size on the whole page.
WIDTH = 10.0
PLOT = 7.8  # the plot's width when its legend sits beside it


def _legend_beside(ax, *more_axes) -> None:
    """The legend of ``ax`` (and of ``more_axes``, e.g. a twin axis) as one box right of the plot:
    outside the data, so it covers none of it."""
    handles, labels = ax.get_legend_handles_labels()
    for other in more_axes:
        h, lab = other.get_legend_handles_labels()
        handles, labels = handles + h, labels + lab
    if handles:
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01 + 0.07 * len(more_axes), 1.0), frameon=False)


def _title(ax, text: str) -> None:
    """``text`` over ``ax``, left-aligned, where matplotlib would place it (the top of the plot and its pad:
    no chart has ticks or an offset text above its plot); given, not searched for: the search measured
    every tick label of the y axis, twice a figure."""
    ax.set_title(text, loc="left", y=1.0)


def _time_unit(span_ns: float) -> tuple[float, str]:
    """(ns per unit, unit) of a time axis spanning ``span_ns``: µs under 1 ms, s from 10 s, else ms
    (a 152 µs window on an axis in ms reads 0.00-0.15)."""
    if span_ns < 1e6:
        return 1e3, "µs"
    if span_ns >= 1e10:
        return 1e9, "s"
    return 1e6, "ms"


def _label(s: str, width: int = 48) -> str:
    s = str(s).replace("$", "＄")
    return s if len(s) <= width else s[: width - 1] + "…"


def _bars_chart(title: str, labels: list[str], xlabel: str, xlim: tuple[float, float]) -> Chart:
    """A chart of one bar row per label, the first on top (row ``i`` centred at ``len(labels) - 1 - i``)."""
    n = len(labels)
    return Chart(title, xlim, (-0.6, n - 0.4), n * ROW_PX + 4, xlabel,
                 yticks=[(n - 1 - i, label) for i, label in enumerate(labels)])


def _bar(chart: Chart, row: int, left: float, value: float, color: str, height: float = 0.8,
         stroke: str | None = None) -> None:
    centre = len(chart.yticks) - 1 - row
    chart.rects([(left, value)], centre - height / 2, height, color, stroke)


@_memo
def busy_over_time(busy: dict[str, list[float]], window_ns: int) -> str | None:
    if not busy:
        return None
    n = len(next(iter(busy.values())))
    scale, unit = _time_unit(window_ns)
    xs = [window_ns / scale * (i + 0.5) / n for i in range(n)]
    # devices whose curves agree to 3 points in every bin are one line (8 ranks in lockstep drew
    # 8 overlapping lines); more than four distinct curves become their median and range
    groups: list[tuple[list[str], list[float]]] = []
    for dev, series in busy.items():
        for names, ref in groups:
            if all(abs(a - b) <= 3.0 for a, b in zip(series, ref)):
                names.append(dev)
                break
        else:
            groups.append(([dev], list(series)))
    bin_width = f"{window_ns / scale / n:.3g} {unit}"
    chart = Chart(f"GPU busy over time ({n} bins of {bin_width}; share of each bin covered by GPU activity)",
                  (0, window_ns / scale), (0, 105), 150, f"{unit} from the start of the window", "GPU busy % of the bin",
                  yticks=[(v, f"{v:g}") for v in range(0, 101, 20)])
    if len(groups) <= 4:
        for k, (names, series) in enumerate(groups):
            label = (_label(names[0], 24) if len(names) == 1
                     else f"{_label(names[0], 20)} and {len(names) - 1} more (within 3 points)")
            color = (NEUTRAL + ("#8ecae6",))[k]
            chart.line(xs, series, color)
            chart.line_entry(label, color)
    else:
        import numpy as np

        m = np.array([list(s) for s in busy.values()], dtype=float)
        low, high = m.min(axis=0).tolist(), m.max(axis=0).tolist()
        chart.polygon([*zip(xs, high), *reversed(list(zip(xs, low)))], NEUTRAL[1], opacity=0.35)
        chart.patch_entry(f"range over {len(busy)} devices", NEUTRAL[1])
        chart.line(xs, np.median(m, axis=0).tolist(), NEUTRAL[0])
        chart.line_entry("median device", NEUTRAL[0])
    return _page_svg(chart)


def _page_svg(chart: Chart) -> str:
    """A hand-drawn chart's SVG, its ids under the page's next prefix (as figures.svg does matplotlib's)."""
    from tracetriage.reports.chart_cache import next_prefix
    from tracetriage.reports.figures import ID_MARKS

    text, prefix = chart.svg(), next_prefix()
    for mark in ID_MARKS:
        text = text.replace(mark, mark + prefix)
    return text


@_memo
def idle_by_cause(devices: tuple[Device, ...] | list[dict], vendor: str | None = None) -> str | None:
    """One stacked bar per device: its idle time by cause, each cause in its palette colour (the
    timeline's too), named in the capture's vendor's words (device records, or their contract dicts)."""
    devices = load_all(Device, devices)
    if not devices:
        return None
    chart = _bars_chart("Idle time by cause", [_label(d.id, 24) for d in devices[:16]],
                        "% of the device's window the GPU is idle, by what the host was doing", (0, 100))
    left = [0.0] * len(chart.yticks)
    for cause, color in CAUSE_COLORS.items():
        vals = [100.0 * d.gaps.by_cause.get(cause, 0) / (d.window_ns or 1) for d in devices[:16]]
        if not any(vals):
            continue
        for row, value in enumerate(vals):
            _bar(chart, row, left[row], value, color)
        chart.patch_entry(f"idle: {cause_label(cause, vendor)}", color)
        left = [a + b for a, b in zip(left, vals)]
    return _page_svg(chart)


COMPUTE_SLICES = ("compute", "collective")  # the accounting slices in which kernels compute


def _unclaimed_compute(acc: Accounting | dict) -> float:
    """% of the window in which kernels (collectives included) compute and no finding claims it;
    an analysis saved before ``unclaimed_pct`` was written gives the compute slices, as then drawn."""
    acc = load(Accounting, acc)
    left = acc.slices_pct if acc.unclaimed_pct is None else acc.unclaimed_pct
    return sum(left.get(name, 0.0) for name in COMPUTE_SLICES)


@_memo
def window_accounting(devices: tuple[Device, ...] | list[dict]) -> str | None:
    """One stacked bar per device: the slice each finding claims, then what no finding
    claims (kernels computing, copies, idle), adding up to the window (device records, or their contract dicts)."""
    devs = [d for d in load_all(Device, devices) if d.accounting][:16]
    if not devs:
        return None
    columns = claim_columns(devs)  # the accounting table's order and colours
    chart = _bars_chart("Where each device's window went, and which finding claims each slice",
                        [_label(d.id, 28) for d in devs], "% of each device's window", (0, 100))
    left = [0.0] * len(devs)

    def layer(values, color, label):
        nonlocal left
        if not any(values):
            return
        for row, value in enumerate(values):
            _bar(chart, row, left[row], value, color, stroke="#ffffff")
        chart.patch_entry(label, color)
        left = [a + b for a, b in zip(left, values)]

    for fid, color in columns.items():
        layer([d.accounting.claims_pct.get(fid, 0.0) for d in devs], color, fid)
    # What no finding claims, slice by slice as the ledger left it (a claim on kernel time, e.g.
    # below_roofline's, leaves idle unclaimed: never drawn as computing)
    rest = [max(0.0, 100.0 - sum(d.accounting.claims_pct.values())) for d in devs]
    compute = [min(r, _unclaimed_compute(d.accounting)) for r, d in zip(rest, devs)]
    layer(compute, KERNELS_COLOR, "kernels computing (no finding)")
    layer([max(0.0, r - k) for r, k in zip(rest, compute)], UNCLAIMED_COLOR, "unclaimed (copies, idle)")
    return _page_svg(chart)


# a bin holding under this share of the tallest bin's count is drawn under that share of the axis: the
# count axis goes logarithmic so the few long steps a headline names stay visible
LOG_COUNTS_BELOW = 0.05


@_memo
def step_durations(steps: dict[str, StepSeries] | dict[str, dict]) -> str | None:
    """Histogram of the steady-state step durations of the process with the most steps, with its p50,
    p99 and longest step marked. When a bin holds under LOG_COUNTS_BELOW of the tallest bin's count
    (a rare long step beside hundreds of short ones), the count axis is logarithmic, and the title
    says so: the tail the headline names is drawn, not flattened to nothing."""
    series = [(k, durations) for k, durations in ((k, load(StepSeries, v).durations) for k, v in steps.items()) if durations]
    if not series:
        return None
    key, durations = max(series, key=lambda kv: len(kv[1]))
    import numpy as np

    d = np.sort(np.asarray(durations, dtype=float)) / 1e6
    # the same percentiles as the tables (numpy's linear interpolation): one number per metric on the page
    p50 = float(np.percentile(durations, 50)) / 1e6
    p99 = float(np.percentile(durations, 99)) / 1e6
    counts, edges = np.histogram(d, bins=min(60, max(10, len(d) // 2)))
    filled = counts[counts > 0]
    log = bool(filled.size and filled.min() < LOG_COUNTS_BELOW * filled.max())
    span = float(edges[-1] - edges[0]) or 1.0
    base, top = (0.5, float(filled.max()) * 2) if log else (0.0, float(counts.max()) * 1.05)
    chart = Chart(f"Step durations, pid {_label(key, 20)} ({len(d)} steady-state steps"
                  + ("; count axis logarithmic, so the rare long steps show)" if log else ")"),
                  (float(edges[0]) - 0.05 * span, float(edges[-1]) + 0.05 * span), (base, top), 150,
                  "step duration (ms)", "steps (log scale)" if log else "steps", ylog=log, yinteger=not log)
    outline = [(float(edges[0]), base)]
    for count, lo, hi in zip(counts.tolist(), edges[:-1].tolist(), edges[1:].tolist()):
        outline += [(lo, max(count, base)), (hi, max(count, base))]
    chart.polygon([*outline, (float(edges[-1]), base)], NEUTRAL[1])  # one polygon, not a bar each
    chart.vline(p50, NEUTRAL[2], DASHED)
    chart.line_entry(f"p50 {p50:.2f} ms", NEUTRAL[2], DASHED)
    # "(tail)" only where the p99 stands apart from the median (the 1.2x rule of the longest step below)
    chart.vline(p99, NEUTRAL[2], DOTTED)
    chart.line_entry(f"p99 {p99:.2f} ms" + (" (tail)" if p99 > 1.2 * p50 else ""), NEUTRAL[2], DOTTED)
    longest = float(d[-1])
    if longest > 1.2 * p99:  # a step well past the tail mark (the timeline's rule for its longest step)
        chart.vline(longest, NEUTRAL[0], DASH_DOT)
        chart.line_entry(f"longest {longest:.2f} ms", NEUTRAL[0], DASH_DOT)
    return _page_svg(chart)


def _ranked_bars(labels: list[str], layers: list[tuple[list[float], str, str]], title: str, xlabel: str,
                 full_scale: bool = True) -> str:
    """Horizontal bars, first row on top; a second layer is drawn half height inside the first."""
    top = max((v for values, _, _ in layers for v in values), default=0.0)
    chart = _bars_chart(title, labels, xlabel, (0, 100) if full_scale else (0, (top or 1.0) * 1.05))
    for n, (values, color, label) in enumerate(layers):
        for row, value in enumerate(values):
            _bar(chart, row, 0.0, value, color, height=0.4 if n else 0.8)
        if len(layers) > 1:  # the legend below the axis, outside the bars it would otherwise cover
            chart.patch_entry(label, color)
    return _page_svg(chart)


@_memo
def collective_share(devices: tuple[Device, ...] | list[dict]) -> str | None:
    """Each rank's collective share of its window, and the part not overlapped with compute."""
    devs = [d for d in load_all(Device, devices) if d.collective_count][:16]
    if not devs:
        return None
    return _ranked_bars(
        [_label(d.id, 24) for d in devs],
        [([d.collective_share_pct for d in devs], COLLECTIVES_COLOR, "collective share"),
         ([d.collective_exposed_pct for d in devs], NEUTRAL[2], "exposed (not overlapped)")],
        "Collective share per rank", "% of window")


def _frame_label(frame: str, width: int = 56) -> str:
    """``func (dir/sub/file.py:120)`` as ``func (sub/file.py:120)``: the function and where it is
    are what identify a frame; leading directories go first, then the middle of the function name."""
    m = re.match(r"^(.*) \((.*)\)$", str(frame))
    if not m:
        return _label(frame, width)
    func, where = m.groups()
    parts = where.split("/")
    where = "/".join(parts[-2:]) if len(parts) > 2 else where
    if len(func) + len(where) + 3 > width:
        where = parts[-1]
    room = width - len(where) - 3
    if len(func) > room:
        keep = max(4, room - 1)
        func = func[: keep // 2] + "…" + func[-(keep - keep // 2):]
    return _label(f"{func} ({where})", width)


@_memo
def hot_frames(frames: tuple[HotFrame, ...] | list[dict]) -> str | None:
    """The host's hottest frames (py-spy): inclusive and own share of the non-idle samples."""
    fs = load_all(HotFrame, frames)[:12]
    if not fs:
        return None
    return _ranked_bars(
        [_frame_label(f.frame) for f in fs],
        [([f.share_pct for f in fs], NEUTRAL[1], "inclusive"), ([f.self_pct for f in fs], NEUTRAL[0], "own code")],
        "Hot frames (host)", "% of non-idle py-spy samples")


LANE_COLORS = {k: color for k, color in ACTIVITY_COLORS.items() if k in ("kernels", "collectives", "copies", "graphs")}
# host calls by category, each in the colour of the idle cause it is (the GPU idle while the host is in
# a launch call is idle "in a launch call"): one colour per cause on the page
HOST_COLORS = {"launch": LAUNCH_COLOR, "sync": SYNC_COLOR, "other": OTHER_CALL_COLOR}
HOST_LABELS = {"launch": "host: launch calls", "sync": "host: sync calls", "other": "host: other CUDA calls"}
HOST_CAUSE = {"launch": "launch", "sync": "sync", "other": "other_cuda"}  # the idle cause a host call category is


def _device_lanes(chart: Chart, device: LaneDevice, y: float, t0: int, span: int) -> None:
    """One device's GPU lanes over its idle gaps (each in its cause's colour) at height ``y``, its
    process's host calls below them."""
    scale, _ = _time_unit(span)
    gaps: dict[str, list] = {}  # one path per cause, not one per gap (hundreds a step)
    for gs, ge, cause in device.gaps:
        gaps.setdefault(cause, []).append(((gs - t0) / scale, (ge - gs) / scale))
    for cause, bars in gaps.items():  # idle: a thinner band than the GPU's work
        chart.rects(bars, y + 1.2, 0.5, CAUSE_COLORS.get(cause, UNKNOWN_COLOR))
    for lane, spans in device.gpu_lanes():
        bars = [((s - t0) / scale, max((e - s) / scale, span / scale / 2000)) for s, e in spans]
        if bars:
            chart.rects(bars, y + 1.0, 0.9, LANE_COLORS[lane])
    for cat, color in HOST_COLORS.items():
        bars = [((s - t0) / scale, max((e - s) / scale, span / scale / 2000)) for s, e, c in device.host if c == cat]
        if bars:
            chart.rects(bars, y, 0.8, color)  # its legend entry is its cause's (timeline_legend_entries)


def timeline_legend_entries(devices: tuple[LaneDevice, ...], vendor: str | None) -> dict[str, str]:
    """The timeline legend, label -> colour: each GPU lane drawn, then one entry per idle cause, which
    names both what it colours (the host calls of that category, the GPU idle in them) when both are
    drawn: a colour is one cause and one legend entry, never two entries of one colour."""
    entries = {lane: LANE_COLORS[lane] for lane in LANE_COLORS
               if any(spans for device in devices for name, spans in device.gpu_lanes() if name == lane)}
    shaded = {cause for device in devices for _, _, cause in device.gaps}  # every cause drawn gets an entry, none other
    calls = {HOST_CAUSE[cat] for device in devices for _, _, cat in device.host if cat in HOST_CAUSE}
    host_label = {cause: for_vendor(HOST_LABELS[cat], vendor) for cat, cause in HOST_CAUSE.items()}
    for cause, color in CAUSE_COLORS.items():
        idle = f"idle: {cause_label(cause, vendor)}"
        if cause in calls and cause in shaded:
            entries[f"{host_label[cause]} · {idle}"] = color
        elif cause in calls:
            entries[host_label[cause]] = color
        elif cause in shaded:
            entries[idle] = color
    return entries


@_memo
def timeline(tl: Timeline | dict | None, vendor: str | None = None) -> list[tuple[str, str]]:
    """Per window (median step, longest step): for each device a GPU lane (kernels,
    collectives, copies, graph replays) over its idle gaps, each in its cause's colour (the idle
    chart's), and under it the host API calls of its process by category, a call in the colour of
    the cause it is. Times from the window's start, in µs, ms or s by its length."""
    tl = load(Timeline, tl)
    if not tl:
        return []
    out = []
    for k, w in enumerate(tl.windows):
        devs = w.devices
        if not devs:
            continue
        t0, span = w.start, max(1, w.end - w.start)
        scale, unit = _time_unit(span)
        yticks = []
        for i, device in enumerate(devs):
            y = (len(devs) - 1 - i) * 2.2
            yticks += [(y + 1.45, _label(device.id, 26)), (y + 0.4, "host")]
        more = f" (+{w.more_devices} more devices)" if w.more_devices else ""
        chart = Chart(f"Timeline: {w.label}{more}: GPU lanes over idle gaps by cause, host calls below",
                      (0, span / scale), (-0.2, (len(devs) - 1) * 2.2 + 2.0), 24 + 48 * len(devs),
                      f"{unit} from the start of the span shown ({w.label})", yticks=yticks)
        for i, device in enumerate(devs):
            _device_lanes(chart, device, (len(devs) - 1 - i) * 2.2, t0, span)
        for label, color in timeline_legend_entries(devs, vendor).items():
            chart.patch_entry(label, color)
        out.append((f"timeline-{k}", _page_svg(chart)))
    return out


@_memo
def serving_load(points: tuple[LoadPoint, ...] | list[dict]) -> str | None:
    """Running and waiting requests over time (stats lines), KV usage on a second axis. Only what the
    stats lines state is drawn: a queue they do not report is not drawn as an empty one. The title names
    what is drawn, not what it would mean."""
    pts = [p for p in load_all(LoadPoint, points) if p.running is not None]
    if len(pts) < 2:
        return None
    t = [p.t for p in pts]
    fig, ax = figure(PLOT, 2.6)
    ax.plot(t, [p.running for p in pts], color=NEUTRAL[0], label="running")
    drawn = ["running"]
    if any(p.waiting is not None for p in pts):
        ax.plot(t, [p.waiting if p.waiting is not None else float("nan") for p in pts], color=NEUTRAL[2], linestyle="--",
                label="waiting")
        drawn.append("waiting")
    ax.set_xlabel("seconds since the first stats line")
    ax.set_ylabel("requests")
    kv = [p.kv_usage_pct for p in pts]
    twins = []
    if any(v is not None for v in kv):
        ax2 = ax.twinx()
        ax2.spines["right"].set_visible(True)
        ax2.plot(t, [v if v is not None else float("nan") for v in kv], color=NEUTRAL[1], linestyle=":",
                 label="KV cache % (right axis)")
        ax2.set_ylim(0, 105)
        ax2.set_ylabel("KV cache %")
        twins.append(ax2)
    kv_words = ", KV cache usage (% of the pool, right axis)" if twins else ""
    _title(ax, f"{' and '.join(drawn).capitalize()} requests over time{kv_words}, from {len(pts)} engine stats lines")
    _legend_beside(ax, *twins)  # one legend beside the plot, over none of its lines
    return _svg(fig)


SWEEP = "benchmark sweep"  # the start of a TpotFit source whose x is the benchmark's max concurrency (analyzers/serving.py)


@_memo
def tpot_vs_batch(fit: TpotFit | dict | None, budget: float | None, client_mean_ms: float | None = None) -> str | None:
    """TPOT against the batch with the least-squares line (when it is a model) and the budget; the title
    and axes say what the points are: the benchmark's mean TPOT at each max concurrency, or the engine
    stats lines' time per token (running / generation throughput) at each running batch, beside the
    benchmark's mean TPOT (``client_mean_ms``) when the points are the engine's: what users saw, drawn
    where the engine's counters may say something else (serving_checks)."""
    fit = load(TpotFit, fit)
    if not fit or not fit.series:
        return None
    xs = [x for x, _ in fit.series]
    ys = [y for _, y in fit.series]
    sweep = str(fit.source).startswith(SWEEP)
    fig, ax = figure(PLOT, 2.6)
    what = "mean TPOT, benchmark" if sweep else "TPOT = running / generation throughput, stats line"
    ax.scatter(xs, ys, s=10, color=NEUTRAL[0], label=f"measured ({what})")
    line_x = [0, max(xs) * 1.05]
    drawn = []
    if fit.model:  # a rejected fit (negative slope, low r², few points) is not drawn as a model
        ax.plot(line_x, [fit.a_ms + fit.b_ms_per_seq * x for x in line_x], color=NEUTRAL[1],
                label=f"fit: {fit.a_ms:.2f} + {fit.b_ms_per_seq:.3f} x B ms (r² {fit.r2:.2f})")
        drawn.append("its least-squares line")
    if budget:
        ax.axhline(budget, color=NEUTRAL[2], linestyle="--", label=f"budget {budget:g} ms")
        drawn.append(f"the {budget:g} ms budget")
    if client_mean_ms and not sweep:
        ax.axhline(client_mean_ms, color=NEUTRAL[0], linestyle="-.", label=f"benchmark mean TPOT {ms(client_mean_ms)}")
        drawn.append(f"the benchmark's mean TPOT ({ms(client_mean_ms)})")
    batch = "max concurrency (requests in flight)" if sweep else "running sequences (batch)"
    ax.set_xlabel(batch)
    ax.set_ylabel("TPOT (ms)")
    title = (f"Mean TPOT at each max concurrency ({len(xs)} benchmark runs)" if sweep
             else f"TPOT from the engine's counters (running / generation throughput, {len(xs)} stats lines) "
                  "against the running batch")
    _title(ax, title + (",\nwith " + " and ".join(drawn) if drawn else ""))
    _legend_beside(ax)
    return _svg(fig)


TPOT_BUDGETS = ("tpot_p95_ms", "tpot_p99_ms", "tpot_p90_ms")  # the --slo budget the TPOT chart draws, first set


def _client_mean_tpot(serving) -> float | None:
    """The benchmark's (client) mean TPOT, ms, or None."""
    tpot = serving.latency.client.get("tpot")
    return tpot.mean if tpot else None


def serving_charts(analysis, store=None, record: AnalysisRecord | None = None) -> list[tuple[str, str]]:
    """The serving section's charts (``record``: the analysis's record when the caller read it already)."""
    record = record or read_analysis(analysis.data)
    if not record.serving:
        return []
    budget = next((record.slo[name] for name in TPOT_BUDGETS if record.slo.get(name)), None)
    series = load(AnalysisSeries, analysis.series or {})
    charts = [("serving_load", serving_load(series.serving.stats if series.serving else (), store=store)),
              ("tpot_fit", tpot_vs_batch(record.serving.tpot_fit, budget, _client_mean_tpot(record.serving), store=store))]
    return [(k, v) for k, v in charts if v]


def _idle_worth_a_picture(devices: tuple[Device, ...]) -> bool:
    """Idle time is drawn by cause where it is at least 5% of some device's window."""
    return any(100.0 * d.gaps.total_ns / (d.window_ns or 1) >= 5 for d in devices)


def all_charts(analysis, store=None, record: AnalysisRecord | None = None) -> list[tuple[str, str]]:
    """The report's charts, each kept in ``store`` (the analysis cache; None: drawn every time);
    ``record`` is the analysis's record when the caller read it already."""
    record = record or read_analysis(analysis.data)
    series = load(AnalysisSeries, analysis.series or {})
    window = (record.window.duration_ns if record.window else None) or 1
    vendor, devices = record.capture_kind.vendor, record.devices
    charts = [
        *timeline(series.timeline, vendor, store=store),
        ("busy", busy_over_time(series.busy, window, store=store)),
        ("accounting", window_accounting(devices, store=store)),
        ("idle", idle_by_cause(devices, vendor, store=store) if _idle_worth_a_picture(devices) else None),
        ("steps", step_durations(series.steps, store=store)),
        ("collectives", collective_share(devices, store=store)),
        # the top-kernels table below says it all: no chart repeating it
        ("hot_frames", hot_frames(record.hot_frames, store=store)),
    ]
    return [(k, v) for k, v in charts if v]


def step_distributions(before: dict[str, list[int]], after: dict[str, list[int]], before_label: str = "before",
                       after_label: str = "after") -> str | None:
    """Step durations before and after, per matched rank, as one picture: a box per side and
    rank with every step drawn as a point (up to 8 ranks; more are pooled into one pair)."""
    ranks = [r for r in before if r in after and before[r] and after[r]]
    if not ranks:
        return None
    if len(ranks) > 8:
        before = {"all ranks": [v for r in ranks for v in before[r]]}
        after = {"all ranks": [v for r in ranks for v in after[r]]}
        ranks = ["all ranks"]
    fig, ax = figure(8, 0.9 + 0.55 * 2 * len(ranks))
    data, labels, colors = [], [], []
    for r in ranks:
        for side, vals, color in ((before_label, before[r], "#8d99ae"), (after_label, after[r], "#2a9d8f")):
            data.append([v / 1e6 for v in vals])
            labels.append(_label(f"{r} {side}", 40))
            colors.append(color)
    pos = list(range(len(data), 0, -1))
    box = ax.boxplot(data, positions=pos, orientation="horizontal", widths=0.6, patch_artist=True, showfliers=False)
    for patch, color in zip(box["boxes"], colors):
        patch.set_facecolor(color)
        patch.set_alpha(0.55)
    for y, vals, color in zip(pos, data, colors):
        ax.scatter(vals, [y] * len(vals), s=6, color=color, alpha=0.8, zorder=3)
    ax.set_yticks(pos)
    ax.set_yticklabels(labels)
    ax.set_xlabel("step duration (ms)")
    _title(ax, "Step durations, before and after (every measured step)")
    return _svg(fig)
