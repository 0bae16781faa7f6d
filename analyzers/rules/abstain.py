"""Abstentions: what the capture does not measure that a verdict needs, each with the capture
that would decide it; and the oddities that make a trace too small or too odd to judge."""

from __future__ import annotations

import re

from tracetriage.analyzers.catalog import capture_text
from tracetriage.analyzers.evidence import plural, us
from tracetriage.analyzers.rules.context import Context, process_name, t
from tracetriage.analyzers.rules.hints import capture_cmd, hint_format, host_profiler_hint
from tracetriage.analyzers.rules.serving import budgets_break_at, judge_fit, tail_words, tpot_needs_budget, unexplained_tail
from tracetriage.analyzers.rules.slo import slo_checks, slo_text

# name: (value, why)
THRESHOLDS = {
    "host_idle_pyspy_hint_pct": (10.0, "idle host-code time above 10% of the window deserves a host profile"),
    "judge_min_gpu_ops": (20, "fewer GPU operations than this in the window are a handful, not a workload"),
    "judge_min_window_ns": (1_000_000, "a window shorter than 1 ms is shorter than one decode step"),
    "capture_launch_ratio": (4.0, "launch calls at 4x the kernels that ran: work was recorded into a graph, not executed"),
}

CAPTURE_CALLS = re.compile(r"(?i)(Stream|Thread)?BeginCapture|EndCapture|GraphInstantiate")
# Abstentions that mean the capture cannot be judged healthy (too little, or the wrong phase).
ODD = ("too_few_gpu_ops", "window_too_short", "memset_only", "graph_capture_phase")
BLOCKS_HEALTHY = ODD + ("gap_causes", "graph_replays")


def oddities(p: dict) -> list[dict]:
    """Why one trace is too small or too odd to judge (empty when it can be judged):
    a handful of GPU operations, a window shorter than a step, memsets only, or a
    CUDA/HIP-graph capture phase (stream capture or graph instantiation calls, and
    launch calls far exceeding the kernels that ran)."""
    fmt = hint_format(p)
    w = p["window"]["duration_ns"]
    ops = p["gpu_ops_in_window"]
    out = []

    def add(analysis, reason, what="steady"):
        out.append({"analysis": analysis, "scope": p["meta"].get("path") or "trace", "reason": reason,
                    "capture_hint": capture_cmd(fmt, what)})

    executed = p["executed_total"]  # over the whole capture: graph capture often lies outside the GPU window
    if p["capture_calls"] and p["launches_total"] >= t("capture_launch_ratio") * max(1, executed):
        add("graph_capture_phase", f"{plural(p['capture_calls'], 'stream-capture or graph-instantiate call')} and "
            f"{p['launches_total']:,} launch calls for {executed:,} kernels executed: this is a CUDA/HIP-graph capture "
            "phase, not steady-state serving")
    elif p["capture_calls"] and any(pr["steps"]["source"] == "sync" for pr in p["processes"]) and executed < p["launches_total"]:
        add("graph_capture_phase", "steps were inferred from syncs in a window with "
                                   f"{plural(p['capture_calls'], 'graph-capture call')}: "
            "the syncs belong to graph capture, not to serving steps")
    if ops["kernel"] + ops["graph"] == 0 and ops["memset"] and not ops["memcpy"]:
        add("memset_only", f"the window holds only {plural(ops['memset'], 'memset')} and no kernel: nothing "
                           "to judge the GPU's work by")
    elif sum(ops.values()) < t("judge_min_gpu_ops"):
        add("too_few_gpu_ops", f"only {plural(sum(ops.values()), 'GPU operation')} in the window "
            f"({', '.join(f'{k} {v}' for k, v in ops.items() if v)}): a handful, not a workload")
    if w < t("judge_min_window_ns"):
        add("window_too_short", f"the window is {us(w)} long, shorter than one decode step")
    return out


STEP_RANGE_CANDIDATES = 5  # the most frequent range names offered as --step-range candidates


