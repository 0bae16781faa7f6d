"""An archive over time (``tracetriage trend``): series per workload, change points, their cause.
Schema ``tracetriage.trend/1`` (``reports/trend.schema.json``).

Input: the tables ``batch`` writes (``summary.parquet``, ``findings.parquet``,
``kernels.parquet``); no capture is read again. At each change the two analyses on either
side (their saved ``analysis.json``) are compared with :func:`compare.compare`, so a change
carries the same finding statuses and kernel movers as ``tracetriage compare``.

* **Order**: by the capture's start on the wall clock (nsys session start, Kineto
  ``baseTimeNanoseconds``), else by a natural sort of the case name (``--order-by``).
* **Groups**: cases are judged only against comparable cases: the same device model and
  count, world size and program (compare's signature), plus ``--group-by`` (a path
  component counted from the case: -2 the folder holding it, see :func:`case_paths`, or a
  tag file). A group of one case fits no series: listed apart, never mixed in.
* **Series**: the per-step figures of each case (ms per step, counts per step, busy %,
  serving percentiles), each finding's ms per step (0 where the case did not report it) and
  the top kernels' ms per step. A group of captures without steps (a benchmark loop, a
  micro-benchmark: no case has a step p50) is read on work rate instead: its top kernels' ns
  per call (``kernel_call:<name>``, lower is better, the budgets of such a group, as compare's
  ``kernel time per call``), and its busy % is neither better nor worse (``changed``): the
  window is the GPU activity itself, and a kernel that got 2x faster shrinks it.
* **Noise**: sigma of a series is estimated robustly from its successive differences
  (median absolute difference / 0.954, the MAD of a difference of two normal draws), so
  neither a level shift nor an outlier inflates it.
* **Outliers** first: a point whose distance to the median of its neighbours (two each
  side, itself excluded) exceeds both 5 sigma and the practical minimum, while those
  neighbours agree with each other, is a one-off. It is reported as ``outlier`` and replaced
  by that median before the level search, so a bad night among good ones is never a shift.
  The first capture is never an outlier: with no history before it, nothing says it is the odd one.
  A case that abstained ("Not enough to judge") is in no series: it is listed as ungrouped.
* **Level shifts**: PELT (``ruptures``, l2 cost, minimum segment 2) with a penalty of
  3 sigma^2 log n, the BIC scale for a mean shift in noise of that sigma. A breakpoint counts
  only when the segments' medians differ by more than the within-segment spread (2x the
  larger of their robust SDs) *and* by the practical minimum: the threshold (default 5%) of
  the step p50 for ms-per-step series, of the level for counts and serving figures, 5 points
  for shares. The last case before it is ``last_good``, the first after ``first_bad``.
* **A deploy that changed the answers**: a level shift of the outputs' shape (``output_len_mean``)
  where compare of the two captures around it finds ``quality_regression`` is named in the verdict
  (``from <first capture after the deploy> on: quality_regression new``) and fails the gate while it
  stands; an end-to-end latency shift that compare says moved only with the outputs' length is
  ``changed``, with that sentence as ``explained``, not a regression.
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path

import numpy as np

from tracetriage.analyzers.compare_metrics import METRICS, SERVING_BUDGETS  # the series are compare's metrics
from tracetriage.casenames import matches_baseline
from tracetriage.wording import fmt_ns

SCHEMA = "tracetriage.trend/1"
THRESHOLD_PCT = 5.0
OUTLIER_SIGMAS = 5.0
SHIFT_SPREAD_FACTOR = 2.0
PENALTY_SCALE = 3.0
SHARE_MIN_PTS = 5.0
TOP_KERNELS = 8  # kernels per group given a series: the largest by mean ms per step
MIN_SERIES = 4  # fewer cases than this: shown, not searched for changes
QUALITY_FINDINGS = ("quality_regression",)  # compare's finding at a change of the outputs' shape (rules/quality.py)
QUALITY_SERIES = ("output_len_mean",)

# series name -> (unit, lower is better: None for neither), compare's metrics; findings and kernels
# are added per group. The budgets the gate and the verdict line read: step time, serving figures.
BASE_SERIES = {name: (unit, lower) for name, unit, lower in METRICS}
BUDGETS = ("step_p50_ms", "step_p99_ms", *SERVING_BUDGETS)
SIGNATURE = ("device_model", "device_count", "world_size", "program")
ABSTAINED = "Not enough to judge"  # the headline of a case that abstained (analyzers/rules/headline.py)
DATE = re.compile(r"(?<!\d)(20\d\d)[-_.]?(0[1-9]|1[0-2])[-_.]?(0[1-9]|[12]\d|3[01])(?!\d)")


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
    columns = [ok[k].astype(str).tolist() if k in ok else ["None"] * len(ok) for k in SIGNATURE]
    if group_by:
        columns.append([str(group_by(p)) for p in ok["path"]])
    return list(zip(*columns)) if len(ok) else []


def date_label(name: str) -> str | None:
    m = DATE.search(name)
    return f"{m.group(1)}-{m.group(2)}-{m.group(3)}" if m else None


def robust_sigma(x: np.ndarray) -> float:
    """Noise of a series from successive differences (robust to level shifts and outliers)."""
    d = np.diff(x[np.isfinite(x)])
    if d.size == 0:
        return 0.0
    return float(np.median(np.abs(d)) / 0.954)


def _spread(seg: np.ndarray) -> float:
    if seg.size < 2:
        return 0.0
    q75, q25 = np.percentile(seg, [75, 25])
    return float((q75 - q25) / 1.349)


def practical_min(unit: str, level: float, step_p50_ms: float | None, threshold_pct: float) -> float:
    if unit == "%":
        return SHARE_MIN_PTS
    if unit == "ms/step" and step_p50_ms:
        return threshold_pct / 100.0 * step_p50_ms
    if unit.startswith("calls"):
        return max(0.5, threshold_pct / 100.0 * abs(level))
    return threshold_pct / 100.0 * abs(level) if level else 1e-9


def pelt_l2(series: np.ndarray, pen: float) -> list[int]:
    """The segment ends (the last is len(series)) of PELT on the l2 cost, penalty ``pen``, segments of 2
    points or more: ``ruptures.KernelCPD(kernel="linear", min_size=2).fit(series).predict(pen=pen)``,
    by the same compiled search without importing the ruptures package, which loads scipy.stats and
    scipy.spatial for costs trend never uses (1-3 s, most of a trend's time); else through ruptures."""
    signal = np.ascontiguousarray(series, dtype=np.double).reshape(-1, 1)
    pelt = _compiled_pelt_l2()
    if pelt is None:
        import ruptures

        return [int(end) for end in ruptures.KernelCPD(kernel="linear", min_size=2, jump=1).fit(signal).predict(pen=pen)]
    if signal.shape[0] < 4 or not pen > 0:  # ruptures: BadSegmentationParameters (no two segments of 2), or AssertionError
        raise ValueError(f"{signal.shape[0]} points, penalty {pen}: no search")
    path = pelt(signal, pen, 2)
    ends, end = [], signal.shape[0]
    while end > 0:
        ends.append(int(end))
        end = path[end]
    return ends[::-1]


@functools.cache
def _compiled_pelt_l2():
    """ruptures' ``ekcpd_pelt_L2`` (detection/_detection/ekcpd), loaded from its file alone; None if absent."""
    import importlib.machinery
    import importlib.util

    package = importlib.util.find_spec("ruptures")
    for root in (package.submodule_search_locations or []) if package else []:
        folder = Path(root) / "detection" / "_detection"
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = folder / f"ekcpd{suffix}"
            if path.is_file():
                name = "ruptures.detection._detection.ekcpd"
                spec = importlib.util.spec_from_loader(name, importlib.machinery.ExtensionFileLoader(name, str(path)))
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                return module.ekcpd_pelt_L2
    return None


def find_changes(x: np.ndarray, unit: str, step_p50_ms: float | None, threshold_pct: float) -> tuple[list[dict], list[dict]]:
    """(outliers, level shifts) of one series, by index. Points that are NaN (not measured)
    are left out of the search and never named as last good or first bad."""
    idx = np.flatnonzero(np.isfinite(x))
    v = x[idx].astype(np.float64)
    if v.size < MIN_SERIES:
        return [], []
    sigma = robust_sigma(v)
    level = float(np.median(v))
    # Noise under a tenth of the practical minimum decides nothing; as a floor it keeps the
    # penalty meaningful where most successive differences are exactly 0 (counts, a finding
    # absent from most cases), which would otherwise split the series at every wiggle.
    scale = max(abs(level), float(np.mean(np.abs(v))))
    floor = max(sigma, 0.1 * practical_min(unit, scale, step_p50_ms, threshold_pct), 1e-9 * max(scale, 1e-9))
    outliers, clean = [], v.copy()
    # each point's neighbours, two on each side (NaN past the ends), as one matrix
    padded = np.r_[np.full(2, np.nan), v, np.full(2, np.nan)]
    nb = np.stack([padded[0:-4], padded[1:-3], padded[3:-1], padded[4:]], axis=1)
    with np.errstate(all="ignore"):
        med = np.nanmedian(nb, axis=1)
        width = np.nanmax(nb, axis=1) - np.nanmin(nb, axis=1)
    enough = np.isfinite(nb).sum(axis=1) >= 2
    enough[0] = False  # the first capture has no history: a one-off there cannot be told from where the series starts
    candidates = np.flatnonzero(enough & (np.abs(v - med) > OUTLIER_SIGMAS * floor))
    for i in candidates:  # few: the practical minimum depends on the local level
        limit = max(OUTLIER_SIGMAS * floor, practical_min(unit, float(med[i]), step_p50_ms, threshold_pct))
        if width[i] <= limit and abs(v[i] - med[i]) > limit:
            outliers.append({"index": int(idx[i]), "value": float(v[i]), "baseline": float(med[i])})
            clean[i] = med[i]
    pen = PENALTY_SCALE * floor ** 2 * math.log(max(v.size, 2))
    try:  # KernelCPD with a linear kernel is PELT on the l2 cost, in ruptures' compiled code
        bkps = pelt_l2(clean, pen)
    except Exception:  # noqa: BLE001 - a degenerate series: no change rather than a crash
        bkps = [v.size]
    shifts = []
    bounds = [0, *bkps]
    for k in range(1, len(bounds) - 1):
        a = clean[bounds[k - 1]:bounds[k]]
        b = clean[bounds[k]:bounds[k + 1]]
        before, after = float(np.median(a)), float(np.median(b))
        spread = max(_spread(a), _spread(b), sigma)
        minimum = practical_min(unit, before, step_p50_ms, threshold_pct)
        if abs(after - before) > SHIFT_SPREAD_FACTOR * spread and abs(after - before) >= minimum:
            shifts.append({"index": int(idx[bounds[k]]), "last_index": int(idx[bounds[k] - 1]),
                           "before": {"level": before, "spread": _spread(a), "cases": int(a.size)},
                           "after": {"level": after, "spread": _spread(b), "cases": int(b.size)}})
    return outliers, shifts


def trend(summary, findings, kernels, *, order_by: str = "time", group_by=None, threshold_pct: float = THRESHOLD_PCT,
          baseline: str | None = None, compare_pair=None) -> dict:
    """The trend of an archive from batch's tables (pandas DataFrames). ``group_by(path)``
    returns the user's extra group key; ``compare_pair(before_row, after_row)`` returns the
    compare result of two cases (or None), used at each change."""
    ok = summary[summary["status"] == "ok"].copy()
    failed = summary[summary["status"] != "ok"]
    names = case_names(summary)
    ok["_name"] = ok["case_id"].map(names)
    has_time = order_by == "time" and "capture_start_ns" in ok and ok["capture_start_ns"].notna().all() and len(ok)
    order_source = "capture time" if has_time else "case name (natural order)"
    groups_out, changes, ungrouped = [], [], []
    # a case that abstained measured nothing to follow: in no series (it made the others' series unrelated)
    abstained = ok["headline"].astype(str).str.startswith(ABSTAINED) if "headline" in ok else np.zeros(len(ok), bool)
    if abstained.any():
        ungrouped.append({"key": "not enough to judge", "reason": "each case abstained ('Not enough to judge'): nothing "
                          "measured to follow over time", "cases": [{"name": name, "case_id": case_id, "label": date_label(name),
                                                                     "time": _iso(start_ns) if has_time else None,
                                                                     "report": report}
                                                                    for name, case_id, start_ns, report in
                                                                    zip(ok["_name"][abstained], ok["case_id"][abstained],
                                                                        ok["capture_start_ns"][abstained],
                                                                        ok["report_html"][abstained])]})
        ok = ok[~abstained]
    ok["_key"] = group_keys(ok, group_by)
    fidx = findings if len(findings) else None
    for key, rows in ok.groupby("_key", sort=True):
        rows = (rows.sort_values(["capture_start_ns", "_name"], kind="stable") if has_time else
                rows.iloc[sorted(range(len(rows)), key=lambda i: natural_key(rows["_name"].iloc[i]))])
        label = _group_label(key, group_by is not None)
        cases = [{"name": name, "case_id": case_id, "time": _iso(start_ns) if has_time else None, "label": date_label(name),
                  "report": report}
                 for name, case_id, start_ns, report in zip(rows["_name"], rows["case_id"], rows["capture_start_ns"],
                                                             rows["report_html"])]
        if len(rows) < 2:
            ungrouped.append({"key": label, "cases": cases, "reason": "no other capture of this workload "
                              "(device model and count, world size, program" + (", group" if group_by else "") + ")"})
            continue
        series = _series(rows, fidx, kernels)
        step_p50 = float(np.nanmedian(rows["step_p50_ms"].to_numpy(np.float64))) if rows["step_p50_ms"].notna().any() else None
        group_changes = _group_changes(label, rows, cases, series, step_p50, threshold_pct)
        _attach_causes(group_changes, rows, compare_pair)
        # in capture order, the budgets first at one case
        group_changes.sort(key=lambda change: (change["_first"], _metric_rank(change["metric"]), change["metric"]))
        gate = _gate(group_changes, cases, series, baseline, step_p50, threshold_pct)
        for change in group_changes:
            del change["_first"]
        changes.extend(group_changes)
        groups_out.append({"key": label, "signature": dict(zip(SIGNATURE, key[:len(SIGNATURE)])), "cases": cases,
                           "series": {name: {"unit": unit, "values": _series_values(values)}
                                      for name, (unit, _lower, values) in series.items()},
                           "verdict": _verdict(label, group_changes, cases), "latest_regressed": gate})
    return {
        "schema": SCHEMA,
        "order": order_source,
        "threshold_pct": threshold_pct,
        "method": {"noise": "sigma from the median absolute successive difference / 0.954",
                   "outlier": f"farther than {OUTLIER_SIGMAS:g} sigma and the practical minimum from the median of its "
                              "two neighbours each side, which agree with each other",
                   "level_shift": f"ruptures PELT (l2, min segment 2, penalty {PENALTY_SCALE:g} sigma^2 log n); kept when the "
                                  f"medians differ by more than {SHIFT_SPREAD_FACTOR:g}x the within-segment spread and the "
                                  "practical minimum"},
        "groups": groups_out,
        "ungrouped": ungrouped,
        "failed": [{"name": names.get(case_id, path), "error": error}
                   for case_id, path, error in zip(failed["case_id"], failed["path"], failed["error"])],
        "changes": changes,
        "gate": {"regressed": any(g["latest_regressed"] for g in groups_out),
                 "groups": [g["key"] for g in groups_out if g["latest_regressed"]],
                 "baseline": baseline,
                 "rule": ("the latest capture against the baseline's level, per budget series" if baseline else
                          "the latest capture in a segment opened by a regressed level shift of a budget series")},
    }


def _series_values(values) -> list[float | None]:
    """A series as the contract writes it: 6 decimals, None where not measured."""
    return [None if not np.isfinite(value) else round(float(value), 6) for value in values]


def _group_changes(label: str, rows, cases: list[dict], series: dict, step_p50: float | None,
                   threshold_pct: float) -> list[dict]:
    """The outliers and level shifts of each of a group's series, series by series (causes not yet attached)."""
    group_changes = []
    for name, (unit, lower_better, values) in series.items():
        outliers, shifts = find_changes(np.asarray(values, np.float64), unit, step_p50, threshold_pct)
        for outlier in outliers:
            index = outlier["index"]
            worse = None if lower_better is None else (outlier["value"] > outlier["baseline"]) == lower_better
            group_changes.append(_change(label, name, unit, "outlier", worse, rows, index - 1 if index else None, index,
                                         {"level": outlier["baseline"], "spread": None, "cases": None},
                                         {"level": outlier["value"], "spread": None, "cases": 1}, cases))
        for shift in shifts:
            worse = None if lower_better is None else (shift["after"]["level"] > shift["before"]["level"]) == lower_better
            group_changes.append(_change(label, name, unit, "level_shift", worse, rows, shift["last_index"], shift["index"],
                                         shift["before"], shift["after"], cases))
    return group_changes


def _iso(t) -> str | None:
    import datetime

    try:
        return datetime.datetime.fromtimestamp(int(t) / 1e9, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def _group_label(key: tuple, user: bool) -> str:
    models, _count, world, program = key[:4]  # models already counted: "8x NVIDIA H100 80GB HBM3"
    text = f"{models or 'no GPU'}, world size {world}, {program or 'unknown program'}"
    return text + (f", {key[4]}" if user else "")


def is_budget(metric: str) -> bool:
    """A series the verdict line and the gate read: step time and serving figures, and the kernels'
    time per call of a group without steps."""
    return metric in BUDGETS or metric.startswith("kernel_call:")


def _metric_rank(metric: str) -> int:
    return 0 if is_budget(metric) else 1 if metric.startswith("finding:") else 3 if metric.startswith("kernel:") else 2


def _series(g, fidx, kernels) -> dict:
    """The group's series, one value per case in order: the per-step figures, each finding's ms
    per step (0 where a case with steps did not report it), the top kernels' ms per step (mean
    over the case's devices; 0 where absent), or in a group without steps their ns per call
    (:func:`_call_series`). One pivot per table, no per-case lookups."""
    out = {}
    ids = g["case_id"].tolist()
    has_steps = g["step_p50_ms"].notna().to_numpy() if "step_p50_ms" in g else np.zeros(len(ids), bool)
    stepless = not has_steps.any()
    for name, (unit, lower) in BASE_SERIES.items():
        if name in g and g[name].notna().sum() >= 2:
            # busy % of a window that is the GPU activity itself is no better or worse by itself
            out[name] = (unit, None if stepless and unit == "%" else lower, g[name].to_numpy(np.float64, na_value=np.nan))
    if fidx is not None:
        f = fidx[fidx["case_id"].isin(ids) & (fidx["id"] != "healthy")]
        if len(f):
            table = f.pivot_table(index="case_id", columns="id", values="ms_per_step", aggfunc="first").reindex(ids)
            present = f.assign(one=1).pivot_table(index="case_id", columns="id", values="one", aggfunc="first").reindex(ids)
            for fid in sorted(table.columns):
                vals = table[fid].to_numpy(np.float64, na_value=np.nan)
                absent = present[fid].isna().to_numpy()
                vals = np.where(absent & has_steps, 0.0, vals)
                out[f"finding:{fid}"] = ("ms/step", True, vals)
    if kernels is not None and len(kernels):
        k = kernels[kernels["case_id"].isin(ids)]
        if len(k) and stepless:  # no ms per step without steps: the time per call instead
            out.update(_call_series(k, ids) if "ns_per_call" in k else {})
        elif len(k):
            per = k.groupby(["case_id", "name"])["ms_per_step"].mean().unstack("name").reindex(ids)
            # a graph-level capture records replays, not the kernels inside them: a kernel it lacks
            # was not measured there (NaN, left out of the search), not absent (0)
            graph_level = (k.assign(g=k["kind"].astype(str) == "graph").groupby("case_id")["g"].any()
                           .reindex(ids, fill_value=False).to_numpy(bool)) if "kind" in k else np.zeros(len(ids), bool)
            top = per.mean().sort_values(ascending=False).head(TOP_KERNELS).index
            for name in top:
                vals = per[name].to_numpy(np.float64, na_value=np.nan)
                # a kernel's time alone is neither better nor worse (the work may have moved): "changed"
                out[f"kernel:{name}"] = ("ms/step", None, np.where(np.isnan(vals) & ~graph_level, 0.0, vals))
    return out


def _call_series(kernels, ids: list) -> dict:
    """The ns per call of a group's kernels without steps (mean over a case's devices; NaN where a
    case did not list the kernel: no call, no time per call; lower is better): the
    :data:`TOP_KERNELS` listed by the most cases (each case lists its devices' top kernels by
    time), then the longest per call."""
    measured = kernels[kernels["ns_per_call"].notna()]
    if not len(measured):
        return {}
    per = measured.groupby(["case_id", "name"])["ns_per_call"].mean().unstack("name").reindex(ids)
    top = sorted(per.columns, key=lambda name: (-int(per[name].notna().sum()), -float(np.nanmean(per[name])), name))
    return {f"kernel_call:{name}": ("ns/call", True, per[name].to_numpy(np.float64, na_value=np.nan))
            for name in top[:TOP_KERNELS]}


def _change(group, metric, unit, kind, worse, g, last, first, before, after, cases) -> dict:
    def r(v):
        return None if v is None else round(float(v), 6)
    b, a = before["level"], after["level"]
    return {"group": group, "metric": metric, "unit": unit, "kind": kind,
            "direction": "changed" if worse is None else "regressed" if worse else "improved",
            "last_good": cases[last]["name"] if last is not None and last >= 0 else None,
            "first_bad": cases[first]["name"], "first_bad_time": cases[first]["time"],
            "before": {"level": r(b), "spread": r(before.get("spread")), "cases": before.get("cases")},
            "after": {"level": r(a), "spread": r(after.get("spread")), "cases": after.get("cases")},
            "change_pct": r(100.0 * (a - b) / abs(b)) if b else None, "findings": [], "kernels": [],
            "_rows": (last, first), "_first": first}


def _attach_causes(changes, g, compare_pair) -> None:
    """The findings and kernels that moved where each change happened: compare's statuses on
    the analyses of the last good and the first bad case (each pair compared once)."""
    done = {}
    for c in changes:
        last, first = c.pop("_rows")
        if compare_pair is None or last is None or last < 0:
            continue
        if (last, first) not in done:
            done[(last, first)] = compare_pair(g.iloc[last], g.iloc[first])
        cmp = done[(last, first)]
        if not cmp:
            continue
        c["findings"] = [{"id": f["id"], "status": f["status"], "before_ms_per_step": f["before_ms_per_step"],
                          "after_ms_per_step": f["after_ms_per_step"]}
                         for f in cmp.get("findings") or [] if f["status"] and f["status"] != "persists"]
        noise = (cmp.get("method") or {}).get("noise_ms_per_step") or 0.0
        c["kernels"] = [{"name": k["name"], "before_ms_per_step": k["before_ms_per_step"],
                         "after_ms_per_step": k["after_ms_per_step"]} for k in kernel_movers(cmp.get("kernels") or [], noise)]
        latency_note = (cmp.get("serving") or {}).get("latency")
        if c["metric"] == "e2el_p50_ms" and latency_note:  # longer answers, not a slower server (compare_serving)
            # the note compares the two captures either side of the change, not the segments' levels
            c["direction"], c["explained"] = "changed", f"{c['last_good']} -> {c['first_bad']}: {latency_note}"


KERNEL_MOVERS = 3  # kernels named each way (grew, shrank) at a change


def kernel_growth(kernel: dict) -> float:
    """A kernel's change in ms per step, after - before; a side that did not measure it (a graph-level
    capture records replays, not the kernels inside them) counts 0: a kernel only the other side
    shows appeared or vanished there."""
    return (kernel.get("after_ms_per_step") or 0.0) - (kernel.get("before_ms_per_step") or 0.0)


def kernel_movers(kernels: list[dict], noise_ms: float) -> list[dict]:
    """The kernels that moved at a change, beyond the noise: those that appeared or grew, largest
    growth first, then those that vanished or shrank, largest first (:data:`KERNEL_MOVERS` each): an
    eager regression names the kernels that now run, not only the CUDA graph that went."""
    moved = [kernel for kernel in kernels if abs(kernel_growth(kernel)) >= max(noise_ms, 1e-9)]
    grew = sorted((kernel for kernel in moved if kernel_growth(kernel) > 0), key=lambda kernel: -kernel_growth(kernel))
    shrank = sorted((kernel for kernel in moved if kernel_growth(kernel) < 0), key=kernel_growth)
    return grew[:KERNEL_MOVERS] + shrank[:KERNEL_MOVERS]


def _gate(changes, cases, series, baseline, step_p50, threshold_pct) -> bool:
    """True when the latest case sits in a regressed segment of a budget series: a regressed
    level shift with no later shift of that series back. With ``baseline`` (a case name), the
    latest case's level is compared with the baseline case's segment level instead."""
    if baseline is not None:
        names = [c["name"] for c in cases]
        hit = [i for i, n in enumerate(names) if matches_baseline(n, baseline)]
        if not hit:
            return False
        for metric in [*BUDGETS, *(name for name in series if name.startswith("kernel_call:"))]:
            if metric not in series:
                continue
            unit, lower, vals = series[metric]
            vals = np.asarray(vals, np.float64)
            base, last = vals[hit[0]], vals[-1]
            if not (np.isfinite(base) and np.isfinite(last)):
                continue
            worse = (last - base) if lower else (base - last)
            if worse >= practical_min(unit, base, step_p50, threshold_pct) and worse > SHIFT_SPREAD_FACTOR * robust_sigma(vals):
                return True
        return False
    for metric in [*BUDGETS, *(name for name in series if name.startswith("kernel_call:"))]:
        shifts = [c for c in changes if c["metric"] == metric and c["kind"] == "level_shift"]
        if shifts and shifts[-1]["direction"] == "regressed":
            return True
    for metric in QUALITY_SERIES:  # the latest segment of the outputs' shape opened by a quality finding
        shifts = [c for c in changes if c["metric"] == metric and c["kind"] == "level_shift"]
        if shifts and any(f["id"] in QUALITY_FINDINGS and f["status"] == "new" for f in shifts[-1]["findings"]):
            return True
    return False


def _metric_words(metric: str) -> str:
    if metric.startswith("kernel_call:"):
        return f"{metric[12:][:60]} time per call"
    return re.sub(r"_(p\d\d)_ms$", r" \1", metric).replace("_", " ")


def _verdict(label, changes, cases) -> str:
    shifts = [c for c in changes if c["kind"] == "level_shift"]
    outliers = [c for c in changes if c["kind"] == "outlier" and is_budget(c["metric"])]
    if len(cases) < MIN_SERIES:
        return (f"{label}: {len(cases)} captures, too few to tell a change from noise (at least {MIN_SERIES}); "
                "compare two of them with tracetriage compare")
    if not shifts and not outliers:
        return f"{label}: no change beyond noise over {len(cases)} captures"
    parts, seen = [], set()
    for c in shifts:
        if not is_budget(c["metric"]) or c["first_bad"] in seen:  # one line per change point: its first budget
            continue
        seen.add(c["first_bad"])
        causes = [f"{f['id']} {f['status']}" + (f" at {f['after_ms_per_step']:.3g} ms/step" if f["status"] == "new" and
                                                  f["after_ms_per_step"] is not None else "") for f in c["findings"]]
        levels = (f"{fmt_ns(c['before']['level'])} -> {fmt_ns(c['after']['level'])} per call" if c["unit"] == "ns/call"
                  else f"{c['before']['level']:.3g} -> {c['after']['level']:.3g} {c['unit']}")
        parts.append(f"from {c['first_bad']} on: {_metric_words(c['metric'])} {c['change_pct']:+.0f}% "
                     f"({levels}), {c['direction']}"
                     + (f"; {', '.join(causes)}" if causes else ""))
    for c in shifts:  # the answers changed with a deploy: a secondary series' shift that compare found a quality finding at
        quality = [f"{f['id']} {f['status']}" for f in c["findings"] if f["id"] in QUALITY_FINDINGS and f["status"] == "new"]
        if quality and c["metric"] in QUALITY_SERIES and c["first_bad"] not in seen:
            seen.add(c["first_bad"])
            parts.append(f"from {c['first_bad']} on: {', '.join(quality)} ({_metric_words(c['metric'])} "
                         f"{c['change_pct']:+.0f}%, {c['before']['level']:.3g} -> {c['after']['level']:.3g} {c['unit']}: "
                         "the answers changed with the deploy)")
    for c in outliers:
        if c["first_bad"] in seen:
            continue
        seen.add(c["first_bad"])
        parts.append(f"{c['first_bad']} alone: {_metric_words(c['metric'])} {c['change_pct']:+.0f}% (an outlier, not a shift)")
    if not parts:
        parts = [f"{len(shifts)} shift(s) in secondary series; the budgets (step time, serving percentiles, kernel time "
                 "per call) held"]
    return f"{label}: " + "; ".join(parts)


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
    ok = summary[summary["status"] == "ok"]
    keys = group_keys(ok, group_by)
    if len(keys) > 1 and len(set(keys)) == len(keys) and len(set(group_keys(ok))) < len(keys):
        path, case_id = str(ok["path"].iloc[0]), ok["case_id"].iloc[0]
        how = (f"the component at {key} of {cases.get(path, path)}: {GROUP_BY_HINT}"
               if key.lstrip("-").isdigit() else f"its {key[4:]}: every case's differs")
        raise UsageError(None, f"--group-by {key} leaves every case alone in its group, so there is no series: "
                               f"for {names.get(case_id, path)} it picked {group_by(path)!r} ({how})")


def coerce_tables(summary, findings, kernels):
    """The batch tables with every column trend reads coerced to its type (the folder is input
    like any other: a column of the wrong type becomes missing values, never a crash)."""
    import pandas as pd

    def numbers(frame, columns):
        for column in columns:
            frame[column] = (pd.to_numeric(frame[column], errors="coerce").astype("float64") if column in frame
                             else float("nan"))

    def texts(frame, columns):
        for column in columns:
            frame[column] = frame[column].astype("string").fillna("") if column in frame else ""

    summary = summary.copy()
    numbers(summary, list(BASE_SERIES))
    for column in ("capture_start_ns", "device_count", "world_size"):
        values = (pd.to_numeric(summary[column], errors="coerce") if column in summary
                  else pd.Series(float("nan"), index=summary.index))
        summary[column] = values.where(values.abs() < 2**62).round().astype("Int64")
    texts(summary, ["case_id", "path", "status", "error", "device_model", "program", "report_json", "report_html"])
    findings = findings.copy()
    numbers(findings, ["ms_per_step"])
    texts(findings, ["case_id", "id"])
    if kernels is not None:
        kernels = kernels.copy()
        numbers(kernels, ["ms_per_step"])
        texts(kernels, ["case_id", "name"])
    return summary, findings, kernels
