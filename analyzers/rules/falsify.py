"""Falsification and severity caps: what a capture already shows against a finding.

A finding whose own falsifier (``falsified_when`` in the catalog) the capture meets is kept but
downgraded (apply_falsifiers); the throughput findings of a window too short to show a repeating
pattern are capped in severity (cap_severity_by_window)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from tracetriage.analyzers import catalog
from tracetriage.analyzers.catalog import SEVERITIES
from tracetriage.analyzers.evidence import ev
from tracetriage.analyzers.findings import Finding
from tracetriage.analyzers.rules import context
from tracetriage.analyzers.rules.context import Context, t
from tracetriage.analyzers.rules.slo import budget_check, cap_of
from tracetriage.analyzers.serving import effective_config
from tracetriage.analyzers.serving_metrics import ServingSummary, serving_summary
from tracetriage.wording import plural, us

# name: (value, why)
THRESHOLDS = {
    "severity_min_steps": (5, ("between 10 and 100 ms, a window holding 5+ measured steps shows a repeating pattern: "
                               "its severity is not capped")),
    "severity_toy_window_ns": (10_000_000, ("a window under 10 ms is a toy program or a fraction of one real step, "
                                            "however many steps it holds (steps of a few hundred µs are a micro-benchmark's "
                                            "loop): at most low")),
    "severity_short_window_ns": (100_000_000, ("without 5 steps, a window under 100 ms may be start-up or a "
                                               "single step: at most medium")),
}


def facts(ctx: Context) -> dict:
    """What the capture shows that a finding's falsifier can be checked against (catalog.falsified):
    ``config`` (the engine's, printed or its known defaults: serving.effective_config), ``trace``
    (graph replays and launches; the collective share and its
    exposed part, means over the devices that ran collectives), ``serving`` (serving_facts),
    ``threshold`` (THRESHOLDS' values by name) and ``kind``. A figure not measured is None."""
    serving = ctx.serving
    collective = [device for device in ctx.devices if device.collective_count]
    processes = [process for trace in ctx.per_trace for process in trace.processes]
    return {
        "config": effective_config(serving),
        "trace": {"graph_replays": (sum(int(trace.graph_replays_in_window or 0) for trace in ctx.per_trace)
                                    if ctx.per_trace else None),
                  "graph_launches_per_step": max((process.graph_launches_per_step for process in processes
                                                  if process.graph_launches_per_step is not None), default=None),
                  "collective_share_pct": (float(np.mean([device.collective_share_pct for device in collective]))
                                           if collective else None),
                  "collective_exposed_pct": (float(np.mean([device.collective_exposed_pct for device in collective]))
                                             if collective else None)},
        "serving": serving_facts(serving, ctx.slo) if serving else {},
        "threshold": {name: value for name, (value, _why) in context.THRESHOLDS.items()},
        "kind": dict(ctx.kind or {}),
    }


def apply_falsifiers(ctx: Context, findings: list[Finding]) -> list[Finding]:
    """No finding whose own falsifier the capture already meets: it is kept (its slice stays
    claimed, the accounting adds up) but downgraded to info, marked ``falsified`` with the reason,
    ranked last and never named in a headline. (A memory_pressure finding with a CUDA OOM is the
    exception: the OOM happened, so it stands at its severity and only its cause changes.) It
    claims no impact (0: it explains nothing), its fix is the reason it is ruled out, and the
    mechanism its evidence pointed to is said to be ruled out. Returns the findings, in their order."""
    measured = facts(ctx)
    return [_judged(finding, catalog.falsified(finding, measured)) for finding in findings]


def _judged(finding: Finding, why: str | None) -> Finding:
    """The finding as its falsifier leaves it (``why``: the reason it is ruled out, None when it stands)."""
    if why and finding.id == "memory_pressure" and any(row.name == "oom_events" and row.value for row in finding.evidence):
        return oom_cause_ruled_out(finding, why)  # the crash is a fact: only its cause is ruled out
    return _falsify(finding, why) if why else finding


def _falsify(finding: Finding, why: str) -> Finding:
    """Downgrade a finding its falsifier rules out: info, no impact, the reason as its fix."""
    evidence = tuple(replace(row, text=f"mechanism the evidence pointed to ({row.value}): ruled out by the falsifier below")
                     if row.name == "mechanism" else row for row in finding.evidence)
    return replace(finding, evidence=evidence).with_evidence(
        ev("falsifier_met", True, "", None, text=f"not the problem as stated: {why}"),
        severity="info", falsified=why, impact_pct=0.0, explains_pct=None,
        fix=why)  # no fix to give: what rules the finding out stands in its place


def window_cap(window_ns: int, steps: int) -> str | None:
    """The severity cap of a window (None: not capped), one rule by the window's length: under
    severity_toy_window_ns, low whatever it holds (a 1.5 ms export with 6 steps and a 2 ms one with
    4 get the same cap); under severity_short_window_ns, medium unless it holds severity_min_steps
    measured steps; longer, none."""
    if window_ns < t("severity_toy_window_ns"):
        return "low"
    if window_ns < t("severity_short_window_ns") and steps < t("severity_min_steps"):
        return "medium"
    return None


def cap_severity_by_window(ctx: Context, findings: list[Finding]) -> list[Finding]:
    """Severity scales with what the window can show (window_cap: the longest device window, the
    most steps a process measured): the throughput findings above the cap are lowered to it (a
    1.5 ms Game-of-Life export is not a HIGH problem). The finding says so in its evidence."""
    if not ctx.devices:
        return findings
    steps = max((int(process.steps.count or 0) for trace in ctx.per_trace for process in trace.processes), default=0)
    window = max(device.window_ns for device in ctx.devices)
    cap = window_cap(window, steps)
    if cap is None:
        return findings
    return [finding.with_evidence(ev("severity_capped", cap, "", None,
                                     text=f"severity capped at {cap} (was {finding.severity}): a {us(window)} window "
                                          f"with {plural(steps, 'measured step')} shows too little to rank it higher"),
                                  severity=cap)
            if finding.axis == "throughput" and SEVERITIES.index(finding.severity) > SEVERITIES.index(cap) else finding
            for finding in findings]


HOST_PACED = ("launch_bound", "gpu_starved", "python_host_overhead")  # findings whose measure is the host's pace


def note_python_tracer(ctx: Context, findings: list[Finding]) -> list[Finding]:
    """A PyTorch profiler trace taken with ``with_stack=True`` holds python_function events: the Python
    tracer's own cost on every Python call lengthens the host time between launches. The findings that
    measure the host's pace say so in their evidence (their share is an upper bound), with the re-capture."""
    events = sum(int(trace.meta.get("python_events") or 0) for trace in ctx.per_trace)
    if not events:
        return findings
    text = (f"the trace holds {events:,} python_function events (captured with with_stack=True): the Python tracer's "
            "own cost on every Python call lengthens the host time between launches, so this share is an upper bound; "
            "re-capture without with_stack (record_shapes may stay on) to measure the host's own pace")
    return [finding.with_evidence(ev("python_tracer_on", events, "events", None, text=text))
            if finding.id in HOST_PACED else finding for finding in findings]


def serving_facts(serving: ServingSummary | dict, slo: dict) -> dict:
    """What the serving artifacts show that a finding's falsifier is checked against (facts;
    None: not measured): the stats lines' queue share, running mean and max, KV usage max; the
    batch cap; preemptions + retractions (measured when an engine log, which prints them, or the
    preemption counter was read); whether a --slo budget is already exceeded (True: one is,
    False: every one is met, None: none given or none decided)."""
    serving = serving_summary(serving)
    stats, memory = serving.stats, serving.memory
    seen = any(str(capture.kind).endswith("_log") for capture in serving.captures) or any(
        "num_preemptions" in name for name in serving.metrics)
    checks = [budget_check(serving, key, value) for key, value in slo.items()]
    return {
        "waiting_share_pct": stats.waiting_share_pct if stats else None,
        "running_mean": stats.running_mean if stats else None,
        "running_max": stats.running_max if stats else None,
        "kv_usage_max": stats.kv_usage_max if stats else None,
        "cap": cap_of(serving),
        "preemptions": (memory.preemptions or 0) + (memory.retractions or 0) if seen else None,
        "budget_exceeded": True if False in checks else False if checks and all(check is True for check in checks) else None,
    }


def oom_cause_ruled_out(finding: Finding, why: str) -> Finding:
    """memory_pressure with a CUDA OOM whose falsifier holds: the OOM that killed the engine is a
    fact, not a hypothesis, so the finding keeps its severity and impact; what is ruled out is the
    cause the rule read (KV pool, prefill peak, fragmentation). Its mechanism, fix and mechanism
    evidence say where to look instead (the catalog's 'elsewhere' fix)."""
    elsewhere = "mechanism the evidence supports: elsewhere (not the KV pool, the prefill peak or fragmentation)"
    evidence = tuple(replace(row, value="elsewhere", text=elsewhere) if row.name == "mechanism" else row
                     for row in finding.evidence)
    return replace(finding, evidence=evidence).with_evidence(
        ev("cause_ruled_out", True, "", None, text=f"the OOM stands; its KV cause is ruled out: {why}"),
        mechanism=("Not KV pressure: memory goes elsewhere (a leak, another process, activation peaks). "
                   f"The crash stands, but {why}"),
        fix=" ".join(catalog.CATALOG["memory_pressure"]["fix"]["elsewhere"].split()))
