"""Real distributed captures from the wild (issue 32, item 5: collectives by workload), copied into
samples/real/kineto with provenance (SOURCES.md), and the collective rules they pin, on a trace built here.

- tracelens_mi300_ddp8_resnet_act_checkpoint: DDP training on 8 MI300X (RCCL's kernels are all named
  ``ncclDevKernel_Generic``; PyTorch records the call on each kernel as ``args["Collective name"]``).
- tracelens_b200_vllm_tp8_eager_prefill: one eager vLLM prefill step with TP=8 on B200, whose all-reduce is
  PyTorch's symmetric-memory ``multimem_all_reduce_kernel``.
- hta_torchrec_16rank_train_rank0: rank 0 of a 16-rank TorchRec training job (read, not yet judged right:
  see the test's docstring).

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
    an op of unknown purpose; the advice is DDP's, in ROCm words. (The first step's all-reduce kernels were
    launched before the capture began and carry no call: their op stays unknown.)"""
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
    assert "bucket_cap_mb" in found["fix"] and "no_sync" in found["fix"]
    texts = " ".join(found[key] for key in ("title", "mechanism", "fix", "confirm", "falsifier"))
    assert "rccl-tests" in texts and not any(word in texts for word in ("nvidia-smi", "nccl-tests", "NVLink", "nsys"))


def test_real_b200_tp8_symmetric_memory_all_reduce_is_a_collective():
    """vLLM TP=8 on B200, one eager prefill step: the all-reduce runs as multimem_all_reduce_kernel (73 calls);
    it was counted as compute, so the capture showed 0.0% collectives. The GPU idles ~86% of the 83 ms window
    with the host inside vLLM's Python (the MoE layer, attention, the all-reduce call): host-bound, not
    communication-bound; the verdict stays gpu_starved with the host ranges named."""
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
    assert data["findings"][0]["id"] == "gpu_starved" and "host code" in data["headline"]
    assert data["capture_kind"]["workload"] == "serving"  # its vllm:: ops say so (no process is named)
    assert "vllm::moe_forward" in " ".join(row["text"] for row in data["findings"][0]["evidence"])


def test_real_torchrec_training_rank_is_read():
    """Rank 0 of a 16-rank TorchRec job on A100 (distributedInfo world_size 16): 5 ProfilerSteps of ~216 ms; each
    step the main thread waits ~140 ms in a 704-byte device-to-pageable copy (sparse_data_dist's .to()) queued
    behind the step's work, while the GPU idles ~64 ms with that work already queued (a graph launched long
    before): the GPU waits on a dependency this rank's trace does not show, so the 40.5% pageable_memcpy
    headline over-claims (pinning the 15 kB would not remove a wait for the queue). What holds today: the
    steps, the training kind, the all-to-all SendRecv share, and that it is not called GPU-bound or healthy."""
    path = real("kineto", "hta_torchrec_16rank_train_rank0.json.gz")
    events = _events(path)
    steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    data = analyze(open_case([path])).data
    process = data["processes"][0]
    assert process["steps"]["count"] == len(steps) == 5 and process["steps"]["source"] == "nvtx"
    assert abs(process["steps"]["p50_ns"] / 1e6 - sorted(e["dur"] for e in steps)[2] / 1e3) < 1.0
    assert data["capture_kind"]["workload"] == "training"
    lo, hi = data["window"]["start_ns"], data["window"]["end_ns"]
    sendrecv = [_ns(e) for e in events if e.get("cat") == "kernel" and "SendRecv" in e["name"]]
    assert abs(data["devices"][0]["collectives_by_op"]["SendRecv"] - _union_pct(sendrecv, lo, hi)) < 0.05
    head = data["headline"].lower()
    assert "healthy" not in head and "gpu-bound" not in head
