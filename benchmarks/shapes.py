"""The generated exports bench.py measures: Nsight Systems SQLite files in the real schema
(samples/nsys_schema.sql) with N kernels, in the shapes of ``SHAPES``.

Every shape is one host thread launching kernels round-robin over the devices, then over each
device's streams, with a ``cudaStreamSynchronize`` every ``sync_every`` kernels once every
stream is done. A kernel is launched by its own ``cudaLaunchKernel`` (joined by
``correlationId``), or, with ``graph_kernels``, as a node of a CUDA-graph replay: one
``cudaGraphLaunch`` per ``graph_kernels`` kernels of a sync period, whose ``correlationId``
every kernel of the replay carries, each with its ``graphNodeId`` and ``graphId`` set (how nsys
writes graph kernels when graphs are traced per node, ``--cuda-graph-trace=node``). With
``collective_every``, every such round of kernels (one per device) is an NCCL all-reduce that
ends on every device when the last device's would have: no rank leaves before the last joined.
"""

from __future__ import annotations

import heapq
import random
import sqlite3
import sys
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "samples"))

KERNEL_NAMES = ["gemv_kernel", "rms_norm_kernel", "rotary_embedding_kernel", "paged_attention_v1_kernel",
                "silu_and_mul_kernel", "vectorized_elementwise_kernel", "reduce_kernel"]
LAUNCH_ID, SYNC_ID, GRAPH_LAUNCH_ID, ALLREDUCE_ID = 100, 101, 102, 8
GRAPH_LAUNCH = "cudaGraphLaunch_v10000"  # the name nsys gives the runtime call
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"


@dataclass(frozen=True)
class Shape:
    """What a generated export looks like (module docstring)."""

    devices: int = 1
    streams: int = 1
    sync_every: int = 500
    nvtx: bool = True  # one NVTX range per sync period (else the steps are inferred from the syncs)
    late_rows: int = 0  # runtime rows per 10M written after rows that start later (out of start order)
    late_by: int = 100_000  # such a row is written up to this many runtime rows after its place
    stream_base: int = 7
    host_ns: int = 1500  # host work before each launch call
    call_ns: int = 5000  # the launch call
    kernel_ns: tuple[int, int] = (1500, 3000)
    after_sync_ns: int = 400_000
    graph_kernels: int = 0  # kernels per CUDA-graph replay (0: a cudaLaunchKernel per kernel)
    node_gap_ns: int = 1000  # a replay's next node starts this long after the stream's last kernel ends, at least
    collective_every: int = 0  # every n-th round of kernels (one per device) is an all-reduce (0: none)

    def label(self) -> str:
        extra = (f"_graph{self.graph_kernels}" if self.graph_kernels else "") + (
            f"_coll{self.collective_every}" if self.collective_every else "")
        return (f"{self.devices}dev_{self.streams}str_sync{self.sync_every}_{'nvtx' if self.nvtx else 'nonvtx'}"
                f"_late{self.late_rows}{extra}")

    def check(self) -> None:
        if self.collective_every and self.sync_every % self.devices:
            raise ValueError(f"collectives need whole rounds in a sync period: sync_every {self.sync_every} "
                             f"is not a multiple of {self.devices} devices")


_SYNC2DEV = Shape(devices=2, streams=4, nvtx=False, stream_base=10, host_ns=1200, call_ns=4000,
                  kernel_ns=(2000, 9000), after_sync_ns=200_000)
SHAPES = {
    # one device, one stream, NVTX steps, a stream sync at the end of each step
    "decode": Shape(),
    # two devices alternating, four streams each, no NVTX: steps inferred from the syncs
    "sync2dev": _SYNC2DEV,
    # the same with ~39 runtime rows in 10M out of start order, as multi-threaded exports write
    # them (the real 2xH100 exports have 1 and 5): issue 27's shape
    "late39": replace(_SYNC2DEV, late_rows=39),
    # decode in piecewise CUDA graphs: each step 5 replays of 100 kernels (graph nodes), then the
    # sync; no NVTX: steps inferred from the syncs
    "graph": replace(Shape(), nvtx=False, graph_kernels=100, call_ns=12_000),
    # tensor parallel over 8 devices, 2 streams each, NVTX steps of 512 kernels; every 16th kernel
    # of a device an all-reduce that ends together on every device
    "tp8": replace(_SYNC2DEV, devices=8, streams=2, nvtx=True, sync_every=512, collective_every=16),
}


