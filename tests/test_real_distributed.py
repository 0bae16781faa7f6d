"""Real distributed captures from the wild (issue 32, item 5: collectives by workload), copied into
samples/real/kineto with provenance (SOURCES.md), and the collective rules they pin, on a trace built here.

- tracelens_mi300_ddp8_resnet_act_checkpoint: DDP training on 8 MI300X (RCCL's kernels are all named
  ``ncclDevKernel_Generic``; PyTorch records the call on each kernel as ``args["Collective name"]``).
- tracelens_b200_vllm_tp8_eager_prefill: one eager vLLM prefill step with TP=8 on B200, whose all-reduce is
  PyTorch's symmetric-memory ``multimem_all_reduce_kernel``.
- hta_torchrec_16rank_train_rank0: rank 0 of a 16-rank TorchRec training job, whose GPU waits with its work
  queued on a dependency the rank's trace does not show (the dependency_wait finding, not its pageable copy).

Every figure the tests hold the tool to is measured here from the raw JSON."""

import gzip
import json

import pytest
from conftest import real

from tracetriage import analyze, open_case
from tracetriage.model import collective_of_call, collective_op


def _events(path):
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def _union_pct(spans, lo, hi) -> float:
    """Union of (start ns, end ns) clipped to [lo, hi), % of the window (plain Python)."""
    total, cur = 0, None
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in spans if min(e, hi) > max(s, lo)):
        if cur is None or s > cur[1]:
            total += (cur[1] - cur[0]) if cur else 0
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    total += (cur[1] - cur[0]) if cur else 0
    return 100.0 * total / (hi - lo)


def _ns(event):
    return round(event["ts"] * 1000), round((event["ts"] + event["dur"]) * 1000)


def _finding(data, finding_id):
    return next((finding for finding in data["findings"] if finding["id"] == finding_id), None)


def _evidence(finding, name):
    return next(row["value"] for row in finding["evidence"] if row["name"] == name)


# --- the names ------------------------------------------------------------------------------------

@pytest.mark.parametrize("call,op", [("allreduce", "AllReduce"), ("allreduce_coalesced", "AllReduce"),
                                     ("_allgather_base", "AllGather"), ("all_gather_into_tensor_coalesced", "AllGather"),
                                     ("_reduce_scatter_base", "ReduceScatter"), ("reduce_scatter_tensor_coalesced",
                                                                                 "ReduceScatter"),
                                     ("all_to_allv", "AllToAll"), ("alltoall_base", "AllToAll"),
                                     ("broadcast", "Broadcast"), ("send", "SendRecv"), ("recv", "SendRecv"),
                                     ("reduce", "Reduce"), ("barrier", None), ("gather", None)])
def test_c10d_call_names(call, op):
    assert collective_of_call(call) == op


def test_symmetric_memory_all_reduce_kernels_are_all_reduce():
    name = "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long)"
    assert collective_op(name) == "AllReduce" and collective_op("multimem_one_shot_all_reduce_kernel") == "AllReduce"
    assert collective_op("vectorized_elementwise_kernel") is None


# --- a built trace: generic kernels take the op of the call recorded on them -----------------------

def _generic_kineto(path, kernels, ops=()):
    """A Kineto trace on one stream: (start µs, dur µs, name, Collective name or None) per kernel, a launch each,
    two ProfilerStep ranges around them, and CPU ops (name, start µs, dur µs) on the host thread."""
    events = [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 11, "tid": 11, "ts": 1000.0 + start, "dur": dur,
               "args": {}} for name, start, dur in ops]
    for i, (start, dur, name, call) in enumerate(kernels):
        args = {"device": 0, "stream": 7, "correlation": i + 1, "External id": i + 1}
        if call:
            args["Collective name"] = call
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": 1000.0 + start, "dur": dur,
                       "args": args})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 11, "tid": 11,
                       "ts": 990.0 + start, "dur": 5.0, "args": {"correlation": i + 1, "External id": i + 1}})
    end = max(start + dur for start, dur, *_ in kernels)
    for n, (lo, hi) in enumerate(((0.0, end / 2), (end / 2, end + 1))):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 11, "tid": 11,
                       "ts": 1000.0 + lo, "dur": hi - lo, "args": {}})
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "AMD Instinct MI300X"}], "traceEvents": events}
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def test_generic_kernels_take_the_op_of_their_call(tmp_path):
    generic = "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"
    kernels = [(0.0, 300.0, "gemm_kernel", None), (300.0, 200.0, generic, "allreduce"),
               (500.0, 300.0, "gemm_kernel", None), (800.0, 100.0, generic, "_allgather_base"),
               (900.0, 50.0, generic, None), (950.0, 40.0, "ncclDevKernel_Broadcast_RING_LL", "allreduce")]
    trace = open_case([_generic_kineto(tmp_path / "t.json.gz", kernels)]).traces[0]
    ops = trace.gpu[trace.gpu["kind"] == "kernel"].sort_values("start")["collective"]
    got = [None if op != op else op for op in ops.astype(object)]  # a missing op reads NaN
    # built: the call names the op of a generic kernel; a generic kernel without one stays unknown ("Collective");
    # a kernel whose own name says the op keeps it
    assert got == [None, "AllReduce", None, "AllGather", "Collective", "Broadcast"]


