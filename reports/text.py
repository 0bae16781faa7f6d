"""Plain-text terminal summary (the default ``--format text``)."""

from __future__ import annotations

from tracetriage.analyzers.evidence import plural
from tracetriage.reports import perfetto_view
from tracetriage.reports.view import build_view, fmt_ns


def render_text(analysis) -> str:
    v = build_view(analysis.data)
    h = v["header"]
    out = [f"tracetriage {v['tool_version']}", f"CASE     {', '.join(h['inputs'])}" + (f" · {h['devices']}" if h["devices"] else "")
           + f" · captured {h['captured'] or 'at a time the capture does not record'}", "", f"VERDICT  {v['headline']}"]
    if v.get("symptom"):
        out.append(f"SYMPTOM  {v['symptom']} (its findings rank first)")
    for d in v.get("devices", [])[:8]:
        out.append(f"WINDOW   {d['id']}: {d['accounting_text']}")
    exported = (analysis.series or {}).get("perfetto_export")
    if exported:
        out.append(f"TIMELINE wrote {exported['path']} (Perfetto trace; {exported['mode']}: {exported['left_out_text']})")
    out.append("")
    w = v["window"]
    if w:
        out.append(f"window   {w['duration']} ({w['source']}; {w['warmup_text']} excluded{w['setup']})")
    for i in v["inputs"]:
        c = i.get("counts") or {}
        counts = ", ".join(f"{k} {n:,}" for k, n in c.items())
        kind = " ".join(str(x) for x in (i["kind"], i.get("version")) if x)
        out.append(f"input    {i['path']} [{kind}] {counts}".rstrip())
        for warn in i.get("warnings") or []:
            out.append(f"  warning: {warn}")
    for s in v["skipped"]:
        out.append(f"skipped  {s['path']}: {s['reason']}")
    out.append("")
    if v["devices"]:
        out.append(f"{'device':<22} {'busy %':>7} {'comp %':>7} {'copy %':>7} {'gaps':>7} {'gap p50':>10} {'gap max':>10} {'coll %':>7}  idle by cause")
        for d in v["devices"]:
            out.append(
                f"{d['id']:<22} {d['busy_pct']:>7.1f} {d['compute_pct']:>7.1f} {d['copy_only_pct']:>7.1f} {d['gaps']['count']:>7,} {d['gap_p50']:>10} {d['gap_max']:>10} "
                f"{d['collective_share_pct']:>7.1f}  {d['causes_text']}"
            )
        out.append("")
    if v.get("copies_text"):
        out += [v["copies_text"], ""]
    sk = v.get("collective_skew")
    if sk:
        if sk.get("matched"):
            out.append(f"collective skew across ranks: {sk['matched']} collectives matched, start spread p50 "
                       f"{fmt_ns(sk['p50_ns'])}, max {fmt_ns(sk['max_ns'])}")
        else:
            out.append(f"collective skew across ranks: not measured ({sk.get('reason')})")
        out.append("")
    if v["processes"]:
        out.append(f"{'pid':<8} {'steps':>6} {'source':<13} {'p50':>10} {'p99':>10} {'launch/st':>9} {'graph/st':>8} {'sync/st':>7}  name")
        for p in v["processes"]:
            out.append(
                f"{p['pid']:<8} {p['steps']['count']:>6} {p['steps']['source']:<13} {p['step_p50']:>10} {p['step_p99']:>10} "
                f"{p['lps']:>9} {p['gps']:>8} {p['sps']:>7}  {p['name']}"
            )
        out.append("")
    eff = v.get("efficiency")

    def num(x, f):
        return f.format(x) if x is not None else "-"
    if eff and eff.get("classes"):
        dev = eff["device"]["model"] if eff.get("device") else f"{eff.get('device_name') or 'unknown device'} (not in the device table)"
        out.append(f"{'class':<13} {'time':>10} {'TFLOP/s':>9} {'GB/s':>8} {'FLOP/B':>9} {'bound':<8} {'% roof':>7} "
                   f"{'% meas':>7}  on {dev}")
        for c in eff["classes"]:
            out.append(f"{c['class']:<13} {fmt_ns(c['time_ns']):>10} {num(c['achieved_tflops'], '{:.1f}'):>9} "
                       f"{num(c['achieved_gbps'], '{:.0f}'):>8} {num(c['intensity'], '{:.2f}'):>9} {c['bound'] or '-':<8} "
                       f"{num(c['pct_of_roofline'], '{:.0f}'):>7} {num(c.get('measured_share_pct'), '{:.0f}'):>7}")
        out.append("(% meas: the share of the class's kernel time whose operator shapes were measured)")
    if eff and eff.get("decode_floor"):
        df = eff["decode_floor"]
        out.append(f"decode floor: {df['bytes_per_step'] / 1e9:.2f} GB a step = {fmt_ns(df['floor_ns'])} at the datasheet "
                   f"bandwidth; measured {fmt_ns(df['measured_ns'])} = {df['pct_of_floor']:.0f}% of the floor")
    if eff and eff.get("not_measured"):
        out.append("efficiency not measured:")
        for n in eff["not_measured"]:
            share = f" ({n['share_pct']:.0f}% of that class's time)" if n.get("share_pct") is not None else ""
            out.append(f"- {n['what']}{share}: {n['reason']}")
            out.append(f"  capture: {n['capture_hint']}")
    if eff and (eff.get("classes") or eff.get("decode_floor") or eff.get("not_measured")):
        out.append("")
    hints = perfetto_view.view(analysis)["hints"] if exported else {}
    for n, f in enumerate(v["findings"], 1):
        if f.get("falsified"):
            out.append(f"[{n}] {f['severity'].upper()} FALSIFIED {f['id']} ({f['axis']}) — ruled out by its own falsifier, "
                       "claims no impact")
        else:
            out.append(f"[{n}] {f['severity'].upper()} {f['id']} ({f['axis']}) — impact {f['impact_pct']:.1f}% of {f['impact_denominator']}")
        out.append(f"    {f['title']}")
        for e in f["evidence"]:
            out.append(f"    - {e['text']}")
        if exported and hints.get(f["id"]):
            out.append(f"    timeline:  {hints[f['id']]}")
        out.append(f"    mechanism: {f['mechanism']}")
        out.append(f"    {'ruled out' if f.get('falsified') else 'fix'}:{' ' if f.get('falsified') else '       '}{f['fix']}")
        out.append(f"    confirm:   {f['confirm']}")
        out.append(f"    falsifier: {f['falsifier']}")
        out.append("")
    topo = v.get("topology")
    if topo:
        out.append(f"TOPOLOGY {topo['path']}: {plural(len(topo['gpus']), 'GPU')}, {plural(topo['nics'], 'NIC')}, islands {topo['islands']}")
        out.append("  NUMA per GPU: " + ", ".join(f"GPU{g}:{n}" for g, n in topo["numa"].items()))
        for g in topo["crossing_groups"]:
            out.append(f"  group {g['group']}: spans {g['islands_spanned']} island(s), worst link {g['worst_link']}")
        if topo.get("recommendation"):
            out.append(f"  recommendation: {topo['recommendation']}")
        out.append("")
    for log in v.get("nccl") or []:
        out.append(f"NCCL LOG {log['path']}: {log['library']} {log['version'] or '(version not logged)'}, {log['nccl_lines']:,} NCCL lines")
        for c in log["communicators"]:
            out.append(f"  communicator {c['comm']}: {c['nranks']} ranks, {c['nnodes'] or '?'} node(s), {c['ranks_seen']} ranks seen, {c['init_complete']} Init COMPLETE")
        if log["transports"]:
            out.append("  transports per hop: " + ", ".join(f"{k} {n}" for k, n in log["transports"].items()) + f" (GDRDMA on {log['gdrdma_connections']})")
        for p in log["intra_node_slow_paths"][:8]:
            out.append(f"  slow intra-node hop: {p['from_dev']} -> {p['to_dev']} via {p['via']}")
        out.append(f"  WARN lines: {len(log['warnings'])}")
        t = log["tests"]
        if t["rows"]:
            out.append(f"  nccl-tests {t['name'] or ''}: {t['rows']} sizes, {t['ranks']} ranks, max busbw {t['max_busbw']} GB/s, avg busbw {t['avg_busbw']}")
        out.append("")
    srv = v.get("serving")
    if srv:
        out.append("SERVING " + ", ".join(f"{c['path']} [{c['kind']}]" for c in srv["captures"]))
        if srv["version"]:
            out.append(f"  vLLM {srv['version']}")
        if srv["config"]:
            out.append("  config: " + ", ".join(f"{k}={v}" for k, v in srv["config"].items()))
        st = srv.get("stats")
        if st:
            out.append(f"  {st['samples']} stats samples: running mean {st['running_mean']} (max {st['running_max']}), "
                       f"waiting mean {st['waiting_mean']} (max {st['waiting_max']}, non-empty in {st['waiting_share_pct']}%), "
                       f"KV cache p50 {st['kv_usage_p50']}% max {st['kv_usage_max']}%, generation {st['gen_tps_mean']} tok/s")
        sv = v["serving_view"]
        for r in sv["latency_rows"]:
            out.append(f"  {r['metric']:<6} {r['side']:<28} p50 {r['p50']:>10}  p99 {r['p99']:>10}  mean {r['mean']:>10}  {r['note']}")
        for line in sv["slo"]:
            out.append("  SLO " + line)
        if sv["littles_law"]:
            out.append("  " + sv["littles_law"])
        if sv["fit"]:
            out.append("  " + sv["fit"])
        for b in sv["sweep"][:12]:
            conc = f" conc {b['concurrency']}" if b["concurrency"] is not None else ""  # None: no concurrency cap
            out.append(f"  bench: rate {b['rate']}{conc} -> {b['throughput'] or 0:.2f} req/s, TTFT {b['ttft']}, "
                       f"TPOT {b['tpot']}, ITL p99 {b['itl_p99']} {b['group']}")
        out.append("")
    prof = v.get("host_profile")
    if prof:
        out.append(f"HOST PROFILE (py-spy): {prof['total_samples']:,} non-idle samples, {prof['idle_samples']:,} idle")
        for c in prof["captures"]:
            out.append(f"  {c['path']} [{c['format']}]: {plural(c['threads'], 'thread')}, {c['idle_threads']} idle")
        snap = prof.get("snapshot") or []
        if snap:
            active = [x for x in snap if not x["idle"]]
            common = {}
            for x in active:
                common[x["frame"]] = common.get(x["frame"], 0) + 1
            if active:
                frame, n = max(common.items(), key=lambda kv: kv[1])
                out.append(f"  snapshot: {n} of {len(active)} active threads are in {frame}")
            for x in snap[:16]:
                state = "idle" if x["idle"] else "active"
                out.append(f"  - pid {x['pid'] or '?'} {x['process'][:40]} thread {x['thread']} ({state}): {x['frame']} <- {x['caller']}")
        for f in v.get("hot_frames", [])[:10]:
            out.append(f"  {f['share_pct']:>6.1f}% incl {f['self_pct']:>6.1f}% self{'  [syncs]' if f['calls_sync'] else ''}  {f['frame']}")
        out.append("")
    if v["abstentions"]:
        out.append("NOT MEASURED")
        for a in v["abstentions"]:
            out.append(f"- {a['analysis']} ({a['scope']}): {a['reason']}")
            out.append(f"  capture: {a['capture_hint']}")
        out.append("")
    if v["kernels"]:
        out.append("TOP KERNELS (share of kernel time in the window)")
        for k in v["kernels"][:10]:
            out.append(f"  {k['share_pct']:>6.1f}%  {k['count']:>8,} x {k['mean']:>10}  {k['short_name']}")
    return "\n".join(out) + "\n"
