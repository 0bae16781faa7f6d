"""Charts that show what the verdict says (issue 38 item 4; new-user trial 73cc2a3 items 44-53).

The step histogram draws the tail the headline names; a chart's title and its axis agree on the
span and unit; a cause has one colour on the whole page (timeline, idle chart, legends); the
accounting bar and its table list the findings in one order; no legend covers plotted data; the
trend charts explain their marks; capture advice wraps, only its commands in code; the efficiency
section names the device the header names; an AMD capture's idle causes are named in HIP's words."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from conftest import BUNDLES, real

from tracetriage.reports import charts, palette
from tracetriage.reports.html import breakable, capture_pieces, render_html
from tracetriage.reports.view import report_view

ROOT = Path(__file__).resolve().parents[1]


def _drawn_figures(monkeypatch):
    """Every figure the charts draw, kept open for inspection (the SVG is still written)."""
    from tracetriage.reports import roofline

    kept = []
    real_svg = charts._svg

    def keep(fig):
        fig.draw_without_rendering()
        kept.append((fig, [(legend, legend.get_window_extent().frozen()) for legend in _legends(fig)],
                     [ax.get_window_extent().frozen() for ax in fig.axes if ax.get_visible()]))  # before savefig moves them
        return real_svg(fig)

    monkeypatch.setattr(charts, "_svg", keep)
    monkeypatch.setattr(roofline, "_svg", keep)
    return kept


def _bundle(name, analyses):
    """The analysis of a committed bundle (the serving bundles are not in the session's set)."""
    if name in analyses:
        return analyses[name]
    from tracetriage.api import analyze

    return analyze([BUNDLES / name])


def _legends(fig):
    return [legend for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes)] if legend is not None]


def test_step_histogram_draws_the_tail_the_headline_names(analyses):
    a = analyses["decode_rare_prefill"]
    durations = max(a.series["steps"].values(), key=lambda v: len(v["durations"]))["durations"]
    longest = f"{max(durations) / 1e6:.2f} ms"
    assert longest in a.headline  # the headline names the longest step ...
    svg = charts.step_durations(a.series["steps"])
    assert f"longest {longest}" in svg  # ... and the chart marks it
    assert "count axis logarithmic" in svg  # the 3 long steps beside 397 short ones are drawn, not flattened
    # a spread without a rare tail keeps a linear count axis and no extra mark
    even = {"1": {"durations": [4_000_000 + 10_000 * (i % 20) for i in range(200)]}}
    plain = charts.step_durations(even)
    assert "logarithmic" not in plain and "longest" not in plain
    assert "(tail)" not in plain  # p99 4.19 ms beside a p50 of 4.10 ms is no tail (trial 73cc2a3, item 40)
    tailed = {"1": {"durations": [4_000_000] * 190 + [8_000_000] * 10}}  # p99 8 ms at 2x the p50
    assert "p99 8.00 ms (tail)" in charts.step_durations(tailed)


def test_timeline_title_and_axis_name_one_span(analyses):
    """graph_capture_phase's window is 152.3 µs: the timeline says 'the whole window', in µs (it said
    'first 10 ms of the window' over a 0-0.15 ms axis); the busy chart's bins are in µs too."""
    for name, a in analyses.items():
        timeline = a.series.get("timeline")
        if not timeline:
            continue
        for window in timeline["windows"]:
            span = window["end"] - window["start"]
            if window["label"].startswith("first 10 ms"):
                assert span == 10_000_000, name
    a = analyses["graph_capture_phase"]
    window = a.data["window"]["duration_ns"]
    assert window < 1_000_000
    (_, svg), *_ = charts.timeline(a.series["timeline"])
    assert "the whole window" in svg and "µs from the start of the span shown" in svg
    busy = charts.busy_over_time(a.series["busy"], window)
    assert "µs from the start of the window" in busy and f"bins of {window / 1e3 / 120:.3g} µs" in busy


def _fills(svg: str) -> list[str]:
    return [m.group(1).lower() for m in re.finditer(r"fill: (#[0-9a-fA-F]{6})", svg)]


