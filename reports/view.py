"""Formatting shared by the text, Markdown and HTML views (numbers -> display strings).

Views only format; every number comes from the Analysis data (the JSON contract).
"""

from __future__ import annotations

import copy

from tracetriage.analyzers.evidence import ms, nbytes, pct, plural
from tracetriage.captured import capture_start_utc
from tracetriage.reports.palette import CAUSE_LABELS, finding_color


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


def fmt_bytes(n) -> str:
    """Bytes in one style on every page and format: ``16.1 GB``, ``512 B`` (decimal units)."""
    return "n/a" if n is None else nbytes(n)


def short_middle(name: str, width: int = 90) -> str:
    """A long templated name (Tensile, CUTLASS) cut in the middle: its start (the kernel family)
    and its end (the tile shape, the last template arguments) are what tell two kernels apart."""
    name = str(name)
    if len(name) <= width:
        return name
    head = (width - 1) * 3 // 5
    return name[:head] + "…" + name[-(width - 1 - head):]


def fmt_num(x) -> str:
    if x is None:
        return "n/a"
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.1f}"


def build_view(data: dict) -> dict:
    v = copy.deepcopy(data)
    if v.get("window"):
        v["window"]["duration"] = fmt_ns(v["window"]["duration_ns"])
        v["window"]["warmup_text"] = plural(v["window"].get("warmup_steps_excluded") or 0, "warm-up step")
        setup = v["window"].get("setup_excluded_ns") or 0
        v["window"]["setup"] = f"; {fmt_ns(setup)} of set-up before the first kernel excluded" if setup else ""
        cause = v["window"].get("setup_cause")
        if setup and cause:
            v["window"]["setup"] = (f"; {fmt_ns(setup)} of set-up before the work excluded: the host was in {cause['call']}"
                                    + (f" ({cause['caller']})" if cause.get("caller") else ""))
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
        d["compute_pct"] = busy["compute"] + busy["collective"]  # kernels, collectives included
        d["copy_only_pct"] = busy["copy"]
        d["claims"] = [{"id": k, "pct": x, "color": finding_color(k)} for k, x in claims]
        d["unclaimed_pct"] = max(0.0, 100.0 - claimed)
        d["accounting_text"] = ", ".join(
            [f"{k} {pct(x)}" for k, x in claims]
            + [f"unclaimed {pct(max(0.0, 100.0 - claimed))} (compute {pct(busy['compute'] + busy['collective'])}"
               + (f" of which collectives {pct(busy['collective'])}" if busy["collective"] else "")
               + f", copies {pct(busy['copy'])} of the window in all)"])  # compute = kernels, collectives included: one definition
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
        k["short_name"] = short_middle(k["name"])
    v.setdefault("skipped", [])
    v["copies_text"] = copies_text(v.get("copies"), v.get("devices"))
    v["captured_utc"] = capture_start_utc(v)
    v["header"] = header_view(v)
    for f in v.get("findings", []):
        f["color"] = finding_color(f["id"])
    v["cause_labels"] = CAUSE_LABELS
    columns: dict[str, str] = {}  # the findings that claim a slice somewhere, in the order of their first claim
    for d in v.get("devices", []):
        for c in d["claims"]:
            columns.setdefault(c["id"], c["color"])
    v["claim_columns"] = [{"id": k, "color": c} for k, c in columns.items()]
    for d in v.get("devices", []):
        mine = {c["id"]: c["pct"] for c in d["claims"]}
        d["claim_cells"] = [mine.get(k) for k in columns]
    v["serving_view"] = serving_view(v.get("serving"))
    return v


