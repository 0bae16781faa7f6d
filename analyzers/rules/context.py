"""What every rule is written against: the :class:`Rule` it is registered as, the :class:`Context`
it reads, the thresholds it declares, and the helpers the trace rules share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tracetriage.analyzers import catalog
from tracetriage.analyzers.accounting import Ledger
from tracetriage.analyzers.findings import Abstention, Finding
from tracetriage.analyzers.metrics import DeviceMetrics, TraceMetrics
from tracetriage.analyzers.serving_metrics import ServingSummary, serving_summary
from tracetriage.wording import for_vendor

# Every threshold of every rule: name -> (value, why), collected by thresholds.py from the table
# each module declares beside its rules (its THRESHOLDS).
THRESHOLDS: dict[str, tuple] = {}


def t(name: str):
    """The value of a threshold."""
    return THRESHOLDS[name][0]


@dataclass
class Context:
    """What the rules read: the case, the assembled analysis (``data``), the per-trace analyses,
    the user's --symptom and --slo, the ledger the throughput rules claim slices through, the
    capture's kind (capture_kind.kind_of, set by the driver), the findings of the rules fired so
    far by rule id (a rule reads only those it declares in ``depends_on``), and for the verdict
    stage the findings and abstentions before it."""

    case: object
    data: dict
    per_trace: list[TraceMetrics]
    symptom: str | None = None
    slo: dict = field(default_factory=dict)
    ledger: Ledger | None = None
    kind: dict = field(default_factory=dict)
    fired: dict[str, Finding] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    abstentions: list[Abstention] = field(default_factory=list)

    def __post_init__(self):
        if self.ledger is None:
            self.ledger = Ledger(self.devices)

    @property
    def devices(self) -> list[DeviceMetrics]:
        """Every device of every trace, in trace order."""
        return [device for trace in self.per_trace for device in trace.devices]

    @property
    def serving(self) -> ServingSummary | None:
        """The serving summary, typed (None without serving captures)."""
        return serving_summary(self.data.get("serving"))

    def judged(self) -> list[TraceMetrics]:
        """Traces large and steady enough to judge (see abstain.oddities)."""
        return [trace for trace in self.per_trace if not trace.odd]


@dataclass(frozen=True)
class Rule:
    """One registered rule. ``id`` names the rule and the catalog entry of its words (the serving
    tail rule is ``prefill_stall_itl``); ``finding`` the finding id it makes when that differs;
    ``entries`` further catalog entries it words a finding with. ``stage``: when the driver runs it
    (``throughput``: claiming slices of each device's window, in registry order; ``trace``: the other
    axes of the trace; ``serving``: the serving artifacts; ``verdict``: healthy, after the falsifiers
    and abstentions; ``compare``: a pair of captures, run by compare on its own context, rules/quality.py).
    ``reads``: the parts of the analysis it reads; ``requires``: those of them
    without which it is not run. ``thresholds``: the names it reads in THRESHOLDS.
    ``suppressed_by``: rules whose firing means this one is not run (the cause named already
    carries its evidence); ``depends_on``: rules whose findings it reads from ``ctx.fired``."""

    id: str
    stage: str
    check: Callable[[Context], Finding | None]
    reads: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    thresholds: tuple[str, ...] = ()
    finding: str | None = None
    entries: tuple[str, ...] = ()
    suppressed_by: tuple[str, ...] = ()
    depends_on: tuple[str, ...] = ()

    @property
    def finding_id(self) -> str:
        return self.finding or self.id

    @property
    def axis(self) -> str:
        return catalog.axis_of(self.finding_id)

    def evaluate(self, ctx: Context) -> Finding | None:
        """The rule's finding on this capture, or None."""
        return self.check(ctx)


def median(values):
    """The median of the values that are not None (None when none is)."""
    present = [value for value in values if value is not None]
    return float(np.median(present)) if present else None


def window_denominator(ctx: Context) -> str:
    count = len(ctx.devices)
    return "window" if count == 1 else f"window, mean over {count} devices"


def best_device(taken: dict[str, int], ctx: Context) -> DeviceMetrics:
    """The device whose claimed share of its window is largest."""
    device_id = max(taken, key=lambda name: taken[name] / max(1, ctx.ledger.window[name]))
    return next(device for device in ctx.devices if device.id == device_id)


CAUSE_WORDS = {
    "sync": "inside a blocking sync",
    "memcpy_sync": "inside a synchronous copy",
    "launch": "inside launch calls",
    "other_cuda": "inside other CUDA/HIP calls",
    "host": "in host code outside any CUDA call",
    "unknown": "with no host activity recorded",
    # the GPU's own wait: the work was queued (its launch call had returned), the host was not what it waited for
    "dependency": "already done launching: the next work was queued and the GPU waited on a dependency the trace does not show",
}


def cause_split(device: DeviceMetrics, prefix: str, vendor: str | None = None) -> str:
    """The host's activity during the idle slices under ``prefix``, as shares in words (``vendor``'s:
    an AMD capture's calls are HIP calls)."""
    parts = [(name.rsplit(":", 1)[1], ns) for name, ns in device.slices.items() if name.startswith(prefix) and ns]
    total = sum(ns for _, ns in parts) or 1
    return ", ".join(f"{for_vendor(CAUSE_WORDS[cause], vendor)} {100.0 * ns / total:.0f}%"
                     for cause, ns in sorted(parts, key=lambda x: -x[1]))


def process_name(ctx: Context, pid: int) -> str:
    return next((process.name for process in ctx.data["processes"] if process.pid == pid), "")
