"""Serving bundles from either side of a deploy (compare's serving sample; the seeds' seventh case).

Each scenario writes ``<out>/<name>/before`` and ``<out>/<name>/after``, each a vLLM V1 log (the
version line, ``non-default args``, the engine's ``with config:`` line, stats lines), a ``/metrics``
scrape (TTFT histogram, tokens-per-request histograms, ``vllm:request_success_total`` by
``finished_reason``) and a ``benchmark_serving.py --save-result`` JSON with the per-request
arrays (``input_lens``, ``output_lens``, ``ttfts``, ``errors``):

* ``deploy_int4``: BF16 -> INT4 (GPTQ W4A16, group 128) of the same model on the same prompts;
  the outputs get longer (mean about 218 -> 341 tokens, +56%) and more of them hit the length cap;
  the per-token latency holds, so end-to-end latency grows with the outputs alone.
* ``deploy_fp8``: BF16 -> FP8 (W8A8): the outputs are drawn from the same distribution; the
  per-token latency drops (about 1.9x throughput).
* ``deploy_noise``: the same BF16 config twice, other random draws.
* ``deploy_prompts``: the same BF16 config, but the prompts changed (inputs about 3x longer).

The truth (``<truth_dir>/<name>.json``, default samples/truth) is computed here from the values
generated, never by tracetriage: the settings that differ in what was written, the per-request
length summaries (nearest-rank percentiles of the requests that succeeded), the two-sample
Kolmogorov-Smirnov statistic and p-value (scipy), the finish-reason counts, and what the scenario
was built to show (``expected``: whether the inputs shifted, whether quality_regression fires,
whether the latencies compare as is, whether end-to-end latency moved only with the outputs).
"""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
MAX_TOKENS = 1024  # the benchmark's max output length: an answer that reaches it finishes on "length"
TOKEN_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000]
TTFT_BUCKETS_S = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0]
REQUESTS = 1000
RATE = 8.0

BF16 = {"args": {"model": MODEL, "max_num_seqs": 256}, "dtype": "torch.bfloat16", "quantization": None, "tpot_ms": 25.0}
INT4 = {"args": {"model": MODEL + "-GPTQ-Int4", "quantization": "gptq", "max_num_seqs": 256}, "dtype": "torch.float16",
        "quantization": "gptq", "tpot_ms": 25.0}
FP8 = {"args": {"model": MODEL + "-FP8", "quantization": "fp8", "max_num_seqs": 256}, "dtype": "torch.bfloat16",
       "quantization": "fp8", "tpot_ms": 13.2}

# output lengths: lognormal (mu, sigma) of tokens before the cap; inputs: lognormal of prompt tokens
OUTPUTS_BF16 = (5.22, 0.55)   # mean about 218 tokens
OUTPUTS_INT4 = (5.6, 0.72)    # mean about 341 tokens: rambling, more answers run to the cap
INPUTS = (6.2, 0.5)           # mean about 560 tokens
INPUTS_CHANGED = (7.3, 0.5)   # about 3x longer prompts
FAIL_SHARE = 0.005


def _log_time(t: float) -> str:
    t = int(t)
    return f"07-28 {9 + t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}"


def _draw(rng: random.Random, deploy: dict, outputs: tuple, inputs: tuple) -> list[dict]:
    """One request each: its prompt and output tokens, finish reason, TTFT and E2E (s), error."""
    out = []
    for _ in range(REQUESTS):
        prompt = max(4, int(round(rng.lognormvariate(*inputs))))
        answer = max(1, int(round(rng.lognormvariate(*outputs))))
        reason = "length" if answer >= MAX_TOKENS else "stop"
        answer = min(answer, MAX_TOKENS)
        failed = rng.random() < FAIL_SHARE
        ttft = (0.06 + 0.00005 * prompt) * rng.uniform(0.8, 1.3)
        tpot = deploy["tpot_ms"] / 1000.0 * rng.uniform(0.9, 1.1)
        out.append({"input": prompt, "output": 0 if failed else answer, "reason": None if failed else reason,
                    "ttft": 0.0 if failed else ttft, "e2e": 0.0 if failed else ttft + tpot * (answer - 1),
                    "tpot": tpot, "error": "Response ended prematurely" if failed else ""})
    return out