def test_a_cause_has_one_colour_on_the_page(analyses):
    """The timeline's idle gaps, its host calls and the idle chart draw a cause in the palette's colour,
    opaque (the timeline's gaps were drawn at 18% and its legend at 30%: another colour)."""
    assert set(charts.HOST_COLORS.values()) <= set(palette.CAUSE_COLORS.values())
    for name in ("graph_capture_phase", "eager_decode_pyspy", "host_starved"):
        a = analyses[name]
        shaded = {cause for w in a.series["timeline"]["windows"] for d in w["devices"] for _, _, cause in d["gaps"]}
        svgs = [svg for _, svg in charts.timeline(a.series["timeline"])]
        idle = charts.idle_by_cause(a.data["devices"])
        for cause in shaded:
            color = palette.CAUSE_COLORS[cause]
            assert any(color in _fills(svg) for svg in svgs), (name, cause)
            if a.data["devices"][0]["gaps"]["by_cause"][cause]:
                assert color in _fills(idle), (name, cause)
        for svg in svgs:
            assert "opacity" not in svg, name  # no tint: the colour drawn is the colour in the legend


def test_accounting_bar_and_table_list_findings_in_one_order(analyses):
    a = analyses["eager_decode_pyspy"]
    table = [column.id for column in report_view(a).claim_columns]
    svg = charts.window_accounting(a.data["devices"])
    assert sorted(table, key=svg.index) == table
    # a claims dict whose order is not the size order: both follow the size order
    devices = [{"id": "GPU0", "accounting": {"claims_pct": {"small": 2.0, "large": 40.0}, "slices_pct": {}}}]
    assert list(palette.claim_columns(devices)) == ["large", "small"]
    svg = charts.window_accounting(devices)
    assert svg.index("large") < svg.index("small")


@pytest.mark.parametrize("name", ["serving_at_capacity", "eager_decode_pyspy", "decode_rare_prefill", "tp8_cross_island"])
def test_no_legend_covers_a_plot(name, analyses, monkeypatch):
    """Every legend of every chart of the page lies outside every plot area of its figure (the serving
    chart's two legend boxes sat on its waiting and KV lines)."""
    kept = _drawn_figures(monkeypatch)
    page = render_html(_bundle(name, analyses))
    # the charts written from their data (reports/svgchart.py): the legend's box and the plot's rectangle
    written = re.findall(r'<rect class="plot" x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)".*?'
                         r'<g class="legend" data-box="([\d. ]+)"', page, re.S)
    assert kept or written
    for x, y, w, h, box in written:
        x0, y0, x1, y1 = map(float, box.split())
        assert y0 >= float(y) + float(h) and x0 >= float(x), (name, box)  # under the plot, no part of it over it
    for fig, legends, plots in kept:
        for legend, box in legends:
            for plot in plots:
                wide = max(0, min(box.x1, plot.x1) - max(box.x0, plot.x0))
                high = max(0, min(box.y1, plot.y1) - max(box.y0, plot.y0))
                assert wide * high == 0, (name, [t.get_text() for t in legend.get_texts()])


def test_trend_charts_explain_their_marks_and_count_in_whole_numbers():
    from tracetriage.reports.trend import trend_charts

    cases = [{"name": f"night-{i}", "label": f"night-{i}", "time": None} for i in range(8)]
    group = {"cases": cases, "series": {
        "step_p50_ms": {"unit": "ms", "values": [1.0, 1.0, 3.0, 1.0, 1.0, 2.0, 2.0, 2.0]},
        "syncs_per_step": {"unit": "calls/step", "values": [1] * 8}}}
    changes = [{"metric": "step_p50_ms", "first_bad": "night-2", "direction": "regressed", "kind": "outlier"},
               {"metric": "step_p50_ms", "first_bad": "night-5", "direction": "regressed", "kind": "level_shift"}]
    svg = trend_charts(group, changes, ("step_p50_ms", "syncs_per_step"), [None] * 8)
    assert "outlier, regressed" in svg and "level shift, regressed" in svg and "a capture" in svg
    assert "improved" not in svg  # only the marks drawn are explained
    ticks = re.findall(r"<!-- ([0-9.]+) -->", svg)
    assert "1.050" not in ticks and "0.950" not in ticks  # a constant count of 1 is not drawn on a 0.95-1.05 axis


