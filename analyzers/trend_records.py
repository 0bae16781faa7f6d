"""The typed records of a trend (``tracetriage.trend/1``): one series' outliers and level shifts as
the change search finds them, and each change of the contract with the findings and kernels compare
found moved there. Frozen, slotted dataclasses; :meth:`Contract.to_contract` writes the contract's
keys in its order (analyzers/metrics.py), the private fields are the rows of the cases either side."""

from __future__ import annotations

from dataclasses import dataclass, field

from tracetriage.analyzers.metrics import PRIVATE, Contract


def rounded6(value) -> float | None:
    """A level or a change as the trend contract writes it: 6 decimals, None kept."""
    return None if value is None else round(float(value), 6)


@dataclass(frozen=True, slots=True)
class Level(Contract):
    """A segment of a series: its level (the median), its robust spread and its cases (None: an outlier's
    baseline, the median of its neighbours, is no segment)."""

    level: float | None
    spread: float | None
    cases: int | None

    def rounded(self) -> Level:
        return Level(rounded6(self.level), rounded6(self.spread), self.cases)


@dataclass(frozen=True, slots=True)
class Outlier:
    """A one-off point of a series: its index, its value and the median of its neighbours."""

    index: int
    value: float
    baseline: float


@dataclass(frozen=True, slots=True)
class Shift:
    """A level shift of a series: the index of its first case after, of the last before, and the two segments."""

    index: int
    last_index: int
    before: Level
    after: Level


@dataclass(frozen=True, slots=True)
class ChangeFinding(Contract):
    """A finding compare gave a status other than ``persists`` at a change, with its ms per step either side."""

    id: str
    status: str
    before_ms_per_step: float | None
    after_ms_per_step: float | None


@dataclass(frozen=True, slots=True)
class ChangeKernel(Contract):
    """A kernel that moved at a change (trend.kernel_movers), its ms per step either side."""

    name: str
    before_ms_per_step: float | None
    after_ms_per_step: float | None


@dataclass(frozen=True, slots=True)
class Change(Contract):
    """An outlier or a level shift of one series of a group: its direction (``changed`` for a series that
    is neither better nor worse), the last good and first bad case, the levels before and after (6
    decimals), the change in % of the level before, and the findings and kernels compare found moved
    there. ``explained``: why compare says it is neither better nor worse (written only when set).
    ``pair_test``: a step percentile's change as compare's step test reads the two captures either side
    (``within noise / not significant (95% CI ...; 60 / 400 steps)``; written only when set): the
    series' shift and the pair's significance, each said with its test.
    ``last_row`` / ``first_row``: the rows of the cases either side in the group (None: at the first case)."""

    group: str
    metric: str
    unit: str
    kind: str
    direction: str
    last_good: str | None
    first_bad: str
    first_bad_time: str | None
    before: Level
    after: Level
    change_pct: float | None
    findings: tuple[ChangeFinding, ...] = ()
    kernels: tuple[ChangeKernel, ...] = ()
    explained: str | None = None
    pair_test: str | None = None
    last_row: int | None = field(default=None, metadata=PRIVATE)
    first_row: int = field(default=0, metadata=PRIVATE)

    def to_contract(self) -> dict:
        out = Contract.to_contract(self)
        out["findings"] = [finding.to_contract() for finding in self.findings]  # [] when none, as every list
        out["kernels"] = [kernel.to_contract() for kernel in self.kernels]
        for optional in ("explained", "pair_test"):
            if out[optional] is None:
                del out[optional]
        return out


@dataclass(frozen=True, slots=True)
class Case(Contract):
    """One case of a group in order: its name, id, capture time (UTC, None when ordered by name), the
    date its name shows (``label``) and its HTML report."""

    name: str
    case_id: str
    time: str | None
    label: str | None
    report: str | None


# ---------------------------------------------------------------------------
# What trend reads of the comparison of the two cases either side of a change (compare's contract,
# read by its keys with tracetriage.contract.load)


@dataclass(frozen=True, slots=True)
class ComparedFinding:
    """A finding of the comparison: its status and its ms per step either side."""

    id: str = ""
    status: str | None = None
    before_ms_per_step: float | None = None
    after_ms_per_step: float | None = None


@dataclass(frozen=True, slots=True)
class ComparedKernel:
    """A kernel of the comparison with its ms per step either side (None: not measured on that side)."""

    name: str = ""
    before_ms_per_step: float | None = None
    after_ms_per_step: float | None = None

    def growth(self) -> float:
        """The change in ms per step, after - before; a side that did not measure it (a graph-level
        capture records replays, not the kernels inside them) counts 0: a kernel only the other side
        shows appeared or vanished there."""
        return (self.after_ms_per_step or 0.0) - (self.before_ms_per_step or 0.0)


@dataclass(frozen=True, slots=True)
class ComparedMethod:
    """The comparison's noise: the threshold x the before step p50, ms per step (None without steps)."""

    noise_ms_per_step: float | None = None


@dataclass(frozen=True, slots=True)
class ComparedStep:
    """One rank of the comparison's step test: each percentile's ratio after / before, 95% interval and
    status, and the steps on either side."""

    status: str = ""
    ratio: float | None = None
    ci95: tuple[float, float] | None = None
    p99_status: str = ""
    p99_ratio: float | None = None
    p99_ci95: tuple[float, float] | None = None
    p99_reason: str | None = None  # why the p99 is not judged (too few steps)
    before_count: int = 0
    after_count: int = 0


@dataclass(frozen=True, slots=True)
class ComparedServing:
    """The comparison's serving note: why the end-to-end latency moved with the outputs' length (None: it did not)."""

    latency: str | None = None


@dataclass(frozen=True, slots=True)
class Compared:
    """The comparison of the cases either side of a change, as trend reads it: the findings, the noise,
    the kernels, the serving note and the step test per rank."""

    findings: tuple[ComparedFinding, ...] = ()
    method: ComparedMethod | None = None
    kernels: tuple[ComparedKernel, ...] = ()
    serving: ComparedServing | None = None
    step_time: tuple[ComparedStep, ...] = ()
    threshold_pct: float = 5.0
