"""No set-up or tear-down is cut out of an annotated step (analyzers/phases.py cover_steps): a capture with
fewer than MIN_STEPS annotated steps (an engine's own iteration range, ProfilerStep#N, a --step-range match)
has the GPU activity's window widened to cover them, so a stall inside the one measured step is judged, not
called start-up (auditor's report: SGLang decode, a 463 ms stall inside its only step read "No problem found").

The real capture's truth is read off its own tables here (the step range, the longest GPU-idle gap); the
generated one's (samples/gen_step_stall.py) from its generated intervals.
"""

from __future__ import annotations

import random
import sys

import numpy as np
import pytest
from conftest import ROOT, real

import tracetriage
from tracetriage import open_case
from tracetriage.reports import render

sys.path.insert(0, str(ROOT / "samples"))
import gen_step_stall  # noqa: E402

sys.path.pop(0)

SGLANG = ("kineto", "tracelens_sglang_qwen3-8b_decode.json.gz")


def _top(analysis):
    return analysis.findings[0]


def _no_start_up(analysis):
    """Nothing of the window was excluded as set-up, and the headline speaks of no start-up."""
    window = analysis.data["window"]
    assert window.get("setup_excluded_ns", 0) == 0
    assert not (analysis.data.get("phases") or {}).get("setup")
    assert "start-up" not in analysis.headline and "No problem found" not in analysis.headline


def test_sglang_stall_inside_its_only_decode_step_is_judged():
    """tracelens SGLang decode (ROCm): step[DECODE bs=32] opens at 0.2 ms and lasts 465 ms; inside it the host
    blocks 463 ms in hipMemcpyWithStream while the kernels it launched after a hipStreamWaitEvent sit queued, and
    the step's graph replay runs after the range closes. The window covers the step and that replay; the stall
    is the verdict: the GPU held queued work (dependency_wait), the rule already there for work held behind a
    stream wait, not the host's copy that waits behind it."""
    path = real(*SGLANG)
    analysis = tracetriage.analyze(str(path))
    trace = open_case([path]).traces[0]
    names = trace.ranges["name"].astype(str)
    step = trace.ranges[names.str.startswith("step[DECODE")].iloc[0]
    window = analysis.data["window"]
    assert window["start_ns"] <= int(step["start"]) and window["end_ns"] >= int(step["end"])
    assert window["end_ns"] == int(trace.gpu["end"].max())  # the replay the step queued, drained after its range
    _no_start_up(analysis)
    # the truth: the longest gap between GPU operations, from the tables
    gpu = trace.gpu.sort_values("start")
    starts, ends = gpu["start"].to_numpy(np.int64), np.maximum.accumulate(gpu["end"].to_numpy(np.int64))
    gap = int((starts[1:] - ends[:-1]).max())
    assert gap > 460_000_000
    top = _top(analysis)
    assert top["id"] == "dependency_wait" and top["severity"] == "high"
    assert abs(top["impact_pct"] - 100.0 * gap / window["duration_ns"]) < 0.5
    assert "which holds only 1 measured step" in render(analysis, "text")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """Both variants of the generated stall, and the same held-queue capture with its step range left out."""
    out = {}
    for name, wait, annotated in (("held", True, True), ("pageable", False, True), ("bare", True, False)):
        rank, truth = gen_step_stall.scenario_step_stall(random.Random("step_stall"), wait)
        if not annotated:
            rank.nvtx.clear()
        path = tmp_path_factory.mktemp(name) / "trace.sqlite"
        gen_step_stall.write_nsys(path, [rank], name)
        out[name] = tracetriage.analyze(str(path)), truth
    return out


def test_generated_held_queue_stall_inside_the_step_is_a_dependency_wait(generated):
    analysis, truth = generated["held"]
    window = analysis.data["window"]
    assert (window["start_ns"], window["end_ns"]) == (truth["window"]["start_ns"], truth["window"]["end_ns"])
    _no_start_up(analysis)
    assert abs(analysis.data["devices"][0]["busy_pct"] - truth["busy_pct"]) < 0.1
    top = _top(analysis)
    assert top["id"] == "dependency_wait"
    assert abs(top["impact_pct"] - truth["wait_pct"]) < 0.5


def test_generated_host_stall_inside_the_step_is_the_sync_it_sits_in(generated):
    """Nothing queued: the host sits in a synchronous read-back into pageable memory while the GPU idles. The
    blocking copy is the step's sync (host_sync_per_step), its per-step figures said to be one step's."""
    analysis, truth = generated["pageable"]
    window = analysis.data["window"]
    assert (window["start_ns"], window["end_ns"]) == (truth["window"]["start_ns"], truth["window"]["end_ns"])
    _no_start_up(analysis)
    top = _top(analysis)
    assert top["id"] == "host_sync_per_step"
    assert abs(top["impact_pct"] - truth["stall_pct"]) < 0.5
    assert not any(finding["id"] == "dependency_wait" for finding in analysis.findings)
    assert "only 1 step measured, the per-step figures are its alone" in render(analysis, "text")


