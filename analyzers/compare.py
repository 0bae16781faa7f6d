"""Before/after comparison of two analyses (``tracetriage compare``), like with like.

* ``deltas[metric]`` = {before, after, change} with change = after - before (None when
  either side was not measured). Every metric is a rate or a share already: per step
  (launches, syncs), per window (busy %, idle by cause, collective share), or a step
  percentile, so windows of different lengths compare directly.
* Findings are matched by id: ``resolved`` (before only), ``new`` (after only), and a
  finding on both sides is ``improved`` / ``worse`` when its impact moved by more than
  :data:`IMPACT_TOLERANCE_PTS` points (down / up) or its severity changed, else
  ``unchanged``; ``finding_changes`` gives the impact before and after.
* Kernels: each name's time as a share of its window (kernel ns / window ns x 100) on
  each side, so a longer capture does not look slower; a kernel absent from one window
  is ``"not in window"`` on that side, not a negative time.
"""

from __future__ import annotations

from tracetriage import __version__
from tracetriage.analyzers.summary import SEVERITY_ORDER, headline_metrics

SCHEMA = "tracetriage.compare/1"
IMPACT_TOLERANCE_PTS = 2.0
METRICS = [
    "busy_pct", "busy_pct_min", "idle_launch_pct", "idle_sync_pct", "idle_memcpy_sync_pct", "idle_other_cuda_pct",
    "idle_host_pct", "idle_unknown_pct", "launches_per_step", "graph_launches_per_step", "syncs_per_step",
    "step_p50_ns", "step_p99_ns", "collective_share_pct", "collective_exposed_pct",
]


def _kernel_shares(data: dict) -> dict[str, dict]:
    window = sum(w["duration_ns"] for w in data.get("windows") or []) or (data.get("window") or {}).get("duration_ns") or 0
    return {k["name"]: {"total_ns": k["total_ns"], "share_pct": round(100.0 * k["total_ns"] / window, 4) if window else None}
            for k in data.get("kernels") or []}


def _finding_changes(before: list[dict], after: list[dict]) -> tuple[dict, list[dict]]:
    fb = {f["id"]: f for f in before}
    fa = {f["id"]: f for f in after}
    out = {"resolved": [i for i in fb if i not in fa], "new": [i for i in fa if i not in fb],
           "improved": [], "worse": [], "unchanged": []}
    changes = []
    for i in fb:
        if i not in fa:
            continue
        b, a = fb[i], fa[i]
        delta = round(a["impact_pct"] - b["impact_pct"], 2)
        sev = SEVERITY_ORDER.index(a["severity"]) - SEVERITY_ORDER.index(b["severity"])
        verdict = ("worse" if delta > IMPACT_TOLERANCE_PTS or sev > 0 else
                   "improved" if delta < -IMPACT_TOLERANCE_PTS or sev < 0 else "unchanged")
        out[verdict].append(i)
        changes.append({"id": i, "before_pct": b["impact_pct"], "after_pct": a["impact_pct"], "change_pts": delta,
                        "before_severity": b["severity"], "after_severity": a["severity"], "verdict": verdict,
                        "denominator": a["impact_denominator"]})
    return out, changes


def compare(before: dict, after: dict, before_label: str = "before", after_label: str = "after") -> dict:
    hb, ha = headline_metrics(before), headline_metrics(after)
    deltas = {}
    for m in METRICS:
        b, a = hb.get(m), ha.get(m)
        deltas[m] = {"before": b, "after": a, "change": None if b is None or a is None else round(a - b, 4)}
    findings, changes = _finding_changes(before.get("findings") or [], after.get("findings") or [])
    kb, ka = _kernel_shares(before), _kernel_shares(after)
    kernel_deltas = []
    for n in set(kb) | set(ka):
        b, a = kb.get(n), ka.get(n)
        change = (a["share_pct"] - b["share_pct"]) if a and b and a["share_pct"] is not None and b["share_pct"] is not None else None
        kernel_deltas.append({
            "name": n,
            "before_ns": b["total_ns"] if b else None, "after_ns": a["total_ns"] if a else None,
            "before_share_pct": b["share_pct"] if b else None, "after_share_pct": a["share_pct"] if a else None,
            "change_pts": None if change is None else round(change, 4),
            "status": "both" if a and b else "not in window before" if a else "not in window after",
        })
    kernel_deltas.sort(key=lambda k: (-(abs(k["change_pts"]) if k["change_pts"] is not None
                                        else (k["before_share_pct"] or k["after_share_pct"] or 0.0)), k["name"]))
    changed = [m for m, d in deltas.items() if d["change"] not in (None, 0, 0.0)]
    return {
        "schema": SCHEMA,
        "tool_version": __version__,
        "before": {"label": before_label, "headline": before.get("headline"), **hb},
        "after": {"label": after_label, "headline": after.get("headline"), **ha},
        "deltas": deltas,
        "changed": changed,
        "findings": findings,
        "finding_changes": changes,
        "impact_tolerance_pts": IMPACT_TOLERANCE_PTS,
        "findings_before": before.get("findings") or [],
        "findings_after": after.get("findings") or [],
        "kernel_deltas": kernel_deltas[:15],
        "summary": summary_line(deltas, findings),
    }


def summary_line(deltas: dict, findings: dict) -> str:
    parts = [f"{k}: " + ", ".join(findings[k]) for k in ("resolved", "new", "improved", "worse") if findings[k]]
    for m, label, fmt in (("busy_pct", "GPU busy", "{:.1f}%"), ("launches_per_step", "launches/step", "{:,.0f}"),
                          ("syncs_per_step", "syncs/step", "{:g}"), ("step_p50_ns", "step p50", None)):
        d = deltas[m]
        if d["change"] not in (None, 0, 0.0):
            show = (lambda v: f"{v / 1e6:,.2f} ms") if fmt is None else fmt.format
            parts.append(f"{label} {show(d['before'])} -> {show(d['after'])}")
    return "; ".join(parts) if parts else "no change"
