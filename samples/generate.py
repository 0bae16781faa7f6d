#!/usr/bin/env python3
"""Generate scenario bundles in the real Nsight Systems SQLite schema, with ground truth.

Each bundle is a directory holding ``trace.sqlite`` (DDL and enum rows from real
exports: ``nsys_schema.sql`` next to this script); its truth, ``truth/<bundle>.json``
beside the bundles folder (not in the bundle, where a report would list it), is computed here
from the intervals this script generated — with its own plain-Python interval
merge, independent of tracetriage's analyzers.

The scenarios are the seeds' case studies, simulated as a host thread issuing work
to a GPU stream: every kernel is launched by a ``cudaLaunchKernel`` call and starts
when both the launch has returned and the stream is free; a ``.cpu()`` is a
``cudaMemcpyAsync`` DtoH plus a ``cudaStreamSynchronize`` that returns when the GPU
drains; a CUDA-graph step is one ``cudaGraphLaunch`` and one GRAPH_TRACE interval.

    python samples/generate.py --out samples/bundles          # all scenarios
    python samples/generate.py --out /tmp/b --only eager_decode
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCHEMA = HERE / "nsys_schema.sql"

# CUPTI_ACTIVITY_KIND_GRAPH_TRACE is not in the real exports we have (none used
# graph replays); its columns follow CUpti_ActivityGraphTrace2 and nsys's naming
# of the same fields in the KERNEL table.
GRAPH_TRACE_DDL = """CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    end                         INTEGER   NOT NULL,                    -- Event end timestamp (ns).
    deviceId                    INTEGER   NOT NULL,                    -- Device ID.
    contextId                   INTEGER   NOT NULL,                    -- Context ID.
    greenContextId              INTEGER,                               -- Green context ID.
    streamId                    INTEGER   NOT NULL,                    -- Stream ID.
    correlationId               INTEGER,                               -- REFERENCES CUPTI_ACTIVITY_KIND_RUNTIME(correlationId)
    globalPid                   INTEGER,                               -- Serialized GlobalId.
    graphId                     INTEGER,                               -- Graph ID.
    graphExecId                 INTEGER                                -- Graph exec ID.
);"""

T0 = 1_000_000_000  # captures do not start at 0
US = 1_000


def merge(intervals):
    """Plain union of (start, end) pairs -> total length (independent of tracetriage)."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def clip_all(intervals, lo, hi):
    return [(max(s, lo), min(e, hi)) for s, e in intervals if min(e, hi) > max(s, lo)]


@dataclass
class Rank:
    """One process driving one GPU."""

    pid: int
    device: int
    stream: int = 7
    t: int = T0           # host clock
    gpu_free: int = T0    # when the stream is next free
    corr: int = 0
    kernels: list = field(default_factory=list)   # (start, end, name, corr, collective)
    graphs: list = field(default_factory=list)    # (start, end, corr, graph_id)
    api: list = field(default_factory=list)       # (start, end, name, corr)
    copies: list = field(default_factory=list)    # (start, end, corr, bytes, copy_kind, src_kind, dst_kind)
    syncs: list = field(default_factory=list)     # (start, end, corr, sync_type)
    nvtx: list = field(default_factory=list)      # (start, end, text)
    host_ranges: list = field(default_factory=list)  # (start, end, text): NVTX ranges that are not steps
    memsets: list = field(default_factory=list)   # (start, end, corr, bytes)
    short_names: dict = field(default_factory=dict)  # kernel name (demangledName) -> shortName, where they differ
    program: str = ""  # the process's command line (default: a vLLM worker's)

    @property
    def command(self):
        return self.program or f"python3 -m vllm.worker rank{self.device}"

    @property
    def gtid(self):
        return (self.pid << 24) | self.pid

    @property
    def gpid(self):
        return self.pid << 24

    def _corr(self):
        self.corr += 1
        return self.corr

    def launch(self, name, dur, launch_ns=5 * US, latency=2 * US, collective=None, not_before=0):
        c = self._corr()
        s = self.t
        self.t += launch_ns
        self.api.append((s, self.t, "cudaLaunchKernel_v7000", c))
        ks = max(self.t + latency, self.gpu_free, not_before)
        self.kernels.append((ks, ks + dur, name, c, collective))
        self.gpu_free = ks + dur
        return ks, ks + dur

    def graph_launch(self, dur, graph_id=1, launch_ns=12 * US, latency=4 * US):
        c = self._corr()
        s = self.t
        self.t += launch_ns
        self.api.append((s, self.t, "cudaGraphLaunch_v10000", c))
        gs = max(self.t + latency, self.gpu_free)
        self.graphs.append((gs, gs + dur, c, graph_id))
        self.gpu_free = gs + dur

    def host(self, ns):
        self.t += ns

    def dtoh_sync(self, nbytes=8, pageable=False):
        """``.cpu()``: an async DtoH copy queued behind the step, then a stream sync."""
        c = self._corr()
        s = self.t
        self.t += 4 * US
        self.api.append((s, self.t, "cudaMemcpyAsync_v3020", c))
        cs = max(self.t + 2 * US, self.gpu_free)
        ce = cs + 2 * US
        self.copies.append((cs, ce, c, nbytes, 2, 2, 0 if pageable else 1))
        self.gpu_free = ce
        c2 = self._corr()
        s2 = self.t
        self.t = max(self.t + 2 * US, ce + 3 * US)
        self.api.append((s2, self.t, "cudaStreamSynchronize_v3020", c2))
        self.syncs.append((s2, self.t, c2, 3))

    def pageable_copy(self, nbytes, dma_gbps, stage_gbps, to_host=True):
        """A cudaMemcpyAsync to (or from) pageable host memory: the driver stages it through a
        pinned bounce buffer, so the call returns only when the copy is done (a hidden sync).
        Device to host: the GPU copy waits for the queue, then the host copies out of the
        buffer (``stage_gbps``) while the GPU idles; host to device: the host first fills
        the buffer, then the GPU copies."""
        c = self._corr()
        s = self.t
        stage = int(nbytes / stage_gbps)  # bytes / (GB/s) = ns
        if to_host:
            cs = max(s + 2 * US, self.gpu_free)
            ce = cs + int(nbytes / dma_gbps)
            self.t = ce + stage
            kinds = (2, 2, 0)  # copyKind DtoH; src device, dst pageable (nsys ENUM_CUDA_MEM_KIND)
        else:
            cs = max(s + stage, self.gpu_free)
            ce = cs + int(nbytes / dma_gbps)
            self.t = ce + 2 * US
            kinds = (1, 0, 2)  # copyKind HtoD; src pageable, dst device
        self.api.append((s, self.t, "cudaMemcpyAsync_v3020", c))
        self.copies.append((cs, ce, c, nbytes, *kinds))
        self.gpu_free = ce

    def event_sync(self, until):
        """``cudaEventSynchronize`` on an event recorded when the GPU reaches ``until``."""
        c = self._corr()
        s = self.t
        self.t = max(self.t + 2 * US, until + 3 * US)
        self.api.append((s, self.t, "cudaEventSynchronize_v3020", c))
        self.syncs.append((s, self.t, c, 1))

    def h2d_copy(self, nbytes, gbps, pinned=True):
        """An async host-to-device copy (e.g. offloaded weights streamed in), ``gbps`` GB/s."""
        c = self._corr()
        s = self.t
        self.t += 6 * US
        self.api.append((s, self.t, "cudaMemcpyAsync_v3020", c))
        cs = max(self.t + 2 * US, self.gpu_free)
        ce = cs + int(nbytes / gbps)  # bytes / (GB/s) = ns
        self.copies.append((cs, ce, c, nbytes, 1, 1 if pinned else 0, 2))
        self.gpu_free = ce

    def memset(self, nbytes, dur):
        c = self._corr()
        s = self.t
        self.t += 4 * US
        self.api.append((s, self.t, "cudaMemsetAsync_v3020", c))
        ms = max(self.t + 2 * US, self.gpu_free)
        self.memsets.append((ms, ms + dur, c, nbytes))
        self.gpu_free = ms + dur

    def api_call(self, name, dur):
        """A CUDA call with no GPU work of its own (stream capture, instantiate, malloc...)."""
        c = self._corr()
        s = self.t
        self.t += dur
        self.api.append((s, self.t, name, c))

    def busy_intervals(self):
        return ([(s, e) for s, e, *_ in self.kernels] + [(s, e) for s, e, *_ in self.graphs]
                + [(s, e) for s, e, *_ in self.copies] + [(s, e) for s, e, *_ in self.memsets])

    def copy_only_ns(self, lo, hi):
        """Time in [lo, hi) when copies or memsets run and no kernel or graph does."""
        work = merge(clip_all([(s, e) for s, e, *_ in self.kernels] + [(s, e) for s, e, *_ in self.graphs], lo, hi))
        everything = merge(clip_all(self.busy_intervals(), lo, hi))
        return everything - work


