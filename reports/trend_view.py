"""The view of a Trend (``tracetriage.trend/1``): every figure and phrase its reports show, formatted once.

:func:`trend_view` builds a :class:`TrendView` once from the trend's record (tracetriage/records/trend.py);
the text, Markdown and HTML reports are templates (reports/templates/trend.*.j2) that lay it out and compute
nothing. A field a format leaves out is listed, with the reason, in tests/test_view_parity.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tracetriage.records.trend import Case, Group, MovedKernel, TrendChange, TrendRecord, read
from tracetriage.reports.compare_view import LABELS
from tracetriage.wording import counted, fmt_ns, ms_text, with_unit

BUDGETS = "step time, serving percentiles, kernel time per call of captures without steps"
NAMED_IN_FULL = 5  # a group of up to this many captures is named capture by capture; a longer one by its first and last


def level(value, unit) -> str:
    """A series' level: ms as every ms figure is written (wording.ms_text: four significant figures, at
    most three decimals, thousands separated), % to one, ns per call as a duration, anything else to
    two (trailing zeros cut) with its unit when it has one (tokens, req/s)."""
    if value is None:
        return "n/a"
    if unit == "ns/call":
        return f"{fmt_ns(value)} per call"
    if unit in ("ms", "ms/step"):
        return ms_text(value)
    if unit == "%":
        return f"{value:.1f}%"
    number = f"{value:,.2f}".rstrip("0").rstrip(".")
    return with_unit(number, unit) if unit and unit not in ("count", "") else number


def label(metric: str) -> str:
    """A series as a reader names it: compare's labels; finding:<id> and kernel:<name> as such."""
    if metric.startswith("finding:"):
        return f"{metric[8:]} (ms per step of the time it is about)"
    if metric.startswith("kernel:"):
        return f"kernel {metric[7:]} (ms per step)"
    if metric.startswith("kernel_call:"):
        return f"kernel {metric[12:]} (time per call)"
    return LABELS.get(metric, metric.replace("_", " "))


def series_title(metric: str, unit: str) -> str:
    """A chart's title: the table's label, with the unit where the label does not say it."""
    text = label(metric)
    return text if metric.startswith(("finding:", "kernel:", "kernel_call:")) else f"{text} ({unit})"


def change_text(change: TrendChange) -> str:
    """The change: points for a share (busy %), else relative to the level before."""
    before, after = change.before.level, change.after.level
    if change.unit == "%" and before is not None and after is not None:
        return f"{after - before:+.1f} pt"
    return "n/a" if change.change_pct is None else f"{change.change_pct:+.1f}%"


def gate_line(result: dict | TrendRecord, gate: bool) -> str | None:
    """The gate's result with --gate (passed or failed, against which baseline); without it a
    latest capture in a regressed segment is a finding of the trend, not a gate. ``result``: the
    trend's record or its contract dict."""
    from tracetriage.casenames import matches_baseline

    result = read(result)
    verdict = result.gate
    if not gate:
        return (f"the latest capture is in a regressed segment in: {', '.join(verdict.groups)}"
                if verdict.regressed else None)
    base = verdict.baseline
    failed = f"; {counted(len(result.failed), 'case')} failed and not judged" if result.failed else ""
    outcome = result.gate_outcome()
    exit_words = f"(exit {result.gate_exit()})"  # as compare's gate line: "gate: failed (exit 8): ..."
    if outcome == "no series":
        return (f"gate: inconclusive {exit_words}: no group has a series to judge "
                f"({counted(len(result.ungrouped), 'set')} of captures not in a series, each with its reason above){failed}")
    if outcome == "too few":
        return (f"gate: inconclusive {exit_words}: no group has a series to judge (each has too few captures to tell a "
                f"change from noise; give a --baseline to judge the latest against it){failed}")
    if outcome == "undecided":  # worse than the captures before it, by more than their spread, not their noise
        return (f"gate: inconclusive {exit_words}: {_latest_words(result.undecided())}: beyond their spread, not far "
                f"enough beyond it to tell from noise; the next capture, or a --baseline, decides{failed}")
    if outcome == "failed cases":  # the failed case may be the newest capture: it has no place in time
        return (f"gate: inconclusive {exit_words}: {counted(len(result.failed), 'case')} failed and not judged, and a "
                "failed case has no place in the series: the latest capture may be one of them (fix or leave them out, "
                "then run the gate again)")
    if base is None:
        if verdict.regressed:
            return f"gate: failed {exit_words}: {_regressed_words(verdict)}{failed}"
        return f"gate: passed: no group's latest capture is in a regressed segment of a budget series ({BUDGETS})"
    judged = [group.key for group in result.groups if any(matches_baseline(case.name, base) for case in group.cases)]
    others = len(result.groups) - len(judged)
    rest = f"; {counted(others, 'group')} without {base} not judged" if others else ""
    if verdict.regressed:
        return (f"gate: failed {exit_words}: against baseline {base}, the latest capture of {', '.join(verdict.groups)} is "
                f"worse than {base} beyond the noise and the practical minimum on a budget series ({BUDGETS}){rest}{failed}")
    return (f"gate: passed against baseline {base}: the latest capture of {', '.join(judged)} is within the noise or "
            f"the practical minimum of {base} on every budget series ({BUDGETS}){rest}")


