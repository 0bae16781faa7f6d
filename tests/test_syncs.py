"""Hidden syncs and what a sync claims (issue 32, items 3 and 4).

An async copy to or from pageable host memory is staged by the driver and blocks the host: the
idle time inside it is a sync (``memcpy_sync``), claimed by ``pageable_memcpy``, never "other CUDA
calls". A per-step blocking sync claims the idle it causes (its wait, the launch after it), not the
host code that runs after it: that code is the host-bound finding's. Each reading on a generated
bundle (truth from the generator) and on real captures."""

import gzip
import json

import pytest
from conftest import BUNDLES, real, truth

from tracetriage import analyze, open_case
from tracetriage.analyzers.rules import THRESHOLDS

NVFUSER_2025_1 = "nsys2025.1_1xH200_nvfuser_pytorch_crossentropy.sqlite"
FASTVIDEO = "nsys2026.2_2xH100_fastvideo_sp2_pytorch_window1s.sqlite"
MFU_AFTER = "nsys2026.2_2xH100_mfu_after.sqlite"
# the repository's mfu_before is this export of the collection (one name per capture: conftest.real)
MFU_BEFORE = "nsys2026.2_2xH100_torchrun_nccl_flashattn_window300ms.sqlite"
NCCL_TRAINING = "hta_nccl_parser_config_nccl_data.json.gz"


def _analyze(path, **options):
    return analyze(open_case([path]), **options)


def _finding(analysis, finding_id):
    return next((f for f in analysis.findings if f["id"] == finding_id), None)


def _evidence(finding, name):
    return next(e["value"] for e in finding["evidence"] if e["name"] == name)


def _throughput_total(analysis) -> float:
    return sum(f["impact_pct"] for f in analysis.findings if f["axis"] == "throughput")


# --- item 3: hidden syncs ----------------------------------------------------------------------------------


def test_pageable_readback_is_a_sync_claimed_by_pageable_memcpy():
    """Generated: each step reads 24 MiB back into pageable memory with cudaMemcpyAsync and no explicit
    sync. The GPU idles while the host is blocked in the call (the driver copying the bounce buffer
    out): that is memcpy_sync, not other_cuda, and pageable_memcpy claims it with the copy time."""
    a = _analyze(BUNDLES / "pageable_readback")
    expected = truth("pageable_readback")
    device = a.data["devices"][0]
    by_cause = device["gaps"]["by_cause_pct_of_window"]
    assert abs(by_cause["memcpy_sync"] - expected["blocking"]["idle_inside_pct"]) < 0.5
    assert by_cause["other_cuda"] < 0.1
    top = a.findings[0]
    assert top["id"] == "pageable_memcpy" and a.headline.startswith("[pageable_memcpy]")
    claim = expected["devices"][0]["copy_only_pct"] + expected["blocking"]["idle_inside_pct"]
    assert abs(top["impact_pct"] - claim) < 1.0
    assert abs(_evidence(top, "pageable_blocked_pct") - expected["blocking"]["idle_inside_pct"]) < 0.5
    assert "hidden sync" in top["mechanism"]
    assert _throughput_total(a) <= 100.0


def _burst(events: list, t: float, corr: int, count: int, every_us: float) -> tuple[float, int]:
    """``count`` launches of a 20 µs gemm kernel (a 2 µs cudaLaunchKernel each, the kernel 3 µs later),
    one every ``every_us``; returns the time and correlation id after them."""
    for _ in range(count):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 10,
                       "ts": t, "dur": 2.0, "args": {"correlation": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t + 3.0, "dur": 20.0,
                       "args": {"correlation": corr, "device": 0, "stream": 7}})
        corr += 1
        t += every_us
    return t, corr


