"""One view, every format: each field of the ReportView meant for display appears in the text, Markdown
and HTML reports of the bundled samples, but for the fields a format leaves out on purpose, listed
(with the reason) in OMITTED below and nowhere else."""

from __future__ import annotations

import dataclasses
import html
import re

import pytest
from jinja2 import DictLoader

import tracetriage
from tracetriage.reports import html as html_report
from tracetriage.reports import markdown, text
from tracetriage.reports.view import report_view

BUNDLES = ("eager_decode", "tp8_cross_island", "serving_at_capacity", "prefill_stall", "healthy", "memset_only",
           "eager_decode_pyspy", "data_loader_starved")
FORMATS = ("text", "md", "html")

_STYLE = "a colour for the charts and swatches of the page, not a fact to read"
_TERMINAL = "the terminal summary keeps to what fits a line; the HTML page has it"
_TICKET = "the Markdown summary for a ticket keeps to the verdict, the measurements and the diagnosis; the HTML page has it"

# The fields a format leaves out on purpose (paths name fields; a list's items share their path).
OMITTED: dict[str, dict[str, str]] = {
    "text": {
        "schema": _TERMINAL,
        "claim_columns.color": _STYLE,
        "findings.color": _STYLE,
        "findings.timeline": "shown only when this run wrote the Perfetto export (the HTML page always says where to look)",
        "devices.gap_p99": _TERMINAL,
        "efficiency.model": "named on the efficiency table's header only when the table has classes",
        "efficiency.peaks_source": _TERMINAL,
        "processes.step_range": _TERMINAL,
        "processes.step_max": "the terminal's process table shows p50 and p99; the HTML page has the max",
        "kernels.total": _TERMINAL,
        "kernels.median": _TERMINAL,
        "longest_gaps.start": _TERMINAL,
        "longest_gaps.length": _TERMINAL,
        "longest_gaps.host": _TERMINAL,
        "longest_gaps_scope": _TERMINAL,
        "gap_histogram": _TERMINAL,
        "nccl.transports_dict": "the Markdown page's spelling of the transports; text lists them as 'kind count'",
        "topology.rows.links.link": "the text report names the islands and the groups that cross them, not the link matrix",
        "topology.rows.links.speed": _STYLE,
        "topology.rows.cpu_affinity": _TERMINAL,
    },
    "md": {
        "schema": _TICKET,
        "tool_version": "on the window line, which a case without a GPU trace does not have",
        "claim_columns.color": _STYLE,
        "findings.color": _STYLE,
        "findings.timeline": "shown only when this run wrote the Perfetto export (the HTML page always says where to look)",
        "inputs.path": "the header names the inputs (a bundle as its folder); the HTML page lists each file",
        "inputs.kind": _TICKET,
        "inputs.version": _TICKET,
        "inputs.counts": _TICKET,
        "devices.gap_p99": _TICKET,
        "processes.step_max": _TICKET,
        "devices.accounting": "the Markdown page shows the accounting as a table (claim_cells), not as a sentence",
        "collective_skew": _TICKET,
        "efficiency.model": "named on the efficiency table's heading only when the table has classes",
        "efficiency.peaks_source": _TICKET,
        "kernels.median": _TICKET,
        "longest_gaps.start": _TICKET,
        "longest_gaps.length": _TICKET,
        "longest_gaps.host": _TICKET,
        "longest_gaps_scope": _TICKET,
        "gap_histogram": _TICKET,
        "topology.path": _TICKET,
        "topology.nics": _TICKET,
        "topology.numa": _TICKET,
        "topology.rows.links.link": _TICKET,
        "topology.rows.links.speed": _STYLE,
        "topology.rows.cpu_affinity": _TICKET,
        "nccl.nccl_lines": _TICKET,
        "nccl.transports": "the Markdown page prints the transports as the contract's mapping (transports_dict)",
        "nccl.communicators.comm": _TICKET,
        "serving.version": _TICKET,
        "serving.config": _TICKET,
        "serving.stats.running_mean": _TICKET,
        "serving.stats.running_max": _TICKET,
        "serving.stats.waiting_mean": _TICKET,
        "serving.stats.waiting_max": _TICKET,
        "serving.stats.waiting_share_pct": _TICKET,
        "serving.stats.kv_usage_p50": _TICKET,
        "serving.stats.kv_usage_max": _TICKET,
        "serving.stats.gen_tps_mean": _TICKET,
        "serving.sweep.rate": _TICKET,
        "serving.sweep.throughput": _TICKET,
        "serving.sweep.ttft": _TICKET,
        "serving.sweep.group": _TICKET,
        "serving.replicas.running": _TICKET,
        "serving.replicas.waiting": _TICKET,
        "host_profile.captures.path": "the Markdown page shows the hot frames of the profile, not its captures",
        "host_profile.captures.format": "the Markdown page shows the hot frames of the profile, not its captures",
        "host_profile.captures.threads": "the Markdown page shows the hot frames of the profile, not its captures",
    },
    "html": {
        "devices.accounting": "the page shows the accounting as a table (claim_cells), not as a sentence",
        "gap_histogram": "shown under the longest gaps, which a window without idle gaps does not have",
        "nccl.transports_dict": "the Markdown page's spelling of the transports; the page lists them as 'kind count'",
        "topology.islands": "the page shows each island (island_list), not the list's spelling",
        "topology.numa": "the page shows each GPU's NUMA node in the topology table (rows.numa)",
    },
}