@pytest.mark.parametrize("op,workload", [("vllm::all_reduce", "serving"), ("sglang.srt.layers.radix_attention", "serving"),
                                         ("aten::linear", None), ("my_vllm_helper", None)])
def test_a_trace_without_process_names_is_serving_by_its_engine_ops(tmp_path, op, workload):
    """A PyTorch profiler trace names no process; a serving engine's own ops (vllm::..., sglang.) say what runs."""
    kernels = [(0.0, 300.0, "gemm_kernel", None), (300.0, 200.0, "gemm_kernel", None), (500.0, 300.0, "gemm_kernel", None)]
    path = _generic_kineto(tmp_path / "t.json.gz", kernels, ops=[(op, 250.0, 400.0)])
    assert analyze(open_case([path])).data["capture_kind"]["workload"] == workload


# --- real captures --------------------------------------------------------------------------------

def test_real_mi300_ddp_training_all_reduce_is_read_as_data_parallel():
    """8 x MI300X DDP ResNet training: every RCCL kernel is ncclDevKernel_Generic; the call PyTorch recorded on
    it says allreduce or broadcast. The collectives are the gradient all-reduce of data-parallel training, not
    an op of unknown purpose, in ROCm words. (The first step's all-reduce kernels were launched before the capture
    began and carry no call: their op stays unknown.) The calls that record their message run at ~1% of XGMI's
    bandwidth, so the advice is not DDP's bucket tuning but finding the late rank (tests/test_collective_busbw.py
    measures that bandwidth)."""
    path = real("kineto", "tracelens_mi300_ddp8_resnet_act_checkpoint.json.gz")
    events = _events(path)
    data = analyze(open_case([path])).data
    lo, hi = data["window"]["start_ns"], data["window"]["end_ns"]
    rccl = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel_Generic")]
    by_call = {}
    for e in rccl:
        by_call.setdefault(e["args"].get("Collective name"), []).append(_ns(e))
    by_op = data["devices"][0]["collectives_by_op"]
    assert abs(by_op["AllReduce"] - _union_pct(by_call["allreduce"], lo, hi)) < 0.05, by_op
    assert abs(by_op["Collective"] - _union_pct(by_call[None], lo, hi)) < 0.05, by_op
    found = _finding(data, "collective_dominant")
    assert found is not None and _evidence(found, "collective_workload") == "data_parallel"
    assert "capture every rank" in found["fix"] and "bucket_cap_mb or a faster link would not" in found["fix"]
    texts = " ".join(found[key] for key in ("title", "mechanism", "fix", "confirm", "falsifier"))
    assert "rccl-tests" in texts and not any(word in texts for word in ("nvidia-smi", "nccl-tests", "NVLink", "nsys"))


