"""Headline metrics of one analysis, flat: the columns of a batch summary and the rows of a
before/after comparison. Pure functions of the analysis data (the JSON contract).

* ``busy_pct`` = mean over devices of busy_pct; ``busy_pct_min`` the least busy device.
* ``idle_<cause>_pct`` = idle ns with that cause summed over devices / window ns summed
  over devices x 100.
* ``launches_per_step``, ``graph_launches_per_step``, ``syncs_per_step``,
  ``step_p50_ns``, ``step_p99_ns`` = median over processes that have steps.
* ``steps`` = steps of one rank: the median over processes that have steps of their step
  count (summed over 8 TP ranks it read 192 beside a median step of 24).
* ``collective_share_pct`` / ``collective_exposed_pct`` = mean over devices that ran
  collectives (0 when none did).
"""

from __future__ import annotations

import statistics

from tracetriage.analyzers.timeline import CAUSES

SEVERITY_ORDER = ["info", "low", "medium", "high"]


def _median(values):
    vals = [v for v in values if v is not None]
    return float(statistics.median(vals)) if vals else None


def _mean(values):
    vals = [v for v in values if v is not None]
    return float(sum(vals) / len(vals)) if vals else None


def headline_metrics(data: dict) -> dict:
    devices = data.get("devices") or []
    procs = [p for p in data.get("processes") or [] if p["steps"]["count"]]
    window = sum(d["window_ns"] for d in devices)
    coll = [d for d in devices if d.get("collective_count")]
    out = {
        "devices": len(devices),
        "processes": len(data.get("processes") or []),
        "window_ns": (data.get("window") or {}).get("duration_ns"),
        "busy_pct": _mean([d["busy_pct"] for d in devices]),
        "busy_pct_min": min((d["busy_pct"] for d in devices), default=None),
        "launches_per_step": _median([p["launches_per_step"] for p in procs]),
        "graph_launches_per_step": _median([p["graph_launches_per_step"] for p in procs]),
        "syncs_per_step": _median([p["syncs_per_step"] for p in procs]),
        "step_p50_ns": _median([p["steps"]["p50_ns"] for p in procs]),
        "step_p99_ns": _median([p["steps"]["p99_ns"] for p in procs]),
        "steps": int(statistics.median([p["steps"]["count"] for p in procs])) if procs else 0,
        "collective_share_pct": _mean([d["collective_share_pct"] for d in coll]) if coll else (0.0 if devices else None),
        "collective_exposed_pct": _mean([d["collective_exposed_pct"] for d in coll]) if coll else (0.0 if devices else None),
    }
    for cause in CAUSES:
        out[f"idle_{cause}_pct"] = (100.0 * sum(d["gaps"]["by_cause"][cause] for d in devices) / window) if window else None
    findings = data.get("findings") or []
    top = findings[0] if findings else None
    out.update({
        "headline": data.get("headline"),
        "top_finding": top["id"] if top else None,
        "top_impact_pct": top["impact_pct"] if top else None,
        "top_severity": top["severity"] if top else None,
        "max_severity": max((f["severity"] for f in findings), key=SEVERITY_ORDER.index, default=None),
        "findings": len(findings),
        "abstentions": len(data.get("abstentions") or []),
    })
    for key, value in list(out.items()):
        if isinstance(value, float):
            out[key] = round(value, 4)
    return out