def test_capture_advice_is_prose_with_its_commands_in_code():
    """Every capture text of the catalog, cut as the HTML shows it: joined back it is the text; each
    command starts at its program and carries no English word; each program followed by an option
    is in a command piece."""
    hints = tomllib.loads((ROOT / "analyzers" / "capture_hints.toml").read_text())
    texts = [" ".join(str(value).split()) for table in hints.values() for value in table.values()]
    assert len(texts) > 10
    for text in texts:
        pieces = capture_pieces(text)
        assert "".join(piece for piece, _ in pieces) == text
        commands = [piece for piece, is_command in pieces if is_command]
        for command in commands:
            assert not re.search(r"\s(with|the|records|and|so)\s", command), (command, text)
            assert command.count("(") == command.count(")"), command
        for m in re.finditer(r"\b(nsys|rocprofv3|py-spy) \w+ --", text):
            assert any(command.startswith(m.group(1)) for command in commands), text


def test_capture_advice_wraps_in_the_page(analyses):
    a = analyses["decode_rare_prefill"]
    page = render_html(a)
    style = page[:page.index("</style>")]
    assert "white-space: pre" not in style and "overflow-x: auto; word-break" not in style
    hint = next(x["capture_hint"] for x in a.data["abstentions"] if "nsys profile" in x["capture_hint"])
    assert '<code class="cmd">nsys profile --cuda-graph-trace=node</code> records each replayed kernel' in page
    assert f'<code class="cmd">{hint}</code>' not in page


def test_names_wrap_at_their_parts_only():
    assert breakable("samples/bundles/eager_decode_pyspy/pyspy.txt") == (
        "samples/<wbr>bundles/<wbr>eager_decode_pyspy/<wbr>pyspy.txt")
    assert "&lt;script&gt;" in breakable("a/<script>")  # escaped first
    assert "<wbr>" not in breakable("trace.sqlite")


@pytest.mark.parametrize("name", ["decode_rare_prefill", "graph_decode", "memset_only", "healthy"])
def test_efficiency_section_names_the_device_the_header_names(name, analyses):
    a = analyses[name]
    eff = a.data.get("efficiency")
    if not eff:
        pytest.skip(f"{name}: no efficiency block")
    models = {d["name"] for d in a.data["devices"]}
    assert eff["device_name"] in models
    page = render_html(a)
    assert "(no name)" not in page and "is not in the device table" not in page
    assert f"Device: {eff['device']['model']}" in page


def test_idle_causes_named_in_the_vendors_words(analyses):
    a = _bundle("graph_decode_rocpd", analyses)
    assert a.data["capture_kind"]["vendor"] == "rocm"
    assert a.data["devices"][0]["gaps"]["by_cause"]["other_cuda"]  # the JSON key stays other_cuda
    (device,) = report_view(a).devices
    assert "other_hip" in device.idle_by_cause and "other_cuda" not in device.idle_by_cause  # the Measurements table
    vendor = a.data["capture_kind"]["vendor"]
    drawn = [svg for _, svg in charts.timeline(a.series["timeline"], vendor)] + [charts.idle_by_cause(a.data["devices"], vendor)]
    for svg in drawn:
        assert "CUDA" not in svg  # legends: "in another HIP call", "host: other HIP calls"
    assert "in another HIP call" in charts.idle_by_cause(a.data["devices"], vendor)
    nvidia = render_html(analyses["graph_capture_phase"])
    assert "in another CUDA call" in nvidia


