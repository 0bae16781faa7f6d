"""What the rules produce: a :class:`Finding` with its :class:`Evidence`.

Both are frozen, slotted dataclasses: a later stage (the severity cap, the falsifiers, the merge
of a serving finding into the trace finding with its id) makes a changed copy with
``dataclasses.replace``, it never writes into one. ``to_contract()`` writes the JSON contract's
finding (reports/analysis.schema.json, ``findings`` items) where analysis.py assembles
``data["findings"]``: the keys in the contract's order, ``falsified`` only on a finding its
falsifier rules out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class Evidence:
    """One measured figure behind a finding: its value with unit and denominator (None where none
    applies) and the sentence that states it."""

    name: str
    value: Any
    unit: str
    denominator: str | None
    text: str

    def to_contract(self) -> dict:
        return {"name": self.name, "value": self.value, "unit": self.unit, "denominator": self.denominator,
                "text": self.text}


@dataclass(frozen=True, slots=True)
class Finding:
    """One finding (catalog.make fills its texts): the axis it explains and every symptom it answers,
    its severity, the share of ``impact_denominator`` it explains, the catalog's texts, its evidence;
    ``falsified`` the reason its own falsifier rules it out (None while it stands); ``explains_pct`` the
    measured share of the denominator the finding explains when that is more than ``impact_pct``, the part
    its fix removes (cross_island_collective: all the collective time, of which only the excess over one
    island's link goes with the re-layout); None when the two are the same. The headline and every report
    name both (takes / removes); the contract carries it as ``explains_pct`` (only when set)."""

    id: str
    axis: str
    answers: tuple[str, ...]
    severity: str
    impact_pct: float
    impact_denominator: str
    title: str
    mechanism: str
    fix: str
    confirm: str
    falsifier: str
    evidence: tuple[Evidence, ...]
    falsified: str | None = None
    explains_pct: float | None = None

    def with_evidence(self, *rows: Evidence, **changes) -> Finding:
        """A copy with ``rows`` added to the evidence and the fields in ``changes`` replaced."""
        return replace(self, evidence=self.evidence + rows, **changes)

    def to_contract(self) -> dict:
        out = {"id": self.id, "axis": self.axis, "answers": list(self.answers), "severity": self.severity,
               "impact_pct": self.impact_pct, "impact_denominator": self.impact_denominator, "title": self.title,
               "mechanism": self.mechanism, "fix": self.fix, "confirm": self.confirm, "falsifier": self.falsifier,
               "evidence": [row.to_contract() for row in self.evidence]}
        if self.falsified is not None:
            out["falsified"] = self.falsified
        if self.explains_pct is not None:
            out["explains_pct"] = self.explains_pct
        return out


UNMATCHED_STEP_RANGE = "matched no annotation range of this process"  # the steps abstention's words where
# --step-range named no range of a process (rules/abstain.py writes them, unmatched_step_range reads them back)


def unmatched_step_range(rows) -> list[tuple[str, str]]:
    """(scope, reason) of each abstention where --step-range named no range of a process; ``rows``: abstentions
    as the contract's dicts (a saved analysis) or as records (compare's sides)."""
    out = []
    for row in rows or ():
        get = row.get if isinstance(row, dict) else lambda key, row=row: getattr(row, key, None)
        if get("analysis") == "steps" and UNMATCHED_STEP_RANGE in str(get("reason") or ""):
            out.append((str(get("scope")), str(get("reason"))))
    return out


@dataclass(frozen=True, slots=True)
class Abstention:
    """What the capture does not measure that a verdict needs: the ``analysis`` left undone, its
    ``scope`` (a trace's path, ``pid N``, a device, ``case``, ``serving``), the ``reason`` in words
    and the ``capture_hint`` that would decide it (reports/analysis.schema.json, ``abstentions`` items)."""

    analysis: str
    scope: str
    reason: str
    capture_hint: str | None

    def to_contract(self) -> dict:
        return {"analysis": self.analysis, "scope": self.scope, "reason": self.reason, "capture_hint": self.capture_hint}
