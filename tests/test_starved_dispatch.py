"""gpu_starved inside a host range that launches the GPU's work itself (a model's forward dispatched op by op):
the gaps are per-op host overhead, and the fix is CUDA graphs / torch.compile / a larger batch, never "move it
to another thread" (audit: tracelens_h100_bert_small, nn.Module: BertEncoder_0, 60 kernels of 3-9 us with
50 us gaps). A range that launches nothing keeps the "shorten it or move it off the feeding thread" advice."""

import random

from conftest import real, samples_generate

from tracetriage import analyze, open_case

US = 1_000


def _starved(a) -> dict:
    return next(f for f in a.findings if f["id"] == "gpu_starved")


def _forward_dispatch(tmp_path, seed=5):
    """Three forwards, each one host range launching 60 kernels of ~6 us, ~50 us of Python before each launch
    (the GPU drains between them); returns the trace and the generator's own count of the gaps inside the
    ranges that end with a kernel launched from inside them."""
    generate = samples_generate()
    rng = random.Random(seed)
    rank = generate.Rank(pid=6100, device=0, program="python3 bert_infer.py")
    gaps_launched = 0
    for _ in range(3):
        start = rank.t
        for _ in range(60):
            rank.host(int(rng.uniform(40, 60) * US))
            before = rank.gpu_free
            kernel_start, _ = rank.launch("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_64x64>",
                                          int(rng.uniform(3, 9) * US))
            gaps_launched += kernel_start > before  # an idle gap ends with this kernel
        rank.host_ranges.append((start, rank.t, "nn.Module: BertEncoder_0"))
        rank.host(int(rng.uniform(20, 40) * US))
    path = tmp_path / "forward.sqlite"
    generate.write_nsys(path, [rank], "forward_dispatch")
    return path, gaps_launched


def _postprocess_range(tmp_path, seed=6):
    """Each iteration launches 60 kernels back to back, then 3 ms of host code in a range that launches nothing."""
    generate = samples_generate()
    rng = random.Random(seed)
    rank = generate.Rank(pid=6200, device=0, program="python3 serve.py")
    for _ in range(6):
        for _ in range(60):
            rank.launch("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_64x64>", int(rng.uniform(3, 9) * US),
                        launch_ns=1 * US)
        start = rank.t
        rank.host(int(rng.uniform(2_800, 3_200) * US))
        rank.host_ranges.append((start, rank.t, "postprocess"))
    path = tmp_path / "post.sqlite"
    generate.write_nsys(path, [rank], "postprocess_range")
    return path


def test_generated_forward_that_launches_its_kernels_gets_the_dispatch_advice(tmp_path):
    path, gaps_launched = _forward_dispatch(tmp_path)
    found = _starved(analyze(open_case([path])))
    launches = next(row for row in found["evidence"] if row["name"] == "range_launches_pct")
    covered = next(row for row in found["evidence"] if row["name"] == "host_range")
    gaps = int(covered["text"].rsplit("over ", 1)[1].split()[0])
    assert gaps >= 150 and gaps_launched >= gaps - 3  # the generator: (nearly) every gap ends with its own launch
    assert launches["value"] >= 95.0
    assert "CUDA/HIP graph" in found["fix"] and "torch.compile" in found["fix"] and "larger batch" in found["fix"]
    assert "move it to another thread" not in found["fix"] and "per-op host overhead" in found["title"]


def test_generated_range_that_launches_nothing_keeps_the_move_it_advice(tmp_path):
    found = _starved(analyze(open_case([_postprocess_range(tmp_path)])))
    assert "postprocess" in found["title"] and "per-op" not in found["title"]
    assert "move it to" in found["fix"] and "range_launches_pct" not in [row["name"] for row in found["evidence"]]


def test_real_bert_forward_is_per_op_host_overhead():
    """The BERT forward's idle is per-op host overhead: read as launch_bound once its one ProfilerStep counts as a
    step (60 launches of ~5 us kernels per step), else as gpu_starved with the per-op advice; never 'move it to
    another thread'."""
    a = analyze(open_case([real("kineto", "tracelens_h100_bert_small.json.gz")]))
    top = a.findings[0]
    assert "move it to another thread" not in top["fix"]
    if top["id"] == "launch_bound":
        assert "graph" in top["fix"] and "torch.compile" in top["fix"]
        return
    found = _starved(a)
    assert "nn.Module: BertEncoder_0" in found["title"] and "per-op host overhead" in found["title"]
    launches = next(row for row in found["evidence"] if row["name"] == "range_launches_pct")
    assert launches["value"] > 90.0  # 48 of the 49 gaps inside the forward end with a kernel it launched
    assert "torch.compile" in found["fix"] and "move it to another thread" not in found["fix"]