def _nearest_rank(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100.0 * len(ordered)) - 1))]


def _stats(values: list[int]) -> dict:
    return {"n": len(values), "mean": round(sum(values) / len(values), 3), "p50": _nearest_rank(values, 50),
            "p90": _nearest_rank(values, 90), "p99": _nearest_rank(values, 99)}


def _percentiles_ms(values_s: list[float], prefix: str) -> dict:
    ordered = sorted(1000.0 * value for value in values_s)
    return {f"mean_{prefix}_ms": sum(ordered) / len(ordered), f"median_{prefix}_ms": ordered[len(ordered) // 2],
            f"p99_{prefix}_ms": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]}


def _bench(requests: list[dict]) -> dict:
    done = [request for request in requests if not request["error"]]
    duration = REQUESTS / RATE + 12.0
    record = {"backend": "vllm", "model_id": MODEL, "tokenizer_id": MODEL, "num_prompts": REQUESTS, "request_rate": RATE,
              "burstiness": 1.0, "max_concurrency": None, "completed": len(done), "duration": duration,
              "total_input_tokens": sum(request["input"] for request in done),
              "total_output_tokens": sum(request["output"] for request in done),
              "request_throughput": len(done) / duration,
              "output_throughput": sum(request["output"] for request in done) / duration}
    record.update(_percentiles_ms([request["ttft"] for request in done], "ttft"))
    record.update(_percentiles_ms([request["tpot"] for request in done], "tpot"))
    record.update(_percentiles_ms([request["tpot"] for request in done], "itl"))
    record.update(_percentiles_ms([request["e2e"] for request in done], "e2el"))
    record.update({"input_lens": [request["input"] for request in requests],
                   "output_lens": [request["output"] for request in requests],
                   "ttfts": [round(request["ttft"], 6) for request in requests],
                   "errors": [request["error"] for request in requests]})
    return record


def _histogram(name: str, values: list[float], buckets: list[float]) -> list[str]:
    labels = f'engine="0",model_name="{MODEL}"'
    out = [f"# HELP {name} Histogram.", f"# TYPE {name} histogram"]
    out += [f'{name}_bucket{{{labels},le="{le}"}} {float(sum(1 for value in values if value <= le))}' for le in buckets]
    out += [f'{name}_bucket{{{labels},le="+Inf"}} {float(len(values))}', f"{name}_sum{{{labels}}} {float(sum(values))}",
            f"{name}_count{{{labels}}} {float(len(values))}"]
    return out


def _metrics(requests: list[dict]) -> list[str]:
    done = [request for request in requests if not request["error"]]
    labels = f'engine="0",model_name="{MODEL}"'
    out = ["# HELP vllm:request_success_total Count of successfully processed requests.",
           "# TYPE vllm:request_success_total counter"]
    for reason in ("stop", "length", "abort"):
        count = sum(1 for request in done if request["reason"] == reason)
        out.append(f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} {float(count)}')
    out += _histogram("vllm:time_to_first_token_seconds", [request["ttft"] for request in done], TTFT_BUCKETS_S)
    out += _histogram("vllm:request_prompt_tokens", [request["input"] for request in done], TOKEN_BUCKETS)
    out += _histogram("vllm:request_generation_tokens", [request["output"] for request in done], TOKEN_BUCKETS)
    return out


