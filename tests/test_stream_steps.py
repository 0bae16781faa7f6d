"""The steps and the window streamed (analyzers/stream_steps.py, stream_phases.py; issue 36 item 3):
``analyze_streamed(db)`` with nothing from the whole-table model finds the window, each process's
long steps, every device timeline and the kernel summary equal to analyze_trace's, with small chunks
forced, on the generated shapes and the real nsys exports; what it cannot stream exactly it refuses."""

import dataclasses
import sqlite3
import sys
from dataclasses import replace

import numpy as np
import pytest
from conftest import ROOT
from test_stream_timeline import REAL_NSYS, WAITS  # the real exports, and those with stream-wait calls

sys.path.insert(0, str(ROOT / "benchmarks"))
import shapes  # noqa: E402

from tracetriage.analyzers import analysis, phases  # noqa: E402
from tracetriage.analyzers import kernels as kern  # noqa: E402
from tracetriage.analyzers import steps as st  # noqa: E402
from tracetriage.analyzers import stream_steps as ss  # noqa: E402
from tracetriage.analyzers import stream_timeline as stl  # noqa: E402
from tracetriage.case import open_export  # noqa: E402
from tracetriage.parsers import btree, nsys  # noqa: E402

WINDOW_FIELDS = ("start_ns", "end_ns", "duration_ns", "source", "warmup_steps_excluded", "setup_excluded_ns")


def whole(path):
    """analyze_trace's window, long steps, timelines and kernel summary on the whole-table model."""
    trace = nsys.parse(str(path))
    finder = phases.Finder(trace)
    window, _ = analysis._window(trace, finder.steps(analysis._trace_pids(trace), None), finder)
    lo, hi, spans = stl.whole_table_window(trace)
    timelines, _ = stl.whole_table_timelines(trace, lo, hi, spans)
    return ({f: getattr(window, f) for f in WINDOW_FIELDS}, _plain(spans),
            {k: dataclasses.asdict(v) for k, v in timelines.items()},
            (kern.kernel_summary(trace, lo, hi), kern.kernel_duration_median(trace, lo, hi)))


def _plain(spans):
    return {pid: (s.tolist(), e.tolist()) for pid, (s, e) in spans.items()}


def streamed(path, chunk_rows, lookahead):
    with open_export(path) as db:
        got = stl.analyze_streamed(db, chunk_rows=chunk_rows, lookahead=lookahead)
    return got, ({f: getattr(got.window, f) for f in WINDOW_FIELDS}, _plain(got.window.spans),
                 {k: dataclasses.asdict(v) for k, v in got.timelines.items()}, (got.kernels, got.kernel_median_ns))


LATE = replace(shapes.SHAPES["sync2dev"], late_rows=10_000, late_by=3_000)


@pytest.mark.parametrize("direct", [False, True], ids=["sql", "btree"])
@pytest.mark.parametrize("name", ["decode", "sync2dev", "tp8", "late", "graph"])
def test_generated_shapes_stream_their_steps_to_the_same_numbers(tmp_path, monkeypatch, name, direct):
    if direct:
        monkeypatch.setattr(btree, "MIN_BYTES", 0)
    path = tmp_path / f"{name}.sqlite"
    shapes.build(path, 20_000, shape=LATE if name == "late" else name)
    want = whole(path)
    got, numbers = streamed(path, 1_000, 4_000)
    assert numbers == want
    assert want[0]["source"] == ("steps:nvtx" if name in ("decode", "tp8") else "steps:sync")
    assert got.chunks >= 4
    # NVTX steps: one pass; steps from the syncs: the runtime table first, then one timeline pass
    assert got.passes == (("timeline",) if name in ("decode", "tp8") else ("runtime", "timeline"))




@pytest.mark.parametrize("path", REAL_NSYS, ids=lambda p: p.name)
def test_real_exports_stream_their_window_to_the_same_numbers(path):
    if path.name in WAITS:  # stream-wait calls: joined for dependency waits; their rows come up to ~6,800 late
        if path.name.startswith("nsys2026.2_2xH100_fastvideo"):  # no steps, an NVTX range from before the first kernel
            with pytest.raises(stl.NotStreamable, match="warm-up"):
                streamed(path, 7, 10_000)
            return
        got, numbers = streamed(path, 7, 10_000)
        assert numbers == whole(path)
        return
    want = whole(path)
    got, numbers = streamed(path, 7, 20)
    assert numbers == want
    # these have no steps: the window is the GPU activity's, its facts from a kernel pass before the timeline
    assert want[0]["source"] == "gpu_activity" and got.passes[:2] == ("runtime", "kernels")


