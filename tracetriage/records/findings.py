"""Records of the verdict blocks of the analysis contract: each finding with its evidence, and each
analysis that abstained for want of data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Evidence:
    """One measured number behind a finding: its name, value (a number, a text, a list or a map; None
    when not measured), unit, denominator, and the sentence the reports print."""
    name: str = ""
    value: Any = None
    unit: str = ""
    denominator: str = ""
    text: str = ""


@dataclass(frozen=True, slots=True)
class Finding:
    """One finding: its id and axis (and every symptom it answers), severity, impact (% of its
    denominator), the catalog's prose, its evidence, why it is falsified when it is, and the measured
    share it takes when that is more than what its fix removes (``explains_pct``)."""
    id: str = ""
    axis: str = ""
    answers: tuple[str, ...] = ()
    severity: str = ""
    impact_pct: float | None = None
    impact_denominator: str = ""
    title: str = ""
    mechanism: str = ""
    fix: str = ""
    confirm: str = ""
    falsifier: str = ""
    evidence: tuple[Evidence, ...] = ()
    falsified: str | None = None
    explains_pct: float | None = None  # the measured share when more than what the fix removes (impact_pct)


@dataclass(frozen=True, slots=True)
class Abstention:
    """An analysis that did not have the data it needed (for what scope), and the capture that would decide."""
    analysis: str = ""
    scope: str = ""
    reason: str = ""
    capture_hint: str = ""
