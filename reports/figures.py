"""matplotlib figures on an SVG canvas, and their SVG text: what every chart module draws with.

Figures are ``matplotlib.figure.Figure`` objects on a ``FigureCanvasSVG``: pyplot is never
imported (no figure registry to close, no backend switched in the caller's process). matplotlib is
imported on first use and styled once (``STYLE``), so a report whose charts all come from the
cache never imports it. Each figure is laid out once (:func:`svg`).

In a process tracetriage owns (the CLI, a batch worker: :func:`lean_import`), matplotlib is imported
without the keyword signature and docstring it generates for each Artist subclass's ``set()``: 0.2 of
its 0.4 CPU-s import (cProfile: ``Artist._update_set_signature_and_docstring``, 106 classes), which serve
only ``help()`` and ``inspect.signature``; ``set()`` itself works the same and the charts are the same
bytes. A library caller's process (a notebook) imports matplotlib as it always does.
"""

from __future__ import annotations

import functools
import io
import sys

STYLE = {
    "svg.fonttype": "none",  # text stays text: small and searchable, XML-escaped by matplotlib
    "svg.hashsalt": "tracetriage",  # the ids of clip paths and markers are hashes: the same chart, the same bytes
    "font.size": 9,
    "axes.titlesize": 10,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.dpi": 96,
}

_LEAN = {"import": False}


def lean_import() -> None:
    """Import matplotlib lean in this process (see the module's docstring): for entry points that own
    their process, called before anything imports matplotlib; without effect once it is imported."""
    _LEAN["import"] = True


def _import_matplotlib() -> None:
    lean = _LEAN["import"] and "matplotlib" not in sys.modules
    if lean:
        from matplotlib.artist import Artist

        generate = Artist.__dict__.get("_update_set_signature_and_docstring")
        lean = generate is not None  # a matplotlib without it is imported as it is
    if lean:
        Artist._update_set_signature_and_docstring = classmethod(lambda cls: None)
    try:
        import matplotlib.backends.backend_svg  # noqa: F401
        import matplotlib.figure  # noqa: F401
    finally:
        if lean:
            Artist._update_set_signature_and_docstring = generate


@functools.cache
def matplotlib_svg():
    """(matplotlib, Figure, FigureCanvasSVG, RendererSVG), imported on first use and styled once."""
    _import_matplotlib()
    import matplotlib
    from matplotlib.backends.backend_svg import FigureCanvasSVG, RendererSVG
    from matplotlib.figure import Figure

    matplotlib.rcParams.update(STYLE)
    return matplotlib, Figure, FigureCanvasSVG, RendererSVG


def figure(width: float, height: float, rows: int | None = None, cols: int | None = None, **subplots):
    """A figure ``width`` x ``height`` inches on an SVG canvas, and its Axes (one; with ``rows`` or
    ``cols``, their array, as ``Figure.subplots`` makes it)."""
    _, Figure, FigureCanvasSVG, _ = matplotlib_svg()
    fig = Figure(figsize=(width, height))
    FigureCanvasSVG(fig)
    if rows is None and cols is None:
        return fig, fig.add_subplot()
    return fig, fig.subplots(rows or 1, cols or 1, **subplots)


def tight_box(fig):
    """The box (inches) ``savefig(bbox_inches="tight")`` crops to: everything drawn and its padding, measured
    as the SVG canvas draws (72 dpi) but without drawing. "tight" draws each figure once to measure it and
    again to write it; this measures it and draws it once (the same box, to a millionth of a point)."""
    matplotlib, _, _, RendererSVG = matplotlib_svg()
    dpi = fig.dpi
    width, height = fig.get_size_inches()
    fig.dpi = 72
    try:
        box = fig.get_tightbbox(RendererSVG(width * 72, height * 72, io.StringIO(), image_dpi=dpi))
    finally:
        fig.dpi = dpi
    return box.padded(matplotlib.rcParams["savefig.pad_inches"])


NO_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}  # no <metadata> block: no date, no version
# where matplotlib's SVG names or refers to an id (an element's id attribute, a clip path's url(#), a
# <use>'s xlink:href="#"): plain text searches, not a regex, over a timeline's ~120 KB (10 ms a figure)
ID_MARKS = (' id="', "url(#", 'href="#')


def svg(fig) -> str:
    """``fig`` as the SVG element of a page, cropped to what is drawn, its ids under the page's next prefix."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches=tight_box(fig), metadata=NO_METADATA)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    # matplotlib numbers its ids per figure (patch_1, clip_2...): prefix them so two charts on
    # one page never share an id (duplicate ids are invalid HTML and break clip paths).
    from tracetriage.reports.chart_cache import next_prefix

    prefix = next_prefix()
    for mark in ID_MARKS:
        text = text.replace(mark, mark + prefix)
    return text
