"""The registry: every rule, in the order the driver runs them within a stage.

Throughput rules claim slices of each device's window in this order: a root cause before the
symptom it explains, the specific before the generic, and gpu_starved last (it takes what nobody
explained). Adding a finding touches its rule module (its Rule in that module's list) and the
catalog; the order of the families is here."""

from __future__ import annotations

from tracetriage.analyzers.rules import (
    collective,
    copies,
    efficiency,
    healthy,
    network,
    precision,
    quality,
    serving,
    starved,
    tail,
    trace,
    waits,
)
from tracetriage.analyzers.rules.context import Rule

REGISTRY: tuple[Rule, ...] = (
    *[rule for rule in network.RULES if rule.stage == "throughput"],  # sockets between nodes before an intra-node hop
    *[rule for rule in collective.RULES if rule.stage == "throughput"],
    *trace.RULES,
    *copies.RULES,
    *waits.RULES,
    efficiency.RULE,
    precision.FP32_MATH,
    starved.STARVED,
    *[rule for rule in collective.RULES if rule.stage == "trace"],
    *[rule for rule in network.RULES if rule.stage == "trace"],
    tail.PREFILL_STALL,
    *serving.RULES,
    healthy.HEALTHY,
    serving.HEALTHY,
    *quality.RULES,
)
STAGES = ("throughput", "trace", "serving", "verdict", "compare")  # compare: a pair's rules, run by compare, not the driver

if len({rule.id for rule in REGISTRY}) != len(REGISTRY):  # a rule registered twice fails at import
    raise ValueError("rule ids must be unique in the registry")


def stage(name: str) -> list[Rule]:
    """The registered rules of one stage, in registry order."""
    return [rule for rule in REGISTRY if rule.stage == name]