def _kineto_pageable(path, pageable: bool):
    """A PyTorch profiler trace: 40 steps of 200 x 20 µs kernels, then a 4 MiB read-back whose
    cudaMemcpyAsync holds the host 1.5 ms after the copy (the driver's staging when the host side
    is pageable) and 50 µs of host code."""
    events, t, corr = [], 0.0, 1
    kind = "Pageable" if pageable else "Pinned"
    for _ in range(40):
        t, corr = _burst(events, t, corr, 200, 20.0)
        copy_start = t + 5.0
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 10, "tid": 10, "ts": t,
                       "dur": 5.0 + 350.0 + 1500.0, "args": {"correlation": corr}})
        events.append({"ph": "X", "cat": "gpu_memcpy", "name": f"Memcpy DtoH (Device -> {kind})", "pid": 0, "tid": 7,
                       "ts": copy_start, "dur": 350.0,
                       "args": {"correlation": corr, "device": 0, "stream": 7, "bytes": 4 << 20}})
        corr += 1
        t += 5.0 + 350.0 + 1500.0 + 50.0
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}], "traceEvents": events}
    path.write_text(json.dumps(doc))
    return path


def test_kineto_pageable_copy_call_is_a_sync_and_pinned_is_not(tmp_path):
    """Kineto names the host side in the memcpy ('Device -> Pageable'): the 1.5 ms per step the host
    spends inside cudaMemcpyAsync while the GPU idles is a synchronous copy, claimed by pageable_memcpy;
    the same trace with a pinned host side keeps that time among other CUDA calls (no pageable finding)."""
    staged = _analyze(_kineto_pageable(tmp_path / "pageable.json", True))
    by_cause = staged.data["devices"][0]["gaps"]["by_cause_pct_of_window"]
    step_us = 200 * 20.0 + 5.0 + 350.0 + 1500.0 + 50.0
    assert abs(by_cause["memcpy_sync"] - 100 * 1500.0 / step_us) < 1.0 and by_cause["other_cuda"] < 0.1
    pageable = _finding(staged, "pageable_memcpy")
    assert abs(pageable["impact_pct"] - 100 * (350.0 + 1500.0) / step_us) < 1.5
    assert abs(_evidence(pageable, "pageable_blocked_pct") - 100 * 1500.0 / step_us) < 1.0
    assert _throughput_total(staged) <= 100.0
    pinned = _analyze(_kineto_pageable(tmp_path / "pinned.json", False))
    assert pinned.data["devices"][0]["gaps"]["by_cause_pct_of_window"]["memcpy_sync"] == 0
    assert _finding(pinned, "pageable_memcpy") is None


def test_nvfuser_pageable_upload_is_set_up_not_a_steady_sync():
    """Real nsys 2025.1 (H200): the two pageable host-to-device uploads (394 MB, the driver stages them)
    come before nvFuser's first kernels run: they are start-up, reported in the set-up phase with the bytes
    copied, and no pageable_memcpy finding is made from them (the capture has no steady phase to judge)."""
    a = _analyze(real("nsys", NVFUSER_2025_1))
    setup = a.data["phases"]["setup"]
    assert 390e6 < setup["copy_bytes"] < 400e6
    assert _finding(a, "pageable_memcpy") is None
    assert any(x["analysis"] == "no_steady_phase" for x in a.data["abstentions"])


@pytest.mark.parametrize("name", [FASTVIDEO, MFU_BEFORE, MFU_AFTER])
def test_scalar_pageable_uploads_are_no_finding_on_real_captures(name):
    """Real nsys 2026.2 (2 x H100): a few pageable host-to-device copies of a few bytes each (scalars
    PyTorch uploads) cost nothing measurable: no pageable_memcpy finding, no '0.0%' claim in the
    window line, and the headline does not name it as the largest finding."""
    a = _analyze(real("nsys", name))
    assert a.data["copies"]["pageable_async"]["count"] > 0
    assert _finding(a, "pageable_memcpy") is None
    assert "pageable_memcpy" not in a.headline
    assert all("pageable_memcpy" not in device["accounting"]["claims_pct"] for device in a.data["devices"])


def test_fastvideo_stays_copy_bound():
    """The offload copies are pinned and fill 97% of the window: copy_bound leads, unchanged."""
    a = _analyze(real("nsys", FASTVIDEO))
    assert a.findings[0]["id"] == "copy_bound" and a.findings[0]["impact_pct"] > 95