def _regressed_words(verdict) -> str:
    """Why the gate failed without a baseline: the groups whose latest capture is in a regressed segment, and
    those whose latest capture alone is worse than the captures before it."""
    alone = [judged for judged in verdict.latest if judged.status == "regressed"]
    shifted = [group for group in verdict.groups if group not in {judged.group for judged in alone}]
    parts = ([f"the latest capture is in a regressed segment (a budget series shifted worse and did not come back) "
              f"in: {', '.join(shifted)}"] if shifted else [])
    if alone:
        parts.append(f"{_latest_words(alone)}: worse beyond their noise, a one-off or a new level (the next capture "
                     "tells which)")
    return "; ".join(parts)


def _latest_words(judged) -> str:
    """The latest captures worse than the captures before them, one per group (its first budget):
    ``the latest capture of G (night-4) reads step p50 4.78 ms against 1.59 ms over the 3 captures before it
    (+201%, one-sided p 2e-05)``."""
    firsts = {}
    for item in judged:
        firsts.setdefault(item.group, item)
    return "; ".join(f"the latest capture of {item.group} ({item.latest}) reads {label(item.metric)} "
                     f"{level(item.value, item.unit)} against {level(item.level, item.unit)} over the "
                     f"{counted(item.captures, 'capture')} before it ("
                     + (f"{item.change_pct:+.0f}%, " if item.change_pct is not None else "")
                     + f"one-sided p {item.p:.2g})" for item in firsts.values())


@dataclass(frozen=True, slots=True)
class CaseView:
    """One capture of a series: its name, its label on the page, the link to its report (None: no link)."""
    name: str
    label: str
    href: str | None


@dataclass(frozen=True, slots=True)
class FindingStatusView:
    """A finding at the first bad capture and its status there."""
    id: str
    status: str


@dataclass(frozen=True, slots=True)
class ChangeView:
    """A step change or an outlier of one series: where it starts (``last_good`` None: at the first
    capture), the levels before and after, the change, the findings and the kernel that moved most there,
    and why it is neither better nor worse when compare said so (``explained``: None when it did not), and
    compare's step test on the captures either side of a step percentile's change (``pair_test``)."""
    label: str
    kind: str
    kind_words: str
    direction: str
    last_good: str | None
    last_good_href: str | None
    first_bad: str | None
    first_bad_href: str | None
    before: str
    after: str
    change: str
    findings: tuple[FindingStatusView, ...]
    kernel: str | None
    explained: str | None
    pair_test: str | None


@dataclass(frozen=True, slots=True)
class GroupView:
    """A group of comparable captures: its verdict, its captures in order, its changes; ``capture_words`` their
    count in words, ``named_cases`` the captures a line names (every one up to NAMED_IN_FULL, else the first and
    the last, ``cases_cut`` True)."""
    key: str
    verdict: str
    latest_regressed: bool
    capture_words: str
    named_cases: tuple[str, ...]
    cases_cut: bool
    cases: tuple[CaseView, ...]
    changes: tuple[ChangeView, ...]


@dataclass(frozen=True, slots=True)
class UngroupedView:
    """Captures that are in no series, and why."""
    key: str
    names: str
    reason: str


@dataclass(frozen=True, slots=True)
class FailedView:
    """A case that could not be analysed, and its error."""
    name: str
    error: str


@dataclass(frozen=True, slots=True)
class TrendView:
    """Everything a report of one Trend shows; ``gate_text`` None: no gate line to print."""
    schema: str
    batch_dir: str
    order: str
    order_words: str
    threshold: str
    threshold_repr: str
    level_shift: str
    gate_text: str | None
    gate_regressed: bool
    group_words: str
    groups: tuple[GroupView, ...]
    ungrouped: tuple[UngroupedView, ...]
    failed: tuple[FailedView, ...]


def order_words(order: str) -> str:
    """How the captures were put in order, in words: "ordered by time", or "not ordered: <why>" where the
    contract's order is ``none: <why>``."""
    head, _, why = order.partition(":")
    return f"not ordered: {why.strip()}" if head == "none" else f"ordered by {order}"


