"""Formatting shared by the text, Markdown and HTML views (numbers -> display strings).

Views only format; every number comes from the Analysis data (the JSON contract).
"""

from __future__ import annotations

import copy


def fmt_ns(ns) -> str:
    if ns is None:
        return "n/a"
    ns = float(ns)
    if ns < 0:
        return "-" + fmt_ns(-ns)
    if ns >= 1e9:
        return f"{ns / 1e9:,.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:,.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:,.1f} µs"
    return f"{ns:,.0f} ns"


def fmt_num(x) -> str:
    if x is None:
        return "n/a"
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.1f}"


def pct(x: float) -> str:
    """One decimal that never shows 100.0% for less."""
    shown = f"{x:.1f}"
    return "99.9%" if shown == "100.0" and x < 100.0 else shown + "%"


def build_view(data: dict) -> dict:
    v = copy.deepcopy(data)
    if v.get("window"):
        v["window"]["duration"] = fmt_ns(v["window"]["duration_ns"])
    for d in v.get("devices", []):
        d["gap_p50"] = fmt_ns(d["gaps"]["p50_ns"])
        d["gap_p99"] = fmt_ns(d["gaps"]["p99_ns"])
        d["gap_max"] = fmt_ns(d["gaps"]["max_ns"])
        d["busy"] = fmt_ns(d["busy_ns"])
        w = d["window_ns"] or 1
        parts = [(c, n) for c, n in d["gaps"]["by_cause"].items() if n]
        acc = d.get("accounting") or {"slices_pct": {}, "claims_pct": {}}
        claims = sorted(acc["claims_pct"].items(), key=lambda x: -x[1])
        claimed = sum(x for _, x in claims)
        busy = {k: acc["slices_pct"].get(k, 0.0) for k in ("compute", "collective", "copy")}
        d["accounting_text"] = ", ".join(
            [f"{k} {pct(x)}" for k, x in claims]
            + [f"unclaimed {pct(max(0.0, 100.0 - claimed))} (compute {pct(busy['compute'])}, copies {pct(busy['copy'])} of the window in all)"])
        d["causes_text"] = ", ".join(f"{c} {100 * n / w:.1f}%" for c, n in sorted(parts, key=lambda x: -x[1])) or "-"
    for p in v.get("processes", []):
        p["step_p50"] = fmt_ns(p["steps"]["p50_ns"])
        p["step_p99"] = fmt_ns(p["steps"]["p99_ns"])
        p["step_max"] = fmt_ns(p["steps"]["max_ns"])
        p["lps"] = fmt_num(p["launches_per_step"])
        p["gps"] = fmt_num(p["graph_launches_per_step"])
        p["sps"] = fmt_num(p["syncs_per_step"])
    for k in v.get("kernels", []):
        k["mean"] = fmt_ns(k["mean_ns"])
        k["median"] = fmt_ns(k["median_ns"])
        k["total"] = fmt_ns(k["total_ns"])
        k["short_name"] = k["name"] if len(k["name"]) <= 90 else k["name"][:87] + "..."
    v.setdefault("skipped", [])
    v["copies_text"] = copies_text(v.get("copies"))
    return v


def copies_text(c: dict | None) -> str | None:
    """One line on the copies of the window: pageable async, synchronous calls, DtoH, UVM migrations."""
    if not c:
        return None
    m = c.get("migrations") or {"count": 0, "bytes": 0}
    return (f"copies in the window: {c['pageable_async']['count']:,} async from/to pageable memory, "
            f"{c['sync_copy_calls']['count']:,} synchronous copy calls, {c['dtoh']['count']:,} device-to-host copies "
            f"({c['dtoh']['bytes']:,} B); unified-memory migrations (page moves, not copies): {m['count']:,} ({m['bytes']:,} B)")
