"""Serving-engine evidence: the engine configuration and the load it was under.

From vLLM stats lines (one sample every few seconds): ``running``/``waiting`` mean and
max, ``waiting_share_pct`` = samples with a non-empty queue / all samples x 100, KV
cache usage p50 and max, mean prompt/generation throughput. Little's law ties them:
requests in the system = arrival rate x time in system, so a queue that never
drains while KV usage is near 100% means the server is at capacity, which no kernel
work will fix.
"""

from __future__ import annotations

import statistics


def _stat(rows, key, fn):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return round(float(fn(vals)), 3) if vals else None


def summary(caps) -> dict:
    config: dict = {}
    stats: list = []
    metrics: dict = {}
    bench: list = []
    versions = []
    for c in caps:
        config.update(c.config)
        stats.extend(c.stats)
        metrics.update(c.metrics)
        bench.extend(c.bench)
        if c.version:
            versions.append(c.version)
    out = {
        "captures": [{"path": c.path, "kind": c.kind, "version": c.version} for c in caps],
        "version": versions[0] if versions else None,
        "config": config,
        "stats": None,
        "metrics": {k: v for k, v in metrics.items() if any(s in k for s in (
            "num_requests", "kv_cache_usage", "gpu_cache_usage", "prefix_cache", "num_preemptions"))},
        "bench": bench,
    }
    if stats:
        out["stats"] = {
            "samples": len(stats),
            "running_mean": _stat(stats, "running", statistics.fmean),
            "running_max": _stat(stats, "running", max),
            "waiting_mean": _stat(stats, "waiting", statistics.fmean),
            "waiting_max": _stat(stats, "waiting", max),
            "waiting_share_pct": round(100.0 * sum(1 for r in stats if (r.get("waiting") or 0) > 0) / len(stats), 1),
            "kv_usage_p50": _stat(stats, "kv_usage_pct", statistics.median),
            "kv_usage_max": _stat(stats, "kv_usage_pct", max),
            "prompt_tps_mean": _stat(stats, "prompt_tps", statistics.fmean),
            "gen_tps_mean": _stat(stats, "gen_tps", statistics.fmean),
            "prefix_hit_mean": _stat(stats, "prefix_hit_pct", statistics.fmean),
        }
    return out
