#!/usr/bin/env python3
"""Generate one annotated engine step that is mostly a stall, in the real nsys schema, with truth.

A serving engine profiled for a single decode step (SGLang's ``step[DECODE bs=32]``): the step's range opens, a
few kernels are launched, then the host blocks ~460 ms in a synchronous device-to-host ``cudaMemcpy`` while the
GPU idles, and only then launches the step's ~9 ms of layers; the host leaves the range once they are queued and
the GPU drains them after it. Two ways the host can be blocked there (``wait_event``):

* ``True`` (the real tracelens SGLang capture's shape): the stream waits on an event another stream records
  (``cudaStreamWaitEvent``; its producer is not in the capture), the kernels launched after it are held queued
  until the event fires, and the copy that reads their result back waits behind them;
* ``False``: nothing is queued; the copy lands in pageable host memory and the driver stages it out of its
  bounce buffer at a crawl, the GPU idle all the while (the host's own stall).

Either way the stall is inside the step the capture annotates: the window covers the step (and the GPU work
it queued past its range), and the stall is judged, not cut off as start-up. The truth comes from the generated
intervals with generate.py's plain interval arithmetic, independently of tracetriage.

    .venv/bin/python samples/gen_step_stall.py --out /tmp/stall            # the held-queue stall
    .venv/bin/python samples/gen_step_stall.py --out /tmp/stall --no-wait  # the host's own pageable copy
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from generate import US, Rank, clip_all, merge, write_nsys

STEP_NAME = "step[DECODE bs=32]"
LAYER_KERNELS = ("qkv_gemm_kernel", "paged_attention_kernel", "o_proj_gemm_kernel", "mlp_gemm_kernel")
LATENCY = 2 * US  # generate.Rank.launch's default: launch call end to kernel start on an idle GPU


def scenario_step_stall(rng: random.Random, wait_event: bool = True, stall_ms: float = 460.0, layers: int = 36):
    """Returns (rank, truth): the step, the window it defines and the stall, from the generated intervals."""
    rank = Rank(pid=251, device=0, program="python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B")
    step_start = rank.t
    rank.host(200 * US)  # the scheduler before the step's first launch
    rank.launch("arange_kernel", 4 * US)
    stall_ns = int(stall_ms * rng.uniform(0.98, 1.02) * 1_000_000)
    waits = []
    if wait_event:
        rank.api_call("cudaStreamWaitEvent_v3020", 10 * US)
        release = rank.t + stall_ns  # the other stream's event fires then
        ready = max(rank.gpu_free, rank.t + 5 * US + LATENCY)  # the held kernel's launch call end + latency
        ks, _ = rank.launch("resolve_future_token_ids_kernel", 7 * US, not_before=release)
        waits.append((ready, ks))
    for name in ("clamp_position_kernel", "copy_kernel"):
        rank.launch(name, 6 * US)
    _sync_readback(rank, 256 if wait_event else 460 << 20, None if wait_event else stall_ns)
    rank.host(150 * US)
    for _ in range(layers):
        for name in LAYER_KERNELS:
            rank.launch(name, int(rng.uniform(50, 70) * US))
    rank.host(20 * US)
    step_end = rank.t  # the host leaves the range once the layers are queued; the GPU drains them after
    rank.nvtx.append((step_start, step_end, STEP_NAME))
    busy = rank.busy_intervals()
    # the window: the step where the GPU recorded activity (from its first operation), and the work it queued after it
    lo, hi = max(step_start, min(s for s, _ in busy)), max(step_end, max(e for _, e in busy))
    busy_ns = merge(clip_all(busy, lo, hi))
    starts = sorted(busy)
    gaps = [(a[1], b[0]) for a, b in zip(starts, starts[1:]) if b[0] > a[1]]
    stall = max(gaps, key=lambda g: g[1] - g[0])
    truth = {"step": {"start_ns": step_start, "end_ns": step_end},
             "window": {"start_ns": lo, "end_ns": hi, "duration_ns": hi - lo},
             "busy_pct": 100.0 * busy_ns / (hi - lo), "stall": {"start_ns": stall[0], "end_ns": stall[1]},
             "stall_pct": 100.0 * (stall[1] - stall[0]) / (hi - lo),
             "wait_pct": 100.0 * merge(clip_all(waits, lo, hi)) / (hi - lo),
             "gpu_start_ns": min(s for s, _ in busy)}
    return rank, truth


def _sync_readback(rank: Rank, nbytes: int, stage_ns: int | None) -> None:
    """A synchronous ``cudaMemcpy`` device to host: the copy waits for the queue, then (``stage_ns``) the host
    copies it out of the driver's bounce buffer into pageable memory, the GPU idle; without staging the
    destination is pinned and the call returns right after the copy."""
    c = rank._corr()
    s = rank.t
    cs = max(rank.t + 4 * US, rank.gpu_free)
    ce = cs + 5 * US + nbytes // 25  # 25 GB/s
    rank.copies.append((cs, ce, c, nbytes, 2, 2, 0 if stage_ns else 1))  # DtoH; dst pageable or pinned
    rank.t = ce + (stage_ns or 0) + 5 * US
    rank.api.append((s, rank.t, "cudaMemcpy_v3020", c))
    rank.gpu_free = ce


def write_bundle(folder: Path, seed: str = "step_stall", wait_event: bool = True) -> dict:
    """Write ``folder``/trace.sqlite and return its truth."""
    rank, truth = scenario_step_stall(random.Random(seed), wait_event)
    folder.mkdir(parents=True, exist_ok=True)
    write_nsys(folder / "trace.sqlite", [rank], "step_stall" if wait_event else "step_stall_pageable")
    return truth


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the bundle folder to write (its truth beside it)")
    ap.add_argument("--no-wait", action="store_true", help="the host's own stall (a pageable copy), nothing queued")
    ap.add_argument("--seed", default="step_stall")
    args = ap.parse_args(argv)
    truth = write_bundle(args.out, args.seed, not args.no_wait)
    args.out.with_suffix(".truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    print(f"wrote {args.out}/trace.sqlite: window {truth['window']['duration_ns'] / 1e6:.2f} ms, stall "
          f"{truth['stall_pct']:.1f}% of it")


if __name__ == "__main__":
    main()