def _range_candidates(trace) -> str:
    """', though the capture holds N annotation ranges; the most frequent: ...' naming the range
    names a --step-range could select (empty without ranges): a name that repeats once per step
    marks the steps."""
    r = getattr(trace, "ranges", None)
    if r is None or not len(r) or "name" not in r:
        return ""
    counts = r["name"].value_counts()
    counts = counts[counts > 1].head(STEP_RANGE_CANDIDATES)
    if counts.empty:
        return ""
    names = ", ".join(f"'{str(n)[:60]}' ({int(c):,})" for n, c in counts.items())
    return (f"; of the capture's {len(r):,} annotation ranges the most frequent are {names}: pass the one that "
            "marks a step as --step-range REGEX")


def trace_abstentions(ctx: Context) -> list[dict]:
    """What the traces do not measure that a verdict needs: the oddities, step annotations, steps,
    API calls, graph replays, a host stall in the step tail, the topology, the host's frames."""
    out = []
    traces = list(getattr(ctx.case, "traces", []) or [])
    for i, p in enumerate(ctx.per_trace):
        out.extend(p["_odd"])
        fmt = hint_format(p)
        candidates = _range_candidates(traces[i]) if len(traces) == len(ctx.per_trace) else ""
        inferred = [pr for pr in p["processes"] if pr["steps"]["source"] in ("sync", "graph_launch")]
        if inferred:
            src = ", ".join(sorted({pr["steps"]["source"] for pr in inferred}))
            out.append({"analysis": "step_annotations", "scope": ", ".join(f"pid {pr['pid']}" for pr in inferred[:8]),
                        "reason": (f"no annotation ranges mark the steps: they were inferred from the periodic {src} pattern, "
                                   "so prefill and decode steps cannot be told apart by name") if not candidates else (
                            f"no known step range marks the steps: they were inferred from the periodic {src} pattern, "
                            f"so prefill and decode steps cannot be told apart by name{candidates}"),
                        "capture_hint": capture_cmd(fmt, "steps")})
        for pr in p["processes"]:
            if pr["steps"]["source"] == "none" and pr.get("gpu_ops", 1):  # a process with no GPU work has no steps to find
                asked = p["meta"].get("step_range")
                if asked:  # the user's regex replaced the search: say so, not that the capture has no steps
                    out.append({"analysis": "steps", "scope": f"pid {pr['pid']}",
                                "reason": f"--step-range {asked!r} matched no annotation range of this process: per-step "
                                          f"metrics (launches and syncs per step, the step tail) not measured{candidates}",
                                "capture_hint": capture_text("abstention", "step_range")})
                    continue
                out.append({"analysis": "steps", "scope": f"pid {pr['pid']}",
                            "reason": ("no NVTX step ranges" if not candidates else "no known step range")
                            + " and no periodic sync or graph launch: per-step metrics "
                              f"(launches and syncs per step, the step tail) not measured{candidates}",
                            "capture_hint": capture_cmd(fmt, "steps")})
        if not p["has_api"]:
            out.append({"analysis": "gap_causes", "scope": "trace",
                        "reason": "the trace holds no CUDA/HIP API calls: idle time cannot be attributed to "
                                  "launches, syncs or host code",
                        "capture_hint": capture_cmd(fmt, "api")})
        if p["graph_launches_in_window"] and not p["graph_replays_in_window"] and p["meta"].get("graph_trace_mode") != "node":
            out.append({"analysis": "graph_replays", "scope": "trace",
                        "reason": f"{p['graph_launches_in_window']} graph launches but no graph replay or graph-node records: "
                                  "GPU time inside graphs is missing and busy % is a lower bound",
                        "capture_hint": capture_cmd(fmt, "graphs")})
        for pr in p["processes"]:
            s, info = pr["steps"], pr.get("_long_steps") or {}
            if (info.get("count") and s["p50_ns"] and s["max_ns"] / s["p50_ns"] >= t("prefill_max_ratio")
                    and not info.get("prefill_labelled") and info.get("busy_pct", 0) < t("prefill_long_busy_min_pct")):
                out.append({"analysis": "step_tail", "scope": f"pid {pr['pid']}",
                            "reason": f"{plural(info['count'], 'step')} up to {us(s['max_ns'])} against a "
                                      f"p50 of {us(s['p50_ns'])}, "
                                      f"but the GPU is busy only {info.get('busy_pct', 0):.0f}% during them: a host stall "
                                      "(garbage collection, scheduler, I/O), not prefill; what the host did is not measured",
                            "capture_hint": host_profiler_hint(pr["name"], pr["pid"], ctx.kind)})
    coll_devs = [d for d in ctx.devices if d.get("collective_count", 0) > 0]
    if coll_devs and not getattr(ctx.case, "topologies", None):
        out.append({"analysis": "topology", "scope": "case",
                    "reason": "collectives run but no topology matrix was given: cannot tell whether the communicator "
                              "crosses a slow (SYS/NODE/PHB) link",
                    "capture_hint": capture_text("abstention", "topology")})
    if not any(c.format in ("raw", "speedscope") for c in getattr(ctx.case, "pyspy", [])):
        hosty = [d for d in ctx.devices if d["window_ns"]
                 and 100.0 * d["gaps"]["by_cause"]["host"] / d["window_ns"] >= t("host_idle_pyspy_hint_pct")]
        if hosty:
            d = max(hosty, key=lambda x: x["gaps"]["by_cause"]["host"])
            out.append({"analysis": "host_frames", "scope": d["id"],
                        "reason": f"{100.0 * d['gaps']['by_cause']['host'] / d['window_ns']:.0f}% of the window the GPU idles "
                                  "while the host is in no CUDA call: which host code runs then is not measured",
                        "capture_hint": host_profiler_hint(process_name(ctx, d["pid"]), d["pid"], ctx.kind)})
    return out


