"""Collective communication (NCCL/RCCL and custom all-reduce kernels) per device, and its skew
across ranks.

* ``collective_share_pct`` = measure of the union of collective kernels of the
  device in the window / window_ns x 100.
* ``collective_exposed_pct`` = measure of (collective union minus the union of the
  device's compute kernels) / window_ns x 100: communication time that no compute
  kernel on another stream hides.
* ``bus``: the bus bandwidth the calls in the window reached, from the messages they record, against the
  device's fabric (analyzers/busbw.py).
* ``collectives_by_op[op]`` = union of that op's kernels / window_ns x 100.
* Skew (several ranks in one case). A collective completes on every rank at about the same time
  (no rank leaves before the last one has joined), so the same call is found by its END: a call of
  the rank with the fewest calls is matched, on every other rank, to the call of the same op whose
  end is nearest, when the two ends lie within ``max(END_TOLERANCE_MIN_NS, END_TOLERANCE_SHARE x
  the shorter duration)``. That holds whatever events a capture dropped and whatever the ranks ran
  before, and it checks the clocks: ranks on clocks apart by more than the tolerance match nothing.
  Of a matched call, skew = latest start - earliest start; the rank with the latest start is the
  late one, and every other rank waits ``min(latest start - its start, its duration)`` in it.
  ``wait_share`` = the sum of those waits / the sum of the matched calls' durations over all ranks:
  the part of the collective time that is ranks waiting for a late one, not data moving.
  ``end_spread_p50_ns`` (the median spread of the matched ends) bounds the clocks' offset: a skew
  far above it is not a clock artefact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracetriage.analyzers import busbw
from tracetriage.analyzers import intervals as iv
from tracetriage.analyzers.metrics import CollectiveCalls, CollectiveSkew, DeviceCollectives, LateRank
from tracetriage.model import Trace, is_kind, is_sorted
from tracetriage.partition import device_rows, take

# two ends this close are one call whatever its length: the ranks of one call leave it a ring's last hop
# and the kernel's teardown apart (~25 us seen between two H100s on ~100 us SendRecv calls)
END_TOLERANCE_MIN_NS = 50_000
END_TOLERANCE_SHARE = 0.5  # or within half the shorter call: two different calls of a rank are a call apart
BEFORE_CALLS_MAX = 64  # the late calls what_came_before reads: the longest waits, where the time is
# ranges that are the collective itself (its launch and bookkeeping), not what the late rank did before it
_COLLECTIVE_RANGE = ("nccl:", "rccl:", "c10d::", "record_param_comms", "ncclGroup", "ncclSend", "ncclRecv",
                     "ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast")


def device_collectives(trace: Trace, device: int, lo: int, hi: int) -> DeviceCollectives:
    g = trace.gpu
    window = hi - lo
    rows = device_rows(trace, device)  # the device's rows (tracetriage.partition; None: every row), no mask over all
    mine = is_kind(g, "kernel", rows)
    coll_codes = take(g["collective"].cat.codes.to_numpy(), rows)
    is_coll = mine & (coll_codes >= 0)
    if not is_coll.any():  # most single-GPU captures: no compute union to build
        return DeviceCollectives(collective_ns=0, collective_share_pct=0.0, collective_exposed_pct=0.0, collectives_by_op={},
                                 collective_count=0, calls=CollectiveCalls.empty(device), exposed_ns=0)
    starts, ends = g["start"].to_numpy(), g["end"].to_numpy()
    # each set's rows gathered straight from the table's columns (no copy of the device's whole columns first);
    # the collectives are few: their columns gathered once, no frame of them
    at = np.flatnonzero(is_coll) if rows is None else rows[is_coll]  # their row numbers, in the table's order
    c_start, c_end, c_code = starts[at], ends[at], coll_codes[is_coll]
    c_rows = at
    cs, ce = iv.clip(*iv.union(c_start, c_end), lo, hi)
    at = mine & (coll_codes < 0) if rows is None else rows[mine & (coll_codes < 0)]
    ps, pe = iv.clip(*iv.union(starts[at], ends[at]), lo, hi)
    del at
    # exposed = collective time not covered by compute: |C| - |C ∩ P|, via P's coverage function
    hidden = int(iv.Coverage(ps, pe).overlap(cs, ce).sum()) if cs.size else 0
    exposed_ns = iv.measure(cs, ce) - hidden
    names = [str(op) for op in g["collective"].cat.categories]
    by_op = {}
    for code in np.unique(c_code).tolist():  # by op, in the categories' order
        op = c_code == code
        s, e = iv.clip(*iv.union(c_start[op], c_end[op]), lo, hi)
        by_op[names[code]] = round(100.0 * iv.measure(s, e) / window, 3) if window else 0.0
    in_window = (c_start >= lo) & (c_start < hi)
    w_start, w_end, w_code, w_rows = c_start[in_window], c_end[in_window], c_code[in_window], c_rows[in_window]
    if not is_sorted(w_start):
        order = np.argsort(w_start, kind="stable")
        w_start, w_end, w_code, w_rows = w_start[order], w_end[order], w_code[order], w_rows[order]
    w_ops = np.array(names, dtype=object)[w_code]
    nbytes, group = busbw.call_messages(trace, g["pid"].to_numpy(np.int64)[w_rows], g["correlation"].to_numpy(np.int64)[w_rows],
                                        w_start)
    return DeviceCollectives(
        collective_ns=iv.measure(cs, ce),
        collective_share_pct=round(100.0 * iv.measure(cs, ce) / window, 3) if window else 0.0,
        collective_exposed_pct=round(100.0 * exposed_ns / window, 3) if window else 0.0,
        collectives_by_op=by_op,
        collective_count=int(w_start.size),
        calls=CollectiveCalls(device=device, starts=np.asarray(w_start, np.int64), ends=np.asarray(w_end, np.int64), ops=w_ops),
        exposed_ns=int(exposed_ns),
        bus=busbw.bus_bandwidth(w_ops, w_end - w_start, nbytes, group, busbw.trace_fabric(trace, device)),
    )


@dataclass(frozen=True, slots=True)
class Matched:
    """Calls matched across ranks: ``starts``/``ends`` are (ranks, calls) ns, ``ops`` one per call."""

    starts: np.ndarray
    ends: np.ndarray
    ops: list[str]


def match_calls(ranks: list[CollectiveCalls]) -> Matched:
    """The calls every rank ran, matched by their ends (module docstring): for each call of the rank
    with the fewest, the same op's call with the nearest end on every other rank (a call taken once)."""
    reference = min(range(len(ranks)), key=lambda index: ranks[index].starts.size)
    ref = ranks[reference]
    picked = np.full((len(ranks), ref.starts.size), -1, np.int64)
    picked[reference] = np.arange(ref.starts.size)
    for index, calls in enumerate(ranks):
        if index != reference:
            picked[index] = _nearest_ends(ref, calls)
    keep = (picked >= 0).all(axis=0)
    order = picked[:, keep]  # (ranks, calls)
    if not order.shape[1]:
        empty = np.empty((len(ranks), 0), np.int64)
        return Matched(starts=empty, ends=empty, ops=[])
    starts = np.stack([ranks[index].starts[order[index]] for index in range(len(ranks))])
    ends = np.stack([ranks[index].ends[order[index]] for index in range(len(ranks))])
    return Matched(starts=starts, ends=ends, ops=[str(op) for op in ref.ops[order[reference]]])


