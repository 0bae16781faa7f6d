"""One table of every rule's thresholds, each with its reason: name -> (value, why).

Each module declares its own beside its rules (context.declare): the trace, collective,
falsification, abstention, serving, healthy and efficiency tables (the efficiency one lives
with the measurement in analyzers/efficiency.py, which reads it too). Importing the registry
imports every declaring module, so the table is complete here."""

from __future__ import annotations

from tracetriage.analyzers.rules import abstain, falsify, registry  # noqa: F401  - each declares its thresholds
from tracetriage.analyzers.rules.context import THRESHOLDS, t

__all__ = ["THRESHOLDS", "t"]