# ---------------------------------------------------------------------------
# Scenarios: each returns (ranks, truth_extra, options)


def _decode_kernels(rng, n):
    names = ["gemv_kernel", "rms_norm_kernel", "rotary_embedding_kernel", "paged_attention_v1_kernel",
             "silu_and_mul_kernel", "vectorized_elementwise_kernel", "reduce_kernel"]
    return [(names[i % len(names)], int(rng.uniform(1.5, 3.0) * US)) for i in range(n)]


LOGITS_FRAME = "process_logits (custom_logits_processor.py"
_ENGINE = ("<module> (serve.py:88)", "run_engine_loop (vllm/engine/llm_engine.py:1420)", "step (vllm/engine/llm_engine.py:1388)")


def scenario_eager_decode(rng, nvtx=False, pyspy=False):
    """Seed case: --enforce-eager decode, 500 launches/step, a custom logits processor that
    calls .cpu() on the logits (one DtoH copy + stream sync) and then works in Python."""
    r = Rank(pid=4101, device=0)
    per_step = 500
    host_time = {"python": 0, "launch": 0, "sync": 0, "logits": 0}
    for step in range(24):
        s0 = r.t
        if step < 2:
            r.host(6_000 * US)  # warm-up: first iterations compile/allocate
        for name, dur in _decode_kernels(rng, per_step):
            py = int(rng.uniform(1.0, 2.0) * US)
            r.host(py)  # Python between launches
            t0 = r.t
            r.launch(name, dur)
            if step >= 2:
                host_time["python"] += py
                host_time["launch"] += r.t - t0
        t0 = r.t
        r.dtoh_sync(nbytes=8 * 32)  # logits.cpu() inside the processor
        post = int(rng.uniform(1_400, 1_600) * US)
        r.host(post)  # the processor's Python work on the CPU copy
        if step >= 2:
            host_time["sync"] += r.t - post - t0
            host_time["logits"] += post
        if nvtx:
            r.nvtx.append((s0, r.t, "decode_step"))
    extra = {"launches_per_step": per_step, "graph_launches_per_step": 0, "syncs_per_step": 1, "warmup_steps": 2,
             "blocking_calls": ("cudaStreamSynchronize_v3020",)}
    if pyspy:
        extra["side"] = {"pyspy.txt": pyspy_raw(r.pid, host_time)}
        total = sum(_samples(v) for v in host_time.values())
        extra["pyspy_truth"] = {
            "frame": LOGITS_FRAME,
            "user_pct": 100.0 * (_samples(host_time["sync"]) + _samples(host_time["logits"])) / total,
        }
    return [r], extra


def _samples(ns, period_ns=10 * US):
    """py-spy samples for a host time at 100 kHz-equivalent (one per 10 us)."""
    return max(1, round(ns / period_ns))


