#!/usr/bin/env python3
"""`tracetriage mcp`'s analyze call on a generated export against the CLI's own analysis of it
(issue 37: a call returns within the analysis time, with progress notifications).

    python benchmarks/bench_mcp.py --kernels 10000000

Builds (once, under benchmarks/out/, as bench.py) the ``decode`` export with N kernels, times
``tracetriage analyze FILE -f json --no-cache`` in a fresh process, then starts ``tracetriage mcp
--no-cache`` with the SDK's own client, waits for its worker to start, and times one analyze call
on the same file; prints both and each progress notification (seconds into the call, value, words).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "samples"))

WORKER_START_S = 8.0  # the worker imports the analysis modules when the server starts, before any call


async def mcp_call(path: Path) -> tuple[object, float, list]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "tracetriage", "mcp", "--root", str(path.parent),
                                                                 "--no-cache"])
    notes = []
    async with Client(params, read_timeout_seconds=3600) as client:
        await client.list_tools()
        await asyncio.sleep(WORKER_START_S)
        started = time.perf_counter()

        async def note(value, total, message):
            notes.append((round(time.perf_counter() - started, 2), value, message))

        result = await client.call_tool("analyze", {"paths": [str(path)]}, progress_callback=note)
        return result, time.perf_counter() - started, notes


def main(argv=None) -> None:
    import bench

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    path = HERE / "out" / f"mcp_decode_{args.kernels}.sqlite"
    path.parent.mkdir(exist_ok=True)
    bench.build(path, args.kernels, shape="decode")
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tracetriage", "analyze", str(path), "-f", "json", "--no-cache"], check=True,
                   capture_output=True)
    cli = time.perf_counter() - started
    result, took, notes = asyncio.run(mcp_call(path))
    print(f"{args.kernels:,} kernels: CLI analyze -f json --no-cache {cli:.2f} s; MCP analyze call {took:.2f} s "
          f"({took / cli:.2f}x; error: {result.is_error})")
    for seconds, value, words in notes:
        print(f"  progress at {seconds:6.2f} s: {value:g} {words}")


if __name__ == "__main__":
    main()
