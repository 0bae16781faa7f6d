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
* **The latest capture alone** (analyzers/trend_latest.py): a jump at the newest capture is no shift (a
  segment needs 2) and no outlier (nothing after it says it is alone); each budget series' latest value is
  judged against the captures of its segment before it by a one-sided prediction test (Student t over
  those n captures): worse by the practical minimum at p < 0.001 fails the gate, at p < 0.01 the gate is
  inconclusive (``gate.latest``).
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
from tracetriage.analyzers.trend_latest import FAIL_P as LATEST_FAIL_P
from tracetriage.analyzers.trend_latest import UNDECIDED_P as LATEST_UNDECIDED_P
from tracetriage.analyzers.trend_latest import judge_latest
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
from tracetriage.analyzers.trend_table import descending, group_means, is_missing, isin, numbers, starts_with
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
    """The trend of an archive from batch's tables (:class:`trend_table.Table`, coerced by
    :func:`coerce_tables`). ``group_by(path)`` returns the user's extra group key;
    ``compare_pair(before_row, after_row)`` returns the compare result of two cases (or None), used
    at each change; a row is a dict of the summary's columns."""
    failed = summary.take(summary["status"] != "ok")
    names = case_names(summary)
    ok, has_time = _analyzed(summary, names, order_by)
    order_source = "capture time" if has_time else "case name (natural order)"
    groups_out, changes, ungrouped, regressed_groups, latest_judged = [], [], [], [], []
    # a case that abstained measured nothing to follow: in no series (it made the others' series unrelated)
    abstained = starts_with(ok["headline"], ABSTAINED) if "headline" in ok else np.zeros(len(ok), bool)
    if abstained.any():
        ungrouped.append(_abstained_entry(ok.take(abstained), has_time))
        ok = ok.take(~abstained)
    keys = group_keys(ok, group_by)
    fidx = findings if len(findings) else None
    for key in sorted(set(keys)):
        rows = _in_order(ok.take([i for i, row_key in enumerate(keys) if row_key == key]), has_time)
        label = _group_label(key, group_by is not None)
        cases = [Case(name, case_id, _iso(start_ns) if has_time else None, date_label(name), report)
                 for name, case_id, start_ns, report in zip(rows["_name"], rows["case_id"], rows["capture_start_ns"],
                                                             rows["report_html"])]
        why_not = _why_not_a_series(rows, group_by, ordered=has_time or order_by != "time")
        if why_not:
            ungrouped.append({"key": label, "cases": [case.to_contract() for case in cases], "reason": why_not})
            continue
        group, group_changes, latest_regressed, latest = _group(key, label, rows, cases, fidx, kernels,
                                                                threshold_pct, baseline, compare_pair)
        latest_judged.extend(latest)
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
        "failed": _failed(failed, names),
        "changes": [change.to_contract() for change in changes],
        "gate": {"regressed": bool(regressed_groups),
                 "groups": regressed_groups,
                 "baseline": baseline,
                 # with a baseline every group is read against it; without, a group of fewer than MIN_SERIES
                 # captures is "too few to tell" and not judged: none judged is the gate's inconclusive
                 "judged": [group["key"] for group in groups_out if baseline or len(group["cases"]) >= MIN_SERIES],
                 "rule": ("the latest capture against the baseline's level, per budget series" if baseline else
                          "the latest capture in a segment opened by a regressed level shift of a budget series, or "
                          "alone worse than the captures of its segment before it (one-sided prediction test, p < "
                          f"{LATEST_FAIL_P:g}; p < {LATEST_UNDECIDED_P:g}: undecided, inconclusive)"),
                 # each budget series whose latest capture is worse than the captures before it: regressed, or
                 # undecided (beyond their spread, not beyond their noise): the gate is then inconclusive
                 "latest": latest_judged},
    }


