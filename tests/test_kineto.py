"""PyTorch profiler (Kineto) traces: counts pinned against a plain JSON pass (SOURCES.md)."""

import pytest
from conftest import real, run_cli

from tracetriage import analyze, open_case
from tracetriage.case import detect
from tracetriage.errors import EXIT_NOTHING

# file: (kernels, NCCL kernels, rank)
KINETO = {
    "hta_nccl_parser_config_nccl_data.json.gz": (2700, 21, 0),
    "hta_df_index_resolver.json.gz": (19370, 2020, 1),
    "hta_trace_diff_control.json.gz": (8568, 60, 3),
    "hta_ns_resolution_rank0.json.gz": (4350, 0, 0),
    "hta_amd_mi250_minitoy_train_rocm6.2.json.gz": (14, 0, None),
    "hta_trace_filter_sampled_rank1.json.gz": (1104, 10, 1),
    "tracelens_vllm_decode_full_graph_execution.json.gz": (425, 0, 0),
    "tracelens_h100_qwen1.5-0.5b_chat.json.gz": (1465, 0, None),
}


@pytest.mark.parametrize("name", sorted(KINETO))
def test_kineto_counts(name):
    path = real("kineto", name)
    assert detect(path) == "kineto"
    kernels, nccl, rank = KINETO[name]
    t = open_case([path]).traces[0]
    k = t.gpu[t.gpu["kind"] == "kernel"]
    assert len(k) == kernels
    assert int(k["collective"].notna().sum()) == nccl
    assert t.meta["rank"] == rank
    if rank is None:  # a rank-less file is not silently rank 0
        assert any("rank is unknown" in w for w in t.warnings)


def test_nccl_ops_from_kineto():
    t = open_case([real("kineto", "hta_nccl_parser_config_nccl_data.json.gz")]).traces[0]
    ops = t.gpu["collective"].value_counts()
    assert ops["AllReduce"] == 15 and ops["Broadcast"] == 6


def test_vllm_full_graph_decode_is_busy():
    a = analyze(open_case([real("kineto", "tracelens_vllm_decode_full_graph_execution.json.gz")]))
    assert a.data["devices"][0]["busy_pct"] > 99
    t = open_case([real("kineto", "tracelens_vllm_decode_full_graph_execution.json.gz")]).traces[0]
    # 421 kernels link to the one hipGraphLaunch; 4 are eager (hipLaunchKernel / hipExtModuleLaunchKernel)
    assert int(t.gpu["in_graph"].sum()) == 421
    assert int((t.api["name"] == "hipGraphLaunch").sum()) == 1


@pytest.mark.parametrize("name", ["hta_bad_cpu_only_rank34.json.gz", "hta_bad_rank_unavailable.json.gz",
                                  "hta_bad_distributed_info_unavailable.json.gz"])
def test_cpu_only_traces_say_nothing_to_analyze(name):
    proc = run_cli("analyze", real("kineto", name))
    assert proc.returncode == EXIT_NOTHING and "CPU-only" in proc.stderr and "Traceback" not in proc.stderr


def test_profiler_steps_are_steps():
    a = analyze(open_case([real("kineto", "hta_ns_resolution_rank0.json.gz")]))
    p = a.data["processes"][0]
    assert p["steps"]["source"] == "nvtx" and p["steps"]["range_name"].startswith("ProfilerStep")
