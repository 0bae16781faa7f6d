#!/usr/bin/env python3
"""Generate a training step whose stream waits on an event with its work queued, in the real nsys schema, with truth.

Each step (an NVTX ``step`` range) the host launches a forward pass, then ``cudaStreamWaitEvent`` on an event
another rank's exchange records (that rank is not in the capture), then the backward pass, then reads 704 bytes
back into pageable host memory. The host is ahead: every kernel is launched long before the GPU reaches it.
The first kernel after the wait cannot start before the exchange is done, ``wait_us`` after the forward pass
ends: the GPU idles that long with the backward already queued, while the host sits in the pageable read-back
(queued behind the backward, the call returns only when the copy is done). That read-back is the trap: the
GPU idle falls inside a pageable copy call, yet pinning it would not shorten the step; only the copy and the
staging after it are the copy's.

The truth (returned, or written beside the bundle) comes from the generated intervals, with generate.py's plain
interval arithmetic, independently of tracetriage: the hidden wait (from the later of the previous operation's end
and the queued kernel's launch plus its latency, to the kernel's start), the GPU idle inside the pageable calls that
is not that wait (what the copies cost), and the steps.

    .venv/bin/python samples/gen_dependency.py --out /tmp/dep                 # 10 ms waits per step
    .venv/bin/python samples/gen_dependency.py --out /tmp/dep0 --wait-us 0    # the same program, nothing to wait for
    .venv/bin/python samples/gen_dependency.py --out /tmp/depx --gpu-offset-us 5000  # GPU clock 5 ms ahead of the host's
    .venv/bin/python samples/gen_dependency.py --out /tmp/depp --producer     # the exchange (GPU 1) captured too

``--gpu-offset-us`` writes the GPU's timestamps (kernels, copies, memsets, graph replays) that far off the host's
(API calls, syncs, NVTX ranges), as a capture whose two clocks were never aligned: the truth keeps the waits as
generated, on one clock, and records the offset (``gpu_offset_ns``).
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import replace
from pathlib import Path

from generate import US, Rank, clip_all, merge, overlap, truth_for, write_nsys

PAGEABLE_CALL = "cudaMemcpyAsync_v3020"
LATENCY = 2 * US  # generate.Rank.launch's default: launch call end to kernel start on an idle GPU


def scenario_dependency_wait(rng: random.Random, wait_us: float = 10_000, steps: int = 30, producer: bool = False):
    """Returns (ranks, truth extra, waits): ``waits`` the generated hidden waits as (from, to) ns, one a step when
    ``wait_us`` > 0. With ``producer`` the capture holds what the stream waits on too: a second process on GPU 1
    whose exchange kernel ends where each wait ends, then records the event (cudaEventRecord)."""
    rank = Rank(pid=4601, device=0, program="python3 train.py --world-size 16")
    peer = Rank(pid=4602, device=1, program="python3 exchange.py") if producer else None
    waits = []
    for _step in range(steps):
        start = rank.t
        for _ in range(40):  # forward: kernels far longer than their launches, so the host runs ahead
            rank.launch("forward_gemm_kernel", int(rng.uniform(100, 300) * US))
        rank.api_call("cudaStreamWaitEvent_v3020", 2 * US)  # the event the other rank's exchange records
        queue_free = rank.gpu_free
        exchange_done = queue_free + int(wait_us * rng.uniform(0.8, 1.2) * US) if wait_us else 0
        launched_at = rank.t + 5 * US  # the launch call's end (launch_ns 5 µs)
        ks, _ = rank.launch("backward_gemm_kernel", int(rng.uniform(100, 300) * US), not_before=exchange_done)
        if peer is not None and exchange_done:  # the exchange ends where the wait ends; its event recorded after it
            dur = int(rng.uniform(200, 400) * US)
            peer.t = max(peer.t, exchange_done - dur - 20 * US)
            peer.launch("exchange_all_to_all_kernel", dur, not_before=exchange_done - dur)
            peer.api_call("cudaEventRecord_v3020", 2 * US)
        ready = max(queue_free, launched_at + LATENCY)
        if ks > ready:
            waits.append((ready, ks))
        for _ in range(29):
            rank.launch("backward_gemm_kernel", int(rng.uniform(100, 300) * US))
        rank.pageable_copy(704, dma_gbps=rng.uniform(2.0, 3.0), stage_gbps=rng.uniform(1.0, 2.0))
        rank.host(int(rng.uniform(250, 350) * US))
        rank.nvtx.append((start, rank.t, "step"))
    extra = {"launches_per_step": 70, "graph_launches_per_step": 0, "syncs_per_step": 0, "warmup_steps": 0}
    return [rank, *([peer] if peer is not None else [])], extra, waits


def dependency_truth(rank: Rank, waits: list[tuple[int, int]], lo: int, hi: int) -> dict:
    """From the generated intervals in [lo, hi): the hidden waits (ns, % of the window, count), the GPU idle
    inside the pageable read-back calls and the part of it that is not a hidden wait (the copies' own cost)."""
    window = hi - lo
    waited = clip_all(waits, lo, hi)
    busy = clip_all(rank.busy_intervals(), lo, hi)
    calls = clip_all([(s, e) for s, e, name, _ in rank.api if name == PAGEABLE_CALL], lo, hi)
    idle_in_calls = sum(e - s for s, e in calls) - overlap(calls, busy)
    return {"wait_ns": merge(waited), "wait_pct": 100.0 * merge(waited) / window, "waits": len(waited),
            "idle_in_pageable_pct": 100.0 * idle_in_calls / window,
            "pageable_cost_pct": 100.0 * (idle_in_calls - overlap(calls, waited)) / window}


def shift_gpu(rank: Rank, ns: int) -> Rank:
    """The rank with its GPU timestamps (kernels, graph replays, copies, memsets) moved by ``ns``, its host's
    (API calls, syncs, NVTX) kept: a capture whose GPU clock runs ``ns`` ahead of the host's (behind when < 0)."""
    return replace(rank, kernels=[(s + ns, e + ns, *rest) for s, e, *rest in rank.kernels],
                   graphs=[(s + ns, e + ns, *rest) for s, e, *rest in rank.graphs],
                   copies=[(s + ns, e + ns, *rest) for s, e, *rest in rank.copies],
                   memsets=[(s + ns, e + ns, *rest) for s, e, *rest in rank.memsets])


def write_bundle(folder: Path, seed: str = "dependency_wait", wait_us: float = 10_000, steps: int = 30,
                 gpu_offset_us: float = 0, producer: bool = False) -> dict:
    """Write ``folder``/trace.sqlite and return its truth (generate.truth_for plus ``dependency``, on the one
    clock the capture was generated on, and ``gpu_offset_ns``, the offset written into its GPU timestamps);
    ``producer``: the exchange that ends each wait is in the capture too (scenario_dependency_wait)."""
    ranks, extra, waits = scenario_dependency_wait(random.Random(seed), wait_us, steps, producer)
    folder.mkdir(parents=True, exist_ok=True)
    name = f"dependency_wait_{int(wait_us)}"
    offset = int(gpu_offset_us * US)
    write_nsys(folder / "trace.sqlite", [shift_gpu(rank, offset) for rank in ranks] if offset else ranks, name)
    # the steps (and the window) are the training process's: the exchange process has none of its own
    truth = truth_for(ranks[:1], extra, name, "a stream waits on another rank's event with its work queued")
    truth["dependency"] = dependency_truth(ranks[0], waits, truth["window"]["start_ns"], truth["window"]["end_ns"])
    truth["gpu_offset_ns"] = offset
    # where each wait ends (the kernel it held starts) and where the capture's producer work ends
    truth["wait_ends_ns"] = [end for _, end in waits]
    truth["producer_ends_ns"] = [end for rank in ranks[1:] for _, end, *_ in rank.kernels]
    calls = [name.split("_v")[0] for rank in ranks for _, _, name, _ in rank.api]  # in the whole capture
    truth["calls"] = {name: calls.count(name) for name in ("cudaStreamWaitEvent", "cudaEventRecord")}
    return truth


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the bundle folder to write (its truth beside it)")
    ap.add_argument("--wait-us", type=float, default=10_000, help="how long the queued work waits each step, in µs")
    ap.add_argument("--seed", default="dependency_wait")
    ap.add_argument("--gpu-offset-us", type=float, default=0,
                    help="write the GPU's timestamps this many µs ahead of the host's (behind when negative)")
    ap.add_argument("--producer", action="store_true",
                    help="capture the exchange too: a second process on GPU 1 whose kernel ends where each wait ends")
    args = ap.parse_args(argv)
    truth = write_bundle(args.out, args.seed, args.wait_us, gpu_offset_us=args.gpu_offset_us, producer=args.producer)
    args.out.with_suffix(".truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    dep = truth["dependency"]
    print(f"wrote {args.out}/trace.sqlite: hidden waits {dep['wait_pct']:.1f}% of the window, pageable copies' own "
          f"cost {dep['pageable_cost_pct']:.2f}%")


if __name__ == "__main__":
    main()
