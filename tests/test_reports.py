"""Reports: HTML in a real browser, escaping of untrusted trace text, Markdown."""

import contextlib
import os
import shutil
import sys

import pytest
from conftest import BROWSER_SKIP, ROOT, bundle_names

from tracetriage import analyze, open_case
from tracetriage.reports import render

ARTIFACTS = ROOT / "test-artifacts"
EVIL_KERNEL = "</td><script>alert('k')</script>\"'{{ 7*7 }}"
EVIL_NVTX = "decode_step <script>alert(\"n\")</script> {{ 6*7 }} <img src=http://example.com/x.png>"


@pytest.fixture(scope="module")
def evil_analysis(tmp_path_factory):
    sys.path.insert(0, str(ROOT / "samples"))
    import random

    import generate

    ranks, extra = generate.scenario_eager_decode(random.Random(1), nvtx=True)
    r = ranks[0]
    r.kernels = [(s, e, EVIL_KERNEL if i % 3 == 0 else n, c, col) for i, (s, e, n, c, col) in enumerate(r.kernels)]
    r.nvtx = [(s, e, EVIL_NVTX) for s, e, _ in r.nvtx]
    out = tmp_path_factory.mktemp("evil")
    generate.write_nsys(out / "trace.sqlite", ranks, "evil")
    return analyze(open_case([out / "trace.sqlite"]))


def test_html_escapes_trace_text(evil_analysis):
    html = render(evil_analysis, "html")
    assert "<script" not in html.lower()
    assert "<img" not in html.lower()
    assert "&lt;script&gt;alert(" in html
    assert "{{ 7*7 }}" in html and "{{ 6*7 }}" in html  # not evaluated by the template
    assert "&lt;img src=http://example.com/x.png&gt;" in html  # shown as text, never fetched
    assert 'src="http' not in html and "src=http" not in html.replace("&lt;img src=http", "")


def test_markdown_escapes_trace_text(evil_analysis):
    md = render(evil_analysis, "md")
    import re

    assert not re.search(r"(?<!\\)<", md), "an unescaped < reached the Markdown"
    assert r"\<script\>" in md and r"\<img" in md
    assert "{{ 7*7 }}" in md.replace("\\", "") and "49" not in md.replace("\\", "").split("Top kernels")[1]


def _chromium():
    """Debian's chromium, else the one `python -m playwright install chromium` downloaded."""
    for c in ("/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if os.path.exists(c):
            return c
    if shutil.which("chromium"):
        return shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            path = p.chromium.executable_path
        return path if path and os.path.exists(path) else None
    except Exception:  # noqa: BLE001 - no playwright, or no browser of its own
        return None


@contextlib.contextmanager
def _browser_page(analysis, tmp_path, **page_options):
    """The analysis's HTML open in headless Chromium; on leaving, the page must have logged no
    error and requested nothing but itself (self-contained, offline)."""
    pw = pytest.importorskip("playwright.sync_api", reason=f"{BROWSER_SKIP} (playwright not installed)")
    exe = _chromium()
    if not exe:
        pytest.skip(BROWSER_SKIP)
    page_path = tmp_path / "r.html"
    page_path.write_text(render(analysis, "html"), encoding="utf-8")
    errors, requests = [], []
    with pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu", "--no-first-run",
                                                                 "--disable-background-networking"])
        page = browser.new_page(**page_options)
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(page_path.as_uri())
        yield page
        browser.close()
    assert errors == [] and requests == [page_path.as_uri()]


@pytest.mark.parametrize("name", bundle_names())
def test_html_in_headless_chromium(name, analyses, tmp_path):
    pw = pytest.importorskip("playwright.sync_api", reason=f"{BROWSER_SKIP} (playwright not installed)")
    exe = _chromium()
    if not exe:
        pytest.skip(BROWSER_SKIP)
    a = analyses[name]
    page_path = tmp_path / f"{name}.html"
    page_path.write_text(render(a, "html"), encoding="utf-8")
    errors, requests = [], []
    with pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(page_path.as_uri())
        page.wait_for_load_state("load")
        assert page.locator("#headline").is_visible()
        assert page.locator("#headline").inner_text().strip() == a.headline
        titles = page.locator(".finding-title")
        assert titles.count() == len(a.findings)
        for i, f in enumerate(a.findings):
            assert titles.nth(i).is_visible()
            assert f["title"] in titles.nth(i).inner_text()
        assert page.locator("figure.chart svg").count() >= 3
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
        browser.close()
    assert errors == []
    assert requests == [page_path.as_uri()], requests


@pytest.mark.parametrize("fmt_name", [
    ("kineto", "tracelens_vllm_decode_full_graph_execution.json.gz"),
    ("rocprof", "rocprofv3_rocpd_v3_ck_batched_gemm_mi300x.db"),
    ("nccl", "sglang_2node_nccl_2.27_warn_socketPollConnect_refused_timestamped_traceback.txt"),
    ("topo", "nvidia-smi_topo_rtx6000ada_4gpu_pcie_node_sys_4nic.txt"),
    ("pyspy", "py-spy_dump_sglang_scheduler_tp0-7_in_pynccl_init_head20_loop.txt"),
])
def test_html_of_real_inputs_in_chromium(fmt_name, tmp_path):
    from conftest import real

    a = analyze(open_case([real(*fmt_name)]))
    with _browser_page(a, tmp_path) as page:
        assert page.locator("#headline").inner_text().strip() == a.headline
        assert page.locator(".finding-title").count() == len(a.findings)


