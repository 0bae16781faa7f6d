#!/usr/bin/env python3
"""Generate a GPU-bound decode with one minor problem, in the real nsys schema, with ground truth.

The program is generate.py's healthy decode (one CUDA-graph replay of ~12 ms per step, the host ahead,
an event sync on the step before) plus, each step, a read-back of ``readback_bytes`` into pageable
host memory: the driver stages it, so the host is blocked in the ``cudaMemcpyAsync`` until the copy
is done and the bounce buffer copied out, and the next replay waits for it (a hidden sync, small
against the step). ``host_us`` of host code after each read-back makes the GPU wait for the host too
(0: it does not), which is how a capture that is not GPU-bound is built from the same program.

The truth (written beside the bundle, or returned) is computed here from the generated intervals,
with generate.py's plain interval merge, independently of tracetriage's analyzers: each device's
compute share (kernel and graph time in the window / the window) and what the pageable read-backs
cost (their copy time no kernel hides plus the GPU idle while the host is inside those calls, % of
the window).

    python samples/gen_gpu_bound.py --out /tmp/gb                       # the 2 MiB read-back, GPU-bound
    python samples/gen_gpu_bound.py --out /tmp/gb --bytes 8388608 --host-us 3000
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from generate import US, Rank, clip_all, merge, overlap, truth_for, write_nsys

MiB = 1024 * 1024
PAGEABLE_CALL = "cudaMemcpyAsync_v3020"


def scenario_gpu_bound_readback(rng: random.Random, readback_bytes: int = 2 * MiB, host_us: int = 0, steps: int = 50):
    """The healthy decode with a per-step pageable read-back (``readback_bytes``) and ``host_us`` of host code
    after it; returns (ranks, truth extra) as generate.py's scenarios do."""
    rank = Rank(pid=4505, device=0)
    done = []
    for _step in range(steps):
        rank.host(int(rng.uniform(30, 50) * US))
        rank.graph_launch(int(rng.uniform(11_500, 12_500) * US), graph_id=1)
        done.append(rank.gpu_free)
        rank.pageable_copy(readback_bytes, dma_gbps=rng.uniform(11.5, 12.5), stage_gbps=rng.uniform(7.5, 8.5))
        if host_us:
            rank.host(int(host_us * US * rng.uniform(0.98, 1.02)))
        if len(done) >= 2:
            rank.event_sync(done[-2])
    return [rank], {"launches_per_step": 0, "graph_launches_per_step": 1, "syncs_per_step": 1, "warmup_steps": 0}


def minor_truth(rank: Rank, lo: int, hi: int) -> dict:
    """From the generated intervals in [lo, hi): the compute share (kernels and graph replays), the pageable
    read-backs' cost (copy time no kernel or replay overlaps, plus GPU idle inside their calls) and the count
    of those copies, each share % of the window."""
    window = hi - lo
    work = clip_all([(s, e) for s, e, *_ in rank.kernels] + [(s, e) for s, e, *_ in rank.graphs], lo, hi)
    pageable = [(s, e) for s, e, _corr, _bytes, _kind, src, dst in rank.copies if 0 in (src, dst)]
    copy_only = sum(e - s for s, e in clip_all(pageable, lo, hi)) - overlap(clip_all(pageable, lo, hi), work)
    calls = clip_all([(s, e) for s, e, name, _ in rank.api if name == PAGEABLE_CALL], lo, hi)
    idle_inside = sum(e - s for s, e in calls) - overlap(calls, clip_all(rank.busy_intervals(), lo, hi))
    return {"compute_pct": 100.0 * merge(work) / window, "pageable_cost_pct": 100.0 * (copy_only + idle_inside) / window,
            "pageable_copies": len(clip_all(pageable, lo, hi))}


def write_bundle(folder: Path, seed: str, readback_bytes: int = 2 * MiB, host_us: int = 0) -> dict:
    """Write ``folder``/trace.sqlite and return its truth (generate.truth_for plus ``minor``: minor_truth)."""
    ranks, extra = scenario_gpu_bound_readback(random.Random(seed), readback_bytes, host_us)
    folder.mkdir(parents=True, exist_ok=True)
    name = f"gpu_bound_readback_{readback_bytes}_{host_us}"
    write_nsys(folder / "trace.sqlite", ranks, name)
    truth = truth_for(ranks, extra, name, "graph decode with a per-step pageable read-back")
    truth["minor"] = minor_truth(ranks[0], truth["window"]["start_ns"], truth["window"]["end_ns"])
    return truth


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the bundle folder to write (its truth beside it)")
    ap.add_argument("--bytes", type=int, default=2 * MiB, help="bytes read back into pageable memory per step")
    ap.add_argument("--host-us", type=int, default=0, help="host code after each read-back, in µs")
    ap.add_argument("--seed", default="gpu_bound_readback")
    args = ap.parse_args(argv)
    truth = write_bundle(args.out, args.seed, args.bytes, args.host_us)
    args.out.with_suffix(".truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    print(f"wrote {args.out}/trace.sqlite: compute {truth['minor']['compute_pct']:.1f}%, "
          f"pageable read-backs {truth['minor']['pageable_cost_pct']:.2f}% of the window")


if __name__ == "__main__":
    main()
