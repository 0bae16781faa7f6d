"""Wording an auditor overturned on real captures (2026-12-04): an nccl-tests summary that printed what it
did not know as "0 ranks" and "avg busbw None" (and an empty test name), a native CUDA program told to mark
its steps with PyTorch's NVTX call, and a process of unknown language told to use py-spy only."""

import re

import pytest
from conftest import real, run_cli

from tracetriage.analyzers.rules.hints import capture_cmd, host_profiler_hint


def _tests_line(path):
    proc = run_cli("analyze", path)
    assert proc.returncode == 0, proc.stderr
    return next(line.strip() for line in proc.stdout.splitlines() if line.strip().startswith("nccl-tests "))


def test_nccl_tests_summary_says_what_the_log_does_not_record():
    path = real("nccl", "nccl-tests_sendrecv_perf_a100_8gpu_single_process.txt")
    text = path.read_text()
    assert "Rank " not in text and "Avg bus bandwidth" not in text  # the truth: no rank list, no average printed
    line = _tests_line(path)
    assert line.startswith("nccl-tests sendrecv_perf: 4 sizes, ranks not listed, max busbw ")
    assert "None" not in line and "0 ranks" not in line and "avg busbw" not in line
    path = real("nccl", "nccl-tests_all_reduce_perf_h100_2node_16rank.txt")
    text = path.read_text()
    ranks = len(re.findall(r"#\s+Rank\s+\d+ Group", text))
    average = re.search(r"Avg bus bandwidth\s*:\s*([\d.]+)", text).group(1)
    line = _tests_line(path)
    assert line.startswith(f"nccl-tests (test name not logged): 31 sizes, {ranks} ranks, ")
    assert line.endswith(f"avg busbw {average} GB/s")


def test_a_native_cuda_program_is_told_the_nvtx_c_api():
    path = real("nsys", "nsys2025.5_2xRTX3090_cuda_uvm_osrt_sampling.sqlite")
    out = run_cli("analyze", path).stdout
    steps = next(line for line in out.splitlines() if "capture:" in line and "step" in line and "NVTX range" in line)
    assert "nvtxRangePushA" in steps and "torch.cuda.nvtx" not in steps
    assert "perf record" in out and "py-spy" not in out


def test_hints_by_language():
    assert "nvtxRangePushA" in capture_cmd("nsys", "steps", "native")
    assert "torch.cuda.nvtx.range_push" in capture_cmd("nsys", "steps", "python")
    assert capture_cmd("nsys", "steps", None) == capture_cmd("nsys", "steps", "python")
    assert "roctxRangePush" in capture_cmd("rocm", "steps", "native")
    unknown = host_profiler_hint("pid 12", 12, {"vendor": "cuda", "language": None})
    assert "py-spy" in unknown and "perf record" in unknown and "if it is a Python process" in unknown
    by_capture = host_profiler_hint("pid 12", 12, {"vendor": "cuda", "language": "native"})
    assert "perf record" in by_capture and "py-spy" not in by_capture
    named = host_profiler_hint("python3 -m vllm.entrypoints.openai.api_server", 12, {"language": None})
    assert "py-spy" in named and "perf record" not in named


def test_a_capture_that_names_no_gpu_model_is_not_told_to_edit_the_device_table():
    from tracetriage.analyzers.peaks import device_peaks

    for name in ("AMD GPU", "unknown GPU", "", "GPU 0"):
        _, _, missing = device_peaks({"name": name, "memory_bytes": 0, "sm_count": 0})
        assert "does not name the GPU model" in missing.reason, name
        assert "records the device properties" in missing.capture_hint
    _, _, missing = device_peaks({"name": "Quadro RTX 6000", "memory_bytes": 0, "sm_count": 0})
    assert "'Quadro RTX 6000' is not in the device table" in missing.reason
    entry, _, missing = device_peaks({"name": "NVIDIA H100 80GB HBM3", "memory_bytes": 85899345920, "sm_count": 132})
    assert entry is not None and missing is None


def test_host_to_device_copies_under_fsdp_calls_are_told_fsdp_offload(tmp_path):
    """FastVideo's 2xH100 window: 97% copies host to device under FSDP::pre_forward ranges was told vLLM's
    --cpu-offload-gb. Generated: the offload bundle as is (default fix), and with FSDP ranges around its steps."""
    import shutil
    import sqlite3

    from conftest import BUNDLES

    from tracetriage import analyze, open_case

    def copy_bound(path):
        return next(row for row in analyze(open_case([path])).data["findings"] if row["id"] == "copy_bound")

    plain = copy_bound(BUNDLES / "offload_copy_bound")
    assert "FSDP" not in plain["fix"] and not any(row["name"] == "fsdp_ranges" for row in plain["evidence"])
    shutil.copy(BUNDLES / "offload_copy_bound" / "trace.sqlite", tmp_path / "trace.sqlite")
    with sqlite3.connect(tmp_path / "trace.sqlite") as db:
        db.execute("UPDATE NVTX_EVENTS SET text = 'FSDP::pre_forward (layers.' || rowid || ')'")
    found = copy_bound(tmp_path / "trace.sqlite")
    assert found["fix"].startswith("The model runs under FSDP and the copies go host to device")
    row = next(row for row in found["evidence"] if row["name"] == "fsdp_ranges")
    assert "FSDP::pre_forward (layers.1)" in row["value"]
    real_found = copy_bound(real("nsys", "nsys2026.2_2xH100_fastvideo_sp2_pytorch_window1s.sqlite"))
    assert real_found["fix"].startswith("The model runs under FSDP") and "op_id" not in real_found["evidence"][-1]["text"]


BOOTSTRAP = "host1:101:101 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
CONNECT_WARN = ("host1:101:101 [0] misc/socket.cc:578 NCCL WARN socketPollConnect: connect to 10.0.0.2<5000> returned "
                "Connection refused, exceeded error retry count after 35 attempts\n")
INIT_DONE = ("host1:101:101 [0] NCCL INFO ncclCommInitRank comm 0x55a0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 "
             "commId 0x22 - Init COMPLETE\n")


def _nccl_errors(path):
    from tracetriage import analyze, open_case

    return next(row for row in analyze(open_case([path])).data["findings"] if row["id"] == "nccl_errors")


@pytest.mark.parametrize("lines,at_init", [(BOOTSTRAP + CONNECT_WARN, True),
                                             (BOOTSTRAP + INIT_DONE + CONNECT_WARN, False)])
def test_a_communicator_that_never_came_up_is_not_a_failed_collective(tmp_path, lines, at_init):
    """SGLang on 2 nodes: connects refused before any rank logged Init COMPLETE read "a failed collective stops
    every step", though no collective (and no step) ever ran."""
    path = tmp_path / "nccl.log"
    path.write_text(lines)
    found = _nccl_errors(path)
    assert ("never came up" in found["impact_denominator"]) == at_init, found["impact_denominator"]
    assert found["mechanism"].startswith("The communicator could not be set up") == at_init


def test_real_connect_refusals_at_init_and_an_ib_error_after_init():
    at_init = _nccl_errors(real("nccl", "sglang_2node_nccl_2.27_warn_socketPollConnect_refused_timestamped_traceback.txt"))
    assert "never came up" in at_init["impact_denominator"]
    later = _nccl_errors(real("nccl", "nccl_2.27.5_2node_roce_coll_tuning_lines_then_warn_ib_vendor_err_81.txt"))
    assert later["impact_denominator"] == "run (a failed collective stops every step)"
