"""The benchmark's generated shapes of issue 36 item 2 (benchmarks/shapes.py): CUDA-graph replays
traced per node (``graph``) and 8 devices with all-reduces (``tp8``), analyzed right.

The truth is read from the generated export's own rows with SQL and merged here in plain
Python (no tracetriage code): the kernel count, each device's busy time in the window, the
window, the steps, the graph launches per step, the collectives and their skew.
``check(path, spec)`` is what the benchmark's 1M files were checked with too."""

import sqlite3
import statistics
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import shapes  # noqa: E402

from tracetriage import analyze, open_case  # noqa: E402

K, R = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"


def _merged_ns(intervals, lo, hi) -> int:
    """Length of the union of [s, e) clipped to [lo, hi)."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi):
        if cur_e is None or s > cur_e:
            total += (cur_e - cur_s) if cur_e is not None else 0
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + ((cur_e - cur_s) if cur_e is not None else 0)


def truth(path, spec: shapes.Shape) -> dict:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        kernels = con.execute(f"SELECT start, end, deviceId, correlationId, shortName, graphNodeId FROM {K}").fetchall()
        calls = dict(con.execute("SELECT value, id FROM StringIds").fetchall())
        sync_ends = [e for (e,) in con.execute(f"SELECT end FROM {R} WHERE nameId = ? ORDER BY end",
                                               (calls["cudaStreamSynchronize_v3020"],))]
        graph_starts = [s for (s,) in con.execute(f"SELECT start FROM {R} WHERE nameId = ?",
                                                  (calls.get(shapes.GRAPH_LAUNCH, -1),))]
        graph_corr = {c for (c,) in con.execute(f"SELECT correlationId FROM {R} WHERE nameId = ?",
                                                (calls.get(shapes.GRAPH_LAUNCH, -1),))}
        ranges = con.execute("SELECT start, end FROM NVTX_EVENTS ORDER BY start").fetchall()
    if spec.nvtx:
        steps = [(s, e) for s, e in ranges]
    else:  # a step runs from one sync's end to the next's
        steps = list(zip(sync_ends[:-1], sync_ends[1:]))
    lo, hi = steps[0][0], steps[-1][1]
    devices = sorted({k[2] for k in kernels})
    allreduce = calls.get(shapes.ALLREDUCE)
    rounds: dict[int, list] = {}  # a collective's calls, one per device: they share their end
    for s, e, dev, _, name, _ in kernels:
        if name == allreduce and e > lo and s < hi:
            rounds.setdefault(e, []).append(s)
    per_step_graphs = [sum(s <= g < e for g in graph_starts) for s, e in steps]
    return {
        "kernels": len(kernels), "window": (lo, hi), "steps": [e - s for s, e in steps],
        "busy": {d: _merged_ns([(k[0], k[1]) for k in kernels if k[2] == d], lo, hi) for d in devices},
        "collectives": {d: sum(1 for k in kernels if k[2] == d and k[4] == allreduce and k[1] > lo and k[0] < hi)
                        for d in devices} if allreduce else {d: 0 for d in devices},
        "skews": sorted(max(v) - min(v) for v in rounds.values() if len(v) == len(devices)),
        "graph_launches_per_step": statistics.median(per_step_graphs),
        "graph_kernels_joined": sum(1 for k in kernels if k[3] in graph_corr and k[5] is not None),
    }


def check(path, spec: shapes.Shape) -> dict:
    """The analysis of ``path`` against the truth of its rows; returns the truth."""
    want = truth(path, spec)
    got = analyze(open_case([str(path)])).data
    assert sum(p["gpu_ops"] for p in got["processes"]) == want["kernels"]
    assert (got["window"]["start_ns"], got["window"]["end_ns"]) == want["window"]
    (process,) = got["processes"]
    assert process["steps"]["source"] == ("nvtx" if spec.nvtx else "sync")
    assert process["steps"]["durations_ns"] == want["steps"]
    assert process["steps"]["count"] == len(want["steps"])
    assert {d["ordinal"]: d["busy_ns"] for d in got["devices"]} == want["busy"]
    assert {d["ordinal"]: d["collective_count"] for d in got["devices"]} == want["collectives"]
    if spec.graph_kernels:
        assert want["graph_kernels_joined"] == want["kernels"]  # every kernel a node of a traced launch
        assert process["graph_launches_per_step"] == want["graph_launches_per_step"]
        assert process["launches_per_step"] == 0
    if spec.collective_every:
        skew = got["collective_skew"]
        assert skew["matched"] == len(want["skews"]) > 0
        assert skew["max_ns"] == want["skews"][-1]
        assert skew["p50_ns"] == statistics.median(want["skews"])
        assert skew["late_rank"]["device"].startswith(f"GPU{spec.devices - 1}/")  # the last launched
    return want


@pytest.mark.parametrize("name, n", [("graph", 12_000), ("tp8", 12_288)])
def test_a_generated_shape_is_analyzed_as_generated(tmp_path, name, n):
    spec = shapes.SHAPES[name]
    path = tmp_path / f"{name}.sqlite"
    shapes.build(path, n, shape=name)
    want = check(path, spec)
    assert len(want["steps"]) >= 20 and len(want["busy"]) == spec.devices


def test_graph_kernels_carry_their_replay_launch_and_node(tmp_path):
    """The schema nsys writes for kernels traced per graph node: each replay one cudaGraphLaunch whose
    correlationId its kernels carry, each kernel a graphNodeId (distinct within its replay) and graphId."""
    spec = shapes.SHAPES["graph"]
    path = tmp_path / "g.sqlite"
    shapes.build(path, 2_000, shape="graph")
    with sqlite3.connect(path) as con:
        per_launch = con.execute(f"SELECT correlationId, count(*), count(DISTINCT graphNodeId), count(graphId), "
                                 f"count(DISTINCT graphId) FROM {K} GROUP BY correlationId").fetchall()
        launches = con.execute(f"SELECT count(*) FROM {R} r JOIN StringIds s ON s.id = r.nameId "
                               "WHERE s.value = ?", (shapes.GRAPH_LAUNCH,)).fetchone()[0]
    assert len(per_launch) == launches == 2_000 // spec.graph_kernels
    assert {row[1:] for row in per_launch} == {(spec.graph_kernels, spec.graph_kernels, spec.graph_kernels, 1)}
    assert shapes.n_runtime(spec, 2_000) == launches + 2_000 // spec.sync_every


def test_collectives_need_whole_rounds_in_a_step(tmp_path):
    with pytest.raises(ValueError, match="multiple of 8 devices"):
        shapes.build(tmp_path / "x.sqlite", 1000, shape=shapes.Shape(devices=8, collective_every=4))
