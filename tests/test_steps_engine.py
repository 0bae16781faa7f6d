"""Serving engines' own per-iteration annotations are steps from the first one on (analyzers/steps.py
ENGINE_STEP): vLLM V1's ``execute_context_N(..)_generation_M(..)`` (GPUWorker.annotate_profile; TraceLens's
patched vLLM writes ``execute_<requests>_context_N(sq..sk..)_generation_M(..)``) and SGLang's ``step[DECODE ..]``.
Real captures often profile one iteration. The counts here are counted by hand from the raw JSON: one iteration is
one annotation, or one outermost annotation where the engine nests its own (SGLang's ``step[...]`` inside the
patched ``execute_...`` range); fewer than three such steps leave the window to the GPU activity."""

import gzip
import json
import re

import pytest
from conftest import real

from tracetriage import analyze, open_case

# vLLM's f-string in GPUWorker.annotate_profile: "execute_context_" + n + "(" + tokens + ")_generation_" + m + "(" ...
VLLM = re.compile(r"^execute_(\d+_)?context_\d+\(.*\)_generation_\d+\(.*\)$")
SGLANG = re.compile(r"^step\[(EXTEND|DECODE|MIXED|IDLE)\b")

CAPTURES = ["tracelens_b200_vllm_tp8_eager_prefill.json.gz", "tracelens_vllm_decode_full_graph_execution.json.gz",
            "tracelens_vllm_prefilldecode_piecewise_graph_execution.json.gz", "tracelens_sglang_qwen3-8b_decode.json.gz"]


def _iterations(path):
    """The engine annotations of the host, outermost only (one nested in another is the same iteration)."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    spans = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in events if e.get("cat") == "user_annotation"
                   and (VLLM.match(e["name"]) or SGLANG.match(e["name"])))
    outer = []
    for start, end, name in spans:
        if not outer or start >= outer[-1][1]:
            outer.append((start, end, name))
    return outer


@pytest.mark.parametrize("name", CAPTURES)
def test_one_engine_iteration_is_one_step(name):
    path = real("kineto", name)
    iterations = _iterations(path)
    assert len(iterations) == 1  # what each of these captures profiled: one iteration
    data = analyze(open_case([path])).data
    (process,) = data["processes"]
    steps = process["steps"]
    assert steps["count"] == len(iterations) and steps["source"] == "nvtx"
    assert steps["range_name"] == iterations[0][2]
    assert abs(steps["p50_ns"] / 1e3 - (iterations[0][1] - iterations[0][0])) < 1.0  # the range's own length, µs
    # one iteration does not bound the GPU work it queued: the window stays the GPU activity's
    assert data["window"]["source"] == "gpu_activity"


def test_the_prefill_iteration_is_read_as_prefill():
    """``execute_context_1(888_788544)``: one context (prompt) request of 888 tokens, no generation: a prefill step."""
    data = analyze(open_case([real("kineto", "tracelens_b200_vllm_tp8_eager_prefill.json.gz")])).data
    head = data["processes"][0]["steps"]
    assert head["count"] == 1 and head["prefill_count"] == 1


@pytest.mark.parametrize("name,steps", [("execute_context_0(0)_generation_32(32)", True),
                                        ("execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk5)", True),
                                        ("step[DECODE bs=32]", True), ("execute_model", False), ("step", False)])
def test_a_single_range_is_a_step_only_when_it_is_an_engine_iteration(tmp_path, name, steps):
    """One range of the name around three kernels: an engine's iteration annotation is a step, a generic name
    (``execute_model``, ``step``: any program may use it once) still needs three."""
    events = []
    for i in range(3):
        events.append({"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": 1000.0 + 300 * i,
                       "dur": 250.0, "args": {"device": 0, "stream": 7, "correlation": i + 1}})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 11, "tid": 11,
                       "ts": 990.0 + 300 * i, "dur": 5.0, "args": {"correlation": i + 1}})
    events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 11, "tid": 11, "ts": 980.0, "dur": 1000.0,
                   "args": {}})
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"schemaVersion": 1, "traceEvents": events}).encode()))
    got = analyze(open_case([path])).data["processes"][0]["steps"]
    assert (got["count"] == 1) == steps and (got["count"] == 0) == (not steps)
