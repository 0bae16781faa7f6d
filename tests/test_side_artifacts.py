"""NCCL logs and py-spy captures: facts read off the real files by hand, fuzzing, bundles."""

import json
import signal
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import real, truth
from hypothesis import given, settings
from hypothesis import strategies as st

from tracetriage import analyze, open_case
from tracetriage.analyzers import hotframes
from tracetriage.analyzers import nccl as nccl_analysis
from tracetriage.case import detect
from tracetriage.errors import TraceTriageError
from tracetriage.parsers import nccl, pyspy, topology

# file: (library, version, communicators [(nranks, nnodes, ranks seen)], transports, WARN lines, nccl-tests rows)
NCCL = {
    "nccl-tests_all_reduce_perf_h200_p5e_1node_8gpu_nccl_debug_info_2.27.7.txt": (
        "NCCL", "2.27.7+cuda12.8", [(8, 1, 8)], {"P2P": 192}, 0, 32),
    "nccl-tests_all_reduce_perf_h200_p5e_2node_16gpu_efa_nccl_debug_info_2.27.7.txt": (
        "NCCL", "2.27.7+cuda12.8", [(16, 2, 16)], {"P2P": 464, "NET": 512}, 0, 32),
    "deepspeed_2node_g5_efa_ofi_nccl_2.23.4_training_log_mixed_app_output.txt": (
        "NCCL", "2.23.4+cuda12.4", [(2, 2, 2)], {"NET": 8}, 0, 0),
    "nccl-tests_all_reduce_perf_h100_2node_16rank.txt": ("NCCL", None, [], {}, 0, 31),
    "nccl-tests_all_reduce_perf_h100_2node_16rank_markdown_damaged_header.txt": ("NCCL", None, [], {}, 0, 31),
    "nccl-tests_sendrecv_perf_a100_8gpu_single_process.txt": ("NCCL", None, [], {}, 0, 4),
    "nccl_2.27.5_2node_roce_coll_tuning_lines_then_warn_ib_vendor_err_81.txt": ("NCCL", None, [(16, None, 4)], {}, 1, 0),
    "nccl_2.27.5_node7_of_2node_tuning_matrix_p2p_ipc_warn_ib_vendor_err_81_truncated_first_line.txt": (
        "NCCL", None, [(16, None, 8)], {"P2P": 2}, 1, 0),
    "nccl_2.27.5_node8_of_2node_roce_ib_gdrdma_init_truncated_first_line.txt": (
        "NCCL", None, [(16, 2, 8)], {"P2P": 60, "NET": 16}, 0, 0),
    "nccl_warn_ib_completion_error_vendor_err_129_wrapped.txt": ("NCCL", None, [], {}, 1, 0),
    "rccl_lumi_mi250x_2.20.5_socket_fallback_init_excerpt.txt": ("RCCL", "2.20.5+hip6.2", [(1, None, 1)], {}, 0, 0),
    "sglang_2node_nccl_2.27_warn_socketPollConnect_refused_timestamped_traceback.txt": ("NCCL", None, [], {}, 7, 0),
}


@pytest.mark.parametrize("name", sorted(NCCL))
def test_real_nccl(name):
    path = real("nccl", name)
    assert detect(path) == "nccl"
    lib, version, comms, transports, warns, rows = NCCL[name]
    s = nccl_analysis.summary(nccl.parse(str(path)))
    assert (s["library"], s["version"]) == (lib, version)
    assert [(c["nranks"], c["nnodes"], c["ranks_seen"]) for c in s["communicators"]] == comms
    assert s["transports"] == transports
    assert len(s["warnings"]) == warns
    assert s["tests"]["rows"] == rows


def test_wrapped_warn_is_joined():
    s = nccl_analysis.summary(nccl.parse(str(real("nccl", "nccl_warn_ib_completion_error_vendor_err_129_wrapped.txt"))))
    w = s["warnings"][0]
    assert w["location"] == "transport/net_ib.cc:1296"
    assert w["message"].endswith("len 0, vendor err 129 (Recv)")


def test_gdrdma_and_pxn_transport():
    log = nccl.parse(str(real("nccl", "nccl_2.27.5_node8_of_2node_roce_ib_gdrdma_init_truncated_first_line.txt")))
    net = [c for c in log.connections if c["transport"] == "NET"]
    assert net and all(c["gdrdma"] for c in net)
    assert any(c["via"].startswith("NET/IB/0(") for c in net)  # PXN: proxy rank in parentheses