def test_h200_pageable_offload_is_pageable_memcpy():
    """Real Kineto (H200, this project's capture): 256 MiB uploads from pageable memory fill the
    window; pageable_memcpy leads and the host time inside those calls is not 'other CUDA calls'."""
    path = BUNDLES.parent / "h200" / "offload_copy.json.gz"
    a = _analyze(path)
    assert a.findings[0]["id"] == "pageable_memcpy" and a.findings[0]["impact_pct"] > 95
    names = {e["name"] for e in json.load(gzip.open(path))["traceEvents"] if e.get("cat") == "gpu_memcpy"}
    assert any("Pageable -> Device" in name for name in names)
    assert a.data["devices"][0]["gaps"]["by_cause_pct_of_window"]["other_cuda"] < 0.1


def test_pageable_threshold_is_declared():
    assert THRESHOLDS["pageable_min_time_pct"][0] == 0.1


# --- item 4: a sync claims only what it causes ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["eager_decode", "graph_decode"])
def test_sync_claims_its_wait_not_the_host_code_after_it(name):
    """Generated: one .cpu() per step, then ~1-1.5 ms of Python on the read-back. The sync claims the
    idle while the host waits and launches (the truth's post-sync idle minus its host code, plus at most
    the launch latency per gap); the host code after it goes to gpu_starved, which names it."""
    a = _analyze(BUNDLES / name)
    expected = truth(name)["blocking"]
    sync = _finding(a, "host_sync_per_step")
    caused = expected["after_idle_pct"] - expected["after_host_pct"]
    window_ns = a.data["window"]["duration_ns"]
    latency = 100.0 * expected["gaps_after"] * THRESHOLDS["sync_launch_latency_ns"][0] / window_ns
    assert caused - 0.05 <= sync["impact_pct"] <= caused + latency + 0.05
    assert "the host code after it" in sync["title"] and "not the sync" in sync["mechanism"]
    assert abs(_evidence(sync, "host_after_sync_pct") - expected["after_host_pct"]) < 0.05
    starved = _finding(a, "gpu_starved")
    assert starved is not None and starved["impact_pct"] >= expected["after_host_pct"] - latency - 0.5
    assert _evidence(starved, "after_sync_host_pct") > 0.9 * (expected["after_host_pct"] - latency)
    assert "after a blocking sync returns" in starved["mechanism"]
    ranked = [f["id"] for f in a.findings]
    assert ranked.index("gpu_starved") < ranked.index("host_sync_per_step")
    assert _throughput_total(a) <= 100.0


def test_eager_decode_headline_stays_launch_bound():
    a = _analyze(BUNDLES / "eager_decode")
    assert a.findings[0]["id"] == "launch_bound" and a.headline.startswith("[launch_bound]")


def test_graph_decode_headline_is_the_host_bound_finding():
    a = _analyze(BUNDLES / "graph_decode")
    assert a.headline.startswith("[gpu_starved]") and "host code" in a.headline


def test_real_training_sync_gaps_are_host_code_not_the_sync():
    """Real Kineto (HTA's NCCL training sample, 3 steps of 222 ms): 8 syncs per step, and the three
    gaps after them (18.6 ms, 2.8% of the window) are 99% host code. The sync was claimed 2.8% for that
    code ("the GPU then idles 2.8%"); its own wait and launch cost a few µs, under
    sync_claim_min_pct: no sync finding, and the verdict stays launch-bound."""
    a = _analyze(real("kineto", NCCL_TRAINING))
    device = a.data["devices"][0]
    slices = device["accounting"]["slices_pct"]
    after = {k: v for k, v in slices.items() if k.startswith("idle:after_sync:")}
    assert after["idle:after_sync:host"] > 0.95 * sum(after.values()) > 2.5
    assert _finding(a, "host_sync_per_step") is None
    assert "host_sync_per_step" not in device["accounting"]["claims_pct"]
    assert a.findings[0]["id"] == "launch_bound" and a.headline.startswith("[launch_bound]")
    assert _throughput_total(a) <= 100.0


# --- item 10: the blocked title's number is the blocking calls' own share ------------------------------------


