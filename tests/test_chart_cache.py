"""Charts kept in the analysis cache (reports/charts.py ``_memo``): a report made again from
the cache is the same page, drawn without matplotlib; a chart whose data changed is redrawn;
ids stay unique on a page that mixes kept and fresh charts."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from conftest import ROOT

from tracetriage import cache as cache_mod

BUNDLE = ROOT / "samples" / "bundles" / "eager_decode_nvtx"

CHILD = r"""
import json, sys
from tracetriage import Runtime, analyze, cache
runtime = Runtime(cache=cache.Cache(sys.argv[2]) if sys.argv[2] != "-" else None)
html = analyze(sys.argv[1], runtime=runtime).to_html(store=runtime.cache)
print(json.dumps({"matplotlib": "matplotlib" in sys.modules, "html": html}))
"""


SERVING = ROOT / "samples" / "bundles" / "serving_at_capacity"  # its engine-load and TPOT charts are matplotlib's


def _report(cache_dir, bundle=SERVING) -> dict:
    # a fresh interpreter: the test asks whether matplotlib was ever imported
    out = subprocess.run([sys.executable, "-c", CHILD, str(bundle), str(cache_dir)], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def test_a_trace_report_draws_its_charts_without_matplotlib(tmp_path):
    """The timeline, busy, accounting, idle, step and collective charts are written from their data
    (reports/svgchart.py): a trace's page never imports matplotlib, and is the same page from the cache."""
    uncached = _report("-", BUNDLE)
    assert not uncached["matplotlib"] and uncached["html"].count("<svg") >= 4
    assert _report(tmp_path, BUNDLE)["html"] == uncached["html"] == _report(tmp_path, BUNDLE)["html"]


def test_report_from_kept_charts_is_the_same_page_without_matplotlib(tmp_path):
    uncached = _report("-")
    first = _report(tmp_path)
    second = _report(tmp_path)
    assert uncached["matplotlib"] and first["matplotlib"]
    assert not second["matplotlib"]  # every chart came from the cache
    assert "<svg" in second["html"]
    assert first["html"] == uncached["html"] == second["html"]
    assert (tmp_path / "charts").is_dir()
    assert cache_mod.Cache(tmp_path).size() > 0  # kept charts count toward the cache's bound


def _ids(svg: str) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', svg))


def test_kept_chart_takes_a_fresh_prefix_and_changed_data_redraws(tmp_path):
    from tracetriage.reports import charts

    store = cache_mod.Cache(tmp_path)
    steps = {"4242": {"durations": [1_000_000 + 1000 * i for i in range(50)]}}
    drawn = charts.step_durations(steps, store=store)
    kept = charts.step_durations(steps, store=store)
    assert drawn and kept and _ids(drawn) and not (_ids(drawn) & _ids(kept))  # unique on one page
    strip = re.compile(r'(\bid="|url\(#|href="#)c\d+-')
    assert strip.sub(r"\1", drawn) == strip.sub(r"\1", kept)
    other = charts.step_durations({"4242": {"durations": [2_000_000 + 1000 * i for i in range(50)]}}, store=store)
    assert strip.sub(r"\1", other) != strip.sub(r"\1", drawn)
    assert len(list((tmp_path / "charts").iterdir())) == 2


def test_compiled_templates_are_kept_and_evicted(tmp_path):
    """The report template is compiled once per cache (Jinja's bytecode cache under templates/),
    and those files count toward the cache's bound like any entry."""
    from tracetriage.reports.html import environment

    store = cache_mod.Cache(tmp_path)
    environment(store).get_template("report.html.j2")
    kept = list((tmp_path / "templates").iterdir())
    assert kept and store.size() >= sum(f.stat().st_size for f in kept)
    store.max_bytes = 0
    store.evict()
    assert not list((tmp_path / "templates").iterdir())
