"""The driver: runs the registered rules over one case and returns the :class:`Evaluation`.

Stages, in order: the throughput rules (claiming slices through the ledger), the severity cap
of a short window, the other trace rules, the serving rules (a serving finding with the id of a
trace finding adds its evidence to it: one problem seen in the trace's steps and in the ITL
tail), the falsifiers, the abstentions, and the healthy verdict. The driver knows a rule only
through its :class:`~tracetriage.analyzers.rules.context.Rule`: its stage, what it requires, the
rules that suppress it."""

from __future__ import annotations

from dataclasses import dataclass, replace

from tracetriage.analyzers.accounting import device_accounting
from tracetriage.analyzers.capture_kind import kind_of
from tracetriage.analyzers.findings import Abstention, Finding
from tracetriage.analyzers.rules import abstain, efficiency, registry, waits
from tracetriage.analyzers.rules.context import Context, Rule
from tracetriage.analyzers.rules.falsify import apply_falsifiers, cap_severity_by_window, note_python_tracer
from tracetriage.analyzers.rules.headline import rank


@dataclass(frozen=True)
class Evaluation:
    """The verdict's parts: the findings (ranked), the abstentions, each device's accounting by
    device id (slices_pct, claims_pct, unclaimed_pct: % of its window) and the capture's kind."""

    findings: list[Finding]
    abstentions: list[Abstention]
    accounting: dict[str, dict]
    kind: dict


def _runs(rule: Rule, ctx: Context) -> bool:
    """Whether the rule is evaluated: what it requires is present and no rule suppressing it fired."""
    return all(getattr(ctx, name) for name in rule.requires) and not any(name in ctx.fired for name in rule.suppressed_by)


def _fire(ctx: Context, stage: str) -> list[Finding]:
    """The findings of one stage's rules, in registry order (each recorded in ``ctx.fired``)."""
    out = []
    for rule in registry.stage(stage):
        if _runs(rule, ctx) and (finding := rule.evaluate(ctx)) is not None:
            ctx.fired[rule.id] = finding
            out.append(finding)
    return out


def evaluate(ctx: Context) -> Evaluation:
    """Every registered rule on the case of ``ctx``; the capture kind is computed here, once."""
    ctx.kind = kind_of(ctx.case, ctx.per_trace, ctx.serving)
    findings = cap_severity_by_window(ctx, _fire(ctx, "throughput"))
    findings += _fire(ctx, "trace")
    for finding in _fire(ctx, "serving"):
        same = next((index for index, earlier in enumerate(findings) if earlier.id == finding.id), None)
        if same is not None:  # one problem seen in the trace's steps and in the ITL tail: one finding, both evidences
            findings[same] = findings[same].with_evidence(*(replace(row, text="serving: " + row.text)
                                                            for row in finding.evidence))
            continue
        findings.append(finding)
    findings = note_python_tracer(ctx, apply_falsifiers(ctx, findings))
    serving = ctx.serving
    abstentions = (abstain.trace_abstentions(ctx) + waits.clock_abstentions(ctx) + efficiency.abstention(ctx)
                   + abstain.serving_abstentions(serving, ctx.slo))
    abstentions += abstain.tail_abstention(serving, findings) if serving and not ctx.devices else []
    abstentions += abstain.queue_abstention(serving, findings)
    ctx.findings, ctx.abstentions = findings, abstentions
    findings += _fire(ctx, "verdict")
    return Evaluation(findings=rank(findings, ctx.symptom), abstentions=abstentions, accounting=_accounting(ctx),
                      kind=ctx.kind)


def _accounting(ctx: Context) -> dict[str, dict]:
    """Each device's accounting, in % of its window: the slices, the findings' claims, what is left."""
    return {device.id: device_accounting(device, ctx.ledger) for device in ctx.devices}
