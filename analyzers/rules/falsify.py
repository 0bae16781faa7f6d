"""Falsification and severity caps: what a capture already shows against a finding.

A finding whose own falsifier (``falsified_when`` in the catalog) the capture meets is kept but
downgraded (apply_falsifiers); the throughput findings of a window too short to show a repeating
pattern are capped in severity (cap_severity_by_window)."""

from __future__ import annotations

import numpy as np

from tracetriage.analyzers import catalog
from tracetriage.analyzers.catalog import SEVERITIES
from tracetriage.analyzers.evidence import ev, plural, us
from tracetriage.analyzers.rules import context
from tracetriage.analyzers.rules.context import Context, t
from tracetriage.analyzers.rules.slo import budget_check, cap_of

# name: (value, why)
THRESHOLDS = {
    "severity_min_steps": (5, "a window holding 5+ measured steps shows a repeating pattern: its severity is not capped"),
    "severity_toy_window_ns": (10_000_000, ("without 5 steps, a window under 10 ms (a toy program, one step) shows too "
                                            "little for more than low")),
    "severity_short_window_ns": (100_000_000, ("without 5 steps, a window under 100 ms may be start-up or a "
                                               "single step: at most medium")),
}


def facts(ctx: Context) -> dict:
    """What the capture shows that a finding's falsifier can be checked against (catalog.falsified):
    ``config`` (the engine's), ``trace`` (graph replays and launches; the collective share and its
    exposed part, means over the devices that ran collectives), ``serving`` (serving_facts),
    ``threshold`` (THRESHOLDS' values by name) and ``kind``. A figure not measured is None."""
    serving = ctx.data.get("serving") or {}
    coll = [d for d in ctx.devices if d.get("collective_count")]
    return {
        "config": dict(serving.get("config") or {}),
        "trace": {"graph_replays": (sum(int(p.get("graph_replays_in_window") or 0) for p in ctx.per_trace)
                                    if ctx.per_trace else None),
                  "graph_launches_per_step": max((pr["graph_launches_per_step"] for p in ctx.per_trace for pr in p["processes"]
                                                  if pr.get("graph_launches_per_step") is not None), default=None),
                  "collective_share_pct": float(np.mean([d["collective_share_pct"] for d in coll])) if coll else None,
                  "collective_exposed_pct": float(np.mean([d["collective_exposed_pct"] for d in coll])) if coll else None},
        "serving": serving_facts(serving, ctx.slo) if serving else {},
        "threshold": {name: value for name, (value, _why) in context.THRESHOLDS.items()},
        "kind": dict(ctx.kind or {}),
    }


def apply_falsifiers(ctx: Context, findings: list[dict]) -> None:
    """No finding whose own falsifier the capture already meets: it is kept (its slice stays
    claimed, the accounting adds up) but downgraded to info, marked ``falsified`` with the reason,
    ranked last and never named in a headline. (A memory_pressure finding with a CUDA OOM is the
    exception: the OOM happened, so it stands at its severity and only its cause changes.) It
    claims no impact (0: it explains nothing), its fix is the reason it is ruled out, and the
    mechanism its evidence pointed to is said to be ruled out."""
    measured = facts(ctx)
    for f in findings:
        why = catalog.falsified(f, measured)
        if why and f["id"] == "memory_pressure" and any(e["name"] == "oom_events" and e["value"] for e in f["evidence"]):
            oom_cause_ruled_out(f, why)  # the crash is a fact: only its cause is ruled out
        elif why:
            _falsify(f, why)


def _falsify(f: dict, why: str) -> None:
    for e in f["evidence"]:
        if e["name"] == "mechanism":
            e["text"] = f"mechanism the evidence pointed to ({e['value']}): ruled out by the falsifier below"
    f["evidence"].append(ev("falsifier_met", True, "", None, text=f"not the problem as stated: {why}"))
    f["severity"], f["falsified"], f["impact_pct"] = "info", why, 0.0
    f["fix"] = why  # no fix to give: what rules the finding out stands in its place


def cap_severity_by_window(ctx: Context, findings: list[dict]) -> None:
    """Severity scales with what the window can show: without severity_min_steps measured steps,
    a window under severity_toy_window_ns caps the throughput findings at low, one under
    severity_short_window_ns at medium (a 1.5 ms Game-of-Life export is not a HIGH problem).
    The finding says so in its evidence."""
    if not ctx.devices:
        return
    steps = max((int(pr["steps"]["count"] or 0) for p in ctx.per_trace for pr in p["processes"]), default=0)
    window = max(d["window_ns"] for d in ctx.devices)
    if steps >= t("severity_min_steps") or window >= t("severity_short_window_ns"):
        return
    cap = "low" if window < t("severity_toy_window_ns") else "medium"
    for f in findings:
        if f["axis"] == "throughput" and SEVERITIES.index(f["severity"]) > SEVERITIES.index(cap):
            f["evidence"].append(ev("severity_capped", cap, "", None,
                                    text=f"severity capped at {cap} (was {f['severity']}): a {us(window)} window with "
                                         f"{plural(steps, 'measured step')} shows too little to rank it higher"))
            f["severity"] = cap


def serving_facts(serving: dict, slo: dict) -> dict:
    """What the serving artifacts show that a finding's falsifier is checked against (facts;
    None: not measured): the stats lines' queue share, running mean and max, KV usage max; the
    batch cap; preemptions + retractions (measured when an engine log, which prints them, or the
    preemption counter was read); whether a --slo budget is already exceeded (True: one is,
    False: every one is met, None: none given or none decided)."""
    st = serving.get("stats") or {}
    mem = serving.get("memory") or {}
    seen = any(str(c.get("kind", "")).endswith("_log") for c in serving.get("captures") or []) or any(
        "num_preemptions" in k for k in serving.get("metrics") or {})
    checks = [budget_check(serving, key, value) for key, value in slo.items()]
    return {
        "waiting_share_pct": st.get("waiting_share_pct"),
        "running_mean": st.get("running_mean"),
        "running_max": st.get("running_max"),
        "kv_usage_max": st.get("kv_usage_max"),
        "cap": cap_of(serving),
        "preemptions": (mem.get("preemptions") or 0) + (mem.get("retractions") or 0) if seen else None,
        "budget_exceeded": True if False in checks else False if checks and all(c is True for c in checks) else None,
    }


def oom_cause_ruled_out(finding: dict, why: str) -> None:
    """memory_pressure with a CUDA OOM whose falsifier holds: the OOM that killed the engine is a
    fact, not a hypothesis, so the finding keeps its severity and impact; what is ruled out is the
    cause the rule read (KV pool, prefill peak, fragmentation). Its mechanism, fix and mechanism
    evidence say where to look instead (the catalog's 'elsewhere' fix)."""
    finding["mechanism"] = ("Not KV pressure: memory goes elsewhere (a leak, another process, activation peaks). "
                            f"The crash stands, but {why}")
    finding["fix"] = " ".join(catalog.CATALOG["memory_pressure"]["fix"]["elsewhere"].split())
    for e in finding["evidence"]:
        if e["name"] == "mechanism":
            e["value"] = "elsewhere"
            e["text"] = "mechanism the evidence supports: elsewhere (not the KV pool, the prefill peak or fragmentation)"
    finding["evidence"].append(ev("cause_ruled_out", True, "", None, text=f"the OOM stands; its KV cause is ruled out: {why}"))
