"""GPU busy time and idle gaps per device, each gap attributed to what the host did.

Definitions (all inside the analysis window [lo, hi)):

* ``busy_ns`` = measure of the union of every GPU interval of the device (kernels,
  copies, memsets, graph replays); overlapping streams count once.
  ``busy_pct`` = busy_ns / window_ns x 100.
* A **gap** is a maximal interval of the window with no GPU activity on the device.
  ``gaps.total_ns`` = window_ns - busy_ns; p50/p99/max are over gap lengths.
* **Cause** of idle time: the host threads of the process that owns the device
  (same pid) during the gap. Each nanosecond of a gap is attributed once, in this
  order: ``sync`` (inside a blocking stream/device/event sync), ``memcpy_sync``
  (inside a synchronous copy call), ``launch`` (inside a kernel or graph launch
  call), ``other_cuda`` (inside any other CUDA/HIP call), and what remains is
  ``host`` (no CUDA call at all: Python, the scheduler, the tokenizer...). When the
  capture holds no API calls of that process, the whole gap is ``unknown``.
  ``by_cause[c]`` is idle ns with cause c; they sum to ``gaps.total_ns``.
* **Dependency waits.** Before the host's causes, the GPU's own: the operation that ends a gap
  was launched by a call of the same process (joined on pid and correlation; a correlation below
  every recorded call's was launched before the capture began); once that call has returned (or
  the gap has begun, whichever is later) the GPU holds the work and should start it within
  ``DEPENDENCY_LATENCY_NS``. When it holds it idle longer, that whole time is ``dependency``: the work
  was queued and the GPU waited on something the trace does not show (an event another stream,
  device, process or rank records; a graph node's wait), whatever the host was doing meanwhile:
  a sync or a pageable copy the host sits in then did not keep the GPU idle. The time before
  it is attributed to the host as above. Only a process that made a stream-wait or graph-launch
  call (``queued.WAIT_CALLS``) can hold queued work: elsewhere a late start means the capture lost the
  operations before it (a sampled trace), and nothing is a dependency. ``dependency`` is written in ``by_cause`` only when
  some idle time had it (the contract's other keys are always there).
* **Hidden syncs.** An "async" copy call whose GPU copy has a pageable host side
  (cudaMemcpyAsync / hipMemcpyAsync, Device->Pageable or Pageable->Device: the model's
  ``pageable`` flag on the copy its correlation names) is staged by the driver through a
  bounce buffer and blocks the calling thread, so the host time inside it counts as
  ``memcpy_sync``, not ``other_cuda``; ``idle_in_pageable_copies_ns`` is the part of that
  idle time inside such calls (the ``pageable_memcpy`` finding claims it). A capture whose
  format records no host memory kind (rocprof) leaves those calls ``other_cuda``.
* ``idle_in_calls``: the GPU idle inside each "other" CUDA/HIP call of the process lasting at
  least NAMED_CALL_MIN_NS (cudaMalloc, cudaFree, a module load...), summed by call name, each at
  most the device's ``other_cuda`` idle: what "inside other CUDA/HIP calls" was.
"""

from __future__ import annotations

import os

import numpy as np

from tracetriage.analyzers import intervals as iv
from tracetriage.analyzers.metrics import DeviceTimeline, Gaps
from tracetriage.analyzers.pageable import pageable_async_calls
from tracetriage.analyzers.queued import DEPENDENCY_LATENCY_NS, queued_early  # noqa: F401 (re-exported)
from tracetriage.model import Trace, cat_codes, is_sorted
from tracetriage.partition import device_rows
from tracetriage.threads import thread_map

try:
    from tracetriage.analyzers import _sweep
except ImportError:  # built without a C compiler: numpy attributes the gaps
    _sweep = None
SWEEP = True  # tests turn the compiled sweep off to compare it with numpy

HOST_CAUSES = ("sync", "memcpy_sync", "launch", "other_cuda", "host", "unknown")  # what the host did (the sweep's)
CAUSES = (*HOST_CAUSES, "dependency")  # and the GPU's own wait, with work queued (written only when some idle had it)
OPTIONAL_CAUSES = ("dependency",)  # causes the contract carries only when not 0
NEVER = np.iinfo(np.int64).max  # an operation whose launch call the trace does not hold: never known queued
_CAUSE_CATEGORIES = {
    "sync": ("sync",),
    "memcpy_sync": ("memcpy_sync",),
    "launch": ("launch", "graph_launch"),
    "other_cuda": ("memcpy_async", "memset", "alloc", "other"),
}
HISTOGRAM_EDGES_NS = [0, 10_000, 100_000, 1_000_000, 10_000_000]
HISTOGRAM_LABELS = ["<10us", "10-100us", "0.1-1ms", "1-10ms", ">=10ms"]
TOP_GAPS = 10
TIMELINE_BINS = 120