def test_real_b200_tp8_symmetric_memory_all_reduce_is_a_collective():
    """vLLM TP=8 on B200, one eager prefill step: the all-reduce runs as multimem_all_reduce_kernel (73 calls);
    it was counted as compute, so the capture showed 0.0% collectives. The GPU idles ~86% of the 83 ms window
    with the host inside vLLM's Python between launches (the MoE layer, attention, the all-reduce call):
    host-bound, not communication-bound. Its one step (``execute_context_1(..)``) is read now, so its 768
    launches of a 6.3 µs median kernel are per step, and the verdict is the eager engine's: launch-bound, fixed
    by CUDA graphs (vLLM without --enforce-eager), with the host ranges it idles in listed."""
    path = real("kineto", "tracelens_b200_vllm_tp8_eager_prefill.json.gz")
    events = _events(path)
    data = analyze(open_case([path])).data
    lo, hi = data["window"]["start_ns"], data["window"]["end_ns"]
    multimem = [_ns(e) for e in events if e.get("cat") == "kernel" and "multimem_all_reduce" in e["name"]]
    assert len(multimem) == 73
    device = data["devices"][0]
    assert abs(device["collectives_by_op"]["AllReduce"] - _union_pct(multimem, lo, hi)) < 0.05, device["collectives_by_op"]
    kernels = [_ns(e) for e in events if e.get("cat") == "kernel"]
    assert _union_pct(kernels, lo, hi) < 20  # the GPU computes a small share: host-bound
    top = data["findings"][0]
    assert top["id"] == "launch_bound" and "--enforce-eager" in top["fix"]
    launches = sum(1 for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
                   and e["name"] in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx"))
    assert f"{launches} kernel launches per step" in top["title"]  # one step: every launch of the capture
    assert data["processes"][0]["steps"]["count"] == 1
    assert device["idle_by_host"]["ranges"][0]["pct_of_window"] > 20  # the host ranges stay named
    assert data["capture_kind"]["workload"] == "serving"  # its vllm:: ops say so (no process is named)
    assert "vllm::moe_forward" in [row["name"] for row in device["idle_by_host"]["ranges"][:3]]


def _dependency_ns(events, lo, hi, latency_ns=50_000):
    """GPU idle in [lo, hi) with the work that ends each gap already queued, from the raw JSON in plain Python: a gap
    of the union of the GPU events ends where an operation starts; that operation was queued once its launch call
    (same correlation) had returned, or from the first recorded call on when its correlation is below every
    recorded call's (launched before the capture began); held idle longer than ``latency_ns``, the whole hold
    counts."""
    gpu = sorted((max(_ns(e)[0], lo), min(_ns(e)[1], hi), e["args"].get("correlation")) for e in events
                 if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
                 and _ns(e)[1] > lo and _ns(e)[0] < hi)
    calls = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")
             and "correlation" in e.get("args", {})]
    returned = {e["args"]["correlation"]: _ns(e)[1] for e in calls}
    first_corr, first_call = min(returned), min(_ns(e)[0] for e in calls)
    waited, running_end, i = 0, lo, 0
    while i < len(gpu):
        start = gpu[i][0]
        if start > running_end:
            ready = [returned[c] if c in returned else first_call for s, _, c in gpu[i:i + 64]
                     if s == start and (c in returned or (c is not None and 0 < c < first_corr))]
            if ready and start - max(running_end, min(ready)) > latency_ns:
                waited += start - max(running_end, min(ready))
        running_end = max(running_end, gpu[i][1])
        i += 1
    return waited


def test_real_torchrec_training_rank_waits_on_a_dependency_not_on_its_pageable_copy():
    """Rank 0 of a 16-rank TorchRec job on A100 (distributedInfo world_size 16): 5 ProfilerSteps of ~216 ms. Each
    step the main thread waits ~146 ms in a 704-byte device-to-pageable copy (sparse_data_dist's .to()) queued
    behind the step's work, while the GPU idles ~64 ms at a stretch with that work already queued (the CUDA graph
    whose memset ends the gap was launched ~65 ms before the gap began, some work before the capture began): the
    GPU waits on a dependency this rank's trace does not show (another rank's exchange). An engineer reads it as a
    dependency wait of a distributed job, not a pageable copy: pinning 15 kB would not remove a wait for the
    queue (the verdict used to be "[pageable_memcpy] ... explains 40.5%"). Also: the steps, the training kind,
    the all-to-all SendRecv share, and that it is not called GPU-bound or healthy."""
    path = real("kineto", "hta_torchrec_16rank_train_rank0.json.gz")
    events = _events(path)
    steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    data = analyze(open_case([path])).data
    process = data["processes"][0]
    assert process["steps"]["count"] == len(steps) == 5 and process["steps"]["source"] == "nvtx"
    assert abs(process["steps"]["p50_ns"] / 1e6 - sorted(e["dur"] for e in steps)[2] / 1e3) < 1.0
    assert data["capture_kind"]["workload"] == "training"
    lo, hi = data["window"]["start_ns"], data["window"]["end_ns"]
    device = data["devices"][0]
    sendrecv = [_ns(e) for e in events if e.get("cat") == "kernel" and "SendRecv" in e["name"]]
    assert abs(device["collectives_by_op"]["SendRecv"] - _union_pct(sendrecv, lo, hi)) < 0.05
    # the dependency wait, measured here from the raw events: most of the GPU's idle time
    waited_pct = 100.0 * _dependency_ns(events, lo, hi) / (hi - lo)
    assert waited_pct > 50 and abs(device["gaps"]["by_cause_pct_of_window"]["dependency"] - waited_pct) < 0.05
    assert all(gap["cause"] == "dependency" for gap in device["gaps"]["top"][:5])  # the ~64 ms stretches
    top = data["findings"][0]
    assert top["id"] == "dependency_wait" and data["headline"].startswith("[dependency_wait]")
    assert abs(top["impact_pct"] - waited_pct) < 0.05 and top["severity"] == "high"
    assert "another rank" in top["mechanism"] and "every rank" in top["fix"]
    # the pageable copies claim only what they cost: the idle inside them that is not the dependency wait
    pageable = _finding(data, "pageable_memcpy")
    assert pageable is None or pageable["impact_pct"] < 2.0, pageable and pageable["impact_pct"]
    head = data["headline"].lower()
    assert "healthy" not in head and "gpu-bound" not in head