def serving_view(srv: dict | None) -> dict | None:
    """Rows of the serving section: latency percentiles (client and server side), Little's law, the sweep,
    each --slo budget checked."""
    from tracetriage.analyzers.rules.slo import slo_text

    if not srv:
        return None
    rows = []
    for metric, c in (srv.get("latency") or {}).get("client", {}).items():
        if metric == "record":
            continue
        rows.append({"metric": metric.upper(), "side": "client (benchmark)", "p50": ms(c.get("median") or c.get("p50")),
                     "p99": ms(c.get("p99")), "mean": ms(c.get("mean")), "note": f"max {ms(c['max'])}" if c.get("max") else ""})
    for metric, h in (srv.get("latency") or {}).get("server", {}).items():
        def q(name, h=h):
            x = h.get(name)
            return "n/a" if not x else (">" if x["lower_bound"] else "") + ms(x["value_ms"])
        res = [f"{k} ±{h[k]['resolution_ms']:g} ms" for k in ("p50", "p99") if h.get(k) and h[k].get("resolution_ms")]
        rows.append({"metric": metric.upper(), "side": "server (/metrics histogram)", "p50": q("p50"), "p99": q("p99"),
                     "mean": ms(h.get("mean_ms")),
                     "note": f"{h['count']:,.0f} requests; bucket resolution " + (", ".join(res) if res else "n/a")})
    law = srv.get("littles_law") or {}
    law_text = None
    if law.get("arrival_rate_rps") is not None or law.get("in_system") is not None:
        parts = []
        if law.get("arrival_rate_rps") is not None:
            parts.append(f"arrival {law['arrival_rate_rps']:g} req/s vs capacity {law['capacity_rps']:g} req/s")
        if law.get("in_system") is not None:
            parts.append(f"requests in the system L = {law['in_system']:g}"
                         + (f" = throughput x time in system ({law['time_in_system_s']:g} s)" if law.get("time_in_system_s") else ""))
        law_text = "Little's law (L = λ·W): " + "; ".join(parts) + f" — {law.get('source')}"
    sweep = [{"rate": "inf" if isinstance(b.get("request_rate"), float) and b["request_rate"] == float("inf") else b.get("request_rate"),
              "concurrency": b.get("max_concurrency"), "throughput": b.get("request_throughput"),
              "ttft": ms(b.get("mean_ttft_ms")), "tpot": ms(b.get("mean_tpot_ms")), "itl_p99": ms(b.get("p99_itl_ms")),
              "group": b.get("group") or ""} for b in srv.get("bench") or []]
    fit = srv.get("tpot_fit")
    return {"latency_rows": rows, "littles_law": law_text, "sweep": sweep[:30],
            "fit": ((f"TPOT = {fit['a_ms']:.2f} ms + {fit['b_ms_per_seq']:.3f} ms x running (r² {fit['r2']:.2f}, "
                     f"{fit['points']} points, {fit['source']})") if fit.get("model", True) else
                    f"TPOT against the running batch: no model ({fit['rejected']}; {fit['points']} points, {fit['source']})")
            if fit else None,
            "memory": srv.get("memory"), "tokens": srv.get("tokens"), "replicas": srv.get("replicas") or [],
            "slo": [slo_text(c) for c in srv.get("slo_checks") or []]}


_DIRECTIONS = {"HtoD": "host-to-device", "DtoH": "device-to-host", "DtoD": "device-to-device", "PtoP": "peer-to-peer",
               "HtoH": "host-to-host"}


def copies_text(c: dict | None, devices: list[dict] | None = None) -> str | None:
    """One line on the copies of the window: every direction with its count and bytes (from the
    devices' copy activity, summed), then pageable async copies, synchronous copy calls and UVM
    migrations."""
    if not c:
        return None
    m = c.get("migrations") or {"count": 0, "bytes": 0}
    dirs: dict[str, dict] = {}
    for d in devices or []:
        for k, x in ((d.get("copies") or {}).get("by_direction") or {}).items():
            t = dirs.setdefault(k, {"count": 0, "bytes": 0})
            t["count"] += x.get("count") or 0
            t["bytes"] += x.get("bytes") or 0
    if not dirs and c["dtoh"]["count"]:
        dirs["DtoH"] = dict(c["dtoh"])
    moved = ", ".join(f"{plural(x['count'], _DIRECTIONS.get(k, k) + ' copy', _DIRECTIONS.get(k, k) + ' copies')} "
                      f"({fmt_bytes(x['bytes'])})" for k, x in sorted(dirs.items(), key=lambda kv: -kv[1]["bytes"]))
    return (f"copies in the window: {moved or 'none'}; {plural(c['pageable_async']['count'], 'async copy', 'async copies')} "
            f"from/to pageable memory, {plural(c['sync_copy_calls']['count'], 'synchronous copy call')}; "
            f"unified-memory migrations (page moves, not copies): {m['count']:,} ({fmt_bytes(m['bytes'])})")


def header_view(v: dict) -> dict:
    """What the page is about, before any number: the inputs by name, the capture's date when
    the capture records one, and the device(s)."""
    paths = [str(i.get("path") or "") for i in v.get("inputs") or []]
    parents = {p.rsplit("/", 1)[0] if "/" in p else "" for p in paths}
    if len(parents) == 1 and len(paths) > 1 and next(iter(parents)):  # one bundle: its folder, then the files
        names = [f"{next(iter(parents))}/ ({', '.join(p.rsplit('/', 1)[-1] for p in paths)})"]
    else:
        names = paths
    eff = v.get("efficiency") or {}
    known = (eff.get("device") or {}).get("model")  # matched by its properties when the name is blank
    devices: dict[str, int] = {}
    for d in v.get("devices") or []:
        key = d.get("name") or "unknown GPU"
        if key == "unknown GPU" and known and d.get("trace") == eff.get("trace"):
            key = f"{known} (by its properties: the capture names no device)"
        devices[key] = devices.get(key, 0) + 1
    return {"inputs": names, "devices": ", ".join(f"{n} x {k}" if n > 1 else k for k, n in devices.items()),
            "captured": v.get("captured_utc")}
