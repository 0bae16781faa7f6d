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
* **Series**: the per-step figures of each case (ms per step, counts per step, busy % — a share of
  each case's own window, so a shift of it is ``changed``, never better or worse, as in compare —,
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

from dataclasses import replace

import numpy as np

from tracetriage.analyzers.compare_metrics import METRICS  # the series are compare's metrics
from tracetriage.analyzers.trend_cases import (
    SIGNATURE,
    case_names,
    case_paths,
    check_grouping,
    coerce_tables,
    date_label,
    group_by_key,
    group_keys,
    names_in_sequence,
    natural_key,
)
from tracetriage.analyzers.trend_changes import (
    MIN_SERIES,
    OUTLIER_SIGMAS,
    PENALTY_SCALE,
    SHIFT_SPREAD_FACTOR,
    THRESHOLD_PCT,
    find_changes,
    pelt_l2,
)
from tracetriage.analyzers.trend_records import (
    Case,
    Change,
    ChangeFinding,
    ChangeKernel,
    Compared,
    ComparedKernel,
    Level,
    rounded6,
)
from tracetriage.analyzers.trend_verdict import gate, metric_rank, verdict
from tracetriage.contract import load
from tracetriage.wording import noise_words, ratio_text

# the trend's parts, by job: cases and groups (trend_cases), one series' changes (trend_changes), a group's
# verdict and gate (trend_verdict); their public names are the trend's, as callers import them from here
__all__ = ["MIN_SERIES", "SCHEMA", "THRESHOLD_PCT", "case_names", "case_paths", "check_grouping", "coerce_tables",
           "find_changes", "group_by_key", "kernel_movers", "pelt_l2", "trend"]

SCHEMA = "tracetriage.trend/1"
TOP_KERNELS = 8  # kernels per group given a series: the largest by mean ms per step

# series name -> (unit, lower is better: None for neither), compare's metrics; findings and kernels
# are added per group.
BASE_SERIES = {name: (unit, lower) for name, unit, lower in METRICS}
ABSTAINED = "Not enough to judge"  # the headline of a case that abstained (analyzers/rules/headline.py)
UNORDERED = ("no order in time: their captures record no start time, and their names are labels, not a sequence "
             "(they hold no date and differ in more than a number); a change between them is a difference of "
             "experiments, not of time: compare two of them, or give --order-by name if the names do sort in time")


def trend(summary, findings, kernels, *, order_by: str = "time", group_by=None, threshold_pct: float = THRESHOLD_PCT,
          baseline: str | None = None, compare_pair=None) -> dict:
    """The trend of an archive from batch's tables (pandas DataFrames). ``group_by(path)``
    returns the user's extra group key; ``compare_pair(before_row, after_row)`` returns the
    compare result of two cases (or None), used at each change."""
    ok = summary[summary["status"] == "ok"].copy()
    failed = summary[summary["status"] != "ok"]
    names = case_names(summary)
    ok["_name"] = ok["case_id"].map(names)
    has_time = bool(order_by == "time" and "capture_start_ns" in ok and ok["capture_start_ns"].notna().all() and len(ok))
    order_source = "capture time" if has_time else "case name (natural order)"
    groups_out, changes, ungrouped, regressed_groups = [], [], [], []
    # a case that abstained measured nothing to follow: in no series (it made the others' series unrelated)
    abstained = ok["headline"].astype(str).str.startswith(ABSTAINED) if "headline" in ok else np.zeros(len(ok), bool)
    if abstained.any():
        ungrouped.append(_abstained_entry(ok[abstained], has_time))
        ok = ok[~abstained]
    ok["_key"] = group_keys(ok, group_by)
    fidx = findings if len(findings) else None
    for key, rows in ok.groupby("_key", sort=True):
        rows = (rows.sort_values(["capture_start_ns", "_name"], kind="stable") if has_time else
                rows.iloc[sorted(range(len(rows)), key=lambda i: natural_key(rows["_name"].iloc[i]))])
        label = _group_label(key, group_by is not None)
        cases = [Case(name, case_id, _iso(start_ns) if has_time else None, date_label(name), report)
                 for name, case_id, start_ns, report in zip(rows["_name"], rows["case_id"], rows["capture_start_ns"],
                                                             rows["report_html"])]
        why_not = _why_not_a_series(rows, group_by, ordered=has_time or order_by != "time")
        if why_not:
            ungrouped.append({"key": label, "cases": [case.to_contract() for case in cases], "reason": why_not})
            continue
        group, group_changes, latest_regressed = _group(key, label, rows, cases, fidx, kernels,
                                                        threshold_pct, baseline, compare_pair)
        if latest_regressed:
            regressed_groups.append(label)
        changes.extend(group_changes)
        groups_out.append(group)
    if not has_time and order_by == "time" and not groups_out and any(entry["reason"] == UNORDERED for entry in ungrouped):
        order_source = "none: no capture time recorded, and the case names are labels, not a sequence"
    return {
        "schema": SCHEMA,
        "order": order_source,
        "threshold_pct": threshold_pct,
        "method": dict(METHOD),
        "groups": groups_out,
        "ungrouped": ungrouped,
        "failed": [{"name": names.get(case_id, path), "error": error}
                   for case_id, path, error in zip(failed["case_id"], failed["path"], failed["error"])],
        "changes": [change.to_contract() for change in changes],
        "gate": {"regressed": bool(regressed_groups),
                 "groups": regressed_groups,
                 "baseline": baseline,
                 # with a baseline every group is read against it; without, a group of fewer than MIN_SERIES
                 # captures is "too few to tell" and not judged: none judged is the gate's inconclusive
                 "judged": [group["key"] for group in groups_out if baseline or len(group["cases"]) >= MIN_SERIES],
                 "rule": ("the latest capture against the baseline's level, per budget series" if baseline else
                          "the latest capture in a segment opened by a regressed level shift of a budget series")},
    }


METHOD = {"noise": "sigma from the median absolute successive difference / 0.954",
          "outlier": f"farther than {OUTLIER_SIGMAS:g} sigma and the practical minimum from the median of its "
                     "two neighbours each side, which agree with each other",
          "level_shift": f"ruptures PELT (l2, min segment 2, penalty {PENALTY_SCALE:g} sigma^2 log n); kept when the "
                         f"medians differ by more than {SHIFT_SPREAD_FACTOR:g}x the within-segment spread and the "
                         "practical minimum"}


def _abstained_entry(rows, has_time: bool) -> dict:
    """The ungrouped entry of the cases that abstained: nothing measured to follow over time."""
    return {"key": "not enough to judge", "reason": "each case abstained ('Not enough to judge'): nothing "
            "measured to follow over time", "cases": [{"name": name, "case_id": case_id, "label": date_label(name),
                                                       "time": _iso(start_ns) if has_time else None, "report": report}
                                                      for name, case_id, start_ns, report in
                                                      zip(rows["_name"], rows["case_id"], rows["capture_start_ns"],
                                                          rows["report_html"])]}


def _why_not_a_series(rows, group_by, ordered: bool) -> str | None:
    """Why a group's cases make no series (one case; no order in time), or None."""
    if len(rows) < 2:
        return ("no other capture of this workload "
                "(device model and count, world size, program" + (", group" if group_by else "") + ")")
    if not ordered and not names_in_sequence(list(rows["_name"])):
        return UNORDERED
    return None


def _group(key, label: str, rows, cases: list[Case], fidx, kernels, threshold_pct: float, baseline: str | None,
           compare_pair) -> tuple[dict, list[Change], bool]:
    """One group's contract entry, its changes (causes attached, in capture order) and whether its
    latest capture regressed."""
    series = _series(rows, fidx, kernels)
    step_p50 = float(np.nanmedian(rows["step_p50_ms"].to_numpy(np.float64))) if rows["step_p50_ms"].notna().any() else None
    group_changes = _group_changes(label, rows, cases, series, step_p50, threshold_pct)
    group_changes = _with_causes(group_changes, rows, compare_pair)
    # in capture order, the budgets first at one case
    group_changes.sort(key=lambda change: (change.first_row, metric_rank(change.metric), change.metric))
    latest_regressed = gate(group_changes, cases, series, baseline, step_p50, threshold_pct)
    group = {"key": label, "signature": dict(zip(SIGNATURE, key[:len(SIGNATURE)])),
             "cases": [case.to_contract() for case in cases],
             "series": {name: {"unit": unit, "values": _series_values(values)}
                        for name, (unit, _lower, values) in series.items()},
             "verdict": verdict(label, group_changes, cases), "latest_regressed": latest_regressed}
    return group, group_changes, latest_regressed


def _series_values(values) -> list[float | None]:
    """A series as the contract writes it: 6 decimals, None where not measured."""
    return [None if not np.isfinite(value) else round(float(value), 6) for value in values]


def _group_changes(label: str, rows, cases: list[Case], series: dict, step_p50: float | None,
                   threshold_pct: float) -> list[Change]:
    """The outliers and level shifts of each of a group's series, series by series (causes not yet attached)."""
    group_changes = []
    for name, (unit, lower_better, values) in series.items():
        outliers, shifts = find_changes(np.asarray(values, np.float64), unit, step_p50, threshold_pct)
        for outlier in outliers:
            index = outlier.index
            worse = None if lower_better is None else (outlier.value > outlier.baseline) == lower_better
            group_changes.append(_change(label, name, unit, "outlier", worse, index - 1 if index else None, index,
                                         Level(outlier.baseline, None, None), Level(outlier.value, None, 1), cases))
        for shift in shifts:
            worse = None if lower_better is None else (shift.after.level > shift.before.level) == lower_better
            group_changes.append(_change(label, name, unit, "level_shift", worse, shift.last_index, shift.index,
                                         shift.before, shift.after, cases))
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


def _series(g, fidx, kernels) -> dict:
    """The group's series, one value per case in order: the per-step figures, each finding's ms
    per step (0 where a case with steps did not report it), the top kernels' ms per step (mean
    over the case's devices; 0 where absent), or in a group without steps their ns per call
    (:func:`_call_series`). One pass over each table, no per-case lookups."""
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
        for fid, (vals, absent) in _finding_columns(f, ids).items():
            out[f"finding:{fid}"] = ("ms/step", True, np.where(absent & has_steps, 0.0, vals))
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


def _finding_columns(f, ids: list) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each finding's ms per step in the cases ``ids`` (the first value a case reported, NaN where it
    reported none) and where the case did not report the finding at all, by finding id in sorted order:
    those with some value. What ``f.pivot_table(index="case_id", columns="id", values="ms_per_step",
    aggfunc="first")`` gives (and a pivot of ones for the reported cells), read in one pass over the rows:
    two pivots were 10 ms each per group (tests/test_trend.py compares the two on random tables)."""
    first: dict[str, dict] = {}
    reported: dict[str, set] = {}
    known = f["id"].notna().to_numpy(bool)
    values = f["ms_per_step"].to_numpy(np.float64, na_value=np.nan).tolist()
    for case, fid, value, ok in zip(f["case_id"].tolist(), f["id"].tolist(), values, known.tolist()):
        if not ok:  # a row without a finding id is in no column
            continue
        reported.setdefault(fid, set()).add(case)
        if value == value:  # the first value a case reported, NaN rows skipped (groupby first)
            first.setdefault(fid, {}).setdefault(case, value)
    return {fid: (np.array([first[fid].get(case, np.nan) for case in ids], np.float64),
                  np.array([case not in reported[fid] for case in ids], bool)) for fid in sorted(first)}


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


def _change(group: str, metric: str, unit: str, kind: str, worse: bool | None, last: int | None, first: int,
            before: Level, after: Level, cases: list[Case]) -> Change:
    """A change of one series, its causes not yet attached: ``last`` / ``first`` the rows either side."""
    return Change(group, metric, unit, kind, "changed" if worse is None else "regressed" if worse else "improved",
                  cases[last].name if last is not None and last >= 0 else None, cases[first].name, cases[first].time,
                  before.rounded(), after.rounded(),
                  rounded6(100.0 * (after.level - before.level) / abs(before.level)) if before.level else None,
                  last_row=last, first_row=first)


def _with_causes(changes: list[Change], g, compare_pair) -> list[Change]:
    """Each change with the findings and kernels that moved where it happened: compare's statuses on
    the analyses of the last good and the first bad case (each pair compared once)."""
    done, out = {}, []
    for change in changes:
        last, first = change.last_row, change.first_row
        if compare_pair is None or last is None or last < 0:
            out.append(change)
            continue
        if (last, first) not in done:
            done[(last, first)] = compare_pair(g.iloc[last], g.iloc[first])
        comparison = done[(last, first)]
        out.append(_caused(change, comparison) if comparison else change)
    return out


def _caused(change: Change, comparison: dict | Compared) -> Change:
    """``change`` with what compare (its contract) found moved between the cases either side of it."""
    compared = load(Compared, comparison)
    findings = tuple(ChangeFinding(finding.id, finding.status, finding.before_ms_per_step, finding.after_ms_per_step)
                     for finding in compared.findings if finding.status and finding.status != "persists")
    noise = (compared.method.noise_ms_per_step if compared.method else None) or 0.0
    kernels = tuple(ChangeKernel(kernel.name, kernel.before_ms_per_step, kernel.after_ms_per_step)
                    for kernel in kernel_movers(compared.kernels, noise))
    change = replace(change, findings=findings, kernels=kernels, pair_test=pair_test(change.metric, compared))
    latency_note = compared.serving.latency if compared.serving else None
    if change.metric == "e2el_p50_ms" and latency_note:  # longer answers, not a slower server (compare_serving)
        # the note compares the two captures either side of the change, not the segments' levels
        change = replace(change, direction="changed", explained=f"{change.last_good} -> {change.first_bad}: {latency_note}")
    return change


STEP_PERCENTILE_KEYS = {"step_p50_ms": ("status", "ratio", "ci95"), "step_p99_ms": ("p99_status", "p99_ratio", "p99_ci95")}


def pair_test(metric: str, compared: Compared) -> str | None:
    """A step percentile's change as compare's step test reads the two captures either side of it, on
    the rank whose ratio moved most: ``compare of the captures either side: after/before 0.05 [95% CI
    0.05-1.03], within noise / not significant (60 / 400 steps)``; None for another series or without
    a test. The series' shift is judged over many captures, the pair's test within two: both are said."""
    keys = STEP_PERCENTILE_KEYS.get(metric)
    tested = [step for step in compared.step_time if keys and getattr(step, keys[1]) is not None]
    if not tested:
        return None
    status_key, ratio_key, ci_key = keys
    step = max(tested, key=lambda step: abs(np.log(max(getattr(step, ratio_key), 1e-9))))
    status, ratio, interval = getattr(step, status_key), getattr(step, ratio_key), getattr(step, ci_key)
    if interval is None:  # a p99 of too few steps: not judged, and said why
        return f"compare of the captures either side: after/before {ratio_text(ratio)}, {step.p99_reason or status}"
    low, high = interval
    words = noise_words(status, step.before_count, step.after_count, compared.threshold_pct)
    return (f"compare of the captures either side: after/before {ratio_text(ratio)} [95% CI {ratio_text(low)}-"
            f"{ratio_text(high)}], {words}")


KERNEL_MOVERS = 3  # kernels named each way (grew, shrank) at a change


def kernel_movers(kernels: tuple[ComparedKernel, ...], noise_ms: float) -> list[ComparedKernel]:
    """The kernels that moved at a change, beyond the noise: those that appeared or grew, largest
    growth first, then those that vanished or shrank, largest first (:data:`KERNEL_MOVERS` each): an
    eager regression names the kernels that now run, not only the CUDA graph that went."""
    moved = [kernel for kernel in kernels if abs(kernel.growth()) >= max(noise_ms, 1e-9)]
    grew = sorted((kernel for kernel in moved if kernel.growth() > 0), key=lambda kernel: -kernel.growth())
    shrank = sorted((kernel for kernel in moved if kernel.growth() < 0), key=ComparedKernel.growth)
    return grew[:KERNEL_MOVERS] + shrank[:KERNEL_MOVERS]