def test_python_api_for_notebooks(tmp_path):
    import json

    from conftest import BUNDLES

    import tracetriage

    a = tracetriage.analyze(BUNDLES / "eager_decode_pyspy", symptom="throughput")
    assert a.headline.startswith("throughput: [launch_bound]") and a.findings[0]["id"] == "launch_bound"
    assert json.loads(a.to_json())["symptom"] == "throughput"
    out = tmp_path / "r.html"
    assert a.to_html(out) == out and out.read_text().startswith("<!DOCTYPE html>")
    assert "<html" in a.to_html()
    ff = a.findings_frame()
    assert list(ff["id"])[:1] == ["launch_bound"] and {"axis", "severity", "impact_pct"} <= set(ff.columns)
    df = a.devices_frame()
    assert len(df) == 1 and df.iloc[0]["claim_launch_bound_pct"] > 0 and "idle_host_pct" in df.columns
    assert "launch_bound" in repr(a) and len(repr(a)) < 300


def test_repr_html_escapes_the_headline(evil_analysis):
    from tracetriage.api import Analysis

    data = dict(evil_analysis.data, headline=EVIL_KERNEL + " headline")
    a = Analysis(data=data, series=evil_analysis.series)
    card = a._repr_html_()
    assert "Verdict:" in card and "<script>" not in card and "&lt;script&gt;" in card


def test_html_has_timeline_unique_ids_and_evidence_links(analyses):
    import re
    from collections import Counter

    html = render(analyses["tp8_cross_island"], "html")
    assert 'id="chart-timeline-0"' in html  # the median step, lane per rank
    ids = Counter(re.findall(r'\bid="([^"]+)"', html))
    dup = [k for k, n in ids.items() if n > 1]
    assert not dup, dup[:5]
    for ref in re.findall(r'url\(#([^)]+)\)', html):  # every clip-path reference resolves on the page
        assert ref in ids
    for f in analyses["tp8_cross_island"].findings:
        block = html.split(f'id="finding-{f["id"]}"', 1)[1].split("</article>", 1)[0]
        assert 'href="#charts"' in block
    timeline = analyses["tp8_cross_island"].series["timeline"]["windows"][0]
    assert len(timeline["devices"]) == 8 and timeline["devices"][0]["collectives"]


def test_step_chart_uses_the_table_percentiles(analyses):
    import numpy as np

    html = render(analyses["prefill_stall"], "html")
    d = analyses["prefill_stall"].series["steps"]
    durs = max(d.values(), key=lambda v: len(v["durations"]))["durations"]
    assert f"p50 {np.percentile(durs, 50) / 1e6:.2f} ms" in html


@pytest.mark.parametrize("name", ["eager_decode.json.gz", "graph_decode.json.gz"])
def test_real_kineto_report_screenshot_with_timeline(name, tmp_path):
    """A real PyTorch-profiler capture (samples/h200, shipped in the repo) rendered in Chromium: the
    timeline lanes are drawn and visible, and the page is saved to test-artifacts/ for review."""
    a = analyze(open_case([ROOT / "samples" / "h200" / name]))
    with _browser_page(a, tmp_path, viewport={"width": 1200, "height": 900}) as page:
        timeline = page.locator("#chart-timeline-0 svg")
        assert timeline.count() == 1 and timeline.is_visible()
        box = timeline.bounding_box()
        assert box["width"] > 600 and box["height"] > 100
        assert page.locator("#headline").inner_text().strip() == a.headline
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"real_kineto_h200_{name.split('.')[0]}.png"), full_page=True)


def test_unclaimed_slices_and_claims_add_up_to_the_window(analyses):
    """Each device's unclaimed_pct is its slices less what the findings took from them: with
    claims_pct it sums to 100, and no slice has more unclaimed than it holds."""
    for name, a in analyses.items():
        for d in a.data["devices"]:
            acc = d["accounting"]
            total = sum(acc["unclaimed_pct"].values()) + sum(acc["claims_pct"].values())
            assert total == pytest.approx(100.0, abs=0.05), (name, d["id"])
            assert all(v <= acc["slices_pct"][k] + 1e-9 for k, v in acc["unclaimed_pct"].items()), (name, d["id"])


def test_the_accounting_bar_never_draws_idle_as_computing():
    """A claim on kernel time (below_roofline) leaves the idle slices unclaimed: the bar draws
    only the unclaimed kernel time as computing (new-user trial: 93.5% busy, 27.7% claimed, and
    'computing' filled the rest of the window)."""
    from tracetriage.reports.charts import _unclaimed_compute

    acc = {"slices_pct": {"compute": 93.357, "copy": 0.126, "idle:short:host": 6.517},
           "claims_pct": {"below_roofline": 27.721},
           "unclaimed_pct": {"compute": 65.636, "copy": 0.126, "idle:short:host": 6.517}}
    assert _unclaimed_compute(acc) == pytest.approx(65.636)
    assert 100.0 - 27.721 - _unclaimed_compute(acc) == pytest.approx(0.126 + 6.517)
