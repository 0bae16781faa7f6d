"""Charts kept in the analysis cache: :func:`_memo` keeps what a chart function returns (an SVG, None,
or a list of (name, SVG)), keyed by its arguments and by the code that draws it; a kept chart's
element ids are re-prefixed for the page it lands on (:func:`next_prefix`: two charts on one page
never share an id)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
import re

_CHART_IDS = itertools.count(1)


def next_prefix() -> str:
    """The next chart's id prefix on this page (``c1-``, ``c2-`` ...)."""
    return f"c{next(_CHART_IDS)}-"


_PREFIXED = re.compile(r'(\bid="|url\(#|href="#)c\d+-')
_HOLE = "\x00"  # where a kept chart's id prefix goes (no SVG holds a NUL)


def _kept(svg: str) -> str:
    """A drawn chart as kept: its id prefix (see ``charts._svg``) left as a hole."""
    return _PREFIXED.sub(lambda m: m.group(1) + _HOLE, svg)


def _reprefix(svg: str) -> str:
    """A kept chart's ids under this page's next prefix."""
    return svg.replace(_HOLE, next_prefix())


def _plain(x):
    if hasattr(x, "tolist"):  # numpy arrays and scalars
        return x.tolist()
    if dataclasses.is_dataclass(x) and not isinstance(x, type):  # a contract record: its fields, by name
        return dataclasses.asdict(x)
    raise TypeError(f"{type(x).__name__} is not a chart input the cache can key")


@functools.lru_cache(maxsize=1)
def _drawing_code() -> str:
    """What a kept chart was drawn by: the reports package's source and matplotlib's version file
    (read without importing matplotlib; importlib.metadata parses the whole METADATA file)."""
    import importlib.util
    from pathlib import Path

    from tracetriage.codeversion import code_version

    spec = importlib.util.find_spec("matplotlib")
    try:
        mpl = hashlib.sha256((Path(spec.submodule_search_locations[0]) / "_version.py").read_bytes()).hexdigest()[:12]
    except (AttributeError, TypeError, OSError):
        from importlib.metadata import version

        mpl = version("matplotlib")
    return f"{code_version('tracetriage.reports')}-{mpl}"


def _memo(chart):
    """Keep what ``chart`` returns (an SVG, None, or a list of (name, SVG)) in the analysis cache
    given as ``store=`` (a :class:`tracetriage.cache.Cache`), keyed by its arguments and by the
    code that draws it (the reports package's source and matplotlib's version): a report made
    again from the cache, for another format or ``--symptom``, redraws no chart whose data did
    not change. Without a store, it just draws."""

    @functools.wraps(chart)
    def cached(*args, store=None, **kwargs):
        if store is None:
            return chart(*args, **kwargs)
        try:
            blob = json.dumps([chart.__qualname__, args, kwargs], sort_keys=True, default=_plain)
        except (TypeError, ValueError):
            return chart(*args, **kwargs)
        key = hashlib.sha256(f"{_drawing_code()}\0{blob}".encode()).hexdigest()[:32]
        kept = store.get_blob("charts", key)
        if kept is not None:
            out = json.loads(kept)
            if isinstance(out, list):
                return [(name, _reprefix(svg)) for name, svg in out]
            return _reprefix(out) if out else out
        out = chart(*args, **kwargs)
        if isinstance(out, list):
            store.put_blob("charts", key, json.dumps([(name, _kept(svg)) for name, svg in out]).encode())
        else:
            store.put_blob("charts", key, json.dumps(_kept(out) if out else out).encode())
        return out

    return cached