def attribute(gap_s: np.ndarray, gap_e: np.ndarray, cover: dict[str, iv.Coverage] | None) -> dict[str, np.ndarray]:
    """Idle ns per cause for each gap (arrays aligned with the gaps)."""
    length = gap_e - gap_s
    if cover is None:
        out = {c: np.zeros_like(length) for c in HOST_CAUSES}
        out["unknown"] = length.copy()
        return out
    remaining = length.copy()
    out = {}
    for cause in ("sync", "memcpy_sync", "launch", "other_cuda"):
        if not cover[cause].s.size:  # no such calls around these gaps
            out[cause] = np.zeros_like(length)
            continue
        got = np.minimum(cover[cause].overlap_disjoint(gap_s, gap_e), remaining)
        out[cause] = got
        remaining -= got
    out["host"] = remaining
    out["unknown"] = np.zeros_like(length)
    return out


def _pct(x: int, d: int) -> float:
    return round(100.0 * x / d, 3) if d else 0.0


NAMED_CALL_MIN_NS = 100_000  # an "other" CUDA call this long can hold the GPU idle on its own: named by call
NAMED_CALLS_KEPT = 5  # the calls named per device, by idle time

CHUNK_INTERVALS = 1 << 18  # device intervals processed per slice: bounds memory on 10M-kernel traces
SHORT_GAP_NS = 1_000_000
# Gap classes, disjoint: a gap that begins as a blocking sync returns ("after_sync"),
# else a gap under SHORT_GAP_NS ("short": between kernels of one step), else "long".
GAP_CLASSES = ("after_sync", "short", "long")