def pyspy_raw(pid, host_time) -> str:
    """``py-spy record --format raw --native`` collapsed stacks for the simulated host time."""
    head = [f'process {pid}:"python3 serve.py --enforce-eager"', "thread (0x7F3A2C1B5740)", *_ENGINE]
    fwd = ["execute_model (vllm/worker/model_runner.py:1700)", "forward (vllm/model_executor/models/llama.py:212)",
           "_call_impl (torch/nn/modules/module.py:1747)"]
    logits = ["sample (vllm/model_executor/layers/sampler.py:310)",
              "_apply_logits_processors (vllm/model_executor/layers/logits_processor.py:120)"]
    rows = [
        (head + fwd + ["cudaLaunchKernel (libcudart.so.12)"], host_time["launch"]),
        (head + fwd, host_time["python"]),
        (head + logits + [f"{LOGITS_FRAME}:42)", "cpu (torch/_tensor.py:1150)", "cudaStreamSynchronize (libcudart.so.12)"],
         host_time["sync"]),
        (head + logits + [f"{LOGITS_FRAME}:57)"], host_time["logits"] // 2),
        (head + logits + [f"{LOGITS_FRAME}:61)", "tolist_tokens (custom_logits_processor.py:18)"],
         host_time["logits"] - host_time["logits"] // 2),
    ]
    return "".join(";".join(stack) + f" {_samples(ns)}\n" for stack, ns in rows)


def scenario_graph_decode(rng):
    """The same decode with the step captured in a CUDA graph (graph-trace mode)."""
    r = Rank(pid=4202, device=0)
    per_step = 200
    for step in range(42):
        if step < 2:  # warm-up and capture: eager
            r.host(6_000 * US)
            for name, dur in _decode_kernels(rng, per_step):
                r.host(int(1.5 * US))
                r.launch(name, dur)
            r.dtoh_sync(nbytes=8 * 32)
            continue
        r.host(int(rng.uniform(40, 60) * US))  # prepare inputs
        dur = sum(d for _, d in _decode_kernels(rng, per_step)) + per_step * 300  # nodes back to back
        r.graph_launch(dur)
        r.dtoh_sync(nbytes=8 * 32)
        r.host(int(rng.uniform(900, 1100) * US))
    return [r], {"launches_per_step": 0, "graph_launches_per_step": 1, "syncs_per_step": 1, "warmup_steps": 2,
                 "blocking_calls": ("cudaStreamSynchronize_v3020",)}


def scenario_graph_decode_no_gain(rng):
    """The fix that did not help (compare's falsifier): CUDA graphs turned on for the eager
    decode, but the captured graph is padded to a larger batch, so one replay takes as long as
    the eager step's launches did, and the host work between steps (the .cpu() read-back and
    the logits processor in Python) is unchanged. Launches fall from 500 to 0 per step, the
    step time does not, and the GPU still idles between steps."""
    r = Rank(pid=4101, device=0)
    per_step = 500
    for step in range(24):
        if step < 2:  # warm-up and capture: eager, as in eager_decode
            r.host(6_000 * US)
            for name, dur in _decode_kernels(rng, per_step):
                r.host(int(rng.uniform(1.0, 2.0) * US))
                r.launch(name, dur)
            r.dtoh_sync(nbytes=8 * 32)
            r.host(int(rng.uniform(1_400, 1_600) * US))
            continue
        # the eager step issued 500 launches at ~6.5 us each: the padded replay runs as long
        replay = sum(int(rng.uniform(1.0, 2.0) * US) + 5 * US for _ in range(per_step))
        r.graph_launch(replay)
        r.dtoh_sync(nbytes=8 * 32)
        r.host(int(rng.uniform(1_400, 1_600) * US))
    return [r], {"launches_per_step": 0, "graph_launches_per_step": 1, "syncs_per_step": 1, "warmup_steps": 2}


def _tp_ranks(rng, n, layers, gemm_us, allreduce_us, steps, name):
    ranks = [Rank(pid=5000 + i, device=i) for i in range(n)]
    for step in range(steps):
        step_start = max(r.t for r in ranks)
        for r in ranks:
            r.t = step_start
        starts = {r.pid: step_start for r in ranks}
        for layer in range(layers):
            for r in ranks:
                r.host(3 * US)
                r.launch("nvjet_hsh_gemm_tp", int(gemm_us * US * rng.uniform(0.97, 1.03)))
                r.launch("flash_fwd_splitkv_kernel", int(gemm_us * 0.5 * US * rng.uniform(0.97, 1.03)))
            # AllReduce: every rank's kernel waits for the last rank to arrive, then all finish together.
            arrive = max(r.gpu_free for r in ranks)
            for r in ranks:
                r.host(3 * US)
                ks, ke = r.launch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 0, collective="AllReduce")
                r.kernels.pop()
                ks = max(ks, r.gpu_free)
                end = arrive + int(allreduce_us * US * rng.uniform(0.98, 1.02)) + 2 * US
                r.kernels.append((ks, end, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", r.corr, "AllReduce"))
                r.gpu_free = end
        for r in ranks:
            r.dtoh_sync(nbytes=4 * 64)  # sampled token ids back to the scheduler
            r.host(200 * US)
            r.nvtx.append((starts[r.pid], r.t, "execute_model"))
    return ranks


def scenario_tp8_cross_island(rng):
    """Seed case: TP=8 over two NVLink islands; AllReduce ~46% of the step."""
    ranks = _tp_ranks(rng, 8, layers=16, gemm_us=150, allreduce_us=260, steps=24, name="tp8")
    return ranks, {"launches_per_step": 16 * 3, "graph_launches_per_step": 0, "syncs_per_step": 1, "warmup_steps": 0}


def scenario_tp4_island(rng):
    """Seed case: TP=4 inside one NVLink island; AllReduce ~5% of the step."""
    ranks = _tp_ranks(rng, 4, layers=16, gemm_us=420, allreduce_us=30, steps=24, name="tp4")
    return ranks, {"launches_per_step": 16 * 3, "graph_launches_per_step": 0, "syncs_per_step": 1, "warmup_steps": 0}


def scenario_dp2_late_rank(rng, layers=4, stall_us=5_000, optimizer_us=200):
    """Data-parallel training on 2 ranks: forward and backward GEMMs, then the gradient all-reduce and
    the optimizer. Rank 1's host spends ~5 ms in a ``log_metrics`` range after queueing its backward,
    so its all-reduce starts ~2 ms after rank 0's: rank 0's AllReduce kernel is mostly waiting for
    rank 1, not moving data (every rank's call ends when the last has arrived and ~400 us moved).
    ``layers`` (3 x 250 us of GEMMs each) and ``stall_us`` set the compute and the stall: 16 layers and a
    13 ms stall make rank 1 ~1 ms late in a ~13.6 ms step, collectives a small share of the window; a long
    ``optimizer_us`` after the all-reduce dilutes the same wait in a longer step."""
    ranks = [Rank(pid=5000 + i, device=i, program=f"python3 train.py --local-rank {i}") for i in range(2)]
    late = ranks[1]
    calls = []  # per step: [(start, end) per rank]
    for _step in range(24):
        step_start = max(r.t for r in ranks)
        starts = {}
        for r in ranks:
            r.t = step_start
            starts[r.pid] = step_start
            for _layer in range(layers):
                r.launch("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_fprop", int(250 * US * rng.uniform(0.98, 1.02)))
            for _layer in range(layers):
                r.launch("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_dgrad", int(250 * US * rng.uniform(0.98, 1.02)))
                r.launch("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_wgrad", int(250 * US * rng.uniform(0.98, 1.02)))
            if r is late:
                stall = int(stall_us * US * rng.uniform(0.95, 1.05))
                r.nvtx.append((r.t, r.t + stall, "log_metrics"))
                r.host(stall)
            r.host(3 * US)
        # the all-reduce: each rank's kernel starts when its stream reaches it; all end together
        begun = []
        for r in ranks:
            ks, _ = r.launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0, collective="AllReduce")
            r.kernels.pop()
            begun.append(ks)
        end = max(begun) + int(400 * US * rng.uniform(0.98, 1.02))
        for r, ks in zip(ranks, begun):
            r.kernels.append((ks, end, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", r.corr, "AllReduce"))
            r.gpu_free = end
        calls.append([(ks, end) for ks in begun])
        for r in ranks:
            r.launch("multi_tensor_apply_kernel<FusedAdamFunctor>", int(optimizer_us * US * rng.uniform(0.98, 1.02)))
            r.dtoh_sync(nbytes=4)  # loss.item()
            r.nvtx.append((starts[r.pid], r.t, "train_step"))
    # the truth of the skew, from the generated intervals (collectives.py's definitions)
    spreads, waits, durations, late_count = [], 0, 0, 0
    for call in calls:
        latest = max(start for start, _ in call)
        spreads.append(latest - min(start for start, _ in call))
        waits += sum(min(latest - start, end - start) for start, end in call)
        durations += sum(end - start for start, end in call)
        late_count += call[1][0] == latest
    spreads.sort()
    skew = {"matched": len(calls), "p50_ns": spreads[len(spreads) // 2], "wait_share_pct": 100.0 * waits / durations,
            "late_pid": late.pid, "late_calls": late_count, "before_where": "host", "before": "log_metrics",
            "wait_ns": waits}
    return ranks, {"launches_per_step": 2 + 3 * layers, "graph_launches_per_step": 0, "syncs_per_step": 1, "warmup_steps": 0,
                   "skew_truth": skew}


def scenario_prefill_stall(rng, nvtx=True):
    """Seed case: 22 ms decode steps, a 450 ms whole-prompt prefill every ~12 steps."""
    r = Rank(pid=4303, device=0)
    for step in range(60):
        s0 = r.t
        prefill = step % 12 == 5
        r.host(int(rng.uniform(150, 250) * US))
        dur = int((450_000 if prefill else 21_500) * US * rng.uniform(0.98, 1.02))
        r.graph_launch(dur, graph_id=2 if prefill else 1)
        r.dtoh_sync(nbytes=4 * 64)
        r.host(int(rng.uniform(150, 250) * US))
        if nvtx:
            r.nvtx.append((s0, r.t, "prefill" if prefill else "decode_step"))
    return [r], {"launches_per_step": 0, "graph_launches_per_step": 1, "syncs_per_step": 1, "warmup_steps": 0}


def scenario_healthy(rng):
    """Compute-bound decode in CUDA graphs; the host stays ahead, no per-step sync."""
    r = Rank(pid=4404, device=0)
    done = []
    for step in range(50):
        r.host(int(rng.uniform(30, 50) * US))
        r.graph_launch(int(rng.uniform(11_500, 12_500) * US), graph_id=1)
        done.append(r.gpu_free)
        if len(done) >= 2:  # async output processing: wait for the previous step only
            r.event_sync(done[-2])
    return [r], {"launches_per_step": 0, "graph_launches_per_step": 1, "syncs_per_step": 1, "warmup_steps": 0}


def scenario_decode_rare_prefill(rng):
    """Seed 000 3.4 / 002 case 2: 21.8 ms decode steps in CUDA graphs, a 1 ms host sync
    read-back per step, and three whole-prompt prefills of ~458 ms among 400 steps: the
    freeze is a few % of the time and 21x the median step."""
    r = Rank(pid=4505, device=0)
    prefills = {97, 211, 333}
    for step in range(400):
        s0 = r.t
        r.host(int(rng.uniform(80, 120) * US))
        dur = int((458_000 if step in prefills else 20_500) * US * rng.uniform(0.99, 1.01))
        r.graph_launch(dur, graph_id=2 if step in prefills else 1)
        r.dtoh_sync(nbytes=4 * 64)
        r.host(int(rng.uniform(900, 1100) * US))  # detokenize and schedule after the read-back
        r.nvtx.append((s0, r.t, "prefill" if step in prefills else "decode_step"))
    return [r], {"launches_per_step": 0, "graph_launches_per_step": 1, "syncs_per_step": 1, "warmup_steps": 0}


def scenario_offload_copy_bound(rng):
    """Weights streamed in from pinned host memory every step (CPU offload): ~20 ms of
    host-to-device copies at ~25 GB/s per step against ~1 ms of kernels."""
    r = Rank(pid=4606, device=0)
    for step in range(30):
        s0 = r.t
        for layer in range(4):
            r.h2d_copy(nbytes=128 * 1024 * 1024, gbps=rng.uniform(24.5, 25.5))
            r.launch("gemm_bf16_kernel", int(rng.uniform(240, 260) * US))
        r.event_sync(r.gpu_free)
        r.host(int(rng.uniform(150, 250) * US))
        r.nvtx.append((s0, r.t, "decode_step"))
    return [r], {"launches_per_step": 4, "graph_launches_per_step": 0, "syncs_per_step": 1, "warmup_steps": 0}


def scenario_pageable_readback(rng):
    """A hidden sync: each step replays its graph (~2 ms) and reads 24 MiB of output back with
    cudaMemcpyAsync into pageable host memory; the driver stages the copy, so the call blocks
    until the copy is done and the host has copied the bounce buffer out (the GPU idle all that
    while), then ~100 us of host work. No explicit sync anywhere."""
    r = Rank(pid=4707, device=0)
    for step in range(30):
        r.graph_launch(int(rng.uniform(1_900, 2_100) * US))
        r.host(int(rng.uniform(15, 25) * US))
        r.pageable_copy(24 * 1024 * 1024, dma_gbps=rng.uniform(11.5, 12.5), stage_gbps=rng.uniform(7.5, 8.5))
        r.host(int(rng.uniform(80, 120) * US))
    return [r], {"launches_per_step": 0, "graph_launches_per_step": 1, "syncs_per_step": 0, "warmup_steps": 0,
                 "blocking_calls": ("cudaMemcpyAsync_v3020",)}


def scenario_graph_capture_phase(rng):
    """vLLM start-up: a few warm-up kernels, then CUDA-graph capture of 6 batch sizes, each
    recording 120 launches into a graph (nothing executes) and instantiating it."""
    r = Rank(pid=4707, device=0)
    for name, dur in _decode_kernels(rng, 7):
        r.host(20 * US)
        r.launch(name, dur)
    for bs in range(6):
        r.api_call("cudaStreamBeginCapture_v10000", 8 * US)
        for _ in range(120):
            r.host(int(rng.uniform(10, 20) * US))
            r.api_call("cudaLaunchKernel_v7000", 5 * US)  # captured, not executed
        r.api_call("cudaStreamEndCapture_v10000", 30 * US)
        r.api_call("cudaGraphInstantiate_v12000", 900 * US)
    return [r], {"launches_per_step": None, "graph_launches_per_step": None, "syncs_per_step": None, "warmup_steps": 0}


def scenario_memset_only(rng):
    """An export whose only GPU record is one 1.5 us memset (no kernel table at all)."""
    r = Rank(pid=4808, device=0)
    r.api_call("cudaMalloc_v3020", 300 * US)
    r.memset(nbytes=4096, dur=1_500)
    r.api_call("cudaFree_v3020", 80 * US)
    return [r], {"launches_per_step": None, "graph_launches_per_step": None, "syncs_per_step": None, "warmup_steps": 0,
                 "no_kernel_table": True}


def scenario_single_kernel(rng):
    """One 2.3 us kernel inside ~112 ms of CUDA calls (context set-up, allocations)."""
    r = Rank(pid=4909, device=0)
    r.api_call("cudaGetDeviceCount_v3020", 95_000 * US)
    r.api_call("cudaMalloc_v3020", 12_000 * US)
    r.launch("vector_add_kernel", 2_300)
    r.api_call("cudaDeviceSynchronize_v3020", 5_000 * US)
    return [r], {"launches_per_step": None, "graph_launches_per_step": None, "syncs_per_step": None, "warmup_steps": 0}


def _host_starved_loop(rng, r: Rank, steps: int = 60) -> None:
    """host_starved's loop: ~2 ms graph replays separated by ~7 ms of host code, no sync."""
    for _ in range(steps):
        r.graph_launch(int(rng.uniform(1_900, 2_100) * US))
        r.host(int(rng.uniform(6_500, 7_500) * US))


def scenario_host_starved(rng):
    """The GPU idles while the host runs code in no CUDA call: each step ~2 ms of graph
    replay, then ~7 ms of host work (tokenizer / scheduler) before the next launch; no
    sync, no py-spy capture."""
    r = Rank(pid=5010, device=0)
    _host_starved_loop(rng, r)
    return [r], {"launches_per_step": 0, "graph_launches_per_step": 1, "syncs_per_step": 0, "warmup_steps": 0}


LOADER_RANGE = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def scenario_data_loader_starved(rng):
    """A training loop with num_workers=0: each step the main thread loads the batch itself (~25 ms in
    the DataLoader range, nothing queued on the GPU), copies it in (pinned, non_blocking) and launches
    400 forward/backward/optimizer kernels of ~60 us, each after ~55 us of autograd and Python, so the
    GPU just keeps up with the host and drains as the next load starts. No per-step sync; NVTX step_N
    ranges mark the steps. The GPU idles about half of each step, nearly all of it under the DataLoader."""
    r = Rank(pid=5020, device=0)
    for step in range(12):
        s0 = r.t
        load = int(rng.uniform(23_000, 27_000) * US)
        r.host_ranges.append((r.t, r.t + load, LOADER_RANGE))
        r.host(load)
        r.h2d_copy(16 << 20, 12.0)  # the batch, pinned
        for k in range(400):
            r.host(int(rng.uniform(50, 60) * US))  # autograd and Python between launches
            r.launch(("conv_fwd_kernel", "bn_fwd_kernel", "conv_bwd_kernel", "sgd_kernel")[k % 4],
                     int(rng.uniform(55, 65) * US))
        r.nvtx.append((s0, r.t, f"step_{step}"))
    return [r], {"launches_per_step": 400, "graph_launches_per_step": 0, "syncs_per_step": 0, "warmup_steps": 0}


def scenario_setup_then_starved(rng):
    """Start-up, then host_starved's loop: a 64 B copy, 0.1 ms later a synchronous 2 GB weight
    copy (~80 ms, host blocked in cudaMemcpy), a few one-off init kernels, a 1.5 s host-only
    stretch (model build, no CUDA call), an allocator storm (40 cudaMalloc), 0.6 s more host-only
    (compilation), then the steady loop of ~9 ms steps. The truth's window starts at the loop's
    first replay (``setup_ns`` before it); no step annotation, no sync: the phase rule alone
    must find where the steady state begins."""
    r = Rank(pid=5111, device=0)
    r.h2d_copy(nbytes=64, gbps=10.0)
    r.host(100 * US)
    c = r._corr()
    s = r.t
    cs = max(r.t + 4 * US, r.gpu_free)
    ce = cs + int(2_000_000_000 / 25.0)  # 2 GB at 25 GB/s
    r.copies.append((cs, ce, c, 2_000_000_000, 1, 0, 2))  # pageable host memory, synchronous
    r.t = ce + 5 * US
    r.api.append((s, r.t, "cudaMemcpy_v3020", c))
    r.gpu_free = ce
    for name in ("init_weights_kernel", "fill_kernel", "rng_init_kernel"):
        r.host(50 * US)
        r.launch(name, 40 * US)
    r.host(1_500_000 * US)
    for _ in range(40):
        r.api_call("cudaMalloc_v3020", int(rng.uniform(500, 1_500) * US))
    r.host(600_000 * US)
    first = len(r.graphs)
    _host_starved_loop(rng, r)
    gpu_start = min(s for s, _ in r.busy_intervals())
    steady_from = r.graphs[first][0]
    return [r], {"launches_per_step": 0, "graph_launches_per_step": 1, "syncs_per_step": 0, "warmup_steps": 0,
                 "steady_from_ns": steady_from, "setup_ns": steady_from - gpu_start}


SCENARIOS = {
    "eager_decode": (lambda rng: scenario_eager_decode(rng),
                     "launch-bound eager decode (--enforce-eager), one .cpu() sync per step; no NVTX"),
    "eager_decode_nvtx": (lambda rng: scenario_eager_decode(rng, nvtx=True), "the eager decode with NVTX decode_step ranges"),
    "eager_decode_pyspy": (lambda rng: scenario_eager_decode(rng, pyspy=True),
                           "the eager decode (no NVTX) with a py-spy record of the same load"),
    "graph_decode": (scenario_graph_decode, "the same decode in CUDA graphs (graph-trace mode), .cpu() sync kept"),
    "graph_decode_no_gain": (scenario_graph_decode_no_gain,
                             ("eager_decode with CUDA graphs on but a padded graph and the same host work: no faster "
                              "(compare: launch_bound falsified)")),
    "tp8_cross_island": (scenario_tp8_cross_island, "TP=8 across two NVLink islands, AllReduce dominates; NVTX execute_model"),
    "tp4_island": (scenario_tp4_island, "TP=4 inside one island, AllReduce ~5%; NVTX execute_model"),
    "prefill_stall": (lambda rng: scenario_prefill_stall(rng, nvtx=True),
                      "graph decode with periodic whole-prompt prefills; NVTX prefill/decode_step"),
    "prefill_stall_nonvtx": (lambda rng: scenario_prefill_stall(rng, nvtx=False), "the prefill-stall run without NVTX"),
    "healthy": (scenario_healthy, "compute-bound decode in CUDA graphs, host ahead of the GPU"),
    "decode_rare_prefill": (scenario_decode_rare_prefill,
                            "graph decode, 1 ms host work after a per-step read-back, three 458 ms prefills in 400 steps"),
    "offload_copy_bound": (scenario_offload_copy_bound,
                           "weights streamed host-to-device from pinned memory every step (CPU offload)"),
    "pageable_readback": (scenario_pageable_readback,
                          "graph decode whose per-step output is read back into pageable memory: a hidden sync"),
    "graph_capture_phase": (scenario_graph_capture_phase,
                            "CUDA-graph capture at start-up: 720 launches recorded, 7 kernels executed"),
    "memset_only": (scenario_memset_only, "no kernel table, one 1.5 us memset"),
    "single_kernel": (scenario_single_kernel, "one 2.3 us kernel inside 112 ms of CUDA calls"),
    "host_starved": (scenario_host_starved, "graph replays of 2 ms separated by 7 ms of host code, no sync"),
    "dp2_late_rank": (scenario_dp2_late_rank,
                      "2-rank data-parallel training; rank 1 starts each gradient all-reduce ~2 ms late after a 5 ms "
                      "log_metrics host range"),
    "data_loader_starved": (scenario_data_loader_starved,
                            "training with num_workers=0: ~25 ms of each ~50 ms step in the DataLoader range, GPU idle"),
    "setup_then_starved": (scenario_setup_then_starved, "2.2 s of start-up (synchronous weight copy, host-only "
                           "stretches, cudaMalloc storm), then host_starved's loop"),
}


# ---------------------------------------------------------------------------
# Writing the nsys schema


class Strings:
    def __init__(self):
        self.ids: dict[str, int] = {}

    def __call__(self, s: str) -> int:
        if s not in self.ids:
            self.ids[s] = len(self.ids) + 1
        return self.ids[s]


SESSION_DDL = """
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT, systemClockNs INTEGER);
CREATE TABLE ANALYSIS_DETAILS (globalVid INTEGER NOT NULL, duration INTEGER NOT NULL, startTime INTEGER NOT NULL,
                               stopTime INTEGER NOT NULL);
"""  # the DDL of a real 2026.1 export (TARGET_INFO_SESSION_START_TIME, ANALYSIS_DETAILS)


def write_nsys(path: Path, ranks: list[Rank], scenario: str, session_start_ns: int | None = None,
               gpu: tuple[str, int] = ("NVIDIA H100 80GB HBM3", 85520809984)) -> None:
    """The ranks as an nsys SQLite export; ``gpu``: the (name, memory bytes) every device reports."""
    if path.exists():
        path.unlink()
    db = sqlite3.connect(path)
    db.executescript(SCHEMA.read_text())
    if not any(r.kernels for r in ranks) and any(r.memsets for r in ranks):
        db.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")  # a capture with no kernel table at all
    uses_graphs = any(r.graphs for r in ranks)
    if uses_graphs:
        db.execute(GRAPH_TRACE_DDL)
    sid = Strings()
    meta_export = [("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"), ("EXPORT_PRODUCT_VERSION", "2026.1.1.204"),
                   ("EXPORT_SCHEMA_VERSION", "3.24.14"), ("TRACETRIAGE_GENERATED", scenario)]
    db.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", meta_export)
    db.executemany("INSERT INTO META_DATA_CAPTURE VALUES (?, ?)", [
        ("CUDA_GRAPH_TRACE_OPTIONS:MODE", "Graph"), ("PROCESS_0:COMMAND", "python3"),
    ])
    for r in ranks:
        db.execute("INSERT INTO PROCESSES VALUES (?, ?, ?)", (r.gpid, r.pid, r.command))
        db.execute("INSERT INTO ThreadNames VALUES (?, ?, ?)", (sid("python3"), 0, r.gtid))
        db.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?, ?, ?, 1, NULL, ?, ?, ?, 0, ?, NULL, 2)",
            [(s, e, r.device, r.stream, c, r.gpid, b) for s, e, c, b in r.memsets],
        )
        k_rows = [
            (s, e, r.device, 1, None, r.stream, c, r.gpid, sid(n), sid(r.short_names.get(n, n)), None, 0, 0, 32, 1, 1, 1, 128,
             1, 1, 0, 0, 0, 0, c, 0, None, None, None, None, None, None, None, None, None, None, None, None, None)
            for s, e, n, c, _ in r.kernels
        ]
        if k_rows:
            db.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({','.join('?' * 39)})", k_rows)
        db.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, ?, 0, NULL)",
            [(s, e, r.gtid, c, sid(n)) for s, e, n, c in r.api],
        )
        db.executemany(
            f"INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES ({','.join('?' * 21)})",
            [(s, e, r.device, 1, None, r.stream, c, r.gpid, b, ck, None, sk, dk, r.device, 1, None, None, None, None, None, 1)
             for s, e, c, b, ck, sk, dk in r.copies],
        )
        db.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (?, ?, ?, 1, NULL, ?, ?, ?, NULL, ?, 0, NULL)",
            [(s, e, r.device, r.stream, c, r.gpid, st) for s, e, c, st in r.syncs],
        )
        if r.graphs:
            db.executemany(
                "INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE VALUES (?, ?, ?, 1, NULL, ?, ?, ?, ?, ?)",
                [(s, e, r.device, r.stream, c, r.gpid, g, g) for s, e, c, g in r.graphs],
            )
        if r.nvtx or r.host_ranges:
            db.executemany(
                "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES (?, ?, 59, ?, ?, 0)",
                [(s, e, text, r.gtid) for s, e, text in sorted(r.nvtx + r.host_ranges)],
            )
    db.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in sid.ids.items()])
    for r in ranks:
        db.execute("INSERT INTO TARGET_INFO_CUDA_DEVICE (gpuId, cudaId, pid, uuid, numMultiprocessors) VALUES (?, ?, ?, ?, 132)",
                   (r.device, r.device, r.pid, f"GPU-0000000{r.device}"))
    for dev in sorted({r.device for r in ranks}):
        db.execute("INSERT INTO TARGET_INFO_GPU (vmId, id, name, uuid, smCount, totalMemory, cuDevice) "
                   "VALUES (0, ?, ?, ?, 132, ?, ?)",
                   (dev, gpu[0], f"GPU-0000000{dev}", gpu[1], dev))
    if session_start_ns is not None:  # the capture's wall-clock start, as nsys records it
        import datetime

        db.executescript(SESSION_DDL)
        end = max((e for r in ranks for _, e in r.busy_intervals()), default=0) + 1_000_000
        utc = datetime.datetime.fromtimestamp(session_start_ns / 1e9, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        db.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, ?, ?, 0)", (session_start_ns, utc, utc))
        db.execute("INSERT INTO ANALYSIS_DETAILS VALUES (281474976710656, ?, 0, ?)", (end, end))
    db.commit()
    db.execute("VACUUM")
    db.close()