def build(path: Path, n_kernels: int, per_step: int = 500, shape: str | Shape = "decode") -> None:
    import generate

    if path.exists():
        return
    spec = SHAPES[shape] if isinstance(shape, str) else shape
    if per_step != 500:
        spec = replace(spec, sync_every=per_step)
    spec.check()
    tmp = path.with_suffix(".tmp")
    if tmp.exists():
        tmp.unlink()
    db = sqlite3.connect(tmp)
    db.executescript(generate.SCHEMA.read_text())
    strings = [(i + 1, n) for i, n in enumerate(KERNEL_NAMES)]
    if spec.collective_every:
        strings.append((ALLREDUCE_ID, ALLREDUCE))
    strings += [(LAUNCH_ID, "cudaLaunchKernel_v7000"), (SYNC_ID, "cudaStreamSynchronize_v3020")]
    if spec.graph_kernels:
        strings.append((GRAPH_LAUNCH_ID, GRAPH_LAUNCH))
    db.executemany("INSERT INTO StringIds VALUES (?, ?)", strings)
    pid = 4242
    gpid, gtid = pid << 24, (pid << 24) | pid
    rows = _rows(spec, n_kernels, gpid, gtid, random.Random(1))
    if spec.late_rows:
        rows = _late(rows, n_runtime(spec, n_kernels), max(1, round(spec.late_rows * n_runtime(spec, n_kernels) / 10_000_000)),
                     spec.late_by)
    _insert(db, rows, gpid, pid)
    tmp.rename(path)