class _HostSlicer:
    """The host API calls of one process, cut to any time span on demand.

    Calls are in start order; a call overlapping [a, b) started at most ``max_dur``
    before ``a``, so two binary searches find every candidate without a scan. The cause
    of each call is looked up from its category code per span (no mask per cause over
    the whole table).
    """

    def __init__(self, trace: Trace, pid: int):
        api = trace.api
        pids = api["pid"].to_numpy()
        one = bool(pids.size) and pids.min() == pids.max() == pid
        mine = None if one else pids == pid
        self.empty = not (one or mine.any())
        codes, cats = cat_codes(api["category"])
        # the cause of each category code (categories of causes are disjoint), read by the compiled
        # sweep; numpy reads it as one mask per cause. Slot len(cats) is the pageable async copy
        # calls' own code (a hidden sync: memcpy_sync), the last slot code -1.
        self.cause_of = np.full(len(cats) + 2, -1, np.int8)
        for k, wanted in enumerate(_CAUSE_CATEGORIES.values()):
            self.cause_of[[cats.index(c) for c in wanted if c in cats]] = k
        self.cause_of[len(cats)] = CAUSES.index("memcpy_sync")
        if one:  # one process: views, no copies of a 10M-row table
            self.start, self.end, self.codes = api["start"].to_numpy(), api["end"].to_numpy(), codes
        else:
            self.start, self.end, self.codes = api["start"].to_numpy()[mine], api["end"].to_numpy()[mine], codes[mine]
        self._named_calls(api, mine)
        staged = pageable_async_calls(trace, pid, mine)
        self.pageable = None  # the pageable async copy calls, merged: the idle inside them is pageable_memcpy's
        if staged.any():
            self.codes = self.codes.astype(np.int16 if len(cats) >= 127 else self.codes.dtype, copy=True)
            self.codes[staged] = len(cats)
            self.pageable = iv.Coverage(*iv.union(self.start[staged], self.end[staged]))
        self.max_dur = int((self.end - self.start).max()) if self.start.size else 0
        self.early_rows, self.early_ready = queued_early(trace, pid, mine) if not self.empty else (np.empty(0, np.int64),) * 2
        # the sweep reads the columns as flat buffers: a column viewed out of a 2-D block is not one
        self.contiguous = all(a.flags.c_contiguous and a.dtype.kind == "i" for a in (self.start, self.end, self.codes)) and \
            self.start.dtype == self.end.dtype == np.int64

    def attribute(self, gs: np.ndarray, ge: np.ndarray) -> dict[str, np.ndarray]:
        """:func:`attribute` of the gaps (disjoint, in order) to this process's calls around
        them: by the compiled sweep (analyzers/_sweep.c) when built, else with numpy."""
        return self._attribute(gs, ge, None)[0]

    def _attribute(self, gs: np.ndarray, ge: np.ndarray, whole_e: np.ndarray | None) -> tuple[dict[str, np.ndarray], int]:
        """:meth:`attribute`, and with ``whole_e`` (each gap's whole end, >= ``ge``) the idle ns of [gs, whole_e)
        inside any call of the process (their union), summed: by the same sweep (0 without ``whole_e``)."""
        if self.empty or not gs.size:
            return attribute(gs, ge, None), 0
        last = int(ge[-1]) if whole_e is None else int(whole_e[-1])
        i = int(np.searchsorted(self.start, int(gs[0]) - self.max_dur, "left"))
        j = int(np.searchsorted(self.start, last, "left"))
        if _sweep is not None and SWEEP and self.contiguous:
            out = np.empty((len(HOST_CAUSES), gs.size), np.int64)
            whole = () if whole_e is None else (np.ascontiguousarray(whole_e, np.int64), np.empty(gs.size, np.int64))
            if _sweep.attribute(np.ascontiguousarray(gs, np.int64), np.ascontiguousarray(ge, np.int64), self.start,
                                self.end, self.codes, self.cause_of, i, j, out, *whole) == 0:
                return dict(zip(HOST_CAUSES, out)), int(whole[1].sum()) if whole else 0
        causes = attribute(gs, ge, self._coverage(i, j))
        if whole_e is None:
            return causes, 0
        s = self.start[i:j]
        return causes, iv.overlap_measure(gs, whole_e, iv.union_slices(s, iv.not_before(self.end[i:j], s)))

    def ready_of(self, rows: np.ndarray) -> np.ndarray:
        """When each GPU row (indices into the trace's table) was known queued: its launch call's end, NEVER
        for a row launched too late to wait (or with no launch call of this process)."""
        out = np.full(rows.size, NEVER, np.int64)
        if not self.early_rows.size or not rows.size:
            return out
        # only the early rows between the asked rows' least and greatest are searched: a slice's rows are a short
        # run of the table, and a search in a run that fits the cache is several times faster than in all of it
        lo = int(np.searchsorted(self.early_rows, rows.min()))
        hi = int(np.searchsorted(self.early_rows, rows.max(), "right"))
        if lo == hi:
            return out
        early = self.early_rows[lo:hi]
        pos = np.minimum(np.searchsorted(early, rows), early.size - 1)
        hit = early[pos] == rows
        out[hit] = self.early_ready[lo + pos[hit]]
        return out

    def attribute_queued(self, gs: np.ndarray, ge: np.ndarray, ready: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Every cause of the gaps (disjoint, in order), ``ready`` the time the operation ending each gap was known
        queued: when the GPU held it idle longer than DEPENDENCY_LATENCY_NS (from the later of the gap's start and
        ``ready``), that whole time is ``dependency`` (a shorter hold is the GPU's scheduling or the launch latency,
        left to the host's causes); the rest is :meth:`attribute`'s. Returns the causes and where each gap's host
        part ends."""
        causes, cut, _ = self.attribute_gaps(gs, ge, ready, False)
        return causes, cut

    def attribute_gaps(self, gs: np.ndarray, ge: np.ndarray, ready: np.ndarray,
                       in_calls: bool = True) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
        """:meth:`attribute_queued`, and (``in_calls``) the idle ns of the whole gaps inside any call of the
        process, summed (:meth:`_attribute`): the idle-by-host pass's figure, from the same sweep."""
        if ready.size:
            queued = ge - np.maximum(gs, ready)  # how long the GPU held the work, idle
            waited = np.where(queued > DEPENDENCY_LATENCY_NS, queued, 0)
        else:
            waited = np.zeros_like(gs)
        cut = ge - waited
        causes, inside = self._attribute(gs, cut, ge if in_calls else None)
        causes["dependency"] = waited
        return causes, cut, inside

    def _named_calls(self, api, mine: np.ndarray | None) -> None:
        """The process's long "other" CUDA calls (at least NAMED_CALL_MIN_NS, cause other_cuda), in start
        order: their spans and name codes, the names they index (the model's interned call names)."""
        is_long = (self.end - self.start) >= NAMED_CALL_MIN_NS
        long_rows = np.flatnonzero(is_long)  # few: the cause read at them only, no gather over every call
        is_long[long_rows] = self.cause_of[self.codes[long_rows]] == CAUSES.index("other_cuda")
        names, self.call_names = cat_codes(api["name"])
        if mine is not None:
            names = names[mine]
        self.named_start, self.named_end = self.start[is_long], self.end[is_long]
        self.named_code = names[is_long]
        self.named_max = int((self.named_end - self.named_start).max()) if self.named_start.size else 0

    def idle_in_named_calls(self, gs: np.ndarray, ge: np.ndarray) -> dict[int, int]:
        """Idle ns of the gaps (disjoint, in order) inside each long "other" call, by name code."""
        if not self.named_start.size or not gs.size:
            return {}
        i = int(np.searchsorted(self.named_start, int(gs[0]) - self.named_max, "left"))
        j = int(np.searchsorted(self.named_start, int(ge[-1]), "left"))
        if i >= j:
            return {}
        idle = iv.Coverage(gs, ge).overlap(self.named_start[i:j], self.named_end[i:j])
        codes = self.named_code[i:j]
        return {int(code): int(idle[codes == code].sum()) for code in np.unique(codes[idle > 0])}

    def blocked_in_pageable(self, gs: np.ndarray, ge: np.ndarray, memcpy_sync: np.ndarray) -> int:
        """Idle ns of the gaps (attributed ``memcpy_sync`` per gap) spent inside pageable async copy calls."""
        if self.pageable is None:
            return 0
        return int(np.minimum(self.pageable.overlap_disjoint(gs, ge), memcpy_sync).sum())

    def _coverage(self, i: int, j: int) -> dict[str, iv.Coverage]:
        """Each cause's calls among calls i..j, merged, as a coverage table (the numpy path)."""
        s, e = self.start[i:j], self.end[i:j]
        cause = self.cause_of[self.codes[i:j]]
        out = {}
        for k, name in enumerate(_CAUSE_CATEGORIES):
            m = cause == k
            out[name] = iv.Coverage(*iv.union(s[m], e[m]))
        return out


def _device_chunks(trace: Trace, device: int, lo: int, hi: int, size: int, rows: tuple[int, int] | None = None,
                   with_rows: bool = False):
    """The device's intervals overlapping [lo, hi), clipped to it, in start order, a slice
    of the table (of ``rows``, default all) at a time: views of it, no copy of the
    device's whole columns. Of several devices, the device's own rows of each slice
    (tracetriage.partition: no mask over the whole table per device)."""
    g = trace.gpu
    start, end = g["start"].to_numpy(), g["end"].to_numpy()
    one = len(trace.devices) == 1 and device == 0  # every row is this device's
    mine = None if one else device_rows(trace, device)  # None: every row is
    r0, r1 = rows or (0, start.size)
    if mine is not None:  # where each slice's rows begin among the device's (keys of its dtype: no cast of it)
        cuts = np.searchsorted(mine, np.minimum(np.arange(r0, r1 + size, size), r1).astype(mine.dtype)).tolist()
    for n, k in enumerate(range(r0, r1, size)):
        stop = min(k + size, r1)
        if mine is None:
            s, e = start[k:stop], end[k:stop]
            sel = (e > lo) & (s < hi)
            whole = sel.all()
            if not whole:
                s, e = s[sel], e[sel]
            if with_rows:
                yield (*_clipped(s, e, lo, hi), np.arange(k, stop) if whole else k + np.flatnonzero(sel))
            else:
                yield _clipped(s, e, lo, hi)
            continue
        idx = mine[cuts[n]:cuts[n + 1]]  # the device's rows of the slice
        s, e = start[idx], end[idx]
        sel = (e > lo) & (s < hi)
        if not sel.all():
            s, e, idx = s[sel], e[sel], idx[sel]
        if with_rows:
            yield (*_clipped(s, e, lo, hi), idx.astype(np.int64))
        else:
            yield _clipped(s, e, lo, hi)


def _clipped(s: np.ndarray, e: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Intervals of the window [lo, hi) clipped to it (an end before its start counts as the start)."""
    e = np.maximum(e, s)
    np.minimum(e, hi, out=e)
    return np.maximum(s, lo), e


PARALLEL_MIN_ROWS = 1 << 21  # a lone device with more rows is timed as two halves on two threads
SPLIT_WINDOW = 1 << 16


def _split_row(trace: Trace, lo: int, hi: int) -> tuple[int, int] | None:
    """Where a lone device's rows can be cut in two without cutting a busy interval: the
    first row at or after the middle that starts a merged interval (its clipped start
    lies after every earlier clipped end), with the running end before it (where the gap
    before that row begins; ``lo`` when no earlier row is in the window). None when the
    device is busy without a break from the middle on, or has too few rows to pay."""
    g = trace.gpu
    start, end = g["start"].to_numpy(), g["end"].to_numpy()
    n = start.size
    if n < PARALLEL_MIN_ROWS or len(trace.devices) != 1:
        return None
    mid = n // 2
    none = lo - 1  # running end before any row in the window
    run = none
    # Zero-length intervals never extend a busy interval (they are dropped once merged), so
    # the running end counts only intervals of positive length.
    for s, e in _device_chunks(trace, 0, lo, hi, CHUNK_INTERVALS, (0, mid)):
        run = max(run, int(e.max(where=e > s, initial=none)))
    for k in range(mid, n, SPLIT_WINDOW):
        stop = min(k + SPLIT_WINDOW, n)
        s, e = start[k:stop], end[k:stop]
        sel = (e > lo) & (s < hi)
        sc, ec = _clipped(s, e, lo, hi)
        ec = np.where(sel & (ec > sc), ec, none)
        before = np.maximum.accumulate(np.concatenate(([run], ec[:-1])))  # running end before each row
        cand = np.flatnonzero(sel & (sc > before))
        if cand.size:
            j = int(cand[0])
            return k + j, max(int(before[j]), lo) if before[j] > none else lo
        run = max(run, int(ec.max()))
    return None


class _Pass:
    """One streaming pass over consecutive rows of a device: merges each slice, joins it to
    the interval carried from the previous slice, and accounts the busy intervals and gaps
    it closes (gap lengths into ``buf`` from ``offset`` on)."""

    in_calls = True  # also sum the gaps' idle inside any host call (the idle-by-host pass reads it)

    def __init__(self, host, sync_ends, sync_slack_ns: int, min_gap_ns: int, edges, in_spans, buf, offset: int,
                 on_gaps=None):
        self.on_gaps = on_gaps
        self.host, self.sync_ends, self.sync_slack_ns, self.min_gap_ns = host, sync_ends, sync_slack_ns, min_gap_ns
        self.edges, self.in_spans, self.buf, self.offset = edges, in_spans, buf, offset
        self.acc = {"busy": 0, "in_spans": 0, "bins": np.zeros(TIMELINE_BINS), "n": 0, "by_cause": dict.fromkeys(CAUSES, 0),
                    "top": [], "floor": -1, "after_ns": 0, "after_n": 0, "short_lh_ns": 0, "short_n": 0, "pageable_ns": 0,
                    "calls": {}, "in_calls": 0,
                    "by_class": {k: dict.fromkeys(CAUSES, 0) for k in GAP_CLASSES}}

    def run(self, trace: Trace, device: int, lo: int, hi: int, rows: tuple[int, int], gap_from: int, last: bool):
        """Rows ``rows``; the first gap starts at ``gap_from``; the last pass closes the final
        gap at ``hi``, an earlier one only its last busy interval (the next pass's first
        gap starts where it ends)."""
        queued = self.host.early_rows.size > 0  # else no operation waited queued: no dependency to look up
        carry = self.feed(_device_chunks(trace, device, lo, hi, CHUNK_INTERVALS, rows, with_rows=queued), hi, gap_from,
                          last)
        if carry is not None:  # an earlier pass closes its last busy interval; the next pass's first gap starts at its end
            empty = np.empty(0, np.int64)
            self.close(np.array([carry[0]], np.int64), np.array([carry[1]], np.int64), empty, empty, empty)

    def feed(self, chunks, hi: int, gap_from: int, last: bool, carry: tuple[int, int] | None = None):
        """:meth:`run` over ``chunks``: (starts, ends[, rows]) of the device's clipped intervals, in start
        order, slice after slice (analyzers/stream_timeline.py feeds the time chunks of a streamed export).
        ``carry``: the interval left open by an earlier feed; returns the one this feed leaves open
        (closed, and the final gap with it, when ``last``)."""
        queued = self.host.early_rows.size > 0
        for chunk in chunks:
            s_chunk, e_chunk = chunk[0], chunk[1]
            ms, me = iv.union(s_chunk, e_chunk)
            nz = me > ms  # zero-length intervals do not split a gap
            ms, me = ms[nz], me[nz]
            ready = self._ready(s_chunk, chunk[2], ms) if queued else np.empty(0, np.int64)
            del s_chunk, e_chunk, chunk
            if carry is not None:
                # Merged intervals of the slice are disjoint (each ends before the next starts),
                # so exactly those starting at or before the carry's end join it.
                j = int(np.searchsorted(ms, carry[1], "right"))
                if j:
                    carry = (carry[0], max(carry[1], int(me[j - 1])))
                ms, me, ready = ms[j:], me[j:], ready[j:]
            if not ms.size:
                continue
            # Closed now: the carried interval and all but the last of this slice; the gaps
            # run from each closed end to the next start (the first from gap_from).
            if carry is not None:
                cs = np.concatenate(([carry[0]], ms[:-1]))
                ce = np.concatenate(([carry[1]], me[:-1]))
                first = carry[1]
            else:
                cs, ce = ms[:-1], me[:-1]
                first = gap_from
            self.close(cs, ce, np.concatenate(([first], me[:-1])), ms, ready)
            carry = (int(ms[-1]), int(me[-1]))
        if not last:
            return carry
        empty = np.empty(0, np.int64)
        if carry is not None:  # the last gap ends at the window's end: nothing ends it, nothing waited queued
            cs, ce = np.array([carry[0]], np.int64), np.array([carry[1]], np.int64)
            self.close(cs, ce, np.array([carry[1]], np.int64), np.array([hi], np.int64), empty)
        else:
            self.close(empty, empty, np.array([gap_from], np.int64), np.array([hi], np.int64), empty)
        return None

    def keep_lengths(self, length: np.ndarray) -> None:
        """The closed gaps' lengths, in time order, into the buffer (for the quantiles)."""
        at = self.offset + self.acc["n"]
        self.buf[at:at + length.size] = length
        self.acc["n"] += length.size

    def _ready(self, starts: np.ndarray, rows: np.ndarray, ms: np.ndarray) -> np.ndarray:
        """For each merged start ``ms`` (the end of the gap before it), the earliest time one of the operations
        starting there was known queued (:meth:`_HostSlicer.ready_of`): rows are in start order, so those of a
        merged start are the run of rows with that start."""
        if not ms.size:
            return np.empty(0, np.int64)
        a = np.searchsorted(starts, ms, "left")
        if starts.size < 2 or bool((starts[1:] > starts[:-1]).all()):  # no two rows start together: one row each
            return self.host.ready_of(rows[a])
        counts = np.searchsorted(starts, ms, "right") - a
        if (counts == 1).all():
            return self.host.ready_of(rows[a])
        first = np.cumsum(counts) - counts
        idx = np.repeat(a, counts) + (np.arange(int(counts.sum())) - np.repeat(first, counts))
        return np.minimum.reduceat(self.host.ready_of(rows[idx]), first)

    def close(self, cs: np.ndarray, ce: np.ndarray, gs: np.ndarray, ge: np.ndarray, ready: np.ndarray) -> None:
        """Account closed busy intervals and the gaps that end at their starts (``ready``: when the operation
        ending each gap was known queued, aligned with the gaps; empty when none was)."""
        acc = self.acc
        if cs.size:
            acc["busy"] += int((ce - cs).sum())
            if self.in_spans is not None:
                acc["in_spans"] += int(self.in_spans.overlap(cs, ce).sum())
            acc["bins"] += np.diff(iv.measure_before(cs, ce, self.edges))
        keep = ge > gs
        # A gap shorter than the clock's resolution (1 µs timestamps rounded apart) is rounding,
        # not idle time: it counts as busy.
        tiny = keep & (ge - gs < self.min_gap_ns)
        if tiny.any():
            acc["busy"] += int((ge - gs)[tiny].sum())
            keep &= ~tiny
        gs, ge = gs[keep], ge[keep]
        if not gs.size:
            return
        length = ge - gs
        causes, cut, inside = self.host.attribute_gaps(gs, ge, ready[keep] if ready.size else ready, self.in_calls)
        acc["in_calls"] += inside
        after = iv.gaps_after(gs, ge, self.sync_ends, self.sync_slack_ns)
        short = (length < SHORT_GAP_NS) & ~after
        if self.on_gaps is not None:  # the Perfetto export draws each gap as the analysis attributed it
            self.on_gaps(gs, ge, causes, after, short)
        # the host's calls count only over the part of each gap the host caused (before a dependency wait)
        acc["pageable_ns"] += self.host.blocked_in_pageable(gs, cut, causes["memcpy_sync"])
        for code, ns in self.host.idle_in_named_calls(gs, cut).items():
            acc["calls"][code] = acc["calls"].get(code, 0) + ns
        acc["after_ns"] += int(length.sum(where=after))
        acc["after_n"] += int(np.count_nonzero(after))
        acc["short_n"] += int(np.count_nonzero(short))
        by_class = acc["by_class"]
        per_cause = np.stack([causes[c] for c in CAUSES])  # each gap has one class: after_sync, else short, else long
        in_class, totals = per_cause @ np.stack((after, short), axis=1).astype(np.int64), per_cause.sum(axis=1)  # not 21 sums
        for k, c in enumerate(CAUSES):
            total, in_after, in_short = int(totals[k]), int(in_class[k, 0]), int(in_class[k, 1])
            acc["by_cause"][c] += total
            by_class["after_sync"][c] += in_after
            by_class["short"][c] += in_short
            by_class["long"][c] += total - in_after - in_short
            if c in ("launch", "host"):
                acc["short_lh_ns"] += in_short
        self.keep_lengths(length)
        # Top gaps: only gaps longer than the shortest of the ten kept so far can enter (an equal
        # one came later, and ties go to the earliest); among them, top-k without a full sort.
        idx = np.flatnonzero(length > acc["floor"])
        if idx.size > TOP_GAPS:
            sub = length[idx]
            thr = np.partition(sub, sub.size - TOP_GAPS)[sub.size - TOP_GAPS]
            above = idx[sub > thr]
            idx = np.concatenate((above, idx[sub == thr][: TOP_GAPS - above.size]))
        idx = idx[np.lexsort((idx, -length[idx]))]  # by length, then time order
        for i in idx:
            cause = CAUSES[int(np.argmax([causes[c][i] for c in CAUSES]))]
            acc["top"].append((int(length[i]), int(gs[i]), cause))
        acc["top"] = sorted(acc["top"], key=lambda x: -x[0])[:TOP_GAPS]  # stable: earliest first among equals
        if len(acc["top"]) == TOP_GAPS:
            acc["floor"] = acc["top"][-1][0]


def _merged(first: dict, second: dict) -> dict:
    """The accumulators of two consecutive passes as one (the first's gaps come first)."""
    out = dict(first)
    for k in ("busy", "in_spans", "n", "after_ns", "after_n", "short_lh_ns", "short_n", "pageable_ns", "in_calls"):
        out[k] = first[k] + second[k]
    out["bins"] = first["bins"] + second["bins"]
    out["by_cause"] = {c: first["by_cause"][c] + second["by_cause"][c] for c in CAUSES}
    out["by_class"] = {k: {c: first["by_class"][k][c] + second["by_class"][k][c] for c in CAUSES} for k in GAP_CLASSES}
    out["top"] = sorted(first["top"] + second["top"], key=lambda x: -x[0])[:TOP_GAPS]
    out["calls"] = {code: first["calls"].get(code, 0) + second["calls"].get(code, 0)
                    for code in {*first["calls"], *second["calls"]}}
    return out


def device_timeline(trace: Trace, device: int, lo: int, hi: int, hosts: dict | None = None,
                    sync_ends: np.ndarray | None = None, sync_slack_ns: int = 20_000, min_gap_ns: int = 1,
                    spans: tuple[np.ndarray, np.ndarray] | None = None, on_gaps=None) -> DeviceTimeline:
    """Busy %, gap statistics and idle-by-cause of one device in [lo, hi).

    Streams over the device's intervals CHUNK_INTERVALS at a time: each slice is
    merged, joined to the open interval carried from the previous slice, and the
    gaps it closes are attributed to the host calls around them. The numbers are
    the same as one pass over the whole union (tested), memory is one slice's worth.
    A lone device with many rows is cut in two where no busy interval crosses the
    cut, and the halves run on two threads (numpy releases the GIL): same numbers.
    ``sync_ends`` (sorted ends of the owning process's blocking calls) lets the same
    pass sum the idle time that follows a sync and the short gaps spent launching.
    ``spans`` (start, end arrays: the long steps) makes it also sum the busy ns inside
    them (``busy_in_spans_ns``), so no second pass over the device is needed for that.
    ``on_gaps(gs, ge, causes, after_sync, short)`` is called with every slice of gaps, in
    time order (one pass, no split), as attributed: the Perfetto export's gap track.
    """
    window = hi - lo
    pid = int(trace.devices.iloc[device]["pid"])
    hosts = {} if hosts is None else hosts
    if pid not in hosts:
        hosts[pid] = _HostSlicer(trace, pid)
    host = hosts[pid]
    sync_ends = np.empty(0, np.int64) if sync_ends is None else np.asarray(sync_ends, np.int64)
    if not is_sorted(sync_ends):
        sync_ends = np.sort(sync_ends)
    edges = np.linspace(lo, hi, TIMELINE_BINS + 1).astype(np.int64)
    # Gap lengths land in one buffer: a gap ends at each merged interval's start or at hi,
    # so a pass has at most its rows + 1 (np.empty reserves; only the gaps written are touched).
    n_rows = len(trace.gpu)
    lengths_buf = np.empty(n_rows + 2, np.int64)  # + 2: a second half's gaps start at its first row + 1
    in_spans = iv.Coverage(*iv.union(*spans)) if spans is not None and len(spans[0]) else None
    def new_pass(offset: int) -> _Pass:
        return _Pass(host, sync_ends, sync_slack_ns, min_gap_ns, edges, in_spans, lengths_buf, offset, on_gaps)

    split = _split_row(trace, lo, hi) if (os.cpu_count() or 1) > 1 and on_gaps is None else None
    if split is None:
        one = new_pass(0)
        one.run(trace, device, lo, hi, (0, n_rows), lo, last=True)
        acc = one.acc
    else:
        row, gap_from = split
        a, b = new_pass(0), new_pass(row + 1)  # a writes at most row gaps
        thread_map(lambda job: job(), [lambda: a.run(trace, device, lo, hi, (0, row), lo, False),
                                       lambda: b.run(trace, device, lo, hi, (row, n_rows), gap_from, True)], 2)
        lengths_buf[a.acc["n"]:a.acc["n"] + b.acc["n"]] = lengths_buf[row + 1:row + 1 + b.acc["n"]]  # b's gaps follow a's
        acc = _merged(a.acc, b.acc)

    lengths = lengths_buf[:acc["n"]]
    last_edge = max(int(lengths.max()) + 1 if lengths.size else 1, HISTOGRAM_EDGES_NS[-1] + 1)
    hist = np.histogram(lengths, bins=HISTOGRAM_EDGES_NS + [last_edge])[0]
    total_gap, max_gap = int(lengths.sum()), int(lengths.max()) if lengths.size else 0
    # in place (the buffer is ours): np.percentile would otherwise copy all the gaps
    p50, p99 = (int(x) for x in np.percentile(lengths, [50, 99], overwrite_input=True)) if lengths.size else (0, 0)
    return timeline_of(acc, (int(lengths.size), total_gap, p50, p99, max_gap, hist), host.call_names, edges, window)


def timeline_of(acc: dict, gap_stats: tuple, call_names, edges: np.ndarray, window: int) -> DeviceTimeline:
    """The :class:`DeviceTimeline` of a pass's accumulator ``acc``; ``gap_stats``: the gaps' count, total,
    p50, p99, max and histogram counts (over HISTOGRAM_EDGES_NS); ``call_names``: the names of the
    accumulated named-call codes."""
    count, total_gap, p50, p99, max_gap, hist = gap_stats
    busy = acc["busy"]
    top = acc["top"]  # kept sorted, longest first, earliest first among equals
    widths = np.diff(edges)
    per_bin = acc["bins"] / np.where(widths > 0, widths, 1)
    # the optional causes are written only when some idle had them: the contract's other keys stay as they were
    by_cause = {c: ns for c, ns in acc["by_cause"].items() if ns or c not in OPTIONAL_CAUSES}
    named = sorted(acc["calls"].items(), key=lambda item: (-item[1], item[0]))[:NAMED_CALLS_KEPT]
    idle_in_calls = {str(call_names[code]): min(ns, by_cause["other_cuda"]) for code, ns in named if code >= 0}
    gaps = Gaps(count=count, total_ns=total_gap, p50_ns=p50, p99_ns=p99, max_ns=max_gap, by_cause=by_cause,
                by_cause_pct_of_window={c: _pct(v, window) for c, v in by_cause.items()},
                histogram={label: int(n) for label, n in zip(HISTOGRAM_LABELS, hist)},
                top=[{"start_ns": st, "length_ns": ln, "cause": cause} for ln, st, cause in top])
    return DeviceTimeline(busy_ns=busy, window_ns=window, busy_pct=_pct(busy, window), gaps=gaps,
                          busy_timeline=[round(float(x) * 100, 2) for x in per_bin], after_sync_ns=acc["after_ns"],
                          after_sync_count=acc["after_n"], short_launch_host_ns=acc["short_lh_ns"],
                          short_gap_count=acc["short_n"], idle_by_class=acc["by_class"], busy_in_spans_ns=acc["in_spans"],
                          idle_in_pageable_copies_ns=acc["pageable_ns"], idle_in_calls=idle_in_calls,
                          idle_in_any_call_ns=acc.get("in_calls"))