def _nearest_ends(ref: CollectiveCalls, calls: CollectiveCalls) -> np.ndarray:
    """For each call of ``ref``, the index in ``calls`` of the same op's call whose end is nearest and
    within the tolerance, else -1; a call of ``calls`` is given to the first ``ref`` call close to it."""
    import pandas as pd

    out = np.full(ref.starts.size, -1, np.int64)
    # the ops as codes (one hash pass each, no sort or compare of strings per op and rank)
    ref_codes, names = pd.factorize(ref.ops)
    call_codes = pd.Index(names).get_indexer(calls.ops) if calls.ops.size else np.empty(0, np.intp)
    for op in range(len(names)):
        mine = np.flatnonzero(ref_codes == op)
        theirs = np.flatnonzero(call_codes == op)
        if not theirs.size:
            continue
        by_end = theirs[np.argsort(calls.ends[theirs], kind="stable")]
        ends = calls.ends[by_end]
        at = np.searchsorted(ends, ref.ends[mine])
        before, after = np.clip(at - 1, 0, ends.size - 1), np.clip(at, 0, ends.size - 1)
        nearer = np.where(np.abs(ends[after] - ref.ends[mine]) < np.abs(ends[before] - ref.ends[mine]), after, before)
        nearest = by_end[nearer]
        shorter = np.minimum(ref.ends[mine] - ref.starts[mine], calls.ends[nearest] - calls.starts[nearest])
        close = np.abs(calls.ends[nearest] - ref.ends[mine]) <= np.maximum(END_TOLERANCE_MIN_NS, END_TOLERANCE_SHARE * shorter)
        near = np.flatnonzero(close)
        _, first = np.unique(nearest[near], return_index=True)  # among the close ones, the first takes the call
        out[mine[near[first]]] = nearest[near[first]]
    return out