def tail_abstention(serving: dict | None, findings: list[dict]) -> list[dict]:
    """An abstention for an unexplained inter-token tail (unexplained_tail): what stands, which
    mechanism is ruled out, and the capture that would tell the others apart."""
    tail = unexplained_tail(serving, findings)
    if not tail:
        return []
    return [{"analysis": "itl_tail", "scope": "serving",
             "reason": f"{tail_words(tail)} and no finding explains it"
                       + (f" ({', '.join(tail['ruled_out'])} ruled out by its own falsifier: not the prefill-chunk mechanism)"
                          if tail["ruled_out"] else ""),
             "capture_hint": capture_text("abstention", "itl_tail")}]


def serving_abstentions(serving: dict | None, slo: dict) -> list[dict]:
    """What the serving artifacts leave unjudged: --slo budgets not checked, a TPOT knee without a
    budget, a TPOT fit that is no model, artifacts holding configuration only."""
    out = []
    unchecked = [c for c in slo_checks(serving, slo) if c["status"] == "not_measured"]
    if unchecked:
        out.append({"analysis": "slo", "scope": "serving",
                    "reason": "--slo budgets not checked: " + "; ".join(slo_text(c) for c in unchecked),
                    "capture_hint": capture_text("abstention", "slo")})
    if not serving:
        return out
    fit = judge_fit(serving)
    if tpot_needs_budget(serving, slo):
        breaks = "; ".join(f"{b:g} ms breaks at {x:.0f} running"
                           + (" (beyond the largest batch measured)" if x > fit["x_max"] else "")
                           for b, x in budgets_break_at(fit))
        out.append({"analysis": "tpot_budget", "scope": "serving",
                    "reason": f"TPOT follows the batch (TPOT = {fit['a_ms']:.2f} + {fit['b_ms_per_seq']:.3f} ms x "
                              f"running, r² {fit['r2']:.2f}, "
                              f"{fit['points']} points) but no TPOT budget was given, so whether the batch "
                              "is past its knee is not "
                              f"judged; common budgets: {breaks or 'all below the intercept'}",
                    "capture_hint": capture_text("abstention", "tpot_budget")})
    elif fit and not fit["model"]:
        out.append({"analysis": "tpot_fit", "scope": "serving",
                    "reason": f"TPOT against the running batch is not a model ({fit['rejected']}): "
                              f"TPOT = {fit['a_ms']:.2f} + {fit['b_ms_per_seq']:.3f} ms x running from "
                              f"{fit['source']} is not used",
                    "capture_hint": capture_text("abstention", "tpot_fit")})
    if not (serving.get("stats") or serving.get("bench") or serving["latency"]["server"] or serving["memory"]["oom_events"]
            or serving.get("replicas")):
        out.append({"analysis": "serving_load", "scope": "serving",
                    "reason": "the serving artifacts hold configuration only: no stats lines, /metrics "
                              "values or benchmark results",
                    "capture_hint": capture_text("abstention", "serving_load")})
    return out
