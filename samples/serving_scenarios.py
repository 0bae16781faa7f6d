"""Serving scenario bundles: engine log + /metrics scrape + benchmark result, one per finding.

Each scenario simulates the numbers a server in that state would report (the seeds' case
studies: at capacity, TPOT past the knee, prefill stalls in the ITL tail, OOM from an
unchunked long prefill, prefix-cache misses, a buffering proxy, over-replication, blocked
admission, and a healthy server), writes them in the real formats (vLLM V1 log lines,
Prometheus text, ``benchmark_serving.py --save-result`` JSON), and records in
``../truth/<bundle>.json`` (outside the bundle) what the generator itself put there: the finding(s) expected, the
``--slo`` budgets the check runs with, and the key numbers computed from the generated
values (not by tracetriage).
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

BUCKETS_S = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]


def log_time(t: float) -> str:
    """vLLM's ``MM-DD HH:MM:SS`` for t seconds after 09:00:00 on 07-28."""
    t = int(t)
    return f"07-28 {9 + t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}"


def gen_tps(running, a=5.0, b=0.086):
    """Generation throughput of a decode step costing a + b x running ms: running tokens per step."""
    return running * 1000.0 / (a + b * running)


def stats_line(t, running, waiting, kv_pct, prompt_tps, gen_tps, hit_pct=0.0, engine="000"):
    return (f"(APIServer pid=1) INFO {log_time(t)} [loggers.py:118] Engine {engine}: "
            f"Avg prompt throughput: {prompt_tps:.1f} tokens/s, "
            f"Avg generation throughput: {gen_tps:.1f} tokens/s, Running: {running} reqs, Waiting: {waiting} reqs, "
            f"GPU KV cache usage: {kv_pct:.1f}%, Prefix cache hit rate: {hit_pct:.1f}%")


def config_lines(args: dict, chunked: int | None = None) -> list[str]:
    out = ["(APIServer pid=1) INFO 07-28 08:59:50 [api_server.py:1287] vLLM API server version 0.10.1",
           f"(APIServer pid=1) INFO 07-28 08:59:51 [utils.py:233] non-default args: {args!r}"]
    if chunked:
        out.append("(EngineCore_0 pid=90) INFO 07-28 08:59:55 [config.py:2197] "
                   f"Chunked prefill is enabled with max_num_batched_tokens={chunked}.")
    return out


def histogram(name: str, values_s: list[float], labels: str = 'model_name="m"') -> list[str]:
    out = [f"# HELP {name} Histogram.", f"# TYPE {name} histogram"]
    for le in BUCKETS_S:
        out.append(f'{name}_bucket{{le="{le}",{labels}}} {float(sum(1 for v in values_s if v <= le))}')
    out.append(f'{name}_bucket{{le="+Inf",{labels}}} {float(len(values_s))}')
    out.append(f"{name}_sum{{{labels}}} {sum(values_s)}")
    out.append(f"{name}_count{{{labels}}} {float(len(values_s))}")
    return out


def gauge(name: str, value: float, labels: str = 'model_name="m"') -> list[str]:
    return [f"# TYPE {name} gauge", f"{name}{{{labels}}} {value}"]


def counter(name: str, value: float, labels: str = 'model_name="m"') -> list[str]:
    return [f"# TYPE {name} counter", f"{name}{{{labels}}} {value}"]


