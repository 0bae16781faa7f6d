"""Typed, frozen records of the trend contract (``tracetriage.trend/1``, reports/trend.schema.json), read
once from a Trend's ``data`` by :func:`tracetriage.contract.load`: :func:`read` builds the whole trend as a
:class:`TrendRecord`; the trend view and charts (reports/trend_view.py, reports/trend.py) read its fields.

Each record mirrors one object of the schema, field for field; tests/test_compare_trend_records.py checks
them against the schema. (analyzers/trend_records.py holds the records the trend is computed with; these
are the contract as it is read back, every field with a default.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracetriage.contract import load


@dataclass(frozen=True, slots=True)
class TrendMethod:
    """How the noise, an outlier and a level shift are decided, in words."""
    noise: str = ""
    outlier: str = ""
    level_shift: str = ""


@dataclass(frozen=True, slots=True)
class Signature:
    """What makes captures comparable: device model and count, world size, program."""
    device_model: str = ""
    device_count: str = ""
    world_size: str = ""
    program: str = ""


@dataclass(frozen=True, slots=True)
class Case:
    """One capture of a group: its name and case id, its time and label (None: none), its report's path
    relative to the batch folder (None: no report)."""
    name: str = ""
    case_id: str = ""
    time: str | None = None
    label: str | None = None
    report: str | None = None


@dataclass(frozen=True, slots=True)
class Series:
    """One series of a group: its unit and one value per case (None: the case does not have it)."""
    unit: str = ""
    values: tuple[float | None, ...] = ()


@dataclass(frozen=True, slots=True)
class Group:
    """A group of comparable captures: its key and signature, its cases in order, its series by name, its
    verdict, whether its latest capture is in a regressed segment."""
    key: str = ""
    signature: Signature = Signature()
    cases: tuple[Case, ...] = ()
    series: dict[str, Series] = field(default_factory=dict)
    verdict: str = ""
    latest_regressed: bool = False


@dataclass(frozen=True, slots=True)
class Ungrouped:
    """Captures in no series (a group of one), and why."""
    key: str = ""
    cases: tuple[Case, ...] = ()
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Failed:
    """A case that could not be analysed, and its error (None: none recorded)."""
    name: str = ""
    error: str | None = None


@dataclass(frozen=True, slots=True)
class SegmentLevel:
    """A segment of a series: its level (the median), its robust spread and its cases (None: an outlier's
    baseline, the median of its neighbours)."""
    level: float | None = None
    spread: float | None = None
    cases: int | None = None


@dataclass(frozen=True, slots=True)
class ChangedFinding:
    """A finding compare gave a status other than ``persists`` at a change, with its ms per step either side."""
    id: str = ""
    status: str = ""
    before_ms_per_step: float | None = None
    after_ms_per_step: float | None = None


@dataclass(frozen=True, slots=True)
class MovedKernel:
    """A kernel that moved at a change, its ms per step either side (None: that side did not measure it)."""
    name: str = ""
    before_ms_per_step: float | None = None
    after_ms_per_step: float | None = None

    @property
    def growth_ms_per_step(self) -> float:
        """after - before, a side that did not measure it counting 0 (as trend.kernel_growth)."""
        return (self.after_ms_per_step or 0.0) - (self.before_ms_per_step or 0.0)


@dataclass(frozen=True, slots=True)
class TrendChange:
    """An outlier or a level shift of one series of a group: its direction, the last good and first bad
    case, the levels before and after, the change in % of the level before, the findings and kernels
    compare found moved there, and why it is neither better nor worse (None: compare did not say)."""
    group: str = ""
    metric: str = ""
    unit: str = ""
    kind: str = ""
    direction: str = ""
    last_good: str | None = None
    first_bad: str = ""
    first_bad_time: str | None = None
    before: SegmentLevel = SegmentLevel()
    after: SegmentLevel = SegmentLevel()
    change_pct: float | None = None
    findings: tuple[ChangedFinding, ...] = ()
    kernels: tuple[MovedKernel, ...] = ()
    explained: str | None = None
    pair_test: str | None = None


@dataclass(frozen=True, slots=True)
class LatestJudged:
    """A budget series whose latest capture is worse than the captures of its segment before it
    (analyzers/trend_latest.py): regressed (the gate fails) or undecided (inconclusive), the latest value, the
    history's mean, standard deviation and count, the one-sided p and the change in % of the mean."""
    group: str = ""
    metric: str = ""
    unit: str = ""
    status: str = ""
    latest: str = ""
    value: float = 0.0
    level: float = 0.0
    sd: float = 0.0
    captures: int = 0
    p: float = 1.0
    change_pct: float | None = None


@dataclass(frozen=True, slots=True)
class Gate:
    """The gate: whether a latest capture regressed, in which groups, against which baseline (None: each
    group's own history), the rule in words, and the latest captures worse than their history."""
    regressed: bool = False
    groups: tuple[str, ...] = ()
    baseline: str | None = None
    rule: str = ""
    judged: tuple[str, ...] | None = None  # the groups the gate judged (None: a contract from before the key: all)
    latest: tuple[LatestJudged, ...] = ()


@dataclass(frozen=True, slots=True)
class TrendRecord:
    """One trend: the order of the captures, the threshold (% of the level before), the method, the groups,
    the captures in no group, the failed cases, the changes, the gate and the batch folder."""
    schema: str = ""
    order: str = ""
    threshold_pct: float = 0.0
    method: TrendMethod = TrendMethod()
    groups: tuple[Group, ...] = ()
    ungrouped: tuple[Ungrouped, ...] = ()
    failed: tuple[Failed, ...] = ()
    changes: tuple[TrendChange, ...] = ()
    gate: Gate = Gate()
    batch_dir: str = ""

    def gate_outcome(self) -> str:
        """What ``trend --gate`` decides: ``regressed``; ``no series`` (no group to judge), ``too few`` (no group
        long enough to judge), ``undecided`` (a group's latest capture is worse than the captures before it
        beyond their spread, not beyond their noise) or ``failed cases`` (a case failed: it has no place in the
        series and may be the newest), each inconclusive; else ``passed``. The exit code and the gate's line
        both read it."""
        if self.gate.regressed:
            return "regressed"
        if not self.groups:
            return "no series"
        judged = self.gate.judged if self.gate.judged is not None else tuple(group.key for group in self.groups)
        if not judged:
            return "too few"
        if self.undecided():
            return "undecided"
        return "failed cases" if self.failed else "passed"

    def undecided(self) -> tuple[LatestJudged, ...]:
        """The budget series whose latest capture the gate could not tell from noise."""
        return tuple(judged for judged in self.gate.latest if judged.status == "undecided")

    def gate_exit(self) -> int:
        """``trend --gate``'s exit code, of :meth:`gate_outcome`: 8 regressed, 0 passed, else 9 inconclusive."""
        from tracetriage.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_REGRESSED

        outcome = self.gate_outcome()
        return EXIT_REGRESSED if outcome == "regressed" else EXIT_OK if outcome == "passed" else EXIT_INCONCLUSIVE

    def changes_of(self, group: Group) -> tuple[TrendChange, ...]:
        """The changes of one group, in the contract's order."""
        return tuple(change for change in self.changes if change.group == group.key)


def read(data: dict[str, Any] | TrendRecord) -> TrendRecord:
    """The record of a trend's contract dict (a record as it is)."""
    return load(TrendRecord, data)
