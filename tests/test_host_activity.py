"""What the host does while the GPU waits (analyzers/host_activity.py): the rule on hand-built models, on the
generated num_workers=0 training run, and on real captures."""

import gzip
import json
import random

import numpy as np
import pandas as pd
import pytest
from conftest import BUNDLES, REAL, real, truth
from hypothesis import given, settings
from hypothesis import strategies as st
from test_timeline import make_trace

from tracetriage import analyze, open_case
from tracetriage.analyzers import host_activity
from tracetriage.analyzers.steps import Steps
from tracetriage.errors import MissingDataError

LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def with_ranges(trace, ranges, domain="user_annotation"):
    """The hand-built trace with host ranges (start, end, name[, tid]) of pid 1."""
    trace.ranges = pd.DataFrame({
        "pid": np.ones(len(ranges), np.int64), "tid": np.array([r[3] if len(r) > 3 else 1 for r in ranges], np.int64),
        "start": np.array([r[0] for r in ranges], np.int64), "end": np.array([r[1] for r in ranges], np.int64),
        "name": pd.Categorical([r[2] for r in ranges]), "domain": pd.Categorical([domain] * len(ranges))})
    return trace


def by_name(trace, lo, hi, steps=None):
    got = host_activity.idle_by_host(trace, 0, lo, hi, host_activity.HostRanges(trace, 1), steps)
    return got, {row["name"]: row for row in got.ranges}


def test_a_named_range_takes_the_idle_time_of_the_operators_inside_it():
    # kernels 0-100 and 400-500; the gap 100-400 lies in the DataLoader range (120-390) whose collate op
    # (150-300) is nested inside it; ProfilerStep#1 covers everything and is never the answer
    trace = with_ranges(make_trace([(0, 100), (400, 500)], [(390, 398, "cudaLaunchKernel")]),
                        [(0, 500, "ProfilerStep#1"), (120, 390, LOADER), (150, 300, "aten::stack")])
    got, rows = by_name(trace, 0, 500)
    assert set(rows) == {LOADER}
    assert rows[LOADER]["idle_ns"] == 270 and rows[LOADER]["gaps"] == 1
    assert rows[LOADER]["pct_of_window"] == 54.0
    assert got.idle_ns == 300 and got.attributed_ns == 270
    assert got.host_code_idle_ns == 300 - 8  # the launch call 390-398 is not host code
    assert rows[LOADER]["host_code_ns"] == 270


def test_a_range_enclosing_a_whole_step_is_left_out():
    # "train" spans both steps: it names the loop, not what the host does in the gap
    trace = with_ranges(make_trace([(0, 100), (300, 400)], []), [(0, 400, "train"), (100, 250, "log_metrics")])
    steps = Steps(1, "nvtx", np.array([0, 200], np.int64), np.array([200, 400], np.int64), np.zeros(2, bool))
    _, rows = by_name(trace, 0, 400, steps)
    assert set(rows) == {"log_metrics"}
    assert rows["log_metrics"]["idle_ns"] == 150


def test_two_threads_never_count_one_nanosecond_twice():
    trace = with_ranges(make_trace([(0, 100), (300, 400)], []), [(100, 250, "load", 1), (150, 300, "checkpoint", 2)])
    got, rows = by_name(trace, 0, 400)
    assert rows["load"]["idle_ns"] == 50 and rows["checkpoint"]["idle_ns"] == 150  # the later-started range, once
    assert got.attributed_ns == got.idle_ns == 200


def test_the_most_specific_named_range_takes_the_idle_time():
    """Trial #4 (dp2_late_rank): a log_metrics range inside a train_step range that is not a known step
    name: the GPU idle under log_metrics is log_metrics', not the outer range's."""
    trace = with_ranges(make_trace([(0, 100), (400, 500)], []),
                        [(0, 500, "train_step"), (150, 350, "log_metrics"), (200, 250, "format_line")])
    _, rows = by_name(trace, 0, 1000)
    assert rows["log_metrics"]["idle_ns"] == 150 and rows["format_line"]["idle_ns"] == 50
    assert rows["train_step"]["idle_ns"] == 100  # 100-150 and 350-400: train_step's own code