def n_runtime(shape: Shape, n_kernels: int) -> int:
    """Runtime rows of an export: the launch calls and the syncs."""
    periods, rest = divmod(n_kernels, shape.sync_every)
    if not shape.graph_kernels:
        return n_kernels + periods
    per_period = -(-shape.sync_every // shape.graph_kernels)
    return periods * (per_period + 1) + -(-rest // shape.graph_kernels)


def _kernel_row(start, end, dev, stream, corr, gpid, name_id, grid=None, node=None, graph=None) -> tuple:
    """One CUPTI_ACTIVITY_KIND_KERNEL row (39 columns) in the real schema's order: ``grid`` is
    gridId (the correlation id when not given), ``node`` and ``graph`` graphNodeId and graphId."""
    return (start, end, dev, 1, None, stream, corr, gpid, name_id, name_id, None, 0, 0, 32, 1, 1, 1, 128, 1, 1,
            0, 0, 0, 0, corr if grid is None else grid, 0, node) + (None,) * 4 + (graph,) + (None,) * 7


def _launch(t: int, host_ns: int, call_ns: int, stream_free: int) -> tuple[int, int, int]:
    """One launch: ``host_ns`` of host work, a ``call_ns`` launch call, and its kernel's start
    (2 µs after the call returns, or when the stream frees up): (call start, call end, kernel start)."""
    s = t + host_ns
    e = s + call_ns
    return s, e, max(e + 2000, stream_free)


class _Round:
    """A collective's kernels of one round (one per device), held until the last device's is
    known: they all end when the last of them would have."""

    def __init__(self):
        self.kernels: list[tuple] = []

    def add(self, ks: int, ke: int, dev: int, stream: int, corr: int, grid: int) -> None:
        self.kernels.append((ks, ke, dev, stream, corr, grid))

    def close(self, gpu: dict, gpid: int, node_of, graph_of):
        end = max(k[1] for k in self.kernels)
        for ks, _, dev, stream, corr, grid in self.kernels:
            gpu[(dev, stream)] = end
            yield ("K", _kernel_row(ks, end, dev, stream, corr, gpid, ALLREDUCE_ID, grid, node_of(grid), graph_of(grid)))
        self.kernels.clear()


def _rows(shape: Shape, n_kernels: int, gpid: int, gtid: int, rng):
    """(table, row) pairs in start order: a launch call (or a graph launch) and its kernels, a
    stream sync every ``sync_every`` kernels once all streams are done, and with ``nvtx`` a range
    over each sync period (its launches and the sync)."""
    t = period_start = 1_000_000_000
    gpu = {(d, s): t for d in range(shape.devices) for s in range(shape.streams)}
    lo, hi = shape.kernel_ns
    g = shape.graph_kernels
    corr = call_end = 0
    held = _Round()

    def node_of(grid):  # a replay's nodes: graph g's node j is (g << 16) | j
        return None if not g else (graph_of(grid) << 16) | ((grid - 1) % shape.sync_every % g)

    def graph_of(grid):  # piecewise: the period's n-th replay is graph n + 1
        return None if not g else 1 + (grid - 1) % shape.sync_every // g

    for i in range(n_kernels):
        dev, stream = i % shape.devices, (i // shape.devices) % shape.streams
        if not g:
            corr += 1
            s0, t, ks = _launch(t, shape.host_ns, shape.call_ns, gpu[(dev, stream)])
        else:
            if i % shape.sync_every % g == 0:  # a replay starts: its one launch call
                corr += 1
                s0, t, _ = _launch(t, shape.host_ns, shape.call_ns, 0)
                call_end = t
                yield ("R", (s0, t, 0, gtid, corr, GRAPH_LAUNCH_ID, 0, None))
            ks = max(call_end + 2000, gpu[(dev, stream)] + shape.node_gap_ns)
        ke = ks + rng.randint(lo, hi)
        grid = i + 1 if g else corr  # gridId: unique per kernel
        if shape.collective_every and (i // shape.devices) % shape.collective_every == shape.collective_every - 1:
            held.add(ks, ke, dev, shape.stream_base + stream, corr, grid)
            if dev == shape.devices - 1:
                yield from held.close(gpu, gpid, node_of, graph_of)
        else:
            gpu[(dev, stream)] = ke
            yield ("K", _kernel_row(ks, ke, dev, shape.stream_base + stream, corr, gpid, 1 + i % 7, grid,
                                    node_of(grid), graph_of(grid)))
        if not g:
            yield ("R", (s0, t, 0, gtid, corr, LAUNCH_ID, 0, None))
        if (i + 1) % shape.sync_every == 0:
            corr += 1
            s0 = t
            t = max(t + 2000, max(gpu.values()) + 3000)
            yield ("R", (s0, t, 0, gtid, corr, SYNC_ID, 0, None))
            if shape.nvtx:
                yield ("N", (period_start, t, 59, "decode_step", gtid, 0))
            t += shape.after_sync_ns
            period_start = t


def _late(rows, n_runtime: int, k: int, late_by: int):
    """The rows with ``k`` runtime rows (chosen at random) each written 1..``late_by`` runtime
    rows after its place: out of start order, as a thread's buffered rows come out in a
    multi-threaded export. Its own random stream, so every other value is as without it."""
    rng = random.Random(27)
    chosen = set(rng.sample(range(n_runtime), min(k, n_runtime)))
    held: list = []  # (runtime ordinal to write it after, ordinal, row)
    ordinal = 0
    for kind, row in rows:
        if kind != "R":
            yield kind, row
            continue
        if ordinal in chosen:
            heapq.heappush(held, (ordinal + rng.randint(1, late_by), ordinal, row))
        else:
            yield kind, row
            while held and held[0][0] <= ordinal:
                yield "R", heapq.heappop(held)[2]
        ordinal += 1
    while held:
        yield "R", heapq.heappop(held)[2]


SQL = {
    "K": f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({','.join('?' * 39)})",
    "R": "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    "N": "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES (?, ?, ?, ?, ?, ?)",
}


def _insert(db, rows, gpid: int, pid: int) -> None:
    """Generated (table, row) pairs inserted in batches of 100k, then the process row; closes the db."""
    batch: dict[str, list] = {k: [] for k in SQL}
    for kind, row in rows:
        batch[kind].append(row)
        if len(batch[kind]) >= 100_000:
            db.executemany(SQL[kind], batch[kind])
            batch[kind].clear()
    for kind, b in batch.items():
        if b:
            db.executemany(SQL[kind], b)
    db.execute("INSERT INTO PROCESSES VALUES (?, ?, 'python3')", (gpid, pid))
    db.commit()
    db.close()
