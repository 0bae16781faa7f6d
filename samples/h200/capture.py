"""Capture real PyTorch profiler (Kineto) traces on one GPU, for tracetriage's samples.

Run on the machine with the GPU:  python3 samples/h200/capture.py OUTDIR
Each workload is a small, deliberate version of one triage case (seeds/):
eager decode (launch-bound), the same decode replayed as a CUDA graph,
pageable host-to-device copies (copy-bound), a host sync every step, and
large bf16 GEMMs (compute-bound). Weights are random; nothing is downloaded.
"""
import gzip
import os
import shutil
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
dev = torch.device("cuda")
torch.manual_seed(0)


class Block(torch.nn.Module):
    """One Llama-like decoder block, unfused (RMSNorm, QKV, SiLU MLP)."""

    def __init__(self, d, ff):
        super().__init__()
        self.n1 = torch.nn.RMSNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d, bias=False)
        self.o = torch.nn.Linear(d, d, bias=False)
        self.n2 = torch.nn.RMSNorm(d)
        self.up = torch.nn.Linear(d, 2 * ff, bias=False)
        self.down = torch.nn.Linear(ff, d, bias=False)

    def forward(self, x, kv):
        h = self.n1(x)
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        b, d = q.shape[0], q.shape[-1]
        heads = 16
        q = q.view(b, heads, 1, d // heads)
        k = torch.cat([kv[0], k.view(b, heads, 1, d // heads)], dim=2)
        v = torch.cat([kv[1], v.view(b, heads, 1, d // heads)], dim=2)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        x = x + self.o(a.reshape(b, 1, d))
        g, u = self.up(self.n2(x)).chunk(2, dim=-1)
        return x + self.down(torch.nn.functional.silu(g) * u)


def model(layers=12, d=2048, ff=5632):
    return torch.nn.ModuleList(Block(d, ff) for _ in range(layers)).to(dev, torch.bfloat16).eval()


def run_profiled(name, step_fn, steps, warmup=3):
    for _ in range(warmup):
        step_fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step_fn()
            prof.step()  # marks ProfilerStep#N, as a training or serving loop does
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    raw = os.path.join(OUT, name + ".json")
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as src, gzip.open(raw + ".gz", "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(raw)
    print(f"{name}: {steps} steps in {wall:.3f} s, {os.path.getsize(raw + '.gz')/1e6:.2f} MB gz", flush=True)


@torch.inference_mode()
def main():
    os.makedirs(OUT, exist_ok=True)
    print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0), flush=True)
    m = model()
    b, d, ctx = 8, 2048, 512
    kv = [(torch.randn(b, 16, ctx, d // 16, device=dev, dtype=torch.bfloat16),) * 2 for _ in m]
    x0 = torch.randn(b, 1, d, device=dev, dtype=torch.bfloat16)

    def decode():
        x = x0
        for blk, c in zip(m, kv):
            x = blk(x, c)
        return x

    # 1. eager decode: hundreds of small kernels per step, each launched from Python.
    run_profiled("eager_decode", decode, steps=20)

    # 2. the same step captured once and replayed as a CUDA graph.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            decode()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        decode()
    run_profiled("graph_decode", g.replay, steps=20)

    # 3. host sync every step: the sampled token read back with .item().
    def synced():
        y = decode()
        return int(y.float().argmax().item())
    run_profiled("host_sync_decode", synced, steps=20)

    # 4. offload: 256 MiB of pageable host memory copied in before each small compute.
    host = torch.randn(64 * 1024 * 1024, dtype=torch.float32)  # 256 MiB pageable
    w = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)

    def offload():
        t = host.to(dev, non_blocking=False)
        return (w @ w).sum() + t[:1]
    run_profiled("offload_copy", offload, steps=8)

    # 5. compute-bound: large bf16 GEMMs back to back.
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)

    def gemm():
        c = a
        for _ in range(8):
            c = a @ a
        return c
    run_profiled("gemm_bf16", gemm, steps=10)


if __name__ == "__main__":
    main()
