"""Interval arithmetic and gap causes on small hand-built models."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracetriage.analyzers import intervals as iv
from tracetriage.analyzers.timeline import device_timeline
from tracetriage.model import API_CATEGORIES, COLLECTIVE_OPS, COPY_KINDS, GPU_KINDS, Trace, api_category


def brute_union_measure(pairs, lo, hi):
    covered = set()
    for s, e in pairs:
        covered.update(range(max(s, lo), min(e, hi)))
    return len(covered)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 60)), max_size=40), st.integers(0, 100), st.integers(1, 150))
def test_union_measure_matches_brute_force(raw, lo, width):
    pairs = [(s, s + d) for s, d in raw]
    hi = lo + width
    s = np.array([p[0] for p in pairs], dtype=np.int64)
    e = np.array([p[1] for p in pairs], dtype=np.int64)
    us, ue = iv.union(s, e)
    cs, ce = iv.clip(us, ue, lo, hi)
    assert iv.measure(cs, ce) == brute_union_measure(pairs, lo, hi)
    gs, ge = iv.complement(us, ue, lo, hi)
    assert iv.measure(gs, ge) == width - brute_union_measure(pairs, lo, hi)
    cov = iv.Coverage(us, ue)
    assert int(cov.overlap(np.array([lo]), np.array([hi]))[0]) == brute_union_measure(pairs, lo, hi)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 100), st.integers(1, 30)), max_size=15),
       st.lists(st.tuples(st.integers(0, 100), st.integers(1, 30)), max_size=15))
def test_subtract_matches_brute_force(a, b):
    A = [(s, s + d) for s, d in a]
    B = [(s, s + d) for s, d in b]
    a_s, a_e = iv.union(np.array([x[0] for x in A], np.int64), np.array([x[1] for x in A], np.int64))
    b_s, b_e = iv.union(np.array([x[0] for x in B], np.int64), np.array([x[1] for x in B], np.int64))
    xs, xe = iv.subtract(a_s, a_e, b_s, b_e)
    pa = set().union(*[set(range(s, e)) for s, e in A]) if A else set()
    pb = set().union(*[set(range(s, e)) for s, e in B]) if B else set()
    assert iv.measure(xs, xe) == len(pa - pb)


def make_trace(kernels, calls):
    """kernels: [(start, end)] on device 0 of pid 1; calls: [(start, end, api name)] on pid 1."""
    gpu = pd.DataFrame({
        "device": np.zeros(len(kernels), np.int32),
        "stream": np.full(len(kernels), 7, np.int64),
        "start": np.array([k[0] for k in kernels], np.int64),
        "end": np.array([k[1] for k in kernels], np.int64),
        "kind": pd.Categorical(["kernel"] * len(kernels), categories=GPU_KINDS),
        "name": pd.Categorical(["k"] * len(kernels)),
        "correlation": np.arange(len(kernels), dtype=np.int64),
        "pid": np.ones(len(kernels), np.int64),
        "collective": pd.Categorical([None] * len(kernels), categories=COLLECTIVE_OPS),
        "bytes": np.zeros(len(kernels), np.int64),
        "copy_kind": pd.Categorical([None] * len(kernels), categories=COPY_KINDS),
        "pageable": np.zeros(len(kernels), bool),
        "in_graph": np.zeros(len(kernels), bool),
    })
    api = pd.DataFrame({
        "pid": np.ones(len(calls), np.int64),
        "tid": np.ones(len(calls), np.int64),
        "start": np.array([c[0] for c in calls], np.int64),
        "end": np.array([c[1] for c in calls], np.int64),
        "name": pd.Categorical([c[2] for c in calls]),
        "category": pd.Categorical([api_category(c[2]) for c in calls], categories=API_CATEGORIES),
        "correlation": np.arange(len(calls), dtype=np.int64),
    })
    t = Trace(path="<hand-built>", format="test", gpu=gpu, api=api)
    t.devices = pd.DataFrame({"pid": [1], "ordinal": [0], "gpu_index": [0], "name": ["test"], "uuid": [""], "sm_count": [-1],
                              "memory_bytes": [-1]})
    return t


def test_gap_inside_stream_synchronize_is_sync():
    t = make_trace([(0, 100), (300, 400)], [(90, 290, "cudaStreamSynchronize")])
    measured = device_timeline(t, 0, 0, 400)
    assert measured.busy_pct == 50.0
    assert measured.gaps.by_cause["sync"] == 190
    assert measured.gaps.by_cause["host"] == 10
    assert measured.gaps.top[0]["cause"] == "sync"


def test_gap_between_two_launch_calls_is_launch_and_host():
    # the host spends the gap inside launch calls, with a little Python between them
    t = make_trace([(0, 10), (60, 70)], [(5, 30, "cudaLaunchKernel"), (35, 58, "cuLaunchKernelEx")])
    measured = device_timeline(t, 0, 0, 70)
    by = measured.gaps.by_cause
    assert by["launch"] == (30 - 10) + (58 - 35)
    assert by["host"] == 50 - by["launch"]
    assert measured.gaps.top[0]["cause"] == "launch"


def test_gap_with_no_cuda_call_is_host():
    t = make_trace([(0, 10), (110, 120)], [(0, 5, "cudaLaunchKernel"), (105, 109, "cudaLaunchKernel")])
    measured = device_timeline(t, 0, 0, 120)
    assert measured.gaps.by_cause["host"] == 100 - 4 + 0  # 10..110 minus the launch at 105..109
    assert measured.gaps.by_cause["launch"] == 4


def test_no_api_calls_means_unknown_not_host():
    t = make_trace([(0, 10), (110, 120)], [])
    measured = device_timeline(t, 0, 0, 120)
    assert measured.gaps.by_cause["unknown"] == 100 and measured.gaps.by_cause["host"] == 0


def test_api_categories():
    assert api_category("cudaLaunchKernel") == "launch"
    assert api_category("cuLaunchKernelEx") == "launch"
    assert api_category("hipExtModuleLaunchKernel") == "launch"
    assert api_category("cudaGraphLaunch") == "graph_launch"
    assert api_category("hipGraphLaunch") == "graph_launch"
    assert api_category("cudaStreamSynchronize") == "sync"
    assert api_category("cuCtxSynchronize") == "sync"
    assert api_category("cudaStreamWaitEvent") == "other"  # not host-blocking
    assert api_category("cudaMemcpyAsync") == "memcpy_async"
    assert api_category("cudaMemcpy") == "memcpy_sync"
    assert api_category("cuMemcpyDtoH_v2") == "memcpy_sync"
    assert api_category("cudaMalloc") == "alloc"
    assert api_category("cudaLaunchKernel_ptsz") == "launch"


def test_streamed_timeline_equals_one_pass(analyses, monkeypatch):
    """Slicing the device timeline (as on 10M-kernel traces) changes no number."""
    import json

    from conftest import BUNDLES

    from tracetriage import analyze, open_case
    from tracetriage.analyzers import timeline
    from tracetriage.reports import render

    monkeypatch.setattr(timeline, "CHUNK_INTERVALS", 97)
    for name in ("eager_decode", "tp8_cross_island", "prefill_stall", "healthy"):
        sliced = json.loads(render(analyze(open_case([BUNDLES / name])), "json"))
        whole = json.loads(render(analyses[name], "json"))
        assert sliced == whole, name


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 40)), min_size=1, max_size=60),
       st.integers(1, 9), st.integers(0, 50), st.integers(200, 400))
def test_streamed_gaps_match_brute_force(raw, chunk, lo, hi):
    import tracetriage.analyzers.timeline as timeline

    kernels = sorted((s, s + d) for s, d in raw)
    t = make_trace(kernels, [(0, 1, "cudaLaunchKernel")])
    old = timeline.CHUNK_INTERVALS
    timeline.CHUNK_INTERVALS = chunk
    try:
        spans = (np.array([lo + 10, lo + 100]), np.array([lo + 60, lo + 150]))  # two long steps
        measured = device_timeline(t, 0, lo, hi, spans=spans)
        # cut in two halves timed on two threads: the very same result
        old_min, old_window = timeline.PARALLEL_MIN_ROWS, timeline.SPLIT_WINDOW
        timeline.PARALLEL_MIN_ROWS, timeline.SPLIT_WINDOW = 0, chunk
        try:
            halves = device_timeline(t, 0, lo, hi, spans=spans)
        finally:
            timeline.PARALLEL_MIN_ROWS, timeline.SPLIT_WINDOW = old_min, old_window
        assert halves == measured
    finally:
        timeline.CHUNK_INTERVALS = old
    covered = set()
    for s, e in kernels:
        covered.update(range(max(s, lo), min(e, hi)))
    assert measured.busy_ns == len(covered)
    in_spans = {x for x in covered if lo + 10 <= x < lo + 60 or lo + 100 <= x < lo + 150}
    assert measured.busy_in_spans_ns == len(in_spans)
    # gaps = maximal runs of uncovered points in [lo, hi)
    gaps, run, starts = [], 0, []
    for x in range(lo, hi):
        if x in covered:
            if run:
                gaps.append(run)
            run = 0
        else:
            if not run:
                starts.append(x)
            run += 1
    if run:
        gaps.append(run)
    assert measured.gaps.count == len(gaps)
    # the ten longest gaps, ties to the earliest, across slice boundaries
    want = sorted(zip(gaps, starts), key=lambda g: (-g[0], g[1]))[:10]
    assert [(g["length_ns"], g["start_ns"]) for g in measured.gaps.top] == want
    assert measured.gaps.total_ns == sum(gaps)
    assert measured.gaps.max_ns == (max(gaps) if gaps else 0)


def test_top_gaps_ties_go_to_the_earliest():
    # 15 equal gaps of 10 ns and one longer: the listed ten after the longest are the earliest
    kernels = [(i * 20, i * 20 + 10) for i in range(16)]
    kernels[8] = (160, 165)  # makes the gap after it 15 ns long
    t = make_trace(kernels, [(0, 1, "cudaLaunchKernel")])
    measured = device_timeline(t, 0, 0, 320)
    top = measured.gaps.top
    assert top[0]["length_ns"] == 15
    assert [g["start_ns"] for g in top[1:]] == sorted(g["start_ns"] for g in top[1:])
    assert top[1]["start_ns"] == 10


def test_selected_counts_per_step_equal_a_copied_search():
    """Counting masked rows per step in place (running counts over slices) gives what
    copying the rows out and searching them gives, across slice boundaries and unordered."""
    from tracetriage.analyzers import steps as sp

    rng = np.random.default_rng(5)
    starts = np.sort(rng.integers(0, 10_000, 5000))
    mask = rng.random(5000) < 0.4
    edges = np.sort(rng.integers(-50, 10_050, 81))
    steps = sp.Steps(1, "sync", edges[:-1], edges[1:], np.zeros(80, bool))
    expected = sp.per_step_counts(starts[mask], steps)
    old = sp.Selected.CHUNK
    try:
        sp.Selected.CHUNK = 333
        assert sp.Selected(starts, mask).per_step(steps).tolist() == expected.tolist()
        shuffled = rng.permutation(5000)
        assert sp.Selected(starts[shuffled], mask[shuffled]).per_step(steps).tolist() == expected.tolist()
    finally:
        sp.Selected.CHUNK = old
    assert expected.sum() > 0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 30)), max_size=30),
       st.lists(st.integers(-10, 260), min_size=1, max_size=20))
def test_measure_before_matches_coverage(raw, times):
    s, e = iv.union(np.array([a for a, _ in raw], np.int64), np.array([a + d for a, d in raw], np.int64))
    t = np.array(times, np.int64)
    assert iv.measure_before(s, e, t).tolist() == iv.Coverage(s, e).at(t).tolist()
    assert iv.measure_before(s, e, t).tolist() == [sum(max(0, min(b, x) - a) for a, b in zip(s.tolist(), e.tolist()))
                                                   for x in times]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 400), st.integers(0, 30)), max_size=12),
       st.lists(st.tuples(st.integers(0, 400), st.integers(1, 15)), min_size=1, max_size=120))
def test_overlap_with_disjoint_queries_matches_the_full_measure(cover, gaps):
    """The few-intervals path (only the gaps an interval touches are measured) gives the
    same overlaps as measuring every gap."""
    s, e = iv.union(np.array([a for a, _ in cover], np.int64), np.array([a + d for a, d in cover], np.int64))
    gs, ge = iv.union(np.array([a for a, _ in gaps], np.int64), np.array([a + d for a, d in gaps], np.int64))
    c = iv.Coverage(s, e)
    assert c.overlap_disjoint(gs, ge).tolist() == c.overlap(gs, ge).tolist()


def test_kernel_median_with_a_kernel_longer_than_int32_nanoseconds():
    """The median's buffer widens to int64 when a kernel runs past 2^31 ns (2.1 s)."""
    from tracetriage.analyzers import kernels as kern

    long = 3_000_000_000
    t = make_trace([(0, 10), (20, 25), (30, 30 + long), (40, 40 + long), (50, 50 + long)], [(0, 1, "cudaLaunchKernel")])
    old = kern.SUMMARY_CHUNK
    try:
        kern.SUMMARY_CHUNK = 2  # the long kernels arrive after the buffer started as int32
        assert kern.kernel_duration_median(t, 0, 10**10) == long
    finally:
        kern.SUMMARY_CHUNK = old


