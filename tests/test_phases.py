"""Phases before judgement (analyzers/phases.py): set-up, steady state and tear-down found from the
activity, the steady phase judged, the others reported with what fills them, and no verdict on a
capture that is start-up only.

Real captures assert the reading an engineer gives them by hand; the generated bundle
setup_then_starved (host_starved's loop after 2.2 s of start-up) checks the set-up's length against
the generator's truth and that the set-up does not move the steady verdict.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import real, truth

import tracetriage
from tracetriage import open_case
from tracetriage.analyzers import steps as st
from tracetriage.reports import render

MS = 1_000_000


def _analysis(path):
    return tracetriage.analyze(str(path))


def _gpu_start(path) -> int:
    return int(open_case([path]).traces[0].gpu["start"].min())


# --- real captures ------------------------------------------------------------------------------

def test_one_shot_rocm_matmul_is_start_up_only():
    """rpd_v2_pytorch_matmul: a 2 GB weight copy, 2.7 s of host code (module loading), then one matmul
    and a check whose every launch is a first launch taking milliseconds: no steady state, so no
    verdict (it used to read "GPU starved 61%, mostly inside launch calls")."""
    analysis = _analysis(real("rocprof", "rpd_v2_pytorch_matmul.rpd"))
    phases = analysis.data["phases"]
    setup = phases["setup"]
    assert 2_800 * MS < setup["duration_ns"] < 3_000 * MS
    assert max(stretch["length_ns"] for stretch in setup["host_only"]) > 2_500 * MS
    assert setup["copy_bytes"] >= 2_000_000_000 and setup["sync_copies"]["count"] >= 1
    assert phases["steady"] is None and phases["no_steady"]["why"] == "first_launches"
    assert analysis.headline.startswith("Not enough to judge: no steady phase")
    assert not any(finding["id"] == "healthy" for finding in analysis.findings)
    assert "no_steady_phase" in {abstention["analysis"] for abstention in analysis.data["abstentions"]}


def test_nvfuser_compile_stall_is_start_up_only():
    """nsys2024.6 nvfuser matmul: two kernels, a 397 ms host-only stretch (fusion compilation), then a
    handful of kernels whose launches load modules: start-up, not "GPU starved 99.9%"."""
    analysis = _analysis(real("nsys", "nsys2024.6_1xH200_nvfuser_matmul.sqlite"))
    no_steady = analysis.data["phases"]["no_steady"]
    assert no_steady["why"] == "stall" and 390 * MS < no_steady["stall_ns"] < 400 * MS
    assert analysis.headline.startswith("Not enough to judge: no steady phase")


def test_nvfuser_first_launches_are_start_up_only():
    """nsys2025.1 nvfuser cross-entropy: 18 kernels over 3.2 s, most of them launched once."""
    analysis = _analysis(real("nsys", "nsys2025.1_1xH200_nvfuser_pytorch_crossentropy.sqlite"))
    assert analysis.data["phases"]["no_steady"]["why"] == "first_launches"
    assert analysis.headline.startswith("Not enough to judge: no steady phase")


def test_alexnet_benchmark_judges_the_measured_forward():
    """hta_critical_path_alexnet: a warm-up forward filled by 10 s in cudaFree and two ~1 s cudaMalloc
    stretches, then the measured forward. The window is the measured part (after the allocator's
    warm-up), not the 2 s that still held the allocator stalls; the set-up names them."""
    path = real("kineto", "hta_critical_path_alexnet.json.gz")
    analysis = _analysis(path)
    setup = analysis.data["phases"]["setup"]
    calls = {stretch["call"] for stretch in setup["host_only"]}
    assert {"cudaFree", "cudaMalloc"} <= calls
    assert max(stretch["length_ns"] for stretch in setup["host_only"]) > 10_000 * MS
    trace = open_case([path]).traces[0]
    ranges = trace.ranges[trace.ranges["name"].astype(str).str.endswith("measure|forward]")]
    window = analysis.data["window"]
    assert window["start_ns"] <= int(ranges["start"].min())  # the measured forward is inside the window
    assert window["end_ns"] >= int(ranges["end"].max()) - 1 * MS
    assert window["duration_ns"] < 200 * MS  # ... and the 1.04 s cudaMalloc stall before it is not


def test_benchmark_after_a_weight_copy_keeps_its_warm_up_iterations():
    """rocprofv3 bmm on MI300X: a 13 ms synchronous hipMemcpy, then warm-up and timed batched GEMMs
    with a 1 ms sync between them. The copy is set-up; the 1 ms sync between iterations of the same
    kernels is the loop's own, not a second set-up."""
    path = real("rocprof", "rocprofv3_rocpd_v3_bmm_trace_mi300x.db")
    analysis = _analysis(path)
    setup = analysis.data["phases"]["setup"]
    assert 13 * MS < setup["duration_ns"] < 15 * MS
    assert setup["host_only"][0]["call"] == "hipMemcpy"
    assert analysis.data["window"]["start_ns"] - _gpu_start(path) == setup["duration_ns"]
    assert analysis.data["devices"][0]["busy_pct"] > 85


