"""The HTML report's timeline lanes draw dependency waits in their own colour with a legend entry
(analyzers/lanes.py: a gap's cause by the timeline's rule, ``dependency`` included; reports/charts.py draws and
names every cause it shades).

The truth is samples/gen_dependency.py's: the hidden wait of each generated step, (from, to) ns."""

import html as htmlmod
import random
import sys

import pytest
from conftest import ROOT

from tracetriage import analyze, open_case
from tracetriage.contract import load
from tracetriage.records.series import Timeline
from tracetriage.reports import charts, palette, render

sys.path.insert(0, str(ROOT / "samples"))
import gen_dependency  # noqa: E402
import generate  # noqa: E402

EVIL = "<script>alert('dep')</script> {{ 7*7 }} & <b>"
LEGEND = f"idle: {palette.CAUSE_LABELS['dependency']}"
COLOUR = palette.CAUSE_COLORS["dependency"]


def _capture(folder, wait_us, evil=False):
    """The generator's capture and its hidden waits; ``evil``: its kernel and step names are markup."""
    ranks, _extra, waits = gen_dependency.scenario_dependency_wait(random.Random(f"lanes:{wait_us}"), wait_us)
    if evil:
        rank = ranks[0]
        rank.kernels = [(s, e, EVIL if i % 2 else name, c, coll) for i, (s, e, name, c, coll) in enumerate(rank.kernels)]
        rank.nvtx = [(s, e, f"step {EVIL}") for s, e, _ in rank.nvtx]
    folder.mkdir(parents=True)
    generate.write_nsys(folder / "trace.sqlite", ranks, "dependency_lanes")
    return analyze(open_case([folder])), waits


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    out = tmp_path_factory.mktemp("dependency_lanes")
    return {"wait": _capture(out / "wait", 10_000), "none": _capture(out / "none", 0),
            "evil": _capture(out / "evil", 10_000, evil=True)}


def _drawn(analysis):
    timeline = load(Timeline, analysis.series["timeline"])
    return [window for window in timeline.windows if window.devices]


@pytest.mark.parametrize("name", ["wait", "evil"])
def test_each_generated_wait_in_a_drawn_step_is_a_dependency_gap(captures, name):
    analysis, waits = captures[name]
    windows = _drawn(analysis)
    assert windows
    for window in windows:
        inside = [(s, e) for s, e in waits if window.start <= s and e <= window.end]
        assert len(inside) == 1  # one wait a generated step
        (wait_from, wait_to), = inside
        gaps = [(s, e) for s, e, cause in window.devices[0].gaps if cause == "dependency"]
        # the gap the wait ends: drawn as a dependency wait, ending where the queued kernel started
        assert len(gaps) == 1 and gaps[0][1] == wait_to and gaps[0][0] <= wait_from
        # no host cause holds the wait's time
        assert not any(s < wait_to and e > wait_from for s, e, cause in window.devices[0].gaps if cause != "dependency")


def test_the_svg_draws_the_dependency_lane_in_its_colour_with_its_legend_entry(captures):
    analysis, _ = captures["wait"]
    svgs = charts.timeline(analysis.series["timeline"])
    assert svgs
    for (_name, svg), window in zip(svgs, _drawn(analysis)):
        assert LEGEND in htmlmod.unescape(svg)
        assert f"fill: {COLOUR}" in svg  # the gap band and the legend swatch
        assert charts.timeline_legend_entries(window.devices, None)[LEGEND] == COLOUR
    assert COLOUR not in {colour for key, colour in palette.CAUSE_COLORS.items() if key != "dependency"}


def test_without_waits_no_dependency_lane_nor_legend(captures):
    analysis, waits = captures["none"]
    assert not waits
    for window in _drawn(analysis):
        assert not any(cause == "dependency" for device in window.devices for _, _, cause in device.gaps)
    for _name, svg in charts.timeline(analysis.series["timeline"]):
        assert LEGEND not in htmlmod.unescape(svg) and f"fill: {COLOUR}" not in svg


def test_the_report_keeps_trace_text_escaped_beside_the_dependency_lane(captures):
    analysis, _ = captures["evil"]
    page = render(analysis, "html")
    assert "<script" not in page.lower() and "<b>" not in page
    assert "&lt;script&gt;alert(" in page and "{{ 7*7 }}" in page  # shown as text, not run or evaluated
    start = page.index('id="chart-timeline-0"')
    timeline = page[start:page.index("</figure>", start)]
    assert f"fill: {COLOUR}" in timeline and LEGEND in htmlmod.unescape(timeline)


def test_real_torchrec_median_step_draws_its_waits_as_dependency():
    """HTA's 16-rank TorchRec rank 0: in the median step drawn (216 ms) the GPU's waits with its work queued, measured
    here from the raw JSON (test_real_distributed._dependency_ns over the step), are most of the step, and the lanes
    draw at least that much as dependency gaps (a gap is drawn whole in the cause that holds most of it)."""
    from conftest import real
    from test_real_distributed import _dependency_ns, _events

    path = real("kineto", "hta_torchrec_16rank_train_rank0.json.gz")
    analysis = analyze(open_case([path]))
    window = _drawn(analysis)[0]
    assert window.label.startswith("median step")
    waited = _dependency_ns(_events(path), window.start, window.end)
    gaps = window.devices[0].gaps
    drawn = sum(e - s for s, e, cause in gaps if cause == "dependency")
    idle = sum(e - s for s, e, _ in gaps)
    assert waited > 0.5 * (window.end - window.start) and waited <= drawn <= idle
    svg = dict(charts.timeline(analysis.series["timeline"]))["timeline-0"]
    assert f"fill: {COLOUR}" in svg and LEGEND in htmlmod.unescape(svg)
