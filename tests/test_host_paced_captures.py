"""Two ways a capture of host-paced work misleads (auditor on the real captures, 2026-12-04):

* a PyTorch profiler trace taken with ``with_stack=True`` holds python_function events, and the Python
  tracer's own cost on every Python call lengthens the host time between launches: the findings that
  measure the host's pace (launch_bound, gpu_starved, python_host_overhead) say their share is an upper
  bound, with the count of those events and the re-capture;
* a launch-bound capture whose every step is a prefill (vLLM's ``execute_context_N(..)_generation_0``) was
  told to capture "the decode step" in a graph: its fix is more tokens per launch.

Real: the B200 vLLM TP8 eager prefill (TraceLens, 15,230 python_function events, one prefill step).
Generated: a launch-bound loop of small kernels in five engine steps, decode or prefill, with or without
Python tracer events; the truth is what was written."""

import gzip
import json

import pytest
from conftest import real

from tracetriage import analyze, open_case

B200 = "tracelens_b200_vllm_tp8_eager_prefill.json.gz"
DECODE = "execute_context_0(0)_generation_32(32)"
PREFILL = "execute_context_1(888)_generation_0(0)"


def _finding(data, finding_id):
    return next((row for row in data["findings"] if row["id"] == finding_id), None)


def _evidence(finding, name):
    return next((row for row in finding["evidence"] if row["name"] == name), None)


def test_real_with_stack_capture_says_its_host_share_is_an_upper_bound():
    path = real("kineto", B200)
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    python_events = sum(1 for e in events if e.get("cat") == "python_function")
    assert python_events > 1000  # the truth of the capture: it was taken with with_stack=True
    data = analyze(open_case([path])).data
    launch = _finding(data, "launch_bound")
    row = _evidence(launch, "python_tracer_on")
    assert row is not None and row["value"] == python_events
    assert f"{python_events:,} python_function events" in row["text"] and "upper bound" in row["text"]
    assert launch["fix"].startswith("Every measured step is a prefill")
    assert "decode step in a CUDA" not in launch["fix"]


def _loop(tmp_path, step_name: str, python: bool):
    """Five engine steps of 300 kernels of 3 µs, each launched 25 µs after the last (5 µs in the launch call):
    the GPU waits on the host between kernels. ``python``: one python_function event around each launch."""
    events, t, corr = [], 1000.0, 0
    for step in range(5):
        start = t
        for _ in range(300):
            corr += 1
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 11, "tid": 11,
                           "ts": t, "dur": 5.0, "args": {"correlation": corr}})
            events.append({"ph": "X", "cat": "kernel", "name": "small_kernel", "pid": 0, "tid": 7, "ts": t + 6.0,
                           "dur": 3.0, "args": {"device": 0, "stream": 7, "correlation": corr}})
            if python:
                events.append({"ph": "X", "cat": "python_function", "name": "model.py(10): forward", "pid": 11,
                               "tid": 11, "ts": t - 10.0, "dur": 16.0, "args": {}})
            t += 25.0
        events.append({"ph": "X", "cat": "user_annotation", "name": step_name, "pid": 11, "tid": 11, "ts": start - 1.0,
                       "dur": t - start, "args": {}})
        t += 1.0
    events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 11, "tid": 11,
                   "ts": t, "dur": 10.0, "args": {}})
    path = tmp_path / f"loop_{'py' if python else 'plain'}_{step_name[:18]}.json.gz"
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "traceEvents": events}
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path, sum(1 for e in events if e["cat"] == "python_function")


@pytest.mark.parametrize("step_name,python", [(DECODE, False), (DECODE, True), (PREFILL, False), (PREFILL, True)])
def test_generated_loop_names_the_tracer_and_the_prefill(tmp_path, step_name, python):
    path, python_events = _loop(tmp_path, step_name, python)
    data = analyze(open_case([path])).data
    launch = _finding(data, "launch_bound")
    assert launch is not None, [row["id"] for row in data["findings"]]
    row = _evidence(launch, "python_tracer_on")
    assert (row is not None) == python and (not python or row["value"] == python_events == 1500)
    assert launch["fix"].startswith("Every measured step is a prefill") == (step_name == PREFILL), launch["fix"]
