"""The cases of a trend: their names, their paths, their group keys and ``--group-by``, and batch's
tables coerced to the types trend reads (analyzers/trend.py).

* **Names**: a case is named by its path below the archive's common folder, without a file name
  every case shares (``nightly-2026-11-13`` for ``.../nightly-2026-11-13/trace.sqlite``).
* **Groups**: compare's signature (device model and count, world size, program), plus the user's
  ``--group-by`` key (a path component counted from the case, or ``tag:FILE``).
* **Order**: the capture times; without them, the names, when they are a sequence
  (:func:`names_in_sequence`), or when the user asked for name order (``--order-by name``).
"""

from __future__ import annotations

import os
import re

import numpy as np

from tracetriage.analyzers.compare_metrics import METRICS

SIGNATURE = ("device_model", "device_count", "world_size", "program")
DATE = re.compile(r"(?<!\d)(20\d\d)[-_.]?(0[1-9]|1[0-2])[-_.]?(0[1-9]|[12]\d|3[01])(?!\d)")
NUMBER_COLUMNS = [name for name, _unit, _lower in METRICS]  # the series columns of the summary table


def natural_key(text: str):
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", str(text))]


def case_name(path: str, common: str) -> str:
    """The case as a reader names it: its path below the common folder, without a file name
    that every case shares (``nightly-2026-11-13`` for ``.../nightly-2026-11-13/trace.sqlite``)."""
    rel = str(path)[len(common):].lstrip("/") if common and str(path).startswith(common) else str(path)
    return rel or str(path)


def case_names(summary) -> dict[str, str]:
    """case_id -> the name a reader knows the case by: its path below the archive's common
    folder, without the file name every case shares (``nightly-2026-11-13`` for
    ``.../nightly-2026-11-13/trace.sqlite``)."""
    import os

    paths = [os.path.normpath(str(p)) for p in summary["path"]]
    common = os.path.commonpath(paths) if len(paths) > 1 and len({p.startswith("/") for p in paths}) == 1 else ""
    if common and len(paths) > 1 and common in set(paths):
        common = os.path.dirname(common)
    names = {cid: case_name(p, common) for cid, p in zip(summary["case_id"], paths)}
    same_file = {os.path.basename(p) for p in paths}
    if len(same_file) == 1 and len(paths) > 1:  # every case is ".../trace.sqlite": name by the folder
        base = next(iter(same_file))
        names = {cid: (n[: -len(base)].rstrip("/") or n) if n.endswith(base) else n for cid, n in names.items()}
    return {cid: n[2:] if n.startswith("./") else n for cid, n in names.items()}


def case_paths(summary) -> dict[str, str]:
    """case path (as batch records it) -> the case as trend names it: its folder when every
    case is a file of the same name (``.../nightly-2026-11-13`` for
    ``.../nightly-2026-11-13/trace.sqlite``, as :func:`case_names` drops that name), else the
    path itself. ``--group-by`` counts path components from this, so -1 is the case itself."""
    import os

    paths = [os.path.normpath(str(p)) for p in summary["path"]]
    bases = {os.path.basename(p) for p in paths}
    shared = next(iter(bases)) if len(bases) == 1 and len(paths) > 1 else None
    return {str(raw): (os.path.dirname(p) or p) if shared else p for raw, p in zip(summary["path"], paths)}


def group_keys(ok, group_by=None) -> list[tuple]:
    """Each case's group key: compare's signature (device model and count, world size,
    program), plus ``group_by(path)`` when given."""
    from tracetriage.analyzers.trend_table import signature_texts

    columns = [signature_texts(ok[k]) if k in ok else ["None"] * len(ok) for k in SIGNATURE]
    if group_by:
        columns.append([str(group_by(p)) for p in ok["path"]])
    return list(zip(*columns)) if len(ok) else []


def date_label(name: str) -> str | None:
    m = DATE.search(name)
    return f"{m.group(1)}-{m.group(2)}-{m.group(3)}" if m else None


def names_in_sequence(names: list[str]) -> bool:
    """Whether case names order captures in time on their own: each carries a date, or all are the
    same text apart from one part that is a number in each (``night_01`` ... ``night_12``,
    ``run-9``/``run-10``) or a single letter in each (``a``, ``b``, ``c``). Names that differ in
    their words (``eager_decode``, ``graph_decode``) are labels of different experiments: their name
    order is no time order."""
    if all(date_label(name) for name in names):
        return True
    prefix = os.path.commonprefix(names)
    suffix = os.path.commonprefix([name[len(prefix):][::-1] for name in names])[::-1]
    middles = [name[len(prefix):len(name) - len(suffix)] for name in names]
    prefix_digits = re.search(r"\d*$", prefix).group()  # "night_0" + "1": the number is "01"
    return (all((prefix_digits + middle).isdigit() for middle in middles)
            or all(len(middle) == 1 and middle.isalpha() for middle in middles))


