"""One view, every format, for compare and trend: each field of the CompareView and the TrendView meant
for display appears in the text, Markdown and HTML reports, but for the fields a format leaves out on
purpose, listed (with the reason) in the tables below and nowhere else. The comparisons are of bundled
samples; the trend is a contract built here (a trend needs a batch of captures, minutes to make)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from jinja2 import DictLoader
from test_view_parity import display_leaves, missing_fields

import tracetriage
from tracetriage.analyzers.compare import compare
from tracetriage.reports import html as html_report
from tracetriage.reports import markdown, text
from tracetriage.reports.compare import code, render_compare
from tracetriage.reports.compare_view import compare_view
from tracetriage.reports.trend import render_trend
from tracetriage.reports.trend_view import trend_view

FORMATS = ("text", "md", "html")
PAIRS = (("eager_decode", "graph_decode"), ("serving_at_capacity", "serving_healthy"))
ENVIRONMENTS = {"text": text.environment, "md": markdown.environment, "html": html_report.environment}
SUFFIX = {"text": "txt", "md": "md", "html": "html"}

_STYLE = "a class for the page's colours, not a fact to read"
_TERMINAL = "the terminal summary keeps to what fits a line; the HTML page has it"
_SUMMARY = "the summary is the verdict word and its detail, which this format prints as verdict_words and detail"
_WORDS = "the verdict in words and its detail are the summary, which the terminal prints whole"
_NOT_TEXT_HTML = "the text and HTML pages print the threshold and method as their sentences say them"

# The fields of a CompareView a format leaves out on purpose (paths name fields; a list's items share their path).
COMPARE_OMITTED: dict[str, dict[str, str]] = {
    "text": {
        "tool_version": _TERMINAL, "schema": _TERMINAL, "verdict": "the summary starts with it", "verdict_words": _WORDS,
        "detail": _WORDS, "threshold_repr": "the terminal prints the threshold as its %g spelling (threshold)",
        "noise_ms_per_step": _TERMINAL, "step_test": _TERMINAL,
        "findings.status_class": _STYLE, "findings.before_ms_per_step": _TERMINAL, "findings.after_ms_per_step": _TERMINAL,
        "kernels.short_name": "the terminal cuts the name at its end (kernels.name, first 80 characters)",
    },
    "md": {
        "tool_version": "the Markdown summary for a ticket keeps to the comparison; the HTML page has it",
        "schema": "the Markdown summary for a ticket keeps to the comparison; the HTML page has it",
        "summary": _SUMMARY, "verdict": "printed in words (verdict_words)",
        "threshold": "the Markdown tables mark each change's direction; the text and HTML pages state the threshold",
        "threshold_repr": "the Markdown tables mark each change's direction; the text and HTML pages state the threshold",
        "noise_ms_per_step": _NOT_TEXT_HTML, "step_test": _NOT_TEXT_HTML,
        "step_time.before_pid": "the table names the rank; the text and HTML pages say which process it was",
        "step_time.after_pid": "the table names the rank; the text and HTML pages say which process it was",
        "step_time.speed": "the table gives the ratio after/before; the terminal says it in words",
        "step_time.p99_status": "the table has one status column, the p50's", "step_time.before_steps": _TERMINAL,
        "step_time.after_steps": _TERMINAL, "findings.status_class": _STYLE,
        "kernels.short_name": "the Markdown page cuts the name at its end (kernels.name, first 90 characters)",
    },
    "html": {
        "summary": "in the page's title; the page prints the verdict in words (verdict_words) and its detail",
        "threshold": "the page prints the threshold as the contract spells it (threshold_repr)",
        "step_time.speed": "the table gives the ratio after/before; the terminal says it in words",
        "step_time.p99_status": "the table has one status column, the p50's", "step_time.before_steps": _TERMINAL,
        "step_time.after_steps": _TERMINAL,
        "sections.note": "the page explains each section in its own longer sentence",
    },
}
COMPARE_SHOWN_FIRST: dict[str, dict[str, int]] = {"text": {"step_time": 8, "kernels": 12}, "md": {"kernels": 20}, "html": {}}
COMPARE_CUT_TO: dict[str, dict[str, int]] = {"text": {"kernels.name": 80}, "md": {"kernels.name": 90}}

# The fields of a TrendView a format leaves out on purpose.
TREND_OMITTED: dict[str, dict[str, str]] = {
    "text": {
        "schema": _TERMINAL, "batch_dir": _TERMINAL, "threshold": _TERMINAL, "threshold_repr": _TERMINAL,
        "level_shift": _TERMINAL, "groups.key": "each group's verdict starts with its key",
        "groups.cases.name": "the terminal names the captures of a group in one line (named_cases)",
        "groups.cases.label": "the terminal names the captures of a group in one line (named_cases)",
        "groups.cases.href": "the terminal links nothing", "groups.changes.kind": "said in words (kind_words)",
        "groups.changes.last_good_href": "the terminal links nothing",
        "groups.changes.first_bad_href": "the terminal links nothing",
        "ungrouped.key": _TERMINAL,
    },
    "md": {
        "schema": "the Markdown summary for a ticket keeps to the series; the HTML page has it",
        "batch_dir": "the Markdown summary for a ticket keeps to the series; the HTML page has it",
        "threshold_repr": "the Markdown page prints the threshold as its %g spelling (threshold)",
        "level_shift": "the Markdown summary for a ticket keeps to the series; the HTML page has it",
        "group_words": "the Markdown page has a section per group",
        "groups.cases.name": "the Markdown page names the captures of a group in one line (named_cases)",
        "groups.cases.label": "the Markdown page names the captures of a group in one line (named_cases)",
        "groups.cases.href": "the Markdown page links the last good and first bad captures (changes.*_href)",
        "groups.changes.kind_words": "the table has a kind column (kind)",
        "groups.changes.kernel": "the Markdown table keeps to the series and the findings; the text and HTML pages have it",
        "ungrouped.key": "the Markdown summary for a ticket keeps to the series; the HTML page has it",
    },
    "html": {
        "threshold": "the page prints the threshold as the contract spells it (threshold_repr)",
        "groups.capture_words": "the page lists every capture (cases)",
        "groups.named_cases": "the page lists every capture (cases)",
        "groups.cases.name": "the page names a capture by its label (cases.label, its name when it has none)",
        "groups.changes.kind_words": "the table has a kind column (kind)",
        "groups.changes.last_good_href": "the page links every capture in its list of captures (cases.href)",
        "groups.changes.first_bad_href": "the page links every capture in its list of captures (cases.href)",
    },
}
TREND_SHOWN_FIRST: dict[str, dict[str, int]] = {"text": {}, "md": {}, "html": {}}
TREND_CUT_TO: dict[str, dict[str, int]] = {"text": {"groups.changes.kernel": 60}, "html": {"groups.changes.kernel": 48}}

DECLARED = {"compare": (COMPARE_OMITTED, COMPARE_SHOWN_FIRST, COMPARE_CUT_TO),
            "trend": (TREND_OMITTED, TREND_SHOWN_FIRST, TREND_CUT_TO)}


def _case(night: int) -> dict:
    name = f"nightly-2026-11-0{night}"
    return {"name": name, "case_id": f"nightly_{name}-0{night}", "time": f"2026-11-0{night}T03:00:00Z",
            "label": f"2026-11-0{night}",
            "report": f"cases/nightly_{name}-0{night}/report.html"}


def _change(metric: str, unit: str, kind: str, last: int | None, first: int, before: float, after: float, **extra) -> dict:
    return {"group": GROUP, "metric": metric, "unit": unit, "kind": kind, "direction": "regressed",
            "last_good": f"nightly-2026-11-0{last}" if last else None, "first_bad": f"nightly-2026-11-0{first}",
            "first_bad_time": f"2026-11-0{first}T03:00:00Z", "before": {"level": before, "spread": None, "cases": None},
            "after": {"level": after, "spread": None, "cases": 1}, "change_pct": 100 * (after - before) / before,
            "findings": [], "kernels": [], **extra}


GROUP = "1x NVIDIA H100 80GB HBM3, world size 1, python vllm.worker"


def trend_contract() -> dict:
    """A trend of five nightly captures: an outlier, a level shift with its findings and kernels, a share
    that dropped, a capture in no series and one that failed; the latest capture fails the gate."""
    cases = [_case(night) for night in range(1, 6)]
    shift = _change("step_p50_ms", "ms", "level_shift", 3, 4, 0.604, 1.361,
                    findings=[{"id": "launch_bound", "status": "new", "before_ms_per_step": None, "after_ms_per_step": 0.844}],
                    kernels=[{"name": "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
                                      "cutlass::half_t>>(Flash_fwd_params)", "before_ms_per_step": 0.1,
                                      "after_ms_per_step": 0.5}])
    return {
        "schema": "tracetriage.trend/1", "order": "capture time", "threshold_pct": 5.0,
        "method": {"noise": "sigma from the median absolute successive difference / 0.954", "outlier": "farther than 5 sigma",
                   "level_shift": "ruptures PELT (l2, min segment 2, penalty 3 sigma^2 log n)"},
        "groups": [{"key": GROUP, "signature": {"device_model": "1x NVIDIA H100 80GB HBM3", "device_count": "1",
                                                "world_size": "1",
                                                "program": "python vllm.worker"},
                    "cases": cases,
                    "series": {"step_p50_ms": {"unit": "ms", "values": [0.606, 1.583, 0.603, 1.361, 1.360]},
                               "busy_pct": {"unit": "%", "values": [91.0, 90.5, 91.2, 62.0, 61.8]}},
                    "verdict": f"{GROUP}: from nightly-2026-11-04 on: step p50 +125% (0.604 -> 1.36 ms), regressed",
                    "latest_regressed": True}],
        "ungrouped": [{"key": "8x NVIDIA H100 80GB HBM3, world size 8, python train.py",
                       "cases": [_case(6) | {"name": "tp8-seed3"}],
                       "reason": "one capture of its kind: no series"}],
        "failed": [{"name": "nightly-2026-11-07", "error": "TraceFormatError: truncated SQLite file"}],
        "changes": [_change("step_p50_ms", "ms", "outlier", 1, 2, 0.605, 1.583), shift,
                    _change("busy_pct", "%", "level_shift", None, 4, 91.0, 62.0),
                    _change("e2el_p50_ms", "ms", "level_shift", 3, 4, 4660.0, 6805.0, direction="changed",
                            explained="end-to-end p50 4,660 -> 6,805 ms (+46%) moved with the output length (mean +56%) "
                                      "while the per-token latency held")],
        "gate": {"regressed": True, "groups": [GROUP], "baseline": None, "rule": "the latest capture in a regressed segment"},
        "batch_dir": "batch",
    }


def test_the_trend_contract_is_one_the_schema_allows():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).resolve().parents[1] / "reports" / "trend.schema.json").read_text())
    jsonschema.validate(trend_contract(), schema)


@pytest.fixture(scope="module")
def comparisons(tmp_path_factory):
    out = {}
    for before, after in PAIRS:
        paths = f"samples/bundles/{before}", f"samples/bundles/{after}"
        out[before] = compare(tracetriage.analyze(paths[0]).data, tracetriage.analyze(paths[1]).data, *paths)
    # a deploy that changed the answers (samples/gen_deploy.py): the serving section with its quality finding
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    import gen_deploy

    folder = tmp_path_factory.mktemp("deploy")
    gen_deploy.generate_deploy(folder, only=["deploy_int4"], truth_dir=folder / "truth")
    paths = str(folder / "deploy_int4" / "before"), str(folder / "deploy_int4" / "after")
    out["deploy_int4"] = compare(tracetriage.analyze(paths[0]).data, tracetriage.analyze(paths[1]).data, *paths)
    return out


def _cases(comparisons):
    """(kind, contract, view, render(fmt, env or None)) of every comparison and of the trend."""
    for name, comparison in comparisons.items():
        yield (f"compare {name}", "compare", compare_view(comparison),
               lambda fmt, env=None, comparison=comparison: _render_compare(comparison, fmt, env))
    contract = trend_contract()
    yield "trend", "trend", trend_view(contract, "../batch"), lambda fmt, env=None: _render_trend(contract, fmt, env)


def _render_compare(comparison: dict, fmt: str, env=None) -> str:
    if env is None:
        return render_compare(comparison, fmt)
    return env.get_template(f"compare.{SUFFIX[fmt]}.j2").render(v=compare_view(comparison), chart=None, code=code)


def _render_trend(contract: dict, fmt: str, env=None) -> str:
    if env is None:
        return render_trend(contract, fmt, "../batch")
    return env.get_template(f"trend.{SUFFIX[fmt]}.j2").render(v=trend_view(contract, "../batch"), charts={})


def _missing(kind: str, view, fmt: str, output: str) -> set[str]:
    omitted, shown_first, cut_to = DECLARED[kind]
    return missing_fields(view, fmt, output, omitted, shown_first, cut_to)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_field_of_the_views_is_in_every_format(comparisons, fmt):
    missing = {name: sorted(_missing(kind, view, fmt, render(fmt))) for name, kind, view, render in _cases(comparisons)}
    assert not any(missing.values()), {name: fields for name, fields in missing.items() if fields}


def test_every_omission_is_a_field_of_the_view(comparisons):
    paths = {kind: set() for kind in DECLARED}
    for _, kind, view, _ in _cases(comparisons):
        paths[kind] |= {re.sub(r"\[\d+\]", "", path) for path, _ in display_leaves(view)}
    for kind, (omitted, _, cut_to) in DECLARED.items():
        for fmt in FORMATS:
            declared = set(omitted[fmt]) | set(cut_to.get(fmt, {}))
            assert declared <= paths[kind], (kind, fmt, declared - paths[kind])


# A field each template shows, and the expression that shows it (the test drops it).
_DROPPED = {"compare": ("findings.decided_by", r"\{\{ f\.decided_by[^}]*\}\}"),
            "trend": ("groups.changes.after", r"\{\{ c\.after[^}]*\}\}")}


@pytest.mark.parametrize("kind", ("compare", "trend"))
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_template_that_drops_a_field_fails(comparisons, kind, fmt):
    """The check above catches a template that no longer shows a finding's decision or a change's level after."""
    field, expression = _DROPPED[kind]
    template = f"{kind}.{SUFFIX[fmt]}.j2"
    env = ENVIRONMENTS[fmt]()
    source = env.loader.get_source(env, template)[0]
    assert re.search(expression, source), (template, expression)
    dropped = env.overlay(loader=DictLoader({template: re.sub(expression, "", source)}))
    name, _, view, render = next(case for case in _cases(comparisons) if case[1] == kind)
    assert field not in _missing(kind, view, fmt, render(fmt, env)), name
    assert field in _missing(kind, view, fmt, render(fmt, dropped)), name