def _blocked_trace(path):
    """Two synchronous 60 ms cudaMemcpy calls between bursts of work, then a long stretch of host code."""
    events, t, corr = [], 0.0, 1
    for block in ("work", "copy", "work", "copy", "work", "host"):
        if block == "work":
            t, corr = _burst(events, t, corr, 300, 21.0)
        elif block == "copy":
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpy", "pid": 10, "tid": 10, "ts": t,
                           "dur": 60_000.0, "args": {"correlation": corr}})
            events.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "pid": 0, "tid": 7,
                           "ts": t + 60_000.0 - 3.0, "dur": 2.0,
                           "args": {"correlation": corr, "device": 0, "stream": 7, "bytes": 256}})
            corr += 1
            t += 60_001.0
        else:
            t += 110_000.0
    _burst(events, t, corr, 1, 21.0)
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}],
                                "traceEvents": events}))
    return path


def test_blocked_title_names_the_blocking_share_not_the_whole_claim(tmp_path):
    """Idle 120 ms in synchronous copies and 110 ms in host code: the title's 'the blocking calls
    explain' is the copies' share (~50%), not everything gpu_starved claimed (~97%)."""
    a = _analyze(_blocked_trace(tmp_path / "blocked.json"))
    starved = _finding(a, "gpu_starved")
    by_cause = a.data["devices"][0]["gaps"]["by_cause_pct_of_window"]
    blocked = by_cause["memcpy_sync"] + by_cause["sync"]
    assert 40 < blocked < 60 and starved["impact_pct"] > 90
    assert f"the blocking calls explain {blocked:.1f}%" in starved["title"], starved["title"]


# --- item 3: what "other CUDA calls" were --------------------------------------------------------------------


def _allocating(path):
    """20 bursts of 300 x 20 µs kernels, each followed by a 10 ms cudaMalloc (the allocator growing)."""
    events, t, corr = [], 0.0, 1
    for _ in range(20):
        t, corr = _burst(events, t, corr, 300, 21.0)
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaMalloc", "pid": 10, "tid": 10, "ts": t,
                       "dur": 10_000.0, "args": {"correlation": corr}})
        corr += 1
        t += 10_001.0
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}],
                                "traceEvents": events}))
    return path


def test_idle_inside_the_allocator_is_named(tmp_path):
    """Generated in the test: the GPU idles 10 ms of each ~16.3 ms burst inside cudaMalloc. The verdict
    names the call and the allocator's mechanism and fix, not "other CUDA/HIP calls" alone."""
    a = _analyze(_allocating(tmp_path / "alloc.json"))
    starved = a.findings[0]
    assert starved["id"] == "gpu_starved"
    share = _evidence(starved, "idle_in_calls")["cudaMalloc"]
    assert abs(share - 100 * 19 * 10_000.0 / a.data["window"]["duration_ns"] * 1000) < 1.0
    assert f"cudaMalloc: {share:.1f}% of the window" in starved["title"]
    assert "allocator" in starved["mechanism"] and "empty_cache" in starved["fix"]


def test_alexnet_idle_is_named_as_cudamalloc():
    """Real Kineto (HTA critical-path sample, AlexNet): the 12.8 s of set-up (cudaFree, cudaMalloc) is its own
    phase; in the measured forward the GPU still idles inside cudaMalloc for ~44% of the window beside the host
    code, and those calls are named in the finding even though host code holds more."""
    a = _analyze(real("kineto", "hta_critical_path_alexnet.json.gz"))
    starved = a.findings[0]
    assert starved["id"] == "gpu_starved"
    assert _evidence(starved, "idle_in_calls")["cudaMalloc"] > 30
    assert "cudaFree" in [stretch["call"] for stretch in a.data["phases"]["setup"]["host_only"]]


def test_a_minor_sync_in_the_headline_says_its_own_number():
    """Generated decode_rare_prefill: GPU busy 95%, 1 ms of host code after each per-step read-back.
    The sync's wait is minor (0.1%); the headline's clause gives that number, not '0%' beside a title
    that says 0.1%."""
    a = _analyze(BUNDLES / "decode_rare_prefill")
    sync = _finding(a, "host_sync_per_step")
    expected = f"explains {sync['impact_pct']:.1f}% of the window"
    assert sync["impact_pct"] < 1 and expected in a.data["headline_by_axis"]["throughput"]
    assert f"the wait costs {sync['impact_pct']:.1f}%" in sync["title"]
