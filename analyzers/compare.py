"""Before/after comparison of two analyses (``tracetriage compare``).

``deltas[metric]`` = {before, after, change} with change = after - before (None when
either side was not measured). Findings are matched by id: resolved (before only),
new (after only), unchanged (both). Kernel deltas compare total kernel time per
name in each window (ns), largest absolute change first.
"""

from __future__ import annotations

from tracetriage import __version__
from tracetriage.analyzers.summary import headline_metrics

SCHEMA = "tracetriage.compare/1"
METRICS = [
    "busy_pct", "busy_pct_min", "idle_launch_pct", "idle_sync_pct", "idle_memcpy_sync_pct", "idle_other_cuda_pct",
    "idle_host_pct", "idle_unknown_pct", "launches_per_step", "graph_launches_per_step", "syncs_per_step",
    "step_p50_ns", "step_p99_ns", "collective_share_pct", "collective_exposed_pct",
]


def compare(before: dict, after: dict, before_label: str = "before", after_label: str = "after") -> dict:
    hb, ha = headline_metrics(before), headline_metrics(after)
    deltas = {}
    for m in METRICS:
        b, a = hb.get(m), ha.get(m)
        deltas[m] = {"before": b, "after": a, "change": None if b is None or a is None else round(a - b, 4)}
    ids_b = [f["id"] for f in before.get("findings") or []]
    ids_a = [f["id"] for f in after.get("findings") or []]
    kb = {k["name"]: k["total_ns"] for k in before.get("kernels") or []}
    ka = {k["name"]: k["total_ns"] for k in after.get("kernels") or []}
    kernel_deltas = sorted(
        ({"name": n, "before_ns": kb.get(n), "after_ns": ka.get(n), "change_ns": (ka.get(n) or 0) - (kb.get(n) or 0)}
         for n in set(kb) | set(ka)),
        key=lambda x: (-abs(x["change_ns"]), x["name"]),
    )[:15]
    changed = [m for m, d in deltas.items() if d["change"] not in (None, 0, 0.0)]
    return {
        "schema": SCHEMA,
        "tool_version": __version__,
        "before": {"label": before_label, "headline": before.get("headline"), **hb},
        "after": {"label": after_label, "headline": after.get("headline"), **ha},
        "deltas": deltas,
        "changed": changed,
        "findings": {
            "resolved": [i for i in ids_b if i not in ids_a],
            "new": [i for i in ids_a if i not in ids_b],
            "unchanged": [i for i in ids_b if i in ids_a],
        },
        "findings_before": before.get("findings") or [],
        "findings_after": after.get("findings") or [],
        "kernel_deltas": kernel_deltas,
        "summary": summary_line(deltas, ids_b, ids_a),
    }


def summary_line(deltas: dict, ids_b: list, ids_a: list) -> str:
    parts = []
    resolved = [i for i in ids_b if i not in ids_a]
    new = [i for i in ids_a if i not in ids_b]
    if resolved:
        parts.append("resolved: " + ", ".join(resolved))
    if new:
        parts.append("new: " + ", ".join(new))
    for m, label, fmt in (("busy_pct", "GPU busy", "{:.1f}%"), ("launches_per_step", "launches/step", "{:,.0f}"),
                          ("syncs_per_step", "syncs/step", "{:g}"), ("step_p50_ns", "step p50", None)):
        d = deltas[m]
        if d["change"] not in (None, 0, 0.0):
            show = (lambda v: f"{v / 1e6:,.2f} ms") if fmt is None else fmt.format
            parts.append(f"{label} {show(d['before'])} -> {show(d['after'])}")
    return "; ".join(parts) if parts else "no change"