def _log(deploy: dict, requests: list[dict]) -> list[str]:
    model = deploy["args"]["model"]
    quantization = deploy["quantization"] or "None"
    lines = ["(APIServer pid=1) INFO 07-28 08:59:50 [api_server.py:1287] vLLM API server version 0.10.1",
             f"(APIServer pid=1) INFO 07-28 08:59:51 [utils.py:233] non-default args: {deploy['args']!r}",
             f"(EngineCore_0 pid=90) INFO 07-28 08:59:53 [core.py:71] Initializing a V1 LLM engine (v0.10.1) with config: "
             f"model='{model}', speculative_config=None, tokenizer='{model}', skip_tokenizer_init=False, "
             f"tokenizer_mode=auto, revision=None, trust_remote_code=False, dtype={deploy['dtype']}, max_seq_len=131072, "
             f"download_dir=None, load_format=auto, tensor_parallel_size=1, pipeline_parallel_size=1, "
             f"disable_custom_all_reduce=False, quantization={quantization}, enforce_eager=False, kv_cache_dtype=auto, "
             f"device_config=cuda, seed=0, served_model_name={MODEL}, enable_prefix_caching=True, "
             "chunked_prefill_enabled=True, use_async_output_proc=True"]
    busy = sum(request["e2e"] for request in requests) * RATE / REQUESTS  # requests in flight, Little's law
    for index in range(12):
        running = max(1, int(round(busy)))
        lines.append(f"(APIServer pid=1) INFO {_log_time(10 * index)} [loggers.py:118] Engine 000: Avg prompt throughput: "
                     f"{RATE * 560:.1f} tokens/s, Avg generation throughput: {1000.0 * running / deploy['tpot_ms']:.1f} "
                     f"tokens/s, Running: {running} reqs, Waiting: 0 reqs, GPU KV cache usage: 12.0%, "
                     "Prefix cache hit rate: 20.0%")
    return lines


def _changed(before: dict, after: dict) -> list[str]:
    """The settings that differ in what the generator wrote (args, dtype and quantization of the config line)."""
    keys = sorted(set(before["args"]) | set(after["args"]))
    changed = [key for key in keys if key != "quantization" and before["args"].get(key) != after["args"].get(key)]
    changed += [key for key in ("dtype", "quantization") if before[key] != after[key]]
    return sorted(changed)


def _side_truth(requests: list[dict]) -> dict:
    done = [request for request in requests if not request["error"]]
    return {"input": _stats([request["input"] for request in done]), "output": _stats([request["output"] for request in done]),
            "failed": len(requests) - len(done), "sent": len(requests),
            "finish_reasons": {reason: sum(1 for request in done if request["reason"] == reason)
                               for reason in ("abort", "length", "stop")}}


SCENARIOS = {
    "deploy_int4": (BF16, INT4, OUTPUTS_INT4, INPUTS,
                    {"inputs_shifted": False, "outputs_shifted": True, "quality_regression": True,
                     "latency_comparable": True, "latency_from_output_length": True}),
    "deploy_fp8": (BF16, FP8, OUTPUTS_BF16, INPUTS,
                   {"inputs_shifted": False, "outputs_shifted": False, "quality_regression": False,
                    "latency_comparable": True, "latency_from_output_length": False}),
    "deploy_noise": (BF16, BF16, OUTPUTS_BF16, INPUTS,
                     {"inputs_shifted": False, "outputs_shifted": False, "quality_regression": False,
                      "latency_comparable": True, "latency_from_output_length": False}),
    "deploy_prompts": (BF16, BF16, OUTPUTS_BF16, INPUTS_CHANGED,
                       {"inputs_shifted": True, "outputs_shifted": False, "quality_regression": False,
                        "latency_comparable": False, "latency_from_output_length": False}),
}