def _failed(failed, names: dict) -> list[dict]:
    """The cases that failed: each by its name, as every case of the trend is named (its path below the
    archive's common folder, in the form batch recorded it), with batch's error without the path it
    begins with (``<path>: not a supported input ...``): "zz.sqlite: /abs/nightly/zz.sqlite: ..." named
    one capture two ways, one of them absolute (new-user trial 50)."""
    import os

    out = []
    for case_id, path, error in zip(failed["case_id"], failed["path"], failed["error"]):
        for given in (path, os.path.normpath(path) if path else path):  # "./bad/x.sqlite" is said "bad/x.sqlite: ..."
            if given and error.startswith(f"{given}: "):
                error = error[len(given) + 2:]
                break
        out.append({"name": names.get(case_id, path), "error": error})
    return out


def _analyzed(summary, names: dict, order_by: str):
    """The rows of the cases that were analyzed, each with its name (``_name``), and whether they are
    ordered by their capture times (every case has one, and ``order_by`` is time)."""
    ok = summary.take(summary["status"] == "ok")
    ok["_name"] = _object([names.get(case_id) for case_id in ok["case_id"].tolist()])
    has_time = bool(order_by == "time" and "capture_start_ns" in ok and not is_missing(ok["capture_start_ns"]).any()
                    and len(ok))
    return ok, has_time


def _in_order(rows, has_time: bool):
    """A group's rows (in table order, as pandas' groupby kept them) by capture time, then name (a stable
    sort), or by the names' natural order."""
    names = rows["_name"].tolist()
    if has_time:
        starts = rows["capture_start_ns"].tolist()
        order = sorted(range(len(rows)), key=lambda i: (starts[i], names[i]))
    else:
        order = sorted(range(len(rows)), key=lambda i: natural_key(names[i]))
    return rows.take(np.array(order, np.int64))


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
    if not ordered and not names_in_sequence(rows["_name"].tolist()):
        return UNORDERED
    return None


def _group(key, label: str, rows, cases: list[Case], fidx, kernels, threshold_pct: float, baseline: str | None,
           compare_pair) -> tuple[dict, list[Change], bool, list[dict]]:
    """One group's contract entry, its changes (causes attached, in capture order), whether its
    latest capture regressed and the latest capture's budgets worse than the captures before it
    (the gate's ``latest``)."""
    series = _series(rows, fidx, kernels)
    step_p50 = float(np.nanmedian(rows["step_p50_ms"])) if not np.isnan(rows["step_p50_ms"]).all() else None
    group_changes = _group_changes(label, rows, cases, series, step_p50, threshold_pct)
    group_changes = _with_causes(group_changes, rows, compare_pair)
    # in capture order, the budgets first at one case
    group_changes.sort(key=lambda change: (change.first_row, metric_rank(change.metric), change.metric))
    # the latest capture against the captures before it: a jump there is no shift nor outlier (trend_latest)
    latest = ([] if baseline is not None or len(cases) < MIN_SERIES else
              judge_latest(series, group_changes, cases, step_p50, threshold_pct))
    latest_regressed = gate(group_changes, cases, series, baseline, step_p50, threshold_pct, latest)
    group = {"key": label, "signature": dict(zip(SIGNATURE, key[:len(SIGNATURE)])),
             "cases": [case.to_contract() for case in cases],
             "series": {name: {"unit": unit, "values": _series_values(values)}
                        for name, (unit, _lower, values) in series.items()},
             "verdict": verdict(label, group_changes, cases, latest), "latest_regressed": latest_regressed}
    return group, group_changes, latest_regressed, [judged.to_contract(label, cases[-1].name) for judged in latest]


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
    has_steps = ~np.isnan(g["step_p50_ms"]) if "step_p50_ms" in g else np.zeros(len(ids), bool)
    stepless = not has_steps.any()
    for name, (unit, lower) in BASE_SERIES.items():
        if name in g and int((~np.isnan(g[name])).sum()) >= 2:
            # busy % of a window that is the GPU activity itself is no better or worse by itself
            out[name] = (unit, None if stepless and unit == "%" else lower, g[name].astype(np.float64))
    if fidx is not None:
        f = fidx.take(isin(fidx["case_id"], ids) & (fidx["id"] != "healthy"))
        for fid, (vals, absent) in _finding_columns(f["case_id"].tolist(), f["id"].tolist(), f["ms_per_step"],
                                                    ids).items():
            out[f"finding:{fid}"] = ("ms/step", True, np.where(absent & has_steps, 0.0, vals))
    if kernels is not None and len(kernels):
        k = kernels.take(isin(kernels["case_id"], ids))
        if len(k) and stepless:  # no ms per step without steps: the time per call instead
            out.update(_call_series(k, ids) if "ns_per_call" in k else {})
        elif len(k):
            per_names, per = _per_case(k["case_id"], k["name"], k["ms_per_step"], ids)
            # a graph-level capture records replays, not the kernels inside them: a kernel it lacks
            # was not measured there (NaN, left out of the search), not absent (0)
            if "kind" in k:
                graphs = {case for case, kind in zip(k["case_id"].tolist(), k["kind"].tolist()) if str(kind) == "graph"}
                graph_level = np.array([case in graphs for case in ids], bool)
            else:
                graph_level = np.zeros(len(ids), bool)
            for column in descending(_column_means(per))[:TOP_KERNELS]:
                vals = per[:, column]
                # a kernel's time alone is neither better nor worse (the work may have moved): "changed"
                out[f"kernel:{per_names[column]}"] = ("ms/step", None, np.where(np.isnan(vals) & ~graph_level, 0.0, vals))
    return out