def test_sglang_decode_blocking_copy_inside_its_step_is_not_set_up():
    """tracelens SGLang decode (ROCm): a 463 ms hipMemcpyWithStream before ~10 ms of decode kernels, all inside
    the capture's one step[DECODE bs=32] range. It was cut off as a start-up stall (a 10.45 ms window, "No problem
    found"); an annotated step is never cut (tests/test_phases_steps.py): the window covers the step and the
    replay it queued, and no set-up phase is left before it."""
    analysis = _analysis(real("kineto", "tracelens_sglang_qwen3-8b_decode.json.gz"))
    assert not (analysis.data.get("phases") or {}).get("setup")
    assert 470 * MS < analysis.data["window"]["duration_ns"] < 475 * MS


@pytest.mark.parametrize("fmt, name", [
    ("nsys", "nsys2021.2_1xRTX6000_legacy_schema_no_metadata.sqlite"),  # three iterations, 2.5 ms host stalls each
    ("nsys", "nsys2025.5_2xRTX3090_cuda_uvm_osrt_sampling.sqlite"),  # an iterative solver with a sync per iteration
    ("nsys", "nsys2026.2_2xH100_fastvideo_sp2_pytorch_window1s.sqlite"),  # a copy-bound loop (async copies)
    ("kineto", "hta_ns_resolution_rank0.json.gz"),  # steps; the GPU drains the last ones after the host left
    ("kineto", "tracelens_h100_bert_small.json.gz"),  # one eager step of small kernels
])
def test_steady_captures_are_one_phase(fmt, name):
    """A loop whose stalls repeat, an async copy stream, the GPU still draining queued steps: one steady
    phase, nothing cut off, no phases block in the contract."""
    analysis = _analysis(real(fmt, name))
    assert "phases" not in analysis.data


# --- the generated case ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def setup_bundle(analyses):
    return analyses["setup_then_starved"], truth("setup_then_starved")


def test_generated_set_up_length_and_contents(setup_bundle):
    analysis, expected = setup_bundle
    phases = analysis.data["phases"]
    assert phases["source"] == "steps"  # the loop's graph launches, inferred within the steady phase (trial #6)
    setup = phases["setup"]
    assert abs(setup["duration_ns"] - expected["setup_ns"]) <= 0.01 * expected["setup_ns"]
    assert analysis.data["window"]["start_ns"] == expected["window"]["start_ns"]
    assert setup["sync_copies"]["count"] == 1 and 79 * MS < setup["sync_copies"]["longest_ns"] < 81 * MS
    assert setup["alloc_calls"] == 40 and setup["kernels"] == 3
    assert max(stretch["length_ns"] for stretch in setup["host_only"]) > 2_000 * MS
    text = render(analysis, "text")
    assert "phases   set-up 2.22 s before the first step: a 2.14 s host-only stretch, an 80.01 ms synchronous copy" in text