def trend_view(result: dict | TrendRecord, links: str | None = None) -> TrendView:
    """The view of one Trend (its contract dict or record), built once for every format. ``links``: the batch
    folder relative to the report, to link each capture to its report; ``gate``: --gate was given."""
    result = read(result)
    return TrendView(
        schema=str(result.schema), batch_dir=str(result.batch_dir), order=str(result.order),
        order_words=order_words(str(result.order)), threshold=f"{result.threshold_pct:g}",
        threshold_repr=str(result.threshold_pct),
        level_shift=str(result.method.level_shift), gate_text=gate_line(result, False),
        gate_regressed=bool(result.gate.regressed), group_words=counted(len(result.groups), "group"),
        groups=tuple(_group(group, result.changes_of(group), links) for group in result.groups),
        ungrouped=tuple(UngroupedView(str(entry.key), ", ".join(case.name for case in entry.cases), str(entry.reason))
                        for entry in result.ungrouped),
        failed=tuple(FailedView(str(case.name), str(case.error)) for case in result.failed))


def _href(case: Case | None, links: str | None) -> str | None:
    """The link to a capture's report, when the output knows where the batch folder is."""
    if links is None or not case or not case.report:
        return None
    return f"{links.rstrip('/')}/{case.report}"


def _group(group: Group, changes: tuple[TrendChange, ...], links: str | None) -> GroupView:
    cases = group.cases
    names = tuple(str(case.name) for case in cases)
    cut = len(names) > NAMED_IN_FULL
    return GroupView(
        key=str(group.key), verdict=str(group.verdict), latest_regressed=bool(group.latest_regressed),
        capture_words=counted(len(cases), "capture"), named_cases=(names[0], names[-1]) if cut else names, cases_cut=cut,
        cases=tuple(CaseView(str(case.name), str(case.label or case.name), _href(case, links)) for case in cases),
        changes=_said_once(tuple(_change(change, group, links) for change in changes)))


def _said_once(changes: tuple[ChangeView, ...]) -> tuple[ChangeView, ...]:
    """``changes`` with the kernels that moved at a capture written at its first change only; the others
    there point to it (a level shift moves several series at one capture, with the same kernels)."""
    said: set[tuple[str, str]] = set()
    out = []
    for change in changes:
        if change.kernel and (change.first_bad, change.kernel) in said:
            change = replace(change, kernel=f"as above, at {change.first_bad}")
        said.add((change.first_bad, change.kernel))
        out.append(change)
    return tuple(out)


def _change(change: TrendChange, group: Group, links: str | None) -> ChangeView:
    def href(name):
        return _href(next((case for case in group.cases if case.name == name), None), links) if name else None

    unit = change.unit
    latest = group.cases[-1].name if group.cases else None
    kind_words = ("on (level shift)" if change.kind != "outlier" else "alone (outlier)" if change.first_bad != latest
                  # nothing after the latest capture says it is alone (analyzers/trend_latest.py)
                  else "alone so far (the latest capture: a one-off or a new level)")
    return ChangeView(
        label=label(change.metric), kind=str(change.kind), kind_words=kind_words,
        direction=str(change.direction), last_good=change.last_good, last_good_href=href(change.last_good),
        first_bad=change.first_bad, first_bad_href=href(change.first_bad),
        before=level(change.before.level, unit), after=level(change.after.level, unit), change=change_text(change),
        findings=tuple(FindingStatusView(str(finding.id), str(finding.status)) for finding in change.findings),
        kernel=kernels_text(change.kernels) if change.kernels else None, explained=change.explained,
        pair_test=change.pair_test)


def kernels_text(kernels: tuple[MovedKernel, ...]) -> str:
    """The kernels that moved at a change in words, those that grew first (trend.kernel_movers):
    ``grew gemv_kernel +0.065 ms, rms_norm_kernel +0.065 ms; shrank graph 1 -0.511 ms`` (ms per step)."""
    def named(kernel: MovedKernel) -> str:
        name = str(kernel.name)
        return f"{name if len(name) <= 40 else name[:39] + '…'} {ms_text(kernel.growth_ms_per_step, sign='+')}"

    grew = [named(kernel) for kernel in kernels if kernel.growth_ms_per_step > 0]
    shrank = [named(kernel) for kernel in kernels if kernel.growth_ms_per_step < 0]
    return "; ".join(part for part in (("grew " + ", ".join(grew)) if grew else "",
                                        ("shrank " + ", ".join(shrank)) if shrank else "") if part) + " per step"