CALL_NAMES = ["cudaStreamSynchronize", "cudaMemcpy", "cudaLaunchKernel", "cudaGraphLaunch", "cudaMalloc",
              "cudaMemcpyAsync", "cudaEventRecord", "cudaStreamWaitEvent"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 40)), min_size=1, max_size=40),
       st.lists(st.tuples(st.integers(0, 320), st.integers(-3, 60), st.integers(0, len(CALL_NAMES) - 1)), max_size=40),
       st.integers(1, 9), st.integers(0, 50), st.integers(200, 400))
def test_compiled_sweep_attributes_like_numpy(raw, calls, chunk, lo, hi):
    """The compiled gap attribution (analyzers/_sweep.c) gives the numpy path's numbers:
    overlapping, touching, zero-length and inverted calls of every cause, across slices."""
    import tracetriage.analyzers.timeline as timeline

    if timeline._sweep is None:
        pytest.skip("the C extension was not built (no compiler at install)")
    kernels = sorted((s, s + d) for s, d in raw)
    t = make_trace(kernels, sorted((s, s + d, CALL_NAMES[k]) for s, d, k in calls))
    old = timeline.CHUNK_INTERVALS, timeline.SWEEP
    timeline.CHUNK_INTERVALS = chunk
    try:
        timeline.SWEEP = True
        compiled = device_timeline(t, 0, lo, hi)
        timeline.SWEEP = False
        numpy_path = device_timeline(t, 0, lo, hi)
    finally:
        timeline.CHUNK_INTERVALS, timeline.SWEEP = old
    assert compiled == numpy_path


def test_compiled_sweep_refuses_calls_out_of_order():
    """Calls not in start order are not the sweep's case: it says so, and numpy is used."""
    import tracetriage.analyzers.timeline as timeline

    if timeline._sweep is None:
        pytest.skip("the C extension was not built (no compiler at install)")
    gs, ge = np.array([10, 50], np.int64), np.array([20, 60], np.int64)
    out = np.zeros((6, 2), np.int64)
    starts, ends = np.array([30, 5], np.int64), np.array([40, 55], np.int64)
    assert timeline._sweep.attribute(gs, ge, starts, ends, np.zeros(2, np.int8), np.array([0, -1], np.int8), 0, 2, out) == -1
    assert timeline._sweep.attribute(gs, ge, starts[::-1].copy(), ends[::-1].copy(), np.zeros(2, np.int8),
                                     np.array([0, -1], np.int8), 0, 2, out) == 0
    assert out[0].tolist() == [10, 5] and out[4].tolist() == [0, 5]