def test_nccl_tests_table_values():
    log = nccl.parse(str(real("nccl", "nccl-tests_all_reduce_perf_h200_p5e_1node_8gpu_nccl_debug_info_2.27.7.txt")))
    last = log.tests["rows"][-1]
    assert last["size"] == 17179869184 and last["oop_busbw"] == 481.55 and last["ip_busbw"] == 482.15
    assert log.tests["avg_busbw"] == 160.437 and len(log.tests["ranks"]) == 8


def test_ring_and_tree_orders():
    log = nccl.parse(str(real("nccl", "nccl-tests_all_reduce_perf_h200_p5e_2node_16gpu_efa_nccl_debug_info_2.27.7.txt")))
    rank0 = {ch: order for (h, p, ch), order in log.rings.items() if p == 26241}
    assert rank0[0] == [0, 3, 11, 8, 9, 14, 15, 12, 13, 10, 2, 5, 4, 7, 6, 1]
    trees = next(v for (h, p), v in log.trees.items() if p == 26241)
    assert trees[0] == "1/-1/-1->0->3" and trees[2] == "1/8/-1->0->-1"


# file: (format, threads, idle threads, processes)
PYSPY = {
    "py-spy_dump_deepspeed_megatron_broadcast_hang.txt": (1, 0, 0),
    "py-spy_dump_sglang_launch_server_parent_idle_with_prompt.txt": (1, 1, 1),
    "py-spy_dump_sglang_scheduler_tp0-7_during_cuda_graph_capture_head20_loop.txt": (8, 0, 8),
    "py-spy_dump_sglang_scheduler_tp0-7_in_pynccl_init_head20_loop.txt": (8, 0, 8),
    "py-spy_dump_two_idle_threads_hex_tid.txt": (2, 2, 0),
}


@pytest.mark.parametrize("name", sorted(PYSPY))
def test_real_pyspy(name):
    path = real("pyspy", name)
    assert detect(path) == "pyspy"
    threads, idle, procs = PYSPY[name]
    cap = pyspy.parse(str(path))
    assert (cap.format, cap.threads, cap.idle_threads, len(cap.processes)) == ("dump", threads, idle, procs)


def test_pyspy_innermost_first_becomes_outermost_first():
    cap = pyspy.parse(str(real("pyspy", "py-spy_dump_deepspeed_megatron_broadcast_hang.txt")))
    stack = cap.samples[0].stack
    assert stack[0] == "<module> (pretrain_gpt.py:239)"
    assert stack[-1] == "broadcast (torch/distributed/distributed_c10d.py:1191)"


def test_pynccl_hang_dump_names_the_sync():
    cap = pyspy.parse(str(real("pyspy", "py-spy_dump_sglang_scheduler_tp0-7_in_pynccl_init_head20_loop.txt")))
    hf = hotframes.hot_frames([cap])
    assert hf["total_samples"] == 8
    top = next(f for f in hf["frames"] if f["frame"].startswith("__init__ (pynccl.py"))
    assert top["share_pct"] == 100.0 and top["calls_sync"]


def test_pyspy_json_and_speedscope(tmp_path):
    dump = [{"pid": 1, "thread_id": 5, "thread_name": "MainThread", "active": True, "owns_gil": True,
             "frames": [{"name": "item", "filename": "/x/torch/_tensor.py", "short_filename": "torch/_tensor.py", "line": 9},
                        {"name": "step", "filename": "/app/loop.py", "short_filename": "loop.py", "line": 3}]},
            {"pid": 1, "thread_id": 6, "thread_name": "w", "active": False, "owns_gil": False, "frames": []}]
    p = tmp_path / "dump.json"
    p.write_text(json.dumps(dump))
    assert detect(p) == "pyspy"
    cap = pyspy.parse(str(p))
    assert cap.format == "dump-json" and cap.threads == 2 and cap.idle_threads == 1
    assert cap.samples[0].stack == ("step (loop.py:3)", "item (torch/_tensor.py:9)")
    sp = {"$schema": "https://www.speedscope.app/file-format-schema.json",
          "shared": {"frames": [{"name": "main", "file": "a.py", "line": 1}, {"name": "hot", "file": "a.py", "line": 5}]},
          "profiles": [{"type": "sampled", "name": "MainThread", "unit": "none", "startValue": 0, "endValue": 3,
                        "samples": [[0, 1], [0]], "weights": [3, 1]}]}
    q = tmp_path / "prof.speedscope.json"
    q.write_text(json.dumps(sp))
    assert detect(q) == "pyspy"
    hf = hotframes.hot_frames([pyspy.parse(str(q))])
    assert hf["total_samples"] == 4
    assert next(f for f in hf["frames"] if f["frame"] == "hot (a.py:5)")["share_pct"] == 75.0