def rank_skew(ranks: list[CollectiveCalls], labels: list[str]) -> CollectiveSkew:
    """The skew of the calls ``ranks`` (one per device, labelled) ran together (module docstring);
    ``late_rank``'s ``before`` is filled by :func:`what_came_before` where the trace's tables are at hand."""
    if len(ranks) < 2:
        return CollectiveSkew.unmeasured("fewer than two devices")
    matched = match_calls(ranks)
    if not matched.ops:
        return CollectiveSkew.unmeasured("no collective ends together on every rank: the ranks ran different calls in "
                                         "the window, or their clocks are apart by more than a call's length")
    spread = matched.starts.max(axis=0) - matched.starts.min(axis=0)
    latest = matched.starts.max(axis=0)
    durations = matched.ends - matched.starts
    waits = np.minimum(latest[None, :] - matched.starts, durations)
    late_rank = np.argmax(matched.starts, axis=0)
    waited_for = np.bincount(late_rank, weights=waits.sum(axis=0), minlength=len(ranks))
    worst = int(np.argmax(waited_for))
    mine = late_rank == worst
    return CollectiveSkew(
        matched=int(spread.size), p50_ns=int(np.median(spread)), max_ns=int(spread.max()), reason=None,
        wait_share_pct=round(100.0 * float(waits.sum()) / max(1, int(durations.sum())), 1),
        end_spread_p50_ns=int(np.median(matched.ends.max(axis=0) - matched.ends.min(axis=0))), clock="one trace",
        late_rank=LateRank(device=labels[worst], rank=None, late_calls=int(mine.sum()),
                           waited_share_pct=round(100.0 * float(waited_for[worst]) / max(1.0, float(waited_for.sum())), 1),
                           before_where="", before="", before_ns=0),
        duration_p50_ns=int(np.median(durations[worst])),
        late_intervals=np.stack([matched.starts.min(axis=0)[mine], matched.starts[worst][mine]]),
        wait_ns={label: int(ns) for label, ns in zip(labels, waits.sum(axis=1).tolist())},
        call_p50_ns=int(np.median(durations)), ranks_captured=len(ranks),
    )