def test_operators_go_to_the_outermost_operator():
    """Operators are not the program's names: an aten::linear's aten::mm is its implementation."""
    trace = with_ranges(make_trace([(0, 100), (400, 500)], []),
                        [(100, 400, "aten::linear"), (150, 300, "aten::mm")])
    _, rows = by_name(trace, 0, 500)
    assert set(rows) == {"aten::linear"} and rows["aten::linear"]["idle_ns"] == 300


def test_python_frames_name_only_what_the_ranges_left():
    trace = with_ranges(make_trace([(0, 100), (300, 400)], []), [(100, 200, "forward")])
    trace.meta["python_frames"] = [[1, 50, 350, "train.py(10): main_loop"]]
    _, rows = by_name(trace, 0, 400)
    assert rows["forward"]["idle_ns"] == 100 and rows["forward"]["source"] == "user_annotation"
    assert rows["train.py(10): main_loop"]["idle_ns"] == 100 and rows["train.py(10): main_loop"]["source"] == "python"


def test_an_os_call_counts_only_on_a_thread_that_launches_work():
    trace = make_trace([(0, 100), (300, 400)], [(290, 295, "cudaLaunchKernel")])
    trace.meta["host_calls"] = [[1, 1, 100, 200, "read"], [1, 7, 100, 300, "poll"]]  # tid 7 launches nothing
    _, rows = by_name(trace, 0, 400)
    assert set(rows) == {"read"} and rows["read"]["source"] == "osrt"


def test_emit_nvtx_operator_ranges_are_one_row_per_operator():
    trace = with_ranges(make_trace([(0, 10), (100, 110), (200, 210)], []),
                        [(10, 100, "aten::add, seq = 4, op_id = 9"), (110, 200, "aten::add, seq = 5, op_id = 12")], "default")
    _, rows = by_name(trace, 0, 210)
    assert rows["aten::add"]["idle_ns"] == 180 and rows["aten::add"]["gaps"] == 2


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 300), st.integers(1, 40)), min_size=1, max_size=12),
       st.lists(st.tuples(st.integers(0, 300), st.integers(1, 120), st.integers(0, 3)), min_size=1, max_size=10))
def test_idle_per_range_matches_brute_force(kernels, ranges):
    """Every idle ns goes to the covering named range that started last (the shortest among equal starts, the
    one recorded last among equal spans)."""
    lo, hi = 0, 350
    trace = with_ranges(make_trace([(s, s + d) for s, d in kernels], []),
                        [(s, s + d, f"r{name}") for s, d, name in ranges])
    busy = set()
    for s, d in kernels:
        busy.update(range(s, s + d))
    expected: dict[str, int] = {}
    for t in range(lo, hi):
        if t in busy:
            continue
        covering = [(s, -d, index, f"r{name}") for index, (s, d, name) in enumerate(ranges) if s <= t < s + d]
        if covering:
            name = max(covering)[3]  # equal spans: the one recorded last
            expected[name] = expected.get(name, 0) + 1
    got, rows = by_name(trace, lo, hi)
    assert {name: row["idle_ns"] for name, row in rows.items()} == expected  # four names: all under TOP_RANGES
    assert got.attributed_ns == sum(expected.values())
    assert got.idle_ns == hi - lo - len({t for t in busy if lo <= t < hi})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 400), st.integers(1, 30)), min_size=1, max_size=15),
       st.lists(st.tuples(st.integers(0, 400), st.integers(-5, 90)), min_size=1, max_size=25),
       st.booleans(), st.sampled_from([2, 3, 1 << 18]))