# The lists a format cuts short on purpose: it shows their first N items.
SHOWN_FIRST: dict[str, dict[str, int]] = {
    "text": {"devices": 8, "kernels": 10, "hot_frames": 10, "serving.sweep": 12, "serving.replicas": 8, "nccl.slow_paths": 8},
    "md": {"hot_frames": 10, "nccl.warnings": 10},
    "html": {"nccl.warnings": 20},
}


def display_leaves(view, path: str = ""):
    """(path with item indices, text) of every string of the view; flags (booleans) shape phrases and are
    not leaves, None is a figure not measured (each format prints its own placeholder)."""
    if dataclasses.is_dataclass(view):
        for field in dataclasses.fields(view):
            yield from display_leaves(getattr(view, field.name), f"{path}.{field.name}" if path else field.name)
    elif isinstance(view, tuple):
        for n, item in enumerate(view):
            yield from display_leaves(item, f"{path}[{n}]")
    elif isinstance(view, str) and view:
        yield path, view


def _readable(fmt: str, output: str) -> str:
    """The report as a reader sees it: HTML entities and Markdown escapes undone."""
    if fmt == "html":  # line-break points in names and the code spans of capture commands are no text
        return html.unescape(re.sub(r'<wbr>|<code class="cmd">|</code>', "", output))
    if fmt == "md":
        return re.sub(r"\\(.)", r"\1", output)
    return output


def _cut_short(shown_first: dict[str, int], indexed_path: str) -> bool:
    for list_path, shown in shown_first.items():
        pattern = r"(?:\[\d+\])?\.".join(map(re.escape, list_path.split("."))) + r"\[(\d+)\]"
        match = re.match(pattern, indexed_path)
        if match and int(match.group(1)) >= shown:
            return True
    return False


def missing_fields(view, fmt: str, output: str, omitted: dict[str, dict[str, str]] = OMITTED,
                   shown_first: dict[str, dict[str, int]] = SHOWN_FIRST, cut_to: dict[str, dict[str,
                                                                                                int]] | None = None) -> set[str]:
    """The fields of the view whose text is not in the output, nor left out on purpose: ``omitted``,
    ``shown_first`` (lists shown up to their Nth item) and ``cut_to`` (strings shown up to their Nth
    character) per format."""
    readable = _readable(fmt, output)
    cut = (cut_to or {}).get(fmt, {})
    missing = set()
    for indexed_path, value in display_leaves(view):
        path = re.sub(r"\[\d+\]", "", indexed_path)
        if path in omitted[fmt] or _cut_short(shown_first[fmt], indexed_path):
            continue
        value = value.replace("\n", " ")[:cut.get(path)]
        if not any(form in readable for form in (value, value.upper(), value.lower(), value[:1].upper() + value[1:])):
            missing.add(path)
    return missing


def _render(fmt: str, analysis, view, env=None) -> str:
    if fmt == "text":
        return (env or text.environment()).get_template("report.txt.j2").render(v=view)
    if fmt == "md":
        return (env or markdown.environment()).get_template("report.md.j2").render(v=view)
    if env is None:
        return html_report.render_html(analysis, view=view)
    return env.get_template("report.html.j2").render(v=view, charts=[], serving_charts=[], roofline=None)


@pytest.fixture(scope="module")
def views():
    out = {}
    for bundle in BUNDLES:
        analysis = tracetriage.analyze(f"samples/bundles/{bundle}")
        out[bundle] = (analysis, report_view(analysis))
    return out


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_field_of_the_view_is_in_every_format(views, fmt):
    missing = {bundle: sorted(missing_fields(view, fmt, _render(fmt, analysis, view)))
               for bundle, (analysis, view) in views.items()}
    assert not any(missing.values()), {bundle: fields for bundle, fields in missing.items() if fields}


def test_every_omission_is_a_field_of_the_view(views):
    paths = {re.sub(r"\[\d+\]", "", p) for _, view in views.values() for p, _ in display_leaves(view)}
    for fmt in FORMATS:
        assert set(OMITTED[fmt]) <= paths, set(OMITTED[fmt]) - paths


_TEMPLATES = {"text": "report.txt.j2", "md": "report.md.j2", "html": "report.html.j2"}


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_template_that_drops_a_field_fails(views, fmt):
    """The check above catches a template that no longer shows a finding's mechanism."""
    env = {"text": text.environment, "md": markdown.environment, "html": html_report.environment}[fmt]()
    source = env.loader.get_source(env, _TEMPLATES[fmt])[0]
    assert "f.mechanism" in source
    dropped = env.overlay(loader=DictLoader({_TEMPLATES[fmt]: re.sub(r"\{\{ f\.mechanism[^}]*\}\}", "", source)}))
    analysis, view = views["eager_decode"]
    assert "findings.mechanism" not in missing_fields(view, fmt, _render(fmt, analysis, view))
    assert "findings.mechanism" in missing_fields(view, fmt, _render(fmt, analysis, view, dropped))