def test_bundle_eager_pyspy_names_logits_processor(analyses):
    a = analyses["eager_decode_pyspy"]
    ids = [f["id"] for f in a.findings]
    assert ids[0] == "launch_bound" and "host_sync_per_step" in ids and "python_host_overhead" in ids
    f = next(f for f in a.findings if f["id"] == "python_host_overhead")
    t = truth("eager_decode_pyspy")["pyspy"]
    assert t["frame"] in f["title"]
    share = next(e for e in f["evidence"] if e["name"] == "share_pct")["value"]
    assert abs(share - t["user_pct"]) <= 1.0
    assert not any(x["analysis"] == "host_frames" for x in a.data["abstentions"])


def test_bundle_tp8_nccl_shows_shm_between_islands(analyses):
    log = analyses["tp8_cross_island"].data["nccl"][0]
    assert log["transports"] == {"P2P": 12, "SHM": 4}
    assert {(p["from_dev"], p["to_dev"]) for p in log["intra_node_slow_paths"]} == {("3", "4"), ("7", "0")}
    assert analyses["tp4_island"].data["nccl"][0]["intra_node_slow_paths"] == []


def test_nccl_alone_gives_cross_island_without_topology(tmp_path):
    src = Path(__file__).resolve().parent.parent / "samples" / "bundles" / "tp8_cross_island" / "nccl.log"
    a = analyze(open_case([src]))
    assert [f["id"] for f in a.findings] == ["cross_island_collective"]


def test_nccl_errors_finding_from_real_log():
    a = analyze(open_case([real("nccl", "sglang_2node_nccl_2.27_warn_socketPollConnect_refused_timestamped_traceback.txt")]))
    f = a.findings[0]
    assert f["id"] == "nccl_errors" and "socketPollConnect" in f["title"] and f["severity"] == "high"


lines = st.lists(
    st.one_of(
        st.text(max_size=120),
        st.sampled_from([
            "host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
            "host:1:2 [0] NCCL WARN oops",
            "host:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
            "Thread 0x1 (active): \"x\"", "    f (a.py:1)", "a;b (c.py:2) 3", "GPU0\t X \tNV4", "\tGPU0\tGPU1",
            "      1024   256   float   sum   -1   1.0   1.0   1.0   0   1.0   1.0   1.0   0",
        ]),
    ),
    max_size=40,
)


@contextmanager
def finishes_within(seconds: float):
    """Fail, rather than hang the suite, when the body runs past ``seconds`` (SIGALRM)."""
    def hung(*_):
        raise AssertionError(f"parser still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


TEXT_PARSERS = (nccl.parse, pyspy.parse, topology.parse)


@settings(max_examples=150, deadline=None)
@given(lines)
def test_text_parsers_never_crash(ls):
    text = "\n".join(ls)
    for parse in TEXT_PARSERS:
        try:
            with finishes_within(5):
                parse("<fuzz>", text)
        except TraceTriageError:
            pass  # the project's own input error is the only acceptable failure


@pytest.mark.parametrize("line", [
    "host:1:2 [0] NCCL INFO Channel 00/0 : " + "0[0] -> " * 20000 + "1[1] via P2P/IPC",
    "Thread 0x1 (active): \"" + "x" * 200000,
    "    " + "f (a.py:1) " * 20000,
    "GPU0" + "\tNV4" * 50000,
    "a;" * 100000 + " 3",
    " ".join(["1024"] * 50000),
    "[" * 200000,  # JSON-looking py-spy input nested past the recursion limit
])
def test_text_parsers_finish_on_pathological_lines(line):
    """Long repetitive lines (the shape that makes a backtracking regex blow up) end quickly."""
    for parse in TEXT_PARSERS:
        try:
            with finishes_within(10):
                parse("<fuzz>", "\n".join([line] * 3))
        except TraceTriageError:
            pass


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=80), max_size=10))
def test_nccl_parser_keeps_going_after_bad_lines(junk):
    good = "host:1:2 [0] NCCL WARN the real problem"
    log = nccl.parse("<fuzz>", "\n".join(["host:1:2 [0] NCCL INFO NCCL version 2.21.5+cuda12.4", *junk, good]))
    assert log.version == "2.21.5+cuda12.4"
    assert any(w["message"].startswith("the real problem") for w in log.warnings)