ROCPD_SCHEMA = HERE / "rocpd_schema.sql"
_HIP_NAMES = {
    "cudaLaunchKernel": "hipLaunchKernel", "cudaGraphLaunch": "hipGraphLaunch", "cudaMemcpyAsync": "hipMemcpyAsync",
    "cudaStreamSynchronize": "hipStreamSynchronize", "cudaEventSynchronize": "hipEventSynchronize",
}
GRAPH_NODES_ROCPD = 8  # a graph replay is written as this many back-to-back dispatches


def write_rocpd(path: Path, rank: Rank, scenario: str) -> None:
    """One process's rocprofv3 rocpd (schema 3) database, DDL from ``rocpd_schema.sql``.

    The same simulated intervals as the nsys writer: HIP API regions (cuda* names
    mapped to hip*), kernel dispatches linked to their launch region through
    ``rocpd_event.stack_id``, memory copies, roctx ranges as MARKER_CORE_API regions.
    A CUDA-graph replay becomes GRAPH_NODES_ROCPD back-to-back dispatches launched by
    ``hipGraphLaunch`` (rocprofv3 traces graph kernels individually). NCCL kernels
    become generically named RCCL kernels launched by ``hipExtLaunchKernel`` inside an
    ``ncclAllReduce`` region.
    """
    if path.exists():
        path.unlink()
    uuid = f"{rank.pid:08x}_7a11_7b22_8c33_{rank.device:012x}"
    guid = uuid.replace("_", "-")
    db = sqlite3.connect(path)
    db.executescript(ROCPD_SCHEMA.read_text().replace("{uuid}", uuid).replace("{guid}", guid))
    t = lambda base: f"{base}_{uuid}"  # noqa: E731
    db.executemany(f"INSERT INTO {t('rocpd_metadata')} (tag, value) VALUES (?, ?)",
                   [("schema_version", "3"), ("uuid", "_" + uuid), ("guid", guid), ("tracetriage_generated", scenario)])
    strings: dict[str, int] = {}

    def sid(text):
        if text not in strings:
            strings[text] = len(strings) + 1
        return strings[text]

    db.execute(f"INSERT INTO {t('rocpd_info_node')} (id, guid, hash, machine_id, hostname) "
               "VALUES (1, ?, 1, 'node', 'gpu-node-01')", (guid,))
    db.execute(f"INSERT INTO {t('rocpd_info_process')} (id, guid, nid, pid, command) VALUES (1, ?, 1, ?, ?)",
               (guid, rank.pid, rank.command))
    db.execute(f"INSERT INTO {t('rocpd_info_thread')} (id, guid, nid, pid, tid, name) VALUES (1, ?, 1, 1, ?, 'python3')",
               (guid, rank.pid))
    agents = [(i, "CPU", i, i, i, "AMD EPYC 9654", "AMD EPYC 9654") for i in range(2)] + [
        (2 + g, "GPU", 2 + g, 2 + g, g, "gfx942", "AMD Instinct MI300X") for g in range(8)]
    db.executemany(f"INSERT INTO {t('rocpd_info_agent')} "
                   "(id, guid, nid, pid, type, absolute_index, logical_index, type_index, name, product_name) "
                   "VALUES (?, ?, 1, 1, ?, ?, ?, ?, ?, ?)",
                   [(a[0], guid, a[1], a[2], a[3], a[4], a[5], a[6]) for a in agents])
    db.execute(f"INSERT INTO {t('rocpd_info_queue')} (id, guid, nid, pid, name) VALUES (1, ?, 1, 1, 'HIP queue')", (guid,))
    db.execute(f"INSERT INTO {t('rocpd_info_stream')} (id, guid, nid, pid, name) VALUES (1, ?, 1, 1, 'stream 0')", (guid,))
    db.execute(f"INSERT INTO {t('rocpd_info_code_object')} (id, guid, nid, pid, agent_id, uri) "
               "VALUES (1, ?, 1, 1, ?, 'memory://model')", (guid, 2 + rank.device))
    symbols: dict[str, int] = {}
    events, regions, dispatches, copies = [], [], [], []
    gpu_agent = 2 + rank.device
    by_corr = {c: (s, e, n) for s, e, n, c in rank.api}
    region_of = {}

    def region(start, end, name, category, parent=-1):
        rid = len(regions) + 1
        eid = len(events) + 1
        events.append((eid, guid, sid(category), rid, parent if parent >= 0 else None, 0))
        regions.append((rid, guid, 1, 1, 1, start, end, sid(name), eid))
        return rid

    for s_, e_, n_, c_ in rank.api:
        base = re.sub(r"_v\d+$", "", n_)
        region_of[c_] = region(s_, e_, _HIP_NAMES.get(base, base), "HIP_RUNTIME_API_EXT")
    for s_, e_, text in rank.nvtx:
        region(s_, e_, text, "MARKER_CORE_API")

    def dispatch(start, end, name, launch_region):
        if name not in symbols:
            symbols[name] = len(symbols) + 1
        eid = len(events) + 1
        events.append((eid, guid, sid("KERNEL_DISPATCH"), launch_region, None, 0))
        dispatches.append((len(dispatches) + 1, guid, 1, 1, 1, gpu_agent, symbols[name], len(dispatches) + 1, 1, 1,
                           start, end, 0, 0, 256, 1, 1, 1024, 1, 1, sid(name), eid))

    for s_, e_, n_, c_, col in rank.kernels:
        launch = region_of[c_]
        if col:  # RCCL: the collective call wraps the launch, the kernel is named generically
            ls, le, _ = by_corr[c_]
            outer = region(ls - 1_000, le + 1_000, "ncclAllReduce", "RCCL_API")
            events[regions[launch - 1][8] - 1] = events[regions[launch - 1][8] - 1][:4] + (outer, 0)
            regions[launch - 1] = regions[launch - 1][:7] + (sid("hipExtLaunchKernel"),) + regions[launch - 1][8:]
            dispatch(s_, e_, "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", launch)
        else:
            dispatch(s_, e_, n_, launch)
    for s_, e_, c_, g_ in rank.graphs:
        step = (e_ - s_) // GRAPH_NODES_ROCPD
        for k in range(GRAPH_NODES_ROCPD):
            ks = s_ + k * step
            dispatch(ks, e_ if k == GRAPH_NODES_ROCPD - 1 else ks + step, f"graph{g_}_node{k}_kernel", region_of[c_])
    for s_, e_, c_, b_, ck, sk, dk in rank.copies:
        eid = len(events) + 1
        events.append((eid, guid, sid("MEMORY_COPY"), region_of[c_], None, 0))
        copies.append((len(copies) + 1, guid, 1, 1, 1, s_, e_, sid("MEMORY_COPY_DEVICE_TO_HOST"), 0, 0, gpu_agent, 0, b_, 1, 1,
                       eid))
    db.executemany(f"INSERT INTO {t('rocpd_info_kernel_symbol')} "
                   "(id, guid, nid, pid, code_object_id, kernel_name, display_name) VALUES (?, ?, 1, 1, 1, ?, ?)",
                   [(i, guid, n, n) for n, i in symbols.items()])
    db.executemany(f"INSERT INTO {t('rocpd_string')} (id, guid, string) VALUES (?, ?, ?)",
                   [(i, guid, s2) for s2, i in strings.items()])
    db.executemany(f"INSERT INTO {t('rocpd_event')} (id, guid, category_id, stack_id, parent_stack_id, correlation_id) "
                   "VALUES (?, ?, ?, ?, ?, ?)", events)
    db.executemany(f"INSERT INTO {t('rocpd_region')} (id, guid, nid, pid, tid, start, end, name_id, event_id) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", regions)
    db.executemany(f"INSERT INTO {t('rocpd_kernel_dispatch')} "
                   "(id, guid, nid, pid, tid, agent_id, kernel_id, dispatch_id, queue_id, stream_id, start, end, "
                   "private_segment_size, group_segment_size, workgroup_size_x, workgroup_size_y, workgroup_size_z, "
                   "grid_size_x, grid_size_y, grid_size_z, region_name_id, event_id) "
                   f"VALUES ({','.join('?' * 22)})", dispatches)
    db.executemany(f"INSERT INTO {t('rocpd_memory_copy')} "
                   "(id, guid, nid, pid, tid, start, end, name_id, dst_agent_id, dst_address, src_agent_id, src_address, "
                   "size, queue_id, stream_id, event_id) "
                   f"VALUES ({','.join('?' * 16)})", copies)
    db.commit()
    db.execute("VACUUM")
    db.close()


