"""The verdict: rules turning metrics into findings and abstentions, symptom first.

Every rule reads the assembled metrics (never a file) and returns a finding or None; it is
registered as a :class:`~.context.Rule` (registry.py) in its family's module: trace.py (host-side),
copies.py, starved.py, tail.py, collective.py, efficiency.py, serving.py, healthy.py. Its thresholds are declared beside it and
collected in one table (thresholds.py) with the reason for each; its words are in the findings
catalog (``findings.toml``, see catalog.py), the capture commands in ``capture_hints.toml``.

Axes (DESIGN.md): each finding belongs to one axis — the symptom the user suffers.
Throughput findings claim disjoint slices of each device's window through the
:class:`~tracetriage.analyzers.accounting.Ledger`, in registry order (a root cause before the
symptom it explains), so their ``impact_pct`` values add up to at most 100%. Severity comes from
the size of the claim on the throughput axis, and from the tail itself (max and p99 over p50, the
freeze in ms) on the tail axis, so a 450 ms freeze that is 5% of the time is not ranked as a minor
throughput problem. falsify.py downgrades what the capture already rules out, abstain.py says what
is not measured, driver.py runs it all, headline.py ranks the findings and words the verdict.
"""

from tracetriage.analyzers.rules.abstain import CAPTURE_CALLS, oddities
from tracetriage.analyzers.rules.context import Context, Rule
from tracetriage.analyzers.rules.driver import Evaluation, evaluate
from tracetriage.analyzers.rules.headline import headline, headline_by_axis
from tracetriage.analyzers.rules.registry import REGISTRY
from tracetriage.analyzers.rules.thresholds import THRESHOLDS

__all__ = [
           "CAPTURE_CALLS",
           "REGISTRY",
           "THRESHOLDS",
           "Context",
           "Evaluation",
           "Rule",
           "evaluate",
           "headline",
           "headline_by_axis",
           "oddities",
]
