"""Self-contained HTML report: inline CSS, inline SVG charts, no script, no network.

Rendered by Jinja2 with autoescaping on: every string from a trace (kernel names,
NVTX texts, process names, log lines) is escaped. Charts are the only markup
inserted unescaped, and they come from matplotlib, which escapes its text.
"""

from __future__ import annotations

import functools
import html
import re

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape

from tracetriage.records.analysis import read as read_analysis
from tracetriage.reports.charts import all_charts, serving_charts
from tracetriage.reports.compiled import compiled_templates
from tracetriage.reports.roofline import roofline_chart
from tracetriage.reports.view import report_view
from tracetriage.wording import fmt_ns


def environment(store=None) -> Environment:
    """The templates' environment, one per process and cache folder (a batch worker renders many
    reports: its templates are loaded and compiled once); with ``store`` (the analysis cache),
    compiled templates are also kept there, for the next process."""
    templates = store.templates_dir() if store is not None else None
    return _environment(str(templates) if templates is not None else None)


@functools.lru_cache(maxsize=8)
def _environment(templates_dir: str | None) -> Environment:
    env = Environment(
        loader=PackageLoader("tracetriage.reports", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
        bytecode_cache=compiled_templates("html", templates_dir),
    )
    env.filters["ns"] = fmt_ns
    env.filters["breakable"] = breakable
    env.filters["capture"] = capture_markup
    return env


_BREAK_AFTER = re.compile(r"([/\\!;]|,(?!\d))")  # not after the comma of a number (4,096)
_LONG_RUN = re.compile(r"[^/\\!,;\s]{25,}")


def breakable(text) -> Markup:
    """``text`` escaped, with a line-break opportunity (``<wbr>``) after each path separator, archive
    mark and comma, and inside a run of 25 characters or more with none after its dots, underscores
    and colons: a file or range name wraps at its parts (``…/eager_decode_pyspy/ pyspy.txt``), not in
    the middle of a word, and a table cell never needs to be wider than its longest part."""
    out = []
    for piece in _BREAK_AFTER.split(str(text)):
        if _BREAK_AFTER.fullmatch(piece):
            out.append(escape(piece) + Markup("<wbr>"))
            continue
        last = 0
        for run in _LONG_RUN.finditer(piece):
            out.append(escape(piece[last:run.start()]))
            out.append(Markup("<wbr>").join(escape(part) for part in re.split(r"(?<=::)|(?<=[._])", run.group())))
            last = run.end()
        out.append(escape(piece[last:]))
    return Markup("").join(out)


# the programs a capture hint runs, and the words that end a command where a sentence goes on
CAPTURE_PROGRAMS = ("nsys", "ncu", "rocprofv3", "rocprof-compute", "rocprof", "perf", "py-spy", "vllm", "curl", "nvidia-smi",
                    "rocm-smi", "amd-smi", "tracetriage", "torchrun", "sglang")
_PROSE_WORDS = {"a", "an", "the", "and", "or", "to", "of", "for", "with", "so", "that", "per", "on", "in", "at", "over",
                "records", "gives", "started", "added", "naming", "lined", "tell", "during", "each", "every", "then", "is"}
_TOKEN = re.compile(r"[^\s<]*<[^<>]*>[^\s<]*|\S+")


def capture_pieces(text: str) -> list[tuple[str, bool]]:
    """A capture hint cut into (text, is_command) pieces: a command starts at a program's name
    (CAPTURE_PROGRAMS, also just after an opening parenthesis) and takes the words that read as its
    arguments: options, their values, ``<placeholders>``, paths, and after ``--`` the program it runs;
    it ends at a comma, a semicolon, a parenthesis or an English word (``with``, ``records``: the
    sentence goes on), and holds at least one option or placeholder (``perf samples its frames`` is
    prose). A lone option (``--step-range REGEX``) is a command piece of its own. Joined, the pieces
    are the text."""
    pieces: list[tuple[str, bool]] = []
    tokens = list(_TOKEN.finditer(text))
    i, prose_from = 0, 0
    while i < len(tokens):
        word = tokens[i].group().lstrip("(")
        start = tokens[i].end() - len(word)
        if word in CAPTURE_PROGRAMS:
            end = _command_end(tokens, i)
            if not any(tokens[k].group().startswith(("-", "<")) for k in range(i + 1, end)):
                i += 1
                continue
        elif re.fullmatch(r"--?[A-Za-z][\w.-]*(=[^\s,;()]+)?[,;)]?", word):
            end = i + 1
            value = tokens[end].group() if end < len(tokens) else ""
            if word == word.rstrip(",;)") and (re.fullmatch(r"[A-Z]+[,;)]?", value) or "=" in value or "<" in value):
                end += 1
        else:
            i += 1
            continue
        command = text[start:tokens[end - 1].end()]
        while command.endswith((",", ";", ")")) and (command[-1] != ")" or command.count("(") < command.count(")")):
            command = command[:-1]  # the punctuation after it, never a parenthesis it opened
        if start > prose_from:
            pieces.append((text[prose_from:start], False))
        pieces.append((command, True))
        prose_from, i = start + len(command), end
    if prose_from < len(text):
        pieces.append((text[prose_from:], False))
    return pieces


def _command_end(tokens: list, first: int) -> int:
    """One past the last token of the command whose program is ``tokens[first]``."""
    k = first + 1
    after_separator = False
    while k < len(tokens):
        word = tokens[k].group()
        bare = word.rstrip(",;)")
        if word.startswith("(") or (not after_separator and bare.lower() in _PROSE_WORDS):
            break
        after_separator = after_separator or bare == "--"
        k += 1
        if bare != word:  # a comma, semicolon or closing parenthesis ends it
            break
    return k


def capture_markup(text) -> Markup:
    """A capture hint as wrapping prose with each command in ``<code class="cmd">`` (every piece escaped)."""
    return Markup("").join(Markup('<code class="cmd">{}</code>').format(piece) if is_command else escape(piece)
                           for piece, is_command in capture_pieces(str(text)))


def render_html(analysis, store=None, view=None) -> str:
    """The HTML report: the ReportView (``view`` when the caller built it already) and the charts, drawn
    from the analysis's series; charts and the compiled template kept in ``store`` (the analysis cache)
    when given."""
    record = read_analysis(analysis.data)  # the contract read once, for the charts and the view
    charts = [(name, Markup(svg)) for name, svg in all_charts(analysis, store, record)]
    extra = [(name, Markup(svg)) for name, svg in serving_charts(analysis, store, record)]
    roof = roofline_chart(record.efficiency, store=store)
    return environment(store).get_template("report.html.j2").render(v=view or report_view(analysis, record), charts=charts,
                                                                     serving_charts=extra,
                                                                     roofline=Markup(roof) if roof else None)


def _escape_as_html_escape(value):
    """Every value of the card escaped as :func:`html.escape` escapes (``&#x27;`` for a quote): the
    entities the card has always written. Markup (already safe) passes as it is."""
    return value if isinstance(value, Markup) else Markup(html.escape(str(value)))


@functools.cache
def _card_environment() -> Environment:
    return Environment(loader=PackageLoader("tracetriage.reports", "templates"), autoescape=True,
                       finalize=_escape_as_html_escape)


def render_card(analysis, view=None) -> str:
    """The notebook card (``Analysis._repr_html_``): headline, then each finding's title, axis, severity
    and impact, the capture's phases, then what was not measured; every string escaped."""
    from tracetriage.reports.view import report_view

    return _card_environment().get_template("card.html.j2").render(v=view or report_view(analysis))