def test_roofline_legend_draws_each_roof_and_names_an_op_once(monkeypatch):
    from tracetriage.reports.roofline import roofline_chart

    device = {"model": "X", "bandwidth_gbps": 3350.0, "peak_tflops": {"bf16": 989.4, "fp32": 67.0}}
    ops = [{"name": "aten::mm", "class": "gemm", "intensity": 1600.0 + i, "achieved_tflops": 247.0} for i in range(3)]
    eff = {"device": device, "classes": [{"class": "gemm", "intensity": 1601.0, "achieved_tflops": 247.3,
                                          "pct_of_roofline": 25.0}], "top_ops": ops}
    kept = _drawn_figures(monkeypatch)
    svg = roofline_chart(eff)
    assert svg.count("mm ×3") == 1 and ">mm<" not in svg
    (fig, legends, _), = kept
    (legend, _), = legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert any(label.startswith("bandwidth 3,350 GB/s") for label in labels)
    for handle, label in zip(legend.legend_handles, labels):
        if "GB/s" in label or "TFLOP/s" in label:
            assert handle.get_linestyle() not in ("None", " ", ""), label  # a line sample, not an empty entry


def test_charts_are_drawn_at_one_scale():
    """Charts show at their own size (never stretched to the column), so a 9 pt label is 9 pt on every chart."""
    page = (ROOT / "reports" / "templates" / "report.html.j2").read_text()
    assert "figure svg { max-width: 100%; height: auto;" in page and "figure svg { width: 100%" not in page


def test_rocm_real_capture_page_keeps_hip_words():
    path = real("kineto", "tracelens_mi300_qwen1.5-0.5b_chat.json.gz")
    from tracetriage.api import analyze

    page = render_html(analyze([path]))
    assert "no CUDA call" not in page and "another CUDA call" not in page


@pytest.mark.parametrize("name", ["decode_rare_prefill", "eager_decode_pyspy", "serving_at_capacity", "tp8_cross_island",
                                  "dp2_late_rank"])
def test_nothing_overflows_its_box_at_1400_px(name, analyses, tmp_path):
    """In Chromium at 1400 px: no table, paragraph or chart is wider than its box (a table clipped in its
    scroll box, a Capture line cut mid-word), and each chart shows at its own width or less."""
    from conftest import BROWSER_SKIP

    pw = pytest.importorskip("playwright.sync_api", reason=f"{BROWSER_SKIP} (playwright not installed)")
    exe = next((c for c in ("/usr/bin/chromium", "/usr/bin/chromium-browser") if Path(c).exists()), None)
    if not exe:
        pytest.skip(BROWSER_SKIP)
    path = tmp_path / f"{name}.html"
    path.write_text(render_html(_bundle(name, analyses)), encoding="utf-8")
    with pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
        wide = page.evaluate("""() => [...document.querySelectorAll('table, .scroll, p, div, dd, li')]
            .filter(el => el.scrollWidth > el.clientWidth + 1).map(el => el.tagName + ': ' + el.innerText.slice(0, 80))""")
        scaled = page.evaluate("""() => [...document.querySelectorAll('figure.chart svg')]
            .filter(svg => svg.getBoundingClientRect().width > svg.width.baseVal.value + 1).length""")
        browser.close()
    assert wide == [] and scaled == 0, wide


def test_an_inconclusive_compare_folds_its_unjudged_rows(tmp_path):
    """Unrelated captures: the verdict says why, and the rows of n/a, not judged, are folded away (trial #54);
    a comparable pair shows its rows open."""
    from conftest import run_cli

    folded = tmp_path / "unrelated.html"
    assert run_cli("compare", BUNDLES / "eager_decode", BUNDLES / "serving_at_capacity", "-o", folded).returncode == 0
    page = folded.read_text()
    inside = page[page.index('<details id="not-judged">'):page.index("</details>")]
    assert "not judged" in inside and "not judged" not in page[page.index("</details>"):]
    opened = tmp_path / "eager_graph.html"
    assert run_cli("compare", BUNDLES / "eager_decode", BUNDLES / "graph_decode", "-o", opened).returncode == 0
    assert "<details" not in opened.read_text()