def test_generated_steps_are_inferred_within_the_steady_phase(setup_bundle, analyses):
    """The loop after the set-up has host_starved's period: its graph launches are the steps, found
    inside the steady phase (over the whole capture the 2.2 s set-up hid them: "no periodic graph
    launch found"), with the generator's count and median."""
    analysis, expected = setup_bundle
    process = analysis.data["processes"][0]
    assert process["steps"]["source"] == "graph_launch"
    assert abs(process["steps"]["count"] - expected["steps"]) <= 1
    assert abs(process["steps"]["p50_ns"] - expected["step_p50_ns"]) <= 0.02 * expected["step_p50_ns"]
    assert process["graph_launches_per_step"] == 1
    plain = analyses["host_starved"].data["processes"][0]["steps"]
    assert process["steps"]["source"] == plain["source"] and abs(process["steps"]["count"] - plain["count"]) <= 1


def test_steps_inferred_within_a_given_phase_only():
    """steps.find_steps(within=...): a periodic graph launch that covers half of the steady phase but a
    fifth of the capture is the loop's period inside it, not outside it."""
    from conftest import samples_generate

    generate = samples_generate()
    rng = np.random.default_rng(3)
    rank = generate.Rank(pid=9, device=0)
    rank.launch("init_kernel", 40 * 1_000)
    rank.host(3_000 * MS)  # start-up: 3 s without the loop's graph launch
    loop_start = rank.t
    for _ in range(40):
        rank.graph_launch(int(rng.uniform(1.9, 2.1) * MS))
        rank.host(int(rng.uniform(6.5, 7.5) * MS))
    trace = SimpleNamespace(
        api=pd.DataFrame({"pid": 9, "start": [s for s, *_ in rank.api], "end": [e for _, e, *_ in rank.api],
                          "category": pd.Categorical(["launch" if "LaunchKernel" in n else "graph_launch"
                                                      for *_, n, _c in rank.api])}),
        gpu=pd.DataFrame({"pid": 9, "start": [s for s, *_ in rank.kernels] + [s for s, *_ in rank.graphs],
                          "end": [e for _, e, *_ in rank.kernels] + [e for _, e, *_ in rank.graphs],
                          "kind": pd.Categorical(["kernel"] + ["graph"] * len(rank.graphs))}),
        ranges=pd.DataFrame({"pid": pd.Series([], dtype=int), "name": pd.Categorical([])}))
    assert st.find_steps(trace, 9).count == 0  # over the whole capture: a fifth of it, no period
    inside = st.find_steps(trace, 9, within=(loop_start, rank.t))
    assert inside.source == "graph_launch" and inside.count == 39


def test_generated_set_up_leaves_the_steady_verdict_alone(setup_bundle, analyses):
    """The same loop with and without 2.2 s of start-up before it: the same finding, the same idle share."""
    analysis, _ = setup_bundle
    plain = analyses["host_starved"]
    assert analysis.findings[0]["id"] == plain.findings[0]["id"] == "gpu_starved"
    idle = [100 - a.data["devices"][0]["busy_pct"] for a in (analysis, plain)]
    assert abs(idle[0] - idle[1]) < 1.5
    assert "phases" not in plain.data


# --- step annotations --------------------------------------------------------------------------

@pytest.mark.parametrize("name, prefill", [
    ("ProfilerStep#12", False),
    ("step[EXTEND bs=4 toks=2048]", True),
    ("step[DECODE bs=32]", False),
    ("execute_context_0(0)_generation_32(32)", False),
    ("execute_context_2(4096)_generation_30(30)", True),
    ("execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk32785sqsq32sqsk32785)", False),
    ("execute_8_context_1(sq512sk512sqsq262144sqsk262144)_generation_7(sq7sk7000sqsq7sqsk7000)", True),
])
def test_serving_engines_step_annotations(name, prefill):
    """SGLang's step[EXTEND|DECODE ..] and vLLM V1's execute_context_N(..)_generation_M(..) mark steps;
    a vLLM step is prefill when it holds context (prompt) requests."""
    assert st.STEP_PATTERNS.search(name)
    assert st.is_prefill_name(name) is prefill