def test_idle_in_calls_is_the_brute_force_measure(gaps, calls, in_order, slice_rows):
    """The gaps' measure inside the union of the calls: the compiled sweep (slices of gaps, the calls
    that can reach each) and the numpy path give the nanoseconds counted one by one; calls overlapping,
    nested, touching, empty, ending before they start, out of start order (the sweep declines)."""
    starts = sorted({s for s, _ in gaps})
    gap_s, gap_e = [], []
    for s, length in zip(starts, (length for _, length in gaps)):
        if not gap_e or s >= gap_e[-1]:
            gap_s.append(s)
            gap_e.append(s + length)
    calls = sorted(calls) if in_order else calls
    call_s = np.array([s for s, _ in calls], np.int64)
    call_e = np.array([s + d for s, d in calls], np.int64)
    inside = {t for s, d in calls for t in range(s, s + d)}  # an end before its start: empty
    want = sum(1 for s, e in zip(gap_s, gap_e) for t in range(s, e) if t in inside)
    gs, ge = np.array(gap_s, np.int64), np.array(gap_e, np.int64)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(host_activity.iv, "SLICE", slice_rows)
        assert host_activity.idle_in_calls(gs, ge, call_s, call_e) == want
        assert host_activity.idle_in_calls(gs, ge, call_s, call_e, sweep=False) == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 40)), min_size=1, max_size=30),
       st.lists(st.tuples(st.integers(0, 320), st.integers(-3, 60), st.integers(0, 7)), max_size=30),
       st.lists(st.tuples(st.integers(0, 320), st.integers(1, 120), st.sampled_from(["a", "b", "aten::mm"])), max_size=6),
       st.integers(1, 9), st.integers(0, 50), st.integers(200, 400), st.booleans())
def test_idle_by_host_reads_the_timelines_sweep_as_its_own(raw, calls, ranges, chunk, lo, hi, sweep):
    """The idle ns and the idle inside the process's calls that the timeline's pass measured on its gaps
    (the compiled sweep's extra union of every call, or numpy) are what idle_by_host measures itself
    over the gaps it finds (host_activity._device_gaps + idle_in_calls): with and without ranges that
    name gaps, calls of every cause overlapping, empty, inverted, dependency waits cutting the gaps'
    host part, across slices."""
    from test_timeline import CALL_NAMES

    from tracetriage.analyzers import timeline

    kernels = sorted((s, s + d) for s, d in raw)
    trace = with_ranges(make_trace(kernels, sorted((s, s + d, CALL_NAMES[k]) for s, d, k in calls)),
                        [(s, s + d, name) for s, d, name in ranges])
    with pytest.MonkeyPatch.context() as m:
        m.setattr(timeline, "CHUNK_INTERVALS", chunk)
        m.setattr(timeline, "SWEEP", sweep)
        times = timeline.device_timeline(trace, 0, lo, hi)
    gap_s, gap_e = host_activity._device_gaps(trace, 0, lo, hi, 1)
    assert times.gaps.total_ns == int((gap_e - gap_s).sum())
    call_s, call_e = trace.api["start"].to_numpy(), trace.api["end"].to_numpy()
    assert times.idle_in_any_call_ns == (host_activity.idle_in_calls(gap_s, gap_e, call_s, call_e) if calls else 0)
    hosts = host_activity.HostRanges(trace, 1)
    assert host_activity.idle_by_host(trace, 0, lo, hi, hosts, None, timeline=times) == \
        host_activity.idle_by_host(trace, 0, lo, hi, host_activity.HostRanges(trace, 1), None)


