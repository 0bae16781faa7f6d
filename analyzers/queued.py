"""Which GPU operations were queued before they ran: the input of the timeline's dependency waits
(timeline.py, cause ``dependency``)."""

from __future__ import annotations

import re

import numpy as np

from tracetriage.model import Trace, cat_codes, cat_lut

# Once the call that launched an operation has returned, an idle GPU starts it within a few µs (launch latency
# 5-20 µs on CUDA and HIP, a queued op after the previous one a few µs); 50 µs is past both with a margin for the
# host and device clocks of a trace: an idle GPU holding the work longer than that waits on a dependency.
DEPENDENCY_LATENCY_NS = 50_000

LAUNCHING = ("launch", "graph_launch", "memcpy_async", "memcpy_sync", "memset")  # calls that put GPU work on a stream
# What can hold queued work on a GPU: a stream waiting on an event or a memory value (cudaStreamWaitEvent,
# cuStreamWaitValue32, hipStreamWaitEvent ...), or a graph, whose nodes can wait on events. A process that
# made no such call has nothing to wait on: an operation that started late there is one whose predecessors
# the capture lost (a sampled or truncated trace), not a dependency.
WAIT_CALLS = re.compile(r"(?i)StreamWait(?:Event|Value)|WaitValue(?:32|64)|GraphLaunch")


def queued_early(trace: Trace, pid: int, mine: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The process's GPU rows (indices into the trace's table, ascending) whose launch call returned more than
    DEPENDENCY_LATENCY_NS before the row started, with that call's end: the only rows an idle GPU can have
    held queued past the launch latency. Joined on (pid, correlation), the launching calls only. A row whose
    correlation is below every recorded launch call's (ids grow call by call) was launched before the capture
    began: it was queued from the process's first recorded call on. ``mine``: the process's rows of the API
    table, as the timeline's host slicer has them (None: every row, a one-process trace)."""
    gpu, api = trace.gpu, trace.api
    empty = np.empty(0, np.int64), np.empty(0, np.int64)
    if not len(gpu) or not len(api):
        return empty

    def own(values: np.ndarray) -> np.ndarray:  # the process's rows of an API column (a view for one process)
        return values if mine is None else values[mine]

    codes, names = cat_codes(api["name"])
    waits = np.array([bool(WAIT_CALLS.search(str(name))) for name in names] + [False], bool)
    if not waits[own(codes)].any():
        return empty
    category, launching = cat_lut(api["category"], LAUNCHING)
    corr = own(api["correlation"].to_numpy())
    calls = launching[own(category)] & (corr >= 0)
    if not calls.any():
        return empty
    keys, ends = corr[calls], own(api["end"].to_numpy())[calls]
    order = np.argsort(keys, kind="stable")
    keys, ends = keys[order], ends[order]
    rows = np.flatnonzero((gpu["pid"].to_numpy() == pid) & (gpu["correlation"].to_numpy() >= 0))
    want = gpu["correlation"].to_numpy()[rows]
    pos = np.minimum(np.searchsorted(keys, want), keys.size - 1)
    hit = keys[pos] == want
    before = (~hit) & (want > 0) & (want < keys[0])  # launched before the capture's first launch call
    first_call = int(own(api["start"].to_numpy()).min())
    ready = np.concatenate((ends[pos[hit]], np.full(int(before.sum()), first_call, np.int64)))
    rows = np.concatenate((rows[hit], rows[before]))
    order = np.argsort(rows, kind="stable")
    rows, ready = rows[order], ready[order]
    early = ready < gpu["start"].to_numpy()[rows] - DEPENDENCY_LATENCY_NS
    return rows[early].astype(np.int64), ready[early].astype(np.int64)
