"""Issue 32, class 10 (three of the small ones): the verdict class near 50% idle is stable between
identical captures (a stated band: "about half"), memsets whose size the format does not record
are never "0 B", and one severity rule for tiny windows (a 1.5 ms and a 2 ms toy window get the
same cap whatever their step count). Real captures from ../shared/samples/real (skipped when
absent) and traces built here, whose truth is what was built."""

import json

from conftest import REAL, analyze_cli, need_real, sql

from tracetriage.analyzers.evidence import severity_for
from tracetriage.analyzers.rules.falsify import window_cap
from tracetriage.analyzers.rules.starved import BAND_SEVERITY
from tracetriage.analyzers.rules.thresholds import THRESHOLDS

BMM = REAL / "rocprof" / "rocprofv3_rocpd_v3_bmm_trace_mi300x.db"
RPD_MATMUL = REAL / "rocprof" / "rpd_v2_pytorch_matmul.rpd"
MEMSET_ONLY_NSYS = "memset_only"
RANK1 = REAL / "kineto" / "hta_trace_filter_sampled_rank1.json.gz"
BERT_SMALL = REAL / "kineto" / "tracelens_h100_bert_small.json.gz"




def _kineto(path, busy_us, gap_us, n=400, steps=0):
    """A Kineto trace of n kernels of busy_us, each launched after gap_us of host code (no CUDA
    call in the gap), optionally cut into ``steps`` ProfilerStep ranges: idle = gap / (busy + gap)."""
    events, t, corr = [], 1_000_000.0, 1
    period = busy_us + gap_us
    per_step = n // steps if steps else 0
    for i in range(n):
        if per_step and i % per_step == 0:
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i // per_step}", "pid": 10,
                           "tid": 10, "ts": t, "dur": per_step * period - 1.0})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 10, "ts": t,
                       "dur": 4.0, "args": {"correlation": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t + 5.0, "dur": busy_us,
                       "args": {"correlation": corr, "device": 0, "stream": 7}})
        corr += 1
        t += period
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}],
                                "traceEvents": events}))
    return path


def _starved(data):
    return next((f for f in data["findings"] if f["id"] == "gpu_starved"), None)


# --- the class at 50% idle ------------------------------------------------------------------------

def test_identical_captures_either_side_of_50_pct_get_the_same_class(tmp_path):
    """The same program captured twice, idle 49.9% and 50.1% (0.2 points apart: where the capture
    starts and stops): both are 'about half', never one 'starved' and one not."""
    band = THRESHOLDS["starved_band_pct"][0]
    assert band > 0
    below = analyze_cli(_kineto(tmp_path / "a.json", 501.0, 499.0))
    above = analyze_cli(_kineto(tmp_path / "b.json", 499.0, 501.0))
    for data in (below, above):
        finding = _starved(data)
        assert finding is not None, data["headline"]
        assert finding["title"].startswith("GPU idle about half the window"), finding["title"]
        assert "GPU starved" not in data["headline"] and "not GPU-bound" not in data["headline"]
        assert any(row["name"] == "about_half" for row in finding["evidence"])


def _kineto_two(path, busy_us, gap_us, n=400):
    """Two GPUs: GPU 0 busy all but 1 us of each period, GPU 1 as :func:`_kineto` (idle = gap / (busy + gap)),
    so the starved finding's impact (the mean over the two) is about half of GPU 1's idle: 25% at the line."""
    events, t, corr = [], 1_000_000.0, 1
    period = busy_us + gap_us
    for _ in range(n):
        for device, length in ((0, period - 1.0), (1, busy_us)):
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10 + device,
                           "tid": 10 + device, "ts": t, "dur": 4.0, "args": {"correlation": corr}})
            events.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": device, "tid": 7, "ts": t + 5.0,
                           "dur": length, "args": {"correlation": corr, "device": device, "stream": 7}})
            corr += 1
        t += period
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events, "deviceProperties": [
        {"id": 0, "name": "NVIDIA H100"}, {"id": 1, "name": "NVIDIA H100"}]}))
    return path


def test_identical_captures_either_side_of_50_pct_get_the_same_severity(tmp_path):
    """The same two-GPU program, one GPU idle 49.9% and 50.1%: the impact (mean over the GPUs) is 24.95% and
    25.05%, either side of the medium/high edge. Graded by impact, one was medium and one high; in the band
    the severity is one rule (starved.BAND_SEVERITY), the same on both sides."""
    below = analyze_cli(_kineto_two(tmp_path / "a.json", 501.0, 499.0))
    above = analyze_cli(_kineto_two(tmp_path / "b.json", 499.0, 501.0))
    found = [_starved(below), _starved(above)]
    assert all(finding is not None for finding in found)
    assert found[0]["impact_pct"] < 25.0 <= found[1]["impact_pct"]  # the impact straddles the severity edge
    assert [finding["severity"] for finding in found] == [BAND_SEVERITY, BAND_SEVERITY]
    assert all(finding["title"].startswith("GPU idle about half the window") for finding in found)


def test_a_class_needs_its_margin(tmp_path):
    """Outside the band the classes stand: 60% idle is starved, 40% is not starved (not GPU-bound)."""
    band = THRESHOLDS["starved_band_pct"][0]
    line = THRESHOLDS["starved_idle_min_pct"][0]
    starved = analyze_cli(_kineto(tmp_path / "s.json", 1000.0 - 10 * (line + band + 5), 10 * (line + band + 5)))
    busy = analyze_cli(_kineto(tmp_path / "b.json", 1000.0 - 10 * (line - band - 5), 10 * (line - band - 5)))
    assert _starved(starved)["title"].startswith("GPU starved: idle")
    assert _starved(starved)["severity"] == severity_for(_starved(starved)["impact_pct"])  # above the band: by impact
    assert _starved(busy) is None and "not GPU-bound" in busy["headline"]