def bench_record(rate, concurrency, completed, duration, in_tok, out_tok, ttft_ms, tpot_ms, itl_ms, e2el_ms, **extra):
    """Aggregate keys as benchmark_serving.py writes them (ms lists -> mean/median/p99)."""
    def stats(prefix, xs):
        xs = sorted(xs)
        return {f"mean_{prefix}_ms": sum(xs) / len(xs), f"median_{prefix}_ms": xs[len(xs) // 2],
                f"p99_{prefix}_ms": xs[min(len(xs) - 1, int(0.99 * len(xs)))]}
    rec = {"backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B-Instruct", "request_rate": rate,
           "max_concurrency": concurrency, "completed": completed, "duration": duration,
           "total_input_tokens": in_tok, "total_output_tokens": out_tok, "request_throughput": completed / duration,
           "output_throughput": out_tok / duration}
    for prefix, xs in (("ttft", ttft_ms), ("tpot", tpot_ms), ("itl", itl_ms), ("e2el", e2el_ms)):
        rec.update(stats(prefix, xs))
    rec.update(extra)
    return rec


def p(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


# ---------------------------------------------------------------------------


def at_capacity(rng):
    """Seed 002 case 1: 18 req/s arrive, about 10 are served; the queue grows, TTFT is queue wait."""
    capacity = 10.0
    recs = []
    for rate in (4.0, 8.0, 12.0, 18.0):
        n = 600
        served = min(rate, capacity) * rng.uniform(0.96, 0.98)
        if rate < capacity:
            ttft = [rng.uniform(45, 90) for _ in range(n)]
        else:  # the backlog grows at (rate - capacity) per second over the run: wait grows linearly
            backlog_s = n / rate * (rate - capacity) / capacity
            ttft = [60 + 1000 * backlog_s * i / n + rng.uniform(0, 30) for i in range(n)]
        tpot = [rng.uniform(17, 21) for _ in range(n)]
        e2el = [a + 200 * b for a, b in zip(ttft, tpot)]
        recs.append(bench_record(rate, None, n, n / served, 500 * n, 200 * n, ttft, tpot, tpot, e2el))
    log = config_lines({"model": "m", "max_num_seqs": 64}, chunked=8192)
    waiting = 0
    for i in range(30):
        waiting += rng.randint(8, 16)
        log.append(stats_line(10 * i, 64, waiting, rng.uniform(88, 97), 4100.0, gen_tps(64), hit_pct=rng.uniform(30, 50)))
    server_ttft = [rng.uniform(2.0, 9.0) for _ in range(500)]
    queue = [v - rng.uniform(0.04, 0.09) for v in server_ttft]
    prom = (gauge("vllm:num_requests_running", 64) + gauge("vllm:num_requests_waiting", waiting)
            + gauge("vllm:kv_cache_usage_perc", 0.95) + histogram("vllm:time_to_first_token_seconds", server_ttft)
            + histogram("vllm:request_queue_time_seconds", queue))
    truth = {"expect": ["at_capacity"], "slo": {},
             "numbers": {"arrival_rate_rps": 18.0, "capacity_rps": max(r["request_throughput"] for r in recs),
                         "queue_share_of_server_ttft": sum(queue) / sum(server_ttft)}}
    return {"vllm.log": log, "metrics.prom": prom, "bench.json": recs}, truth


def batch_past_knee(rng):
    """Seed 000 3.1: t_step(B) = 5.00 + 0.086 B ms; the budget of 20 ms is crossed at B = 174."""
    a, b, budget = 5.0, 0.086, 20.0
    recs = []
    for conc in (8, 16, 32, 64, 128, 256):
        n = 400
        tpot = [(a + b * conc) * rng.uniform(0.99, 1.01) for _ in range(n)]
        ttft = [rng.uniform(60, 120) for _ in range(n)]
        e2el = [t + 150 * x for t, x in zip(ttft, tpot)]
        recs.append(bench_record(float("inf"), conc, n, n * (a + b * conc) * 150 / 1000 / conc, 400 * n, 150 * n,
                                 ttft, tpot, tpot, e2el))
    log = config_lines({"model": "m", "max_num_seqs": 256}, chunked=2048)
    for i, running in enumerate([16, 32, 48, 64, 96, 128, 160, 192, 224, 256] * 2):
        tpot = a + b * running
        log.append(stats_line(10 * i, running, 0, 20 + running / 4, 900.0, running * 1000.0 / tpot))
    prom = (gauge("vllm:num_requests_running", 256) + gauge("vllm:num_requests_waiting", 0)
            + gauge("vllm:kv_cache_usage_perc", 0.84))
    truth = {"expect": ["batch_past_knee"], "slo": {"tpot_p95_ms": budget},
             "numbers": {"a_ms": a, "b_ms_per_seq": b, "max_num_seqs_for_slo": int((budget - a) / b)}}
    return {"vllm.log": log, "metrics.prom": prom, "bench.json": recs}, truth


def prefill_stall(rng):
    """Seed 000 3.4: whole-prompt prefills of 12k-token prompts stall every decoding stream for a step."""
    n = 200
    long_every = 10
    input_lens = [12000 if i % long_every == 0 else rng.randint(150, 300) for i in range(n)]
    output_lens = [120] * n
    itls, ttfts = [], []
    for i in range(n):
        gaps = [rng.uniform(0.018, 0.024) for _ in range(output_lens[i] - 1)]
        for k in range(0, len(gaps), 30):  # a long prompt admitted while this request decodes
            if rng.random() < 0.9:
                gaps[k] = rng.uniform(0.55, 0.65)
        itls.append(gaps)
        ttfts.append(rng.uniform(0.05, 0.09) if input_lens[i] < 1000 else rng.uniform(0.6, 0.7))
    flat = [g * 1000 for row in itls for g in row]
    rec = bench_record(4.0, None, n, 52.0, sum(input_lens), sum(output_lens), [t * 1000 for t in ttfts],
                       [sum(r) / len(r) * 1000 for r in itls], flat, [1000 * (t + sum(r)) for t, r in zip(ttfts, itls)],
                       input_lens=input_lens, output_lens=output_lens, ttfts=ttfts, itls=itls)
    log = config_lines({"model": "m", "enable_chunked_prefill": False, "max_num_seqs": 64})
    for i in range(12):
        run = rng.randint(20, 30)
        log.append(stats_line(10 * i, run, 0, rng.uniform(30, 45), 9000.0, gen_tps(run), hit_pct=rng.uniform(30, 50)))
    prom = gauge("vllm:num_requests_running", 25) + gauge("vllm:num_requests_waiting", 0) + gauge("vllm:kv_cache_usage_perc", 0.4)
    truth = {"expect": ["prefill_stall"], "slo": {"itl_p99_ms": 100.0},
             "numbers": {"itl_p50_ms": p(flat, 50), "itl_p99_ms": p(flat, 99), "itl_max_ms": max(flat)}}
    return {"vllm.log": log, "metrics.prom": prom, "bench.json": [rec]}, truth


def memory_pressure(rng):
    """Seed 002 case 4: an unchunked 30k-token prefill; reserved 78.1 GB, allocated 71.4 GB at the OOM."""
    log = config_lines({"model": "m", "max_model_len": 32768, "enable_chunked_prefill": False, "max_num_seqs": 32})
    for i in range(15):
        run = rng.randint(10, 20)
        log.append(stats_line(10 * i, run, 0, rng.uniform(40, 70), 6000.0, gen_tps(run), hit_pct=rng.uniform(30, 50)))
    log += [
        "(EngineCore_0 pid=90) ERROR 07-28 09:02:31 [core.py:700] EngineCore encountered a fatal error.",
        "(EngineCore_0 pid=90) ERROR 07-28 09:02:31 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 3.50 GiB. "
        "GPU 0 has a total capacity of 79.19 GiB of which 1.12 GiB is free. "
        "Including non-PyTorch memory, this process has 78.05 GiB "
        "memory in use. Of the allocated memory 71.40 GiB is allocated by PyTorch, and 6.70 GiB is reserved by PyTorch but "
        "unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
        "to avoid fragmentation.",
    ]
    summary = [
        "|===========================================================================|",
        "|                  PyTorch CUDA memory summary, device ID 0                 |",
        "|---------------------------------------------------------------------------|",
        "|            CUDA OOMs: 1            |        cudaMalloc retries: 3         |",
        "|===========================================================================|",
        "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |",
        "|---------------------------------------------------------------------------|",
        "| Allocated memory      |  73114 MiB |  75981 MiB |  12040 GiB |  11969 GiB |",
        "|---------------------------------------------------------------------------|",
        "| GPU reserved memory   |  79974 MiB |  79974 MiB |  80102 MiB |    128 MiB |",
        "|===========================================================================|",
    ]
    n = 120
    rec = bench_record(2.0, None, n, n / 1.95, 3000 * n, 300 * n, [rng.uniform(200, 400) for _ in range(n)],
                       [rng.uniform(15, 20) for _ in range(n)], [rng.uniform(15, 22) for _ in range(n)],
                       [rng.uniform(5000, 7000) for _ in range(n)])
    prom = (gauge("vllm:num_requests_running", 14) + gauge("vllm:num_requests_waiting", 0)
            + gauge("vllm:kv_cache_usage_perc", 0.62) + counter("vllm:num_preemptions_total", 0))
    files = {"metrics.prom": prom, "bench.json": [rec]}
    truth = {"expect": ["memory_pressure"], "slo": {},
             "numbers": {"variant": "prefill", "fragmentation_share_pct": 100 * (79974 - 73114) / 79974,
                         "tried_bytes": 3.5 * 1024 ** 3}}
    return {"vllm.log": log + summary, **files}, truth


def prefix_cache_miss(rng):
    """Seed 000 3.5: an identical 1800-token system prompt, 60-token answers, prefix caching off."""
    n = 500
    rec = bench_record(6.0, None, n, n / 5.9, 1900 * n, 60 * n, [rng.uniform(90, 140) for _ in range(n)],
                       [rng.uniform(14, 16) for _ in range(n)], [rng.uniform(14, 16) for _ in range(n)],
                       [rng.uniform(1000, 1200) for _ in range(n)])
    log = config_lines({"model": "m", "enable_prefix_caching": False, "max_num_seqs": 128}, chunked=2048)
    for i in range(20):
        run = rng.randint(20, 40)
        log.append(stats_line(10 * i, run, 0, rng.uniform(20, 35), 11000.0, gen_tps(run) / 10, hit_pct=0.0))
    prom = (gauge("vllm:num_requests_running", 30) + gauge("vllm:num_requests_waiting", 0)
            + counter("vllm:prefix_cache_queries_total", 1900.0 * n) + counter("vllm:prefix_cache_hits_total", 0.0))
    truth = {"expect": ["prefix_cache_miss"], "slo": {}, "numbers": {"prompt_per_output": 1900 / 60}}
    return {"vllm.log": log, "metrics.prom": prom, "bench.json": [rec]}, truth


def prefix_unshared(rng):
    """Class 8 of issue 32: the same prefill-heavy load on vLLM 0.10.1 (V1) started without
    --enable-prefix-caching: V1 caches prefixes by default, so the 0% hit rate means the prompts
    share no prefix (the finding is ruled out by its falsifier), not that caching is off."""
    n = 500
    rec = bench_record(6.0, None, n, n / 5.9, 1900 * n, 60 * n, [rng.uniform(90, 140) for _ in range(n)],
                       [rng.uniform(14, 16) for _ in range(n)], [rng.uniform(14, 16) for _ in range(n)],
                       [rng.uniform(1000, 1200) for _ in range(n)])
    log = config_lines({"model": "m", "max_num_seqs": 128}, chunked=2048)
    log.append("(EngineCore_0 pid=90) INFO 07-28 08:59:56 [core.py:74] Initializing a V1 LLM engine (v0.10.1) with config: "
               "model='m', speculative_config=None, tokenizer='m', skip_tokenizer_init=False, tokenizer_mode=auto")
    for i in range(20):
        run = rng.randint(20, 40)
        log.append(stats_line(10 * i, run, 0, rng.uniform(20, 35), 11000.0, gen_tps(run) / 10, hit_pct=0.0))
    truth = {"expect": ["prefix_cache_miss"], "falsified": ["prefix_cache_miss"], "slo": {},
             "numbers": {"prompt_per_output": 1900 / 60, "prefix_caching": "on", "prefix_caching_source": "default",
                         "generation": "V1"}}
    return {"vllm.log": log, "bench.json": [rec]}, truth


def proxy_buffering(rng):
    """Seed 002 case 8: a proxy buffers the stream; the client's first token comes with nearly the last."""
    n = 300
    server_ttft = [rng.uniform(0.06, 0.1) for _ in range(n)]
    e2e = [rng.uniform(2.4, 2.8) for _ in range(n)]
    client_ttft = [x - rng.uniform(0.01, 0.05) for x in e2e]
    rec = bench_record(3.0, None, n, n / 2.95, 400 * n, 150 * n, [1000 * x for x in client_ttft],
                       [rng.uniform(0.5, 1.0) for _ in range(n)], [rng.uniform(0.5, 1.0) for _ in range(n)],
                       [1000 * x for x in e2e])
    prom = (gauge("vllm:num_requests_running", 9) + gauge("vllm:num_requests_waiting", 0)
            + histogram("vllm:time_to_first_token_seconds", server_ttft) + histogram("vllm:e2e_request_latency_seconds",
                                                                                  [x - 0.05 for x in e2e]))
    log = config_lines({"model": "m", "max_num_seqs": 128}, chunked=2048)
    for i in range(10):
        run = rng.randint(6, 12)
        log.append(stats_line(10 * i, run, 0, rng.uniform(10, 20), 1200.0, gen_tps(run), hit_pct=rng.uniform(30, 50)))
    truth = {"expect": ["proxy_buffering"], "slo": {},
             "numbers": {"client_ttft_mean_ms": 1000 * sum(client_ttft) / n, "server_ttft_mean_ms": 1000 * sum(server_ttft) / n}}
    return {"vllm.log": log, "metrics.prom": prom, "bench.json": [rec]}, truth


def over_replicated(rng):
    """Seed 002 case 6: many replicas "at 100% GPU" each decoding about 7 sequences, queue empty."""
    files, running = {}, []
    for r in range(8):
        run = rng.randint(5, 9)
        running.append(run)
        files[f"replica{r}.prom"] = (gauge("vllm:num_requests_running", run, f'model_name="m",instance="10.0.0.{r}:8000"')
                                     + gauge("vllm:num_requests_waiting", 0, f'model_name="m",instance="10.0.0.{r}:8000"')
                                     + gauge("vllm:kv_cache_usage_perc", rng.uniform(0.05, 0.15),
                                             f'model_name="m",instance="10.0.0.{r}:8000"'))
    n = 200
    files["bench.json"] = [bench_record(4.0, None, n, n / 3.95, 500 * n, 150 * n, [rng.uniform(40, 70) for _ in range(n)],
                                        [rng.uniform(9, 11) for _ in range(n)], [rng.uniform(9, 12) for _ in range(n)],
                                        [rng.uniform(1500, 1800) for _ in range(n)])]
    log = config_lines({"model": "m", "max_num_seqs": 256, "data_parallel_size": 8}, chunked=2048)
    for i in range(12):
        for r in range(8):
            run = rng.randint(5, 9)
            log.append(stats_line(10 * i, run, 0, rng.uniform(5, 15), 500.0, gen_tps(run), hit_pct=rng.uniform(30, 50),
                                  engine=f"{r:03d}"))
    files["vllm.log"] = log
    truth = {"expect": ["over_replicated"], "slo": {}, "numbers": {"replicas": 8, "running_per_replica": sum(running) / 8}}
    return files, truth


def admission_blocked(rng):
    """Seed 000 3.2: requests wait while batch slots and KV blocks are free: the host does not admit."""
    log = config_lines({"model": "m", "max_num_seqs": 128}, chunked=8192)
    running = []
    for i in range(24):
        run = rng.randint(8, 16)
        running.append(run)
        log.append(stats_line(10 * i, run, rng.randint(20, 40), rng.uniform(8, 22), 800.0, gen_tps(run),
                              hit_pct=rng.uniform(30, 50)))
    prom = (gauge("vllm:num_requests_running", running[-1]) + gauge("vllm:num_requests_waiting", 30)
            + gauge("vllm:kv_cache_usage_perc", 0.15))
    n = 200
    rec = bench_record(3.0, None, n, n / 2.9, 400 * n, 150 * n, [rng.uniform(2000, 4000) for _ in range(n)],
                       [rng.uniform(7, 9) for _ in range(n)], [rng.uniform(7, 10) for _ in range(n)],
                       [rng.uniform(3200, 5300) for _ in range(n)])
    truth = {"expect": ["admission_blocked"], "slo": {}, "numbers": {"cap": 128, "running_mean": sum(running) / len(running)}}
    return {"vllm.log": log, "metrics.prom": prom, "bench.json": [rec]}, truth


def healthy(rng):
    """A server with headroom: no queue, KV at 30-50%, latencies inside the budgets."""
    n = 400
    rec = bench_record(5.0, None, n, n / 4.9, 600 * n, 200 * n, [rng.uniform(80, 250) for _ in range(n)],
                       [rng.uniform(18, 28) for _ in range(n)], [rng.uniform(16, 40) for _ in range(n)],
                       [rng.uniform(3800, 6000) for _ in range(n)])
    log = config_lines({"model": "m", "max_num_seqs": 256, "enable_prefix_caching": True}, chunked=2048)
    for i in range(20):
        run = rng.randint(20, 40)
        log.append(stats_line(10 * i, run, 0, rng.uniform(30, 50), 3000.0, gen_tps(run), hit_pct=rng.uniform(40, 60)))
    prom = (gauge("vllm:num_requests_running", 30) + gauge("vllm:num_requests_waiting", 0)
            + gauge("vllm:kv_cache_usage_perc", 0.4) + histogram("vllm:time_to_first_token_seconds",
                                                               [rng.uniform(0.06, 0.2) for _ in range(300)]))
    truth = {"expect": ["healthy"], "slo": {"ttft_p95_ms": 800.0, "tpot_p95_ms": 50.0, "itl_p99_ms": 100.0}, "numbers": {}}
    return {"vllm.log": log, "metrics.prom": prom, "bench.json": [rec]}, truth


SCENARIOS = {
    "serving_at_capacity": at_capacity,
    "serving_batch_past_knee": batch_past_knee,
    "serving_prefill_stall": prefill_stall,
    "serving_memory_pressure": memory_pressure,
    "serving_prefix_cache_miss": prefix_cache_miss,
    "serving_prefix_unshared": prefix_unshared,
    "serving_proxy_buffering": proxy_buffering,
    "serving_over_replicated": over_replicated,
    "serving_admission_blocked": admission_blocked,
    "serving_healthy": healthy,
}


def _clean(x):
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_clean(v) for v in x]
    return x


def generate_serving(out: Path, only: list[str] | None = None, seed: int = 7, truth_dir: Path | None = None) -> list[Path]:
    """Each scenario into ``out/<name>/``, its truth into ``truth_dir/<name>.json`` (default
    ``out/../truth``), outside the bundle."""
    truth_dir = Path(truth_dir) if truth_dir is not None else Path(out).parent / "truth"
    truth_dir.mkdir(parents=True, exist_ok=True)
    made = []
    for name, fn in SCENARIOS.items():
        if only and name not in only:
            continue
        files, truth = fn(random.Random(f"{seed}:{name}"))
        bundle = out / name
        bundle.mkdir(parents=True, exist_ok=True)
        for fname, content in files.items():
            if fname.endswith(".json"):
                text = json.dumps(_clean(content), indent=1) + "\n"
            else:
                text = "\n".join(content) + "\n"
            (bundle / fname).write_text(text)
        truth["scenario"] = name
        truth["description"] = (fn.__doc__ or "").strip()
        (truth_dir / f"{name}.json").write_text(json.dumps(truth, indent=2) + "\n")
        made.append(bundle)
    return made
