"""The headline of a GPU-bound capture whose findings are all minor (review of stop 43, issue 32): the verdict says
GPU-bound, with the compute share and its denominator, and names the largest minor finding with its impact beside
it; the minor finding is not the verdict, and the capture is never called healthy (a finding stands).

On real captures (skipped when absent) the compute share is measured here from the raw kernel tables; on generated
decodes (samples/gen_gpu_bound.py) the truth is what the generator built."""

import gzip
import json
import re
import sys

import pytest
from conftest import ROOT, analyze_cli, real, sql

sys.path.insert(0, str(ROOT / "samples"))
import gen_gpu_bound  # noqa: E402

from tracetriage import analyze  # noqa: E402
from tracetriage.analyzers.rules.headline import MINOR_HEADLINE_PCT  # noqa: E402
from tracetriage.analyzers.rules.healthy import THRESHOLDS as HEALTHY  # noqa: E402
from tracetriage.wording import pct  # noqa: E402

GPU_BOUND_MIN = HEALTHY["healthy_compute_min_pct"][0]
MIB = 1024 * 1024


def _union_pct(intervals, lo, hi) -> float:
    """The union of (start, end) pairs clipped to [lo, hi), % of hi - lo (plain Python, not the tool's)."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in intervals if min(e, hi) > max(s, lo)):
        if cur_e is None or s > cur_e:
            total += (cur_e - cur_s) if cur_e is not None else 0
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    total += (cur_e - cur_s) if cur_e is not None else 0
    return 100.0 * total / (hi - lo)


def _nsys_compute(path, window) -> list[float]:
    """Each device's kernel time in the window, % of it, from the export's kernel table."""
    by_device = {}
    for device, start, end in sql(path, "select deviceId, start, end from CUPTI_ACTIVITY_KIND_KERNEL"):
        by_device.setdefault(device, []).append((start, end))
    return [_union_pct(spans, window["start_ns"], window["end_ns"]) for _, spans in sorted(by_device.items())]


def _never_healthy(data) -> None:
    low = data["headline"].lower()
    assert "healthy" not in low and "no problem" not in low
    assert all(finding["id"] != "healthy" for finding in data["findings"])


def _shown_compute(headline: str) -> float:
    got = re.match(r"GPU-bound: (?:the GPU computes|every device computes at least) ([\d.]+)% of the window", headline)
    assert got, headline
    return float(got.group(1))


# --- real captures ------------------------------------------------------------------------------

def test_real_torchrun_is_gpu_bound_with_the_late_rank_as_its_minor_finding():
    """2xH100 torchrun (FSDP, flash-attention): ~89-92% of each window in kernels; the one finding is GPU0 waiting
    2.4% of the window for GPU1 in its collectives. Before, that low finding was the verdict ("Ranks wait for
    GPU1 ..."); an engineer reads it as GPU-bound with a minor rank skew."""
    path = real("nsys", "nsys2026.2_2xH100_torchrun_nccl_flashattn_window300ms.sqlite")
    data = analyze_cli(path)
    measured = _nsys_compute(path, data["window"])
    assert len(measured) == 2 and min(measured) >= GPU_BOUND_MIN
    head = data["headline"]
    assert head.startswith("GPU-bound: every device computes at least ") and "(kernels, collectives included)" in head
    assert abs(_shown_compute(head) - min(measured)) < 0.06, (head, measured)
    found = data["findings"][0]
    assert found["id"] == "collective_dominant" and found["severity"] == "low" and found["impact_pct"] < MINOR_HEADLINE_PCT
    assert f"; minor finding: [collective_dominant] {found['title']} — explains {pct(found['impact_pct'])} of the window" in head
    assert data["collective_skew"]["late_rank"]["device"] in head
    _never_healthy(data)
    # the contract around the text is as before: the per-axis headline still names the finding first
    assert data["headline_by_axis"]["throughput"].startswith("[collective_dominant] Ranks wait for")
    text = analyze_cli(path, fmt="text")
    assert f"VERDICT  {head}" in text


def test_real_resnet50_with_data_workers_is_gpu_bound_with_minor_pageable_copies():
    """PyTorch 1.8 ResNet-50 training with num_workers=4 (kineto tb_plugin sample): the GPU runs kernels ~84.5% of
    the window; 12 pageable copies cost ~3% of it. Before, the pageable copies were the verdict."""
    path = real("kineto", "kineto_tb_plugin_resnet50_num_workers_4_pt1.8.json.gz")
    data = analyze_cli(path)
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    kernels = [(int(e["ts"] * 1000), int((e["ts"] + e["dur"]) * 1000)) for e in events if e.get("cat") in ("Kernel", "kernel")]
    measured = _union_pct(kernels, data["window"]["start_ns"], data["window"]["end_ns"])
    assert measured >= GPU_BOUND_MIN
    head = data["headline"]
    assert head.startswith("GPU-bound: the GPU computes ") and "collectives" not in head.split(";")[0]
    assert abs(_shown_compute(head) - measured) < 0.5, (head, measured)
    assert "; minor finding: [pageable_memcpy] " in head and data["findings"][0]["id"] == "pageable_memcpy"
    _never_healthy(data)


def test_real_capture_under_the_gpu_bound_line_keeps_the_idle_form():
    """mfu_after: the same program at ~79% compute with one minor collective finding is not GPU-bound: the headline
    stays "GPU computing X% ... no measured cause explains the rest (largest finding: ...)"."""
    path = real("nsys", "nsys2026.2_2xH100_mfu_after.sqlite")
    data = analyze_cli(path)
    assert min(_nsys_compute(path, data["window"])) < GPU_BOUND_MIN
    head = data["headline"]
    assert not head.startswith("GPU-bound") and head.startswith("GPU computing ")
    assert "no measured cause explains the rest (largest finding: collective_dominant" in head
    _never_healthy(data)


# --- generated decodes: a per-step read-back into pageable memory -------------------------------

CASES = {"one_minor": (1 * MIB, 0), "two_minor": (2 * MIB, 0), "not_minor": (8 * MIB, 0), "host_bound": (1 * MIB, 3500)}


@pytest.fixture(scope="module")
def readbacks(tmp_path_factory):
    out = {}
    for name, (nbytes, host_us) in CASES.items():
        folder = tmp_path_factory.mktemp(name)
        truth = gen_gpu_bound.write_bundle(folder, f"gpu_bound:{name}", nbytes, host_us)
        out[name] = (truth, analyze(str(folder)).data)
    return out


def test_generated_gpu_bound_decode_with_one_minor_problem(readbacks):
    truth, data = readbacks["one_minor"]
    minor = truth["minor"]
    assert minor["compute_pct"] >= GPU_BOUND_MIN and minor["pageable_cost_pct"] < MINOR_HEADLINE_PCT
    head = data["headline"]
    assert head.startswith("GPU-bound: the GPU computes ") and "; minor finding: [pageable_memcpy] " in head
    assert abs(_shown_compute(head) - minor["compute_pct"]) < 0.5, (head, minor)
    found = data["findings"][0]
    assert [f["id"] for f in data["findings"]] == ["pageable_memcpy"]
    assert abs(found["impact_pct"] - minor["pageable_cost_pct"]) < 0.3, (found["impact_pct"], minor)
    assert f"{minor['pageable_copies']} async copies" in head and f"explains {pct(found['impact_pct'])} of the window" in head
    _never_healthy(data)


def test_generated_gpu_bound_decode_names_the_largest_of_its_minor_findings(readbacks):
    """A 2 MiB read-back: its cost (~3.5%) is split between the sync the read-back is and the pageable copy; both
    minor, the headline names the larger and counts them."""
    truth, data = readbacks["two_minor"]
    minor = truth["minor"]
    assert minor["compute_pct"] >= GPU_BOUND_MIN and minor["pageable_cost_pct"] < MINOR_HEADLINE_PCT
    standing = [f for f in data["findings"] if not f.get("falsified")]
    assert len(standing) == 2 and abs(sum(f["impact_pct"] for f in standing) - minor["pageable_cost_pct"]) < 0.5
    largest = max(standing, key=lambda f: f["impact_pct"])
    assert data["headline"].startswith("GPU-bound: the GPU computes ")
    assert f"; largest of 2 minor findings: [{largest['id']}] " in data["headline"]
    _never_healthy(data)


def test_generated_read_back_over_the_minor_share_is_the_verdict(readbacks):
    """An 8 MiB read-back costs ~13% of the window: not minor, so it is the verdict, not a note under GPU-bound."""
    truth, data = readbacks["not_minor"]
    assert truth["minor"]["pageable_cost_pct"] >= MINOR_HEADLINE_PCT
    assert data["headline"].startswith("[") and "GPU-bound" not in data["headline"]


def test_generated_decode_waiting_for_the_host_is_not_gpu_bound(readbacks):
    """The one-minor read-back with 3.5 ms of host code per step: the GPU computes ~75% of the window, so the
    headline is not GPU-bound, whatever the read-back costs."""
    truth, data = readbacks["host_bound"]
    assert truth["minor"]["compute_pct"] < GPU_BOUND_MIN
    assert "GPU-bound:" not in data["headline"]