def what_came_before(trace: Trace, device: int, pid: int, intervals: np.ndarray) -> tuple[str, str, int]:
    """What the late rank did while the others already waited: over ``intervals`` (2 x calls: the
    earliest rank's start, the late rank's start), ("gpu", the kernel that overlaps them most, ns)
    when its GPU was busy in more than half of them, else ("host", the host range of its process
    that covers them most, ns): of the ranges covering at least half of that time the narrowest
    one, the collective's own ranges left out; ("host", "", 0) when the trace records no range.
    The ``BEFORE_CALLS_MAX`` longest intervals are read (the wait is in them)."""
    longest = np.argsort(intervals[1] - intervals[0])[::-1][:BEFORE_CALLS_MAX]
    lo, hi = intervals[0][longest], intervals[1][longest]
    total = int((hi - lo).sum())
    gpu = trace.gpu
    rows = device_rows(trace, device)
    mine = is_kind(gpu, "kernel", rows) & (take(gpu["collective"].cat.codes.to_numpy(), rows) < 0)
    at = np.flatnonzero(mine) if rows is None else rows[mine]  # the compute kernels' rows: three columns gathered, no frame
    k_start, k_end = gpu["start"].to_numpy(np.int64)[at], gpu["end"].to_numpy(np.int64)[at]
    overlap = _overlap(k_start, k_end, lo, hi)
    busy = iv.Coverage(*iv.union(k_start, k_end))
    if total and int(busy.overlap(lo, hi).sum()) * 2 > total and overlap.any():
        name, ns = _most_overlap(gpu["name"], at, overlap)
        return "gpu", name, ns
    ranges = trace.ranges
    ranges = ranges[ranges["pid"].to_numpy() == pid] if pid >= 0 and (ranges["pid"].to_numpy() == pid).any() else ranges
    names = ranges["name"].astype(str)
    ranges = ranges[~names.str.startswith(_COLLECTIVE_RANGE).to_numpy()]
    if not len(ranges):
        return "host", "", 0
    overlap = _overlap(ranges["start"].to_numpy(np.int64), ranges["end"].to_numpy(np.int64), lo, hi)
    table = ranges.assign(overlap=overlap, length=ranges["end"] - ranges["start"])
    by_name = table.groupby("name", observed=True).agg(overlap=("overlap", "sum"), length=("length", "median"))
    by_name = by_name[by_name["overlap"] > 0]
    if by_name.empty:
        return "host", "", 0
    covering = by_name[by_name["overlap"] * 2 >= total]
    pick = covering["length"].idxmin() if len(covering) else by_name["overlap"].idxmax()
    return "host", str(pick), int(by_name.loc[pick, "overlap"])


def _most_overlap(names, rows: np.ndarray, overlap: np.ndarray) -> tuple[str, int]:
    """The kernel name whose ``rows`` (of the GPU table) sum the most ``overlap``, and that sum: the first
    in the categories' order among equal sums, over the names those rows hold (a missing name is no group),
    as a groupby of the names on the categorical would pick it."""
    import pandas as pd

    if not isinstance(names.dtype, pd.CategoricalDtype):
        by_name = pd.Series(overlap).groupby(names.to_numpy()[rows]).sum()
        return str(by_name.idxmax()), int(by_name.max())
    codes = names.cat.codes.to_numpy()[rows].astype(np.int64)
    named = codes >= 0
    size = len(names.cat.categories)
    seen = np.bincount(codes[named], minlength=size) > 0
    sums = np.zeros(size, np.int64)
    hit = np.flatnonzero(named & (overlap != 0))  # the few rows that reach a late interval
    np.add.at(sums, codes[hit], overlap[hit])  # exact int64 sums
    held = np.flatnonzero(seen)
    best = held[int(np.argmax(sums[held]))]
    return str(names.cat.categories[best]), int(sums[best])


def _overlap(starts: np.ndarray, ends: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For each interval [starts, ends), its total overlap with the query intervals [lo, hi). With the
    intervals in start order, a query reads only those that can reach it (starting within the longest
    interval's length before it, and before it ends); else every interval, per query."""
    out = np.zeros(starts.size, np.int64)
    ordered = is_sorted(starts) and starts.size > 0
    longest = max(0, int((ends - starts).max())) if ordered else 0
    for a, b in zip(lo.tolist(), hi.tolist()):
        i, j = (int(np.searchsorted(starts, a - longest, "left")), int(np.searchsorted(starts, b, "left"))) if ordered \
            else (0, starts.size)
        out[i:j] += np.clip(np.minimum(ends[i:j], b) - np.maximum(starts[i:j], a), 0, None)
    return out
