"""The report's charts written from their data (reports/svgchart.py): well-formed SVG that escapes
every text a capture names, ticks that cover the axis, marks clipped to the plot, the legend under it,
and one width that fits an 800 px page."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from tracetriage.reports import charts, palette, svgchart

NS = "{http://www.w3.org/2000/svg}"


def _parsed(svg: str) -> ET.Element:
    root = ET.fromstring(svg)  # well-formed XML, or this raises
    assert root.tag == f"{NS}svg" and int(root.get("width")) <= 780
    return root


def _texts(root: ET.Element) -> list[str]:
    return [el.text or "" for el in root.iter(f"{NS}text")]


def test_capture_text_is_escaped():
    hostile = '<script>alert("x")</script> & GPU0'
    by_cause = {cause: 0 for cause in palette.CAUSE_COLORS} | {"sync": 400, "launch": 200}
    devices = [{"id": hostile, "window_ns": 1000, "gaps": {"total_ns": 600, "by_cause": by_cause},
                "accounting": {"claims_pct": {"host_sync_per_step": 40.0}, "slices_pct": {"compute": 40.0},
                               "unclaimed_pct": {"compute": 20.0}}}]
    for svg in (charts.idle_by_cause(devices), charts.window_accounting(devices)):
        assert "<script>" not in svg and "&lt;script&gt;" in svg
        root = _parsed(svg)
        assert any(text.startswith('<script>alert("x")') for text in _texts(root))  # the label reads as it was


def test_nice_ticks_cover_the_axis():
    for lo, hi in [(0, 100), (0, 105), (0, 0.153), (16.2, 22.4), (0, 7.3), (0.5, 800.0), (3, 3)]:
        ticks = svgchart.nice_ticks(lo, hi)
        assert ticks == sorted(ticks) and 2 <= len(ticks) <= 12, (lo, hi, ticks)
        top = hi if hi > lo else lo + 1  # an empty range is drawn one unit tall
        assert all(lo - 1e-9 <= t <= top + 1e-9 for t in ticks)
        step = ticks[1] - ticks[0]
        assert ticks[0] - lo < step + 1e-9 and top - ticks[-1] < step + 1e-9
    assert all(float(t).is_integer() for t in svgchart.nice_ticks(0, 8.4, 5, integer=True))


def test_marks_are_clipped_to_the_plot_and_the_legend_is_under_it():
    chart = svgchart.Chart("t", (0, 10), (0, 1), 40, "x")
    chart.rects([(-5, 8), (9, 5)], 0, 1, "#123456")  # past both ends of the axis
    chart.patch_entry("a lane", "#123456")
    svg = chart.svg().replace(' id="', ' id="c9-').replace("url(#", "url(#c9-")
    root = _parsed(svg)
    clip = root.find(f"{NS}defs/{NS}clipPath")
    group = next(el for el in root.iter(f"{NS}g") if el.get("clip-path"))
    assert group.get("clip-path") == f"url(#{clip.get('id')})" and group.find(f"{NS}path") is not None
    plot = root.find(f"{NS}rect[@class='plot']")
    legend = next(el for el in root.iter(f"{NS}g") if el.get("class") == "legend")
    assert float(legend.get("data-box").split()[1]) >= float(plot.get("y")) + float(plot.get("height"))


def test_lanes_that_touch_in_pixels_are_one_rectangle():
    chart = svgchart.Chart("t", (0, 1000), (0, 1), 40, "x")
    chart.rects([(k, 1.0) for k in range(500)] + [(800, 10)], 0, 1, "#123456")  # 500 abutting kernels, then one apart
    assert chart.marks[0].count("M") == 2


def test_every_chart_of_a_bundle_is_well_formed(analyses):
    for name in ("tp8_cross_island", "eager_decode_pyspy", "decode_rare_prefill", "graph_capture_phase"):
        drawn = charts.all_charts(analyses[name])
        assert drawn, name
        for key, svg in drawn:
            root = _parsed(svg)
            assert _texts(root), (name, key)
            assert not re.search(r"\bnan\b|\binf\b", svg), (name, key)  # no coordinate lost to a NaN