NO_TAG = "(no tag)"
GROUP_BY_HINT = "-2 is the folder holding the case, -3 the folder above that"


def group_by_key(key: str | None, case_path: dict[str, str] | None = None):
    """``--group-by``: a path component of the case, indexed as Python indexes its parts (-1 the
    case itself, refused: a case's own name groups nothing; -2 the folder holding it; 0 the
    root), the case being what trend names (``case_path``: batch's path -> the case, its folder
    for ``.../nightly-01/trace.sqlite``); or ``tag:FILE`` (FILE's first line in the case's folder).
    The function of a batch path giving its group key, or None without ``key``."""
    if not key:
        return None
    from pathlib import Path

    from tracetriage.errors import UsageError

    if key.startswith("tag:") and key[4:]:
        name = key[4:]

        def tag(path: str) -> str:
            folder = Path(path) if Path(path).is_dir() else Path(path).parent
            try:
                return (folder / name).read_text(encoding="utf-8", errors="replace").strip().splitlines()[0][:200]
            except (OSError, IndexError):
                return NO_TAG
        return tag
    try:
        index = int(key)
    except ValueError:
        raise UsageError(None, f"--group-by {key!r}: give a path component index (e.g. -2) or tag:FILE") from None
    if index == -1:
        raise UsageError(None, f"--group-by -1 is the case itself, and a case's own name is no group key (every case "
                               f"would be alone): {GROUP_BY_HINT}")

    def component(path: str) -> str:
        parts = Path((case_path or {}).get(str(path), path)).parts
        return parts[index] if -len(parts) <= index < len(parts) else "(none)"
    return component


def check_grouping(key: str, group_by, summary, names: dict[str, str], cases: dict[str, str]) -> None:
    """A ``--group-by`` that groups nothing is a usage error, never "0 group(s)" in silence: an
    index no case path has, a tag file no case folder holds, or a key that leaves every case
    alone where the comparability signature alone would have made series."""
    from pathlib import Path

    from tracetriage.errors import UsageError

    if key.lstrip("-").isdigit():
        index = int(key)
        if not any(-len(Path(p).parts) <= index < len(Path(p).parts) for p in cases.values()):
            raise UsageError(None, f"--group-by {key}: no case path has a component at that index ({GROUP_BY_HINT})")
    elif all(group_by(str(p)) == NO_TAG for p in summary["path"]):
        raise UsageError(None, f"--group-by {key}: no case folder holds a file {key[4:]!r} "
                               "(tag:FILE reads the first line of FILE beside each capture)")
    ok = summary.take(summary["status"] == "ok")
    keys = group_keys(ok, group_by)
    if len(keys) > 1 and len(set(keys)) == len(keys) and len(set(group_keys(ok))) < len(keys):
        path, case_id = str(ok["path"][0]), ok["case_id"][0]
        how = (f"the component at {key} of {cases.get(path, path)}: {GROUP_BY_HINT}"
               if key.lstrip("-").isdigit() else f"its {key[4:]}: every case's differs")
        raise UsageError(None, f"--group-by {key} leaves every case alone in its group, so there is no series: "
                               f"for {names.get(case_id, path)} it picked {group_by(path)!r} ({how})")


def coerce_tables(summary, findings, kernels):
    """The batch tables (:class:`trend_table.Table`) with every column trend reads coerced to its type
    (the folder is input like any other: a column of the wrong type becomes missing values, never a crash)."""
    from tracetriage.analyzers.trend_table import integers, numbers, texts

    def coerce(table, kind, columns, missing):
        for column in columns:
            table[column] = kind(table[column]) if column in table else missing(len(table))

    def nan(size):
        return np.full(size, np.nan)

    def empty(size):
        out = np.empty(size, object)
        out[:] = ""
        return out

    def none(size):
        return np.full(size, None, object)

    summary = summary.copy()
    coerce(summary, numbers, NUMBER_COLUMNS, nan)
    coerce(summary, integers, ("capture_start_ns", "device_count", "world_size"), none)
    coerce(summary, texts, ["case_id", "path", "status", "error", "device_model", "program", "report_json", "report_html"],
           empty)
    findings = findings.copy()
    coerce(findings, numbers, ["ms_per_step"], nan)
    coerce(findings, texts, ["case_id", "id"], empty)
    if kernels is not None:
        kernels = kernels.copy()
        coerce(kernels, numbers, ["ms_per_step"], nan)
        coerce(kernels, texts, ["case_id", "name"], empty)
    return summary, findings, kernels