def test_real_rank_at_53_pct_idle_is_about_half():
    """HTA's sampled rank 1 idles 52.9% of its window: within the band, 'about half'."""
    need_real(RANK1)
    data = analyze_cli(RANK1)
    assert data["headline"].startswith("[gpu_starved] GPU idle about half the window (52.9%)"), data["headline"]


# --- memsets of unrecorded size -------------------------------------------------------------------

def test_rocprofv3_blit_memsets_are_size_not_recorded_not_0_b():
    """rocprofv3's database records memsets as __amd_rocclr_fillBuffer dispatches, with no size:
    the 151 memsets (149 in the window) are 'size not recorded', the JSON says how many."""
    need_real(BMM)
    fills = sql(BMM, "SELECT COUNT(*) FROM rocpd_kernel_dispatch d JOIN rocpd_info_kernel_symbol s "
                     "ON d.kernel_id = s.id WHERE s.kernel_name LIKE '__amd_rocclr_fill%'")[0][0]
    assert fills == 151
    text = analyze_cli(BMM, fmt="text")
    line = next(line for line in text.splitlines() if line.startswith("copies in the window"))
    assert "149 memsets (size not recorded)" in line and "0 B)" not in line.split(";")[0], line
    data = analyze_cli(BMM)
    memset = data["devices"][0]["copies"]["by_direction"]["memset"]
    assert memset["count"] == 149 and memset["bytes_unrecorded"] == 149 and memset["bytes"] == 0
    for fmt in ("md", "html"):
        assert "149 memsets (size not recorded)" in analyze_cli(BMM, fmt=fmt)


def test_rpd_fillbuffer_memset_has_no_size():
    """RPD records copy sizes in rocpd_copyapi only; a FillBuffer op has none."""
    need_real(RPD_MATMUL)
    assert sql(RPD_MATMUL, "SELECT COUNT(*) FROM rocpd_op o JOIN rocpd_string s ON o.opType_id = s.id "
                           "WHERE s.string = 'FillBuffer'")[0][0] >= 1
    line = next(line for line in analyze_cli(RPD_MATMUL, fmt="text").splitlines() if line.startswith("copies in the window"))
    assert "1 memset (size not recorded)" in line, line


def test_formats_that_record_the_size_keep_it():
    """nsys records memset bytes (CUPTI_ACTIVITY_KIND_MEMSET.bytes): the generated memset-only
    bundle set 4,096 bytes."""
    from conftest import BUNDLES

    line = next(line for line in analyze_cli(BUNDLES / MEMSET_ONLY_NSYS, fmt="text").splitlines()
                if line.startswith("copies in the window"))
    assert "1 memset (4.1 kB)" in line, line


def test_rocprofv3_csv_copies_without_a_size_column():
    """rocprofv3's documented memory_copy_trace.csv has no size column: its 4 copies (2 each way)
    are of unrecorded size, not '0 B'."""
    copies = REAL / "rocprof" / "rocprofv3_docs_memory_copy_trace.csv"
    need_real(copies)
    assert "size" not in copies.read_text().splitlines()[0].lower()
    line = next(line for line in analyze_cli(copies, fmt="text").splitlines() if line.startswith("copies in the window"))
    assert "2 device-to-host copies (size not recorded), 2 host-to-device copies (size not recorded)" in line, line
    by_direction = analyze_cli(copies)["devices"][0]["copies"]["by_direction"]
    assert {k: (v["count"], v["bytes_unrecorded"]) for k, v in by_direction.items()} == {"HtoD": (2, 2), "DtoH": (2, 2)}


# --- one severity rule for tiny windows -----------------------------------------------------------

def test_one_cap_rule_by_window_length():
    toy, short = THRESHOLDS["severity_toy_window_ns"][0], THRESHOLDS["severity_short_window_ns"][0]
    assert window_cap(1_500_000, 6) == window_cap(2_000_000, 4) == window_cap(2_000_000, 50) == "low"
    assert window_cap(toy, 0) == "medium" and window_cap(toy, 5) is None
    assert window_cap(short, 0) is None


def test_toy_windows_of_1_5_and_2_ms_get_the_same_cap(tmp_path):
    """The same starved pattern over 1.5 ms with 6 ProfilerSteps and over 2 ms with 4: HIGH then LOW
    before (5 steps lifted the cap); low both now, and each says why."""
    a = analyze_cli(_kineto(tmp_path / "a.json", 10.0, 40.0, n=30, steps=6))
    b = analyze_cli(_kineto(tmp_path / "b.json", 10.0, 40.0, n=40, steps=4))
    assert a["window"]["duration_ns"] < 2_000_000 <= b["window"]["duration_ns"] + 1_000 < 10_000_000
    for data in (a, b):
        finding = _starved(data)
        assert finding["severity"] == "low", (data["window"], finding["severity"])
        assert any(row["name"] == "severity_capped" for row in finding["evidence"])


def test_real_tiny_windows_are_capped_or_not_judged():
    """tracelens' BERT export (3.9 ms) is capped at low; HTA's 263 µs cuda_event_sync capture is
    not judged at all (too few GPU operations)."""
    need_real(BERT_SMALL)
    data = analyze_cli(BERT_SMALL)
    assert data["window"]["duration_ns"] < 10_000_000
    assert all(f["severity"] in ("low", "info") for f in data["findings"] if f["axis"] == "throughput")
    sync = REAL / "kineto" / "hta_critical_path_cuda_event_sync.json.gz"
    need_real(sync)
    small = analyze_cli(sync)
    assert small["findings"] == [] and small["headline"].startswith("Not enough to judge")