def simulate(only: list[str] | None, seed: int):
    """Each selected scenario simulated once: (name, description, ranks, extra)."""
    for name, (fn, description) in SCENARIOS.items():
        if only and name not in only:
            continue
        ranks, extra = fn(random.Random(f"{seed}:{name}"))
        yield name, description, ranks, extra


def generate_rocpd(out: Path, only: list[str] | None = None, seed: int = 7) -> list[Path]:
    """The same scenarios as rocpd databases, one ``<pid>_results.db`` per process."""
    made = []
    for name, _description, ranks, _extra in simulate(only, seed):
        bundle = out / f"{name}_rocpd"
        bundle.mkdir(parents=True, exist_ok=True)
        for r in ranks:
            write_rocpd(bundle / f"{r.pid}_results.db", r, name)
        made.append(bundle)
    return made


def overlap(spans, intervals) -> int:
    """Total length of ``spans`` (disjoint) covered by the union of ``intervals``."""
    return sum(merge(clip_all(intervals, s, e)) for s, e in spans)


def blocked_truth(rank: Rank, calls: tuple[str, ...], lo: int, hi: int) -> dict:
    """What the host's blocking calls (``calls``: API names) cost the GPU in [lo, hi): the idle inside
    them (host blocked, GPU idle), and the idle gaps in which one returns (its end in [lo, hi]), split
    into the part inside any CUDA call and the host code (the GPU idle while the host is in no call),
    each % of the window. From the generated intervals."""
    busy = clip_all(rank.busy_intervals(), lo, hi)
    blocking = [(s, e) for s, e, name, _ in rank.api if name in calls]
    inside = clip_all(blocking, lo, hi)
    idle_inside = sum(e - s for s, e in inside) - overlap(inside, busy)
    gaps = set()
    for _, end in blocking:
        if not lo <= end <= hi or any(s < end < e for s, e in busy):
            continue  # outside the window, or the GPU is busy as the call returns
        start = max([e for _, e in busy if e <= end], default=lo)
        stop = min([s for s, _ in busy if s >= end], default=hi)
        if stop > start:
            gaps.add((start, stop))
    gaps = sorted(gaps)
    calls_all = clip_all([(s, e) for s, e, *_ in rank.api], lo, hi)
    after = sum(e - s for s, e in gaps)
    host_after = after - overlap(gaps, calls_all)
    window = hi - lo
    return {"calls": list(calls), "idle_inside_pct": 100.0 * idle_inside / window, "after_idle_pct": 100.0 * after / window,
            "after_host_pct": 100.0 * host_after / window, "gaps_after": len(gaps)}