def test_real_exports_cover_the_phase_rules():
    """The real exports above exercise each rule's streamed facts: a set-up cut (the window starts after the
    first kernel), a tear-down or tail cut (it ends before the last operation), steps looked for within it."""
    names = {p.name: p for p in REAL_NSYS}
    if "nsys2026.1_tiny_cuda_app_full_export.sqlite" not in names:
        pytest.skip("real samples absent")
    cuts = set()
    for name in ("nsys2021.2_1xRTX6000_legacy_schema_no_metadata.sqlite", "nsys2026.1_tiny_cuda_app_full_export.sqlite",
                 "nsys2025.5_2xRTX3090_cuda_uvm_osrt_sampling.sqlite"):
        with open_export(names[name]) as db:
            got = stl.analyze_streamed(db, chunk_rows=7, lookahead=20)
        trace = nsys.parse(str(names[name]))
        span = phases._Activity(trace).span
        if got.window.start_ns > span[0]:
            cuts.add("setup")
        if got.window.end_ns < span[1]:
            cuts.add("teardown")
        if "overlap" in got.passes:
            cuts.add("within")
    assert cuts == {"setup", "teardown", "within"}


def _move_kernels_later(path, count: int, by_ns: int) -> None:
    db = sqlite3.connect(path)
    top = db.execute("SELECT max(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    cols = [r[1] for r in db.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")]
    moved = ", ".join(f"{c} + {by_ns}" if c in ("start", "end") else c for c in cols)
    db.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL ({', '.join(cols)}) SELECT {moved} "
               f"FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid > {top - count}")
    db.commit()
    db.close()


def test_steps_guessed_before_the_kernels_are_checked_after_them(tmp_path):
    """Steps from the syncs are taken before the kernels are read, their coverage of the GPU work assumed;
    kernels long after the last sync make them cover too little: the window is the GPU activity's, and the
    timeline pass runs again on it: the numbers equal the whole-table path's."""
    path = tmp_path / "tail.sqlite"
    shapes.build(path, 5_000, shape="sync2dev")
    _move_kernels_later(path, 50, 10**9)  # 50 kernels 1 s later: the steps cover under half of the GPU span
    want = whole(path)
    assert want[0]["source"] == "gpu_activity"
    got, numbers = streamed(path, 500, 2_000)
    assert numbers == want
    assert got.passes == ("runtime", "timeline", "timeline")


def test_launches_per_step_from_counts_equal_the_launches_themselves():
    """RuntimeFacts' launch counts between blocking ends, fed in pieces with their watermarks, give
    steps.Selected's per-step counts for steps between any two blocking ends."""
    rng = np.random.default_rng(4)
    n = 3_000
    start = np.sort(rng.integers(0, 10**7, n))
    end = start + rng.integers(0, 20_000, n)
    cat = rng.choice([st_code("launch"), st_code("sync"), st_code("memcpy_sync"), st_code("other")], n, p=[.7, .1, .05, .15])
    facts = ss.RuntimeFacts()
    for k in range(0, n, 97):
        sl = slice(k, k + 97)
        mark = int(start[k + 97]) if k + 97 < n else None
        facts.feed({"start": start[sl], "end": end[sl], "pid": np.full(start[sl].size, 5)}, cat[sl], mark)
    blocking = np.isin(cat, [st_code(c) for c in st.BLOCKING])
    ends = np.sort(end[blocking])
    assert np.array_equal(np.sort(facts.blocking(5)[1]), ends)
    for lo_at, hi_at in [(0, ends.size - 1), (3, 40), (17, ends.size - 5)]:
        steps = st.Steps(5, "sync", ends[lo_at:hi_at], ends[lo_at + 1:hi_at + 1])
        want = st.Selected(start, cat == st_code("launch")).per_step(steps)
        assert np.array_equal(facts.launches(5).per_step(steps), want)


def st_code(category: str) -> int:
    from tracetriage.model import API_CATEGORIES

    return API_CATEGORIES.index(category)


def _no_steps(path, n: int = 3_000) -> None:
    """A decode export with 3 syncs and no NVTX: no steps, the window is the GPU activity's."""
    shapes.build(path, n, shape=replace(shapes.SHAPES["decode"], nvtx=False, sync_every=1_000))