def test_generated_num_workers_0_run_is_starved_by_data_loading():
    """The generator's truth: the GPU idle under the DataLoader range, and the verdict an engineer gives."""
    expected = truth("data_loader_starved")
    analysis = analyze(open_case([BUNDLES / "data_loader_starved"]))
    device = analysis.data["devices"][0]
    top = device["idle_by_host"]["ranges"][0]
    assert top["name"] == LOADER
    assert top["pct_of_window"] == pytest.approx(expected["idle_by_host_range"][LOADER]["pct_of_window"], abs=0.5)
    finding = analysis.data["findings"][0]
    assert finding["id"] == "gpu_starved"
    # idle 48.8%: within the band, so "about half" like every other title there, by data loading
    idle = 100.0 - device["busy_pct"]
    assert finding["title"].startswith(f"GPU idle about half the window ({idle:.1f}%), by data loading: ~2")
    assert "of each" in finding["title"] and "step in the DataLoader" in finding["title"]
    assert any(row["name"] == "about_half" for row in finding["evidence"])
    assert "num_workers" in finding["fix"] and "pin_memory" in finding["fix"] and "persistent_workers" in finding["fix"]
    assert LOADER in finding["confirm"] and "workers" in finding["falsifier"]
    assert analysis.data["headline"].startswith("[gpu_starved] GPU idle about half the window")


def test_real_training_capture_names_its_annotated_phases():
    """HTA's sampled training trace (rank 0): the GPU idles 55% of the window in host code, spread over the
    annotated phases — backward, optimizer, forward — none holding most of it, so none is named in the title.
    The most specific named range takes its idle: the optimizer's time is Shampoo's step inside ``## optimizer ##``,
    the forward's is DDP's forward inside ``## forward ##``."""
    analysis = analyze(open_case([real("kineto", "hta_trace_filter_sampled_rank0.json.gz")]))
    device = analysis.data["devices"][0]
    block = device["idle_by_host"]
    names = [row["name"] for row in block["ranges"]]
    assert names[:3] == ["## backward ##", "Optimizer.step#Shampoo.step", "DistributedDataParallel.forward"]
    assert 25 < block["ranges"][0]["pct_of_window"] < 28
    assert block["attributed_ns"] <= block["idle_ns"]
    assert not any(name.startswith("ProfilerStep") for name in names)
    starved = next(f for f in analysis.data["findings"] if f["id"] == "gpu_starved")
    assert "inside the host range" not in starved["title"] and "data loading" not in starved["title"]
    assert any(e["name"] == "idle_by_host_range" and "## backward ##" in e["text"] for e in starved["evidence"])


def test_real_nvfuser_capture_names_the_fusion_runtime():
    """nsys 2025.1 nvFuser test: the GPU idles 98% while the host is inside nvFuser's NVTX range
    FusionExecutorCache::runFusionWithInputs for over half the window (compiling and running the fusion); the
    capture holds no steady phase, so the range is named in the table, not in a verdict."""
    analysis = analyze(open_case([real("nsys", "nsys2025.1_1xH200_nvfuser_pytorch_crossentropy.sqlite")]))
    top = analysis.data["devices"][0]["idle_by_host"]["ranges"][0]
    assert top["name"] == "FusionExecutorCache::runFusionWithInputs" and top["pct_of_window"] > 45
    # the fusion runtime's own named steps (resharding checks, scheduling) take the idle inside them
    names = [row["name"] for row in analysis.data["devices"][0]["idle_by_host"]["ranges"]]
    assert {"isResharding", "schedulePersistentKernel"} <= set(names)
    # the capture is start-up only (a handful of first launches, few repeat): no steady phase to judge, so the
    # host range is reported in the table while the verdict abstains (issue 32, item 1)
    assert not analysis.data["findings"]
    assert any(a["analysis"] == "no_steady_phase" for a in analysis.data["abstentions"])


RESNET_NW0 = "kineto_tb_plugin_resnet50_num_workers_0_pt1.8.json.gz"


def _resnet(name):
    path = REAL / "kineto" / name
    if not path.exists():
        pytest.skip(f"{name}: pytorch/kineto tb_plugin sample not present")
    return path