def truth_for(ranks: list[Rank], extra: dict, scenario: str, description: str) -> dict:
    """Ground truth from the generated intervals, over the steady-state window.

    Steps are what tracetriage should find: NVTX ranges when written, else the spans
    between consecutive blocking syncs, else between consecutive graph launches;
    ``extra['warmup_steps']`` leading steps are warm-up. A scenario that generated a set-up
    (``extra['steady_from_ns']``, ``extra['setup_ns']``) has its steps inferred within the steady
    phase only, from where the loop starts; its truth carries the set-up's length.
    """
    warm = extra["warmup_steps"]
    per_rank_steps = []
    for r in ranks:
        if r.nvtx:
            bounds = [(s, e) for s, e, _ in r.nvtx][warm:]
        elif r.syncs:
            ends = sorted(e for s, e, *_ in r.syncs)
            # the first warm-up step ends at the first sync: it is not a sync-to-sync step
            bounds = list(zip(ends[:-1], ends[1:]))[max(0, warm - 1):]
        else:
            starts = sorted(s for s, *_ in r.graphs)
            bounds = list(zip(starts[:-1], starts[1:]))
        per_rank_steps.append(bounds)
    if "steady_from_ns" in extra:  # a generated set-up: steps are inferred within the steady phase, after it
        per_rank_steps = [[b for b in bounds if b[0] >= extra["steady_from_ns"]] for bounds in per_rank_steps]
    if all(per_rank_steps):
        lo = min(b[0][0] for b in per_rank_steps)
        hi = max(b[-1][1] for b in per_rank_steps)
    else:  # no steps: the window is first to last GPU activity, after the set-up the scenario generated
        spans = [iv for r in ranks for iv in r.busy_intervals()]
        lo, hi = extra.get("steady_from_ns") or min(s for s, _ in spans), max(e for _, e in spans)
        per_rank_steps = [[] for _ in ranks]
    devices = []
    for r in ranks:
        busy = merge(clip_all(r.busy_intervals(), lo, hi))
        coll = merge(clip_all([(s, e) for s, e, n, c, col in r.kernels if col], lo, hi))
        devices.append({
            "pid": r.pid,
            "device": r.device,
            "busy_pct": 100.0 * busy / (hi - lo),
            "collective_share_pct": 100.0 * coll / (hi - lo),
            "copy_only_pct": 100.0 * r.copy_only_ns(lo, hi) / (hi - lo),
            "idle_pct": 100.0 - 100.0 * busy / (hi - lo),
        })
    steps = per_rank_steps[0]
    durations = sorted(e - s for s, e in steps) or [None]
    blocking = {"blocking": blocked_truth(ranks[0], extra["blocking_calls"], lo, hi)} if extra.get("blocking_calls") else {}
    idle_in_ranges = {}  # the GPU idle time under each non-step NVTX range (they do not nest here)
    for r in ranks:
        busy = sorted(clip_all(r.busy_intervals(), lo, hi))
        for s, e, text in r.host_ranges:
            s, e = max(s, lo), min(e, hi)
            if e > s:
                covered = merge([(max(bs, s), min(be, e)) for bs, be in busy if be > s and bs < e])
                idle_in_ranges[text] = idle_in_ranges.get(text, 0) + (e - s) - covered
    return {
        "scenario": scenario,
        "description": description,
        "window": {"start_ns": lo, "end_ns": hi},
        "devices": devices,
        "processes": len(ranks),
        "steps": len(steps),
        "step_p50_ns": durations[len(durations) // 2],
        "launches_per_step": extra["launches_per_step"],
        "graph_launches_per_step": extra["graph_launches_per_step"],
        "syncs_per_step": extra["syncs_per_step"],
        "kernels": sum(len(r.kernels) for r in ranks),
        "memsets": sum(len(r.memsets) for r in ranks),
        "graph_replays": sum(len(r.graphs) for r in ranks),
        "api_calls": sum(len(r.api) for r in ranks),
        "nvtx_ranges": sum(len(r.nvtx) + len(r.host_ranges) for r in ranks),
        **({"idle_by_host_range": {text: {"idle_ns": ns, "pct_of_window": 100.0 * ns / (hi - lo)}
                                   for text, ns in idle_in_ranges.items()}} if idle_in_ranges else {}),
        "tolerances": {"busy_pct": 1.0, "collective_share_pct": 1.0, "steps": 1},
        **blocking,

        **({"setup_ns": extra["setup_ns"]} if "setup_ns" in extra else {}),
    }


def topo_two_islands() -> str:
    """``nvidia-smi topo -m`` of an 8-GPU node made of two NV18 islands joined by SYS."""
    gpus = [f"GPU{i}" for i in range(8)]
    lines = ["\t" + "\t".join(gpus) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    for a in range(8):
        cells = [" X " if a == b else ("NV18" if a // 4 == b // 4 else "SYS") for b in range(8)]
        cpus, node = ("0-47,96-143", 0) if a < 4 else ("48-95,144-191", 1)
        lines.append(f"GPU{a}\t" + "\t".join(cells) + f"\t{cpus}\t{node}\t\tN/A")
    lines += ["", "Legend:", "", "  X    = Self",
              "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
              "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
              "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
              "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
              "  PIX  = Connection traversing at most a single PCIe bridge",
              "  NV#  = Connection traversing a bonded set of # NVLinks", ""]
    return "\n".join(lines)


def nccl_log(n: int, pids: list[int]) -> str:
    """NCCL_DEBUG=INFO init of one communicator over GPUs 0..n-1 of the two-island node,
    ring 0..n-1: hops inside an island use P2P/CUMEM, hops between islands SHM."""
    host = "gpu-node-01"
    comm_id = "0x5f1e2d3c4b5a6978"
    out = [f"{host}:{pids[0]}:{pids[0]} [0] NCCL INFO NCCL version 2.21.5+cuda12.4"]
    for r in range(n):
        out.append(f"{host}:{pids[r]}:{pids[r] + 100} [{r}] NCCL INFO ncclCommInitRank comm 0x55d0{r:04x}a0 rank {r} "
                   f"nranks {n} cudaDev {r} nvmlDev {r} busId {r + 1}8000 commId {comm_id} - Init START")
    for r in range(n):
        out.append(f"{host}:{pids[r]}:{pids[r] + 100} [{r}] NCCL INFO comm 0x55d0{r:04x}a0 rank {r} nRanks {n} nNodes 1 "
                   f"localRanks {n} localRank {r} MNNVL 0")
    out.append(f"{host}:{pids[0]}:{pids[0] + 100} [0] NCCL INFO Channel 00/02 : " + " ".join(str(i) for i in range(n)))
    for ch in range(2):
        for r in range(n):
            nxt = (r + 1) % n
            via = "P2P/CUMEM" if r // 4 == nxt // 4 else "SHM/direct/direct"
            out.append(f"{host}:{pids[r]}:{pids[r] + 101} [{r}] NCCL INFO Channel {ch:02d}/0 : "
                       f"{r}[{r}] -> {nxt}[{nxt}] via {via}")
    for r in range(n):
        out.append(f"{host}:{pids[r]}:{pids[r] + 100} [{r}] NCCL INFO ncclCommInitRank comm 0x55d0{r:04x}a0 rank {r} "
                   f"nranks {n} cudaDev {r} nvmlDev {r} busId {r + 1}8000 commId {comm_id} - Init COMPLETE")
    return "\n".join(out) + "\n"


def scenario_nightly_decode(rng, eager=False, host_outlier=False):
    """One night of a nightly decode benchmark: 30 decode steps of 200 kernels, each step read
    back by a sync (the sampled tokens) and followed by ~50 us of host work. In CUDA graphs
    (the healthy nights) a step is one replay; ``eager`` launches the 200 kernels one by one
    (launch-bound: the regression); ``host_outlier`` adds ~1 ms of Python after each read-back
    (a one-night host stall: an outlier)."""
    r = Rank(pid=4300, device=0)
    per_step = 200
    for step in range(32):
        if step < 2 or eager:
            if step < 2:
                r.host(3_000 * US)
            for name, dur in _decode_kernels(rng, per_step):
                r.host(int(rng.uniform(1.0, 2.0) * US))
                r.launch(name, dur)
        else:
            r.host(int(rng.uniform(20, 30) * US))
            r.graph_launch(sum(d for _, d in _decode_kernels(rng, per_step)) + per_step * 300)
        r.dtoh_sync(nbytes=8 * 32)
        r.host(int(rng.uniform(40, 60) * US) + (int(rng.uniform(900, 1100) * US) if host_outlier else 0))
    return [r], {"launches_per_step": per_step if eager else 0, "graph_launches_per_step": 0 if eager else 1,
                 "syncs_per_step": 1, "warmup_steps": 2}


MICROBENCH_KERNELS = (("gemm_bf16_tn_kernel", 400 * US), ("softmax_warp_kernel", 80 * US), ("layer_norm_fwd_kernel", 50 * US))


def scenario_microbench(rng, faster: str | None = None, factor: float = 2.0, iterations: int = 120):
    """A micro-benchmark loop without steps (no NVTX, no sync until the end, no graphs): each
    iteration ~600 us of host work (input preparation) and the three kernels of
    :data:`MICROBENCH_KERNELS`, each call's duration within 5% of its nominal; kernel ``faster``
    runs ``factor`` times faster. The host paces the loop, so a faster kernel leaves the GPU idle
    longer: busy % falls while the work got faster."""
    r = Rank(pid=5120, device=0)
    for _ in range(iterations):
        r.host(int(rng.uniform(580, 620) * US))
        for name, nominal in MICROBENCH_KERNELS:
            duration = nominal / (factor if name == faster else 1.0)
            r.launch(name, int(duration * rng.uniform(0.95, 1.05)))
    r.api_call("cudaDeviceSynchronize_v3020", 50 * US)
    return [r], {"launches_per_step": None, "graph_launches_per_step": None, "syncs_per_step": None, "warmup_steps": 0}


TEARDOWN_KERNELS = ("checksum_kernel", "final_reduce_kernel", "checksum_kernel")


def scenario_loop_then_teardown(rng, iterations: int = 120, final_kernels: tuple = TEARDOWN_KERNELS):
    """:func:`scenario_microbench`'s step-less loop, then a tear-down that runs kernels: a synchronize, a
    ~600 ms host-only stretch (results written out), 30 cudaFree calls of ~5 ms (the GPU idle inside them),
    then a handful of kernels the loop never ran (``final_kernels``: a checksum, a final reduction) and a
    4 kB read-back. The truth: the loop's last kernel ends at ``steady_to_ns``, the rest of the GPU activity
    lasts ``teardown_ns`` with ``teardown_frees`` allocator calls in it (the loop's own kernels as
    ``final_kernels`` make the end a slow last iteration instead)."""
    ranks, extra = scenario_microbench(rng, iterations=iterations)
    r = ranks[0]
    steady_to = max(end for _, end, *_ in r.kernels)
    r.host(int(rng.uniform(590_000, 610_000) * US))
    for _ in range(30):
        r.api_call("cudaFree_v3020", int(rng.uniform(4_500, 5_500) * US))
    for name in final_kernels:
        r.host(30 * US)
        r.launch(name, 60 * US)
    r.dtoh_sync(nbytes=4096)
    gpu_end = max(end for _, end in r.busy_intervals())
    return ranks, {**extra, "steady_to_ns": steady_to, "teardown_ns": gpu_end - steady_to, "teardown_frees": 30}


def generate_microbench_pair(out: Path, faster: str = MICROBENCH_KERNELS[0][0], factor: float = 2.0,
                             seed: int = 7) -> tuple[Path, Path]:
    """``out/microbench_before/trace.sqlite`` and ``out/microbench_after/trace.sqlite``: the loop of
    :func:`scenario_microbench`, after with ``faster`` ``factor`` times faster, each from its own seed.
    The truth (``out/microbench_truth.json``), from the generated calls: each kernel's mean ns per
    call and each side's busy % of its GPU-activity window."""
    out.mkdir(parents=True, exist_ok=True)
    truth = {"faster": faster, "factor": factor}
    made = []
    for side, speed_up in (("before", None), ("after", faster)):
        ranks, extra = scenario_microbench(random.Random(f"{seed}:microbench:{side}"), faster=speed_up, factor=factor)
        bundle = out / f"microbench_{side}"
        bundle.mkdir(exist_ok=True)
        write_nsys(bundle / "trace.sqlite", ranks, f"microbench_{side}")
        calls: dict[str, list[int]] = {}
        for start, end, name, *_ in ranks[0].kernels:
            calls.setdefault(name, []).append(end - start)
        truth[side] = {"ns_per_call": {name: sum(durations) / len(durations) for name, durations in calls.items()},
                       "calls": {name: len(durations) for name, durations in calls.items()},
                       "busy_pct": truth_for(ranks, extra, f"microbench_{side}", "")["devices"][0]["busy_pct"]}
        made.append(bundle)
    (out / "microbench_truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return made[0], made[1]


NIGHT0_NS = 1_793_491_200 * 10**9  # 2026-11-01T00:00:00Z
DAY_NS = 86_400 * 10**9


def generate_nightly(out: Path, nights: int = 20, switch_at: int | None = 13, outlier_at: int | None = 6,
                     seed: int = 7) -> list[Path]:
    """A nightly benchmark archive: ``nightly-YYYY-MM-DD/trace.sqlite`` for nights 1..N, each
    from its own seed, the capture time (03:00 UTC that night) in the export's session table.
    Nights from ``switch_at`` on run eager (CUDA graphs lost: the regression), night
    ``outlier_at`` alone carries a host stall after each read-back. The truth of the series
    goes to ``series_truth.json`` beside the nights (not inside a case)."""
    import datetime

    out.mkdir(parents=True, exist_ok=True)
    made, truth = [], {"nights": [], "switch_at": switch_at, "outlier_at": outlier_at}
    for night in range(1, nights + 1):
        start = NIGHT0_NS + (night - 1) * DAY_NS + 3 * 3600 * 10**9
        day = datetime.datetime.fromtimestamp(start / 1e9, datetime.timezone.utc).strftime("%Y-%m-%d")
        eager = switch_at is not None and night >= switch_at
        ranks, extra = scenario_nightly_decode(random.Random(f"{seed}:night:{night}"), eager=eager,
                                               host_outlier=night == outlier_at)
        bundle = out / f"nightly-{day}"
        bundle.mkdir(exist_ok=True)
        write_nsys(bundle / "trace.sqlite", ranks, "nightly_decode", session_start_ns=start)
        steps = truth_for(ranks, extra, "nightly_decode", "")
        truth["nights"].append({"night": night, "name": bundle.name, "capture_start_ns": start, "eager": eager,
                                "outlier": night == outlier_at, "step_p50_ns": steps["step_p50_ns"]})
        made.append(bundle)
    (out / "series_truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return made


def generate_serving_case(out: Path, name: str, seed: int = 7) -> tuple[Path, dict]:
    """One serving case of samples/serving_cases.py (``deployment_sweeps``, ``sglang_queue_<n>_<trend>``)
    into ``out/<name>/``, from its own seed; returns the case folder and its truth (also written to
    ``out/<name>_truth.json``, outside the case)."""
    import sys

    sys.path.insert(0, str(HERE))
    try:
        import serving_cases
    finally:
        sys.path.remove(str(HERE))
    return serving_cases.write_case(Path(out), name, random.Random(f"{seed}:{name}"))


SIDE_ARTIFACTS = {
    "tp8_cross_island": {"topo.txt": lambda: topo_two_islands(), "nccl.log": lambda: nccl_log(8, [5000 + i for i in range(8)])},
    "tp4_island": {"topo.txt": lambda: topo_two_islands(), "nccl.log": lambda: nccl_log(4, [5000 + i for i in range(4)])},
}


def generate(out: Path, only: list[str] | None = None, seed: int = 7, truth_dir: Path | None = None) -> list[Path]:
    """Each scenario into ``out/<name>/``; its truth into ``truth_dir/<name>.json`` (default
    ``out/../truth``): the generator's truth is not part of the capture, so it stays out of
    the bundle (a report listed it as a skipped input)."""
    truth_dir = Path(truth_dir) if truth_dir is not None else Path(out).parent / "truth"
    truth_dir.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    made = []
    for name, description, ranks, extra in simulate(only, seed):
        bundle = out / name
        bundle.mkdir(exist_ok=True)
        write_nsys(bundle / "trace.sqlite", ranks, name)
        for fname, make in SIDE_ARTIFACTS.get(name, {}).items():
            (bundle / fname).write_text(make())
        for fname, text in extra.pop("side", {}).items():
            (bundle / fname).write_text(text)
        truth = truth_for(ranks, extra, name, description)
        if "pyspy_truth" in extra:
            truth["pyspy"] = extra["pyspy_truth"]
        if "skew_truth" in extra:
            truth["skew"] = extra["skew_truth"]
        if name in SIDE_ARTIFACTS:
            truth["islands"] = [[0, 1, 2, 3], [4, 5, 6, 7]]
            truth["crosses_islands"] = len({r.device // 4 for r in ranks}) > 1
        (truth_dir / f"{name}.json").write_text(json.dumps(truth, indent=2) + "\n")
        made.append(bundle)
    return made


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=HERE / "bundles", metavar="DIR",
                    help="folder the bundles are written into (default: samples/bundles next to this script; the "
                         "truth goes to truth/ beside it)")
    ap.add_argument("--only", nargs="*", metavar="NAME", help="write only these bundles (default: every scenario)")
    ap.add_argument("--seed", type=int, default=7, help="random seed of the simulated jitter (default: %(default)s)")
    ap.add_argument("--rocpd", action="store_true", help="write rocprofv3 rocpd databases instead of nsys exports")
    ap.add_argument("--serving", action="store_true", help="write the serving bundles (log + scrape + benchmark result)")
    ap.add_argument("--nightly", type=int, metavar="N", help="write a nightly archive of N captures (trend's sample): "
                    "eager from --switch-at on, a host-stall outlier at --outlier-at")
    ap.add_argument("--switch-at", type=int, default=13, metavar="K",
                    help="first eager night of --nightly, 2..N (0: no switch; default: %(default)s)")
    ap.add_argument("--outlier-at", type=int, default=6, metavar="K",
                    help="the night with a one-off host stall, 1..N (0: none; default: %(default)s)")
    ap.add_argument("--microbench", action="store_true",
                    help="write a step-less micro-benchmark pair (compare's work-rate sample): microbench_before and "
                         "microbench_after, whose GEMM kernel runs 2x faster, with microbench_truth.json")
    args = ap.parse_args(argv)
    if args.nightly is not None:
        if args.nightly < 1:
            ap.error(f"--nightly {args.nightly}: the archive needs at least one night")
        # nights are 1..N; a switch on night 1 (or after N) leaves no night before or after it: no regression to find
        if args.switch_at and not 2 <= args.switch_at <= args.nightly:
            ap.error(f"--switch-at {args.switch_at} with --nightly {args.nightly} (nights 1 to {args.nightly}) gives no "
                     f"regression: pass --switch-at between 2 and {args.nightly}, or 0 for none")
        if args.outlier_at and not 1 <= args.outlier_at <= args.nightly:
            ap.error(f"--outlier-at {args.outlier_at} is not a night of --nightly {args.nightly}: pass it between 1 and "
                     f"{args.nightly}, or 0 for none")
    if args.microbench:
        made = list(generate_microbench_pair(args.out, seed=args.seed))
    elif args.nightly:
        made = generate_nightly(args.out, args.nightly, args.switch_at or None, args.outlier_at or None, args.seed)
    elif args.serving:
        from serving_scenarios import generate_serving

        made = generate_serving(args.out, args.only, args.seed)
    else:
        made = (generate_rocpd if args.rocpd else generate)(args.out, args.only, args.seed)
    for b in made:
        print(b)


if __name__ == "__main__":
    main()