def write_side(folder: Path, deploy: dict, requests: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vllm.log").write_text("\n".join(_log(deploy, requests)) + "\n")
    (folder / "metrics.prom").write_text("\n".join(_metrics(requests)) + "\n")
    (folder / "bench.json").write_text(json.dumps([_bench(requests)], indent=1) + "\n")


def generate_deploy(out: Path, only: list[str] | None = None, seed: int = 7, truth_dir: Path | None = None) -> list[Path]:
    """Each scenario's pair into ``out/<name>/{before,after}``, its truth into ``truth_dir/<name>.json``."""
    from scipy import stats

    truth_dir = Path(truth_dir) if truth_dir is not None else HERE / "truth"
    truth_dir.mkdir(parents=True, exist_ok=True)
    made = []
    for name, (before, after, outputs_after, inputs_after, expected) in SCENARIOS.items():
        if only and name not in only:
            continue
        rng = random.Random(f"{seed}:{name}")
        requests_before = _draw(rng, before, OUTPUTS_BF16, INPUTS)
        requests_after = _draw(rng, after, outputs_after, inputs_after)
        write_side(out / name / "before", before, requests_before)
        write_side(out / name / "after", after, requests_after)
        truth = {"scenario": name, "changed": _changed(before, after), "before": _side_truth(requests_before),
                 "after": _side_truth(requests_after), "expected": expected}
        for shape in ("input", "output"):
            ok_before = [request[shape] for request in requests_before if not request["error"]]
            ok_after = [request[shape] for request in requests_after if not request["error"]]
            result = stats.ks_2samp(ok_before, ok_after)
            truth[f"{shape}_ks"] = {"statistic": round(float(result.statistic), 6), "p_value": float(result.pvalue)}
        (truth_dir / f"{name}.json").write_text(json.dumps(truth, indent=2) + "\n")
        made.append(out / name)
    return made


def generate_deploy_series(out: Path, nights: int = 8, deploy_at: int = 5, seed: int = 7) -> list[Path]:
    """A nightly archive of one server (trend's sample): BF16 nights, INT4 from night ``deploy_at`` on,
    each night a bundle ``night_NN`` of the same three artifacts."""
    made = []
    for night in range(1, nights + 1):
        deploy = INT4 if night >= deploy_at else BF16
        rng = random.Random(f"{seed}:night{night}")
        requests = _draw(rng, deploy, OUTPUTS_INT4 if night >= deploy_at else OUTPUTS_BF16, INPUTS)
        folder = out / f"night_{night:02d}"
        write_side(folder, deploy, requests)
        made.append(folder)
    return made


def main(argv=None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder the pairs (or the series) go into")
    parser.add_argument("--only", nargs="*", choices=sorted(SCENARIOS), metavar="NAME",
                        help=f"write only these pairs: {', '.join(SCENARIOS)} (default: all)")
    parser.add_argument("--seed", type=int, default=7, help="random seed of the draws (default: %(default)s)")
    parser.add_argument("--truth", type=Path, metavar="DIR",
                        help="where each pair's truth goes (default: samples/truth, the committed one, for seed 7; "
                             "OUT-truth beside OUT for any other seed, so the committed truth is never overwritten)")
    parser.add_argument("--series", type=int, metavar="N",
                        help="write a nightly series of N captures instead (trend's sample), INT4 from --deploy-at on")
    parser.add_argument("--deploy-at", type=int, default=5, metavar="K", help="first INT4 night of --series (default: 5)")
    args = parser.parse_args(argv)
    if args.series is not None and not 2 <= args.deploy_at <= args.series:
        parser.error(f"--deploy-at {args.deploy_at} is not a night of --series {args.series} after the first")
    truth = args.truth
    if truth is None and args.seed != parser.get_default("seed"):  # samples/truth holds the committed seed's truth
        truth = args.out.parent / f"{args.out.name}-truth"
    made = (generate_deploy_series(args.out, args.series, args.deploy_at, args.seed) if args.series is not None
            else generate_deploy(args.out, args.only, args.seed, truth))
    if args.series is None:
        print(f"truth: {truth if truth is not None else HERE / 'truth'}", file=sys.stderr)
    for folder in made:
        print(folder)


if __name__ == "__main__":
    main()
