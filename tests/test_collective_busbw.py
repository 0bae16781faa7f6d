"""Collective time read by the bus bandwidth it reaches (auditor's item: single-rank DDP collective time was read
as transfer time when it is a rank waiting for its peers).

The PyTorch profiler records each collective's message beside its kernel (``In msg nelems``, ``dtype``, ``Group
size``). busbw = message bytes / time x the op's factor (nccl-tests' doc/PERFORMANCE.md: all-reduce 2(n-1)/n,
all-gather / reduce-scatter (n-1)/n, broadcast 1), over the calls of 4 MB or more. Far under the device's fabric
(under 10% of its bandwidth each way per GPU) the kernels spin waiting for a late peer: the finding says so and
sends the reader to capture every rank, not to bucket tuning or a faster link. The truth here is computed from the
raw JSON and from the device table as a file (devices.toml read with tomllib, the per-link figures of
analyzers/topology.py), never from the code under test's figures."""

import gzip
import json
import tomllib

import pytest
from conftest import ROOT, real

from tracetriage import analyze, open_case
from tracetriage.analyzers import analysis
from tracetriage.analyzers.rules.collective import VENDOR_WORDS
from tracetriage.analyzers.rules.collective_bus import bus_reading
from tracetriage.analyzers.topology import LINK_GBPS, NVLINK_GBPS_PER_LINK

DEVICES = tomllib.loads((ROOT / "analyzers" / "devices.toml").read_text())
DTYPE_BYTES = {"BFloat16": 2, "Float": 4, "Long": 8}
MIN_BYTES = 4_000_000
TEXTS = ("title", "mechanism", "fix", "confirm", "falsifier")


def _fabric_gbps(key: str) -> float:
    """The device's fabric bandwidth each way per GPU from the table as written: NV# links x the NVLink figure, or
    fabric_links x the class's per-link figure."""
    entry = DEVICES[key]
    cell = entry["fabric"]
    if cell.startswith("NV"):
        return int(cell[2:]) * NVLINK_GBPS_PER_LINK
    return entry["fabric_links"] * LINK_GBPS[cell]


def _nccl_factor(op: str, n: int) -> float:
    """nccl-tests' busbw factor, written out (doc/PERFORMANCE.md)."""
    return {"allreduce": 2 * (n - 1) / n, "_allgather_base": (n - 1) / n, "broadcast": 1.0}[op]


def _raw_busbw(path, lo_ns: int, hi_ns: int) -> tuple[float, int]:
    """(busbw GB/s, calls) of the collective kernels starting in [lo, hi) that record a message of 4 MB or more."""
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    bus_bytes = time_ns = 0.0
    calls = 0
    for e in events:
        args = e.get("args") or {}
        if e.get("cat") != "kernel" or "In msg nelems" not in args:
            continue
        start = round(e["ts"] * 1000)
        size = max(args["In msg nelems"], args["Out msg nelems"]) * DTYPE_BYTES[args["dtype"]]
        if not lo_ns <= start < hi_ns or size < MIN_BYTES or args["Group size"] < 2:
            continue
        bus_bytes += size * _nccl_factor(args["Collective name"], args["Group size"])
        time_ns += round((e["ts"] + e["dur"]) * 1000) - start
        calls += 1
    return bus_bytes / time_ns, calls


def _finding(data, finding_id):
    return next((f for f in data["findings"] if f["id"] == finding_id), None)


def _evidence(found, name):
    return next((row for row in found["evidence"] if row["name"] == name), None)


def _texts(found) -> str:
    return " ".join(found[key] for key in TEXTS)


# --- real captures ----------------------------------------------------------------------------------------

def test_real_mi300_ddp_single_rank_all_reduce_is_waiting_not_transfer():
    """8 x MI300X DDP, one rank captured: the all-reduces that record their message (2.87M and 8.82M bf16 in 6.9
    and 8.9 ms) reach ~2.6 GB/s busbw, under 1% of the 350 GB/s XGMI gives an MI300X. The verdict read it as
    transfer time and told the reader to tune bucket_cap_mb or buy a faster link; it reads it as the rank waiting
    for a late peer, gives the busbw and its denominator, and says to capture every rank."""
    path = real("kineto", "tracelens_mi300_ddp8_resnet_act_checkpoint.json.gz")
    data = analyze(open_case([path])).data
    busbw, calls = _raw_busbw(path, data["window"]["start_ns"], data["window"]["end_ns"])
    assert calls == 2 and busbw < 0.1 * _fabric_gbps("mi300x")
    found = _finding(data, "collective_dominant")
    assert found is not None and data["findings"][0]["id"] == "collective_dominant"
    assert _evidence(found, "busbw_gbps")["value"] == pytest.approx(busbw, abs=0.01)
    share = _evidence(found, "busbw_pct_of_fabric")["value"]
    assert share == pytest.approx(100 * busbw / _fabric_gbps("mi300x"), abs=0.01)
    assert _evidence(found, "busbw_reading")["value"] == "waiting"
    assert f"{busbw:.1f} GB/s bus bandwidth" in found["title"] and "waiting for a late peer" in found["title"]
    assert "capture every rank" in found["fix"] and "bucket_cap_mb or a faster link would not" in found["fix"]
    assert "one rank of the 8" in found["mechanism"]
    texts = _texts(found)
    assert "rccl-tests" in texts and "RCCL" in texts and "XGMI" in texts
    assert not any(word in texts for word in ("nccl-tests", "NVLink", "NCCL calls"))


