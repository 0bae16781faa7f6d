"""One table of every rule's thresholds, each with its reason: name -> (value, why).

Each module declares its own table beside its rules (its ``THRESHOLDS``): trace, copies, starved, tail, collective,
collective_bus, healthy, falsify, abstain, serving, efficiency, precision, phases, quality and waits (efficiency and
phases live with the measurement in analyzers/efficiency.py and analyzers/phases.py, which read them too). They are
collected here, in that order, into context.THRESHOLDS, the one table :func:`~.context.t` reads; a name declared
twice fails at import."""

from __future__ import annotations

from tracetriage.analyzers import phases
from tracetriage.analyzers.rules import (
    abstain,
    collective,
    collective_bus,
    copies,
    efficiency,
    falsify,
    healthy,
    precision,
    quality,
    serving,
    starved,
    tail,
    trace,
    waits,
)
from tracetriage.analyzers.rules.context import THRESHOLDS

for _table in (trace.THRESHOLDS, copies.THRESHOLDS, starved.THRESHOLDS, tail.THRESHOLDS, collective.THRESHOLDS,
               collective_bus.THRESHOLDS, healthy.THRESHOLDS, falsify.THRESHOLDS, abstain.THRESHOLDS,
               serving.THRESHOLDS, efficiency.THRESHOLDS, precision.THRESHOLDS, phases.THRESHOLDS, quality.THRESHOLDS,
               waits.THRESHOLDS):
    if set(_table) & set(THRESHOLDS):
        raise ValueError(f"thresholds declared twice: {sorted(set(_table) & set(THRESHOLDS))}")
    THRESHOLDS.update(_table)

__all__ = ["THRESHOLDS"]