def _per_case(cases: np.ndarray, names: np.ndarray, values: np.ndarray, ids: list) -> tuple[list, np.ndarray]:
    """The names and the (``ids`` x names) means of ``values`` per case and name, NaN where a case has
    none: ``groupby(["case_id", "name"]).mean().unstack("name").reindex(ids)``."""
    case_keys, name_keys, means = group_means(cases, names, values)
    row = {case: i for i, case in enumerate(case_keys)}
    out = np.full((len(ids), len(name_keys)), np.nan)
    at = [(j, row[case]) for j, case in enumerate(ids) if case in row]
    if at:
        out[[j for j, _ in at]] = means[[i for _, i in at]]
    return name_keys, out


def _column_means(per: np.ndarray) -> np.ndarray:
    """Each column's mean over the cases, NaN skipped (pandas' ``DataFrame.mean()``: the zero-filled
    values summed along a row of the transposed block)."""
    missing = np.isnan(per)
    counts = (~missing).sum(axis=0)
    sums = np.ascontiguousarray(np.where(missing, 0.0, per).T).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _finding_columns(cases: list, fids: list, ms_per_step: np.ndarray, ids: list) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each finding's ms per step in the cases ``ids`` (the first value a case reported, NaN where it
    reported none) and where the case did not report the finding at all, by finding id in sorted order:
    those with some value; rows of the findings table as three columns (a row without an id, None, is
    in no column). What ``f.pivot_table(index="case_id", columns="id", values="ms_per_step",
    aggfunc="first")`` gives (and a pivot of ones for the reported cells), read in one pass over the rows:
    two pivots were 10 ms each per group (tests/test_trend.py compares the two on random tables)."""
    first: dict[str, dict] = {}
    reported: dict[str, set] = {}
    values = np.asarray(ms_per_step, np.float64).tolist()
    for case, fid, value in zip(cases, fids, values):
        if fid is None or fid != fid:  # a row without a finding id is in no column
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
    ns_per_call = numbers(kernels["ns_per_call"])
    measured = ~np.isnan(ns_per_call)
    if not measured.any():
        return {}
    names, per = _per_case(kernels["case_id"][measured], kernels["name"][measured], ns_per_call[measured], ids)
    top = sorted(range(len(names)), key=lambda c: (-int((~np.isnan(per[:, c])).sum()), -float(np.nanmean(per[:, c])),
                                                   names[c]))
    return {f"kernel_call:{names[c]}": ("ns/call", True, per[:, c].copy()) for c in top[:TOP_KERNELS]}


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
            done[(last, first)] = compare_pair(_row(g, last), _row(g, first))
        comparison = done[(last, first)]
        out.append(_caused(change, comparison) if comparison else change)
    return out


def _row(table, index: int) -> dict:
    """One case's row of the summary: its columns' values."""
    return {name: values[index] for name, values in table.columns.items()}


def _object(values: list) -> np.ndarray:
    out = np.empty(len(values), object)
    out[:] = values
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