def test_repeats_count_kernels_seen_earlier_in_the_capture():
    """The share the no-steady rule reads: a launch repeats when its kernel ran before, anywhere earlier."""
    from tracetriage.analyzers.phases import Launches

    trace = SimpleNamespace(gpu=pd.DataFrame({"start": np.array([0, 10, 20, 30, 40], np.int64),
                                              "end": np.array([5, 15, 25, 35, 45], np.int64),
                                              "kind": pd.Categorical(["kernel"] * 5),
                                              "name": pd.Categorical(["a", "b", "a", "c", "b"])}),
                            api=pd.DataFrame())
    launch = Launches(trace, np.ones(5, bool))
    assert launch.starts.tolist() == [0, 10, 20, 30, 40] and launch.ends.tolist() == [5, 15, 25, 35, 45]
    assert [launch.repeated(0, j) for j in range(6)] == [0, 0, 0, 1, 1, 2]
    assert launch.repeated(2, 5) == 2 and launch.repeated(1, 4) == 1
    assert launch.launched_at.tolist() == launch.starts.tolist()  # no launch call traced: the GPU start
    assert launch.first_launch.tolist() == [0, 10, 0, 30, 10]  # when each launch's kernel was first launched


def test_first_launches_match_a_sort_of_every_launch():
    """The first launch of each kernel name, found a slice at a time, is np.unique's first index, out of
    start order and with missing names (code -1) and names first seen late in a slice."""
    from tracetriage.analyzers import intervals as iv
    from tracetriage.analyzers.phases import Launches

    rng = np.random.default_rng(7)
    n = 3 * iv.SLICE + 123
    codes = rng.integers(-1, 40, n)
    codes[rng.integers(0, n, 5)] = 41  # a name seen a handful of times, anywhere
    names = pd.Categorical.from_codes(codes, [f"k{i}" for i in range(42)])
    start = rng.integers(0, 10 * n, n).astype(np.int64)
    kind = pd.Categorical(np.where(rng.random(n) < 0.9, "kernel", "memcpy"))
    trace = SimpleNamespace(gpu=pd.DataFrame({"start": start, "end": start + 5, "kind": kind, "name": names}),
                            api=pd.DataFrame())
    kernel = (kind == "kernel")
    launch = Launches(trace, np.asarray(kernel))
    order = np.argsort(start[kernel], kind="stable")
    sorted_codes = codes[kernel][order]
    _, first, inverse = np.unique(sorted_codes, return_index=True, return_inverse=True)
    repeated = np.ones(sorted_codes.size, bool)
    repeated[first] = False
    cumulative = np.concatenate(([0], np.cumsum(repeated)))
    for i, j in [(0, sorted_codes.size), (0, 1), (5, iv.SLICE + 9), (iv.SLICE, 2 * iv.SLICE), (17, 17)]:
        assert launch.repeated(i, j) == cumulative[j] - cumulative[i]
    assert launch.starts.tolist() == start[kernel][order].tolist()
    assert launch.first_launch.tolist() == launch.starts[first][inverse.reshape(-1)].tolist()


def test_the_phases_are_in_every_format(setup_bundle):
    """Text, Markdown, HTML and the notebook card all show each phase line (HTML escaped)."""
    import html

    from test_view_parity import _render, missing_fields

    from tracetriage.reports import html as html_report
    from tracetriage.reports.view import report_view

    analysis, _ = setup_bundle
    view = report_view(analysis)
    assert [phase.name for phase in view.phases] == ["set-up", "steady"]
    for fmt in ("text", "md", "html"):
        assert not {path for path in missing_fields(view, fmt, _render(fmt, analysis, view)) if path.startswith("phases")}
    card = html.unescape(html_report.render_card(analysis, view))
    assert all(f"{phase.name} {phase.text}" in card for phase in view.phases)


# --- warm-up passes inside the activity (trial #3) ---------------------------------------------