def test_real_hta_a100_two_rank_all_reduce_busbw_is_measured_against_nvlink():
    """HTA's nccl_parser_config (A100, 2 ranks, one captured): 2,049,000 to 7,875,584 floats per all-reduce in
    1.7-6 ms, a few GB/s busbw (factor 2(n-1)/n = 1 at n = 2) against the 300 GB/s of an A100 SXM's 12 NVLinks:
    the same reading (its collectives run 5.9% of the window, under the dominant line, so no finding fires)."""
    path = real("kineto", "hta_nccl_parser_config_nccl_data.json.gz")
    case = open_case([path])
    metrics = analysis.analyze_trace(case.traces[0], 0, False, None)
    busbw, calls = _raw_busbw(path, metrics.window.start_ns, metrics.window.end_ns)
    device = metrics.devices[0]
    assert device.collective_bus.judged == calls > 0
    assert device.collective_bus.busbw_gbps == pytest.approx(busbw, rel=1e-6)
    reading = bus_reading([device], None, VENDOR_WORDS["cuda"])
    assert reading.waiting and busbw < 0.1 * _fabric_gbps("a100_sxm_40gb")
    assert "NVLink" in reading.evidence[1].text and "nccl-tests" in reading.evidence[0].text


# --- built captures ---------------------------------------------------------------------------------------

HOST, COMPUTE, COMM = 11, 7, 9
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _ddp_trace(path, *, allreduce_us: float, nelems: int | None, group: int = 8, device: str = "NVIDIA H100 80GB HBM3",
               steps: int = 4, world: int = 8):
    """A one-rank DDP trace: each step a 10 ms backward (gemms under autograd ranges), then one gradient all-reduce
    of ``nelems`` bf16 over ``group`` ranks that takes ``allreduce_us`` with nothing to hide it, then the
    optimizer. ``nelems`` None: the kernel records no message (an older profiler)."""
    events, t, corr = [], 0.0, 0

    def kernel(name, start, dur, stream, args=None):
        nonlocal corr
        corr += 1
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": 1000.0 + start,
                       "dur": dur, "args": {"device": 0, "stream": stream, "correlation": corr, "External id": corr,
                                            **(args or {})}})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": HOST, "tid": HOST,
                       "ts": 995.0 + start - 5.0, "dur": 4.0, "args": {"correlation": corr, "External id": corr}})

    def annotation(name, start, dur):
        events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": HOST, "tid": HOST,
                       "ts": 1000.0 + start, "dur": dur, "args": {}})

    for step in range(steps):
        begin = t
        annotation("autograd::engine::evaluate_function: MmBackward0", t, 10_000.0)
        for _ in range(20):
            kernel(GEMM, t, 490.0, COMPUTE)
            t += 500.0
        message = {"Collective name": "allreduce"}
        if nelems is not None:
            message.update({"In msg nelems": nelems, "Out msg nelems": nelems, "dtype": "BFloat16", "Group size": group})
        annotation("nccl:all_reduce", t - 5.0, allreduce_us + 5.0)
        kernel(ALLREDUCE, t, allreduce_us, COMM, message)
        t += allreduce_us + 10.0
        annotation("Optimizer.step#AdamW.step", t, 200.0)
        kernel("multi_tensor_apply_kernel", t, 200.0, COMPUTE)
        t += 220.0
        annotation(f"ProfilerStep#{step}", begin, t - begin)
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": device, "totalGlobalMem": 80 << 30}],
           "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": world}, "traceEvents": events}
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def _busbw(nelems: int, allreduce_us: float, group: int) -> float:
    return nelems * 2 * _nccl_factor("allreduce", group) / (allreduce_us * 1000)


