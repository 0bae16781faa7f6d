"""Collective skew judged from a few ranks of a larger job (auditor's item: "waited for most: rank 1 …, last to start
5 calls (100.0% of the waiting)" from 2 of 128 ranks).

The late rank is the one the others wait for, among the ranks compared: when the traces' ``distributedInfo`` says the
job has more ranks than were captured, the late one is most likely among those not captured. Then the skew is still
measured between the captured ranks, says how many of how many were captured, names no late rank, and leaves the
rest of the collective time as waiting on the ranks not captured. The truth: the world size and ranks from the raw
files (plain json), the late rank from the built traces' own timing."""

import gzip
import json
import shutil

import pytest
from conftest import real

from tracetriage import analyze, open_case
from tracetriage.reports import render

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
HOST, COMPUTE, COMM = 11, 7, 9


def _texts(found) -> str:
    return " ".join([found[key] for key in ("title", "mechanism", "fix", "confirm", "falsifier")]
                    + [row["text"] for row in found["evidence"]])


def test_real_hta_two_of_128_ranks_name_no_late_rank(tmp_path):
    """HTA's sampled rank 0 and rank 1 of a 128-rank TorchRec job: the skew between them is measured, but rank 1
    is not named as the rank the job waits for, and the finding says 2 of 128 ranks were captured."""
    for rank in (0, 1):
        shutil.copy(real("kineto", f"hta_trace_filter_sampled_rank{rank}.json.gz"), tmp_path)
    infos = [json.load(gzip.open(path, "rt"))["distributedInfo"] for path in sorted(tmp_path.iterdir())]
    world, ranks = infos[0]["world_size"], sorted(info["rank"] for info in infos)
    assert world > len(ranks) == 2
    a = analyze(str(tmp_path))
    skew = a.data["collective_skew"]
    assert skew["matched"] > 0 and skew["late_rank"] is None
    assert skew["reason"].startswith(f"2 of {world} ranks captured")
    found = next(f for f in a.findings if f["id"] == "collective_dominant")
    texts = _texts(found)
    assert f"2 of {world} ranks captured" in texts and f"{world - 2} ranks not captured" in texts
    assert "waited for most" not in texts and "late rank's own call" not in texts and "rank 1 (" not in texts
    assert f"2 of {world} ranks captured" in render(a, "text")


def _rank_trace(path, rank: int, world: int, late_us: float, steps: int = 6):
    """One rank of a DDP job: each step 10 ms of gemms (``late_us`` more on the late rank), then one all-reduce that
    every rank leaves at the same time (the last one to arrive sets it), on one clock; rank ``rank`` of ``world``."""
    events, corr, t = [], 0, 0.0

    def kernel(name, start, dur, stream):
        nonlocal corr
        corr += 1
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": 1000.0 + start,
                       "dur": dur, "args": {"device": 0, "stream": stream, "correlation": corr, "External id": corr,
                                            **({"Collective name": "allreduce"} if stream == COMM else {})}})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": HOST, "tid": HOST,
                       "ts": 990.0 + start, "dur": 4.0, "args": {"correlation": corr, "External id": corr}})

    for step in range(steps):
        begin = t
        events.append({"ph": "X", "cat": "user_annotation", "name": "autograd::engine::evaluate_function: MmBackward0",
                       "pid": HOST, "tid": HOST, "ts": 1000.0 + t, "dur": 10_000.0, "args": {}})
        mine = 10_000.0 + late_us
        kernel(GEMM, t, mine - 10.0, COMPUTE)
        arrive, leave = t + mine, t + 10_000.0 + 5_000.0 + 2_000.0  # the late rank arrives 5 ms after the others
        kernel(ALLREDUCE, arrive, leave - arrive, COMM)
        t = leave + 20.0
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": HOST, "tid": HOST,
                       "ts": 1000.0 + begin, "dur": t - begin, "args": {}})
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
           "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world}, "traceEvents": events}
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))


@pytest.mark.parametrize("world", [2, 16])
def test_built_late_rank_is_named_only_when_every_rank_is_captured(tmp_path, world):
    """Rank 1's gemms run 5 ms longer each step, rank 0 waits in every all-reduce: of a 2-rank job, rank 1 is the
    late rank (named, the skew texts); of a 16-rank job, 2 ranks captured, none is named, and the texts are the
    waiting ones without a name (capture every rank), not the data-parallel tuning."""
    for rank in (0, 1):
        _rank_trace(tmp_path / f"rank{rank}.json.gz", rank, world, late_us=5_000.0 if rank == 1 else 0.0)
    a = analyze(open_case([tmp_path]))
    skew = a.data["collective_skew"]
    assert skew["matched"] == 6 and skew["wait_share_pct"] > 50
    found = next(f for f in a.findings if f["id"] == "collective_dominant")
    if world == 2:
        assert skew["late_rank"]["rank"] == 1 and skew["reason"] is None
        assert "rank 1" in found["title"] and "waited for most: rank 1" in _texts(found)
    else:
        assert skew["late_rank"] is None and skew["reason"].startswith(f"2 of {world} ranks captured")
        texts = _texts(found)
        assert f"2 of {world} ranks captured" in texts and "rank 1" not in found["title"]
        assert "waited for most" not in texts and f"{world - 2} ranks not captured" in texts
        # most of the captured time is waiting: the advice is to find the late rank, not the link or the buckets
        assert "the late rank is not named" in found["title"] and "capture every rank" in found["fix"]
        assert "bucket_cap_mb" not in found["fix"] and "faster link would not shorten" in found["mechanism"]