def _warm_up_then_loop(tmp_path, name: str, warm_up_host_ns: int):
    """A weight copy, a host range ``name`` holding ``warm_up_host_ns`` of allocator and autotuning
    host time and then the first launch of 12 kernels, then 40 iterations of the same 12 kernels,
    each after a 3 ms host gap (no step annotation, no sync). Returns the analysis and where the pass
    ends (the range's end, or its last kernel's when the GPU finishes after the host left it)."""
    generate = samples_generate()
    rng = np.random.default_rng(11)
    rank = generate.Rank(pid=7100, device=0)
    rank.h2d_copy(64 << 20, 20.0)
    rank.host(1 * MS)
    begin = rank.t
    for _ in range(8):
        rank.api_call("cudaMalloc_v3020", warm_up_host_ns // 16)
        rank.host(warm_up_host_ns // 16)
    kernels = [f"layer{k}_kernel" for k in range(12)]
    for kernel in kernels:
        rank.launch(kernel, int(rng.uniform(90, 110) * 1_000))
    rank.host(20_000)
    rank.host_ranges.append((begin, rank.t, name))
    end = max(rank.t, rank.gpu_free)  # the pass ends when the range and the GPU work it queued have
    for _ in range(40):
        rank.host(3 * MS)
        for kernel in kernels:
            rank.launch(kernel, int(rng.uniform(90, 110) * 1_000))
    path = tmp_path / "trace.sqlite"
    generate.write_nsys(path, [rank], "warm_up_then_loop")
    return tracetriage.analyze(str(path)), end


def samples_generate():
    from conftest import samples_generate as load

    return load()


def test_generated_warm_up_pass_is_set_up(tmp_path):
    """A first pass that ran every kernel first, inside a host range that computes a fraction as densely
    as the loop after it, is set-up whatever its name: the steady phase starts where the range ends."""
    analysis, end = _warm_up_then_loop(tmp_path, "run_model", 400 * MS)
    setup = analysis.data["phases"]["setup"]
    assert setup["warmup_range"] == "run_model"
    assert analysis.data["window"]["start_ns"] == end
    assert analysis.data["phases"]["repeat_pct"] == 100.0
    assert "a warm-up pass to the end of run_model" in render(analysis, "text")


def test_generated_first_iteration_as_dense_as_the_loop_is_steady(tmp_path):
    """The same first pass without the set-up's host time, under a range of any name that does not say
    warm-up: a capture that starts at an iteration of the loop, judged whole."""
    analysis, end = _warm_up_then_loop(tmp_path, "run_model", 0)
    assert analysis.data["window"]["start_ns"] < end
    assert not (analysis.data.get("phases") or {}).get("setup")


def test_generated_warm_up_by_name(tmp_path):
    """A range named as a warm-up that ran first what the loop repeats is set-up even when dense."""
    analysis, end = _warm_up_then_loop(tmp_path, "warmup_iteration", 0)
    assert analysis.data["window"]["start_ns"] == end  # (a set-up this short, under 5% of the capture, is no phase line)


def test_alexnet_warm_up_forward_is_set_up():
    """hta_critical_path_alexnet: the warm-up forward's last layers (its first launches of the measured
    kernels, cudaMalloc calls) ran after the 1.04 s cudaMalloc stretch and sat inside the window; the
    steady phase now starts where the warm-up range ends, and every kernel launch in it repeats."""
    path = real("kineto", "hta_critical_path_alexnet.json.gz")
    analysis = _analysis(path)
    trace = open_case([path]).traces[0]
    names = trace.ranges["name"].astype(str)
    warm_up_end = int(trace.ranges.loc[names.str.endswith("warmup|forward]"), "end"].max())
    assert analysis.data["window"]["start_ns"] == warm_up_end  # the GPU had finished the pass's kernels
    assert analysis.data["phases"]["setup"]["warmup_range"].endswith("warmup|forward]")
    assert analysis.data["phases"]["repeat_pct"] == 100.0
    assert "warmup|forward" not in analysis.headline


# --- stretches inside runtime calls are not host-only (trial #18) -------------------------------

def test_generated_stretch_inside_a_runtime_call_is_not_host_only(tmp_path):
    """Set-up with a 1.2 s cudaFree and, apart from it, 0.9 s of host code, then a loop: the first stretch
    is the driver's (GPU idle inside cudaFree), the second host-only; the phase line says which is which."""
    generate = samples_generate()
    rank = generate.Rank(pid=7200, device=0)
    rank.launch("init_kernel", 40_000)
    rank.host(1 * MS)
    rank.api_call("cudaFree_v3020", 1_200 * MS)
    rank.launch("init2_kernel", 40_000)
    rank.host(900 * MS)
    for _ in range(60):
        rank.graph_launch(2 * MS)
        rank.host(2 * MS)
    path = tmp_path / "trace.sqlite"
    generate.write_nsys(path, [rank], "free_then_loop")
    analysis = tracetriage.analyze(str(path))
    stretches = analysis.data["phases"]["setup"]["host_only"]
    by_length = {round(stretch["length_ns"] / (100 * MS)): stretch for stretch in stretches}
    assert by_length[12]["call"] == "cudaFree" and by_length[12]["in_calls_pct"] > 99
    assert by_length[9]["in_calls_pct"] < 1
    text = render(analysis, "text")
    line = next(line for line in text.splitlines() if line.startswith("phases"))
    assert "host-only stretch, GPU idle inside runtime calls 1.20 s in cudaFree," in line
    assert line.count("host-only") == 1


def test_alexnet_allocator_stretches_are_inside_runtime_calls():
    """hta_critical_path_alexnet: the 10 s in cudaFree and the ~1 s cudaMalloc stretches are the driver's,
    not host-only."""
    analysis = _analysis(real("kineto", "hta_critical_path_alexnet.json.gz"))
    stretches = analysis.data["phases"]["setup"]["host_only"]
    assert all(stretch["in_calls_pct"] >= 50 for stretch in stretches if stretch["call"] in ("cudaFree", "cudaMalloc"))
    line = next(line for line in render(analysis, "text").splitlines() if line.startswith("phases"))
    assert "host-only stretches 10.03 s" not in line and "GPU idle inside runtime calls 10.03 s in cudaFree" in line


# --- tear-down that still runs kernels (captures without steps) ---------------------------------

def _loop_then_teardown(tmp_path, **options):
    import random

    generate = samples_generate()
    ranks, extra = generate.scenario_loop_then_teardown(random.Random("7:teardown"), **options)
    path = tmp_path / "trace.sqlite"
    generate.write_nsys(path, ranks, "loop_then_teardown")
    return tracetriage.analyze(str(path)), extra


def test_generated_host_only_and_frees_after_the_loop_are_tear_down(tmp_path):
    """A step-less loop, then ~600 ms host-only, 30 cudaFree calls and three kernels the loop never ran:
    the window ends at the loop's last kernel, the rest is tear-down with its frees and host-only stretch.
    (Before, the tear-down was only copies after the last kernel: this window read 'GPU starved 92%'.)"""
    analysis, extra = _loop_then_teardown(tmp_path)
    assert analysis.data["window"]["end_ns"] == extra["steady_to_ns"]
    teardown = analysis.data["phases"]["teardown"]
    assert abs(teardown["duration_ns"] - extra["teardown_ns"]) <= 1_000
    assert teardown["alloc_calls"] == extra["teardown_frees"] and teardown["kernels"] == 3
    assert max(stretch["length_ns"] for stretch in teardown["host_only"]) > 0.9 * extra["teardown_ns"]
    assert not any(finding["id"] == "gpu_starved" for finding in analysis.findings)
    assert "tear-down 741.38 ms after the last steady kernel: a 741.19 ms host-only stretch" in render(analysis, "text")


def test_generated_slow_last_iteration_is_not_tear_down(tmp_path):
    """The same stall followed by the loop's own kernels: a slow last iteration, kept in the window (to the
    read-back after it: the whole capture)."""
    generate = samples_generate()
    analysis, extra = _loop_then_teardown(tmp_path, final_kernels=tuple(name for name, _ in generate.MICROBENCH_KERNELS))
    assert analysis.data["window"]["end_ns"] == extra["steady_to_ns"] + extra["teardown_ns"]
    assert not (analysis.data.get("phases") or {}).get("teardown")