def test_built_slow_all_reduce_on_h100_is_waiting(tmp_path):
    """50 MB of bf16 gradients all-reduced over 8 H100s in 15 ms: ~5.8 GB/s busbw, 1.3% of 18 NVLinks' 450 GB/s."""
    nelems, took = 25_000_000, 15_000.0
    data = analyze(open_case([_ddp_trace(tmp_path / "slow.json.gz", allreduce_us=took, nelems=nelems)])).data
    found = _finding(data, "collective_dominant")
    assert found is not None
    expected = _busbw(nelems, took, 8)
    assert _evidence(found, "busbw_gbps")["value"] == pytest.approx(expected, abs=0.01)
    assert _evidence(found, "busbw_pct_of_fabric")["value"] == pytest.approx(100 * expected / _fabric_gbps("h100_sxm"),
                                                                             abs=0.01)
    assert "waiting for a late peer" in found["title"] and "NVLink's 450 GB/s" in found["title"]
    assert "capture every rank" in found["fix"] and "tune bucket_cap_mb" not in found["fix"]
    texts = _texts(found)
    assert "nccl-tests" in texts and "NCCL" in texts and not any(w in texts for w in ("rccl-tests", "XGMI", "RCCL"))


def test_built_fast_all_reduce_keeps_the_ddp_advice(tmp_path):
    """800 MB of bf16 gradients in 6 ms: ~233 GB/s busbw, half of the link: data moving, so the DDP advice (overlap
    the all-reduce with backward, bucket_cap_mb) stays, with the busbw as evidence."""
    nelems, took = 400_000_000, 6_000.0
    data = analyze(open_case([_ddp_trace(tmp_path / "fast.json.gz", allreduce_us=took, nelems=nelems)])).data
    found = _finding(data, "collective_dominant")
    assert found is not None
    assert _evidence(found, "busbw_gbps")["value"] == pytest.approx(_busbw(nelems, took, 8), abs=0.01)
    assert _evidence(found, "busbw_reading")["value"] == "not judged"
    assert "bucket_cap_mb" in found["fix"] and "late peer" not in found["title"]


@pytest.mark.parametrize("case, why", [
    ({"nelems": None}, "not measured: the trace records no message size"),
    ({"nelems": 250_000}, "none moves 4.0 MB or more"),  # 0.5 MB: latency-bound, not judged
    ({"nelems": 25_000_000, "group": 16, "world": 16}, "more than the 8 GPUs one node's fabric joins"),
    ({"nelems": 25_000_000, "device": "NVIDIA L4"}, "holds no GPU fabric for NVIDIA L4"),
])
def test_built_slow_all_reduce_not_judged_keeps_todays_reading(tmp_path, case, why):
    """Where the busbw is not measured (no message recorded, only small calls) or cannot be judged against the
    node's fabric (a group larger than a node, a device without one in the table), the finding reads as before
    (DDP's advice) and says why the bandwidth was not judged."""
    path = _ddp_trace(tmp_path / "t.json.gz", allreduce_us=15_000.0, **case)
    found = _finding(analyze(open_case([path])).data, "collective_dominant")
    assert found is not None
    row = next(row for row in found["evidence"] if row["name"] in ("busbw_reading", "busbw_gbps") and why in row["text"])
    assert row is not None
    assert "bucket_cap_mb" in found["fix"] and "late peer" not in found["title"]


@pytest.mark.parametrize("op, n, factor", [("AllReduce", 8, 1.75), ("AllReduce", 2, 1.0), ("AllGather", 8, 0.875),
                                           ("ReduceScatter", 4, 0.75), ("Broadcast", 8, 1.0), ("AllReduce", 1, None),
                                           ("Collective", 8, None)])
def test_bus_factor_is_nccl_tests(op, n, factor):
    from tracetriage.analyzers.busbw import bus_factor

    assert bus_factor(op, n) == factor


@pytest.mark.parametrize("args, message", [
    ({"In msg nelems": 1000, "Out msg nelems": 8000, "dtype": "BFloat16", "Group size": 8}, (16000, 8)),  # all-gather
    ({"In msg nelems": 8000, "Out msg nelems": 1000, "dtype": "Float", "Group size": 8}, (32000, 8)),  # reduce-scatter
    ({"In msg nelems": 10, "dtype": "Long", "Group size": 2}, (80, 2)),
    ({"In msg nelems": "10", "Out msg nelems": None, "dtype": "Float", "Group size": 2}, None),  # not an int
    ({"In msg nelems": 10, "dtype": "NoSuchType", "Group size": 2}, None),
    ({"In msg nelems": 10, "dtype": "Float", "Group size": True}, None),
    ({"In msg nelems": 10, "dtype": "Float", "Group size": 0}, None),
    ({"In msg nelems": -5, "dtype": "Float", "Group size": 2}, None),
    ({"In msg nelems": 1 << 60, "dtype": "Float", "Group size": 2}, None),
    ({"dtype": "Float", "Group size": 2}, None),
])
def test_collective_message_of_odd_args(args, message):
    """The recorded message as nccl-tests sizes it (the larger of input and output), or None for args that are
    missing or not what the profiler writes (a hostile or hand-edited file never becomes a size)."""
    from tracetriage.parsers.kineto_events import collective_message

    assert collective_message(args) == message