def test_without_steps_the_activity_window_streams_and_a_warm_up_range_is_refused(tmp_path):
    path = tmp_path / "nosteps.sqlite"
    _no_steps(path)
    want = whole(path)
    assert want[0]["source"] == "gpu_activity"
    got, numbers = streamed(path, 100, 300)
    assert numbers == want and got.passes == ("runtime", "kernels", "timeline")
    # an NVTX range from before the first kernel into the capture could end a warm-up pass: that rule joins
    # each kernel to its launch call, which the stream does not keep: refused, not guessed
    db = sqlite3.connect(path)
    lo, hi, gtid = db.execute("SELECT min(start), max(end), min(globalTid) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
    db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES (?, ?, 59, 'load', ?, 0)",
               (lo - 1_000, (lo + hi) // 2, gtid))
    db.commit()
    db.close()
    with pytest.raises(stl.NotStreamable, match="warm-up"):
        streamed(path, 100, 300)


def test_kernel_facts_hold_the_stretches_the_phase_rules_can_take():
    """KernelFacts fed start-ordered parts of random kernels (overlapping, touching, zero-length, a few long
    stalls) keeps exactly the stretches that pass the set-up rule's filter with their true running maxima,
    the last RING stretches, and at each the kernels before and the kernel time before, as the whole
    union of the kernels gives them."""
    from tracetriage.analyzers import intervals as iv
    from tracetriage.analyzers import stream_phases as sp

    rng = np.random.default_rng(8)
    for trial in range(6):
        n = 4_000
        gaps = rng.choice([0, 0, 1, 50, 400, 3_000], n) * rng.integers(1, 4, n)
        gaps[rng.choice(n, 4, replace=False)] = rng.integers(10**6, 10**8, 4)  # stalls
        s = np.cumsum(gaps) + 10**6
        e = s + rng.choice([0, 10, 300, 2_000, 9_000], n)
        names = rng.integers(-1, 40, n)
        facts = sp.KernelFacts()
        at = 0
        while at < n:
            k = int(rng.integers(1, 700))
            facts.feed(s[at:at + k], e[at:at + k], names[at:at + k])
            at += k
        us, ue = iv.union(s, e)
        keep = ue[:-1] < us[1:]
        gs, ge = ue[:-1][keep], us[1:][keep]
        length = ge - gs
        later = np.zeros(length.size, np.int64)
        later[:-1] = np.maximum.accumulate(length[::-1])[::-1][1:]
        passing = (length >= phases.SETUP_STRETCH_FACTOR * later) | (length >= phases.STALL_MIN_SHARE * (e.max() - gs))
        c = facts.cand
        assert c["s"].tolist() == gs[passing].tolist() and c["later"].tolist() == later[passing].tolist(), trial
        assert facts.ring["s"].tolist() == gs[-sp.RING:].tolist()
        before = np.concatenate(([0], np.cumsum(ue - us)))
        for rows in (c, facts.ring):
            idx = np.searchsorted(gs, rows["s"])
            assert rows["ks"].tolist() == np.searchsorted(s, rows["s"], "left").tolist()
            assert rows["ke"].tolist() == np.searchsorted(s, rows["e"], "left").tolist()
            assert rows["m"].tolist() == before[np.searchsorted(us, rows["e"], "left")].tolist()
            assert (length[idx] == rows["n"]).all()
        let_go = length[:max(0, length.size - sp.RING)]  # the longest let go from the ring after each candidate
        want_gone = [int(let_go[gs[:let_go.size] > end].max(initial=0)) for end in c["e"].tolist()]
        assert c["gone"].tolist() == want_gone
        first = {}
        for code, t in zip(names.tolist(), s.tolist()):
            first.setdefault(code, t)
        assert facts.first_start == first


BUNDLE_TRACES = sorted((ROOT / "samples" / "bundles").glob("*/trace.sqlite"))


@pytest.mark.parametrize("path", BUNDLE_TRACES, ids=lambda p: p.parent.name)
def test_generated_bundles_stream_to_the_same_numbers_or_are_refused_for_their_graphs(path):
    """Every nsys bundle with chunks of 7 rows: the window, long steps, timelines and kernel summary equal to
    the whole-table path's (CUDA graph replays too: their dependency waits joined, steps from the replays), or
    refused where the window rests on the phase rules and graph replays, which those rules count as kernels."""
    from tracetriage.model import is_kind

    try:
        got, numbers = streamed(path, 7, 10_000)
    except stl.NotStreamable as refused:
        assert path.parent.name == "setup_then_starved", refused
        assert str(refused) == "graph replays in a capture without steps (the phase rules' kernels)"
        assert is_kind(nsys.parse(str(path)).gpu, "graph").any()
        return
    want = whole(path)
    assert numbers == want
    if path.parent.name in ("host_starved", "pageable_readback"):  # steps from the graph replays
        assert want[0]["source"] == got.window.source == "steps:graph_launch"
