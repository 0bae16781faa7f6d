"""Serving cases written on demand (not checked-in bundles): the shapes a real capture can take that
a bundle of one finding does not show. Each returns ``(files, truth)``, the truth computed here from
the generated values (never by tracetriage); samples/generate.py ``generate_serving_case`` writes them.

* ``deployment_sweeps``: one ``benchmark_serving.py --save-result --metadata deployment=...`` JSONL file
  holding three deployments' sweeps (as llm-d's vllm-bench-automation writes them): each deployment
  its own capacity, the first swept to a higher finite rate than the others.
* ``sglang_queue_<n>_<trend>``: SGLang ``Decode batch`` lines with a queue behind a full batch,
  ``n`` samples of a queue that grows, drains or holds (one sample: a moment, no trend).
"""

from __future__ import annotations

import json
from pathlib import Path

from serving_scenarios import bench_record

DEPLOYMENTS = (("no-features", 12.0, 15.0), ("base", 15.0, 12.0), ("kvcache", 19.0, 12.0))  # (name, capacity, mid rate)


def deployment_sweeps(rng) -> tuple[dict, dict]:
    """Three deployments x (a low rate, a mid rate, rate inf) in one JSONL file. The first deployment
    has the lowest capacity and the highest finite rate: the series a reader of the file must use
    for arrivals and capacity alike."""
    records, truth = [], {"deployments": {}}
    for name, capacity, mid in DEPLOYMENTS:
        runs = []
        for rate in (4.0, mid, float("inf")):
            n = 300
            served = min(rate, capacity) * rng.uniform(0.95, 0.98)
            ttft = [rng.uniform(40, 80) * (1 if rate < capacity else 20) for _ in range(n)]
            tpot = [rng.uniform(12, 20) for _ in range(n)]
            record = bench_record(rate, None, n, n / served, 1000 * n, 250 * n, ttft, tpot, tpot,
                                  [a + 250 * b for a, b in zip(ttft, tpot)], deployment=name, gpu="4xNVIDIA_L40S",
                                  gateway="kgateway", model="m")
            runs.append(record)
        records += runs
        truth["deployments"][name] = {"capacity_rps": max(run["request_throughput"] for run in runs),
                                      "highest_finite_rate": mid,
                                      "input_tokens": sum(run["total_input_tokens"] for run in runs),
                                      "output_tokens": sum(run["total_output_tokens"] for run in runs)}
    read = max(truth["deployments"], key=lambda name: truth["deployments"][name]["highest_finite_rate"])
    truth.update(read=read, left_out=[name for name, *_ in DEPLOYMENTS if name != read],
                 pooled_capacity_rps=max(record["request_throughput"] for record in records))
    text = "\n".join(json.dumps({**record, "request_rate": "inf" if record["request_rate"] == float("inf")
                                 else record["request_rate"]}) for record in records)
    return {"results.jsonl": text + "\n"}, truth


def sglang_decode_line(t: int, running: int, tokens: int, usage: float, gen_tps: float, queued: int) -> str:
    """One SGLang ``Decode batch`` line (the 2024 format, with a time prefix)."""
    return (f"[2024-08-06 10:{t // 60:02d}:{t % 60:02d} TP0] Decode batch. #running-req: {running}, #token: {tokens}, "
            f"token usage: {usage:.2f}, gen throughput (token/s): {gen_tps:.2f}, #queue-req: {queued}")


def sglang_queue(rng, samples: int, trend: str) -> tuple[dict, dict]:
    """``samples`` decode lines 10 s apart: a full batch of 512 at 93-96% token usage and a queue that
    ``grows``, ``drains`` or ``holds``. The truth: the queue's first, last and mean length and its share
    of the requests in the system (waiting / (running + waiting), the queue's share of the time in
    system by Little's law)."""
    step = {"grows": 300, "drains": -300, "holds": 0}[trend]
    running, queue, lines = 512, [], []
    for index in range(samples):
        waiting = max(0, 4000 + step * index + (rng.randint(-20, 20) if step else 0))  # a queue that holds: flat
        queue.append(waiting)
        lines.append(sglang_decode_line(10 * index, running, running * 60, rng.uniform(0.93, 0.96),
                                        rng.uniform(1300, 1500), waiting))
    mean_waiting = sum(queue) / len(queue)
    truth = {"samples": samples, "trend": trend, "running": running, "waiting_first": queue[0], "waiting_last": queue[-1],
             "waiting_mean": mean_waiting, "queue_share_of_time_in_system_pct": 100.0 * mean_waiting / (mean_waiting + running)}
    return {"sglang.log": "\n".join(lines) + "\n"}, truth


def case(name: str, rng) -> tuple[dict, dict]:
    """The case ``name`` (module docstring) from ``rng``."""
    if name == "deployment_sweeps":
        return deployment_sweeps(rng)
    if name.startswith("sglang_queue_"):
        _, _, samples, trend = name.split("_")
        return sglang_queue(rng, int(samples), trend)
    raise KeyError(f"no serving case {name!r}")


def write_case(out: Path, name: str, rng) -> tuple[Path, dict]:
    """The case's files into ``out/<name>/`` and its truth (returned, and in ``out/<name>_truth.json``
    beside the case, not in it)."""
    files, truth = case(name, rng)
    bundle = out / name
    bundle.mkdir(parents=True, exist_ok=True)
    for fname, text in files.items():
        (bundle / fname).write_text(text)
    (out / f"{name}_truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return bundle, truth