def test_generated_stall_without_a_step_annotation_is_still_start_up(generated):
    """The same capture with no step range: nothing says the stall is a step's, and the start-up stall rule
    (a handful of operations, then a stall filling most of the rest) still leaves it out as set-up."""
    analysis, truth = generated["bare"]
    window = analysis.data["window"]
    stall = truth["stall"]["end_ns"] - truth["stall"]["start_ns"]
    assert window["start_ns"] >= truth["stall"]["end_ns"]  # (the few first-time kernels after it too: set-up)
    assert stall <= window["setup_excluded_ns"] < stall + 1_000_000
    assert "at start-up" in analysis.headline


# --- too few ProfilerStep ranges are steps, said to be too few (auditor: 'no known step range') -----------

HTA = ("kineto", "hta_trace_filter_sampled_rank0.json.gz")
PROFILER_STEP_NAME = r"^ProfilerStep#\d+$"


def _steps_abstention(analysis):
    return next(row for row in analysis.data["abstentions"] if row["analysis"] == "steps")


def test_two_profiler_steps_are_read_and_said_to_be_too_few():
    """hta_trace_filter_sampled_rank0: ProfilerStep#551 (607 ms) and #552 (623 ms). They were no steps at all
    (2 < MIN_STEPS) and the hint asked for prof.step(), which the capture already calls."""
    path = real(*HTA)
    analysis = tracetriage.analyze(str(path))
    trace = open_case([path]).traces[0]
    ranges = trace.ranges[trace.ranges["name"].astype(str).str.match(PROFILER_STEP_NAME)]
    assert len(ranges) == 2
    steps = analysis.data["processes"][0]["steps"]
    assert steps["count"] == len(ranges) and steps["source"] == "nvtx"
    row = _steps_abstention(analysis)
    assert row["reason"].startswith("only 2 ProfilerStep ranges measured")
    assert "at least 3 needed (raise the schedule's active= steps)" in row["reason"]
    assert "no known step range" not in row["reason"] and "active=" in row["capture_hint"]
    # the window covers both steps where the GPU recorded activity
    window = analysis.data["window"]
    span = int(trace.gpu["start"].min()), int(trace.gpu["end"].max())
    assert window["start_ns"] <= max(int(ranges["start"].min()), span[0])
    assert window["end_ns"] >= min(int(ranges["end"].max()), span[1])


def _loop(tmp_path, names: list[str], stall_ms: float = 0.0, step_range: str | None = None):
    """Steps of 30 launches of three kernels (GPU-bound) under NVTX ranges ``names``, the first opening with a
    handful of kernels and a ``stall_ms`` host-only stall (no CUDA call) inside it."""
    generate = gen_step_stall
    rank = generate.Rank(pid=3300, device=0)
    for number, name in enumerate(names):
        start = rank.t
        if number == 0 and stall_ms:
            rank.launch("prepare_kernel", 5 * generate.US)
            rank.host(int(stall_ms * 1_000_000))
        for k in range(30):
            rank.launch(("gemm_kernel", "attention_kernel", "norm_kernel")[k % 3], 200 * generate.US)
        rank.host(100 * generate.US)
        rank.nvtx.append((start, rank.t, name))
    path = tmp_path / "trace.sqlite"
    generate.write_nsys(path, [rank], "profiler_steps")
    return tracetriage.analyze(str(path), step_range=step_range), rank


def test_generated_two_profiler_steps_keep_a_stall_inside_the_first(tmp_path):
    """Two ProfilerStep ranges, a 300 ms host-only stall after a handful of kernels inside the first: read as 2
    steps (too few, said so), and the stall stays in the window (it is a step's), not cut off as start-up."""
    analysis, rank = _loop(tmp_path, ["ProfilerStep#7", "ProfilerStep#8"], stall_ms=300)
    row = _steps_abstention(analysis)
    assert row["reason"].startswith("only 2 ProfilerStep ranges measured (ProfilerStep#7)")
    first_op = min(s for s, _ in rank.busy_intervals())
    window = analysis.data["window"]
    assert window["start_ns"] == max(rank.nvtx[0][0], first_op)
    assert window["end_ns"] == max(rank.nvtx[-1][1], max(e for _, e in rank.busy_intervals()))
    assert window.get("setup_excluded_ns", 0) == 0 and "start-up" not in analysis.headline


def test_generated_three_profiler_steps_are_enough(tmp_path):
    analysis, _ = _loop(tmp_path, [f"ProfilerStep#{n}" for n in range(3)])
    assert not any(row["analysis"] == "steps" for row in analysis.data["abstentions"])


def test_generated_two_ranges_the_user_names_are_too_few_steps(tmp_path):
    """--step-range matching two ranges: 'only 2 steps measured', not 'matched no annotation range'."""
    analysis, _ = _loop(tmp_path, ["fwd_bwd", "fwd_bwd"], step_range="^fwd_bwd$")
    row = _steps_abstention(analysis)
    assert row["reason"].startswith("only 2 steps measured (fwd_bwd), at least 3 needed")
    assert "matched no annotation range" not in row["reason"]


def test_generated_two_generic_ranges_are_still_no_steps(tmp_path):
    """Two ranges of a generic step-like name ('iteration') name no step by themselves: no steps, as before."""
    analysis, _ = _loop(tmp_path, ["iteration", "iteration"])
    row = _steps_abstention(analysis)
    assert "no known step range" in row["reason"]