def test_real_resnet50_num_workers_0_is_starved_by_data_loading():
    """pytorch/kineto's tb_plugin sample resnet50_num_workers_0 (PyTorch 1.8): every step begins in
    enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__ on the main thread with the GPU idle; the
    verdict is data loading with the DataLoader fix, not a launch or roofline headline."""
    path = _resnet(RESNET_NW0)
    try:
        analysis = analyze(open_case([path]))
    except MissingDataError as exc:
        pytest.skip(f"the Kineto parser does not read PyTorch 1.8's capitalised categories yet: {exc}")
    finding = analysis.data["findings"][0]
    assert finding["id"] == "gpu_starved" and "data loading" in finding["title"]
    assert "num_workers" in finding["fix"]
    top = analysis.data["devices"][0]["idle_by_host"]["ranges"][0]
    assert top["name"] == LOADER and top["pct_of_window"] > 15


def test_pytorch_1_8_operator_events_as_current_categories_give_the_same_reading(tmp_path):
    """The resnet50 num_workers=0 capture with its 1.8 categories renamed to today's (Operator -> cpu_op,
    ProfilerStep -> user_annotation): the host-activity rule itself, independent of the 1.8 reader."""
    source = _resnet(RESNET_NW0)
    names = {"Operator": "cpu_op", "Runtime": "cuda_runtime", "Kernel": "kernel", "Memcpy": "gpu_memcpy",
             "Memset": "gpu_memset"}
    doc = json.loads(gzip.decompress(source.read_bytes()))
    for event in doc["traceEvents"]:
        event["cat"] = names.get(event.get("cat"), event.get("cat"))
        if event["cat"] == "cpu_op" and str(event.get("name", "")).startswith("ProfilerStep#"):
            event["cat"] = "user_annotation"
        if isinstance(event.get("tid"), str) and event["tid"].isdigit():
            event["tid"] = int(event["tid"])
    path = tmp_path / "resnet50_nw0.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    analysis = analyze(open_case([path]))
    device = analysis.data["devices"][0]
    top = device["idle_by_host"]["ranges"][0]
    assert top["name"] == LOADER and top["source"] == "cpu_op"
    assert top["host_code_ns"] >= 0.5 * device["idle_by_host"]["host_code_idle_ns"]
    finding = analysis.data["findings"][0]
    assert finding["id"] == "gpu_starved" and finding["title"].startswith("GPU starved by data loading: ~")
    assert analysis.data["headline"].startswith("[gpu_starved]")  # not launch_bound, which also fires


def test_generated_late_rank_range_has_one_figure_in_table_and_finding():
    """dp2_late_rank (trial #4): rank 1's log_metrics sits inside its train_step range. The table names
    log_metrics with all the GPU idle under it (not the outer train_step), and the skew finding quotes
    that same figure. The generator's intervals give it: rank 1's GPU idle inside its log_metrics ranges."""
    from conftest import samples_generate

    from tracetriage.wording import fmt_ns

    generate = samples_generate()
    ranks, _ = generate.scenario_dp2_late_rank(random.Random("7:dp2_late_rank"))  # the bundle's seed (simulate)
    analysis = analyze(str(BUNDLES / "dp2_late_rank"))
    window = analysis.data["window"]
    late = ranks[1]
    expected = 0
    for start, end, text in late.nvtx:
        if text != "log_metrics":
            continue
        start, end = max(start, window["start_ns"]), min(end, window["end_ns"])
        if end > start:
            covered = generate.merge(generate.clip_all(late.busy_intervals(), start, end))
            expected += (end - start) - covered
    device = next(d for d in analysis.data["devices"] if d["pid"] == late.pid)
    top = device["idle_by_host"]["ranges"][0]
    assert top["name"] == "log_metrics"
    assert abs(top["idle_ns"] - expected) <= 0.01 * expected
    skew = next(f for f in analysis.data["findings"] if f["id"] == "collective_dominant")
    assert f"log_metrics ({fmt_ns(top['idle_ns'])} of GPU idle under it in the window)" in skew["mechanism"]
